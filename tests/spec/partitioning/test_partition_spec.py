"""Partition specs: building from Spark/Iceberg/Trino spellings, JSON, types and paths."""

from __future__ import annotations

import json

import pytest
from pyiceberg.partitioning import PartitionSpec as PyIcebergSpec

from tablestore.errors import UnsupportedError, ValidationError
from tablestore.spec.partitioning.partition_spec import (
    UNPARTITIONED_SPEC,
    PartitionField,
    PartitionSpec,
    build_partition_spec,
    parse_term,
)
from tablestore.spec.partitioning.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    UnknownTransform,
    VoidTransform,
    YearTransform,
)
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    UnknownType,
)

SCHEMA = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "ts", TimestamptzType()),
        NestedField(3, "country", StringType()),
        NestedField(4, "s", StringType()),
        NestedField(
            5, "addr", StructType(NestedField(6, "city", StringType()), NestedField(7, "zip", IntegerType()))
        ),
        NestedField(8, "tags", ListType(9, StringType())),
        NestedField(10, "props", MapType(11, StringType(), 12, StringType())),
        NestedField(13, "price", DoubleType()),
        NestedField(14, "amount", DecimalType(9, 2)),
        NestedField(15, "d", DateType()),
        NestedField(16, "local_ts", TimestampType()),
        NestedField(17, "payload", BinaryType()),
        NestedField(18, "my col", StringType()),
    ),
    schema_id=0,
)


def _single(expr: str) -> PartitionField:
    spec = build_partition_spec(SCHEMA, [expr])
    assert len(spec.fields) == 1
    return spec.fields[0]


@pytest.mark.parametrize(
    ("expr", "source_id", "transform", "name"),
    [
        ("country", 3, IdentityTransform(), "country"),
        ("identity(country)", 3, IdentityTransform(), "country"),
        ("year(ts)", 2, YearTransform(), "ts_year"),
        ("years(ts)", 2, YearTransform(), "ts_year"),
        ("month(ts)", 2, MonthTransform(), "ts_month"),
        ("months(d)", 15, MonthTransform(), "d_month"),
        ("day(ts)", 2, DayTransform(), "ts_day"),
        ("days(local_ts)", 16, DayTransform(), "local_ts_day"),
        ("hour(ts)", 2, HourTransform(), "ts_hour"),
        ("HOURS(ts)", 2, HourTransform(), "ts_hour"),
        ("bucket(16, id)", 1, BucketTransform(16), "id_bucket"),
        ("bucket(id, 16)", 1, BucketTransform(16), "id_bucket"),
        ("bucket[16](id)", 1, BucketTransform(16), "id_bucket"),
        ("truncate(4, s)", 4, TruncateTransform(4), "s_trunc"),
        ("truncate(s, 4)", 4, TruncateTransform(4), "s_trunc"),
        ("truncate[10](amount)", 14, TruncateTransform(10), "amount_trunc"),
        ("void(price)", 13, VoidTransform(), "price_null"),
        ("addr.city", 6, IdentityTransform(), "addr.city"),
        ("`addr`.`zip`", 7, IdentityTransform(), "addr.zip"),
        ("bucket(8, addr.zip)", 7, BucketTransform(8), "addr.zip_bucket"),
        ("`my col`", 18, IdentityTransform(), "my col"),
        ('"my col"', 18, IdentityTransform(), "my col"),
        ("Country", 3, IdentityTransform(), "country"),  # case-insensitive fallback, schema spelling
        ("day(ts) AS event_day", 2, DayTransform(), "event_day"),
        ("bucket(4, id) as shard", 1, BucketTransform(4), "shard"),
    ],
)
def test_spellings(expr: str, source_id: int, transform: object, name: str) -> None:
    f = _single(expr)
    assert (f.source_id, f.transform, f.name, f.field_id) == (source_id, transform, name, 1000)


def test_field_ids_and_comma_separated_string() -> None:
    spec = build_partition_spec(SCHEMA, "days(ts), bucket(16, id), truncate(s, 4)", spec_id=3,
                                last_partition_id=1004)
    assert spec.spec_id == 3
    assert [f.field_id for f in spec.fields] == [1005, 1006, 1007]
    assert [f.name for f in spec.fields] == ["ts_day", "id_bucket", "s_trunc"]
    assert spec.last_assigned_field_id == 1007
    assert build_partition_spec(SCHEMA, []) == UNPARTITIONED_SPEC
    assert build_partition_spec(SCHEMA, None).is_unpartitioned()


