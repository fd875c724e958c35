"""Queries: a SELECT (WITH, VALUES, TABLE, FROM ...) runs in Spark SQL and its rows stream to
the client a partition at a time."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from tablestore.sql.parse import statements as st
from tablestore.sql.plan.planner import spark_errors
from tablestore.sql.result import StatementResult

if TYPE_CHECKING:
    from sqlglot.tokens import Token

    from tablestore.sql.context import SessionContext


def query_arrow(context: SessionContext, sql: str, tokens: Sequence[Token] = ()) -> pa.RecordBatchReader:
    """The rows of a query as a RecordBatchReader, fetched from Spark a partition at a time
    (``.read_all()`` collects them into one table); ``tokens`` as the statement parser lexed it."""
    from tablestore.spark.result_stream import result_stream

    df = context.planner().dataframe(sql, tokens)
    with spark_errors():
        reader = result_stream(df)

    def batches() -> Iterator[pa.RecordBatch]:
        with spark_errors():  # a runtime error surfaces while the rows are read
            yield from reader

    return pa.RecordBatchReader.from_batches(reader.schema, batches())


def query(context: SessionContext, s: st.Query) -> StatementResult:
    return StatementResult.from_stream(query_arrow(context, s.sql, s.query_tokens))
