"""Metadata updates and commit requirements, in the shapes of the Iceberg REST API: the models.

This module holds the models alone; :func:`~tablestore.spec.metadata.metadata_builder.apply_updates`
applies them, from a module that sits above this one so that no import cycles.

A commit is a list of requirements (checked against the table's current metadata) and a list
of updates (applied to it). ``apply_updates`` follows the semantics of Java's
``TableMetadata.Builder``: ``-1`` ids mean "the one added last in this commit", identical schemas,
specs and sort orders are reused instead of added twice, setting ``main`` moves the current
snapshot and appends to the snapshot log, and the previous metadata file goes to the metadata log.

Each update and requirement is a frozen pydantic model, as pyiceberg models them: fields named in
Python, their JSON names in kebab case, and a literal ``action`` (updates) or ``type``
(requirements) that tells the REST spec's discriminated union apart. :func:`update_from_json` and
:func:`requirement_from_json` parse one object; ``to_json`` gives the REST shape.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, TypeAdapter, computed_field

from tablestore.errors import CommitConflictError, TableStoreError, ValidationError
from tablestore.spec.metadata.table_metadata import Snapshot, SnapshotRef, TableMetadata
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.partitioning.sort_order import SortOrder
from tablestore.spec.schemas.schema import Schema

# The spec's own objects keep their JSON codecs (they are read from metadata files too); a model
# field of one takes the object or its JSON form and dumps the JSON form.
SchemaField = Annotated[
    Schema,
    PlainValidator(lambda v: v if isinstance(v, Schema) else Schema.from_json(v)),
    PlainSerializer(Schema.to_json),
]
SpecField = Annotated[
    PartitionSpec,
    PlainValidator(lambda v: v if isinstance(v, PartitionSpec) else PartitionSpec.from_json(v)),
    PlainSerializer(PartitionSpec.to_json),
]
SortOrderField = Annotated[
    SortOrder,
    PlainValidator(lambda v: v if isinstance(v, SortOrder) else SortOrder.from_json(v)),
    PlainSerializer(SortOrder.to_json),
]
SnapshotField = Annotated[
    Snapshot,
    PlainValidator(lambda v: v if isinstance(v, Snapshot) else Snapshot.from_json(v)),
    PlainSerializer(Snapshot.to_json),
]

# Python names (``schema_`` because BaseModel has a ``schema``) and the REST spec's kebab-case ones.
REST_MODEL = ConfigDict(
    frozen=True,
    alias_generator=lambda name: name.rstrip("_").replace("_", "-"),
    validate_by_name=True,
    validate_by_alias=True,
    # Property values were taken with str() before these were models: numbers stay accepted.
    coerce_numbers_to_str=True,
)

# -- updates -------------------------------------------------------------------------------------


class TableUpdate(BaseModel):
    """Base of the metadata updates; ``action`` is the REST discriminator."""

    model_config = REST_MODEL
    action: str

    def to_json(self) -> dict[str, Any]:
        # Optional fields the REST spec lets a client leave out are left out, not sent as null.
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class AssignUUIDUpdate(TableUpdate):
    action: Literal["assign-uuid"] = "assign-uuid"
    uuid: str


class UpgradeFormatVersionUpdate(TableUpdate):
    action: Literal["upgrade-format-version"] = "upgrade-format-version"
    format_version: int


class AddSchemaUpdate(TableUpdate):
    action: Literal["add-schema"] = "add-schema"
    schema_: SchemaField
    last_column_id: int | None = None  # deprecated in the REST spec; derived when absent


class SetCurrentSchemaUpdate(TableUpdate):
    action: Literal["set-current-schema"] = "set-current-schema"
    schema_id: int  # -1: the schema added last in this commit


class AddPartitionSpecUpdate(TableUpdate):
    action: Literal["add-spec"] = "add-spec"
    spec: SpecField


class SetDefaultSpecUpdate(TableUpdate):
    action: Literal["set-default-spec"] = "set-default-spec"
    spec_id: int  # -1: the spec added last in this commit


class AddSortOrderUpdate(TableUpdate):
    action: Literal["add-sort-order"] = "add-sort-order"
    sort_order: SortOrderField


class SetDefaultSortOrderUpdate(TableUpdate):
    action: Literal["set-default-sort-order"] = "set-default-sort-order"
    sort_order_id: int  # -1: the sort order added last in this commit


class AddSnapshotUpdate(TableUpdate):
    action: Literal["add-snapshot"] = "add-snapshot"
    snapshot: SnapshotField


class SetSnapshotRefUpdate(TableUpdate):
    action: Literal["set-snapshot-ref"] = "set-snapshot-ref"
    ref_name: str
    snapshot_id: int
    type: str
    max_ref_age_ms: int | None = None
    max_snapshot_age_ms: int | None = None
    min_snapshots_to_keep: int | None = None

    def to_ref(self) -> SnapshotRef:
        return SnapshotRef(self.snapshot_id, self.type, self.min_snapshots_to_keep,
                           self.max_snapshot_age_ms, self.max_ref_age_ms)


class RemoveSnapshotsUpdate(TableUpdate):
    action: Literal["remove-snapshots"] = "remove-snapshots"
    snapshot_ids: tuple[int, ...]


class RemoveSnapshotRefUpdate(TableUpdate):
    action: Literal["remove-snapshot-ref"] = "remove-snapshot-ref"
    ref_name: str


class SetLocationUpdate(TableUpdate):
    action: Literal["set-location"] = "set-location"
    location: str


class SetPropertiesUpdate(TableUpdate):
    action: Literal["set-properties"] = "set-properties"
    updates: dict[str, str]


class RemovePropertiesUpdate(TableUpdate):
    action: Literal["remove-properties"] = "remove-properties"
    removals: tuple[str, ...]


class SetStatisticsUpdate(TableUpdate):
    action: Literal["set-statistics"] = "set-statistics"
    statistics: dict[str, Any]  # a statistics-file object as in table metadata

    @computed_field(alias="snapshot-id")  # type: ignore[prop-decorator]
    @property
    def snapshot_id(self) -> int | None:
        """Deprecated in the REST spec (the statistics name their snapshot) but still sent for
        older servers; read from the statistics, never from the request."""
        value = self.statistics.get("snapshot-id")
        return value if isinstance(value, int) else None


class RemoveStatisticsUpdate(TableUpdate):
    action: Literal["remove-statistics"] = "remove-statistics"
    snapshot_id: int


class SetPartitionStatisticsUpdate(TableUpdate):
    action: Literal["set-partition-statistics"] = "set-partition-statistics"
    partition_statistics: dict[str, Any]


class RemovePartitionStatisticsUpdate(TableUpdate):
    action: Literal["remove-partition-statistics"] = "remove-partition-statistics"
    snapshot_id: int


class RemovePartitionSpecsUpdate(TableUpdate):
    action: Literal["remove-partition-specs"] = "remove-partition-specs"
    spec_ids: tuple[int, ...]


class RemoveSchemasUpdate(TableUpdate):
    action: Literal["remove-schemas"] = "remove-schemas"
    schema_ids: tuple[int, ...]


UPDATES: TypeAdapter[TableUpdate] = TypeAdapter(Annotated[
    AssignUUIDUpdate | UpgradeFormatVersionUpdate | AddSchemaUpdate | SetCurrentSchemaUpdate
    | AddPartitionSpecUpdate | SetDefaultSpecUpdate | AddSortOrderUpdate | SetDefaultSortOrderUpdate
    | AddSnapshotUpdate | SetSnapshotRefUpdate | RemoveSnapshotsUpdate | RemoveSnapshotRefUpdate
    | SetLocationUpdate | SetPropertiesUpdate | RemovePropertiesUpdate | SetStatisticsUpdate
    | RemoveStatisticsUpdate | SetPartitionStatisticsUpdate | RemovePartitionStatisticsUpdate
    | RemovePartitionSpecsUpdate | RemoveSchemasUpdate,
    Field(discriminator="action"),
])


# -- requirements --------------------------------------------------------------------------------


class TableRequirement(BaseModel):
    """Base of the commit requirements; ``type`` is the REST discriminator."""

    model_config = REST_MODEL
    type: str

    def to_json(self) -> dict[str, Any]:
        # Nothing is left out: assert-ref-snapshot-id's null snapshot id means "the ref must not exist".
        return self.model_dump(mode="json", by_alias=True)

    def validate(self, metadata: TableMetadata | None) -> None:  # type: ignore[override]
        """Raise CommitConflictError unless ``metadata`` (None: no table) meets the requirement.

        BaseModel's deprecated ``validate`` class method is overridden, as pyiceberg does."""
        raise NotImplementedError

    def _existing(self, metadata: TableMetadata | None) -> TableMetadata:
        if metadata is None:
            raise CommitConflictError("Requirement failed: table does not exist (any more)")
        return metadata


