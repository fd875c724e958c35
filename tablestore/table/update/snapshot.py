"""Snapshot producers: turn a change's files into manifests, a manifest list and one snapshot.

A producer describes one snapshot: the data and delete files it adds, the files it removes, and
the :class:`~tablestore.table.update.validation.Validation` checks it must pass against what
others committed since its operation read the table. It writes its new manifests once; on each
attempt of the commit (:mod:`tablestore.table.update.transaction` runs the attempts) it
validates, rebuilds the parent's manifests where it removes files and writes a manifest list on
the parent of that attempt. It never commits by itself.

This base class is the general one: appends, overwrites, deletes and row deltas are all "add
these files, remove those". The other producers of the family refine it:
:mod:`~tablestore.table.update.rewrite` (compaction and manifest rewrites),
:mod:`~tablestore.table.update.column_fragments` (column merges) and
:mod:`~tablestore.table.update.register` (files imported as they are).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from tablestore.errors import CommitConflictError, UnsupportedError, ValidationError
from tablestore.spec.manifests.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    assign_first_row_ids,
    inherit_first_row_ids,
    read_manifest,
    snapshot_manifests,
    write_manifest,
    write_manifest_list,
)
from tablestore.spec.metadata.table_metadata import (
    MAIN_BRANCH,
    WAP_ID_PROPERTY,
    Snapshot,
    TableMetadata,
    new_snapshot_id,
)
from tablestore.spec.metadata.update_models import (
    AddSnapshotUpdate,
    AssertRefSnapshotId,
    AssertTableUUID,
    SetSnapshotRefUpdate,
    TableRequirement,
    TableUpdate,
)
from tablestore.table.read.deletion_vectors import delete_file_key, is_deletion_vector
from tablestore.table.update.retry import StagedCommit
from tablestore.table.update.validation import Check, Validation, validate_all

if TYPE_CHECKING:
    from tablestore.table import Table

log = logging.getLogger(__name__)


def quiet_delete(table: Table, path: str) -> None:
    try:
        table.io.delete(path)
    except OSError as e:  # best effort: remove_orphan_files catches what is left
        log.warning("could not delete uncommitted file %s: %s", path, e)


def manifest_kind(f: DataFile) -> ManifestContent:
    return ManifestContent.DATA if f.content == DataFileContent.DATA else ManifestContent.DELETES


class SnapshotProducer:
    """One snapshot on the table's branch (``table.branch``, main unless the table was opened
    on another) that adds ``added_files`` (data and delete files) and removes ``deleted_files``,
    valid while every one of ``validations`` passes.

    A write to a branch that does not exist yet builds on main's head and creates the branch,
    as in Iceberg; a tag is never written to. With ``stage_only`` (write-audit-publish's
    ``wap.id``) the snapshot is added to the table without moving any branch."""

    #: Whether a transaction may fold another plain file change into this one (one snapshot).
    mergeable = True
    #: What the error about files removed concurrently calls this change.
    noun = "commit"
    #: Whether the added files were written for this change (deleted when it fails); files
    #: that belong to someone else (registered, or cherry-picked from another snapshot) are not.
    owns_added_files = True

    def __init__(
        self,
        table: Table,
        added: Iterable[DataFile] = (),
        deleted: Iterable[DataFile] = (),
        validations: Iterable[Validation] = (),
        snapshot_properties: dict[str, str] | None = None,
        operation: str | None = None,
    ) -> None:
        self.table = table
        self.snapshot_id = new_snapshot_id()
        self.commit_uuid = str(uuid.uuid4())
        self.snapshot_properties = dict(snapshot_properties or {})
        self.added_files: list[DataFile] = list(added)
        self.deleted_files: list[DataFile] = list(deleted)
        self.validations: list[Validation] = list(validations)
        self._operation = operation
        # The data sequence number of added files; None: the snapshot's own (a rewrite keeps
        # the one of the snapshot it read, so concurrent equality deletes still apply).
        self.data_sequence_number: int | None = None
        self._manifest_counter = 0
        self._attempt = 0
        self._written_manifests: list[str] = []
        self._added_manifests: list[ManifestFile] | None = None
        self._manifest_list: str | None = None
        # DVs of removed data files that the last attempt dropped with them (v3).
        self._dropped_dvs: list[DataFile] = []
        #: The branch the snapshot goes to; None adds it without moving a branch (staged).
        self.branch: str | None = table.branch
        if table.wap_id is not None:
            self.branch = None
            self.snapshot_properties[WAP_ID_PROPERTY] = table.wap_id

    # -- what the snapshot is ----------------------------------------------------------------
    @property
    def operation(self) -> str:
        """``append`` when only data is added, ``delete`` when nothing is, else ``overwrite``
        (Iceberg's operations), unless the change named its own."""
        if self._operation is not None:
            return self._operation
        adds_data = any(f.content == DataFileContent.DATA for f in self.added_files)
        if not self.deleted_files and all(f.content == DataFileContent.DATA for f in self.added_files):
            return "append"
        return "overwrite" if adds_data else "delete"

    def merge(self, other: SnapshotProducer) -> None:
        """Fold ``other`` into this snapshot (a transaction's second file change)."""
        if not (self.mergeable and other.mergeable):
            raise CommitConflictError(
                f"a {type(other).__name__} cannot share a snapshot with a {type(self).__name__}; "
                "commit them in separate transactions"
            )
        if self._operation != other._operation:
            self._operation = None  # derived from the combined files
        self.added_files.extend(other.added_files)
        self.deleted_files.extend(other.deleted_files)
        self.validations.extend(other.validations)
        self.snapshot_properties.update(other.snapshot_properties)
        self._added_manifests = None  # nothing was written yet: producers write when staged

    # -- what subclasses decide ----------------------------------------------------------------
    def validate(self, base: TableMetadata, parent: Snapshot | None) -> None:
        """Raise CommitConflictError if the change no longer applies on ``parent``."""
        validate_all(self.validations, self.table.io, base, self.branch or MAIN_BRANCH)

    def metadata_changes(self, base: TableMetadata) -> tuple[list[TableRequirement], list[TableUpdate], int]:
        """Requirements and updates that land with the snapshot (a schema change made together
        with a rewrite), and the schema id the snapshot records."""
        return [], [], base.current_schema_id

    def existing_manifests(self, base: TableMetadata, parent: Snapshot | None) -> list[ManifestFile]:
        """The parent's manifests, rewritten where this change removes files.

        On a v3 table, removing a data file also removes its deletion vector (Java's
        ``removeDanglingDeletesFor``): a DV applies to its one data file only, so it would
        otherwise stay live, pointing at nothing. Compaction, copy-on-write rewrites and
        overwrites all drop the DVs of the files they replace this way.
        """
        self._dropped_dvs = []
        if parent is None:
            if self.deleted_files:
                raise CommitConflictError("the table has no snapshot any more; the files to replace are gone")
            return []
        manifests = snapshot_manifests(self.table.io, parent)
        if not self.deleted_files:
            return manifests
        # DVs are told apart by their offset too: one Puffin file holds the DVs of many data files.
        doomed = {delete_file_key(f) for f in self.deleted_files}
        kinds = {manifest_kind(f) for f in self.deleted_files}
        removed_data = {f.file_path for f in self.deleted_files if f.content == DataFileContent.DATA}
        drop_dvs = base.format_version >= 3 and bool(removed_data)
        if drop_dvs:
            kinds.add(ManifestContent.DELETES)

        def goes(e: ManifestEntry) -> bool:
            if e.status == ManifestEntryStatus.DELETED:
                return False
            f = e.data_file
            return delete_file_key(f) in doomed or (
                drop_dvs and is_deletion_vector(f) and f.referenced_data_file in removed_data)

        found: set[tuple[str, int | None]] = set()
        out: list[ManifestFile] = []
        for manifest in manifests:
            if manifest.content not in kinds:
                out.append(manifest)
                continue
            entries = self.carried_entries(base, manifest)
            if not any(goes(e) for e in entries):
                out.append(manifest)
                continue
            rewritten: list[ManifestEntry] = []
            for e in entries:
                if e.status == ManifestEntryStatus.DELETED:
                    continue  # deleted entries only live in the snapshot that deleted them
                if goes(e):
                    key = delete_file_key(e.data_file)
                    if key in doomed:
                        found.add(key)
                    else:
                        self._dropped_dvs.append(e.data_file)
                    rewritten.append(replace(e, status=ManifestEntryStatus.DELETED, snapshot_id=self.snapshot_id))
                else:
                    rewritten.append(replace(e, status=ManifestEntryStatus.EXISTING))
            out.append(write_manifest(
                self.table.io, self._manifest_path(), base.spec_for(manifest.partition_spec_id), base.schema(),
                self.snapshot_id, rewritten, content=manifest.content, format_version=base.format_version,
            ))
        missing = sorted(path for path, _ in doomed - found)
        if missing:
            raise self.missing_files_error(missing)
        return out

    def carried_entries(self, base: TableMetadata, manifest: ManifestFile) -> list[ManifestEntry]:
        """All entries of a parent manifest about to be rewritten; in v3, each data file with
        the ``first_row_id`` it inherits there, written explicitly so its rows keep their
        ``_row_id`` in the new manifest (which gets a ``first_row_id`` of its own)."""
        entries = read_manifest(self.table.io, manifest, specs=self.table.specs())
        return inherit_first_row_ids(manifest, entries) if base.format_version >= 3 else entries

    def missing_files_error(self, missing: list[str]) -> CommitConflictError:
        return CommitConflictError(
            f"{len(missing)} file(s) this {self.noun} replaces were removed by a concurrent commit "
            f"(for example {missing[0]}); re-run the operation on the new table state"
        )

    # -- the attempt ---------------------------------------------------------------------------
    def stage(self, base: TableMetadata, staged: TableMetadata) -> tuple[StagedCommit, Snapshot]:
        """This snapshot on ``base`` (the table as the catalog has it now): validated, its
        manifest list written. ``staged`` is ``base`` with the transaction's metadata changes
        applied; the manifests are written in its schema and specs."""
        branch = self.branch or MAIN_BRANCH
        ref = base.refs.get(branch)
        if ref is not None and not ref.is_branch:
            raise ValidationError(
                f"cannot write to {branch!r} of table {self.table.name}: it is a tag, and tags are "
                "read-only; write to a branch (create one from the tag to change its data)"
            )
        parent = base.branch_head(branch)
        if staged.format_version >= 3:
            self._refuse_position_delete_files()
        self.validate(base, parent)
        requirements, updates, schema_id = self.metadata_changes(staged)
        manifests = [*self._write_added_manifests(staged), *self.existing_manifests(staged, parent)]
        sequence_number = base.last_sequence_number + 1
        first_row_id, added_rows = None, None
        if staged.format_version >= 3:
            # Row ids come from the table's next-row-id as it is now, on every attempt: the added
            # manifests are kept unassigned, so a retry reassigns them from the refreshed value.
            first_row_id = staged.next_row_id or 0
            manifests, added_rows = assign_first_row_ids(manifests, first_row_id)
        self._attempt += 1
        path = f"{self.table.metadata_dir}/snap-{self.snapshot_id}-{self._attempt}-{self.commit_uuid}.avro"
        self._manifest_list = path
        write_manifest_list(
            self.table.io, path, self.snapshot_id, parent.snapshot_id if parent else None, sequence_number,
            manifests, format_version=staged.format_version, first_row_id=first_row_id,
        )
        snapshot = Snapshot(
            snapshot_id=self.snapshot_id,
            parent_snapshot_id=parent.snapshot_id if parent else None,
            sequence_number=sequence_number,
            timestamp_ms=max(int(time.time() * 1000), base.last_updated_ms),
            manifest_list=path,
            summary=self.summary(parent),
            schema_id=schema_id,
            first_row_id=first_row_id,
            added_rows=added_rows,
        )
        requirements = [AssertTableUUID(uuid=base.table_uuid), *requirements]
        updates = [*updates, AddSnapshotUpdate(snapshot=snapshot)]
        if self.branch is not None:
            # The branch's retention stays as it was; a new branch starts with the table's.
            requirements.insert(1, AssertRefSnapshotId(ref=self.branch, snapshot_id=ref.snapshot_id if ref else None))
            updates.append(SetSnapshotRefUpdate(
                ref_name=self.branch, snapshot_id=self.snapshot_id, type="branch",
                max_ref_age_ms=ref.max_ref_age_ms if ref else None,
                max_snapshot_age_ms=ref.max_snapshot_age_ms if ref else None,
                min_snapshots_to_keep=ref.min_snapshots_to_keep if ref else None,
            ))
        return StagedCommit(requirements, updates), snapshot

    def _refuse_position_delete_files(self) -> None:
        # format/spec.md, v3: "Position delete files must not be added to v3 tables"; deletes
        # of rows by position are deletion vectors (Puffin) there.
        files = [f.file_path for f in self.added_files
                 if f.content == DataFileContent.POSITION_DELETES and f.file_format != FileFormat.PUFFIN]
        if files:
            raise UnsupportedError(
                f"a format v3 table takes deletion vectors, not position delete files ({files[0]}); "
                "this change writes Parquet position deletes, which the spec forbids on v3: delete rows with "
                "merge-on-read DELETE/UPDATE/MERGE (which write deletion vectors) or rewrite_data_files instead"
            )

    def on_conflict(self) -> None:
        """The attempt lost: drop its manifest list and the manifests rewritten for its parent
        (the manifests of the added files are reused)."""
        if self._manifest_list is not None:
            self.table.io.delete(self._manifest_list)
            self._manifest_list = None
        keep = {m.manifest_path for m in self._added_manifests or []}
        for path in list(self._written_manifests):
            if path not in keep:
                self.table.io.delete(path)
                self._written_manifests.remove(path)

    def forget_attempt(self) -> None:
        """The last attempt's answer was lost: its manifest list and the manifests rewritten for
        it may be the table's now, so no later cleanup may delete them (orphan removal clears
        them if it never landed). The added manifests are the same in every attempt."""
        self._manifest_list = None
        keep = {m.manifest_path for m in self._added_manifests or []}
        self._written_manifests = [p for p in self._written_manifests if p in keep]

    def cleanup(self, keep_added_files: bool = False) -> None:
        """The commit failed for good (or was applied before): remove what it wrote."""
        for path in [*self._written_manifests, *([self._manifest_list] if self._manifest_list else [])]:
            quiet_delete(self.table, path)
        self._written_manifests, self._manifest_list = [], None
        if not keep_added_files and self.owns_added_files:
            for f in self.added_files:
                quiet_delete(self.table, f.file_path)

    # -- manifests and summary -------------------------------------------------------------------
    def _manifest_path(self) -> str:
        self._manifest_counter += 1
        path = f"{self.table.metadata_dir}/{self.commit_uuid}-m{self._manifest_counter - 1}.avro"
        self._written_manifests.append(path)
        return path

    def _write_added_manifests(self, base: TableMetadata) -> list[ManifestFile]:
        if self._added_manifests is None:
            # One manifest per kind and spec: files written before a partition evolution keep their spec.
            groups: dict[tuple[ManifestContent, int], list[DataFile]] = {}
            for f in self.added_files:
                groups.setdefault((manifest_kind(f), f.spec_id), []).append(f)
            self._added_manifests = [
                write_manifest(
                    self.table.io, self._manifest_path(), base.spec_for(spec_id), base.schema(), self.snapshot_id,
                    [ManifestEntry(ManifestEntryStatus.ADDED, self.snapshot_id, self.data_sequence_number, None, f)
                     for f in files],
                    content=content, format_version=base.format_version,
                )
                for (content, spec_id), files in sorted(groups.items())
            ]
        return list(self._added_manifests)

    def summary(self, parent: Snapshot | None) -> dict[str, str]:
        """Iceberg's snapshot summary (Java's ``SnapshotSummary``). A deletion vector counts as a
        delete file and as a DV (``added-dvs``, ``removed-dvs``), not as a position delete file,
        and its size is its blob's, not its Puffin file's (which it may share)."""
        def of(files: list[DataFile], content: DataFileContent) -> list[DataFile]:
            return [f for f in files if f.content == content]

        def size(f: DataFile) -> int:
            if is_deletion_vector(f) and f.content_size_in_bytes is not None:
                return f.content_size_in_bytes
            return f.file_size_in_bytes

        deleted_files = [*self.deleted_files, *self._dropped_dvs]
        added_data = of(self.added_files, DataFileContent.DATA)
        removed_data = of(deleted_files, DataFileContent.DATA)
        added_deletes = [f for f in self.added_files if f.content != DataFileContent.DATA]
        removed_deletes = [f for f in deleted_files if f.content != DataFileContent.DATA]
        added_records = sum(f.record_count for f in added_data)
        deleted_records = sum(f.record_count for f in removed_data)
        added_size = sum(size(f) for f in self.added_files)
        removed_size = sum(size(f) for f in deleted_files)
        added_dvs = [f for f in added_deletes if is_deletion_vector(f)]
        removed_dvs = [f for f in removed_deletes if is_deletion_vector(f)]
        added_position_files = [f for f in of(self.added_files, DataFileContent.POSITION_DELETES)
                                if not is_deletion_vector(f)]
        added_positions = of(self.added_files, DataFileContent.POSITION_DELETES)

        def rows(files: list[DataFile], content: DataFileContent) -> int:
            return sum(f.record_count for f in of(files, content))

        out: dict[str, str] = {"operation": self.operation}
        if added_data:
            out["added-data-files"] = str(len(added_data))
            out["added-records"] = str(added_records)
        if added_size:
            out["added-files-size"] = str(added_size)
        if removed_data:
            out["deleted-data-files"] = str(len(removed_data))
            out["deleted-records"] = str(deleted_records)
        if removed_size:
            out["removed-files-size"] = str(removed_size)
        if added_deletes:
            out["added-delete-files"] = str(len(added_deletes))
        if added_position_files:
            out["added-position-delete-files"] = str(len(added_position_files))
        if added_dvs:
            out["added-dvs"] = str(len(added_dvs))
        if added_positions:
            out["added-position-deletes"] = str(sum(f.record_count for f in added_positions))
        if removed_deletes:
            out["removed-delete-files"] = str(len(removed_deletes))
        if removed_dvs:
            out["removed-dvs"] = str(len(removed_dvs))
        partitions = {(f.spec_id, tuple(f.partition)) for f in (*self.added_files, *deleted_files)}
        out["changed-partition-count"] = str(len(partitions))
        previous = parent.summary if parent is not None else {}

        def total(key: str, delta: int) -> None:
            if parent is None:
                out[key] = str(max(0, delta))
            elif key in previous:
                out[key] = str(max(0, int(previous[key]) + delta))

        total("total-records", added_records - deleted_records)
        total("total-files-size", added_size - removed_size)
        total("total-data-files", len(added_data) - len(removed_data))
        total("total-delete-files", len(added_deletes) - len(removed_deletes))
        for key, content in (("total-position-deletes", DataFileContent.POSITION_DELETES),
                             ("total-equality-deletes", DataFileContent.EQUALITY_DELETES)):
            total(key, rows(self.added_files, content) - rows(deleted_files, content))
        out.update(self.snapshot_properties)
        return out


# -- the plain file changes ----------------------------------------------------------------------


def since(snapshot: Snapshot | None) -> int | None:
    return snapshot.snapshot_id if snapshot is not None else None


class FastAppend(SnapshotProducer):
    """Adds files in a new manifest and keeps every manifest of the parent as it is."""

    def __init__(self, table: Table, files: Iterable[DataFile], snapshot_properties: dict[str, str] | None = None):
        super().__init__(table, added=files, snapshot_properties=snapshot_properties, operation="append")


class OverwriteFiles(SnapshotProducer):
    """Removes whole files and adds new ones in one snapshot (overwrite, delete, replace).

    ``checks`` run on every attempt against the snapshots committed since the scan's snapshot
    (see :mod:`tablestore.table.update.validation`).
    """

    def __init__(
        self,
        table: Table,
        deleted: Iterable[DataFile],
        added: Iterable[DataFile],
        operation: str | None,
        scan_snapshot_id: int | None,
        checks: Iterable[Check] = (),
        snapshot_properties: dict[str, str] | None = None,
    ) -> None:
        super().__init__(table, added=added, deleted=deleted,
                         validations=[Validation(scan_snapshot_id, c) for c in checks],
                         snapshot_properties=snapshot_properties, operation=operation)
        self.scan_snapshot_id = scan_snapshot_id


class RowDelta(SnapshotProducer):
    """Removes data files, adds data files and delete files, in one snapshot validated as
    Iceberg's ``RowDelta`` under the operation's isolation level."""

    def __init__(
        self,
        table: Table,
        removed: Iterable[DataFile],
        added_data: Iterable[DataFile],
        added_deletes: Iterable[DataFile],
        scan_snapshot_id: int | None,
        checks: Iterable[Check],
        snapshot_properties: dict[str, str] | None = None,
    ) -> None:
        super().__init__(table, added=[*added_data, *added_deletes], deleted=removed,
                         validations=[Validation(scan_snapshot_id, c) for c in checks],
                         snapshot_properties=snapshot_properties)
        self.scan_snapshot_id = scan_snapshot_id
