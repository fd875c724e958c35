"""Rows from any reader in one canonical form: the Java oracle's JSON form, by Iceberg type.

Readers hand back the same values in different shapes: a uuid as 16 bytes, a ``uuid.UUID`` or a
string; a map as a list of pairs, a list of ``{key, value}`` structs (Polars has no map type) or
a dict. Each value is put into the oracle's form (``iceberg-oracle/README.md``) by the column's
Iceberg type, so that only a different *value* makes rows differ, never its shape.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pyarrow as pa

from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import (
    BinaryType,
    FixedType,
    IcebergType,
    ListType,
    MapType,
    StructType,
    UUIDType,
)
from tests.values import scalar_value


def canonical(value: Any, t: IcebergType) -> Any:
    if value is None:
        return None
    if isinstance(t, StructType):
        return {f.name: canonical(value.get(f.name), f.field_type) for f in t.fields}
    if isinstance(t, ListType):
        return [canonical(v, t.element_field.field_type) for v in value]
    if isinstance(t, MapType):
        pairs = value.items() if isinstance(value, dict) else value
        key_type, value_type = t.key_field.field_type, t.value_field.field_type
        return [[canonical(p["key"], key_type), canonical(p["value"], value_type)] if isinstance(p, dict)
                else [canonical(p[0], key_type), canonical(p[1], value_type)] for p in pairs]
    if isinstance(t, UUIDType):
        if isinstance(value, bytes | bytearray):
            return str(uuid.UUID(bytes=bytes(value)))
        return str(uuid.UUID(str(value)))
    if isinstance(t, FixedType | BinaryType) and isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    return scalar_value(value)


def sort_rows(rows: list[list[Any]]) -> list[list[Any]]:
    """Sorted as ``oracle read`` sorts its rows."""
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def canonical_rows(table: pa.Table, schema: Schema) -> list[list[Any]]:
    """A reader's rows, column by column in the schema's order, canonical and sorted."""
    types = [f.field_type for f in schema.fields]
    assert table.num_columns == len(types), (table.column_names, [f.name for f in schema.fields])
    columns = [[canonical(v, t) for v in table.column(i).to_pylist()] for i, t in enumerate(types)]
    return sort_rows([list(r) for r in zip(*columns, strict=True)] if columns else [])
