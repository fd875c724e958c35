"""What a statement returns: columns and rows, and for DML the number of affected rows."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa


@dataclass
class StatementResult:
    columns: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    affected: int | None = None
    statement: str = ""

    @staticmethod
    def from_arrow(table: pa.Table, statement: str = "") -> StatementResult:
        columns = table.column_names
        data = [table.column(i).to_pylist() for i in range(table.num_columns)]
        rows = [list(r) for r in zip(*data, strict=True)] if data else []
        return StatementResult(columns, rows, None, statement)

    @staticmethod
    def message(text: str, statement: str = "") -> StatementResult:
        return StatementResult([], [], None, statement) if not text else StatementResult(["result"], [[text]], None,
                                                                                          statement)

    def to_json(self) -> str:
        out: dict[str, Any] = {"columns": self.columns, "rows": [[json_value(v) for v in r] for r in self.rows]}
        if self.affected is not None:
            out["affected"] = self.affected
        return json.dumps(out, ensure_ascii=False)


def json_value(value: Any) -> Any:
    import datetime
    import decimal
    import uuid

    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    return str(value)
