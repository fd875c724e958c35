"""Overwrites: rows matching a filter, or whole partitions, replaced by new rows in one snapshot.

Both kinds find the rows they replace in files of every partition spec of the table, so an
overwrite stays exact after a partition evolution:

- **by filter** (``table.overwrite(data, filter=...)``, a static ``INSERT OVERWRITE``): the rows
  for which the filter is true;
- **dynamic** (``table.replace_partitions(data)``, a dynamic ``INSERT OVERWRITE``): the rows that
  fall into the partitions of the current spec that ``data`` writes to. A file of the current
  spec in such a partition is dropped. A file of an older spec is decided by its own partition
  values and column bounds: wholly inside the replaced partitions, it is dropped in metadata;
  outside them, it stays unread; otherwise (it *straddles* them: a day file when hours are
  replaced) only its rows in the replaced partitions are deleted.

Deleting some rows of a file follows the table's ``write.delete.mode``: ``copy-on-write`` (the
default) rewrites the file without them, ``merge-on-read`` writes a position delete file. An
overwrite is a delete of the replaced rows plus an insert, and Iceberg has no mode of its own
for it (its ``OverwriteFiles`` refuses a file that only partly matches), so the delete's mode
applies. Java Iceberg's ``ReplacePartitions`` replaces only files of the current spec; see
docs/partitions.md for the difference.

The snapshot is validated against the commits made since the overwrite read the table
(:mod:`tablestore.table.update.validation`): no new data in the replaced range, and the files it
rewrites or marks with deletes still exist and got no new deletes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from tablestore.io.cleanup import deleted_unless_sent
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.evaluators import decode_bound
from tablestore.spec.expressions.expression_parser import to_expression
from tablestore.spec.expressions.expression_tree import AlwaysFalse, AlwaysTrue, Expression
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.metadata.table_metadata import Snapshot
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.partitioning.transforms import IdentityTransform, VoidTransform
from tablestore.spec.schemas.schema import Schema
from tablestore.table.ops.partitions import PartitionKey, partition_status
from tablestore.table.ops.row_level import (
    COPY_ON_WRITE,
    EXACT_BOUND_TYPES,
    FileChange,
    RowLevelContext,
    change_file,
    delete_job,
    discard,
    read_live_rows,
    run_changes,
    top_level_ids,
    write_mode,
)
from tablestore.table.read.scan import FileTask, plan_files
from tablestore.table.update.snapshot import OverwriteFiles, since
from tablestore.table.update.validation import (
    SNAPSHOT,
    Check,
    ConcurrentCommits,
    no_data_added,
    no_new_data_files,
    no_new_data_matching,
    row_level_checks,
)
from tablestore.table.write.conform import conform_to_schema, downcast_ns_requested, to_arrow_table
from tablestore.table.write.data_files import (
    WriteContext,
    group_codes,
    partition_keys,
    partition_tuple,
    single_chunk,
    write_data_files,
)

if TYPE_CHECKING:
    from tablestore.table import Table

# The mode of the rows an overwrite deletes from files it does not drop whole.
OVERWRITE_DELETE_MODE_OPERATION = "delete"
_YES, _NO = "yes", "no"


def write_context(table: Table) -> WriteContext:
    return WriteContext(table.io, table.location, table.schema(), table.spec(), table.properties)


def _conformed(table: Table, data: Any) -> pa.Table:
    return conform_to_schema(to_arrow_table(data), table.schema(), downcast_ns_requested(table.metadata.properties))


def _producer(table: Table, removed: list[DataFile], added: list[DataFile], changes: list[FileChange],
              snapshot: Snapshot | None, checks: list[Check],
              snapshot_properties: dict[str, str] | None) -> OverwriteFiles:
    """One overwrite snapshot: the dropped files, the new rows, and the per-file changes."""
    touched = [c.data_file for c in changes]
    return OverwriteFiles(
        table,
        [*removed, *(c.data_file for c in changes if c.removed)],
        [*added, *(f for c in changes for f in (*c.added_data, *c.added_deletes))],
        "overwrite", since(snapshot),
        # The rewritten and delete-marked files must still be there, without new deletes.
        checks=[*checks, *row_level_checks(touched, SNAPSHOT, None)],
        snapshot_properties=snapshot_properties,
    )


# -- overwrite by filter -------------------------------------------------------------------------------


def overwrite_producer(table: Table, data: Any, filter: str | Expression | None,
                       snapshot_properties: dict[str, str] | None) -> OverwriteFiles:
    """The snapshot that replaces the rows matching ``filter`` (every row when None) with ``data``.

    Files whose partition values and bounds prove every row matches are dropped unread; the
    matching rows of other files are deleted by ``write.delete.mode``. It fails with
    CommitConflictError if a concurrent commit added rows that match the filter after this
    overwrite read the table.
    """
    rows = _conformed(table, data)
    return _overwrite(table, lambda: write_data_files(write_context(table), rows, table.engine.map)
                      if rows.num_rows else [], filter, snapshot_properties)


def overwrite_files_producer(table: Table, added: list[DataFile], filter: str | Expression | None,
                             snapshot_properties: dict[str, str] | None) -> OverwriteFiles:
    """:func:`overwrite_producer` for data files written elsewhere (by Spark tasks): the rows
    matching ``filter`` are replaced by the rows of ``added``. ``table`` is the table as the
    write read it: the commit is validated against the commits made since."""
    return _overwrite(table, lambda: added, filter, snapshot_properties)


def replace_files_producer(table: Table, added: list[DataFile], read_snapshot_id: int | None,
                           snapshot_properties: dict[str, str] | None) -> OverwriteFiles:
    """The whole table replaced by ``added`` (files written elsewhere), unless data arrived
    meanwhile: every data file live in ``table`` is removed, and a commit that added data
    files since ``read_snapshot_id`` (the snapshot the write read; None: the table was empty)
    makes it fail with CommitConflictError. Rows another writer added since would otherwise be
    lost without anyone deciding so. Spark's overwriting writes commit this: a batch
    ``mode("overwrite")`` and every micro-batch of a streaming query in complete mode."""
    snapshot = table.current_snapshot()
    replaced = [] if snapshot is None else [
        t.file for t in plan_files(table.io, table.metadata, snapshot, table.schema(), AlwaysTrue(), table.engine)
    ]
    nothing_new = no_data_added(
        lambda new: f"{len(new)} data file(s) were added to {table.name} while the write that replaces it ran; "
                    "run it again on the new table state"
    )
    return OverwriteFiles(table, replaced, added, "overwrite", read_snapshot_id, checks=[nothing_new],
                          snapshot_properties=snapshot_properties)


def _overwrite(table: Table, write: Callable[[], list[DataFile]], filter: str | Expression | None,
               snapshot_properties: dict[str, str] | None) -> OverwriteFiles:
    bound = bind(table.schema(), to_expression(filter))
    snapshot = table.current_snapshot()
    removed: list[DataFile] = []
    changes: list[FileChange] = []
    ctx = RowLevelContext.of(table, write_mode(table.properties, OVERWRITE_DELETE_MODE_OPERATION))
    if snapshot is not None and not isinstance(bound, AlwaysFalse):
        tasks = plan_files(table.io, table.metadata, snapshot, table.schema(), bound, table.engine)
        if isinstance(bound, AlwaysTrue):
            removed = [t.file for t in tasks]
        else:
            changes = run_changes(table, delete_job(ctx, bound), tasks, ctx)
    added: list[DataFile] = []
    # Until the producer exists (the transaction owns its files from then on), a failure leaves
    # files no commit references.
    with deleted_unless_sent(lambda: discard(table, changes, added)):
        added = write()
        return _producer(table, removed, added, changes, snapshot,
                         [no_new_data_matching(bound, "filter of this operation")], snapshot_properties)


# -- dynamic partition overwrite ----------------------------------------------------------------------


@dataclass
class ReplacedPartitions:
    """The partitions of the current spec a dynamic overwrite replaces, and how a file of any
    spec relates to them."""

    schema: Schema
    spec: PartitionSpec
    targets: set[tuple[Any, ...]]

    def __post_init__(self) -> None:
        # Each target as the keys DROP PARTITION uses to relate a file of another spec to it.
        self.keys_list = [
            [PartitionKey(f.name, f.source_id, f.transform, value, None)
             for f, value in zip(self.spec.fields, target, strict=True) if not isinstance(f.transform, VoidTransform)]
            for target in self.targets
        ]

    def status(self, specs: dict[int, PartitionSpec], f: DataFile) -> str:
        """``yes`` (every row is replaced), ``no`` (none) or ``unknown`` (the file is read)."""
        if f.spec_id == self.spec.spec_id:
            return _YES if tuple(f.partition) in self.targets else _NO
        spec = specs[f.spec_id]
        statuses = [self._file_status(keys, spec, f) for keys in self.keys_list]
        if _YES in statuses:
            return _YES
        return _NO if all(s == _NO for s in statuses) else "unknown"

    def _file_status(self, keys: list[PartitionKey], spec: PartitionSpec, f: DataFile) -> str:
        status = partition_status(keys, spec, tuple(f.partition), self.schema)
        if status != "unknown":
            return status
        # The partition cannot tell (a day file, hours replaced): the column bounds may.
        verdicts = [_bounds_status(key, f, self.schema) for key in keys]
        if _NO in verdicts:
            return _NO
        return _YES if all(v == _YES for v in verdicts) else "unknown"

    def mask(self, rows: pa.Table) -> np.ndarray:
        """True for each row whose partition in the current spec is replaced."""
        if rows.num_rows == 0:
            return np.zeros(0, dtype=bool)
        result_types = [f.field_type for f in self.spec.partition_type(self.schema).fields]
        keys = [single_chunk(k) for k in partition_keys(self.spec, self.schema, rows)]
        grouped = group_codes(keys)
        if grouped is None:  # a key type without dictionary encoding: one tuple per row
            return np.array([partition_tuple(keys, i, result_types) in self.targets for i in range(rows.num_rows)],
                            dtype=bool)
        codes, _ = grouped
        distinct, first = np.unique(codes, return_index=True)
        hit = np.array([partition_tuple(keys, int(i), result_types) in self.targets for i in first], dtype=bool)
        return hit[np.searchsorted(distinct, codes)]


def _bounds_status(key: PartitionKey, f: DataFile, schema: Schema) -> str:
    """Whether the file's exact column bounds put every row inside (yes) or outside (no) the key's
    partition, for transforms that preserve order (identity, the time transforms)."""
    t = key.transform
    if not (isinstance(t, IdentityTransform) or t.preserves_order) or key.value is None:
        return "unknown"
    source = schema.find_type(key.source_id)
    fid = key.source_id
    values = (f.value_counts or {}).get(fid)
    nulls = (f.null_value_counts or {}).get(fid)
    if not isinstance(source, EXACT_BOUND_TYPES) or values is None or nulls is None or values != f.record_count:
        return "unknown"
    lower = decode_bound(source, (f.lower_bounds or {}).get(fid))
    upper = decode_bound(source, (f.upper_bounds or {}).get(fid))
    if lower is None or upper is None:
        return "unknown"
    try:
        low, high = t.apply(lower, source), t.apply(upper, source)
        outside = bool(high < key.value or low > key.value)
    except (TypeError, ValueError):  # a bound this transform cannot take: only pruning is lost
        return "unknown"
    if outside:
        return _NO  # NULL values are outside too: their partition value is NULL, the key's is not
    return _YES if nulls == 0 and low == high == key.value else "unknown"


def replace_job(ctx: RowLevelContext, replaced: ReplacedPartitions) -> Callable[[FileTask], FileChange | None]:
    """Delete a straddling file's rows in the replaced partitions (by ``ctx.mode``)."""
    sources = top_level_ids(ctx.schema, {f.source_id for f in replaced.spec.fields})

    def run(task: FileTask) -> FileChange | None:
        # Merge-on-read needs only the partition source columns to find the rows.
        live, positions = read_live_rows(ctx, task, None if ctx.mode == COPY_ON_WRITE else sources)
        mask = replaced.mask(live)
        count = int(mask.sum())
        if count == 0:
            return None
        if ctx.mode == COPY_ON_WRITE:
            return change_file(ctx, task, live, positions, mask)
        if count == live.num_rows:
            return FileChange(task.file, affected=count, removed=True)
        return ctx.delete_positions(task, positions[mask], count)

    return run


