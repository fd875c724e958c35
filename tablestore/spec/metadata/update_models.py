"""Metadata updates and commit requirements, in the shapes of the Iceberg REST API: the models.

This module holds the models alone; :func:`~tablestore.spec.metadata.metadata_builder.apply_updates`
applies them, from a module that sits above this one so that no import cycles.

A commit is a list of requirements (checked against the table's current metadata) and a list
of updates (applied to it). ``apply_updates`` follows the semantics of Java's
``TableMetadata.Builder``: ``-1`` ids mean "the one added last in this commit", identical schemas,
specs and sort orders are reused instead of added twice, setting ``main`` moves the current
snapshot and appends to the snapshot log, and the previous metadata file goes to the metadata log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tablestore.errors import CommitConflictError, ValidationError
from tablestore.spec.metadata.table_metadata import (
    Snapshot,
    SnapshotRef,
    TableMetadata,
)
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.partitioning.sort_order import SortOrder
from tablestore.spec.schemas.schema import Schema

# -- updates -------------------------------------------------------------------------------------


class TableUpdate:
    """Base of the metadata updates; ``action`` is the REST discriminator."""

    action: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(frozen=True)
class AssignUUIDUpdate(TableUpdate):
    uuid: str
    action: ClassVar[str] = "assign-uuid"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "uuid": self.uuid}


@dataclass(frozen=True)
class UpgradeFormatVersionUpdate(TableUpdate):
    format_version: int
    action: ClassVar[str] = "upgrade-format-version"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "format-version": self.format_version}


@dataclass(frozen=True)
class AddSchemaUpdate(TableUpdate):
    schema: Schema
    last_column_id: int | None = None  # deprecated in the REST spec; derived when absent
    action: ClassVar[str] = "add-schema"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action, "schema": self.schema.to_json()}
        if self.last_column_id is not None:
            out["last-column-id"] = self.last_column_id
        return out


@dataclass(frozen=True)
class SetCurrentSchemaUpdate(TableUpdate):
    schema_id: int = -1  # -1: the schema added last in this commit
    action: ClassVar[str] = "set-current-schema"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "schema-id": self.schema_id}


@dataclass(frozen=True)
class AddPartitionSpecUpdate(TableUpdate):
    spec: PartitionSpec
    action: ClassVar[str] = "add-spec"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "spec": self.spec.to_json()}


@dataclass(frozen=True)
class SetDefaultSpecUpdate(TableUpdate):
    spec_id: int = -1
    action: ClassVar[str] = "set-default-spec"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "spec-id": self.spec_id}


@dataclass(frozen=True)
class AddSortOrderUpdate(TableUpdate):
    sort_order: SortOrder
    action: ClassVar[str] = "add-sort-order"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "sort-order": self.sort_order.to_json()}


@dataclass(frozen=True)
class SetDefaultSortOrderUpdate(TableUpdate):
    sort_order_id: int = -1
    action: ClassVar[str] = "set-default-sort-order"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "sort-order-id": self.sort_order_id}


@dataclass(frozen=True)
class AddSnapshotUpdate(TableUpdate):
    snapshot: Snapshot
    action: ClassVar[str] = "add-snapshot"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "snapshot": self.snapshot.to_json()}


@dataclass(frozen=True)
class SetSnapshotRefUpdate(TableUpdate):
    ref_name: str
    snapshot_id: int
    type: str = "branch"
    max_ref_age_ms: int | None = None
    max_snapshot_age_ms: int | None = None
    min_snapshots_to_keep: int | None = None
    action: ClassVar[str] = "set-snapshot-ref"

    def to_ref(self) -> SnapshotRef:
        return SnapshotRef(self.snapshot_id, self.type, self.min_snapshots_to_keep,
                           self.max_snapshot_age_ms, self.max_ref_age_ms)

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "ref-name": self.ref_name, **self.to_ref().to_json()}


@dataclass(frozen=True)
class RemoveSnapshotsUpdate(TableUpdate):
    snapshot_ids: tuple[int, ...]
    action: ClassVar[str] = "remove-snapshots"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "snapshot-ids": list(self.snapshot_ids)}


@dataclass(frozen=True)
class RemoveSnapshotRefUpdate(TableUpdate):
    ref_name: str
    action: ClassVar[str] = "remove-snapshot-ref"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "ref-name": self.ref_name}


@dataclass(frozen=True)
class SetLocationUpdate(TableUpdate):
    location: str
    action: ClassVar[str] = "set-location"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "location": self.location}


@dataclass(frozen=True)
class SetPropertiesUpdate(TableUpdate):
    updates: dict[str, str]
    action: ClassVar[str] = "set-properties"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "updates": dict(self.updates)}


@dataclass(frozen=True)
class RemovePropertiesUpdate(TableUpdate):
    removals: tuple[str, ...]
    action: ClassVar[str] = "remove-properties"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "removals": list(self.removals)}


@dataclass(frozen=True)
class SetStatisticsUpdate(TableUpdate):
    statistics: dict[str, Any]  # a statistics-file object as in table metadata
    action: ClassVar[str] = "set-statistics"

    def to_json(self) -> dict[str, Any]:
        # "snapshot-id" is deprecated in the REST spec but still sent for older servers.
        return {"action": self.action, "snapshot-id": self.statistics.get("snapshot-id"),
                "statistics": dict(self.statistics)}


@dataclass(frozen=True)
class RemoveStatisticsUpdate(TableUpdate):
    snapshot_id: int
    action: ClassVar[str] = "remove-statistics"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "snapshot-id": self.snapshot_id}


@dataclass(frozen=True)
class SetPartitionStatisticsUpdate(TableUpdate):
    partition_statistics: dict[str, Any]
    action: ClassVar[str] = "set-partition-statistics"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "partition-statistics": dict(self.partition_statistics)}


@dataclass(frozen=True)
class RemovePartitionStatisticsUpdate(TableUpdate):
    snapshot_id: int
    action: ClassVar[str] = "remove-partition-statistics"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "snapshot-id": self.snapshot_id}


@dataclass(frozen=True)
class RemovePartitionSpecsUpdate(TableUpdate):
    spec_ids: tuple[int, ...]
    action: ClassVar[str] = "remove-partition-specs"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "spec-ids": list(self.spec_ids)}


@dataclass(frozen=True)
class RemoveSchemasUpdate(TableUpdate):
    schema_ids: tuple[int, ...]
    action: ClassVar[str] = "remove-schemas"

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "schema-ids": list(self.schema_ids)}


def _req(obj: dict[str, Any], key: str, what: str) -> Any:
    if key not in obj:
        raise ValidationError(f"{what} is missing {key!r}")
    return obj[key]


def update_from_json(obj: Any) -> TableUpdate:
    """Parse one REST update object; ValidationError if it is malformed or unknown."""
    if not isinstance(obj, dict) or not isinstance(obj.get("action"), str):
        raise ValidationError(f"an update must be a JSON object with an 'action', got {obj!r}")
    action: str = obj["action"]
    what = f"update {action!r}"
    if action == "assign-uuid":
        return AssignUUIDUpdate(str(_req(obj, "uuid", what)))
    if action == "upgrade-format-version":
        return UpgradeFormatVersionUpdate(int(_req(obj, "format-version", what)))
    if action == "add-schema":
        return AddSchemaUpdate(Schema.from_json(_req(obj, "schema", what)), obj.get("last-column-id"))
    if action == "set-current-schema":
        return SetCurrentSchemaUpdate(int(_req(obj, "schema-id", what)))
    if action == "add-spec":
        return AddPartitionSpecUpdate(PartitionSpec.from_json(_req(obj, "spec", what)))
    if action == "set-default-spec":
        return SetDefaultSpecUpdate(int(_req(obj, "spec-id", what)))
    if action == "add-sort-order":
        return AddSortOrderUpdate(SortOrder.from_json(_req(obj, "sort-order", what)))
    if action == "set-default-sort-order":
        return SetDefaultSortOrderUpdate(int(_req(obj, "sort-order-id", what)))
    if action == "add-snapshot":
        return AddSnapshotUpdate(Snapshot.from_json(_req(obj, "snapshot", what)))
    if action == "set-snapshot-ref":
        return SetSnapshotRefUpdate(
            str(_req(obj, "ref-name", what)),
            int(_req(obj, "snapshot-id", what)),
            str(_req(obj, "type", what)),
            obj.get("max-ref-age-ms"), obj.get("max-snapshot-age-ms"), obj.get("min-snapshots-to-keep"),
        )
    if action == "remove-snapshots":
        return RemoveSnapshotsUpdate(tuple(int(i) for i in _req(obj, "snapshot-ids", what)))
    if action == "remove-snapshot-ref":
        return RemoveSnapshotRefUpdate(str(_req(obj, "ref-name", what)))
    if action == "set-location":
        return SetLocationUpdate(str(_req(obj, "location", what)))
    if action == "set-properties":
        return SetPropertiesUpdate({str(k): str(v) for k, v in _req(obj, "updates", what).items()})
    if action == "remove-properties":
        return RemovePropertiesUpdate(tuple(str(k) for k in _req(obj, "removals", what)))
    if action == "set-statistics":
        return SetStatisticsUpdate(dict(_req(obj, "statistics", what)))
    if action == "remove-statistics":
        return RemoveStatisticsUpdate(int(_req(obj, "snapshot-id", what)))
    if action == "set-partition-statistics":
        return SetPartitionStatisticsUpdate(dict(_req(obj, "partition-statistics", what)))
    if action == "remove-partition-statistics":
        return RemovePartitionStatisticsUpdate(int(_req(obj, "snapshot-id", what)))
    if action == "remove-partition-specs":
        return RemovePartitionSpecsUpdate(tuple(int(i) for i in _req(obj, "spec-ids", what)))
    if action == "remove-schemas":
        return RemoveSchemasUpdate(tuple(int(i) for i in _req(obj, "schema-ids", what)))
    raise ValidationError(f"unknown table update action {action!r}")


# -- requirements --------------------------------------------------------------------------------


class TableRequirement:
    """Base of the commit requirements; ``type`` is the REST discriminator."""

    type: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError

    def validate(self, metadata: TableMetadata | None) -> None:
        raise NotImplementedError

    def _existing(self, metadata: TableMetadata | None) -> TableMetadata:
        if metadata is None:
            raise CommitConflictError("Requirement failed: table does not exist (any more)")
        return metadata


@dataclass(frozen=True)
class AssertCreate(TableRequirement):
    type: ClassVar[str] = "assert-create"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}

    def validate(self, metadata: TableMetadata | None) -> None:
        if metadata is not None:
            raise CommitConflictError("Requirement failed: table already exists")


@dataclass(frozen=True)
class AssertTableUUID(TableRequirement):
    uuid: str
    type: ClassVar[str] = "assert-table-uuid"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "uuid": self.uuid}

    def validate(self, metadata: TableMetadata | None) -> None:
        md = self._existing(metadata)
        if md.table_uuid.lower() != self.uuid.lower():
            raise CommitConflictError(
                f"Requirement failed: UUID does not match: expected {self.uuid} != {md.table_uuid}"
            )


@dataclass(frozen=True)
class AssertRefSnapshotId(TableRequirement):
    """The ref points at ``snapshot_id``; ``None`` means the ref must not exist."""

    ref: str
    snapshot_id: int | None
    type: ClassVar[str] = "assert-ref-snapshot-id"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "ref": self.ref, "snapshot-id": self.snapshot_id}

    def validate(self, metadata: TableMetadata | None) -> None:
        md = self._existing(metadata)
        ref = md.refs.get(self.ref)
        if ref is not None:
            if self.snapshot_id is None:
                raise CommitConflictError(
                    f"Requirement failed: {ref.type} {self.ref} was created concurrently"
                )
            if self.snapshot_id != ref.snapshot_id:
                raise CommitConflictError(
                    f"Requirement failed: {ref.type} {self.ref} has changed: "
                    f"expected id {self.snapshot_id} != {ref.snapshot_id}"
                )
        elif self.snapshot_id is not None:
            raise CommitConflictError(
                f"Requirement failed: branch or tag {self.ref} is missing, expected {self.snapshot_id}"
            )


@dataclass(frozen=True)
class AssertLastAssignedFieldId(TableRequirement):
    last_assigned_field_id: int
    type: ClassVar[str] = "assert-last-assigned-field-id"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "last-assigned-field-id": self.last_assigned_field_id}

    def validate(self, metadata: TableMetadata | None) -> None:
        md = self._existing(metadata)
        if md.last_column_id != self.last_assigned_field_id:
            raise CommitConflictError(
                f"Requirement failed: last assigned field id changed: "
                f"expected id {self.last_assigned_field_id} != {md.last_column_id}"
            )


@dataclass(frozen=True)
class AssertCurrentSchemaId(TableRequirement):
    current_schema_id: int
    type: ClassVar[str] = "assert-current-schema-id"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "current-schema-id": self.current_schema_id}

    def validate(self, metadata: TableMetadata | None) -> None:
        md = self._existing(metadata)
        if md.current_schema_id != self.current_schema_id:
            raise CommitConflictError(
                f"Requirement failed: current schema changed: expected id {self.current_schema_id} "
                f"!= {md.current_schema_id}"
            )


@dataclass(frozen=True)
class AssertLastAssignedPartitionId(TableRequirement):
    last_assigned_partition_id: int
    type: ClassVar[str] = "assert-last-assigned-partition-id"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "last-assigned-partition-id": self.last_assigned_partition_id}

    def validate(self, metadata: TableMetadata | None) -> None:
        md = self._existing(metadata)
        if md.last_partition_id != self.last_assigned_partition_id:
            raise CommitConflictError(
                f"Requirement failed: last assigned partition id changed: "
                f"expected id {self.last_assigned_partition_id} != {md.last_partition_id}"
            )


@dataclass(frozen=True)
class AssertDefaultSpecId(TableRequirement):
    default_spec_id: int
    type: ClassVar[str] = "assert-default-spec-id"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "default-spec-id": self.default_spec_id}

    def validate(self, metadata: TableMetadata | None) -> None:
        md = self._existing(metadata)
        if md.default_spec_id != self.default_spec_id:
            raise CommitConflictError(
                f"Requirement failed: default partition spec changed: expected id {self.default_spec_id} "
                f"!= {md.default_spec_id}"
            )


@dataclass(frozen=True)
class AssertDefaultSortOrderId(TableRequirement):
    default_sort_order_id: int
    type: ClassVar[str] = "assert-default-sort-order-id"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "default-sort-order-id": self.default_sort_order_id}

    def validate(self, metadata: TableMetadata | None) -> None:
        md = self._existing(metadata)
        if md.default_sort_order_id != self.default_sort_order_id:
            raise CommitConflictError(
                f"Requirement failed: default sort order changed: expected id {self.default_sort_order_id} "
                f"!= {md.default_sort_order_id}"
            )


def requirement_from_json(obj: Any) -> TableRequirement:
    """Parse one REST requirement object; ValidationError if it is malformed or unknown."""
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ValidationError(f"a requirement must be a JSON object with a 'type', got {obj!r}")
    kind: str = obj["type"]
    what = f"requirement {kind!r}"
    if kind == "assert-create":
        return AssertCreate()
    if kind == "assert-table-uuid":
        return AssertTableUUID(str(_req(obj, "uuid", what)))
    if kind == "assert-ref-snapshot-id":
        sid = obj.get("snapshot-id")
        return AssertRefSnapshotId(str(_req(obj, "ref", what)), None if sid is None else int(sid))
    if kind == "assert-last-assigned-field-id":
        return AssertLastAssignedFieldId(int(_req(obj, "last-assigned-field-id", what)))
    if kind == "assert-current-schema-id":
        return AssertCurrentSchemaId(int(_req(obj, "current-schema-id", what)))
    if kind == "assert-last-assigned-partition-id":
        return AssertLastAssignedPartitionId(int(_req(obj, "last-assigned-partition-id", what)))
    if kind == "assert-default-spec-id":
        return AssertDefaultSpecId(int(_req(obj, "default-spec-id", what)))
    if kind == "assert-default-sort-order-id":
        return AssertDefaultSortOrderId(int(_req(obj, "default-sort-order-id", what)))
    raise ValidationError(f"unknown table requirement type {kind!r}")


def validate_requirements(requirements: list[TableRequirement] | tuple[TableRequirement, ...],
                          metadata: TableMetadata | None) -> None:
    for requirement in requirements:
        requirement.validate(metadata)


__all__ = [
    "AddPartitionSpecUpdate", "AddSchemaUpdate", "AddSnapshotUpdate", "AddSortOrderUpdate", "AssertCreate",
    "AssertCurrentSchemaId", "AssertDefaultSortOrderId", "AssertDefaultSpecId", "AssertLastAssignedFieldId",
    "AssertLastAssignedPartitionId", "AssertRefSnapshotId", "AssertTableUUID", "AssignUUIDUpdate",
    "RemovePartitionSpecsUpdate", "RemovePartitionStatisticsUpdate", "RemovePropertiesUpdate",
    "RemoveSchemasUpdate", "RemoveSnapshotRefUpdate", "RemoveSnapshotsUpdate", "RemoveStatisticsUpdate",
    "SetCurrentSchemaUpdate", "SetDefaultSortOrderUpdate", "SetDefaultSpecUpdate", "SetLocationUpdate",
    "SetPartitionStatisticsUpdate", "SetPropertiesUpdate", "SetSnapshotRefUpdate", "SetStatisticsUpdate",
    "TableRequirement", "TableUpdate", "UpgradeFormatVersionUpdate", "requirement_from_json",
    "update_from_json", "validate_requirements",
]
