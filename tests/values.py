"""Turn Arrow rows into the oracle's JSON form, so results from three readers compare exactly."""

from __future__ import annotations

import datetime
import decimal
import json
import math
import uuid
from typing import Any

import pyarrow as pa


def _value(v: Any, t: pa.DataType, uuid_columns: bool = False) -> Any:
    if v is None:
        return None
    if pa.types.is_struct(t):
        return {t.field(i).name: _value(v.get(t.field(i).name), t.field(i).type, uuid_columns) for i in range(t.num_fields)}
    if pa.types.is_map(t):
        return [[_value(k, t.key_type), _value(x, t.item_type)] for k, x in v]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_value(x, t.value_type) for x in v]
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, bytes | bytearray):
        if uuid_columns and len(v) == 16 and pa.types.is_fixed_size_binary(t):
            return str(uuid.UUID(bytes=bytes(v)))
        return bytes(v).hex()
    return scalar_value(v)


def scalar_value(v: Any) -> Any:
    """A decimal, date, time, timestamp or float in the oracle's JSON form (timestamps in UTC,
    NaN as "NaN"); other values as they are."""
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.UTC)
        return v.astimezone(datetime.UTC).isoformat()
    if isinstance(v, datetime.date | datetime.time):
        return v.isoformat()
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return v


def oracle_rows(table: pa.Table, uuid_columns: tuple[str, ...] = ()) -> list[list[Any]]:
    """Rows as the oracle prints them, sorted the way `oracle read` sorts."""
    columns = []
    for name in table.column_names:
        t = table.schema.field(name).type
        columns.append([_value(v, t, name in uuid_columns) for v in table.column(name).to_pylist()])
    rows = [list(r) for r in zip(*columns, strict=True)] if columns else []
    rows.sort(key=lambda r: json.dumps(r, sort_keys=True, default=str))
    return rows


def sorted_json_rows(rows: list[list[Any]]) -> list[list[Any]]:
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
