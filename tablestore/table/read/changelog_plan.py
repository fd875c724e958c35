"""Planning a changelog from the manifests of the snapshots in its range.

For each snapshot S of the range (its parent P), the manifests S wrote say which data and
delete files it added and removed. Each data file whose live rows differ between P and S
becomes one :class:`ChangeTask`, carrying the delete files that applied to it in P and in S:

- a data file S added: no rows before; after, its rows minus the deletes S holds for it;
- a data file S removed: before, its rows minus P's deletes for it; no rows after;
- a data file live in both whose deletes changed (S added or removed a position delete file, a
  deletion vector or an equality delete that applies to it): its rows under P's deletes and
  under S's.

Reading a task yields the rows live before and not after (DELETE) and the reverse (INSERT);
copy-on-write carry-overs cancel later (:mod:`.changelog_rows`). Nothing else of the table is
read: the cost follows the files the range added and removed. A ``replace`` snapshot
(compaction, rewritten deletes) changes no row, so it is skipped without reading anything, as
Java's ``BaseIncrementalChangelogScan`` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow.compute as pc

from tablestore.errors import UnsupportedError
from tablestore.io.fileio import FileIO
from tablestore.spec.manifests.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    read_manifest_list,
)
from tablestore.spec.metadata.table_metadata import Snapshot, TableMetadata
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.table.read.data_files import DELETE_FILE_PATH_ID, parquet_field_id, parquet_format
from tablestore.table.read.deletion_vectors import delete_file_key, referenced_data_file
from tablestore.table.read.scan import DeleteFileIndex, read_pruned_manifest

if TYPE_CHECKING:
    from tablestore.engine.protocols import Engine


@dataclass(frozen=True)
class ChangeTask:
    """The changed rows of one data file in one snapshot of a changelog.

    ``before_deletes`` are the delete files that applied to the file in the snapshot's parent
    (None: the snapshot added the file), ``after_deletes`` those in the snapshot (None: the
    snapshot removed it).
    """

    ordinal: int
    snapshot_id: int
    data_file: DataFile
    data_sequence_number: int
    before_deletes: tuple[DataFile, ...] | None
    after_deletes: tuple[DataFile, ...] | None

    @property
    def kind(self) -> str:
        if self.before_deletes is None:
            return "added"
        return "removed" if self.after_deletes is None else "deletes"


@dataclass
class _SnapshotFiles:
    """What one snapshot's own manifests say it did."""

    added_data: list[ManifestEntry] = field(default_factory=list)
    removed_data: list[ManifestEntry] = field(default_factory=list)
    added_deletes: list[ManifestEntry] = field(default_factory=list)
    removed_deletes: list[ManifestEntry] = field(default_factory=list)


def _manifests(io: FileIO, snapshot: Snapshot | None) -> list[ManifestFile]:
    if snapshot is None:
        return []
    if snapshot.manifest_list is None:
        raise UnsupportedError(f"snapshot {snapshot.snapshot_id} lists its manifests inline (Iceberg v1 before "
                               "manifest lists); rewrite the table's metadata with a newer writer to read changes")
    return read_manifest_list(io, snapshot.manifest_list)


