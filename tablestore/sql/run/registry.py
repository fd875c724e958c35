"""The statement registry: which handler runs each kind of statement.

A handler is a plain function of the session's context and one parsed statement
(``handler(context, statement) -> StatementResult``), in the module of its capability. The
session looks a statement's type up here; a statement type that has no handler is refused with
a ValidationError naming it. A new statement is added by writing its handler and one line below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from tablestore.errors import ValidationError
from tablestore.sql.context import SessionContext
from tablestore.sql.parse import statements as st
from tablestore.sql.result import StatementResult
from tablestore.sql.run import (
    catalogs,
    external,
    insert,
    options,
    partitions,
    procedures,
    queries,
    refs,
    row_level,
    schema,
    tables,
    views,
)

S = TypeVar("S", bound=st.Statement)


class StatementHandlers:
    """A map from statement type to handler; ``add`` checks that the two agree on the type."""

    def __init__(self) -> None:
        self._handlers: dict[type[st.Statement], Callable[[SessionContext, Any], StatementResult]] = {}

    def add(self, kind: type[S], handler: Callable[[SessionContext, S], StatementResult]) -> None:
        if kind in self._handlers:
            raise ValueError(f"statement {kind.__name__} already has a handler")
        self._handlers[kind] = handler

    def kinds(self) -> list[type[st.Statement]]:
        return list(self._handlers)

    def run(self, context: SessionContext, statement: st.Statement) -> StatementResult:
        """Run ``statement`` with its handler; ValidationError when its type has none."""
        handler = self._handlers.get(type(statement))
        if handler is None:
            kind = type(statement)
            raise ValidationError(
                f"statement {kind.__name__} ({kind.__module__}) is not supported yet: no handler is registered "
                "for it in tablestore.sql.run.registry"
            )
        return handler(context, statement)


HANDLERS = StatementHandlers()
# Queries and writes
HANDLERS.add(st.Query, queries.query)
HANDLERS.add(st.Insert, insert.insert)
HANDLERS.add(st.DeleteFrom, row_level.delete_from)
HANDLERS.add(st.UpdateTable, row_level.update_table)
HANDLERS.add(st.MergeInto, row_level.merge_into)
# Catalogs and databases
HANDLERS.add(st.Use, catalogs.use)
HANDLERS.add(st.ShowCatalogs, catalogs.show_catalogs)
HANDLERS.add(st.ShowDatabases, catalogs.show_databases)
HANDLERS.add(st.ShowObjects, catalogs.show_objects)
HANDLERS.add(st.CreateDatabase, catalogs.create_database)
HANDLERS.add(st.DropDatabase, catalogs.drop_database)
HANDLERS.add(st.AlterDatabase, catalogs.alter_database)
HANDLERS.add(st.DescribeDatabase, catalogs.describe_database)
# Tables (CREATE EXTERNAL TABLE goes on to external_statements)
HANDLERS.add(st.CreateTable, tables.create_table)
HANDLERS.add(st.DropTable, tables.drop_table)
HANDLERS.add(st.RenameTable, tables.rename_table)
HANDLERS.add(st.SetTableProperties, tables.set_table_properties)
HANDLERS.add(st.UnsetTableProperties, tables.unset_table_properties)
HANDLERS.add(st.DescribeTable, tables.describe)
HANDLERS.add(st.ShowTblProperties, tables.show_tblproperties)
HANDLERS.add(st.ShowCreateTable, tables.show_create)
HANDLERS.add(st.AlterSchema, schema.alter_schema)
# Branches and tags
HANDLERS.add(st.CreateRef, refs.create_ref)
HANDLERS.add(st.DropRef, refs.drop_ref)
# Views and functions
HANDLERS.add(st.CreateView, views.create_view)
HANDLERS.add(st.DropView, views.drop_view)
HANDLERS.add(st.CreateFunction, views.create_function)
HANDLERS.add(st.DropFunction, views.drop_function)
HANDLERS.add(st.DescribeFunction, views.describe_function)
# Partitions, external tables and session options
HANDLERS.add(st.AddPartitionField, partitions.add_partition_field)
HANDLERS.add(st.DropPartitionField, partitions.drop_partition_field)
HANDLERS.add(st.ReplacePartitionField, partitions.replace_partition_field)
HANDLERS.add(st.ShowPartitions, partitions.show_partitions)
HANDLERS.add(st.DropPartitions, partitions.drop_partitions_statement)
HANDLERS.add(st.RenamePartition, partitions.rename_partition_statement)
HANDLERS.add(st.DescribePartition, partitions.describe_partition)
HANDLERS.add(st.SetOption, options.set_option)
HANDLERS.add(st.ResetOption, options.reset_option)
HANDLERS.add(st.MsckRepair, external.msck_repair)
HANDLERS.add(st.AddPartitions, external.add_partitions_statement)
# Procedures
HANDLERS.add(st.Call, procedures.call)
