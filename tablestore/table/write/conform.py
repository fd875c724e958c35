"""Make incoming Arrow data fit a table's schema before it is written.

Columns are matched by name (exactly, then ignoring case), reordered to the table's order,
missing optional columns become nulls, and types are converted only where no value can change
(widening integers, float to double, decimal precision, timestamp units). Anything else is a
SchemaError that names the column and says what to do.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tablestore.errors import SchemaError
from tablestore.option_values import flag
from tablestore.spec.schemas.defaults import WRITE
from tablestore.spec.schemas.schema import Schema, default_array, field_to_arrow, schema_to_arrow, type_to_arrow
from tablestore.spec.schemas.types import (
    DecimalType,
    DoubleType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    UUIDType,
)


def to_arrow_table(data: Any) -> pa.Table:
    """Accept a pyarrow Table, RecordBatch, RecordBatchReader or a pandas DataFrame."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(data, pd.DataFrame):
        return pa.Table.from_pandas(data, preserve_index=False)
    raise SchemaError(
        f"cannot write a {type(data).__name__}; pass a pyarrow Table, RecordBatch, "
        "RecordBatchReader or a pandas DataFrame"
    )


# pyiceberg's name for the same choice, so one setting serves both libraries.
DOWNCAST_NS_PROPERTY = "downcast-ns-timestamp-to-us-on-write"


def downcast_ns_requested(properties: dict[str, str]) -> bool:
    """Whether writes may truncate nanosecond timestamps to the table's microseconds."""
    return flag(properties, DOWNCAST_NS_PROPERTY, kind="table property")


def conform_to_schema(data: pa.Table, schema: Schema, downcast_ns: bool = False) -> pa.Table:
    """The data as an Arrow table with exactly the schema's columns, types and field ids.

    Nanosecond timestamps go into microsecond columns when no value loses precision; with
    ``downcast_ns`` (the table property ``downcast-ns-timestamp-to-us-on-write``) they are
    truncated to microseconds, as pyiceberg does with the same setting.
    """
    by_name: dict[str, int] = {}
    lowered: dict[str, list[int]] = {}
    for i, name in enumerate(data.column_names):
        if name in by_name:
            raise SchemaError(f"the data has the column {name!r} twice")
        by_name[name] = i
        lowered.setdefault(name.lower(), []).append(i)
    used: set[int] = set()
    arrays: list[pa.ChunkedArray] = []
    for f in schema.fields:
        index = by_name.get(f.name)
        if index is None:
            candidates = lowered.get(f.name.lower(), [])
            index = candidates[0] if len(candidates) == 1 else None
        if index is None:
            # A column the data leaves out gets its write-default (format v3), else NULL.
            if f.required and f.write_default is None:
                raise SchemaError(
                    f"the data has no column {f.name!r}, which the table requires and which has no default; add it"
                )
            arrays.append(pa.chunked_array([default_array(f, data.num_rows, WRITE)]))
            continue
        used.add(index)
        arrays.append(_conform_column(data.column(index), f, f.name, downcast_ns))
    extra = [name for i, name in enumerate(data.column_names) if i not in used]
    if extra:
        raise SchemaError(
            f"the data has columns the table does not: {', '.join(map(repr, extra))}; "
            f"the table's columns are {', '.join(schema.column_names)}. Drop them, or add them to "
            "the table first (ALTER TABLE ... ADD COLUMN)"
        )
    return pa.Table.from_arrays(arrays, schema=schema_to_arrow(schema))


def _conform_column(column: pa.ChunkedArray, f: NestedField, path: str, downcast_ns: bool) -> pa.ChunkedArray:
    target = type_to_arrow(f.field_type)
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if not _same_type(column.type, target):
        column = pa.chunked_array(
            [_conform_array(chunk, f.field_type, target, path, downcast_ns) for chunk in column.chunks], type=target
        )
    if f.required and column.null_count:
        raise SchemaError(
            f"column {path!r} is required but the data has {column.null_count} null value(s)"
        )
    return column


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    return a.equals(b, check_metadata=False) and _names_match(a, b)


def _names_match(a: pa.DataType, b: pa.DataType) -> bool:
    if pa.types.is_struct(a):
        return [a.field(i).name for i in range(a.num_fields)] == [b.field(i).name for i in range(b.num_fields)]
    return True


