"""The snapshot of a column merge: fragments replaced by their rewrites, with the new columns'
schema, in one commit (see :mod:`tablestore.table.ops.column_merge` for what a fragment is)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tablestore.errors import CommitConflictError
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.metadata.table_metadata import Snapshot, TableMetadata
from tablestore.spec.metadata.update_models import (
    AddSchemaUpdate,
    AssertCurrentSchemaId,
    AssertLastAssignedFieldId,
    SetCurrentSchemaUpdate,
    TableRequirement,
    TableUpdate,
)
from tablestore.spec.schemas.schema import Schema
from tablestore.table.update.snapshot import SnapshotProducer
from tablestore.table.update.validation import Validation, no_new_deletes_for_rewritten

if TYPE_CHECKING:
    from tablestore.table import Table


class CommitFragments(SnapshotProducer):
    """Replaces files by their rewrites and adds the new columns' schema in one commit.

    ``base_schema_id``/``last_column_id`` describe the table the fragments were planned on; the
    commit fails when a concurrent commit changed its schema.
    """

    mergeable = False

    def __init__(
        self,
        table: Table,
        replaced: Iterable[DataFile],
        rewritten: Iterable[DataFile],
        scan_snapshot_id: int | None,
        base_schema_id: int,
        last_column_id: int,
        new_schema: Schema | None,
        snapshot_properties: dict[str, str] | None = None,
    ) -> None:
        replaced = list(replaced)
        check = no_new_deletes_for_rewritten(replaced, "a fragment this merge rewrote; plan and merge again")
        super().__init__(table, added=rewritten, deleted=replaced, validations=[Validation(scan_snapshot_id, check)],
                         snapshot_properties=snapshot_properties, operation="overwrite")
        self.base_schema_id = base_schema_id
        self.last_column_id = last_column_id
        self.new_schema = new_schema

    def validate(self, base: TableMetadata, parent: Snapshot | None) -> None:
        if base.current_schema_id != self.base_schema_id or base.last_column_id != self.last_column_id:
            raise CommitConflictError(
                "the table's schema changed since the fragments were planned; plan and merge again"
            )
        super().validate(base, parent)

    def metadata_changes(self, base: TableMetadata) -> tuple[list[TableRequirement], list[TableUpdate], int]:
        requirements: list[TableRequirement] = [
            AssertCurrentSchemaId(current_schema_id=self.base_schema_id),
            AssertLastAssignedFieldId(last_assigned_field_id=self.last_column_id),
        ]
        if self.new_schema is None:
            return requirements, [], base.current_schema_id
        updates: list[TableUpdate] = [
            AddSchemaUpdate(schema_=self.new_schema, last_column_id=self.new_schema.highest_field_id()),
            SetCurrentSchemaUpdate(schema_id=-1),
        ]
        return requirements, updates, self.new_schema.schema_id