class AssertCreate(TableRequirement):
    type: Literal["assert-create"] = "assert-create"

    def validate(self, metadata: TableMetadata | None) -> None:  # type: ignore[override]
        if metadata is not None:
            raise CommitConflictError("Requirement failed: table already exists")


class AssertTableUUID(TableRequirement):
    type: Literal["assert-table-uuid"] = "assert-table-uuid"
    uuid: str

    def validate(self, metadata: TableMetadata | None) -> None:  # type: ignore[override]
        md = self._existing(metadata)
        if md.table_uuid.lower() != self.uuid.lower():
            raise CommitConflictError(
                f"Requirement failed: UUID does not match: expected {self.uuid} != {md.table_uuid}"
            )


class AssertRefSnapshotId(TableRequirement):
    """The ref points at ``snapshot_id``; ``None`` means the ref must not exist."""

    type: Literal["assert-ref-snapshot-id"] = "assert-ref-snapshot-id"
    ref: str
    snapshot_id: int | None = None

    def validate(self, metadata: TableMetadata | None) -> None:  # type: ignore[override]
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


class AssertLastAssignedFieldId(TableRequirement):
    type: Literal["assert-last-assigned-field-id"] = "assert-last-assigned-field-id"
    last_assigned_field_id: int

    def validate(self, metadata: TableMetadata | None) -> None:  # type: ignore[override]
        md = self._existing(metadata)
        if md.last_column_id != self.last_assigned_field_id:
            raise CommitConflictError(
                f"Requirement failed: last assigned field id changed: "
                f"expected id {self.last_assigned_field_id} != {md.last_column_id}"
            )


