"""What a statement returns: columns and rows, and for DML the number of affected rows.

A query's result is streamed (:meth:`StatementResult.from_stream`): its rows come from a
``pyarrow.RecordBatchReader`` that Spark fills a partition at a time, so iterating
:meth:`~StatementResult.iter_rows` or :attr:`~StatementResult.batches` holds one batch in the
client, however many rows there are. Reading ``rows`` collects them all (what a Python caller
who asks for a list wants); the CLI never does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa


class StatementResult:
    def __init__(
        self,
        columns: list[str] | None = None,
        rows: list[list[Any]] | None = None,
        affected: int | None = None,
        statement: str = "",
        stream: pa.RecordBatchReader | None = None,
    ) -> None:
        self.columns = list(columns or [])
        self._rows = rows if rows is not None else []
        self.affected = affected
        self.statement = statement
        self._stream = stream

    @property
    def rows(self) -> list[list[Any]]:
        """Every row; a streamed result is read to its end first (it is collected)."""
        if self._stream is not None:
            self._rows.extend(self.iter_rows())
        return self._rows

    @rows.setter
    def rows(self, value: list[list[Any]]) -> None:
        self._rows, self._stream = value, None

    @property
    def is_streamed(self) -> bool:
        """True while rows are still to come from the stream."""
        return self._stream is not None

    @property
    def batches(self) -> Iterator[pa.RecordBatch]:
        """The rows not yet read, as Arrow batches (once: a stream is read as it goes)."""
        if self._stream is None:
            return iter([])
        stream, self._stream = self._stream, None
        return iter(stream)

    def iter_rows(self) -> Iterator[list[Any]]:
        """The rows, one batch at a time from a stream (each row once)."""
        if self._stream is None:
            yield from self._rows
            return
        for batch in self.batches:
            data = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
            yield from ([list(r) for r in zip(*data, strict=True)] if data else [])

    @staticmethod
    def from_arrow(table: pa.Table, statement: str = "") -> StatementResult:
        columns = table.column_names
        data = [table.column(i).to_pylist() for i in range(table.num_columns)]
        rows = [list(r) for r in zip(*data, strict=True)] if data else []
        return StatementResult(columns, rows, None, statement)

    @staticmethod
    def from_stream(reader: pa.RecordBatchReader, statement: str = "") -> StatementResult:
        return StatementResult(list(reader.schema.names), None, None, statement, reader)

    @staticmethod
    def message(text: str, statement: str = "") -> StatementResult:
        return StatementResult([], [], None, statement) if not text else StatementResult(["result"], [[text]], None,
                                                                                          statement)

    def to_json(self) -> str:
        return "".join(self.json_parts())

    def json_parts(self) -> Iterator[str]:
        """``to_json()``'s text in pieces, a row at a time: a streamed result is never held."""
        yield f'{{"columns": {json.dumps(self.columns, ensure_ascii=False)}, "rows": ['
        for i, row in enumerate(self.iter_rows()):
            yield (", " if i else "") + json.dumps([json_value(v) for v in row], ensure_ascii=False)
        yield "]"
        if self.affected is not None:
            yield f', "affected": {json.dumps(self.affected)}'
        yield "}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StatementResult):
            return NotImplemented
        return (self.columns, self.rows, self.affected, self.statement) == (other.columns, other.rows,
                                                                            other.affected, other.statement)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass it replaces

    def __repr__(self) -> str:
        rows = "<streamed>" if self._stream is not None else self._rows
        return (f"StatementResult(columns={self.columns!r}, rows={rows!r}, affected={self.affected!r}, "
                f"statement={self.statement!r})")


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
