"""A query's rows are printed as they come from the stream, in every output format."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pyarrow as pa
import pytest

from tablestore.cli.output import ROWS_PER_TABLE, print_result
from tablestore.sql.result import StatementResult

BATCHES, BATCH_ROWS = 300, 10
SCHEMA = pa.schema([("n", pa.int64()), ("s", pa.string())])


class Stream:
    """A result whose batches are counted as they are pulled."""

    def __init__(self) -> None:
        self.pulled = 0

    def batches(self) -> Iterator[pa.RecordBatch]:
        for i in range(BATCHES):
            self.pulled += 1
            n = list(range(i * BATCH_ROWS, (i + 1) * BATCH_ROWS))
            yield pa.record_batch([pa.array(n), pa.array([f"v{x}" for x in n])], schema=SCHEMA)

    def result(self) -> StatementResult:
        return StatementResult.from_stream(pa.RecordBatchReader.from_batches(SCHEMA, self.batches()))


class Out(io.StringIO):
    """Notes how many batches had been pulled at each write."""

    def __init__(self, stream: Stream) -> None:
        super().__init__()
        self.stream = stream
        self.pulled_at: list[int] = []

    def write(self, s: str) -> int:
        self.pulled_at.append(self.stream.pulled)
        return super().write(s)


@pytest.mark.parametrize(("fmt", "first_write_within"), [("json", 1), ("csv", 1),
                                                          ("table", ROWS_PER_TABLE // BATCH_ROWS + 1)])
def test_rows_are_printed_before_the_stream_is_read_to_its_end(fmt: str, first_write_within: int) -> None:
    stream = Stream()
    out = Out(stream)
    print_result(stream.result(), fmt, out)
    assert stream.pulled == BATCHES
    assert min(out.pulled_at) <= first_write_within
    text = out.getvalue()
    total = BATCHES * BATCH_ROWS
    if fmt == "json":
        assert json.loads(text) == {"columns": ["n", "s"], "rows": [[i, f"v{i}"] for i in range(total)]}
    elif fmt == "csv":
        assert text.splitlines() == ["n,s", *(f"{i},v{i}" for i in range(total))]
    else:
        assert f"{total} row(s)" in text and "v2999" in text


def test_rows_of_a_streamed_result_are_collected_when_asked_for() -> None:
    result = Stream().result()
    assert result.is_streamed
    assert len(result.rows) == BATCHES * BATCH_ROWS and not result.is_streamed
    assert result.rows[-1] == [2999, "v2999"]
