"""Snapshot producers: turn written files into manifests, a manifest list and one commit.

A producer writes its new manifest once. On a lost race it refreshes the table, validates that
its change still applies to the new parent, rebuilds the manifest list on that parent and tries
again. A retry never applies a change twice: the compare-and-swap in the catalog decides.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tablestore.errors import CommitConflictError, CommitStateUnknownError
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
    write_manifest_list,
)
from tablestore.spec.metadata import Snapshot, TableMetadata
from tablestore.spec.updates import (
    AddSnapshotUpdate,
    AssertRefSnapshotId,
    AssertTableUUID,
    SetSnapshotRefUpdate,
    TableRequirement,
    TableUpdate,
)

if TYPE_CHECKING:
    from tablestore.table import Table

log = logging.getLogger(__name__)

MAIN_BRANCH = "main"


def new_snapshot_id() -> int:
    """A positive 63-bit id from a random UUID, as Java Iceberg makes them."""
    u = uuid.uuid4()
    return ((u.int >> 64) ^ (u.int & 0xFFFFFFFFFFFFFFFF)) & 0x7FFFFFFFFFFFFFFF


def _retry_settings(properties: dict[str, str]) -> tuple[int, float, float, float]:
    def number(key: str, default: int) -> int:
        try:
            return int(properties.get(key, default))
        except ValueError:
            return default

    return (
        number("commit.retry.num-retries", 100),
        number("commit.retry.min-wait-ms", 10) / 1000,
        number("commit.retry.max-wait-ms", 1000) / 1000,
        number("commit.retry.total-timeout-ms", 1_800_000) / 1000,
    )


class SnapshotProducer:
    """Base of append, overwrite and delete commits on the main branch."""

    operation = "append"

    def __init__(self, table: Table, snapshot_properties: dict[str, str] | None = None) -> None:
        self.table = table
        self.snapshot_id = new_snapshot_id()
        self.commit_uuid = str(uuid.uuid4())
        self.snapshot_properties = dict(snapshot_properties or {})
        self.added_files: list[DataFile] = []
        self.deleted_files: list[DataFile] = []
        self._manifest_counter = 0
        self._written_manifests: list[str] = []
        self._added_manifests: list[ManifestFile] | None = None

    # -- what subclasses decide ------------------------------------------------------------
    def validate(self, base: TableMetadata, parent: Snapshot | None) -> None:
        """Raise CommitConflictError if the change no longer applies on ``parent``."""

    def metadata_changes(self, base: TableMetadata) -> tuple[list[TableRequirement], list[TableUpdate], int]:
        """Requirements and updates that land with the snapshot (a schema change made together
        with a rewrite), and the schema id the snapshot records."""
        return [], [], base.current_schema_id

    def existing_manifests(self, base: TableMetadata, parent: Snapshot | None) -> list[ManifestFile]:
        """The parent's manifests, rewritten where this change deletes files."""
        if parent is None:
            return []
        return snapshot_manifests(self.table.io, parent)

    # -- shared machinery ------------------------------------------------------------------
    def _manifest_path(self) -> str:
        self._manifest_counter += 1
        path = f"{self.table.metadata_dir}/{self.commit_uuid}-m{self._manifest_counter - 1}.avro"
        self._written_manifests.append(path)
        return path

    def _write_added_manifest(self, base: TableMetadata) -> list[ManifestFile]:
        if not self.added_files:
            return []
        if self._added_manifests is None:
            # One manifest per spec: files written before a partition evolution keep their spec.
            by_spec: dict[int, list[DataFile]] = {}
            for f in self.added_files:
                by_spec.setdefault(f.spec_id, []).append(f)
            self._added_manifests = [
                write_manifest(
                    self.table.io, self._manifest_path(), base.spec_for(spec_id), base.schema(), self.snapshot_id,
                    [ManifestEntry(ManifestEntryStatus.ADDED, self.snapshot_id, None, None, f) for f in files],
                    content=ManifestContent.DATA, format_version=base.format_version,
                )
                for spec_id, files in sorted(by_spec.items())
            ]
        return list(self._added_manifests)

    def summary(self, base: TableMetadata, parent: Snapshot | None) -> dict[str, str]:
        added_records = sum(f.record_count for f in self.added_files if f.content == DataFileContent.DATA)
        deleted_records = sum(f.record_count for f in self.deleted_files if f.content == DataFileContent.DATA)
        added_size = sum(f.file_size_in_bytes for f in self.added_files)
        removed_size = sum(f.file_size_in_bytes for f in self.deleted_files)
        added_data = sum(1 for f in self.added_files if f.content == DataFileContent.DATA)
        deleted_data = sum(1 for f in self.deleted_files if f.content == DataFileContent.DATA)
        partitions = {(f.spec_id, tuple(f.partition)) for f in (*self.added_files, *self.deleted_files)}
        out: dict[str, str] = {"operation": self.operation}
        if added_data:
            out["added-data-files"] = str(added_data)
            out["added-records"] = str(added_records)
        if added_size:
            out["added-files-size"] = str(added_size)
        if deleted_data:
            out["deleted-data-files"] = str(deleted_data)
            out["deleted-records"] = str(deleted_records)
        if removed_size:
            out["removed-files-size"] = str(removed_size)
        out["changed-partition-count"] = str(len(partitions))
        previous = parent.summary if parent is not None else {}

        def total(key: str, delta: int) -> None:
            if parent is None:
                out[key] = str(max(0, delta))
            elif key in previous:
                out[key] = str(max(0, int(previous[key]) + delta))

        total("total-records", added_records - deleted_records)
        total("total-files-size", added_size - removed_size)
        total("total-data-files", added_data - deleted_data)
        total("total-delete-files", 0)
        total("total-position-deletes", 0)
        total("total-equality-deletes", 0)
        out.update(self.snapshot_properties)
        return out

    def commit(self) -> Snapshot:
        retries, min_wait, max_wait, total_timeout = _retry_settings(self.table.properties)
        deadline = time.monotonic() + total_timeout
        attempt = 0
        manifest_list_path = None
        try:
            while True:
                base = self.table.metadata
                parent = base.current_snapshot()
                self.validate(base, parent)
                extra_requirements, extra_updates, schema_id = self.metadata_changes(base)
                manifests = [*self._write_added_manifest(base), *self.existing_manifests(base, parent)]
                sequence_number = base.last_sequence_number + 1
                manifest_list_path = (
                    f"{self.table.metadata_dir}/snap-{self.snapshot_id}-{attempt + 1}-{self.commit_uuid}.avro"
                )
                write_manifest_list(
                    self.table.io, manifest_list_path, self.snapshot_id,
                    parent.snapshot_id if parent else None, sequence_number, manifests,
                    format_version=base.format_version,
                )
                snapshot = Snapshot(
                    snapshot_id=self.snapshot_id,
                    parent_snapshot_id=parent.snapshot_id if parent else None,
                    sequence_number=sequence_number,
                    timestamp_ms=max(int(time.time() * 1000), base.last_updated_ms),
                    manifest_list=manifest_list_path,
                    summary=self.summary(base, parent),
                    schema_id=schema_id,
                )
                requirements: list[TableRequirement] = [
                    AssertTableUUID(base.table_uuid),
                    AssertRefSnapshotId(MAIN_BRANCH, parent.snapshot_id if parent else None),
                    *extra_requirements,
                ]
                updates: list[TableUpdate] = [
                    *extra_updates,
                    AddSnapshotUpdate(snapshot),
                    SetSnapshotRefUpdate(MAIN_BRANCH, self.snapshot_id, "branch"),
                ]
                try:
                    self.table._commit(requirements, updates)
                    return snapshot
                except CommitConflictError:
                    self.table.io.delete(manifest_list_path)
                    manifest_list_path = None
                    attempt += 1
                    if attempt > retries or time.monotonic() > deadline:
                        raise
                    wait = min(max_wait, min_wait * (2 ** min(attempt, 16)))
                    time.sleep(random.uniform(0, wait) + min_wait)
                    self.table.refresh()
                    self._discard_rewritten()
        except CommitStateUnknownError:
            raise  # the commit may have landed: keep every file
        except BaseException:
            self._cleanup()
            raise

    def _discard_rewritten(self) -> None:
        """Drop manifests rewritten for the old parent; the added manifest is reused."""
        keep = {m.manifest_path for m in self._added_manifests or []}
        for path in list(self._written_manifests):
            if path not in keep:
                self.table.io.delete(path)
                self._written_manifests.remove(path)

    def _cleanup(self) -> None:
        for path in self._written_manifests:
            quiet_delete(self.table, path)
        for f in self.added_files:
            quiet_delete(self.table, f.file_path)


