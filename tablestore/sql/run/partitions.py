"""Execution of partitions (issue 5): partition evolution and SHOW/DROP/RENAME PARTITION."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from tablestore.errors import ValidationError
from tablestore.sql.parse.statements import (
    AddPartitionField,
    DescribePartition,
    DropPartitionField,
    DropPartitions,
    RenamePartition,
    ReplacePartitionField,
    ShowPartitions,
)
from tablestore.sql.result import StatementResult
from tablestore.sql.run.ddl import describe_table
from tablestore.table.ops.partitions import drop_partitions, partition_names, partition_stats, rename_partition

if TYPE_CHECKING:
    from tablestore.sql.context import SessionContext


# -- partition evolution --------------------------------------------------------------------------
def add_partition_field(context: SessionContext, s: AddPartitionField) -> StatementResult:
    with context.table(s.name).update_spec() as u:
        u.add_field(s.term, name=s.field_name)
    return StatementResult()


def drop_partition_field(context: SessionContext, s: DropPartitionField) -> StatementResult:
    with context.table(s.name).update_spec() as u:
        u.remove_field(s.term)
    return StatementResult()


def replace_partition_field(context: SessionContext, s: ReplacePartitionField) -> StatementResult:
    with context.table(s.name).update_spec() as u:
        u.replace_field(s.old, s.new, name=s.field_name)
    return StatementResult()


# -- partition management -----------------------------------------------------------------------
def show_partitions(context: SessionContext, s: ShowPartitions) -> StatementResult:
    table = context.table(s.name)
    if not any(spec.is_partitioned() for spec in table.metadata.partition_specs):
        raise ValidationError(f"SHOW PARTITIONS is not allowed on {table.name}: the table is not partitioned")
    return StatementResult(["partition"], [[n] for n in partition_names(table, s.partition)])


def drop_partitions_statement(context: SessionContext, s: DropPartitions) -> StatementResult:
    table = context.table(s.name)
    result = drop_partitions(table, s.partitions, if_exists=s.if_exists)
    return StatementResult(affected=result.deleted_rows)


def rename_partition_statement(context: SessionContext, s: RenamePartition) -> StatementResult:
    table = context.table(s.name)
    return StatementResult(affected=rename_partition(table, s.partition, s.new_partition))


def describe_partition(context: SessionContext, s: DescribePartition) -> StatementResult:
    catalog, identifier, table = context.located_table(s.name)
    stats = partition_stats(table, s.partition)
    out = describe_table(catalog, table, extended=False)
    values = ", ".join(f"{k}={'NULL' if v is None else v}" for k, v in s.partition)
    last = (datetime.datetime.fromtimestamp(stats.last_updated_at_ms / 1000, datetime.UTC).isoformat()
            if stats.last_updated_at_ms is not None else "")
    out.rows.extend([
        ["", "", ""],
        ["# Detailed Partition Information", "", ""],
        ["Database", ".".join(identifier[:-1]), ""],
        ["Table", identifier[-1], ""],
        ["Partition Values", f"[{values}]", ""],
        ["Partitions", ", ".join(stats.partitions), ""],
        ["Record Count", str(stats.record_count), ""],
        ["File Count", str(stats.file_count), ""],
        ["Total Size", str(stats.total_size_in_bytes), ""],
        ["Last Updated", last, ""],
        ["Last Updated Snapshot", "" if stats.last_updated_snapshot_id is None
         else str(stats.last_updated_snapshot_id), ""],
    ])
    return out
