"""Conflict validation: may a change still commit on top of what others committed since it read?

Every check of the commit path lives here, with the isolation levels. A snapshot change carries
:class:`Validation` objects; each names the snapshot its operation read (``since``) and a
check. On every attempt of a commit, the checks run against the snapshots committed on main
after that snapshot (:class:`ConcurrentCommits`) and raise :class:`CommitConflictError` when one
of them touched what the operation read or changes. A check that passes means the change can be
rebased onto the new parent; a check that fails ends the commit (it is not retried: the
operation has to read the table again).

The checks follow Iceberg's ``MergingSnapshotProducer`` validations:

- :func:`no_new_data_files` (``validateAddedDataFiles``): no concurrent commit added data files
  that may hold rows the operation's condition matches (overwrite by filter, replace
  partitions, DROP PARTITION, serializable row-level operations);
- :func:`data_files_exist` (``validateDataFilesExist``): no concurrent commit removed a data
  file the operation rewrites or references with position deletes;
- :func:`no_new_delete_files` (``validateNoNewDeletesForDataFiles``): no concurrent commit added
  delete files that may apply to those data files (both commits would change the same rows);
- :func:`no_new_snapshots`: nothing at all was committed (a streaming batch in complete mode).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tablestore.errors import CommitConflictError, ValidationError
from tablestore.spec.expressions.evaluators import InclusiveMetricsEvaluator, PartitionEvaluator
from tablestore.spec.expressions.expression_tree import AlwaysFalse, BooleanExpression
from tablestore.spec.manifests.manifest import (
    DataFile,
    DataFileContent,
    ManifestEntryStatus,
    read_manifest,
    snapshot_manifests,
)
from tablestore.spec.metadata.table_metadata import MAIN_BRANCH, Snapshot, TableMetadata
from tablestore.table.read.scan import path_in_bounds

if TYPE_CHECKING:
    from tablestore.io.fileio import FileIO

# Isolation levels of row-level operations (``write.<delete|update|merge>.isolation-level``).
SERIALIZABLE = "serializable"
SNAPSHOT = "snapshot"
ISOLATION_LEVELS = (SERIALIZABLE, SNAPSHOT)


def isolation_level(properties: Mapping[str, str], operation: str) -> str:
    """The table's ``write.<operation>.isolation-level`` (serializable when unset, as in Iceberg)."""
    key = f"write.{operation}.isolation-level"
    level = properties.get(key, SERIALIZABLE).strip().lower()
    if level not in ISOLATION_LEVELS:
        raise ValidationError(f"table property {key}={level!r} must be serializable or snapshot")
    return level


def snapshots_since(metadata: TableMetadata, snapshot_id: int | None,
                    branch: str = MAIN_BRANCH) -> list[Snapshot]:
    """Snapshots on ``branch`` after ``snapshot_id``, oldest first."""
    out: list[Snapshot] = []
    current = metadata.branch_head(branch)
    while current is not None and current.snapshot_id != snapshot_id:
        out.append(current)
        parent_id = current.parent_snapshot_id
        current = metadata.snapshot_by_id(parent_id) if parent_id is not None else None
    out.reverse()
    return out


@dataclass
class ConcurrentCommits:
    """What the snapshots committed since an operation read the table added and removed.

    The manifests are read once, on first use, however many checks look at them.
    """

    io: FileIO
    metadata: TableMetadata
    snapshots: list[Snapshot]
    _read: bool = field(default=False, init=False)
    _added_data: list[DataFile] = field(default_factory=list, init=False)
    _added_deletes: list[DataFile] = field(default_factory=list, init=False)
    _removed: list[DataFile] = field(default_factory=list, init=False)

    def _load(self) -> None:
        if self._read:
            return
        self._read = True
        specs = {s.spec_id: s for s in self.metadata.partition_specs}
        for snapshot in self.snapshots:
            for manifest in snapshot_manifests(self.io, snapshot):
                if manifest.added_snapshot_id != snapshot.snapshot_id:
                    continue  # carried over unchanged from an older snapshot
                for entry in read_manifest(self.io, manifest, specs=specs):
                    if entry.snapshot_id != snapshot.snapshot_id:
                        continue
                    f = entry.data_file
                    if entry.status == ManifestEntryStatus.ADDED:
                        (self._added_data if f.content == DataFileContent.DATA else self._added_deletes).append(f)
                    elif entry.status == ManifestEntryStatus.DELETED and f.content == DataFileContent.DATA:
                        self._removed.append(f)

    @property
    def added_data(self) -> list[DataFile]:
        self._load()
        return self._added_data

    @property
    def added_deletes(self) -> list[DataFile]:
        self._load()
        return self._added_deletes

    @property
    def removed_data(self) -> list[DataFile]:
        self._load()
        return self._removed


