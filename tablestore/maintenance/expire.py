"""expire_snapshots: drop old snapshots from the metadata, then the files only they referenced.

Retention follows Iceberg's RemoveSnapshots:

* every ref's snapshot is kept; a branch also keeps ancestors while fewer than its
  min-snapshots-to-keep are retained or while they are younger than its max-snapshot-age;
* snapshots no ref reaches are kept while younger than ``older_than``;
* refs other than ``main`` older than their max-ref-age are removed.

Table properties ``history.expire.max-snapshot-age-ms`` (default 5 days) and
``history.expire.min-snapshots-to-keep`` (default 1) give the defaults. When a table sets them
explicitly they are also a floor that arguments cannot go below; only ``override_retention=True``
(used by erasure) ignores them and the refs' own retention settings.

The metadata commit comes first; files are deleted only after it succeeded, and only those
that no snapshot retained by the committed metadata references.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tablestore.errors import ValidationError
from tablestore.maintenance.reachable import snapshot_files, statistics_files
from tablestore.option_values import PointInTime, epoch_ms
from tablestore.spec.manifests.manifest import DataFileContent
from tablestore.spec.metadata.table_metadata import TableMetadata, int_property
from tablestore.spec.metadata.update_models import (
    AssertRefSnapshotId,
    AssertTableUUID,
    RemoveSnapshotRefUpdate,
    RemoveSnapshotsUpdate,
    TableRequirement,
    TableUpdate,
)

if TYPE_CHECKING:
    from tablestore.table import Table

MAX_SNAPSHOT_AGE = "history.expire.max-snapshot-age-ms"
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MAX_REF_AGE = "history.expire.max-ref-age-ms"
DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 24 * 3600 * 1000
DEFAULT_MIN_SNAPSHOTS_TO_KEEP = 1

Progress = Callable[[str, int, int], None]


@dataclass
class ExpireResult:
    """What an expiration removed (Iceberg's expire_snapshots result columns, plus details)."""

    expired_snapshot_ids: list[int] = field(default_factory=list)
    removed_refs: list[str] = field(default_factory=list)
    deleted_data_files_count: int = 0
    deleted_position_delete_files_count: int = 0
    deleted_equality_delete_files_count: int = 0
    deleted_manifest_files_count: int = 0
    deleted_manifest_lists_count: int = 0
    deleted_statistics_files_count: int = 0
    deleted_paths: list[str] = field(default_factory=list)

    @property
    def deleted_files_count(self) -> int:
        return len(self.deleted_paths)


def snapshots_to_retain(
    metadata: TableMetadata, now_ms: int, older_than_ms: int | None, retain_last: int | None,
    override_retention: bool,
) -> tuple[set[int], list[str]]:
    """Snapshot ids to keep and refs to remove."""
    prop_age = int_property(metadata.properties, MAX_SNAPSHOT_AGE)
    prop_min = int_property(metadata.properties, MIN_SNAPSHOTS_TO_KEEP)
    prop_ref_age = int_property(metadata.properties, MAX_REF_AGE)
    expire_before = older_than_ms if older_than_ms is not None else now_ms - (prop_age or DEFAULT_MAX_SNAPSHOT_AGE_MS)
    min_keep = retain_last if retain_last is not None else (prop_min or DEFAULT_MIN_SNAPSHOTS_TO_KEEP)
    if not override_retention:
        if prop_age is not None:
            expire_before = min(expire_before, now_ms - prop_age)
        if prop_min is not None:
            min_keep = max(min_keep, prop_min)

    retained: set[int] = set()
    removed_refs: list[str] = []
    for name, ref in metadata.refs.items():
        snapshot = metadata.snapshot_by_id(ref.snapshot_id)
        if snapshot is None:
            continue
        max_ref_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else prop_ref_age
        if name != "main" and max_ref_age is not None and now_ms - snapshot.timestamp_ms > max_ref_age:
            removed_refs.append(name)
            continue
        if ref.type == "tag":
            retained.add(snapshot.snapshot_id)
            continue
        branch_before, branch_keep = expire_before, min_keep
        if not override_retention:
            if ref.max_snapshot_age_ms is not None:
                branch_before = now_ms - ref.max_snapshot_age_ms
            if ref.min_snapshots_to_keep is not None:
                branch_keep = ref.min_snapshots_to_keep
        kept = 0
        for ancestor in metadata.ancestors_of(ref.snapshot_id):
            if kept < max(1, branch_keep) or ancestor.timestamp_ms >= branch_before:
                retained.add(ancestor.snapshot_id)
                kept += 1
            else:
                break
    reachable: set[int] = set()
    for name, ref in metadata.refs.items():
        if name not in removed_refs:
            reachable.update(s.snapshot_id for s in metadata.ancestors_of(ref.snapshot_id))
    for snapshot in metadata.snapshots:
        if snapshot.snapshot_id not in reachable and snapshot.timestamp_ms >= expire_before:
            retained.add(snapshot.snapshot_id)
    return retained, removed_refs


def delete_files(table: Table, paths: Iterable[str], max_concurrent_deletes: int | None,
                 progress: Progress | None = None, stage: str = "delete") -> None:
    todo = sorted(paths)
    done = 0

    def delete(path: str) -> None:
        table.io.delete(path)

    workers = max(1, max_concurrent_deletes or 8)
    with ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(delete, todo):
            done += 1
            if progress is not None:
                progress(stage, done, len(todo))


class _NothingToCommit(Exception):
    """Raised by staging to end the commit loop without a commit (nothing expires, or a dry run)."""


def expire_snapshots(
    table: Table,
    older_than: PointInTime | None = None,
    retain_last: int | None = None,
    snapshot_ids: Iterable[int] | None = None,
    override_retention: bool = False,
    dry_run: bool = False,
    max_concurrent_deletes: int | None = None,
    clean_expired_files: bool = True,
    progress: Progress | None = None,
) -> ExpireResult:
    """Expire snapshots by age and count (and/or by id); see the module docstring."""
    if retain_last is not None and (isinstance(retain_last, bool) or int(retain_last) < 1):
        raise ValidationError(f"retain_last must be at least 1, got {retain_last!r}")
    explicit = {int(i) for i in snapshot_ids or ()}
    older_than_ms = epoch_ms(older_than, "older_than") if older_than is not None else None
    result = ExpireResult()
    planned: list[TableMetadata] = []

    def stage(base: TableMetadata) -> tuple[list[TableRequirement], list[TableUpdate]]:
        """What to expire on the table as it is at this attempt (recomputed on every retry)."""
        planned[:] = [base]
        now_ms = int(time.time() * 1000)
        if older_than_ms is None and retain_last is None and explicit:
            retained = {s.snapshot_id for s in base.snapshots}
            removed_refs: list[str] = []
        else:
            retained, removed_refs = snapshots_to_retain(base, now_ms, older_than_ms, retain_last, override_retention)
        pinned = {ref.snapshot_id for name, ref in base.refs.items() if name not in removed_refs}
        for snapshot_id in explicit:
            if snapshot_id in pinned:
                names = sorted(n for n, r in base.refs.items() if r.snapshot_id == snapshot_id)
                raise ValidationError(
                    f"cannot expire snapshot {snapshot_id}: it is the head of {', '.join(names)}; "
                    "remove the branch or tag first"
                )
            retained.discard(snapshot_id)
        expired = [s for s in base.snapshots if s.snapshot_id not in retained]
        result.expired_snapshot_ids = [s.snapshot_id for s in expired]
        result.removed_refs = removed_refs
        if (not expired and not removed_refs) or dry_run:
            raise _NothingToCommit()
        requirements: list[TableRequirement] = [AssertTableUUID(uuid=base.table_uuid)]
        requirements += [AssertRefSnapshotId(ref=name, snapshot_id=ref.snapshot_id) for name, ref in base.refs.items()]
        updates: list[TableUpdate] = [RemoveSnapshotRefUpdate(ref_name=name) for name in removed_refs]
        if expired:
            updates.append(RemoveSnapshotsUpdate(snapshot_ids=tuple(result.expired_snapshot_ids)))
        return requirements, updates

    table.refresh()
    try:
        table.transaction().change_metadata(stage).commit_transaction()
    except _NothingToCommit:
        if not result.expired_snapshot_ids and not result.removed_refs:
            return result
    base = planned[0]

    after = base if dry_run else table.metadata
    if not clean_expired_files:
        return result
    expired = [s for s in base.snapshots if s.snapshot_id in set(result.expired_snapshot_ids)]
    candidates = snapshot_files(table.io, expired, include_deleted_entries=True, run=table.engine.map)
    live_snapshots = [s for s in after.snapshots if s.snapshot_id not in set(result.expired_snapshot_ids)]
    keep = snapshot_files(table.io, live_snapshots, include_deleted_entries=False, run=table.engine.map)
    keep_all = keep.all() | statistics_files(after, {s.snapshot_id for s in after.snapshots})
    doomed: list[str] = []
    for path in sorted(candidates.manifest_lists - keep_all):
        result.deleted_manifest_lists_count += 1
        doomed.append(path)
    for path in sorted(candidates.manifests - keep_all):
        result.deleted_manifest_files_count += 1
        doomed.append(path)
    for path, content in sorted(candidates.content_files.items()):
        if path in keep_all:
            continue
        doomed.append(path)
        if content == DataFileContent.DATA:
            result.deleted_data_files_count += 1
        elif content == DataFileContent.POSITION_DELETES:
            result.deleted_position_delete_files_count += 1
        else:
            result.deleted_equality_delete_files_count += 1
    for path in sorted(statistics_files(base, set(result.expired_snapshot_ids)) - keep_all):
        result.deleted_statistics_files_count += 1
        doomed.append(path)
    result.deleted_paths = doomed
    if not dry_run:
        delete_files(table, doomed, max_concurrent_deletes, progress, "expire")
    return result


def result_row(result: ExpireResult) -> dict[str, Any]:
    return {
        "deleted_data_files_count": result.deleted_data_files_count,
        "deleted_position_delete_files_count": result.deleted_position_delete_files_count,
        "deleted_equality_delete_files_count": result.deleted_equality_delete_files_count,
        "deleted_manifest_files_count": result.deleted_manifest_files_count,
        "deleted_manifest_lists_count": result.deleted_manifest_lists_count,
        "deleted_statistics_files_count": result.deleted_statistics_files_count,
    }
