"""Execution of external Hive-style tables (issue 5): CREATE EXTERNAL TABLE, MSCK REPAIR, ADD PARTITION ... LOCATION.

The work itself is in :mod:`tablestore.table.ops.external`; see ``docs/external-tables.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tablestore.errors import SchemaError, TableAlreadyExistsError, ValidationError
from tablestore.spec.schemas.types import parse_sql_type
from tablestore.sql.parse import statements as st
from tablestore.sql.parse.external import partition_column_def
from tablestore.sql.parse.statements import AddPartitions, MsckRepair
from tablestore.sql.result import StatementResult
from tablestore.sql.run.ddl import table_schema_from_columns
from tablestore.table.ops.external import PartitionToAdd, RepairResult, add_partitions, repair_table
from tablestore.table.ops.external import create_external_table as register_external_table

if TYPE_CHECKING:
    from tablestore.sql.context import SessionContext

RESULT_COLUMNS = ["partitions_added", "partitions_dropped", "files_added", "files_removed"]


def _result(r: RepairResult) -> StatementResult:
    return StatementResult(list(RESULT_COLUMNS),
                           [[r.partitions_added, r.partitions_dropped, r.files_added, r.files_removed]])


def create_external_table(context: SessionContext, s: st.CreateTable) -> StatementResult:
    """``CREATE EXTERNAL TABLE t (cols) PARTITIONED BY (k type, ...) STORED AS PARQUET LOCATION 'path'``.

    Registers no file (as in Hive and Spark): MSCK REPAIR TABLE does.
    """
    catalog, identifier = context.manager.resolve_table(s.name)
    if s.or_replace:
        raise ValidationError(
            "CREATE OR REPLACE EXTERNAL TABLE is not supported; DROP TABLE it first (its data files stay) "
            "and create it again"
        )
    if s.query is not None:
        raise ValidationError(
            "CREATE EXTERNAL TABLE ... AS SELECT is not supported; an external table describes files that "
            "exist: create it, then INSERT INTO it"
        )
    if s.using not in (None, "parquet"):
        raise ValidationError(f"external tables hold Parquet files; STORED AS {s.using.upper()} is not supported")
    if not s.location:
        raise ValidationError("CREATE EXTERNAL TABLE needs LOCATION 'path', the root of its k=v/... directories")
    if catalog.table_exists(identifier) or catalog.view_exists(identifier):
        if s.if_not_exists:
            return StatementResult()
        raise TableAlreadyExistsError(
            f"table {catalog.name}.{'.'.join(identifier)} already exists; use CREATE EXTERNAL TABLE IF NOT EXISTS"
        )
    if not s.columns:
        raise ValidationError("CREATE EXTERNAL TABLE needs a column list: (name type, ...)")
    listed = {c.name.lower() for c in s.columns}
    columns = list(s.columns)
    partition_names = []
    for term in s.partitioned_by:
        part = partition_column_def(term)
        if part.type_text is None:
            if part.name.lower() not in listed:
                raise ValidationError(
                    f"partition column {part.name!r} has no type and is not in the column list; "
                    f"declare it as PARTITIONED BY ({part.name} <type>, ...)"
                )
        else:
            if part.name.lower() in listed:
                raise SchemaError(
                    f"partition column {part.name!r} is also in the column list; Hive-style partition "
                    "columns (PARTITIONED BY (name type)) are declared only in PARTITIONED BY"
                )
            try:
                parse_sql_type(part.type_text)
            except SchemaError as e:
                raise SchemaError(f"partition column {part.name!r}: {e}") from None
            columns.append(st.ColumnDef(part.name, part.type_text, False, part.comment))
        partition_names.append(part.name)
    properties = dict(s.properties)
    if s.comment is not None:
        properties["comment"] = s.comment
    register_external_table(catalog, identifier, table_schema_from_columns(tuple(columns)),
                            [f"`{n}`" for n in partition_names], s.location, properties)
    return StatementResult()


def msck_repair(context: SessionContext, s: MsckRepair) -> StatementResult:
    table = context.table(s.name)
    return _result(repair_table(table, s.mode))


def add_partitions_statement(context: SessionContext, s: AddPartitions) -> StatementResult:
    table = context.table(s.name)
    partitions = [PartitionToAdd(dict(values), location) for values, location in s.partitions]
    return _result(add_partitions(table, partitions, s.if_not_exists))
