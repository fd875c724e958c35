"""Execution of partitions (issue 5): partition evolution, SHOW/DROP/RENAME PARTITION, static partition inserts.

A mixin of :class:`tablestore.sql.session.SqlSession`: a statement class ``X`` runs in method ``_X``.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from tablestore.errors import ValidationError
from tablestore.sql.ddl import describe_table
from tablestore.sql.dml import INSERT_OVERWRITE_MODE, SPARK_OVERWRITE_MODE
from tablestore.sql.parse_partition import (
    AddPartitionField,
    DescribePartition,
    DropPartitionField,
    DropPartitions,
    RenamePartition,
    ReplacePartitionField,
    SetOption,
    ShowPartitions,
)
from tablestore.sql.result import StatementResult
from tablestore.table.ops.partitions import drop_partitions, partition_names, partition_stats, rename_partition

if TYPE_CHECKING:
    from tablestore.session import CatalogManager
    from tablestore.sql import statements as st

_OVERWRITE_MODES = ("dynamic", "static")


class PartitionStatements:
    manager: CatalogManager
    if TYPE_CHECKING:
        def _load_table(self, catalog: Any, identifier: tuple[str, ...]) -> Any: ...

    def _partitioned_table(self, name: st.Name) -> Any:
        catalog, identifier = self.manager.resolve_table(name)
        return self._load_table(catalog, identifier)

    # -- session options ----------------------------------------------------------------------------
    @property
    def session_options(self) -> dict[str, str]:
        """Options set with ``SET k=v`` in this session (such as the insert overwrite mode)."""
        options: dict[str, str] | None = self.__dict__.get("_session_options")
        if options is None:
            options = self.__dict__["_session_options"] = {}
        return options

    def _SetOption(self, s: SetOption) -> StatementResult:
        options = self.session_options
        if s.key is None:
            return StatementResult(["key", "value"], [[k, v] for k, v in sorted(options.items())])
        if s.value is None:
            return StatementResult(["key", "value"], [[s.key, options.get(s.key, "<undefined>")]])
        value = s.value
        if s.key.lower() in (INSERT_OVERWRITE_MODE, SPARK_OVERWRITE_MODE.lower()):
            value = value.lower()
            if value not in _OVERWRITE_MODES:
                raise ValidationError(f"{s.key} must be 'dynamic' or 'static', got {s.value!r}")
        options[s.key] = value
        return StatementResult(["key", "value"], [[s.key, value]])

    # -- partition evolution --------------------------------------------------------------------------
    def _AddPartitionField(self, s: AddPartitionField) -> StatementResult:
        with self._partitioned_table(s.name).update_spec() as u:
            u.add_field(s.term, name=s.field_name)
        return StatementResult()

    def _DropPartitionField(self, s: DropPartitionField) -> StatementResult:
        with self._partitioned_table(s.name).update_spec() as u:
            u.remove_field(s.term)
        return StatementResult()

    def _ReplacePartitionField(self, s: ReplacePartitionField) -> StatementResult:
        with self._partitioned_table(s.name).update_spec() as u:
            u.replace_field(s.old, s.new, name=s.field_name)
        return StatementResult()

    # -- partition management -----------------------------------------------------------------------
    def _ShowPartitions(self, s: ShowPartitions) -> StatementResult:
        table = self._partitioned_table(s.name)
        if not any(spec.is_partitioned() for spec in table.metadata.partition_specs):
            raise ValidationError(f"SHOW PARTITIONS is not allowed on {table.name}: the table is not partitioned")
        return StatementResult(["partition"], [[n] for n in partition_names(table, s.partition)])

    def _DropPartitions(self, s: DropPartitions) -> StatementResult:
        table = self._partitioned_table(s.name)
        result = drop_partitions(table, s.partitions, if_exists=s.if_exists)
        return StatementResult(affected=result.deleted_rows)

    def _RenamePartition(self, s: RenamePartition) -> StatementResult:
        table = self._partitioned_table(s.name)
        return StatementResult(affected=rename_partition(table, s.partition, s.new_partition))

    def _DescribePartition(self, s: DescribePartition) -> StatementResult:
        catalog, identifier = self.manager.resolve_table(s.name)
        table = self._load_table(catalog, identifier)
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