@pytest.mark.parametrize(
    ("exprs", "message"),
    [
        (["day(nope)"], "unknown column 'nope' in partition expression 'day(nope)'; the columns are: id, ts, "
                        "country, s, addr.city, addr.zip, price, amount, d, local_ts, payload, my col"),
        (["hour(d)"], "cannot apply hour to column 'd' of type date in 'hour(d)': hour applies to timestamp, "
                      "timestamptz, timestamp_ns and timestamptz_ns columns"),
        (["bucket(16, price)"], "cannot apply bucket to column 'price' of type double"),
        (["truncate(4, ts)"], "truncate applies to int, long, decimal, string and binary columns"),
        (["day(country)"], "day applies to date, timestamp, timestamptz, timestamp_ns and timestamptz_ns"),
        (["bucket(0, id)"], "number of buckets in 'bucket(0, id)' must be between 1 and 2147483647, got 0"),
        (["truncate(-2, s)"], "the width in 'truncate(-2, s)' must be between 1 and 2147483647, got -2"),
        (["bucket(16.5, id)"], "expected a whole number in 'bucket(16.5, id)', got 16.5"),
        (["bucket(99999999999, id)"], "must be between 1 and 2147483647"),
        (["bucket(id)"], "bucket needs one number and one column, like bucket(16, id)"),
        (["bucket(1, 2, id)"], "bucket needs one number and one column"),
        (["day(ts, d)"], "day takes exactly one column"),
        (["day(3, ts)"], "day takes no number"),
        (["weeks(ts)"], "unknown transform 'weeks' in 'weeks(ts)'"),
        (["day(ts"], "expected ')' in 'day(ts' but it ends there"),
        (["tags"], "column 'tags' in partition expression 'tags' is a list<string>"),
        (["tags.element"], "is inside a list or map"),
        (["props.key"], "is inside a list or map"),
        (["addr"], "is a struct<city: string, zip: int>; use one of its fields, like addr.city"),
        (["country", "identity(country)"], "partition field name 'country' is used twice, by 'country' and "
                                           "'identity(country)'"),
        (["day(ts) AS x", "bucket(2, id) AS x"], "partition field name 'x' is used twice"),
        (["day(ts)", "hours(ts)"], "'hours(ts)' is redundant with 'day(ts)': both partition 'ts' by time"),
        (["bucket(4, id)", "bucket(4, id) AS b2"], "redundant with 'bucket(4, id)'"),
        (["day(ts) AS country"], "partition field name 'country' of 'day(ts) AS country' is also a column"),
        (["country AS s"], "partition field name 's' of 'country AS s' is also a column"),
        (["day(ts) DESC"], "unexpected 'DESC' after the partition expression"),
        ([""], None),  # blank entries are skipped
    ],
)
def test_errors(exprs: list[str], message: str | None) -> None:
    if message is None:
        assert build_partition_spec(SCHEMA, exprs).is_unpartitioned()
        return
    with pytest.raises(ValidationError) as info:
        build_partition_spec(SCHEMA, exprs)
    assert message in str(info.value)


def test_distinct_bucket_counts_are_not_redundant() -> None:
    spec = build_partition_spec(SCHEMA, ["bucket(4, id)", "bucket(8, id) AS id_bucket_8"])
    assert [str(f.transform) for f in spec.fields] == ["bucket[4]", "bucket[8]"]


def test_json_round_trip_and_pyiceberg_reads_it() -> None:
    spec = build_partition_spec(SCHEMA, ["day(ts)", "bucket(16, id)", "truncate(4, s)", "country"], spec_id=2)
    obj = spec.to_json()
    assert obj == {
        "spec-id": 2,
        "fields": [
            {"source-id": 2, "field-id": 1000, "name": "ts_day", "transform": "day"},
            {"source-id": 1, "field-id": 1001, "name": "id_bucket", "transform": "bucket[16]"},
            {"source-id": 4, "field-id": 1002, "name": "s_trunc", "transform": "truncate[4]"},
            {"source-id": 3, "field-id": 1003, "name": "country", "transform": "identity"},
        ],
    }
    assert PartitionSpec.from_json(json.loads(json.dumps(obj))) == spec
    theirs = PyIcebergSpec.model_validate_json(json.dumps(obj))
    assert [(f.source_id, f.field_id, f.name, str(f.transform)) for f in theirs.fields] == [
        (f.source_id, f.field_id, f.name, str(f.transform)) for f in spec.fields
    ]
    assert PartitionSpec.from_json(json.loads(theirs.model_dump_json())) == spec


