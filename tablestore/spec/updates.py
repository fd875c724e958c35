"""Metadata updates and commit requirements, in the shapes of the Iceberg REST API, and
``apply_updates``, which applies them as Java's ``TableMetadata.Builder`` does.

The models are in :mod:`tablestore.spec.update_models`, the rules of applying them in
:mod:`tablestore.spec.metadata_builder`; this module puts them together and is where the rest of
the project imports them from.
"""

from __future__ import annotations

from tablestore.spec.metadata import TableMetadata
from tablestore.spec.metadata_builder import build_metadata
from tablestore.spec.update_models import (
    AddPartitionSpecUpdate,
    AddSchemaUpdate,
    AddSnapshotUpdate,
    AddSortOrderUpdate,
    AssertCreate,
    AssertCurrentSchemaId,
    AssertDefaultSortOrderId,
    AssertDefaultSpecId,
    AssertLastAssignedFieldId,
    AssertLastAssignedPartitionId,
    AssertRefSnapshotId,
    AssertTableUUID,
    AssignUUIDUpdate,
    RemovePartitionSpecsUpdate,
    RemovePartitionStatisticsUpdate,
    RemovePropertiesUpdate,
    RemoveSchemasUpdate,
    RemoveSnapshotRefUpdate,
    RemoveSnapshotsUpdate,
    RemoveStatisticsUpdate,
    SetCurrentSchemaUpdate,
    SetDefaultSortOrderUpdate,
    SetDefaultSpecUpdate,
    SetLocationUpdate,
    SetPartitionStatisticsUpdate,
    SetPropertiesUpdate,
    SetSnapshotRefUpdate,
    SetStatisticsUpdate,
    TableRequirement,
    TableUpdate,
    UpgradeFormatVersionUpdate,
    requirement_from_json,
    update_from_json,
    validate_requirements,
)


def apply_updates(
    base: TableMetadata | None,
    updates: list[TableUpdate] | tuple[TableUpdate, ...],
    metadata_location: str | None = None,
) -> TableMetadata:
    """The metadata after ``updates``; ``base`` None builds a new table from the updates.

    ``metadata_location`` is the file ``base`` was read from; it is appended to the metadata log
    (trimmed to ``write.metadata.previous-versions-max``). Invalid updates raise ValidationError.
    If nothing changes, ``base`` is returned as is. See ``metadata_builder`` for the rules.
    """
    return build_metadata(base, updates, metadata_location)


__all__ = [
    "AddPartitionSpecUpdate",
    "AddSchemaUpdate",
    "AddSnapshotUpdate",
    "AddSortOrderUpdate",
    "AssertCreate",
    "AssertCurrentSchemaId",
    "AssertDefaultSortOrderId",
    "AssertDefaultSpecId",
    "AssertLastAssignedFieldId",
    "AssertLastAssignedPartitionId",
    "AssertRefSnapshotId",
    "AssertTableUUID",
    "AssignUUIDUpdate",
    "RemovePartitionSpecsUpdate",
    "RemovePartitionStatisticsUpdate",
    "RemovePropertiesUpdate",
    "RemoveSchemasUpdate",
    "RemoveSnapshotRefUpdate",
    "RemoveSnapshotsUpdate",
    "RemoveStatisticsUpdate",
    "SetCurrentSchemaUpdate",
    "SetDefaultSortOrderUpdate",
    "SetDefaultSpecUpdate",
    "SetLocationUpdate",
    "SetPartitionStatisticsUpdate",
    "SetPropertiesUpdate",
    "SetSnapshotRefUpdate",
    "SetStatisticsUpdate",
    "TableRequirement",
    "TableUpdate",
    "UpgradeFormatVersionUpdate",
    "apply_updates",
    "requirement_from_json",
    "update_from_json",
    "validate_requirements",
]