Check = Callable[[ConcurrentCommits], None]


@dataclass(frozen=True)
class Validation:
    """A check of the commits made since snapshot ``since`` (None: the table was empty)."""

    since: int | None
    check: Check


def validate_all(validations: Iterable[Validation], io: FileIO, base: TableMetadata,
                 branch: str = MAIN_BRANCH) -> None:
    """Run every validation on ``base`` against the commits on ``branch``, sharing the manifests
    read for one ``since``."""
    by_since: dict[int | None, list[Check]] = {}
    for v in validations:
        by_since.setdefault(v.since, []).append(v.check)
    current = base.branch_head(branch)
    current_id = current.snapshot_id if current else None
    for since, checks in by_since.items():
        if since == current_id:
            continue
        commits = ConcurrentCommits(io, base, snapshots_since(base, since, branch))
        for check in checks:
            check(commits)


# -- matching files ----------------------------------------------------------------------------


def position_delete_may_hit(delete: DataFile, path: str) -> bool:
    """Whether a position delete file may delete rows of the data file at ``path``."""
    if delete.referenced_data_file:
        return delete.referenced_data_file == path
    return path_in_bounds(delete, path)


def delete_may_apply(delete: DataFile, data: DataFile, unpartitioned_specs: set[int]) -> bool:
    """Whether a delete file may apply to a data file (the read path's matching, without
    sequence numbers)."""
    if delete.spec_id not in unpartitioned_specs and (
        delete.spec_id != data.spec_id or tuple(delete.partition) != tuple(data.partition)
    ):
        return False
    if delete.content == DataFileContent.POSITION_DELETES:
        return position_delete_may_hit(delete, data.file_path)
    return True


def filter_matcher(metadata: TableMetadata, condition: BooleanExpression) -> Callable[[DataFile], bool]:
    """Whether a data file may hold rows matching a bound condition (partition values, then
    column bounds), as scan planning decides it."""
    schema = metadata.schema()
    metrics = InclusiveMetricsEvaluator(schema, condition)
    evaluators: dict[int, PartitionEvaluator] = {}

    def matches(f: DataFile) -> bool:
        evaluator = evaluators.get(f.spec_id)
        if evaluator is None:
            evaluator = evaluators[f.spec_id] = PartitionEvaluator(metadata.spec_for(f.spec_id), schema, condition)
        return evaluator.eval(tuple(f.partition)) and metrics.eval(f)

    return matches


# -- the checks --------------------------------------------------------------------------------


def no_new_data_files(matches: Callable[[DataFile], bool] | None, conflict: Callable[[DataFile], str]) -> Check:
    """No concurrent commit added a data file that ``matches`` (any data file when None);
    ``conflict`` words the error for the first such file."""

    def check(commits: ConcurrentCommits) -> None:
        for f in commits.added_data:
            if matches is None or matches(f):
                raise CommitConflictError(conflict(f))

    return check


def no_new_data_matching(condition: BooleanExpression, what: str) -> Check:
    """No concurrent commit added a data file that may hold rows matching ``condition``."""
    if isinstance(condition, AlwaysFalse):
        return lambda commits: None
    return _no_new_data_matching(
        condition,
        lambda f: f"a concurrent commit added {f.file_path}, which may hold rows matching the {what}; "
                  "re-run it on the new table state",
    )


def _no_new_data_matching(condition: BooleanExpression, conflict: Callable[[DataFile], str]) -> Check:
    def check(commits: ConcurrentCommits) -> None:
        if commits.added_data:
            # Evaluated on the metadata of the attempt: a concurrent commit may have added a spec.
            no_new_data_files(filter_matcher(commits.metadata, condition), conflict)(commits)

    return check


