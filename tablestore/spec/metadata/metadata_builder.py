"""Applying metadata updates: the semantics of Java's ``TableMetadata.Builder``.

- ``-1`` as a schema, spec or sort order id means "the one added last in this commit";
- an added schema, spec or sort order identical to an existing one reuses its id; new ids are
  the highest so far plus one (sort orders count from 1; 0 is the unsorted order);
- add-snapshot checks the sequence number (greater than the last one in v2, unless the snapshot
  has no parent) and sets last-updated-ms to the snapshot's timestamp;
- setting ``main`` moves the current snapshot and appends to the snapshot log; removing
  snapshots removes the refs and statistics pointing at them and trims the snapshot log;
- the previous metadata file is appended to the metadata log, trimmed to
  ``write.metadata.previous-versions-max`` (default 100); last-updated-ms never goes backwards.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any

from tablestore.errors import CommitConflictError, ValidationError
from tablestore.spec.metadata.table_metadata import (
    INITIAL_SEQUENCE_NUMBER,
    MAIN_BRANCH,
    METADATA_PREVIOUS_VERSIONS_MAX,
    METADATA_PREVIOUS_VERSIONS_MAX_DEFAULT,
    PARTITION_FIELD_ID_START,
    ROW_LINEAGE_VERSION,
    SUPPORTED_WRITE_VERSIONS,
    MetadataLogEntry,
    SnapshotLogEntry,
    SnapshotRef,
    TableMetadata,
    int_property,
    now_ms,
)
from tablestore.spec.metadata.update_models import (
    AddPartitionSpecUpdate,
    AddSchemaUpdate,
    AddSnapshotUpdate,
    AddSortOrderUpdate,
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
    TableUpdate,
    UpgradeFormatVersionUpdate,
)
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.partitioning.sort_order import SortOrder
from tablestore.spec.schemas.schema import DEFAULT_FORMAT_VERSION, Schema, check_format_version_types


@dataclass
class _Builder:
    """Mutable working copy of the metadata while updates are applied (Java's Builder)."""

    md: dict[str, Any]
    last_added_schema_id: int | None = None
    last_added_spec_id: int | None = None
    last_added_order_id: int | None = None
    added_snapshot_ids: set[int] = field(default_factory=set)
    main_heads: list[int] = field(default_factory=list)  # snapshots set as main in this commit
    removed_snapshots: bool = False
    last_updated_ms: int | None = None
    changed: bool = False


_EMPTY: dict[str, Any] = {
    "format_version": DEFAULT_FORMAT_VERSION, "table_uuid": None, "location": None,
    "last_sequence_number": INITIAL_SEQUENCE_NUMBER, "last_updated_ms": 0, "last_column_id": 0,
    "schemas": (), "current_schema_id": -1, "partition_specs": (), "default_spec_id": -1,
    "last_partition_id": PARTITION_FIELD_ID_START - 1, "properties": {}, "current_snapshot_id": None,
    "snapshots": (), "snapshot_log": (), "metadata_log": (), "sort_orders": (), "default_sort_order_id": -1,
    "refs": {}, "statistics": (), "partition_statistics": (), "next_row_id": None, "extra": {},
}


def apply_updates(
    base: TableMetadata | None,
    updates: list[TableUpdate] | tuple[TableUpdate, ...],
    metadata_location: str | None = None,
) -> TableMetadata:
    """The metadata after ``updates``; ``base`` None builds a new table from the updates.

    ``metadata_location`` is the file ``base`` was read from; it is appended to the metadata log
    (trimmed to ``write.metadata.previous-versions-max``). Invalid updates raise ValidationError.
    If nothing changes, ``base`` is returned as is.
    """
    if base is None:
        md = dict(_EMPTY)
        # A create may set its format version up front; there is nothing to "downgrade" yet.
        first = next((u for u in updates if isinstance(u, UpgradeFormatVersionUpdate)), None)
        if first is not None:
            _check_writable_version(first.format_version)
            md["format_version"] = first.format_version
            if first.format_version >= ROW_LINEAGE_VERSION:
                md["next_row_id"] = 0
    else:
        md = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    b = _Builder(md)
    for update in updates:
        handler = _HANDLERS.get(type(update))
        if handler is None:
            raise ValidationError(f"unsupported table update {update!r}")
        handler(b, update)
    if base is not None and not b.changed:
        return base
    return _finish(base, b, metadata_location)


def _check_writable_version(version: int) -> None:
    if version not in SUPPORTED_WRITE_VERSIONS:
        raise ValidationError(f"tablestore writes table format versions 1, 2 and 3, not {version}")


def _assign_uuid(b: _Builder, u: AssignUUIDUpdate) -> None:
    try:
        new = str(uuid.UUID(u.uuid))
    except ValueError as e:
        raise ValidationError(f"{u.uuid!r} is not a valid uuid") from e
    current = b.md["table_uuid"]
    if current is not None and current.lower() == new:
        return
    if current is not None:
        raise ValidationError(f"cannot reassign the table uuid {current} to {new}")
    b.md["table_uuid"] = new
    b.changed = True


def _upgrade_format_version(b: _Builder, u: UpgradeFormatVersionUpdate) -> None:
    current = b.md["format_version"]
    if u.format_version == current:
        return
    if u.format_version < current:
        raise ValidationError(f"cannot downgrade a v{current} table to v{u.format_version}")
    _check_writable_version(u.format_version)
    b.md["format_version"] = u.format_version
    if u.format_version >= ROW_LINEAGE_VERSION and b.md["next_row_id"] is None:
        # Spec, "Row Lineage for Upgraded Tables": next-row-id starts at 0 and existing
        # snapshots keep no first-row-id; the first snapshot after the upgrade assigns ids.
        b.md["next_row_id"] = 0
    b.changed = True


def _add_schema(b: _Builder, u: AddSchemaUpdate) -> None:
    md = b.md
    # As Java's TableMetadata.Builder: the table's last column id only grows, to the new
    # schema's highest id. The update's own last-column-id is deprecated in the REST spec and
    # not trusted: Java sends the new schema's highest id, lower than the table's after a
    # REPLACE TABLE with fewer columns, and a value above every id would skip ids for nothing.
    new_last = max(md["last_column_id"], u.schema_.highest_field_id())
    schemas: tuple[Schema, ...] = md["schemas"]
    same = next((s for s in schemas if _same_schema(s, u.schema_)), None)
    if same is not None:
        schema_id = same.schema_id
    else:
        schema_id = max((s.schema_id for s in schemas), default=-1) + 1
        md["schemas"] = (*schemas, u.schema_.with_id(schema_id))
        b.changed = True
    if new_last != md["last_column_id"]:
        md["last_column_id"] = new_last
        b.changed = True
    b.last_added_schema_id = schema_id


def _same_schema(a: Schema, b: Schema) -> bool:
    return a.fields == b.fields and tuple(a.identifier_field_ids) == tuple(b.identifier_field_ids)


def _resolve_last(requested: int, last_added: int | None, what: str) -> int:
    if requested != -1:
        return requested
    if last_added is None:
        raise ValidationError(
            f"cannot set the {what} to the last added one: no {what} was added in this commit"
        )
    return last_added


def _set_current_schema(b: _Builder, u: SetCurrentSchemaUpdate) -> None:
    schema_id = _resolve_last(u.schema_id, b.last_added_schema_id, "current schema")
    if not any(s.schema_id == schema_id for s in b.md["schemas"]):
        raise ValidationError(f"cannot set the current schema to unknown schema id {schema_id}")
    if schema_id != b.md["current_schema_id"]:
        b.md["current_schema_id"] = schema_id
        b.changed = True


def _spec_key(spec: PartitionSpec) -> tuple[Any, ...]:
    return tuple((f.source_id, f.field_id, str(f.transform), f.name) for f in spec.fields)


def _add_spec(b: _Builder, u: AddPartitionSpecUpdate) -> None:
    md = b.md
    schemas: tuple[Schema, ...] = md["schemas"]
    current = next((s for s in schemas if s.schema_id == md["current_schema_id"]), None)
    if current is not None:
        for f in u.spec.fields:
            if not current.has_field(f.source_id):
                raise ValidationError(
                    f"partition field {f.name!r} refers to column id {f.source_id}, "
                    "which is not in the current schema"
                )
    specs: tuple[PartitionSpec, ...] = md["partition_specs"]
    same = next((s for s in specs if _spec_key(s) == _spec_key(u.spec)), None)
    if same is not None:
        spec_id = same.spec_id
    else:
        spec_id = max((s.spec_id for s in specs), default=-1) + 1
        md["partition_specs"] = (*specs, PartitionSpec(spec_id, tuple(u.spec.fields)))
        b.changed = True
    highest = max((f.field_id for f in u.spec.fields), default=PARTITION_FIELD_ID_START - 1)
    if highest > md["last_partition_id"]:
        md["last_partition_id"] = highest
        b.changed = True
    b.last_added_spec_id = spec_id


def _set_default_spec(b: _Builder, u: SetDefaultSpecUpdate) -> None:
    spec_id = _resolve_last(u.spec_id, b.last_added_spec_id, "default partition spec")
    if not any(s.spec_id == spec_id for s in b.md["partition_specs"]):
        raise ValidationError(f"cannot set the default partition spec to unknown spec id {spec_id}")
    if spec_id != b.md["default_spec_id"]:
        b.md["default_spec_id"] = spec_id
        b.changed = True


def _order_key(order: SortOrder) -> tuple[Any, ...]:
    return tuple((f.source_id, str(f.transform), str(f.direction), str(f.null_order)) for f in order.fields)


def _add_sort_order(b: _Builder, u: AddSortOrderUpdate) -> None:
    orders: tuple[SortOrder, ...] = b.md["sort_orders"]
    key = _order_key(u.sort_order)
    same = next((o for o in orders if _order_key(o) == key), None)
    if same is not None:
        order_id = same.order_id
    else:
        # Id 0 is reserved for the unsorted order; others count from 1.
        order_id = 0 if not key else max((o.order_id for o in orders), default=0) + 1
        b.md["sort_orders"] = (*orders, SortOrder(order_id, tuple(u.sort_order.fields)))
        b.changed = True
    b.last_added_order_id = order_id


def _set_default_sort_order(b: _Builder, u: SetDefaultSortOrderUpdate) -> None:
    order_id = _resolve_last(u.sort_order_id, b.last_added_order_id, "default sort order")
    if not any(o.order_id == order_id for o in b.md["sort_orders"]):
        raise ValidationError(f"cannot set the default sort order to unknown sort order id {order_id}")
    if order_id != b.md["default_sort_order_id"]:
        b.md["default_sort_order_id"] = order_id
        b.changed = True


def _add_snapshot(b: _Builder, u: AddSnapshotUpdate) -> None:
    md, snap = b.md, u.snapshot
    required = (("schemas", "schema"), ("partition_specs", "partition spec"), ("sort_orders", "sort order"))
    for key, what in required:
        if not md[key]:
            raise ValidationError(f"cannot add a snapshot before a {what} is added")
    if any(s.snapshot_id == snap.snapshot_id for s in md["snapshots"]):
        raise ValidationError(f"a snapshot with id {snap.snapshot_id} already exists")
    # As in Java: a snapshot without a parent (replacing the table) is exempt.
    if md["format_version"] >= 2 and snap.parent_snapshot_id is not None \
            and snap.sequence_number <= md["last_sequence_number"]:
        # Sequence numbers and row ids are the table's, not a branch's: a commit to another
        # branch took this one meanwhile, which no ref requirement sees. A retry restages it.
        raise CommitConflictError(
            f"cannot add snapshot {snap.snapshot_id} with sequence number {snap.sequence_number}: "
            f"it must be greater than the last sequence number {md['last_sequence_number']} "
            "(another commit landed meanwhile; retry on the refreshed table)"
        )
    if md["format_version"] >= 3 and md["next_row_id"] is not None:
        if snap.first_row_id is None:
            raise ValidationError(f"snapshot {snap.snapshot_id} of a format v3 table needs a first-row-id")
        if snap.first_row_id < md["next_row_id"]:
            raise CommitConflictError(
                f"snapshot {snap.snapshot_id} needs a first-row-id of at least {md['next_row_id']} "
                "(another commit landed meanwhile; retry on the refreshed table)"
            )
        md["next_row_id"] = md["next_row_id"] + (snap.added_rows or 0)
    md["snapshots"] = (*md["snapshots"], snap)
    md["last_sequence_number"] = snap.sequence_number
    b.last_updated_ms = snap.timestamp_ms
    b.added_snapshot_ids.add(snap.snapshot_id)
    b.changed = True


def _set_snapshot_ref(b: _Builder, u: SetSnapshotRefUpdate) -> None:
    md = b.md
    ref = u.to_ref()
    refs: dict[str, SnapshotRef] = md["refs"]
    if refs.get(u.ref_name) == ref:
        return
    snap = next((s for s in md["snapshots"] if s.snapshot_id == ref.snapshot_id), None)
    if snap is None:
        raise ValidationError(f"cannot set {u.ref_name} to unknown snapshot {ref.snapshot_id}")
    if ref.snapshot_id in b.added_snapshot_ids:
        b.last_updated_ms = snap.timestamp_ms
    if u.ref_name == MAIN_BRANCH:
        if ref.type != "branch":
            raise ValidationError("main must be a branch, not a tag")
        md["current_snapshot_id"] = ref.snapshot_id
        if b.last_updated_ms is None:
            b.last_updated_ms = now_ms()
        md["snapshot_log"] = (*md["snapshot_log"], SnapshotLogEntry(b.last_updated_ms, ref.snapshot_id))
        b.main_heads.append(ref.snapshot_id)
    md["refs"] = {**refs, u.ref_name: ref}
    b.changed = True


def _remove_snapshots(b: _Builder, u: RemoveSnapshotsUpdate) -> None:
    md = b.md
    ids = set(u.snapshot_ids)
    kept = tuple(s for s in md["snapshots"] if s.snapshot_id not in ids)
    if len(kept) == len(md["snapshots"]):
        return  # ids not in the table are ignored, as in Java
    md["snapshots"] = kept
    md["statistics"] = tuple(s for s in md["statistics"] if s.get("snapshot-id") not in ids)
    md["partition_statistics"] = tuple(
        s for s in md["partition_statistics"] if s.get("snapshot-id") not in ids
    )
    live = {s.snapshot_id for s in kept}
    for name, ref in list(md["refs"].items()):
        if ref.snapshot_id not in live:
            _remove_snapshot_ref(b, RemoveSnapshotRefUpdate(ref_name=name))
    b.removed_snapshots = True
    b.changed = True


def _remove_snapshot_ref(b: _Builder, u: RemoveSnapshotRefUpdate) -> None:
    refs: dict[str, SnapshotRef] = b.md["refs"]
    if u.ref_name not in refs:
        return
    if u.ref_name == MAIN_BRANCH:
        b.md["current_snapshot_id"] = None
    b.md["refs"] = {k: v for k, v in refs.items() if k != u.ref_name}
    b.changed = True


def _set_location(b: _Builder, u: SetLocationUpdate) -> None:
    if not u.location:
        raise ValidationError("the table location cannot be empty")
    if u.location != b.md["location"]:
        b.md["location"] = u.location
        b.changed = True


def _set_properties(b: _Builder, u: SetPropertiesUpdate) -> None:
    for k, v in u.updates.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValidationError(f"table properties map strings to strings; got {k!r}: {v!r}")
    if u.updates:
        b.md["properties"] = {**b.md["properties"], **u.updates}
        b.changed = True


def _remove_properties(b: _Builder, u: RemovePropertiesUpdate) -> None:
    props: dict[str, str] = b.md["properties"]
    if any(k in props for k in u.removals):
        b.md["properties"] = {k: v for k, v in props.items() if k not in set(u.removals)}
        b.changed = True


def _set_statistics(b: _Builder, u: SetStatisticsUpdate) -> None:
    sid = u.statistics.get("snapshot-id")
    if not isinstance(sid, int):
        raise ValidationError("a statistics file needs an integer snapshot-id")
    b.md["statistics"] = (*(s for s in b.md["statistics"] if s.get("snapshot-id") != sid), dict(u.statistics))
    b.changed = True


def _remove_statistics(b: _Builder, u: RemoveStatisticsUpdate) -> None:
    kept = tuple(s for s in b.md["statistics"] if s.get("snapshot-id") != u.snapshot_id)
    if len(kept) != len(b.md["statistics"]):
        b.md["statistics"] = kept
        b.changed = True


def _set_partition_statistics(b: _Builder, u: SetPartitionStatisticsUpdate) -> None:
    sid = u.partition_statistics.get("snapshot-id")
    if not isinstance(sid, int):
        raise ValidationError("a partition statistics file needs an integer snapshot-id")
    others = (s for s in b.md["partition_statistics"] if s.get("snapshot-id") != sid)
    b.md["partition_statistics"] = (*others, dict(u.partition_statistics))
    b.changed = True


def _remove_partition_statistics(b: _Builder, u: RemovePartitionStatisticsUpdate) -> None:
    kept = tuple(s for s in b.md["partition_statistics"] if s.get("snapshot-id") != u.snapshot_id)
    if len(kept) != len(b.md["partition_statistics"]):
        b.md["partition_statistics"] = kept
        b.changed = True


def _remove_partition_specs(b: _Builder, u: RemovePartitionSpecsUpdate) -> None:
    if b.md["default_spec_id"] in u.spec_ids:
        raise ValidationError(f"cannot remove the default partition spec {b.md['default_spec_id']}")
    kept = tuple(s for s in b.md["partition_specs"] if s.spec_id not in u.spec_ids)
    if len(kept) != len(b.md["partition_specs"]):
        b.md["partition_specs"] = kept
        b.changed = True


def _remove_schemas(b: _Builder, u: RemoveSchemasUpdate) -> None:
    if b.md["current_schema_id"] in u.schema_ids:
        raise ValidationError(f"cannot remove the current schema {b.md['current_schema_id']}")
    kept = tuple(s for s in b.md["schemas"] if s.schema_id not in u.schema_ids)
    if len(kept) != len(b.md["schemas"]):
        b.md["schemas"] = kept
        b.changed = True


_HANDLERS: dict[type, Any] = {
    AssignUUIDUpdate: _assign_uuid,
    UpgradeFormatVersionUpdate: _upgrade_format_version,
    AddSchemaUpdate: _add_schema,
    SetCurrentSchemaUpdate: _set_current_schema,
    AddPartitionSpecUpdate: _add_spec,
    SetDefaultSpecUpdate: _set_default_spec,
    AddSortOrderUpdate: _add_sort_order,
    SetDefaultSortOrderUpdate: _set_default_sort_order,
    AddSnapshotUpdate: _add_snapshot,
    SetSnapshotRefUpdate: _set_snapshot_ref,
    RemoveSnapshotsUpdate: _remove_snapshots,
    RemoveSnapshotRefUpdate: _remove_snapshot_ref,
    SetLocationUpdate: _set_location,
    SetPropertiesUpdate: _set_properties,
    RemovePropertiesUpdate: _remove_properties,
    SetStatisticsUpdate: _set_statistics,
    RemoveStatisticsUpdate: _remove_statistics,
    SetPartitionStatisticsUpdate: _set_partition_statistics,
    RemovePartitionStatisticsUpdate: _remove_partition_statistics,
    RemovePartitionSpecsUpdate: _remove_partition_specs,
    RemoveSchemasUpdate: _remove_schemas,
}


def _finish(base: TableMetadata | None, b: _Builder, metadata_location: str | None) -> TableMetadata:
    md = b.md
    if md["location"] is None:
        raise ValidationError("a new table needs a location (set-location)")
    if not md["schemas"] or not any(s.schema_id == md["current_schema_id"] for s in md["schemas"]):
        raise ValidationError("the table has no current schema (add-schema and set-current-schema)")
    if not any(s.spec_id == md["default_spec_id"] for s in md["partition_specs"]):
        raise ValidationError("the table has no default partition spec (add-spec and set-default-spec)")
    if not any(o.order_id == md["default_sort_order_id"] for o in md["sort_orders"]):
        raise ValidationError(
            "the table has no default sort order (add-sort-order and set-default-sort-order)"
        )
    if md["table_uuid"] is None:
        md["table_uuid"] = str(uuid.uuid4())
    # Schemas this commit adds (or all of them, when it upgrades the format version) must use
    # only types of the table's format version; schemas already there stay readable as they are.
    known = () if base is None or base.format_version != md["format_version"] else base.schemas
    for schema in md["schemas"]:
        if schema not in known:
            check_format_version_types(schema, md["format_version"])

    # last-updated-ms moves to the commit's snapshot time (or now) and never backwards.
    updated = b.last_updated_ms if b.last_updated_ms is not None else now_ms()
    if base is not None:
        updated = max(updated, base.last_updated_ms)
    md["last_updated_ms"] = updated

    current = md["current_snapshot_id"]
    intermediate = {sid for sid in b.main_heads if sid in b.added_snapshot_ids and sid != current}
    if b.removed_snapshots or intermediate:
        md["snapshot_log"] = _clean_snapshot_log(md, intermediate)

    if base is not None and metadata_location:
        limit = int_property(md["properties"], METADATA_PREVIOUS_VERSIONS_MAX)
        if limit is None:
            limit = METADATA_PREVIOUS_VERSIONS_MAX_DEFAULT
        log = list(md["metadata_log"])
        log.append(MetadataLogEntry(base.last_updated_ms, metadata_location))
        md["metadata_log"] = tuple(log[-max(1, limit):])
    return TableMetadata(**md)


def _clean_snapshot_log(md: dict[str, Any], intermediate: set[int]) -> tuple[SnapshotLogEntry, ...]:
    """Java's rule: drop entries of snapshots that were main only in the middle of this commit;
    an entry whose snapshot was removed drops the history before it (it no longer describes a
    table state that can be read)."""
    live = {s.snapshot_id for s in md["snapshots"]}
    out: list[SnapshotLogEntry] = []
    for entry in md["snapshot_log"]:
        if entry.snapshot_id in live:
            if entry.snapshot_id not in intermediate:
                out.append(entry)
        else:
            out.clear()
    return tuple(out)