def _conform_array(array: pa.Array, t: IcebergType, target: pa.DataType, path: str,
                   downcast_ns: bool = False) -> pa.Array:
    source = array.type
    if pa.types.is_dictionary(source):
        array = array.cast(source.value_type)
        source = array.type
    if isinstance(t, StructType):
        if not pa.types.is_struct(source):
            raise _mismatch(path, source, t)
        children = []
        names = {source.field(i).name: i for i in range(source.num_fields)}
        for child in t.fields:
            idx = names.get(child.name)
            if idx is None:
                if child.required and child.write_default is None:
                    raise SchemaError(f"the data has no field {path}.{child.name}, which the table requires "
                                      "and which has no default")
                children.append(default_array(child, len(array), WRITE))
                continue
            inner = array.field(idx)
            children.append(
                _conform_array(inner, child.field_type, type_to_arrow(child.field_type), f"{path}.{child.name}",
                               downcast_ns)
            )
        extra = set(names) - {c.name for c in t.fields}
        if extra:
            listed = ", ".join(f"{path}.{n}" for n in sorted(extra))
            raise SchemaError(f"the data has fields the table does not: {listed}")
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(
            children, fields=[field_to_arrow(c) for c in t.fields], mask=mask
        )
    if isinstance(t, ListType):
        if not (pa.types.is_list(source) or pa.types.is_large_list(source) or pa.types.is_fixed_size_list(source)):
            raise _mismatch(path, source, t)
        try:
            return array.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise _mismatch(path, source, t, str(e)) from None
    if isinstance(t, MapType):
        if not pa.types.is_map(source):
            raise _mismatch(path, source, t)
        try:
            return array.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise _mismatch(path, source, t, str(e)) from None
    if not _castable(source, target, t):
        raise _mismatch(path, source, t)
    nanos_to_micros = pa.types.is_timestamp(source) and source.unit == "ns" and target.unit == "us" \
        if pa.types.is_timestamp(target) else False
    if nanos_to_micros and downcast_ns:
        return pc.cast(array, target, safe=False)
    try:
        return pc.cast(array, target, safe=True)
    except pa.ArrowInvalid as e:
        if nanos_to_micros:
            raise SchemaError(
                f"column {path!r} holds nanosecond timestamps and the table stores {t} in "
                "microseconds (nanosecond types need table format version 3); truncate the values "
                "to microseconds first, or set the table property "
                f"{DOWNCAST_NS_PROPERTY}=true to have writes truncate them"
            ) from None
        raise _mismatch(path, source, t, str(e)) from None


def _castable(source: pa.DataType, target: pa.DataType, t: IcebergType) -> bool:
    """Conversions that cannot change a value (checked again by a safe cast)."""
    if source.equals(target):
        return True
    if pa.types.is_null(source):
        return True
    if isinstance(t, IntegerType | LongType):
        return pa.types.is_integer(source)
    if isinstance(t, DoubleType):
        return pa.types.is_floating(source)
    if isinstance(t, DecimalType):
        return pa.types.is_decimal(source) and source.scale == t.scale and source.precision <= t.precision
    if isinstance(t, TimestampType | TimestampNanoType):
        return pa.types.is_timestamp(source) and source.tz is None
    if isinstance(t, TimestamptzType | TimestamptzNanoType):
        return pa.types.is_timestamp(source) and source.tz is not None
    if isinstance(t, UUIDType):  # Arrow's uuid extension type holds the same 16 bytes
        return isinstance(source, pa.UuidType)
    if pa.types.is_string(target):
        return pa.types.is_large_string(source) or pa.types.is_string_view(source)
    if pa.types.is_binary(target):
        return pa.types.is_large_binary(source) or pa.types.is_binary_view(source)
    if pa.types.is_date32(target):
        return pa.types.is_date64(source)
    if pa.types.is_float32(target):
        return pa.types.is_float16(source)
    if pa.types.is_time64(target):
        return pa.types.is_time(source)
    return False


def _mismatch(path: str, source: pa.DataType, t: IcebergType, detail: str = "") -> SchemaError:
    extra = f" ({detail})" if detail else ""
    return SchemaError(
        f"column {path!r} has type {source} in the data but {t} in the table{extra}; "
        "cast the data to the table's type first"
    )
