"""Metadata updates and requirements: REST JSON shapes and Java's application semantics."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tablestore.errors import CommitConflictError, ValidationError
from tablestore.spec.metadata.metadata_builder import apply_updates
from tablestore.spec.metadata.table_metadata import (
    MetadataLogEntry,
    Snapshot,
    SnapshotLogEntry,
    SnapshotRef,
    TableMetadata,
    new_table_metadata,
)
from tablestore.spec.metadata.update_models import (
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
)
from tablestore.spec.partitioning.partition_spec import PartitionField, PartitionSpec
from tablestore.spec.partitioning.sort_order import UNSORTED_ORDER, SortField, SortOrder
from tablestore.spec.partitioning.transforms import BucketTransform, IdentityTransform
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import LongType, NestedField, StringType

SCHEMA = Schema((NestedField(1, "id", LongType(), True), NestedField(2, "s", StringType())))
SPEC = PartitionSpec(0, (PartitionField(2, 1000, IdentityTransform(), "s"),))
UUID = "9c12d441-03fe-4693-9a96-a0705ddf69c1"


def _base(**props: str) -> TableMetadata:
    return new_table_metadata(SCHEMA, SPEC, UNSORTED_ORDER, "s3://b/t", dict(props))


def _snap(snapshot_id: int, parent: int | None, seq: int, ts: int = 1_700_000_000_000) -> Snapshot:
    return Snapshot(
        snapshot_id, parent, seq, ts, f"s3://b/t/metadata/snap-{snapshot_id}.avro", {"operation": "append"}, 0
    )


def _commit(
    md: TableMetadata, snapshot_id: int, ts: int | None = None, location: str | None = None
) -> TableMetadata:
    parent = md.current_snapshot_id
    snap = _snap(snapshot_id, parent, md.last_sequence_number + 1, ts or md.last_updated_ms + 1)
    return apply_updates(
        md,
        [AddSnapshotUpdate(snapshot=snap), SetSnapshotRefUpdate(ref_name="main", snapshot_id=snapshot_id, type="branch")],
        metadata_location=location,
    )


UPDATES: list[tuple[TableUpdate, dict[str, Any]]] = [
    (AssignUUIDUpdate(uuid=UUID), {"action": "assign-uuid", "uuid": UUID}),
    (UpgradeFormatVersionUpdate(format_version=2), {"action": "upgrade-format-version", "format-version": 2}),
    (AddSchemaUpdate(schema_=SCHEMA, last_column_id=2), {"action": "add-schema", "schema": SCHEMA.to_json(), "last-column-id": 2}),
    (SetCurrentSchemaUpdate(schema_id=-1), {"action": "set-current-schema", "schema-id": -1}),
    (AddPartitionSpecUpdate(spec=SPEC), {"action": "add-spec", "spec": SPEC.to_json()}),
    (SetDefaultSpecUpdate(spec_id=3), {"action": "set-default-spec", "spec-id": 3}),
    (
        AddSortOrderUpdate(sort_order=SortOrder(1, (SortField(1),))),
        {
            "action": "add-sort-order",
            "sort-order": {
                "order-id": 1,
                "fields": [
                    {"transform": "identity", "source-id": 1, "direction": "asc", "null-order": "nulls-first"}
                ],
            },
        },
    ),
    (SetDefaultSortOrderUpdate(sort_order_id=-1), {"action": "set-default-sort-order", "sort-order-id": -1}),
    (
        AddSnapshotUpdate(snapshot=_snap(5, 4, 3, 77)),
        {
            "action": "add-snapshot",
            "snapshot": {
                "snapshot-id": 5,
                "parent-snapshot-id": 4,
                "sequence-number": 3,
                "timestamp-ms": 77,
                "manifest-list": "s3://b/t/metadata/snap-5.avro",
                "summary": {"operation": "append"},
                "schema-id": 0,
            },
        },
    ),
    (
        SetSnapshotRefUpdate(ref_name="main", snapshot_id=5, type="branch", max_ref_age_ms=None, min_snapshots_to_keep=2),
        {
            "action": "set-snapshot-ref",
            "ref-name": "main",
            "snapshot-id": 5,
            "type": "branch",
            "min-snapshots-to-keep": 2,
        },
    ),
    (RemoveSnapshotsUpdate(snapshot_ids=(1, 2)), {"action": "remove-snapshots", "snapshot-ids": [1, 2]}),
    (RemoveSnapshotRefUpdate(ref_name="tag"), {"action": "remove-snapshot-ref", "ref-name": "tag"}),
    (SetLocationUpdate(location="s3://x"), {"action": "set-location", "location": "s3://x"}),
    (SetPropertiesUpdate(updates={"a": "b"}), {"action": "set-properties", "updates": {"a": "b"}}),
    (RemovePropertiesUpdate(removals=("a",)), {"action": "remove-properties", "removals": ["a"]}),
    (
        SetStatisticsUpdate(
            statistics={
                "snapshot-id": 5,
                "statistics-path": "p",
                "file-size-in-bytes": 1,
                "file-footer-size-in-bytes": 1,
                "blob-metadata": [],
            }
        ),
        {
            "action": "set-statistics",
            "snapshot-id": 5,
            "statistics": {
                "snapshot-id": 5,
                "statistics-path": "p",
                "file-size-in-bytes": 1,
                "file-footer-size-in-bytes": 1,
                "blob-metadata": [],
            },
        },
    ),
    (RemoveStatisticsUpdate(snapshot_id=5), {"action": "remove-statistics", "snapshot-id": 5}),
    (
        SetPartitionStatisticsUpdate(partition_statistics={"snapshot-id": 5, "statistics-path": "p", "file-size-in-bytes": 1}),
        {
            "action": "set-partition-statistics",
            "partition-statistics": {"snapshot-id": 5, "statistics-path": "p", "file-size-in-bytes": 1},
        },
    ),
    (RemovePartitionStatisticsUpdate(snapshot_id=5), {"action": "remove-partition-statistics", "snapshot-id": 5}),
    (RemovePartitionSpecsUpdate(spec_ids=(1,)), {"action": "remove-partition-specs", "spec-ids": [1]}),
    (RemoveSchemasUpdate(schema_ids=(1,)), {"action": "remove-schemas", "schema-ids": [1]}),
]

REQUIREMENTS: list[tuple[TableRequirement, dict[str, Any]]] = [
    (AssertCreate(), {"type": "assert-create"}),
    (AssertTableUUID(uuid=UUID), {"type": "assert-table-uuid", "uuid": UUID}),
    (
        AssertRefSnapshotId(ref="main", snapshot_id=None),
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None},
    ),
    (AssertRefSnapshotId(ref="main", snapshot_id=1), {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 1}),
    (AssertLastAssignedFieldId(last_assigned_field_id=4), {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 4}),
    (AssertCurrentSchemaId(current_schema_id=0), {"type": "assert-current-schema-id", "current-schema-id": 0}),
    (
        AssertLastAssignedPartitionId(last_assigned_partition_id=1000),
        {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 1000},
    ),
    (AssertDefaultSpecId(default_spec_id=0), {"type": "assert-default-spec-id", "default-spec-id": 0}),
    (AssertDefaultSortOrderId(default_sort_order_id=0), {"type": "assert-default-sort-order-id", "default-sort-order-id": 0}),
]


@pytest.mark.parametrize(("update", "obj"), UPDATES, ids=[u.action for u, _ in UPDATES])
def test_update_json(update: TableUpdate, obj: dict[str, Any]) -> None:
    assert update.to_json() == obj
    assert update_from_json(obj) == update


@pytest.mark.parametrize(("requirement", "obj"), REQUIREMENTS, ids=[r.type for r, _ in REQUIREMENTS])
def test_requirement_json(requirement: TableRequirement, obj: dict[str, Any]) -> None:
    assert requirement.to_json() == obj
    assert requirement_from_json(obj) == requirement


def test_pyiceberg_accepts_our_json() -> None:
    from pydantic import TypeAdapter
    from pyiceberg.table.update import TableRequirement as PyRequirement
    from pyiceberg.table.update import TableUpdate as PyUpdate

    updates = TypeAdapter(list[PyUpdate]).validate_python([obj for _, obj in UPDATES])
    assert [u.action for u in updates] == [u.action for u, _ in UPDATES]
    requirements = TypeAdapter(list[PyRequirement]).validate_python([obj for _, obj in REQUIREMENTS])
    assert [r.type for r in requirements] == [r.type for r, _ in REQUIREMENTS]


def test_bad_json() -> None:
    with pytest.raises(ValidationError, match="unknown table update action 'explode'"):
        update_from_json({"action": "explode"})
    with pytest.raises(ValidationError, match="missing 'schema-id'"):
        update_from_json({"action": "set-current-schema"})
    with pytest.raises(ValidationError, match="unknown table requirement"):
        requirement_from_json({"type": "assert-nothing"})
    with pytest.raises(ValidationError, match="^requirement 'assert-table-uuid' is missing 'uuid'$"):
        requirement_from_json({"type": "assert-table-uuid"})
    # A value of the wrong type is named by its JSON path.
    with pytest.raises(ValidationError, match=r"^update 'remove-snapshots': snapshot-ids\.1: Input should be a valid integer"):
        update_from_json({"action": "remove-snapshots", "snapshot-ids": [1, "x"]})
    # An object of the spec that rejects its JSON gives its own error, unwrapped.
    sort_order = {"order-id": 1, "fields": [{"transform": "identity", "source-id": 1, "direction": "up", "null-order": "nulls-first"}]}
    with pytest.raises(ValidationError, match="^unknown sort direction 'up'; use 'asc' or 'desc'$"):
        update_from_json({"action": "add-sort-order", "sort-order": sort_order})
    # JSON-required fields stay required though Python callers name every field anyway.
    with pytest.raises(ValidationError, match="^update 'set-snapshot-ref' is missing 'type'$"):
        update_from_json({"action": "set-snapshot-ref", "ref-name": "main", "snapshot-id": 1})


def test_create_table_from_updates() -> None:
    updates: list[TableUpdate] = [
        AssignUUIDUpdate(uuid=UUID),
        UpgradeFormatVersionUpdate(format_version=2),
        AddSchemaUpdate(schema_=SCHEMA, last_column_id=2),
        SetCurrentSchemaUpdate(schema_id=-1),
        AddPartitionSpecUpdate(spec=SPEC),
        SetDefaultSpecUpdate(spec_id=-1),
        AddSortOrderUpdate(sort_order=UNSORTED_ORDER),
        SetDefaultSortOrderUpdate(sort_order_id=-1),
        SetLocationUpdate(location="s3://b/t"),
        SetPropertiesUpdate(updates={"owner": "me"}),
    ]
    AssertCreate().validate(None)
    md = apply_updates(None, updates)
    assert md.table_uuid == UUID and md.format_version == 2 and md.location == "s3://b/t"
    assert md.schema() == SCHEMA and md.last_column_id == 2
    assert md.spec() == SPEC and md.last_partition_id == 1000
    assert md.sort_order() == UNSORTED_ORDER and md.properties == {"owner": "me"}
    assert md.current_snapshot_id is None and md.metadata_log == ()
    with pytest.raises(CommitConflictError, match="^Requirement failed: table already exists$"):
        AssertCreate().validate(md)
    with pytest.raises(ValidationError, match="location"):
        apply_updates(None, updates[:-2])
    v1 = apply_updates(None, [UpgradeFormatVersionUpdate(format_version=1), *updates[2:]])
    assert v1.format_version == 1 and len(v1.table_uuid) == 36


def test_schema_evolution() -> None:
    md = _base()
    evolved = Schema((*SCHEMA.fields, NestedField(3, "n", LongType())), schema_id=0)
    new = apply_updates(md, [AddSchemaUpdate(schema_=evolved, last_column_id=3), SetCurrentSchemaUpdate(schema_id=-1)])
    assert new.current_schema_id == 1 and new.schema().schema_id == 1 and new.last_column_id == 3
    assert [s.schema_id for s in new.schemas] == [0, 1]
    assert new.last_updated_ms >= md.last_updated_ms
    # an identical schema is reused, not added again
    again = apply_updates(new, [AddSchemaUpdate(schema_=SCHEMA), SetCurrentSchemaUpdate(schema_id=-1)])
    assert again.current_schema_id == 0 and len(again.schemas) == 2
    with pytest.raises(ValidationError, match="unknown schema id 7"):
        apply_updates(md, [SetCurrentSchemaUpdate(schema_id=7)])
    with pytest.raises(ValidationError, match="no current schema was added"):
        apply_updates(md, [SetCurrentSchemaUpdate(schema_id=-1)])
    # Java's rule: the deprecated last-column-id of AddSchema is not checked, and the table's
    # never goes down (a REPLACE TABLE with fewer columns sends the new schema's highest id).
    narrower = Schema((SCHEMA.fields[0],), schema_id=0)
    replaced = apply_updates(new, [AddSchemaUpdate(schema_=narrower, last_column_id=1), SetCurrentSchemaUpdate(schema_id=-1)])
    assert replaced.schema().fields == (SCHEMA.fields[0],) and replaced.last_column_id == 3
    assert apply_updates(md, [AddSchemaUpdate(schema_=evolved, last_column_id=10**9)]).last_column_id == 3
    with pytest.raises(ValidationError, match="cannot remove the current schema 1"):
        apply_updates(new, [RemoveSchemasUpdate(schema_ids=(1,))])
    assert apply_updates(new, [RemoveSchemasUpdate(schema_ids=(0,))]).schemas == (new.schema(),)


def test_spec_and_sort_order_evolution() -> None:
    md = _base()
    spec = PartitionSpec(0, (PartitionField(1, 1001, BucketTransform(4), "id_bucket"),))
    order = SortOrder(1, (SortField(2),))
    new = apply_updates(
        md,
        [
            AddPartitionSpecUpdate(spec=spec),
            SetDefaultSpecUpdate(spec_id=-1),
            AddSortOrderUpdate(sort_order=order),
            SetDefaultSortOrderUpdate(sort_order_id=-1),
        ],
    )
    assert new.default_spec_id == 1 and new.spec().fields == spec.fields and new.last_partition_id == 1001
    assert new.default_sort_order_id == 1 and new.sort_order() == order
    same = apply_updates(new, [AddPartitionSpecUpdate(spec=SPEC), SetDefaultSpecUpdate(spec_id=-1)])
    assert same.default_spec_id == 0 and len(same.partition_specs) == 2
    with pytest.raises(ValidationError, match="unknown spec id 9"):
        apply_updates(md, [SetDefaultSpecUpdate(spec_id=9)])
    with pytest.raises(ValidationError, match="unknown sort order id 4"):
        apply_updates(md, [SetDefaultSortOrderUpdate(sort_order_id=4)])
    with pytest.raises(ValidationError, match="column id 42"):
        apply_updates(
            md,
            [AddPartitionSpecUpdate(spec=PartitionSpec(0, (PartitionField(42, 1001, IdentityTransform(), "x"),)))],
        )
    with pytest.raises(ValidationError, match="cannot remove the default partition spec 1"):
        apply_updates(new, [RemovePartitionSpecsUpdate(spec_ids=(1,))])


def test_snapshots_refs_and_logs() -> None:
    md = _base()
    one = _commit(md, 1, ts=md.last_updated_ms + 10, location="s3://b/t/metadata/00000.metadata.json")
    assert one.current_snapshot_id == 1 and one.last_sequence_number == 1
    assert one.refs == {"main": SnapshotRef(1, "branch")}
    assert one.snapshot_log == (SnapshotLogEntry(md.last_updated_ms + 10, 1),)
    assert one.last_updated_ms == md.last_updated_ms + 10
    assert one.metadata_log == (
        MetadataLogEntry(md.last_updated_ms, "s3://b/t/metadata/00000.metadata.json"),
    )

    two = _commit(one, 2, location="s3://b/t/metadata/00001.metadata.json")
    assert [e.snapshot_id for e in two.snapshot_log] == [1, 2] and len(two.metadata_log) == 2
    tagged = apply_updates(two, [SetSnapshotRefUpdate(ref_name="v1", snapshot_id=1, type="tag")])
    assert tagged.refs["v1"] == SnapshotRef(1, "tag") and tagged.current_snapshot_id == 2
    assert tagged.snapshot_log == two.snapshot_log  # only main moves the log

    # stale sequence number: another branch's commit took it, a conflict that a retry resolves
    with pytest.raises(
        CommitConflictError, match="sequence number 2: it must be greater than the last sequence number 2"
    ):
        apply_updates(two, [AddSnapshotUpdate(snapshot=_snap(3, 2, 2))])
    with pytest.raises(ValidationError, match="already exists"):
        apply_updates(two, [AddSnapshotUpdate(snapshot=_snap(2, 1, 3))])
    with pytest.raises(ValidationError, match="unknown snapshot 9"):
        apply_updates(two, [SetSnapshotRefUpdate(ref_name="main", snapshot_id=9, type="branch")])

    # expiring snapshot 1 drops the tag on it and the log before it
    expired = apply_updates(tagged, [RemoveSnapshotsUpdate(snapshot_ids=(1,))])
    assert [s.snapshot_id for s in expired.snapshots] == [2]
    assert "v1" not in expired.refs and expired.refs["main"].snapshot_id == 2
    assert [e.snapshot_id for e in expired.snapshot_log] == [2]
    # removing the current snapshot removes main
    gone = apply_updates(two, [RemoveSnapshotsUpdate(snapshot_ids=(2,))])
    assert gone.current_snapshot_id is None and "main" not in gone.refs
    removed = apply_updates(tagged, [RemoveSnapshotRefUpdate(ref_name="v1")])
    assert "v1" not in removed.refs


def test_intermediate_snapshots_are_not_logged() -> None:
    md = _base()
    a, b = _snap(1, None, 1, md.last_updated_ms + 1), _snap(2, 1, 2, md.last_updated_ms + 2)
    new = apply_updates(
        md,
        [
            AddSnapshotUpdate(snapshot=a),
            SetSnapshotRefUpdate(ref_name="main", snapshot_id=1, type="branch"),
            AddSnapshotUpdate(snapshot=b),
            SetSnapshotRefUpdate(ref_name="main", snapshot_id=2, type="branch"),
        ],
    )
    assert [e.snapshot_id for e in new.snapshot_log] == [2]


def test_metadata_log_is_trimmed() -> None:
    md = _base(**{"write.metadata.previous-versions-max": "2"})
    for i in range(5):
        md = _commit(md, i + 1, location=f"m{i}.json")
    assert [e.metadata_file for e in md.metadata_log] == ["m3.json", "m4.json"]


def test_properties_location_uuid_and_versions() -> None:
    md = _base(a="1", b="2")
    new = apply_updates(md, [SetPropertiesUpdate(updates={"c": "3"}), RemovePropertiesUpdate(removals=("a", "missing"))])
    assert new.properties == {"b": "2", "c": "3"}
    assert apply_updates(md, [SetLocationUpdate(location="s3://other/t")]).location == "s3://other/t"
    assert apply_updates(md, [AssignUUIDUpdate(uuid=md.table_uuid.upper())]) is md  # no change
    with pytest.raises(ValidationError, match="cannot reassign the table uuid"):
        apply_updates(md, [AssignUUIDUpdate(uuid=str(uuid.uuid4()))])
    v1 = new_table_metadata(SCHEMA, SPEC, UNSORTED_ORDER, "/t", format_version=1)
    assert apply_updates(v1, [UpgradeFormatVersionUpdate(format_version=2)]).format_version == 2
    with pytest.raises(ValidationError, match="cannot downgrade a v2 table to v1"):
        apply_updates(md, [UpgradeFormatVersionUpdate(format_version=1)])
    v3 = apply_updates(md, [UpgradeFormatVersionUpdate(format_version=3)])
    # Spec, "Row Lineage for Upgraded Tables": next-row-id starts at 0 on the upgrade.
    assert (v3.format_version, v3.next_row_id, md.next_row_id) == (3, 0, None)
    assert v3.to_json()["next-row-id"] == 0
    with pytest.raises(ValidationError, match="format versions 1, 2 and 3, not 4"):
        apply_updates(md, [UpgradeFormatVersionUpdate(format_version=4)])


def test_no_op_returns_base() -> None:
    md = _base(a="1")
    assert (
        apply_updates(
            md,
            [SetDefaultSpecUpdate(spec_id=0), SetCurrentSchemaUpdate(schema_id=0), RemovePropertiesUpdate(removals=("x",))],
            metadata_location="old.json",
        )
        is md
    )


def test_statistics_updates() -> None:
    md = _commit(_base(), 1)
    stats = {
        "snapshot-id": 1,
        "statistics-path": "s3://b/s.puffin",
        "file-size-in-bytes": 10,
        "file-footer-size-in-bytes": 5,
        "blob-metadata": [],
    }
    new = apply_updates(
        md,
        [
            SetStatisticsUpdate(statistics=stats),
            SetPartitionStatisticsUpdate(partition_statistics={"snapshot-id": 1, "statistics-path": "p", "file-size-in-bytes": 3}),
        ],
    )
    assert new.statistics == (stats,) and len(new.partition_statistics) == 1
    assert (
        apply_updates(new, [RemoveStatisticsUpdate(snapshot_id=1), RemovePartitionStatisticsUpdate(snapshot_id=1)]).statistics == ()
    )
    # expiring the snapshot drops its statistics too
    later = _commit(new, 2)
    assert apply_updates(later, [RemoveSnapshotsUpdate(snapshot_ids=(1,))]).partition_statistics == ()


def test_requirements() -> None:
    md = _commit(_commit(_base(), 1), 2)
    for ok in (
        AssertTableUUID(uuid=md.table_uuid),
        AssertRefSnapshotId(ref="main", snapshot_id=2),
        AssertRefSnapshotId(ref="dev", snapshot_id=None),
        AssertLastAssignedFieldId(last_assigned_field_id=2),
        AssertCurrentSchemaId(current_schema_id=0),
        AssertLastAssignedPartitionId(last_assigned_partition_id=1000),
        AssertDefaultSpecId(default_spec_id=0),
        AssertDefaultSortOrderId(default_sort_order_id=0),
    ):
        ok.validate(md)
    failures: list[tuple[TableRequirement, str]] = [
        (AssertRefSnapshotId(ref="main", snapshot_id=1), "Requirement failed: branch main has changed: expected id 1 != 2"),
        (AssertRefSnapshotId(ref="main", snapshot_id=None), "Requirement failed: branch main was created concurrently"),
        (AssertRefSnapshotId(ref="dev", snapshot_id=1), "Requirement failed: branch or tag dev is missing, expected 1"),
        (AssertTableUUID(uuid=UUID), f"Requirement failed: UUID does not match: expected {UUID} != {md.table_uuid}"),
        (AssertLastAssignedFieldId(last_assigned_field_id=5), "Requirement failed: last assigned field id changed: expected id 5 != 2"),
        (AssertCurrentSchemaId(current_schema_id=3), "Requirement failed: current schema changed: expected id 3 != 0"),
        (AssertLastAssignedPartitionId(last_assigned_partition_id=1001),
         "Requirement failed: last assigned partition id changed: expected id 1001 != 1000"),
        (AssertDefaultSpecId(default_spec_id=1), "Requirement failed: default partition spec changed: expected id 1 != 0"),
        (AssertDefaultSortOrderId(default_sort_order_id=1), "Requirement failed: default sort order changed: expected id 1 != 0"),
    ]
    # Java's UpdateRequirement messages, word for word (the REST compatibility kit matches them).
    for requirement, message in failures:
        with pytest.raises(CommitConflictError) as info:
            requirement.validate(md)
        assert str(info.value) == message
    with pytest.raises(CommitConflictError, match="does not exist"):
        AssertRefSnapshotId(ref="main", snapshot_id=1).validate(None)


def test_matches_pyiceberg_semantics() -> None:
    """Apply the same commit with pyiceberg and compare the interesting outcomes."""
    from pyiceberg.table.metadata import TableMetadataUtil, TableMetadataV2
    from pyiceberg.table.update import update_table_metadata

    from tablestore.spec.metadata.table_metadata import serialize_metadata

    md = _commit(_base(), 1)
    snap = _snap(2, 1, 2, md.last_updated_ms + 5)
    ours = apply_updates(
        md,
        [AddSnapshotUpdate(snapshot=snap), SetSnapshotRefUpdate(ref_name="main", snapshot_id=2, type="branch"), SetPropertiesUpdate(updates={"x": "y"})],
        metadata_location="prev.json",
    )
    py_base = TableMetadataUtil.parse_raw(serialize_metadata(md).decode())
    from pyiceberg.table.update import AddSnapshotUpdate as PyAdd
    from pyiceberg.table.update import SetPropertiesUpdate as PyProps
    from pyiceberg.table.update import SetSnapshotRefUpdate as PyRef

    py_snap = TableMetadataUtil.parse_raw(serialize_metadata(ours).decode()).snapshot_by_id(2)
    assert py_snap is not None
    theirs = update_table_metadata(
        py_base,
        (
            PyAdd(snapshot=py_snap),
            # By the JSON names: pyiceberg's models take the aliases, which mypy checks.
            PyRef.model_validate({"ref-name": "main", "type": "branch", "snapshot-id": 2}),
            PyProps(updates={"x": "y"}),
        ),
        metadata_location="prev.json",
    )
    assert isinstance(theirs, TableMetadataV2)
    assert ours.current_snapshot_id == theirs.current_snapshot_id == 2
    assert ours.last_sequence_number == theirs.last_sequence_number == 2
    assert ours.last_updated_ms == theirs.last_updated_ms == snap.timestamp_ms
    assert [(e.snapshot_id, e.timestamp_ms) for e in ours.snapshot_log] == [
        (e.snapshot_id, e.timestamp_ms) for e in theirs.snapshot_log
    ]
    assert [(e.metadata_file, e.timestamp_ms) for e in ours.metadata_log] == [
        (e.metadata_file, e.timestamp_ms) for e in theirs.metadata_log
    ]
    assert ours.properties == theirs.properties
