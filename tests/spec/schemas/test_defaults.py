"""Default values and the v3 type rules as pure schema functions (spec "Default values",
"Schema Evolution" and Appendix D's JSON single values): no table, no I/O."""

from __future__ import annotations

import datetime
import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from tablestore.errors import SchemaError, SchemaEvolutionError, UnsupportedError
from tablestore.spec.metadata.schema_evolution import CastMode, SchemaEvolution, TypeChange, classify_type_change
from tablestore.spec.metadata.table_metadata import new_table_metadata
from tablestore.spec.partitioning.partition_spec import UNPARTITIONED_SPEC
from tablestore.spec.partitioning.sort_order import UNSORTED_ORDER
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.defaults import INITIAL, WRITE, default_json, default_value, promote_default
from tablestore.spec.schemas.schema import Schema, check_format_version_types, default_array
from tablestore.spec.schemas.types import (
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzType,
    UnknownType,
    UUIDType,
    type_from_json,
)


def _base() -> Schema:
    return Schema((
        NestedField(1, "id", LongType(), True),
        NestedField(2, "point", StructType(NestedField(3, "x", IntegerType())), False),
    ))


@pytest.mark.parametrize(
    ("field_type", "value", "json_form", "internal"),
    [
        (IntegerType(), 0, 0, 0),
        (StringType(), "x", "x", "x"),
        (DecimalType(9, 2), "1.5", "1.50", Decimal("1.50")),
        (DecimalType(9, 2), Decimal("-3.25"), "-3.25", Decimal("-3.25")),
        (DateType(), datetime.date(2024, 2, 29), "2024-02-29", 19782),
        (TimestampType(), "2024-01-02 03:04:05.5", "2024-01-02T03:04:05.500000", 1704164645500000),
        (TimestamptzType(), "2024-01-02T03:04:05+01:00", "2024-01-02T02:04:05+00:00", 1704161045000000),
        (TimestampNanoType(), "2024-01-02T03:04:05.000000001", "2024-01-02T03:04:05.000000001",
         1704164645000000001),
        (UUIDType(), "f79c3e09-677c-4bbd-a479-3f349cb785e7", "f79c3e09-677c-4bbd-a479-3f349cb785e7", None),
    ],
)
def test_a_default_is_stored_in_its_json_single_value_form_and_read_back(
    field_type: Any, value: Any, json_form: Any, internal: Any
) -> None:
    raw = default_json(field_type, value, "c")
    assert raw == json_form
    f = NestedField(9, "c", field_type, False, None, raw, raw)
    if internal is not None:
        assert default_value(f, INITIAL) == internal
    assert NestedField.from_json(f.to_json()) == f
    assert f.to_json()["initial-default"] == json_form and f.to_json()["write-default"] == json_form


def test_defaults_that_the_spec_forbids_are_refused_naming_the_column() -> None:
    with pytest.raises(SchemaError, match="column 'n': the default 'abc' is not a int value"):
        default_json(IntegerType(), "abc", "n")
    with pytest.raises(SchemaError, match="column 'u' has type unknown, which holds only NULL"):
        default_json(UnknownType(), 1, "u")
    with pytest.raises(SchemaError, match=r"the default of a struct is NULL or \{\}"):
        default_json(StructType(NestedField(3, "x", IntegerType())), {"x": 1}, "p")
    assert default_json(StructType(NestedField(3, "x", IntegerType())), {}, "p") == {}
    # Metadata from elsewhere is checked too when a commit adds it.
    v3 = Schema((NestedField(1, "u", UnknownType(), False, None, 1, None),))
    with pytest.raises(SchemaError, match="column 'u' has type unknown, whose defaults must be null"):
        check_format_version_types(v3, 3)
    with pytest.raises(SchemaError, match="column 'u' has type unknown, which holds only NULL, and is NOT NULL"):
        check_format_version_types(Schema((NestedField(1, "u", UnknownType(), True),)), 3)
    with pytest.raises(SchemaError, match=r"column 'n' \(id 1\) has an invalid initial-default 'zero': .*expected a JSON integer"):
        check_format_version_types(Schema((NestedField(1, "n", IntegerType(), False, None, "zero"),)), 3)


def test_defaults_need_format_version_3_in_table_metadata() -> None:
    with_default = Schema((NestedField(1, "n", IntegerType(), False, None, None, 5),))
    with pytest.raises(SchemaError, match=r"column 'n' has a default value, which needs table format version 3, "
                                          r"and this table is format version 2; upgrade it first"):
        new_table_metadata(with_default, UNPARTITIONED_SPEC, UNSORTED_ORDER, "/tmp/x", format_version=2)
    md = new_table_metadata(with_default, UNPARTITIONED_SPEC, UNSORTED_ORDER, "/tmp/x", format_version=3)
    assert md.schema().find_field("n").write_default == 5


def test_add_column_with_a_default_sets_both_defaults_and_not_null_needs_one() -> None:
    e = SchemaEvolution(_base(), 3, format_version=3)
    n = e.add_column("n", "int", required=True, default=0)
    s = e.add_column("s", "string", default="x")
    y = e.add_column("point.y", "bigint", default=7)
    schema = e.result()
    assert [(f.field_id, f.required, f.initial_default, f.write_default)
            for f in (schema.find_field(n), schema.find_field(s), schema.find_field(y))] == [
        (4, True, 0, 0), (5, False, "x", "x"), (6, False, 7, 7)]
    with pytest.raises(SchemaEvolutionError, match=r"cannot add column 'm' as NOT NULL without a default: .*"
                                                   r"ADD COLUMN m \.\.\. NOT NULL DEFAULT <value>"):
        e.add_column("m", "int", required=True)