class _Planner:
    def __init__(self, io: FileIO, metadata: TableMetadata, engine: Engine) -> None:
        self.io = io
        self.metadata = metadata
        self.engine = engine
        self.specs: dict[int, PartitionSpec] = {s.spec_id: s for s in metadata.partition_specs}
        #: The data sequence number of every delete file a task names (by ``delete_file_key``).
        self.sequence_numbers: dict[tuple[str, int | None], int] = {}

    def entries(self, manifests: Iterable[ManifestFile]) -> list[ManifestEntry]:
        found: list[ManifestEntry] = []
        for entries in self.engine.map(lambda m: read_pruned_manifest(self.io, m, None, self.specs), list(manifests)):
            found.extend(entries)
        return found

    def own_files(self, snapshot: Snapshot, manifests: list[ManifestFile]) -> _SnapshotFiles:
        sid = snapshot.snapshot_id
        own = [m for m in manifests if m.added_snapshot_id == sid and (m.has_added_files() or m.has_deleted_files())]
        out = _SnapshotFiles()
        for e in self.entries(own):
            if e.snapshot_id != sid or e.status == ManifestEntryStatus.EXISTING:
                continue
            data = e.data_file.content == DataFileContent.DATA
            if e.status == ManifestEntryStatus.ADDED:
                (out.added_data if data else out.added_deletes).append(e)
            else:
                (out.removed_data if data else out.removed_deletes).append(e)
        return out

    def delete_index(self, manifests: list[ManifestFile]) -> DeleteFileIndex:
        index = DeleteFileIndex(specs=self.specs)
        for e in self.entries(m for m in manifests if m.content == ManifestContent.DELETES):
            if e.status != ManifestEntryStatus.DELETED:
                index.add(e)
                self.sequence_numbers[delete_file_key(e.data_file)] = e.sequence_number or 0
        return index

    def first_row_ids(self, manifests: list[ManifestFile]) -> dict[str, int]:
        """Each live data file's inherited ``first_row_id`` (format v3), for removed entries
        written without one."""
        out: dict[str, int] = {}
        for e in self.entries(m for m in manifests if m.content == ManifestContent.DATA):
            if e.status != ManifestEntryStatus.DELETED and e.data_file.first_row_id is not None:
                out[e.data_file.file_path] = e.data_file.first_row_id
        return out

    def position_delete_paths(self, delete_file: DataFile) -> set[str]:
        path = referenced_data_file(delete_file)
        if path is not None:
            return {path}
        # A position delete file for several data files (partition-scoped, as Spark writes on v2).
        fs, location = self.io.filesystem_for(delete_file.file_path)
        fragment = parquet_format().make_fragment(location, filesystem=fs)
        names = [f.name for f in fragment.physical_schema if parquet_field_id(f) == DELETE_FILE_PATH_ID]
        column = fragment.to_table(columns=names or ["file_path"]).column(0)
        return {str(p) for p in pc.unique(column).to_pylist()}

    def plan_snapshot(self, ordinal: int, snapshot: Snapshot, parent: Snapshot | None) -> list[ChangeTask]:
        manifests = _manifests(self.io, snapshot)
        files = self.own_files(snapshot, manifests)
        delete_changes = files.added_deletes + files.removed_deletes
        parent_manifests = _manifests(self.io, parent) if (files.removed_data or delete_changes) else []
        has_deletes = any(m.content == ManifestContent.DELETES for m in manifests)
        parent_has_deletes = any(m.content == ManifestContent.DELETES for m in parent_manifests)
        after = self.delete_index(manifests) if has_deletes and (files.added_data or delete_changes) \
            else DeleteFileIndex(specs=self.specs)
        before = self.delete_index(parent_manifests) if parent_has_deletes else DeleteFileIndex(specs=self.specs)
        sid = snapshot.snapshot_id

        def deletes(index: DeleteFileIndex, seq: int, df: DataFile) -> tuple[DataFile, ...]:
            return index.for_data_file(seq, df) if index else ()

        tasks = [ChangeTask(ordinal, sid, e.data_file, e.sequence_number or 0, None,
                            deletes(after, e.sequence_number or 0, e.data_file)) for e in files.added_data]
        removed = files.removed_data
        if self.metadata.format_version >= 3 and any(e.data_file.first_row_id is None for e in removed):
            row_ids = self.first_row_ids(parent_manifests)
            removed = [e if e.data_file.first_row_id is not None or e.data_file.file_path not in row_ids else
                       ManifestEntry(e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number,
                                     _with_first_row_id(e.data_file, row_ids[e.data_file.file_path]))
                       for e in removed]
        tasks += [ChangeTask(ordinal, sid, e.data_file, e.sequence_number or 0,
                             deletes(before, e.sequence_number or 0, e.data_file), None) for e in removed]
        if delete_changes:
            tasks += self.continuing(ordinal, sid, manifests, files, before, after)
        return tasks

    def continuing(self, ordinal: int, sid: int, manifests: list[ManifestFile], files: _SnapshotFiles,
                   before: DeleteFileIndex, after: DeleteFileIndex) -> list[ChangeTask]:
        """Tasks of the data files live before and after the snapshot whose deletes it changed."""
        paths: set[str] = set()
        equality: list[ManifestEntry] = []
        for e in files.added_deletes + files.removed_deletes:
            if e.data_file.content == DataFileContent.POSITION_DELETES:
                paths |= self.position_delete_paths(e.data_file)
            else:
                equality.append(e)
        added = {e.data_file.file_path for e in files.added_data}
        tasks = []
        for e in self.entries(m for m in manifests if m.content == ManifestContent.DATA):
            df = e.data_file
            if e.status == ManifestEntryStatus.DELETED or df.file_path in added:
                continue
            seq = e.sequence_number or 0
            if df.file_path not in paths and not any(self.equality_applies(d, seq, df) for d in equality):
                continue
            old = before.for_data_file(seq, df) if before else ()
            new = after.for_data_file(seq, df) if after else ()
            if {delete_file_key(d) for d in old} != {delete_file_key(d) for d in new}:
                tasks.append(ChangeTask(ordinal, sid, df, seq, old, new))
        return tasks

    def equality_applies(self, delete: ManifestEntry, seq: int, df: DataFile) -> bool:
        if (delete.sequence_number or 0) <= seq:
            return False
        spec = self.specs.get(delete.data_file.spec_id)
        if spec is None or spec.is_unpartitioned():
            return True
        return delete.data_file.spec_id == df.spec_id and tuple(delete.data_file.partition) == tuple(df.partition)


def _with_first_row_id(df: DataFile, first_row_id: int) -> DataFile:
    import dataclasses

    return dataclasses.replace(df, first_row_id=first_row_id)


@dataclass(frozen=True)
class ChangePlan:
    """A changelog's tasks, and the data sequence number of each delete file they name (by
    :func:`~tablestore.table.read.deletion_vectors.delete_file_key`), which a client computing
    the changes itself (the REST service's changelog plan) may want."""

    tasks: list[ChangeTask]
    delete_sequence_numbers: dict[tuple[str, int | None], int]


def plan_changes(io: FileIO, metadata: TableMetadata, snapshots: Iterable[Snapshot], engine: Engine) -> ChangePlan:
    """The change tasks of ``snapshots`` (oldest first), in snapshot order; ordinals count the
    snapshots other than replaces from 0."""
    planner = _Planner(io, metadata, engine)
    tasks: list[ChangeTask] = []
    # Ordinals count the snapshots that may change rows: a replace takes none, as in Java.
    changing = [s for s in snapshots if s.operation != "replace"]
    for ordinal, snapshot in enumerate(changing):
        parent = metadata.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id is not None \
            else None
        tasks += planner.plan_snapshot(ordinal, snapshot, parent)
    return ChangePlan(tasks, planner.sequence_numbers)
