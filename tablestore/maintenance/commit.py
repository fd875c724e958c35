"""The ``replace`` commits of maintenance: files swapped for files holding the same rows.

:class:`RewriteFiles` removes data and/or delete files and adds their replacements in one
snapshot. Added files keep the data sequence number of the snapshot the rewrite started from
(Iceberg's use-starting-sequence-number), so equality deletes committed concurrently still
apply to the rewritten rows. :class:`RewriteManifests` re-clusters the parent's manifests and
is rebuilt on every retry, so it never conflicts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from tablestore.errors import CommitConflictError
from tablestore.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    read_manifest,
    snapshot_manifests,
    write_manifest,
)
from tablestore.spec.metadata import Snapshot, TableMetadata
from tablestore.table.snapshot import SnapshotProducer, snapshots_since

if TYPE_CHECKING:
    from tablestore.table import Table


def _kind(f: DataFile) -> ManifestContent:
    return ManifestContent.DATA if f.content == DataFileContent.DATA else ManifestContent.DELETES


class RewriteFiles(SnapshotProducer):
    operation = "replace"

    def __init__(
        self,
        table: Table,
        deleted: Iterable[DataFile],
        added: Iterable[DataFile],
        scan_snapshot: Snapshot | None,
        conflict_check: Callable[[list[Snapshot]], None] | None = None,
        snapshot_properties: dict[str, str] | None = None,
    ) -> None:
        super().__init__(table, snapshot_properties)
        self.deleted_files = list(deleted)
        self.added_files = list(added)
        self.scan_snapshot_id = scan_snapshot.snapshot_id if scan_snapshot else None
        self.data_sequence_number = scan_snapshot.sequence_number if scan_snapshot else None
        self.conflict_check = conflict_check
        self._added_manifests: list[ManifestFile] | None = None

    def validate(self, base: TableMetadata, parent: Snapshot | None) -> None:
        if (parent.snapshot_id if parent else None) == self.scan_snapshot_id:
            return
        if self.conflict_check is not None:
            self.conflict_check(snapshots_since(base, self.scan_snapshot_id))

    def _write_added_manifest(self, base: TableMetadata) -> list[ManifestFile]:
        if self._added_manifests is None:
            groups: dict[tuple[ManifestContent, int], list[DataFile]] = {}
            for f in self.added_files:
                groups.setdefault((_kind(f), f.spec_id), []).append(f)
            self._added_manifests = []
            for (content, spec_id), files in sorted(groups.items()):
                entries = [
                    ManifestEntry(ManifestEntryStatus.ADDED, self.snapshot_id, self.data_sequence_number, None, f)
                    for f in files
                ]
                self._added_manifests.append(write_manifest(
                    self.table.io, self._manifest_path(), base.spec_for(spec_id), base.schema(), self.snapshot_id,
                    entries, content=content, format_version=base.format_version,
                ))
        return list(self._added_manifests)

    def _discard_rewritten(self) -> None:
        keep = {m.manifest_path for m in self._added_manifests or []}
        for path in list(self._written_manifests):
            if path not in keep:
                self.table.io.delete(path)
                self._written_manifests.remove(path)

    def existing_manifests(self, base: TableMetadata, parent: Snapshot | None) -> list[ManifestFile]:
        if parent is None:
            if self.deleted_files:
                raise CommitConflictError("the table has no snapshot any more; the files to replace are gone")
            return []
        doomed = {f.file_path for f in self.deleted_files}
        found: set[str] = set()
        out: list[ManifestFile] = []
        for manifest in snapshot_manifests(self.table.io, parent):
            if not doomed:
                out.append(manifest)
                continue
            entries = read_manifest(self.table.io, manifest, specs=self.table.specs())
            if not any(e.status != ManifestEntryStatus.DELETED and e.data_file.file_path in doomed for e in entries):
                out.append(manifest)
                continue
            rewritten: list[ManifestEntry] = []
            for e in entries:
                if e.status == ManifestEntryStatus.DELETED:
                    continue
                if e.data_file.file_path in doomed:
                    found.add(e.data_file.file_path)
                    rewritten.append(replace(e, status=ManifestEntryStatus.DELETED, snapshot_id=self.snapshot_id))
                else:
                    rewritten.append(replace(e, status=ManifestEntryStatus.EXISTING))
            out.append(write_manifest(
                self.table.io, self._manifest_path(), base.spec_for(manifest.partition_spec_id), base.schema(),
                self.snapshot_id, rewritten, content=manifest.content, format_version=base.format_version,
            ))
        missing = sorted(doomed - found)
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise CommitConflictError(
                f"a concurrent commit removed {len(missing)} file(s) this rewrite replaces: {shown}; "
                "re-run the rewrite on the new table state"
            )
        return out

    def summary(self, base: TableMetadata, parent: Snapshot | None) -> dict[str, str]:
        out = super().summary(base, parent)
        added = [f for f in self.added_files if f.content != DataFileContent.DATA]
        removed = [f for f in self.deleted_files if f.content != DataFileContent.DATA]
        if added:
            out["added-delete-files"] = str(len(added))
        if removed:
            out["removed-delete-files"] = str(len(removed))
        previous = parent.summary if parent is not None else {}

        def adjust(key: str, delta: int) -> None:
            if key in previous:
                out[key] = str(max(0, int(previous[key]) + delta))

        adjust("total-delete-files", len(added) - len(removed))

        def records(files: list[DataFile], content: DataFileContent) -> int:
            return sum(f.record_count for f in files if f.content == content)

        for key, content in (("total-position-deletes", DataFileContent.POSITION_DELETES),
                             ("total-equality-deletes", DataFileContent.EQUALITY_DELETES)):
            adjust(key, records(added, content) - records(removed, content))
        return out


class RewriteManifests(SnapshotProducer):
    """Rewrite the parent's data manifests clustered by partition (same files, fewer manifests)."""

    operation = "replace"

    def __init__(self, table: Table, target_entries: Callable[[list[ManifestFile]], int],
                 spec_id: int | None = None) -> None:
        super().__init__(table, {"manifests-rewritten": "true"})
        self.target_entries = target_entries
        self.spec_id = spec_id
        self.rewritten: list[ManifestFile] = []
        self.added: list[ManifestFile] = []

    def existing_manifests(self, base: TableMetadata, parent: Snapshot | None) -> list[ManifestFile]:
        if parent is None:
            return []
        manifests = snapshot_manifests(self.table.io, parent)
        chosen = [m for m in manifests if m.content == ManifestContent.DATA
                  and (self.spec_id is None or m.partition_spec_id == self.spec_id)]
        # Delete manifests whose entries are all DELETED serve no reader; dropping them also
        # drops the stats of removed delete files (an erasure relies on that).
        kept = [m for m in manifests if m not in chosen
                and not (m.content == ManifestContent.DELETES and m.added_files_count == 0
                         and m.existing_files_count == 0)]
        per_manifest = max(1, self.target_entries(chosen))
        by_spec: dict[int, list[ManifestEntry]] = {}
        for m in chosen:
            for e in read_manifest(self.table.io, m, specs=self.table.specs()):
                if e.status != ManifestEntryStatus.DELETED:
                    by_spec.setdefault(m.partition_spec_id, []).append(replace(e, status=ManifestEntryStatus.EXISTING))
        added: list[ManifestFile] = []
        for spec_id, entries in sorted(by_spec.items()):
            entries.sort(key=lambda e: (repr(tuple(e.data_file.partition)), e.data_file.file_path))
            for start in range(0, len(entries), per_manifest):
                added.append(write_manifest(
                    self.table.io, self._manifest_path(), base.spec_for(spec_id), base.schema(), self.snapshot_id,
                    entries[start:start + per_manifest], content=ManifestContent.DATA,
                    format_version=base.format_version,
                ))
        self.rewritten, self.added = chosen, added
        return [*added, *kept]
