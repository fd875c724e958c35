"""The snapshots a changelog reads: after ``from`` (exclusive) up to ``to`` (inclusive).

Either end is given as a snapshot id, a point in time or a ref (branch or tag); ``to`` defaults
to the head of the table's branch and ``from`` to the table's first snapshot's parent (every
change since the table was created). The range is the ancestry of ``to`` back to ``from``, so
``from`` must be an ancestor of ``to``, and every snapshot in between must still be in the
metadata: a changelog reads the manifests each one wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

from tablestore.errors import SnapshotRangeError
from tablestore.spec.metadata.table_metadata import Snapshot, TableMetadata


@dataclass(frozen=True)
class SnapshotRange:
    """``snapshots`` oldest first (the changelog's ordinals); ``start`` is the exclusive start
    (None: from the table's creation), ``end`` the inclusive end (None: the table is empty)."""

    start: Snapshot | None
    end: Snapshot | None
    snapshots: tuple[Snapshot, ...]


def _ref_snapshot(metadata: TableMetadata, name: str, which: str) -> Snapshot:
    ref = metadata.refs.get(name)
    snapshot = metadata.snapshot_by_id(ref.snapshot_id) if ref is not None else None
    if snapshot is None:
        names = ", ".join(sorted(metadata.refs)) or "none"
        raise SnapshotRangeError(f"{which}_ref {name!r} is not a branch or tag of the table (its refs: {names}); "
                                 "give an existing branch or tag, or a snapshot id")
    return snapshot


def _snapshot(metadata: TableMetadata, snapshot_id: int, which: str) -> Snapshot:
    snapshot = metadata.snapshot_by_id(snapshot_id)
    if snapshot is None:
        oldest = min(metadata.snapshots, key=lambda s: s.timestamp_ms, default=None)
        hint = f"the oldest snapshot kept is {oldest.snapshot_id}" if oldest is not None else "it has no snapshots"
        raise SnapshotRangeError(
            f"{which}_snapshot {snapshot_id} is not a snapshot of the table (expired, or never made; {hint}); "
            "a changelog reads the manifests of every snapshot in its range, so start it at a snapshot "
            "that is still kept"
        )
    return snapshot


def _lineage_as_of(metadata: TableMetadata, head: Snapshot | None, timestamp_ms: int) -> Snapshot | None:
    """The newest ancestor of ``head`` (itself included) committed at or before ``timestamp_ms``."""
    for snapshot in metadata.ancestors_of(head.snapshot_id if head is not None else None):
        if snapshot.timestamp_ms <= timestamp_ms:
            return snapshot
    return None


def resolve_range(
    metadata: TableMetadata,
    branch_head: Snapshot | None,
    from_snapshot: int | None = None,
    to_snapshot: int | None = None,
    from_timestamp_ms: int | None = None,
    to_timestamp_ms: int | None = None,
    from_ref: str | None = None,
    to_ref: str | None = None,
) -> SnapshotRange:
    """The snapshots of a changelog, oldest first; see the module's docstring."""
    if sum(x is not None for x in (to_snapshot, to_timestamp_ms, to_ref)) > 1:
        raise SnapshotRangeError("give only one of to_snapshot, to_timestamp and to_ref")
    if sum(x is not None for x in (from_snapshot, from_timestamp_ms, from_ref)) > 1:
        raise SnapshotRangeError("give only one of from_snapshot, from_timestamp and from_ref")
    end: Snapshot | None
    if to_snapshot is not None:
        end = _snapshot(metadata, to_snapshot, "to")
    elif to_ref is not None:
        end = _ref_snapshot(metadata, to_ref, "to")
    elif to_timestamp_ms is not None:
        end = _lineage_as_of(metadata, branch_head, to_timestamp_ms)
        if end is None:
            raise SnapshotRangeError(f"to_timestamp {to_timestamp_ms} is before the table's first kept snapshot; "
                                     "give a later time")
    else:
        end = branch_head
    start: Snapshot | None = None
    if from_snapshot is not None:
        start = _snapshot(metadata, from_snapshot, "from")
    elif from_ref is not None:
        start = _ref_snapshot(metadata, from_ref, "from")
    elif from_timestamp_ms is not None:
        start = _lineage_as_of(metadata, end, from_timestamp_ms)
        if start is None and end is not None:
            _check_reaches_creation(metadata, end)
    if end is None:
        if start is not None:
            raise SnapshotRangeError(f"the changelog ends before it starts: the table (or branch) has no snapshot "
                                     f"after {start.snapshot_id}")
        return SnapshotRange(None, None, ())
    snapshots: list[Snapshot] = []
    for snapshot in metadata.ancestors_of(end.snapshot_id):
        if start is not None and snapshot.snapshot_id == start.snapshot_id:
            return SnapshotRange(start, end, tuple(reversed(snapshots)))
        snapshots.append(snapshot)
    oldest = snapshots[-1]
    if start is None:
        if from_timestamp_ms is None:
            _check_reaches_creation(metadata, end)
        return SnapshotRange(None, end, tuple(reversed(snapshots)))
    if oldest.parent_snapshot_id is not None and metadata.snapshot_by_id(oldest.parent_snapshot_id) is None:
        raise SnapshotRangeError(
            f"the changelog from {start.snapshot_id} to {end.snapshot_id} reaches into expired snapshots: "
            f"{oldest.snapshot_id}'s parent {oldest.parent_snapshot_id} is gone; start at "
            f"{oldest.snapshot_id} or later"
        )
    what = f"from_ref {from_ref!r} (snapshot {start.snapshot_id})" if from_ref is not None \
        else f"from snapshot {start.snapshot_id}"
    target = f"to_ref {to_ref!r} (snapshot {end.snapshot_id})" if to_ref is not None \
        else f"to snapshot {end.snapshot_id}"
    on = [name for name, ref in metadata.refs.items() if ref.is_branch and any(
        s.snapshot_id == start.snapshot_id for s in metadata.ancestors_of(ref.snapshot_id))]
    where = f"; it is on branch {', '.join(sorted(on))}" if on else ""
    raise SnapshotRangeError(
        f"{what} is not an ancestor of {target}{where}: a changelog follows one line of history; "
        f"start at an ancestor of {end.snapshot_id}, or end on the branch {start.snapshot_id} belongs to"
    )


def _check_reaches_creation(metadata: TableMetadata, end: Snapshot) -> None:
    """A changelog from the table's creation needs its first snapshot; refuse when it was expired."""
    oldest = end
    for snapshot in metadata.ancestors_of(end.snapshot_id):
        oldest = snapshot
    if oldest.parent_snapshot_id is not None:
        raise SnapshotRangeError(
            f"a changelog from the table's creation reaches into expired snapshots: the oldest kept ancestor "
            f"{oldest.snapshot_id} has an expired parent {oldest.parent_snapshot_id}; give "
            f"from_snapshot={oldest.snapshot_id} (or later) to read the changes since then"
        )
