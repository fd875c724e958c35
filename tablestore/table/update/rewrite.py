"""The ``replace`` snapshots of maintenance: files swapped for files holding the same rows.

:class:`RewriteFiles` removes data and/or delete files and adds their replacements in one
snapshot. Added files keep the data sequence number of the snapshot the rewrite started from
(Iceberg's use-starting-sequence-number), so equality deletes committed concurrently still
apply to the rewritten rows. :class:`RewriteManifests` re-clusters the parent's manifests and
is rebuilt on every attempt, so it never conflicts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from tablestore.errors import CommitConflictError
from tablestore.spec.manifests.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    snapshot_manifests,
)
from tablestore.spec.manifests.manifest import write_manifest as write_manifest_file
from tablestore.spec.metadata.table_metadata import Snapshot, TableMetadata
from tablestore.table.update.snapshot import SnapshotProducer, since
from tablestore.table.update.validation import Check, Validation

if TYPE_CHECKING:
    from tablestore.table import Table


class RewriteFiles(SnapshotProducer):
    mergeable = False
    noun = "rewrite"

    def __init__(
        self,
        table: Table,
        deleted: Iterable[DataFile],
        added: Iterable[DataFile],
        scan_snapshot: Snapshot | None,
        checks: Iterable[Check] = (),
        snapshot_properties: dict[str, str] | None = None,
    ) -> None:
        super().__init__(table, added=added, deleted=deleted,
                         validations=[Validation(since(scan_snapshot), c) for c in checks],
                         snapshot_properties=snapshot_properties, operation="replace")
        self.data_sequence_number = scan_snapshot.sequence_number if scan_snapshot else None

    def missing_files_error(self, missing: list[str]) -> CommitConflictError:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        return CommitConflictError(
            f"a concurrent commit removed {len(missing)} file(s) this rewrite replaces: {shown}; "
            "re-run the rewrite on the new table state"
        )


class RewriteManifests(SnapshotProducer):
    """Rewrite the parent's data manifests clustered by partition (same files, fewer manifests)."""

    mergeable = False

    def __init__(self, table: Table, target_entries: Callable[[list[ManifestFile]], int],
                 spec_id: int | None = None) -> None:
        super().__init__(table, snapshot_properties={"manifests-rewritten": "true"}, operation="replace")
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
            for e in self.carried_entries(base, m):
                if e.status != ManifestEntryStatus.DELETED:
                    by_spec.setdefault(m.partition_spec_id, []).append(replace(e, status=ManifestEntryStatus.EXISTING))
        added: list[ManifestFile] = []
        for spec_id, entries in sorted(by_spec.items()):
            entries.sort(key=lambda e: (repr(tuple(e.data_file.partition)), e.data_file.file_path))
            for start in range(0, len(entries), per_manifest):
                added.append(write_manifest_file(
                    self.table.io, self._manifest_path(), base.spec_for(spec_id), base.schema(), self.snapshot_id,
                    entries[start:start + per_manifest], content=ManifestContent.DATA,
                    format_version=base.format_version,
                ))
        self.rewritten, self.added = chosen, added
        return [*added, *kept]