def quiet_delete(table: Table, path: str) -> None:
    try:
        table.io.delete(path)
    except OSError as e:  # best effort: remove_orphan_files catches what is left
        log.warning("could not delete uncommitted file %s: %s", path, e)


class FastAppend(SnapshotProducer):
    """Adds files in a new manifest and keeps every manifest of the parent as it is."""

    operation = "append"

    def __init__(self, table: Table, files: Iterable[DataFile], snapshot_properties: dict[str, str] | None = None):
        super().__init__(table, snapshot_properties)
        self.added_files = list(files)


class OverwriteFiles(SnapshotProducer):
    """Removes whole files and adds new ones in one snapshot (overwrite, delete, replace).

    ``conflict_check`` is called on every retry with the snapshots committed since the scan's
    snapshot, and raises CommitConflictError when one of them touched what this change read.
    """

    def __init__(
        self,
        table: Table,
        deleted: Iterable[DataFile],
        added: Iterable[DataFile],
        operation: str,
        scan_snapshot_id: int | None,
        conflict_check: Callable[[list[Snapshot]], None] | None = None,
        snapshot_properties: dict[str, str] | None = None,
    ) -> None:
        super().__init__(table, snapshot_properties)
        self.operation = operation
        self.deleted_files = list(deleted)
        self.added_files = list(added)
        self.scan_snapshot_id = scan_snapshot_id
        self.conflict_check = conflict_check

    def validate(self, base: TableMetadata, parent: Snapshot | None) -> None:
        parent_id = parent.snapshot_id if parent else None
        if parent_id == self.scan_snapshot_id:
            return
        newer = snapshots_since(base, self.scan_snapshot_id)
        if self.conflict_check is not None:
            self.conflict_check(newer)

    def existing_manifests(self, base: TableMetadata, parent: Snapshot | None) -> list[ManifestFile]:
        if parent is None:
            if self.deleted_files:
                raise CommitConflictError("the table has no snapshot any more; the files to replace are gone")
            return []
        doomed = {f.file_path for f in self.deleted_files}
        found: set[str] = set()
        out: list[ManifestFile] = []
        for manifest in snapshot_manifests(self.table.io, parent):
            if manifest.content != ManifestContent.DATA or not doomed:
                out.append(manifest)
                continue
            entries = read_manifest(self.table.io, manifest, specs=self.table.specs())
            hits = [e for e in entries if e.status != ManifestEntryStatus.DELETED and e.data_file.file_path in doomed]
            if not hits:
                out.append(manifest)
                continue
            rewritten: list[ManifestEntry] = []
            for e in entries:
                if e.status == ManifestEntryStatus.DELETED:
                    continue  # deleted entries only live in the snapshot that deleted them
                if e.data_file.file_path in doomed:
                    found.add(e.data_file.file_path)
                    rewritten.append(replace(e, status=ManifestEntryStatus.DELETED, snapshot_id=self.snapshot_id))
                else:
                    rewritten.append(replace(e, status=ManifestEntryStatus.EXISTING))
            spec = base.spec_for(manifest.partition_spec_id)
            out.append(
                write_manifest(
                    self.table.io, self._manifest_path(), spec, base.schema(), self.snapshot_id, rewritten,
                    content=ManifestContent.DATA, format_version=base.format_version,
                )
            )
        missing = doomed - found
        if missing:
            raise CommitConflictError(
                f"{len(missing)} file(s) this commit replaces were removed by a concurrent commit "
                f"(for example {sorted(missing)[0]}); re-run the operation on the new table state"
            )
        return out


def snapshots_since(metadata: TableMetadata, snapshot_id: int | None) -> list[Snapshot]:
    """Snapshots on main after ``snapshot_id``, oldest first."""
    out: list[Snapshot] = []
    current = metadata.current_snapshot()
    while current is not None and current.snapshot_id != snapshot_id:
        out.append(current)
        parent_id = current.parent_snapshot_id
        current = metadata.snapshot_by_id(parent_id) if parent_id is not None else None
    out.reverse()
    return out


def added_data_files(table: Table, snapshots: list[Snapshot]) -> list[Any]:
    """Data files that the given snapshots added (for conflict checks)."""
    files = []
    for snapshot in snapshots:
        for manifest in snapshot_manifests(table.io, snapshot):
            if manifest.added_snapshot_id != snapshot.snapshot_id:
                continue
            for entry in read_manifest(table.io, manifest, specs=table.specs()):
                if entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id == snapshot.snapshot_id:
                    files.append(entry.data_file)
    return files