class AssertCurrentSchemaId(TableRequirement):
    type: Literal["assert-current-schema-id"] = "assert-current-schema-id"
    current_schema_id: int

    def validate(self, metadata: TableMetadata | None) -> None:  # type: ignore[override]
        md = self._existing(metadata)
        if md.current_schema_id != self.current_schema_id:
            raise CommitConflictError(
                f"Requirement failed: current schema changed: expected id {self.current_schema_id} "
                f"!= {md.current_schema_id}"
            )


class AssertLastAssignedPartitionId(TableRequirement):
    type: Literal["assert-last-assigned-partition-id"] = "assert-last-assigned-partition-id"
    last_assigned_partition_id: int

    def validate(self, metadata: TableMetadata | None) -> None:  # type: ignore[override]
        md = self._existing(metadata)
        if md.last_partition_id != self.last_assigned_partition_id:
            raise CommitConflictError(
                f"Requirement failed: last assigned partition id changed: "
                f"expected id {self.last_assigned_partition_id} != {md.last_partition_id}"
            )


class AssertDefaultSpecId(TableRequirement):
    type: Literal["assert-default-spec-id"] = "assert-default-spec-id"
    default_spec_id: int

    def validate(self, metadata: TableMetadata | None) -> None:  # type: ignore[override]
        md = self._existing(metadata)
        if md.default_spec_id != self.default_spec_id:
            raise CommitConflictError(
                f"Requirement failed: default partition spec changed: expected id {self.default_spec_id} "
                f"!= {md.default_spec_id}"
            )


class AssertDefaultSortOrderId(TableRequirement):
    type: Literal["assert-default-sort-order-id"] = "assert-default-sort-order-id"
    default_sort_order_id: int

    def validate(self, metadata: TableMetadata | None) -> None:  # type: ignore[override]
        md = self._existing(metadata)
        if md.default_sort_order_id != self.default_sort_order_id:
            raise CommitConflictError(
                f"Requirement failed: default sort order changed: expected id {self.default_sort_order_id} "
                f"!= {md.default_sort_order_id}"
            )


REQUIREMENTS: TypeAdapter[TableRequirement] = TypeAdapter(Annotated[
    AssertCreate | AssertTableUUID | AssertRefSnapshotId | AssertLastAssignedFieldId | AssertCurrentSchemaId
    | AssertLastAssignedPartitionId | AssertDefaultSpecId | AssertDefaultSortOrderId,
    Field(discriminator="type"),
])


# -- parsing -------------------------------------------------------------------------------------


def invalid(what: str, error: pydantic.ValidationError) -> TableStoreError:
    """The one error for a malformed update or requirement: the spec's own error when one of its
    objects (a schema, a spec) rejected its JSON, else what is missing or wrong, by JSON name."""
    messages = []
    for detail in error.errors():
        cause = detail.get("ctx", {}).get("error")
        if isinstance(cause, TableStoreError):
            return cause
        # The first step of a location is the discriminator's value: the key path follows it.
        path = ".".join(str(step) for step in detail["loc"][1:])
        if detail["type"] == "missing":
            messages.append(f"{what} is missing {path!r}")
        else:
            messages.append(f"{what}: {path or 'value'}: {detail['msg']}")
    return ValidationError("; ".join(messages))


def update_from_json(obj: Any) -> TableUpdate:
    """Parse one REST update object; ValidationError if it is malformed or unknown."""
    if not isinstance(obj, dict) or not isinstance(obj.get("action"), str):
        raise ValidationError(f"an update must be a JSON object with an 'action', got {obj!r}")
    try:
        return UPDATES.validate_python(obj)
    except pydantic.ValidationError as e:
        if e.errors()[0]["type"] == "union_tag_invalid":
            raise ValidationError(f"unknown table update action {obj['action']!r}") from None
        raise invalid(f"update {obj['action']!r}", e) from None


def requirement_from_json(obj: Any) -> TableRequirement:
    """Parse one REST requirement object; ValidationError if it is malformed or unknown."""
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ValidationError(f"a requirement must be a JSON object with a 'type', got {obj!r}")
    try:
        return REQUIREMENTS.validate_python(obj)
    except pydantic.ValidationError as e:
        if e.errors()[0]["type"] == "union_tag_invalid":
            raise ValidationError(f"unknown table requirement type {obj['type']!r}") from None
        raise invalid(f"requirement {obj['type']!r}", e) from None


def validate_requirements(requirements: list[TableRequirement] | tuple[TableRequirement, ...],
                          metadata: TableMetadata | None) -> None:
    for requirement in requirements:
        requirement.validate(metadata)
