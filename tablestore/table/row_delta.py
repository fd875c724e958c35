"""The RowDelta snapshot producer: one commit that removes data files, adds data files and adds
delete files, validated against the snapshot the operation read (Iceberg's ``RowDelta`` and the
copy-on-write ``OverwriteFiles`` of Spark's row-level commands).

Validation, on every attempt, against the snapshots committed since the scan's snapshot:

- a data file this commit removes, or references with position deletes, must not have been
  removed by a concurrent commit (Iceberg's ``validateDataFilesExist`` / missing files);
- no concurrent commit may have added delete files that apply to those data files
  (``validateNoConflictingDeleteFiles``): both commits would change the same rows;
- under ``serializable`` isolation, no concurrent commit may have added data files that may hold
  rows matching the operation's condition (``validateNoConflictingDataFiles``); under
  ``snapshot`` isolation such appends are allowed.

When validation passes, the commit is rebased onto the new parent and retried: that is safe
because the concurrent snapshots touched none of the files this commit reads or changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tablestore.errors import CommitConflictError, ValidationError
from tablestore.spec import conversions
from tablestore.spec.evaluators import InclusiveMetricsEvaluator, PartitionEvaluator
from tablestore.spec.expressions import AlwaysFalse, BooleanExpression
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
from tablestore.spec.types import StringType
from tablestore.table.read import DELETE_FILE_PATH_ID
from tablestore.table.snapshot import OverwriteFiles, snapshots_since

if TYPE_CHECKING:
    from tablestore.table import Table

SERIALIZABLE = "serializable"
SNAPSHOT = "snapshot"
ISOLATION_LEVELS = (SERIALIZABLE, SNAPSHOT)


@dataclass
class ConcurrentChanges:
    """What the snapshots committed since the scan added and removed."""

    added_data: list[DataFile] = field(default_factory=list)
    added_deletes: list[DataFile] = field(default_factory=list)
    removed: list[DataFile] = field(default_factory=list)


def concurrent_changes(table: Table, snapshots: list[Snapshot]) -> ConcurrentChanges:
    out = ConcurrentChanges()
    for snapshot in snapshots:
        for manifest in snapshot_manifests(table.io, snapshot):
            if manifest.added_snapshot_id != snapshot.snapshot_id:
                continue  # carried over unchanged from an older snapshot
            for entry in read_manifest(table.io, manifest, specs=table.specs()):
                if entry.snapshot_id != snapshot.snapshot_id:
                    continue
                f = entry.data_file
                if entry.status == ManifestEntryStatus.ADDED:
                    (out.added_data if f.content == DataFileContent.DATA else out.added_deletes).append(f)
                elif entry.status == ManifestEntryStatus.DELETED and f.content == DataFileContent.DATA:
                    out.removed.append(f)
    return out


def _delete_may_apply(delete: DataFile, data: DataFile, unpartitioned_specs: set[int]) -> bool:
    """Whether a delete file may apply to a data file (the read path's matching, without sequence numbers)."""
    if delete.spec_id not in unpartitioned_specs and (
        delete.spec_id != data.spec_id or tuple(delete.partition) != tuple(data.partition)
    ):
        return False
    if delete.content == DataFileContent.POSITION_DELETES:
        if delete.referenced_data_file:
            return delete.referenced_data_file == data.file_path
        lower = (delete.lower_bounds or {}).get(DELETE_FILE_PATH_ID)
        upper = (delete.upper_bounds or {}).get(DELETE_FILE_PATH_ID)
        if lower is not None and conversions.from_bytes(StringType(), lower) > data.file_path:
            return False
        return not (upper is not None and conversions.from_bytes(StringType(), upper) < data.file_path)
    return True


class RowDelta(OverwriteFiles):
    """Remove data files, add data files and delete files, in one validated snapshot."""

    def __init__(
        self,
        table: Table,
        removed: Iterable[DataFile],
        added_data: Iterable[DataFile],
        added_deletes: Iterable[DataFile],
        scan_snapshot_id: int | None,
        isolation: str = SERIALIZABLE,
        conflict_filter: BooleanExpression | None = None,
        referenced: Iterable[DataFile] = (),
        snapshot_properties: dict[str, str] | None = None,
    ) -> None:
        if isolation not in ISOLATION_LEVELS:
            raise ValidationError(f"isolation level {isolation!r} is not one of {', '.join(ISOLATION_LEVELS)}")
        added = list(added_data)
        deletes = list(added_deletes)
        removed_files = list(removed)
        operation = "delete" if not added else "overwrite"
        if not deletes and not removed_files:
            operation = "append"
        super().__init__(table, removed_files, added, operation, scan_snapshot_id,
                         snapshot_properties=snapshot_properties)
        self.added_deletes = deletes
        self.isolation = isolation
        self.conflict_filter = conflict_filter
        self.referenced = list(referenced)
        self._delete_manifests: list[ManifestFile] | None = None

    # -- validation ---------------------------------------------------------------------------------
    def validate(self, base: TableMetadata, parent: Snapshot | None) -> None:
        parent_id = parent.snapshot_id if parent else None
        if parent_id == self.scan_snapshot_id:
            return
        changes = concurrent_changes(self.table, snapshots_since(base, self.scan_snapshot_id))
        touched = {f.file_path: f for f in (*self.deleted_files, *self.referenced)}
        for f in changes.removed:
            if f.file_path in touched:
                raise CommitConflictError(
                    f"a concurrent commit removed the data file {f.file_path}, whose rows this operation "
                    "changes; re-run it on the new table state"
                )
        unpartitioned = {s.spec_id for s in base.partition_specs if s.is_unpartitioned()}
        for delete in changes.added_deletes:
            for data in touched.values():
                if _delete_may_apply(delete, data, unpartitioned):
                    raise CommitConflictError(
                        f"a concurrent commit added the delete file {delete.file_path} for {data.file_path}, "
                        "whose rows this operation changes too; re-run it on the new table state"
                    )
        if self.isolation == SERIALIZABLE and self.conflict_filter is not None \
                and not isinstance(self.conflict_filter, AlwaysFalse):
            schema = base.schema()
            metrics = InclusiveMetricsEvaluator(schema, self.conflict_filter)
            evaluators: dict[int, PartitionEvaluator] = {}
            for f in changes.added_data:
                spec = base.spec_for(f.spec_id)
                evaluator = evaluators.setdefault(f.spec_id, PartitionEvaluator(spec, schema, self.conflict_filter))
                if evaluator.eval(tuple(f.partition)) and metrics.eval(f):
                    raise CommitConflictError(
                        f"a concurrent commit added {f.file_path}, which may hold rows matching the condition of "
                        "this operation (isolation level serializable); re-run it on the new table state, or "
                        "set the table's write.<delete|update|merge>.isolation-level to snapshot"
                    )

    # -- manifests ----------------------------------------------------------------------------------
    def _write_added_manifest(self, base: TableMetadata) -> list[ManifestFile]:
        manifests = super()._write_added_manifest(base)
        if self._delete_manifests is None:
            self._delete_manifests = []
            by_spec: dict[int, list[DataFile]] = {}
            for f in self.added_deletes:
                by_spec.setdefault(f.spec_id, []).append(f)
            for spec_id, files in sorted(by_spec.items()):
                entries = [ManifestEntry(ManifestEntryStatus.ADDED, self.snapshot_id, None, None, f) for f in files]
                self._delete_manifests.append(write_manifest(
                    self.table.io, self._manifest_path(), base.spec_for(spec_id), base.schema(), self.snapshot_id,
                    entries, content=ManifestContent.DELETES, format_version=base.format_version,
                ))
        return [*manifests, *self._delete_manifests]

    def _discard_rewritten(self) -> None:
        keep = {m.manifest_path for m in self._delete_manifests or []}
        keep.update(m.manifest_path for m in self._added_manifests or [])
        for path in list(self._written_manifests):
            if path not in keep:
                self.table.io.delete(path)
                self._written_manifests.remove(path)

    def _cleanup(self) -> None:
        super()._cleanup()
        from tablestore.table.snapshot import quiet_delete

        for f in self.added_deletes:
            quiet_delete(self.table, f.file_path)

    def summary(self, base: TableMetadata, parent: Snapshot | None) -> dict[str, str]:
        out = super().summary(base, parent)
        if not self.added_deletes:
            return out
        positions = [f for f in self.added_deletes if f.content == DataFileContent.POSITION_DELETES]
        position_rows = sum(f.record_count for f in positions)
        size = sum(f.file_size_in_bytes for f in self.added_deletes)
        out["added-delete-files"] = str(len(self.added_deletes))
        if positions:
            out["added-position-delete-files"] = str(len(positions))
            out["added-position-deletes"] = str(position_rows)
        out["added-files-size"] = str(int(out.get("added-files-size", "0")) + size)
        partitions = {(f.spec_id, tuple(f.partition)) for f in (*self.added_files, *self.deleted_files,
                                                                 *self.added_deletes)}
        out["changed-partition-count"] = str(len(partitions))
        for key, delta in (("total-delete-files", len(self.added_deletes)), ("total-position-deletes", position_rows),
                           ("total-files-size", size)):
            if key in out:
                out[key] = str(int(out[key]) + delta)
        return out


