"""A SQL session: the current catalog and database, and the execution of statements.

    session = SqlSession(load_config("tablestore.yaml"))
    for result in session.execute("USE lakehouse.shop; SELECT count(*) FROM events"):
        print(result.columns, result.rows)

Catalog and DDL statements run as catalog calls; queries run in Spark SQL (started on first
use); INSERT runs its query in Spark and commits through the table API. A failed statement
raises a TableStoreError and commits nothing; the statements before it stay committed.

Each statement runs in its handler, found by the statement's type in ``run/registry.py``; handlers
see the session through its :class:`~tablestore.sql.context.SessionContext`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tablestore.catalog_manager import CatalogManager
from tablestore.config import LakehouseConfig, load_config
from tablestore.sql.context import SessionContext
from tablestore.sql.options import SessionOptions
from tablestore.sql.parse import statements as st
from tablestore.sql.parse.parser import parse_script, parse_statement
from tablestore.sql.result import StatementResult
from tablestore.sql.run.queries import query_arrow
from tablestore.sql.run.registry import HANDLERS

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from tablestore.sql.plan.planner import QueryPlanner


class SqlSession:
    def __init__(
        self,
        config: LakehouseConfig | None = None,
        manager: CatalogManager | None = None,
        spark: SparkSession | None = None,
    ) -> None:
        config = config or load_config()
        self.context = SessionContext(config, manager or CatalogManager(config), spark)

    @property
    def config(self) -> LakehouseConfig:
        return self.context.config

    @property
    def manager(self) -> CatalogManager:
        return self.context.manager

    @property
    def spark(self) -> SparkSession:
        """The session's Spark, started on first use."""
        return self.context.spark

    @property
    def session_options(self) -> SessionOptions:
        """Options set with ``SET k=v`` in this session (such as the insert overwrite mode)."""
        return self.context.options

    @property
    def runtime_mode(self) -> str:
        """``batch``, or ``streaming`` in a session that a streaming job runs: row-level DML
        (DELETE, UPDATE, MERGE) is refused in streaming mode."""
        return self.context.options.runtime_mode

    @runtime_mode.setter
    def runtime_mode(self, mode: str) -> None:
        self.context.options.runtime_mode = mode

    def planner(self) -> QueryPlanner:
        return self.context.planner()

    # -- execution -------------------------------------------------------------------------
    def execute(self, script: str) -> list[StatementResult]:
        """Run every statement of a script in order; stops at the first error (raised).

        A query's rows are read before the next statement runs (that statement may change what
        the query reads); the last statement's result is returned unread, as a stream.
        """
        results: list[StatementResult] = []
        for statement in parse_script(script):
            if results and results[-1].is_streamed:
                _ = results[-1].rows
            results.append(self.execute_statement(statement))
        return results

    def execute_one(self, sql: str) -> StatementResult:
        return self.execute_statement(parse_statement(sql))

    def execute_statement(self, statement: st.Statement) -> StatementResult:
        result = HANDLERS.run(self.context, statement)
        result.statement = statement.sql
        return result

    # -- queries ----------------------------------------------------------------------------
    def query_arrow(self, sql: str) -> pa.RecordBatchReader:
        """The rows of a query as a RecordBatchReader, fetched from Spark a partition at a time
        (``.read_all()`` collects them into one table)."""
        return query_arrow(self.context, sql)
