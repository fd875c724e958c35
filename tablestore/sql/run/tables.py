"""Tables: CREATE TABLE (with AS SELECT, OR REPLACE; EXTERNAL in ``run/external.py``),
DROP, RENAME, SET and UNSET TBLPROPERTIES, DESCRIBE, SHOW TBLPROPERTIES and SHOW CREATE TABLE."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tablestore.errors import NoSuchTableError, TableAlreadyExistsError, ValidationError
from tablestore.spark.table_types import typed_for_table
from tablestore.spark.tasks.write_files import commit_written
from tablestore.sql.parse import statements as st
from tablestore.sql.result import StatementResult
from tablestore.sql.run.ddl import describe_table, describe_view, show_create_table, table_schema_from_columns
from tablestore.sql.run.external import create_external_table
from tablestore.sql.run.insert import write_query

if TYPE_CHECKING:
    from tablestore.catalog.base import Catalog
    from tablestore.sql.context import SessionContext


def create_table(context: SessionContext, s: st.CreateTable) -> StatementResult:
    if s.external:
        return create_external_table(context, s)
    catalog, identifier = context.manager.resolve_table(s.name)
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
    return _create_table_as(context, s, s.query, catalog, identifier, exists, properties)


def _create_table_as(context: SessionContext, s: st.CreateTable, query: str, catalog: Catalog,
                     identifier: tuple[str, ...], exists: bool, properties: dict[str, str]) -> StatementResult:
    """CTAS and RTAS: the table is created from the query's schema, then Spark tasks write the
    query's rows and one append commits them. If the write or the commit fails, the new table
    is dropped again and a replaced table is registered back, as it was."""
    from pyspark.sql.pandas.types import to_arrow_schema

    df = context.planner().dataframe(query, s.query_tokens)  # resolves every name and type before anything changes
    # The Arrow schema toArrow() would give the rows (UTC timestamps), without running the query.
    schema = to_arrow_schema(df.schema, timezone="UTC")
    replaced = catalog.load_table_metadata(identifier)[0] if exists else None
    if replaced is not None:
        catalog.drop_table(identifier)
    table = catalog.create_table(identifier, schema=schema, partition_by=list(s.partitioned_by) or None,
                                 properties=properties, location=s.location)
    try:
        written = write_query(context, table, typed_for_table(table, df, [f.name for f in table.schema().fields]))
        if written.files:
            commit_written(table, written)
    except BaseException:
        catalog.drop_table(identifier)
        if replaced is not None:
            catalog.register_table(identifier, replaced)
        raise
    return StatementResult(affected=written.rows) if written.rows else StatementResult()


def drop_table(context: SessionContext, s: st.DropTable) -> StatementResult:
    catalog, identifier = context.manager.resolve_table(s.name)
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


def rename_table(context: SessionContext, s: st.RenameTable) -> StatementResult:
    catalog, identifier = context.manager.resolve_table(s.name)
    if len(s.new_name) == 1:
        target = (*identifier[:-1], s.new_name[0])  # a bare new name stays in the same database
    else:
        target_catalog, target = context.manager.resolve_table(s.new_name)
        if target_catalog.name != catalog.name:
            raise ValidationError("cannot rename across catalogs")
    if s.view or (not catalog.table_exists(identifier) and catalog.view_exists(identifier)):
        catalog.rename_view(identifier, target)
    else:
        catalog.rename_table(identifier, target)
    return StatementResult()


def set_table_properties(context: SessionContext, s: st.SetTableProperties) -> StatementResult:
    table = context.table(s.name)
    table.update_properties(updates=s.properties)
    return StatementResult()


def unset_table_properties(context: SessionContext, s: st.UnsetTableProperties) -> StatementResult:
    _, identifier, table = context.located_table(s.name)
    missing = [k for k in s.keys if k not in table.properties]
    if missing and not s.if_exists:
        raise ValidationError(
            f"table {'.'.join(identifier)} has no propert{'y' if len(missing) == 1 else 'ies'} "
            f"{', '.join(missing)}; use UNSET TBLPROPERTIES IF EXISTS"
        )
    table.update_properties(removals=[k for k in s.keys if k not in missing])
    return StatementResult()


def describe(context: SessionContext, s: st.DescribeTable) -> StatementResult:
    catalog, identifier = context.manager.resolve_table(s.name)
    if not catalog.table_exists(identifier) and catalog.view_exists(identifier):
        return describe_view(catalog, catalog.load_view(identifier), s.extended)
    return describe_table(catalog, context.load_table(catalog, identifier), s.extended)


def show_tblproperties(context: SessionContext, s: st.ShowTblProperties) -> StatementResult:
    table = context.table(s.name)
    return StatementResult(["key", "value"], [[k, v] for k, v in sorted(table.properties.items())])


def show_create(context: SessionContext, s: st.ShowCreateTable) -> StatementResult:
    catalog, identifier = context.manager.resolve_table(s.name)
    return StatementResult(["createtab_stmt"], [[show_create_table(catalog, identifier)]])