def test_from_json_v1_list_unknown_and_multi_argument_transforms() -> None:
    v1 = PartitionSpec.from_json([{"source-id": 2, "name": "ts_day", "transform": "day"},
                                  {"source-id": 1, "name": "id_bucket", "transform": "bucket[4]"}])
    assert [f.field_id for f in v1.fields] == [1000, 1001]
    odd = PartitionSpec.from_json({"spec-id": 1, "fields": [
        {"source-ids": [2], "field-id": 1000, "name": "z", "transform": "zorder"}]})
    assert odd.fields[0].transform == UnknownTransform("zorder") and odd.fields[0].source_id == 2
    assert odd.partition_type(SCHEMA).fields[0].field_type == StringType()
    with pytest.raises(UnsupportedError, match="multi-argument"):
        PartitionSpec.from_json({"spec-id": 1, "fields": [
            {"source-ids": [1, 2], "field-id": 1000, "name": "z", "transform": "zorder"}]})


def test_partition_type() -> None:
    spec = build_partition_spec(SCHEMA, ["day(ts)", "hour(local_ts) AS h", "bucket(16, id)", "truncate(4, s)",
                                         "country", "void(price)", "amount"])
    t = spec.partition_type(SCHEMA)
    assert [(f.field_id, f.name, f.field_type, f.required) for f in t.fields] == [
        (1000, "ts_day", DateType(), False),
        (1001, "h", IntegerType(), False),
        (1002, "id_bucket", IntegerType(), False),
        (1003, "s_trunc", StringType(), False),
        (1004, "country", StringType(), False),
        (1005, "price_null", DoubleType(), False),
        (1006, "amount", DecimalType(9, 2), False),
    ]
    # The source columns were dropped later: ...
    dropped = Schema((NestedField(99, "other", LongType()),), schema_id=1)
    fallback = [f.field_type for f in spec.partition_type(dropped).fields]
    assert fallback == [DateType(), IntegerType(), IntegerType(), UnknownType(), UnknownType(),
                        UnknownType(), UnknownType()]
    # ... with the old schema at hand, every type is known.
    assert spec.partition_type_for([SCHEMA, dropped]) == t
    known = {4: StringType(), 3: StringType(), 13: DoubleType(), 14: DecimalType(9, 2)}
    assert spec.partition_type(dropped, known) == t


def test_partition_path_escapes_as_java_urlencoder() -> None:
    spec = build_partition_spec(SCHEMA, ["day(ts)", "country", "hour(local_ts) AS `h/our`",
                                         "bucket(16, id)",
                                         "payload", "amount", "addr.city"])
    path = spec.partition_path((19724, "a b/c~d*e.f-g_h&ü", 5, 3, b"\x00\x01", None, None), SCHEMA)
    assert path == (
        "ts_day=2024-01-02/country=a+b%2Fc%7Ed*e.f-g_h%26%C3%BC/h%2Four=1970-01-01-05/id_bucket=3/"
        "payload=AAE%3D/amount=null/addr.city=null"
    )
    assert UNPARTITIONED_SPEC.partition_path((), SCHEMA) == ""
    with pytest.raises(ValidationError, match="has 7 values, got 1"):
        spec.partition_path((1,), SCHEMA)


def test_unpartitioned_and_helpers() -> None:
    assert UNPARTITIONED_SPEC.is_unpartitioned()
    assert UNPARTITIONED_SPEC.to_json() == {"spec-id": 0, "fields": []}
    assert UNPARTITIONED_SPEC.last_assigned_field_id == 999
    only_void = build_partition_spec(SCHEMA, ["void(id)"])
    assert only_void.is_unpartitioned() and not only_void.is_partitioned()
    spec = build_partition_spec(SCHEMA, ["day(ts)", "ts AS ts_id", "bucket(2, id)"])
    assert spec.identity_source_ids() == {2}
    assert [f.name for f in spec.fields_by_source_id(2)] == ["ts_day", "ts_id"]
    renamed = build_partition_spec(SCHEMA, ["day(ts) AS d1", "ts AS d2", "bucket(2, id) AS d3"])
    assert spec.compatible_with(renamed) and not spec.compatible_with(UNPARTITIONED_SPEC)
    spec.validate(SCHEMA)
    with pytest.raises(ValidationError, match="column id 2, which is not in the schema"):
        spec.validate(Schema((NestedField(1, "id", LongType()),)))
    with pytest.raises(ValidationError, match="cannot apply day to column 'ts' of type string"):
        spec.validate(Schema((NestedField(1, "id", LongType()), NestedField(2, "ts", StringType()))))


def test_parse_term() -> None:
    term = parse_term("bucket[16](`a b`.c) DESC NULLS LAST")
    assert (term.transform, term.column) == (BucketTransform(16), "a b.c")
    assert term.rest == ["DESC", "NULLS", "LAST"]
    assert parse_term("`we``ird`").column == "we`ird"
