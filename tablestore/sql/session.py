"""A SQL session: the current catalog and database, and the execution of statements.

    session = SqlSession(load_config("tablestore.yaml"))
    for result in session.execute("USE lakehouse.shop; SELECT count(*) FROM events"):
        print(result.columns, result.rows)

Catalog and DDL statements run as catalog calls; queries run in Spark SQL (started on first
use); INSERT runs its query in Spark and commits through the table API. A failed statement
raises a TableStoreError and commits nothing; the statements before it stay committed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tablestore.config import LakehouseConfig, load_config
from tablestore.errors import (
    AlreadyExistsError,
    NamespaceAlreadyExistsError,
    NoSuchNamespaceError,
    NoSuchTableError,
    NoSuchViewError,
    TableAlreadyExistsError,
    ValidationError,
)
from tablestore.session import CatalogManager
from tablestore.sql import statements as st
from tablestore.sql.ddl import describe_table, describe_view, show_create_table, table_schema_from_columns
from tablestore.sql.dml import commit_written_files, run_insert, typed_for_table, write_query
from tablestore.sql.external_statements import ExternalTableStatements
from tablestore.sql.parser import parse_script, parse_statement
from tablestore.sql.partition_statements import PartitionStatements
from tablestore.sql.procedure_statements import ProcedureStatements
from tablestore.sql.query import QueryPlanner, load_python_function, spark_errors
from tablestore.sql.result import StatementResult
from tablestore.sql.row_level_statements import RowLevelStatements
from tablestore.sql.schema_statements import SchemaStatements
from tablestore.table.update.snapshot import FastAppend

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tablestore.catalog import Catalog


def _like(pattern: str | None, name: str) -> bool:
    """Spark's SHOW ... LIKE: ``*`` matches anything and ``|`` separates alternatives."""
    if pattern is None:
        return True
    return any(fnmatch.fnmatchcase(name.lower(), p.strip().lower()) for p in pattern.split("|"))