def _conflict_check(replaced: ReplacedPartitions) -> Check:
    def check(commits: ConcurrentCommits) -> None:
        # Related by the attempt's specs: a concurrent commit may have added one.
        specs = commits.metadata.specs()
        no_new_data_files(
            lambda f: replaced.status(specs, f) != _NO,
            lambda f: f"a concurrent commit added {f.file_path}, which may hold rows of a partition this "
                      "overwrite replaces; re-run it on the new table state",
        )(commits)

    return check


def replace_partitions_producer(table: Table, data: Any,
                                snapshot_properties: dict[str, str] | None) -> OverwriteFiles:
    """Dynamic partition overwrite: the snapshot that replaces exactly the rows of the partitions
    (of the current spec) that ``data`` has rows in, in files of every spec. A concurrent commit
    that adds files that may hold such rows makes it fail with CommitConflictError."""
    rows = _conformed(table, data)
    added = write_data_files(write_context(table), rows, table.engine.map) if rows.num_rows else []
    with deleted_unless_sent(lambda: discard(table, [], added)):
        return replace_partitions_files_producer(table, added, snapshot_properties)


def replace_partitions_files_producer(table: Table, added: list[DataFile],
                                      snapshot_properties: dict[str, str] | None) -> OverwriteFiles:
    """:func:`replace_partitions_producer` for data files written elsewhere (by Spark tasks): the
    partitions replaced are those of ``added``, which the caller deletes if this fails."""
    replaced = ReplacedPartitions(table.schema(), table.spec(), {tuple(f.partition) for f in added})
    snapshot = table.current_snapshot()
    ctx = RowLevelContext.of(table, write_mode(table.properties, OVERWRITE_DELETE_MODE_OPERATION))
    removed: list[DataFile] = []
    straddling: list[FileTask] = []
    if snapshot is not None and replaced.targets:
        specs = table.specs()
        for task in plan_files(table.io, table.metadata, snapshot, table.schema(), AlwaysTrue(), table.engine):
            status = replaced.status(specs, task.file)
            if status == _YES:
                removed.append(task.file)
            elif status != _NO:
                straddling.append(task)
    changes = run_changes(table, replace_job(ctx, replaced), straddling, ctx)
    return _producer(table, removed, added, changes, snapshot, [_conflict_check(replaced)],
                     {"replace-partitions": "true", **(snapshot_properties or {})})
