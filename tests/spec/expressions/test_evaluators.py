"""Evaluators: Arrow filtering, column metrics, partition projection, manifest summaries, residuals."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tablestore.spec.expressions.arrow_filter import to_arrow_expression
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.bound_predicates import referenced_field_ids
from tablestore.spec.expressions.evaluators import (
    InclusiveMetricsEvaluator,
    ManifestEvaluator,
    PartitionEvaluator,
    ResidualEvaluator,
)
from tablestore.spec.expressions.expression_parser import parse_filter
from tablestore.spec.expressions.expression_tree import (
    AlwaysFalse,
    AlwaysTrue,
    BooleanExpression,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
    NotEqualTo,
)
from tablestore.spec.partitioning.partition_spec import PartitionSpec, build_partition_spec
from tablestore.spec.schemas.conversions import from_python, to_bytes
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import (
    DateType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)
from tests.spec.expressions.evaluator_fixtures import NAN, SCHEMA, File, Manifest, stats_file, summary

UTC = dt.UTC
U1 = uuid.UUID("00000000-0000-0000-0000-000000000001")
U2 = uuid.UUID("ffffffff-0000-0000-0000-000000000002")
ROWS: list[dict[str, Any]] = [
    {"id": 1, "i": 1, "f": 1.5, "g": 0.5, "s": "apple", "d": dt.date(2024, 1, 1),
     "ts": dt.datetime(2024, 1, 1, 10, tzinfo=UTC), "dec": Decimal("1.50"), "st": {"a": 1, "b": "x"},
     "u": U1.bytes, "flag": True, "t": dt.time(10, 0), "lt": dt.datetime(2024, 1, 1, 10)},
    {"id": 2, "i": None, "f": NAN, "g": NAN, "s": "banana", "d": dt.date(1969, 12, 31),
     "ts": dt.datetime(1969, 12, 31, 23, tzinfo=UTC), "dec": Decimal("-2.25"), "st": None,
     "u": U2.bytes, "flag": False, "t": dt.time(23, 59), "lt": dt.datetime(1969, 12, 31, 23)},
    {"id": 3, "i": 3, "f": None, "g": None, "s": None, "d": None, "ts": None, "dec": None,
     "st": {"a": None, "b": None}, "u": None, "flag": None, "t": None, "lt": None},
    {"id": 4, "i": -4, "f": -0.0, "g": 0.1, "s": "apricot", "d": dt.date(2024, 3, 1),
     "ts": dt.datetime(2024, 3, 1, tzinfo=UTC), "dec": Decimal("0.00"), "st": {"a": 4, "b": "y"},
     "u": U1.bytes, "flag": True, "t": dt.time(0, 0), "lt": dt.datetime(2024, 3, 1)},
]


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return pa.Table.from_pylist(ROWS, schema=SCHEMA.as_arrow())


def ids(table: pa.Table, sql: str, schema: Schema = SCHEMA) -> list[int]:
    expr = to_arrow_expression(bind(SCHEMA, parse_filter(sql)), schema)
    return sorted(table.filter(expr).column("id").to_pylist())


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("i = 1", [1]),
        ("i != 1", [3, 4]),  # null is not different from 1, it is unknown
        ("NOT (i = 1)", [3, 4]),
        ("i IS NULL", [2]),
        ("NOT (i IS NULL)", [1, 3, 4]),
        ("i IN (1, 3)", [1, 3]),
        ("i NOT IN (1, 3)", [4]),
        ("NOT (i IN (1, 3))", [4]),
        ("i NOT IN (1, NULL)", []),
        ("i < 2.5", [1, 4]),
        ("i > 10000000000", []),
        ("i < 10000000000", [1, 3, 4]),
        ("i > 0 OR i IS NULL", [1, 2, 3]),
        ("NOT (i > 0 AND i < 2)", [3, 4]),
        ("f > 1", [1, 2]),  # NaN is above every number
        ("f < 1", [4]),
        ("f >= 1.5", [1, 2]),
        ("f <= 1.5", [1, 4]),
        ("f != 1.5", [2, 4]),
        ("f = 0", [4]),  # -0.0 equals 0
        ("f IN (1.5, 2)", [1]),
        ("f NOT IN (1.5, 2)", [2, 4]),
        ("isnan(f)", [2]),
        ("NOT isnan(f)", [1, 3, 4]),
        ("f = 'NaN'", [2]),
        ("f != 'NaN'", [1, 4]),
        ("NOT (f > 1)", [4]),
        ("g = 0.1", []),  # float32 0.1 is not the double 0.1
        ("g > 0.1", [1, 2, 4]),  # float32 0.1 is above the double 0.1
        ("g IN (0.5, 0.1)", [1]),
        ("g < 1", [1, 4]),
        ("s = 'apple'", [1]),
        ("s LIKE 'ap%'", [1, 4]),
        ("s NOT LIKE 'ap%'", [2]),
        ("NOT (s LIKE 'ap%')", [2]),
        ("s > 'b'", [2]),
        ("d = '2024-01-01'", [1]),
        ("d < DATE '1970-01-01'", [2]),
        ("d BETWEEN '2024-01-01' AND '2024-03-01'", [1, 4]),
        ("ts >= TIMESTAMP '2024-01-01 10:00:00'", [1, 4]),
        ("ts < '1970-01-01'", [2]),
        ("lt = '2024-01-01 10:00:00'", [1]),
        ("lt > '2000-01-01'", [1, 4]),
        ("dec > 0", [1]),
        ("dec <= 0", [2, 4]),
        ("dec = 1.5", [1]),
        ("dec < 1.499", [2, 4]),
        ("dec IN (1.5, -2.25)", [1, 2]),
        ("st.a = 1", [1]),
        ("st.a IS NULL", [2, 3]),
        ("st.b != 'x'", [4]),
        ("u = '00000000-0000-0000-0000-000000000001'", [1, 4]),
        ("u IN ('00000000-0000-0000-0000-000000000001', 'ffffffff-0000-0000-0000-000000000002')", [1, 2, 4]),
        ("u > '00000000-0000-0000-0000-000000000001'", [2]),
        ("flag", [1, 4]),
        ("NOT flag", [2]),
        ("flag IS TRUE", [1, 4]),
        ("NOT (flag IS TRUE)", [2, 3]),
        ("t < '12:00'", [1, 4]),
        ("TRUE", [1, 2, 3, 4]),
        ("FALSE", []),
        ("id IS NULL", []),
        ("i = 2.5", []),
        ("i != 2.5", [1, 3, 4]),
    ],
)
def test_arrow_filter(table: pa.Table, sql: str, expected: list[int]) -> None:
    assert ids(table, sql) == expected


def test_arrow_filter_on_parquet(table: pa.Table, tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    dataset = ds.dataset(path)
    for sql, expected in [
        ("ts >= TIMESTAMP '2024-01-01 10:00:00' AND dec > 0", [1]),
        ("u = '00000000-0000-0000-0000-000000000001' AND NOT isnan(f)", [1, 4]),
        ("st.a IN (1, 4) OR s LIKE 'ban%'", [1, 2, 4]),
        ("d < '2000-01-01' OR g > 0.2", [1, 2]),
        ("t >= '10:00' AND lt IS NOT NULL", [1, 2]),
    ]:
        expr = to_arrow_expression(bind(SCHEMA, parse_filter(sql)), SCHEMA)
        assert sorted(dataset.to_table(filter=expr).column("id").to_pylist()) == expected, sql
        assert sorted(pq.read_table(path, filters=expr).column("id").to_pylist()) == expected, sql


def test_arrow_filter_uses_the_given_schema_names(table: pa.Table) -> None:
    # A data file written before a rename: same field ids, older names; column 2 missing.
    renamed = table.rename_columns(["key" if n == "id" else "old_s" if n == "s" else n for n in table.column_names])
    renamed = renamed.drop_columns(["i"])
    file_schema = Schema(tuple(
        NestedField(f.field_id, {"id": "key", "s": "old_s"}.get(f.name, f.name), f.field_type, f.required)
        for f in SCHEMA.fields if f.name != "i"
    ))
    bound = bind(SCHEMA, parse_filter("s LIKE 'ap%' AND id > 1"))
    assert renamed.filter(to_arrow_expression(bound, file_schema)).column("key").to_pylist() == [4]
    # The missing column reads as null: IS NULL holds, comparisons do not.
    assert renamed.filter(to_arrow_expression(bind(SCHEMA, parse_filter("i IS NULL")), file_schema)).num_rows == 4
    assert renamed.filter(to_arrow_expression(bind(SCHEMA, parse_filter("i = 1")), file_schema)).num_rows == 0
    assert renamed.filter(to_arrow_expression(bind(SCHEMA, parse_filter("i != 1")), file_schema)).num_rows == 0


@pytest.mark.parametrize("column_type", [FloatType(), DoubleType()])
def test_arrow_in_holds_signed_zeros_equal_as_eq_does(column_type: IcebergType) -> None:
    schema = Schema((NestedField(1, "id", LongType(), True), NestedField(2, "x", column_type)))
    rows = pa.table({"id": [0, 1, 2, 3], "x": pa.array([-0.0, 0.0, -1.5, None], schema.as_arrow().field("x").type)})

    def matching(sql: str) -> list[int]:
        return rows.filter(to_arrow_expression(bind(schema, parse_filter(sql)), schema)).column("id").to_pylist()

    assert matching("x = 0.0") == matching("x = -0.0") == [0, 1]
    assert matching("x IN (-1.5, 0.0)") == matching("x IN (-0.0, 7.0, -1.5)") == [0, 1, 2]
    assert matching("x NOT IN (0.0)") == [2]


def test_arrow_expression_of_constants() -> None:
    assert str(to_arrow_expression(AlwaysTrue(), SCHEMA)) == "true"
    assert str(to_arrow_expression(AlwaysFalse(), SCHEMA)) == "false"


def test_referenced_field_ids_reexported() -> None:
    assert referenced_field_ids(bind(SCHEMA, parse_filter("i = 1 OR st.b = 'x'"))) == {2, 11}


# -- metrics ---------------------------------------------------------------------------------


def metrics(sql: str, file: File) -> bool:
    return InclusiveMetricsEvaluator(SCHEMA, parse_filter(sql)).eval(file)


def test_metrics_ranges() -> None:
    file = stats_file({2: [1, 5, None], 8: [Decimal("1.00"), Decimal("2.50"), None]})
    assert metrics("i = 3", file)
    assert not metrics("i = 6", file)
    assert not metrics("i = 0", file)
    assert metrics("i < 2", file) and not metrics("i < 1", file)
    assert metrics("i <= 1", file) and not metrics("i <= 0", file)
    assert metrics("i > 4", file) and not metrics("i > 5", file)
    assert metrics("i >= 5", file) and not metrics("i >= 6", file)
    assert metrics("i IN (0, 3, 9)", file) and not metrics("i IN (0, 6, 9)", file)
    assert metrics("i != 1", file) and metrics("i NOT IN (1, 5)", file)
    assert metrics("i IS NULL", file) and metrics("i IS NOT NULL", file)
    assert metrics("dec > 2.49", file) and not metrics("dec > 2.5", file)
    assert not metrics("i > 5 OR dec < 1", file)
    assert metrics("i > 5 OR dec <= 1", file)
    assert not metrics("i = 3 AND dec > 3", file)
    assert not metrics("NOT (i <= 5)", file)


def test_metrics_nulls() -> None:
    only_nulls = stats_file({2: [None, None], 3: [None, None]})
    assert metrics("i IS NULL", only_nulls)
    for sql in ("i IS NOT NULL", "i = 1", "i != 1", "i NOT IN (1)", "i < 1", "f > 1", "isnan(f)", "f != 1"):
        assert not metrics(sql, only_nulls), sql
    assert metrics("NOT isnan(f)", only_nulls)
    no_nulls = stats_file({2: [1, 2]})
    assert not metrics("i IS NULL", no_nulls)
    assert metrics("i IS NOT NULL", no_nulls)


def test_metrics_nan() -> None:
    all_nan = stats_file({3: [NAN, NAN]})
    assert metrics("isnan(f)", all_nan) and not metrics("NOT isnan(f)", all_nan)
    assert not metrics("f < 1", all_nan) and not metrics("f = 1", all_nan) and not metrics("f IN (1, 2)", all_nan)
    # NaN is greater than and different from every number.
    assert metrics("f > 1", all_nan) and metrics("f >= 1", all_nan) and metrics("f != 1", all_nan)
    some_nan = stats_file({3: [1.0, NAN, 2.0]})
    assert metrics("f > 5", some_nan)
    assert not metrics("f < 1", some_nan)
    no_nan = stats_file({3: [1.0, 2.0]})
    assert not metrics("f > 5", no_nan) and not metrics("isnan(f)", no_nan)
    # Unknown NaN counts: a float column might hold NaN.
    unknown = stats_file({3: [1.0, 2.0]})
    unknown.nan_value_counts = None
    assert metrics("f > 5", unknown) and metrics("isnan(f)", unknown)
    # Old writers could put NaN into the bounds; they then prove nothing.
    bad = File(2, {3: 2}, {3: 0}, {3: 0}, {3: to_bytes(DoubleType(), NAN)}, {3: to_bytes(DoubleType(), NAN)})
    assert metrics("f < 0", bad) and metrics("f = 0", bad)


def test_metrics_strings_and_truncated_bounds() -> None:
    file = stats_file({5: ["abcdef", "abzzzz"]}, truncate=2)
    assert file.lower_bounds == {5: b"ab"} and file.upper_bounds == {5: b"ac"}
    assert metrics("s = 'abcdef'", file) and not metrics("s = 'ad'", file) and not metrics("s = 'aa'", file)
    assert metrics("s LIKE 'abc%'", file) and metrics("s LIKE 'a%'", file)
    assert not metrics("s LIKE 'ad%'", file) and not metrics("s LIKE 'aa%'", file)
    assert metrics("s NOT LIKE 'abc%'", file)
    same_prefix = stats_file({5: ["abc", "abd", None]})
    assert not metrics("s NOT LIKE 'ab%'", same_prefix)  # nulls do not match NOT LIKE either
    assert metrics("s NOT LIKE 'abc%'", same_prefix)


def test_metrics_without_stats_and_empty_files() -> None:
    assert metrics("i = 1", File(10, None, None, None, None, None))
    assert not metrics("i = 1", File(0))
    assert InclusiveMetricsEvaluator(SCHEMA, parse_filter("i = 1"), include_empty_files=True).eval(File(0))
    assert metrics("i = 1", File(-1))
    assert not metrics("FALSE", File(10)) and metrics("TRUE", File(10))


def test_metrics_nested_and_dates() -> None:
    file = stats_file({10: [1, 2, None], 6: [dt.date(2024, 1, 1), dt.date(2024, 1, 31), None]})
    assert metrics("st.a = 2", file) and not metrics("st.a = 3", file)
    assert metrics("d >= '2024-01-31'", file) and not metrics("d > '2024-01-31'", file)


def test_metrics_decode_promoted_types() -> None:
    # An int column promoted to long keeps 4-byte bounds in old files.
    schema = Schema((NestedField(1, "x", LongType()),))
    file = File(2, {1: 2}, {1: 0}, {}, {1: to_bytes(IntegerType(), 1)}, {1: to_bytes(IntegerType(), 5)})
    ev = InclusiveMetricsEvaluator(schema, parse_filter("x > 5"))
    assert not ev.eval(file)
    assert InclusiveMetricsEvaluator(schema, parse_filter("x = 3")).eval(file)


# -- partitions ------------------------------------------------------------------------------


def spec(*exprs: str) -> PartitionSpec:
    return build_partition_spec(SCHEMA, list(exprs))


def partition_of(s: PartitionSpec, row: dict[str, Any]) -> tuple[Any, ...]:
    out = []
    for pf in s.fields:
        source = SCHEMA.find_field(pf.source_id)
        name = SCHEMA.find_column_name(pf.source_id)
        assert name is not None
        value: Any = row
        for part in name.split("."):
            value = None if value is None else value.get(part)
        out.append(pf.transform.apply(from_python(source.field_type, value), source.field_type))
    return tuple(out)


def test_partition_projection_strings() -> None:
    s = spec("day(ts)", "bucket(16, i)", "truncate(3, s)", "dec")
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("ts < '2024-03-01' AND i = 7 AND s LIKE 'abcd%' AND dec > 1"))
    assert str(ev.expr) == (
        f"ts_day <= DATE '2024-02-29' AND i_bucket = {BucketOf(16).of(7)} AND s_trunc LIKE 'abc%' "
        "AND dec > 1.00"
    )
    # Bucket and truncate cannot express > or !=, so only the day bound remains.
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("ts > '2024-03-01' AND (i > 7 OR s != 'x')"))
    assert str(ev.expr) == "ts_day >= DATE '2024-03-01'"
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("ts > '2024-03-01' OR i > 7"))
    assert ev.expr == AlwaysTrue()
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("i IN (1, 2, 7)"))
    buckets = sorted({BucketOf(16).of(v) for v in (1, 2, 7)})
    assert str(ev.expr) == f"i_bucket IN ({', '.join(map(str, buckets))})"


def test_partition_evaluator_decisions() -> None:
    s = spec("day(ts)", "bucket(16, i)", "truncate(3, s)", "dec")
    day = dt.date(2024, 2, 29) - dt.date(1970, 1, 1)
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("ts < '2024-03-01'"))
    assert ev.eval((day.days, 0, "abc", Decimal("1.00")))
    assert not ev.eval((day.days + 1, 0, "abc", Decimal("1.00")))
    assert not ev.eval((None, 0, "abc", Decimal("1.00")))  # null ts never compares
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("ts IS NULL"))
    assert ev.eval((None, 0, "abc", None)) and not ev.eval((day.days, 0, "abc", None))
    bucket_7 = BucketOf(16).of(7)
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("i = 7"))
    assert ev.eval((0, bucket_7, "x", None)) and not ev.eval((0, (bucket_7 + 1) % 16, "x", None))
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("i != 7"))
    assert ev.eval((0, bucket_7, "x", None))
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("s LIKE 'ab%'"))
    assert ev.eval((0, 0, "abz", None)) and not ev.eval((0, 0, "acz", None))
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("s NOT LIKE 'abc%'"))
    assert not ev.eval((0, 0, "abc", None)) and ev.eval((0, 0, "abd", None))
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("dec = 1.5 OR d = '2024-01-01'"))
    assert ev.eval((0, 0, "a", Decimal("2.00")))  # d is not partitioned: anything may match
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("dec = 1.5"))
    assert ev.eval((0, 0, "a", Decimal("1.50"))) and not ev.eval((0, 0, "a", Decimal("2.00")))
    assert PartitionEvaluator(PartitionSpec(0, ()), SCHEMA, parse_filter("i = 1")).eval(())


class BucketOf:
    def __init__(self, n: int) -> None:
        from tablestore.spec.partitioning.transforms import BucketTransform

        self.transform = BucketTransform(n)

    def of(self, value: int) -> int:
        return int(self.transform.apply(value, IntegerType()))


def test_time_projection_before_1970_is_widened() -> None:
    # Java's fixInclusiveTimeProjection: pre-1970 partitions of old writers may be one higher.
    s = spec("day(ts)")
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("ts = '1969-12-31 10:00:00'"))
    assert ev.eval((-1,)) and ev.eval((0,)) and not ev.eval((1,)) and not ev.eval((-2,))
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("ts < '1969-12-31 00:00:00'"))
    assert ev.eval((-2,)) and ev.eval((-1,)) and not ev.eval((0,))


def test_multiple_fields_on_one_source_combine() -> None:
    s = build_partition_spec(SCHEMA, ["day(ts)", "bucket(4, ts)"])
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("ts = '2024-01-01 10:00:00'"))
    micros = from_python(TimestamptzType(), "2024-01-01 10:00:00")
    b = s.fields[1].transform.apply(micros, TimestamptzType())
    day = dt.date(2024, 1, 1) - dt.date(1970, 1, 1)
    assert ev.eval((day.days, b))
    assert not ev.eval((day.days, (b + 1) % 4))
    assert not ev.eval((day.days + 1, b))


def test_void_and_identity_and_truncate_numbers() -> None:
    s = spec("void(i)", "truncate(10, id)")
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("i = 5 AND id < 20"))
    assert str(ev.expr) == "id_trunc <= 10"
    assert ev.eval((None, 10)) and not ev.eval((None, 20))
    ev = PartitionEvaluator(s, SCHEMA, parse_filter("id > 19"))
    assert str(ev.expr) == "id_trunc >= 20"
    ident = PartitionEvaluator(spec("f"), SCHEMA, parse_filter("isnan(f)"))
    assert ident.eval((NAN,)) and not ident.eval((1.0,)) and not ident.eval((None,))


# -- manifests -------------------------------------------------------------------------------


def test_manifest_evaluator() -> None:
    s = spec("day(ts)", "s", "f")
    days = [19723, 19730]  # 2024-01-01 .. 2024-01-08
    manifest = Manifest([summary(DateType(), days), summary(StringType(), ["b", "d", None]),
                         summary(DoubleType(), [1.0, 2.0])])

    def m(sql: str) -> bool:
        return ManifestEvaluator(s, SCHEMA, parse_filter(sql)).eval(manifest)

    assert m("ts >= '2024-01-08'") and not m("ts >= '2024-01-09'")
    assert m("ts < '2024-01-01 00:00:01'") and not m("ts < '2024-01-01'")
    assert m("s = 'c'") and not m("s = 'e'") and not m("s = 'a'")
    assert m("s IN ('a', 'c')") and not m("s IN ('a', 'e')")
    assert m("s IS NULL") and m("s IS NOT NULL")
    assert m("s LIKE 'c%'") and not m("s LIKE 'e%'")
    assert not m("f > 2") and m("f >= 2") and not m("isnan(f)") and m("NOT isnan(f)")
    assert m("s != 'b'") and m("i = 1")  # i is not partitioned
    assert ManifestEvaluator(s, SCHEMA, parse_filter("s = 'e'")).eval(Manifest(None))
    nulls = Manifest([summary(DateType(), [None]), summary(StringType(), [None]), summary(DoubleType(), [NAN])])
    assert not ManifestEvaluator(s, SCHEMA, parse_filter("s IS NOT NULL")).eval(nulls)
    assert not ManifestEvaluator(s, SCHEMA, parse_filter("s != 'x'")).eval(nulls)
    assert ManifestEvaluator(s, SCHEMA, parse_filter("s IS NULL")).eval(nulls)
    assert ManifestEvaluator(s, SCHEMA, parse_filter("f > 1")).eval(nulls)  # NaN > 1
    assert not ManifestEvaluator(s, SCHEMA, parse_filter("f < 1")).eval(nulls)
    assert not ManifestEvaluator(s, SCHEMA, parse_filter("NOT isnan(f)")).eval(nulls)


# -- residuals -------------------------------------------------------------------------------


def test_residual_evaluator() -> None:
    s = spec("s", "day(ts)")
    ev = ResidualEvaluator(s, SCHEMA, parse_filter("s = 'a' AND i > 3"))
    assert str(ev.residual_for(("a", 0))) == "i > 3"
    assert ev.residual_for(("b", 0)) == AlwaysFalse()
    assert ev.residual_for((None, 0)) == AlwaysFalse()
    ev = ResidualEvaluator(s, SCHEMA, parse_filter("s = 'a' OR ts > '2024-01-01 10:00'"))
    assert ev.residual_for(("a", 0)) == AlwaysTrue()
    assert str(ev.residual_for(("b", 19723))) == "ts > TIMESTAMP '2024-01-01 10:00:00+00:00'"
    assert ev.residual_for(("b", 19722)) == AlwaysFalse()  # the day rules the timestamp out
    ev = ResidualEvaluator(s, SCHEMA, parse_filter("s IS NULL"))
    assert ev.residual_for((None, 1)) == AlwaysTrue()
    assert ev.residual_for(("x", 1)) == AlwaysFalse()


# -- cross-check with pyiceberg's inclusive projection -----------------------------------------


@pytest.mark.parametrize("transform", ["day", "month", "year", "hour", "bucket[4]", "truncate[7]", "identity"])
@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "=", "!=", "IN"])
def test_projection_matches_pyiceberg(transform: str, op: str) -> None:
    """Our partition pruning is never stricter than pyiceberg's, and as strict for values >= 0.

    For pre-1970 time partitions we deliberately accept one more partition (Java's
    fixInclusiveTimeProjection), which pyiceberg does not do.
    """
    from pyiceberg import expressions as pe
    from pyiceberg.expressions.visitors import expression_evaluator, inclusive_projection
    from pyiceberg.partitioning import PartitionField as PyField
    from pyiceberg.partitioning import PartitionSpec as PySpec
    from pyiceberg.schema import Schema as PySchema
    from pyiceberg.transforms import parse_transform
    from pyiceberg.typedef import Record
    from pyiceberg.types import LongType as PyLong
    from pyiceberg.types import NestedField as PyNested
    from pyiceberg.types import TimestampType as PyTimestamp

    is_time = transform in ("day", "month", "year", "hour")
    column = "ts" if is_time else "n"
    schema = Schema((NestedField(1, "ts", TimestampType()), NestedField(2, "n", LongType())))
    py_schema = PySchema(PyNested(1, "ts", PyTimestamp(), False), PyNested(2, "n", PyLong(), False))
    source_id = 1 if is_time else 2
    py_spec = PySpec(PyField(source_id, 1000, parse_transform(transform), "p"))
    term = {"bucket[4]": f"bucket(4, {column})", "truncate[7]": f"truncate(7, {column})"}.get(
        transform, f"{transform}({column})")
    ours = build_partition_spec(schema, [term])
    hour = 3_600_000_000
    literals = [-50 * hour - 1, -hour, -1, 0, 1, 7, 13 * hour + 5, 40 * 24 * hour, 400 * 24 * hour + 3]
    # Partition values around each literal's own partition.
    candidates = sorted({ours.fields[0].transform.apply(v + d, schema.find_type(source_id))
                         for v in literals for d in (-2 * hour, -1, 0, 1, 2 * hour)})
    pruned = 0
    for lit in literals:
        if op == "IN":
            ours_expr: BooleanExpression = In(column, [lit, lit + 5 * hour])
            py_in: Any = pe.In  # pyiceberg's typing of In does not match its runtime signature
            py_expr: Any = py_in(column, {lit, lit + 5 * hour})
        else:
            cls = {"<": (LessThan, pe.LessThan), "<=": (LessThanOrEqual, pe.LessThanOrEqual),
                   ">": (GreaterThan, pe.GreaterThan), ">=": (GreaterThanOrEqual, pe.GreaterThanOrEqual),
                   "=": (EqualTo, pe.EqualTo), "!=": (NotEqualTo, pe.NotEqualTo)}[op]
            ours_expr, py_expr = cls[0](column, lit), cls[1](column, lit)
        ev = PartitionEvaluator(ours, schema, ours_expr)
        projected = inclusive_projection(py_schema, py_spec)(py_expr)
        py_partition_schema = PySchema(*py_spec.partition_type(py_schema).fields)
        py_eval = expression_evaluator(py_partition_schema, projected, True)
        for value in candidates:
            theirs = py_eval(Record(value))
            mine = ev.eval((value,))
            pruned += not mine
            if theirs:
                assert mine, f"{ours_expr} pruned partition {value} that pyiceberg keeps"
            elif mine:
                assert is_time and value < 1, f"{ours_expr} keeps partition {value} that pyiceberg prunes"
    # != prunes only through identity; ranges cannot prune through a bucket.
    cannot_prune = (op == "!=" and transform != "identity") or (transform == "bucket[4]" and op not in ("=", "IN"))
    assert (pruned == 0) == cannot_prune