class SqlSession(
    SchemaStatements, PartitionStatements, ExternalTableStatements, RowLevelStatements, ProcedureStatements
):
    def __init__(
        self,
        config: LakehouseConfig | None = None,
        manager: CatalogManager | None = None,
        spark: SparkSession | None = None,
    ) -> None:
        self.config = config or load_config()
        self.manager = manager or CatalogManager(self.config)
        self._spark = spark

    # -- Spark, started on first use -------------------------------------------------------
    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            # Imported here: pyspark loads (and a JVM starts) only when a statement needs Spark.
            from tablestore.engine.spark import spark_session

            self._spark = spark_session(self.config)
        return self._spark

    def planner(self) -> QueryPlanner:
        return QueryPlanner(self.spark, self.manager, self.config.to_json())

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
        handler = getattr(self, f"_{type(statement).__name__}", None)
        if handler is None:
            raise ValidationError(f"statement {type(statement).__name__} is not supported yet")
        result: StatementResult = handler(statement)
        result.statement = statement.sql
        return result

    # -- queries ----------------------------------------------------------------------------
    def query_arrow(self, sql: str) -> pa.RecordBatchReader:
        """The rows of a query as a RecordBatchReader, fetched from Spark a partition at a time
        (``.read_all()`` collects them into one table)."""
        from tablestore.engine.spark.result_stream import result_stream

        df = self.planner().dataframe(sql)
        with spark_errors():
            reader = result_stream(df)

        def batches() -> Iterator[pa.RecordBatch]:
            with spark_errors():  # a runtime error surfaces while the rows are read
                yield from reader

        return pa.RecordBatchReader.from_batches(reader.schema, batches())

    def _Query(self, s: st.Query) -> StatementResult:
        return StatementResult.from_stream(self.query_arrow(s.sql))

    def _Insert(self, s: st.Insert) -> StatementResult:
        catalog, identifier = self.manager.resolve_table(s.name)
        table = self._load_table(catalog, identifier)
        return run_insert(self, table, s)

    # -- catalogs and databases -----------------------------------------------------------
    def _Use(self, s: st.Use) -> StatementResult:
        self.manager.use(s.name)
        return StatementResult()

    def _ShowCatalogs(self, s: st.ShowCatalogs) -> StatementResult:
        names = [n for n in self.manager.catalog_names() if _like(s.pattern, n)]
        return StatementResult(["catalog"], [[n] for n in sorted(names)])

    def _ShowDatabases(self, s: st.ShowDatabases) -> StatementResult:
        catalog = self.manager.catalog(s.catalog[0] if s.catalog else None)
        parent = tuple(s.catalog[1:]) if s.catalog else ()
        names = [".".join(ns) for ns in catalog.list_namespaces(parent)]
        return StatementResult(["namespace"], [[n] for n in sorted(names) if _like(s.pattern, n)])

    def _namespace(self, name: st.Name | None) -> tuple[Catalog, tuple[str, ...]]:
        if name is None:
            return self.manager.catalog(), self.manager.current_namespace
        return self.manager.resolve_namespace(name)

    def _ShowObjects(self, s: st.ShowObjects) -> StatementResult:
        catalog, namespace = self._namespace(s.namespace)
        if not catalog.namespace_exists(namespace):
            raise NoSuchNamespaceError(f"database {'.'.join(namespace)!r} does not exist in catalog {catalog.name!r}")
        ns = ".".join(namespace)
        if s.kind == "tables":
            names = sorted(t[-1] for t in catalog.list_tables(namespace))
            return StatementResult(["namespace", "tableName", "isTemporary"],
                                   [[ns, n, False] for n in names if _like(s.pattern, n)])
        if s.kind == "views":
            names = sorted(v[-1] for v in catalog.list_views(namespace))
            return StatementResult(["namespace", "viewName", "isTemporary"],
                                   [[ns, n, False] for n in names if _like(s.pattern, n)])
        names = sorted(f[-1] for f in catalog.list_functions(namespace))
        return StatementResult(["function"], [[f"{catalog.name}.{ns}.{n}"] for n in names if _like(s.pattern, n)])

    def _CreateDatabase(self, s: st.CreateDatabase) -> StatementResult:
        catalog, namespace = self.manager.resolve_namespace(s.name)
        properties = dict(s.properties)
        if s.comment is not None:
            properties["comment"] = s.comment
        if s.location is not None:
            properties["location"] = s.location
        if catalog.namespace_exists(namespace):
            if s.if_not_exists:
                return StatementResult()
            raise NamespaceAlreadyExistsError(
                f"database {'.'.join(namespace)!r} already exists in catalog {catalog.name!r}; "
                "use CREATE DATABASE IF NOT EXISTS"
            )
        catalog.create_namespace(namespace, properties)
        return StatementResult()

    def _DropDatabase(self, s: st.DropDatabase) -> StatementResult:
        catalog, namespace = self.manager.resolve_namespace(s.name)
        if not catalog.namespace_exists(namespace):
            if s.if_exists:
                return StatementResult()
            raise NoSuchNamespaceError(f"database {'.'.join(namespace)!r} does not exist in catalog {catalog.name!r}")
        if s.cascade:
            for view in catalog.list_views(namespace):
                catalog.drop_view(view)
            for function in catalog.list_functions(namespace):
                catalog.drop_function(function)
            for table in catalog.list_tables(namespace):
                catalog.drop_table(table, purge=True)
        catalog.drop_namespace(namespace)
        return StatementResult()

    def _AlterDatabase(self, s: st.AlterDatabase) -> StatementResult:
        catalog, namespace = self.manager.resolve_namespace(s.name)
        catalog.update_namespace_properties(namespace, removals=set(s.unset_properties) or None,
                                            updates=dict(s.set_properties) or None)
        return StatementResult()

    def _DescribeDatabase(self, s: st.DescribeDatabase) -> StatementResult:
        catalog, namespace = self.manager.resolve_namespace(s.name)
        properties = catalog.load_namespace_properties(namespace)
        rows = [["Catalog Name", catalog.name], ["Namespace Name", ".".join(namespace)],
                ["Comment", properties.get("comment", "")], ["Location", properties.get("location", "")]]
        if s.extended:
            others = {k: v for k, v in properties.items() if k not in ("comment", "location")}
            rows.append(["Properties", ", ".join(f"({k},{v})" for k, v in sorted(others.items()))])
        return StatementResult(["info_name", "info_value"], rows)

    # -- tables ---------------------------------------------------------------------------------
    def _load_table(self, catalog: Catalog, identifier: tuple[str, ...]) -> Any:
        try:
            return catalog.load_table(identifier)
        except NoSuchTableError:
            if catalog.view_exists(identifier):
                raise ValidationError(f"{'.'.join(identifier)} is a view, not a table") from None
            raise

    def _CreateTable(self, s: st.CreateTable) -> StatementResult:
        if s.external:
            return self._create_external_table(s)
        catalog, identifier = self.manager.resolve_table(s.name)
        if s.using not in (None, "iceberg", "tablestore"):
            raise ValidationError(f"USING {s.using} is not supported; tables are stored as Iceberg (USING iceberg)")
        exists = catalog.table_exists(identifier) or catalog.view_exists(identifier)
        if exists and s.if_not_exists:
            return StatementResult()
        if exists and not s.or_replace:
            raise TableAlreadyExistsError(
                f"table {catalog.name}.{'.'.join(identifier)} already exists; use CREATE TABLE IF NOT EXISTS"
            )
        properties = dict(s.properties)
        if s.comment is not None:
            properties["comment"] = s.comment
        if s.query is None:
            if exists and s.or_replace:
                catalog.drop_table(identifier)
            catalog.create_table(identifier, schema=table_schema_from_columns(s.columns),
                                 partition_by=list(s.partitioned_by) or None, properties=properties,
                                 location=s.location)
            return StatementResult()
        if s.columns:
            raise ValidationError("CREATE TABLE ... AS SELECT takes its columns from the query; drop the column list")
        return self._create_table_as(s, s.query, catalog, identifier, exists, properties)

    def _create_table_as(self, s: st.CreateTable, query: str, catalog: Catalog, identifier: tuple[str, ...],
                         exists: bool, properties: dict[str, str]) -> StatementResult:
        """CTAS and RTAS: the table is created from the query's schema, then Spark tasks write the
        query's rows and one append commits them. If the write or the commit fails, the new table
        is dropped again and a replaced table is registered back, as it was."""
        from pyspark.sql.pandas.types import to_arrow_schema

        df = self.planner().dataframe(query)  # resolves every name and type before anything changes
        # The Arrow schema toArrow() would give the rows (UTC timestamps), without running the query.
        schema = to_arrow_schema(df.schema, timezone="UTC")
        replaced = catalog.load_table_metadata(identifier)[0] if exists else None
        if replaced is not None:
            catalog.drop_table(identifier)
        table = catalog.create_table(identifier, schema=schema, partition_by=list(s.partitioned_by) or None,
                                     properties=properties, location=s.location)
        try:
            written = write_query(self, table, typed_for_table(table, df, [f.name for f in table.schema().fields]))
            if written.files:
                commit_written_files(table, written, lambda files, props: FastAppend(table, files, props))
        except BaseException:
            catalog.drop_table(identifier)
            if replaced is not None:
                catalog.register_table(identifier, replaced)
            raise
        return StatementResult(affected=written.rows) if written.rows else StatementResult()

    def _DropTable(self, s: st.DropTable) -> StatementResult:
        catalog, identifier = self.manager.resolve_table(s.name)
        if not catalog.table_exists(identifier):
            if catalog.view_exists(identifier):
                raise ValidationError(f"{'.'.join(s.name)} is a view; use DROP VIEW")
            if s.if_exists:
                return StatementResult()
            raise NoSuchTableError(
                f"table {catalog.name}.{'.'.join(identifier)} does not exist; use DROP TABLE IF EXISTS"
            )
        catalog.drop_table(identifier, purge=s.purge)
        return StatementResult()

    def _RenameTable(self, s: st.RenameTable) -> StatementResult:
        catalog, identifier = self.manager.resolve_table(s.name)
        if len(s.new_name) == 1:
            target = (*identifier[:-1], s.new_name[0])  # a bare new name stays in the same database
        else:
            target_catalog, target = self.manager.resolve_table(s.new_name)
            if target_catalog.name != catalog.name:
                raise ValidationError("cannot rename across catalogs")
        if s.view or (not catalog.table_exists(identifier) and catalog.view_exists(identifier)):
            catalog.rename_view(identifier, target)
        else:
            catalog.rename_table(identifier, target)
        return StatementResult()

    def _SetTableProperties(self, s: st.SetTableProperties) -> StatementResult:
        catalog, identifier = self.manager.resolve_table(s.name)
        self._load_table(catalog, identifier).update_properties(updates=s.properties)
        return StatementResult()

    def _UnsetTableProperties(self, s: st.UnsetTableProperties) -> StatementResult:
        catalog, identifier = self.manager.resolve_table(s.name)
        table = self._load_table(catalog, identifier)
        missing = [k for k in s.keys if k not in table.properties]
        if missing and not s.if_exists:
            raise ValidationError(
                f"table {'.'.join(identifier)} has no propert{'y' if len(missing) == 1 else 'ies'} "
                f"{', '.join(missing)}; use UNSET TBLPROPERTIES IF EXISTS"
            )
        table.update_properties(removals=[k for k in s.keys if k not in missing])
        return StatementResult()

    def _DescribeTable(self, s: st.DescribeTable) -> StatementResult:
        catalog, identifier = self.manager.resolve_table(s.name)
        if not catalog.table_exists(identifier) and catalog.view_exists(identifier):
            return describe_view(catalog, catalog.load_view(identifier), s.extended)
        table = self._load_table(catalog, identifier)
        return describe_table(catalog, table, s.extended)

    def _ShowTblProperties(self, s: st.ShowTblProperties) -> StatementResult:
        catalog, identifier = self.manager.resolve_table(s.name)
        table = self._load_table(catalog, identifier)
        return StatementResult(["key", "value"], [[k, v] for k, v in sorted(table.properties.items())])

    def _ShowCreateTable(self, s: st.ShowCreateTable) -> StatementResult:
        catalog, identifier = self.manager.resolve_table(s.name)
        return StatementResult(["createtab_stmt"], [[show_create_table(catalog, identifier)]])

    # -- views ------------------------------------------------------------------------------------
    def _CreateView(self, s: st.CreateView) -> StatementResult:
        catalog, identifier = self.manager.resolve_table(s.name)
        if catalog.table_exists(identifier):
            raise TableAlreadyExistsError(f"{'.'.join(identifier)} is a table; a view cannot replace it")
        if catalog.view_exists(identifier):
            if s.if_not_exists:
                return StatementResult()
            if not s.or_replace:
                raise AlreadyExistsError(f"view {'.'.join(identifier)} already exists; use CREATE OR REPLACE VIEW")
        df = self.planner().dataframe(s.query)  # resolves every name now, so a broken view is never stored
        arrow_schema = df.limit(0).toArrow().schema  # no rows: only the schema
        if s.columns:
            if len(s.columns) != len(arrow_schema):
                raise ValidationError(
                    f"the view lists {len(s.columns)} columns but its query returns {len(arrow_schema)}"
                )
            arrow_schema = pa.schema([
                f.with_name(name).with_metadata({b"doc": doc.encode()} if doc else None)
                for f, (name, doc) in zip(arrow_schema, s.columns, strict=True)
            ])
        properties = dict(s.properties)
        catalog.create_view(
            identifier, sql=s.query, schema=arrow_schema, default_catalog=self.manager.current_catalog,
            default_namespace=self.manager.current_namespace, properties=properties,
            replace=s.or_replace, comment=s.comment,
        )
        return StatementResult()

    def _DropView(self, s: st.DropView) -> StatementResult:
        catalog, identifier = self.manager.resolve_table(s.name)
        if not catalog.view_exists(identifier):
            if catalog.table_exists(identifier):
                raise ValidationError(f"{'.'.join(identifier)} is a table; use DROP TABLE")
            if s.if_exists:
                return StatementResult()
            raise NoSuchViewError(f"view {catalog.name}.{'.'.join(identifier)} does not exist; use DROP VIEW IF EXISTS")
        catalog.drop_view(identifier)
        return StatementResult()

    # -- functions --------------------------------------------------------------------------------
    def _function_name(self, name: st.Name) -> tuple[Catalog, tuple[str, ...]]:
        return self.manager.resolve_table(name)

    def _CreateFunction(self, s: st.CreateFunction) -> StatementResult:
        catalog, identifier = self._function_name(s.name)
        if catalog.function_exists(identifier):
            if s.if_not_exists:
                return StatementResult()
            if not s.or_replace:
                raise AlreadyExistsError(
                    f"function {'.'.join(identifier)} already exists; use CREATE OR REPLACE FUNCTION"
                )
        load_python_function(s.class_name)  # fail now, not at first use
        catalog.create_function(identifier, s.class_name, s.return_type, replace=s.or_replace)
        return StatementResult()

    def _DropFunction(self, s: st.DropFunction) -> StatementResult:
        catalog, identifier = self._function_name(s.name)
        if not catalog.function_exists(identifier) and s.if_exists:
            return StatementResult()
        catalog.drop_function(identifier)
        return StatementResult()

    def _DescribeFunction(self, s: st.DescribeFunction) -> StatementResult:
        catalog, identifier = self._function_name(s.name)
        f = catalog.load_function(identifier)
        rows = [["Function", f"{catalog.name}.{'.'.join(identifier)}"], ["Class", f.class_name],
                ["Returns", f.return_type or "string"]]
        if s.extended:
            rows.extend([k, v] for k, v in sorted(f.properties.items()))
        return StatementResult(["function_desc", "value"], rows)