def data_files_exist(files: Iterable[DataFile]) -> Check:
    """No concurrent commit removed one of ``files`` (rows this operation changes)."""
    paths = {f.file_path for f in files}

    def check(commits: ConcurrentCommits) -> None:
        for f in commits.removed_data:
            if f.file_path in paths:
                raise CommitConflictError(
                    f"a concurrent commit removed the data file {f.file_path}, whose rows this operation "
                    "changes; re-run it on the new table state"
                )

    return check


def no_new_delete_files(files: Iterable[DataFile], what: str = "this operation changes too") -> Check:
    """No concurrent commit added a delete file that may apply to one of ``files``."""
    touched = list(files)

    def check(commits: ConcurrentCommits) -> None:
        unpartitioned = {s.spec_id for s in commits.metadata.partition_specs if s.is_unpartitioned()}
        for delete in commits.added_deletes:
            for data in touched:
                if delete_may_apply(delete, data, unpartitioned):
                    raise CommitConflictError(
                        f"a concurrent commit added the delete file {delete.file_path} for {data.file_path}, "
                        f"whose rows {what}; re-run it on the new table state"
                    )

    return check


def no_new_snapshots(conflict: Callable[[list[Snapshot]], str]) -> Check:
    """Nothing at all was committed since the operation read the table."""

    def check(commits: ConcurrentCommits) -> None:
        if commits.snapshots:
            raise CommitConflictError(conflict(commits.snapshots))

    return check


def row_level_checks(touched: Iterable[DataFile], isolation: str,
                     condition: BooleanExpression | None) -> list[Check]:
    """The checks of a row-level operation (Iceberg's ``RowDelta`` validations): the files it
    rewrites or references still exist and got no new deletes; under ``serializable``, no new
    data may match its condition (under ``snapshot`` such appends are allowed)."""
    if isolation not in ISOLATION_LEVELS:
        raise ValidationError(f"isolation level {isolation!r} is not one of {', '.join(ISOLATION_LEVELS)}")
    touched = list(touched)
    checks = [data_files_exist(touched), no_new_delete_files(touched)]
    if isolation == SERIALIZABLE and condition is not None and not isinstance(condition, AlwaysFalse):
        checks.append(_no_new_data_matching(
            condition,
            lambda f: f"a concurrent commit added {f.file_path}, which may hold rows matching the condition of "
                      "this operation (isolation level serializable); re-run it on the new table state, or set "
                      "the table's write.<delete|update|merge>.isolation-level to snapshot",
        ))
    return checks


def no_new_deletes_for_rewritten(replaced: Iterable[DataFile], what: str) -> Check:
    """No concurrent commit added a delete file that may delete rows of a file this change
    rewrites: the rewrite would bring those rows back."""
    paths = {f.file_path for f in replaced}
    partitions = {(f.spec_id, tuple(f.partition)) for f in replaced}

    def check(commits: ConcurrentCommits) -> None:
        for f in commits.added_deletes:
            if f.referenced_data_file is not None and f.referenced_data_file not in paths:
                continue
            spec = commits.metadata.spec_for(f.spec_id)
            if spec.is_unpartitioned() or (f.spec_id, tuple(f.partition)) in partitions:
                raise CommitConflictError(
                    f"a concurrent commit added the delete file {f.file_path}, which may delete rows of {what}"
                )

    return check


def no_position_deletes_into(paths: Iterable[str], what: str) -> Check:
    """No concurrent commit added position deletes that point into one of ``paths``."""
    targets = set(paths)

    def check(commits: ConcurrentCommits) -> None:
        hits = sorted({
            f"{d.file_path} (deletes rows of {path})"
            for d in commits.added_deletes
            for path in targets
            if d.content == DataFileContent.POSITION_DELETES and position_delete_may_hit(d, path)
        })
        if hits:
            raise CommitConflictError(
                f"a concurrent commit deleted rows in files {what}: {'; '.join(hits[:5])}"
                f"{' and more' if len(hits) > 5 else ''}; re-run the compaction on the new table state"
            )

    return check


def no_data_added(conflict: Callable[[list[DataFile]], str]) -> Check:
    """No concurrent commit added any data file (the change replaces what it read, all of it)."""

    def check(commits: ConcurrentCommits) -> None:
        if commits.added_data:
            raise CommitConflictError(conflict(commits.added_data))

    return check