def test_set_and_drop_default_change_the_write_default_only() -> None:
    e = SchemaEvolution(_base(), 3, format_version=3)
    e.add_column("n", "int", required=True, default=0)
    e.set_default("n", 5)
    assert (e.schema.find_field("n").initial_default, e.schema.find_field("n").write_default) == (0, 5)
    e.set_default("n", None)
    assert (e.schema.find_field("n").initial_default, e.schema.find_field("n").write_default) == (0, None)
    e.set_default("id", 42)  # a column created with the table gets a write-default, no initial one
    assert (e.schema.find_field("id").initial_default, e.schema.find_field("id").write_default) == (None, 42)


def test_on_format_version_2_not_null_and_defaults_are_refused_saying_v3_allows_them() -> None:
    e = SchemaEvolution(_base(), 3)
    with pytest.raises(SchemaEvolutionError) as refused:
        e.add_column("n", "int", required=True, default=0)
    message = str(refused.value)
    assert "cannot add column 'n' as NOT NULL: the rows already in the table have no value for it" in message
    assert "upgrade the table to format version 3 (ALTER TABLE ... SET TBLPROPERTIES ('format-version'='3'))" in message
    assert "ADD COLUMN n ... NOT NULL DEFAULT <value> without rewriting data" in message
    with pytest.raises(SchemaEvolutionError, match="cannot add column 's' with a default value: format version 2"):
        e.add_column("s", "string", default="x")
    with pytest.raises(SchemaEvolutionError, match="cannot set a default for column 'id': default values need "
                                                   "table format version 3"):
        e.set_default("id", 1)
    assert e.result() == _base()


def test_v3_promotes_date_to_timestamp_and_unknown_to_any_type_in_metadata() -> None:
    mode = CastMode.IMPLICIT
    assert classify_type_change("d", DateType(), TimestampNanoType(), mode, 3) is TypeChange.PROMOTION
    assert classify_type_change("d", DateType(), TimestampType(), mode, 3) is TypeChange.PROMOTION
    assert classify_type_change("d", DateType(), TimestampType(), mode, 2) is TypeChange.REWRITE
    # A date is no point in time: to timestamptz stays tablestore's conversion by rewrite.
    assert classify_type_change("d", DateType(), TimestamptzType(), mode, 3) is TypeChange.REWRITE
    assert classify_type_change("u", UnknownType(), StringType(), mode, 3) is TypeChange.PROMOTION
    with pytest.raises(SchemaEvolutionError, match="from unknown to string: unknown needs format version 3"):
        classify_type_change("u", UnknownType(), StringType(), mode, 2)


def test_a_promotion_keeps_the_meaning_of_the_defaults() -> None:
    assert promote_default("2024-01-02", DateType(), TimestampNanoType()) == "2024-01-02T00:00:00"
    assert promote_default("2024-01-02", DateType(), TimestampType()) == "2024-01-02T00:00:00"
    assert promote_default(5, IntegerType(), LongType()) == 5
    e = SchemaEvolution(Schema((NestedField(1, "id", LongType()),)), 1, format_version=3)
    e.add_column("d", "date", default="2024-01-02")
    e.update_column_type("d", "timestamp_ns")
    f = e.result().find_field("d")
    assert (f.field_type, f.initial_default, f.write_default) == (
        TimestampNanoType(), "2024-01-02T00:00:00", "2024-01-02T00:00:00")
    assert default_value(f) == 19724 * conversions.NANOS_PER_DAY
    e.add_column("n", "int", default=1)
    with pytest.raises(SchemaEvolutionError, match="cannot convert column 'n' from int to string: it has a default"):
        e.update_column_type("n", "string")


def test_timestamp_bounds_of_files_written_as_dates_read_as_midnight() -> None:
    """Spec: after date -> timestamp(_ns), 4-byte bounds are the files' dates."""
    days = struct.pack("<i", 19724)
    assert conversions.from_bytes(TimestampType(), days) == 19724 * conversions.MICROS_PER_DAY
    assert conversions.from_bytes(TimestampNanoType(), days) == 19724 * conversions.NANOS_PER_DAY
    assert conversions.from_bytes(TimestampType(), struct.pack("<q", 5)) == 5


def test_default_arrays_fill_a_column_and_a_struct_from_its_fields_defaults() -> None:
    n = NestedField(4, "n", IntegerType(), True, None, 0, 5)
    assert default_array(n, 2).to_pylist() == [0, 0]
    assert default_array(n, 2, WRITE).to_pylist() == [5, 5]
    point = NestedField(2, "p", StructType(NestedField(3, "x", IntegerType(), False, None, 1, 1),
                                           NestedField(5, "y", StringType())), False, None, {}, None)
    assert default_array(point, 1).to_pylist() == [{"x": 1, "y": None}]
    assert default_array(point, 1, WRITE).to_pylist() == [None]
    assert default_array(NestedField(6, "u", UnknownType()), 3).type == pa.null()


def test_v3_types_tablestore_cannot_read_fail_naming_the_type() -> None:
    for name in ("variant", "geometry(srid:4326)", "geography"):
        with pytest.raises(UnsupportedError, match=rf"column type {name.split('(')[0]}.* \(format v3\) is not "
                                                   "supported by tablestore"):
            type_from_json(name)
