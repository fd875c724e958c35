"""Row-level changes written by Spark tasks: the executor half of SQL DELETE, UPDATE and MERGE.

The SQL layer turns a statement into one Spark query whose rows are its effect (see
``tablestore.sql.run.row_level``): each row names a target row by ``_file`` and
``_pos`` and says what happens to it (``__kind``: delete, or update with the row's new values),
or, with ``_file`` NULL, is a row to insert. :func:`apply_changes` then

1. repartitions those rows by data file (inserted rows stay in the partitions they came from)
   and sorts each partition by file and position, so one task sees all of a file's changes
   together, one file after another;
2. runs the per-file work of the table core in the tasks (``mapInArrow``):
   :func:`tablestore.table.ops.row_level.position_change` rewrites the file (copy-on-write) or
   writes its position delete file or v3 deletion vector (merge-on-read), and writes the
   updated rows (keeping their ``_row_id`` on v3); inserted rows are written in groups of at
   most ``INSERT_GROUP_BYTES`` of Arrow. A task returns one small row per changed file or
   written group: the pickled change (``DataFile`` descriptions), counts, and where it ran
   (recorded in the snapshot summary as ``tablestore.write.tasks``, ``.executors``, ``.hosts``
   and ``.spark-stage``);
3. commits once on the driver, as the table core does (``commit_changes``: one RowDelta,
   validated against the snapshot the query read, under the table's isolation level). A
   failed commit deletes the files the tasks wrote. A failed job deletes them too: every file
   the job writes (data, position deletes, deletion vectors) carries its write id in its name,
   and the driver lists the table's data location for them, as ``write_files`` does (a
   killed driver leaves orphans, which ``remove_orphan_files`` removes).

The driver holds the plan (the snapshot's file tasks) and one row per changed file; no row
of the table or of the statement's result reaches it, which is what lets a MERGE of millions
of keys run under a small ``spark.driver.maxResultSize``.
"""

from __future__ import annotations

import itertools
import pickle
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablestore.errors import ValidationError
from tablestore.io.cleanup import deleted_unless_sent
from tablestore.spark.convert import from_spark_table
from tablestore.spark.tasks.write_files import remove_write_files, writers_summary
from tablestore.spark.write_task import task_executor
from tablestore.spec.expressions.expression_tree import AlwaysTrue, BooleanExpression
from tablestore.spec.schemas.schema import Schema
from tablestore.table import CommitIdentity
from tablestore.table.ops.row_level import (
    FileChange,
    RowLevelContext,
    RowLevelOperation,
    commit_changes,
    discard,
    position_change,
    write_mode,
)
from tablestore.table.read.scan import FileTask, plan_files
from tablestore.table.write.conform import conform_to_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from tablestore.spec.manifests.manifest import DataFile
    from tablestore.spec.metadata.table_metadata import Snapshot
    from tablestore.table import Table

FILE, POS, KIND = "_file", "_pos", "__kind"
DELETE, UPDATE, INSERT = 0, 1, 2
# The key rows are partitioned and sorted by: the data file, or for an inserted row a marker
# and the partition it came from (NUL cannot start a path).
_GROUP = "__group"
_INSERT_PREFIX = "\x00insert-"
# Arrow bytes of inserted rows a task holds before it writes them as a file group: bounds a
# task's memory whatever the statement inserts.
INSERT_GROUP_BYTES = 128 * 1024 * 1024
RESULT_SCHEMA = ("payload binary, deleted long, updated long, inserted long, error string, "
                 "task string, executor string, host string, stage long")


@dataclass(frozen=True)
class RowLevelOutcome:
    """The rows a statement deleted, updated and inserted, and the snapshot it committed (None
    when it changed nothing)."""

    deleted: int
    updated: int
    inserted: int
    snapshot: Snapshot | None


def _new_rows(data: pa.Table, schema: Schema) -> pa.Table:
    """Spark's Arrow rows of the table's columns as the table stores them."""
    return conform_to_schema(from_spark_table(data.select(schema.column_names), schema), schema)


def _result(payload: object, deleted: int = 0, updated: int = 0, inserted: int = 0,
            error: str | None = None) -> pa.RecordBatch:
    from pyspark import TaskContext

    context = TaskContext.get()
    task = f"{context.stageId()}.{context.partitionId()}" if context else "unknown"
    executor = task_executor(context)
    return pa.RecordBatch.from_pydict({
        "payload": pa.array([pickle.dumps(payload) if payload is not None else None], pa.binary()),
        "deleted": pa.array([deleted], pa.int64()), "updated": pa.array([updated], pa.int64()),
        "inserted": pa.array([inserted], pa.int64()), "error": pa.array([error], pa.string()),
        "task": pa.array([task], pa.string()), "executor": pa.array([executor], pa.string()),
        "host": pa.array([socket.gethostname()], pa.string()),
        "stage": pa.array([context.stageId() if context else -1], pa.int64()),
    })


def _summary(rows: list[Any]) -> dict[str, str]:
    """Snapshot summary properties saying which Spark tasks wrote the statement's files (the
    keys of every Spark write: write_files.writers_summary)."""
    return writers_summary((r["task"], r["executor"], r["host"], r["stage"]) for r in rows if r["payload"] is not None)


def _runs(keys: pa.Array) -> list[tuple[int, int]]:
    """The [start, end) runs of equal keys in a sorted column."""
    n = len(keys)
    if n == 0:
        return []
    changes = pc.not_equal(keys.slice(1), keys.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    bounds = [0, *(np.flatnonzero(changes) + 1).tolist(), n]
    return list(itertools.pairwise(bounds))


def change_task(ctx: RowLevelContext, tasks: dict[str, FileTask], has_values: bool, duplicate_error: str,
                ) -> object:
    """The function each Spark task runs over its sorted rows (see the module docstring)."""
    schema = ctx.schema

    def flush(key: str, chunks: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = pa.Table.from_batches(chunks)
        if key.startswith(_INSERT_PREFIX):
            files = ctx.write_rows(_new_rows(rows, schema))
            yield _result(("insert", files), inserted=rows.num_rows)
            return
        task = tasks.get(key)
        if task is None:
            yield _result(None, error=f"data file {key} selected for the change is not in the snapshot the "
                                      "statement read")
            return
        positions = rows.column(POS).to_numpy()
        if len(positions) > 1 and bool(np.any(positions[1:] == positions[:-1])):  # sorted by position
            yield _result(None, error=duplicate_error)
            return
        kinds = rows.column(KIND).to_numpy()
        updated = kinds == UPDATE
        replacement = None
        if has_values and updated.any():
            replacement = _new_rows(rows.filter(pa.array(updated)), schema)
        change = position_change(ctx, task, positions, replacement, positions[updated], write_replacement=True)
        yield _result(("change", change), deleted=int((kinds == DELETE).sum()), updated=int(updated.sum()))

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        current: str | None = None
        chunks: list[pa.RecordBatch] = []
        held = 0
        for batch in batches:
            keys = batch.column(batch.schema.get_field_index(_GROUP))
            for start, end in _runs(keys):
                key = keys[start].as_py()
                piece = batch.slice(start, end - start)
                if key != current:
                    if current is not None:
                        yield from flush(current, chunks)
                    current, chunks, held = key, [], 0
                chunks.append(piece)
                held += piece.nbytes
                if key.startswith(_INSERT_PREFIX) and held >= INSERT_GROUP_BYTES:
                    yield from flush(key, chunks)
                    chunks, held = [], 0
        if current is not None and chunks:
            yield from flush(current, chunks)

    return run


def apply_changes(
    table: Table,
    snapshot: Snapshot | None,
    operation: RowLevelOperation,
    changes: DataFrame,
    *,
    conflict_filter: BooleanExpression | None = None,
    duplicate_error: str = "a row of the target table was selected twice",
    commit_id: str | CommitIdentity | None = None,
) -> RowLevelOutcome:
    """Apply the statement's effect ``changes`` (``_file``, ``_pos``, ``__kind`` and, for updates
    and inserts, the table's columns) in Spark tasks, then commit once; see the module docstring.

    ``snapshot`` is the one the query read (None for an empty table: only inserts, appended);
    ``operation`` picks the write mode (``write.<operation>.mode``) and isolation level."""
    from pyspark.sql import functions as F

    # Every file the tasks write carries the job's write id: a failed job's files are found by it.
    write_id = uuid.uuid4().hex
    ctx = replace(RowLevelContext.of(table, write_mode(table.properties, operation)), write_id=write_id)
    # The plan of the snapshot the query read: the file tasks (with their delete files) each
    # changed file needs. Metadata only, a few hundred bytes a file.
    tasks = {t.file.file_path: t for t in plan_files(table.io, table.metadata, snapshot, ctx.schema, AlwaysTrue(),
                                                     table.engine)} if snapshot is not None else {}
    has_values = all(name in changes.columns for name in ctx.schema.column_names)
    group = F.coalesce(F.col(FILE), F.concat(F.lit(_INSERT_PREFIX), F.spark_partition_id().cast("string")))
    sorted_rows = changes.withColumn(_GROUP, group).repartition(_GROUP).sortWithinPartitions(_GROUP, POS)
    task = change_task(ctx, tasks, has_values, duplicate_error)
    # One row per changed file or written group of inserted rows, each a few hundred bytes of
    # file descriptions: the only result the driver receives (capped by the plan, not the data).
    # The tasks that had finished when the job failed wrote files no message reached the driver with.
    with deleted_unless_sent(lambda: remove_write_files(table.io, ctx.write_context().data_location, write_id)):
        results = sorted_rows.mapInArrow(task, RESULT_SCHEMA).collect()  # type: ignore[arg-type]
    file_changes: list[FileChange] = []
    inserted_files: list[DataFile] = []
    errors = []
    for row in results:
        if row["error"] is not None:
            errors.append(row["error"])
            continue
        what, value = pickle.loads(row["payload"])
        if what == "insert":
            inserted_files.extend(value)
        else:
            file_changes.append(value)
    counts = [sum(int(row[k]) for row in results) for k in ("deleted", "updated", "inserted")]
    if errors:
        discard(table, file_changes, inserted_files)
        raise ValidationError(errors[0])
    committed = None
    summary = _summary(results)
    # The tasks' files go to the table core's one commit, which alone deletes them, and only
    # when the commit is known not to have landed.
    if snapshot is None:
        committed = table.append_files(inserted_files, summary, commit_id=commit_id) if inserted_files else None
    else:
        committed = commit_changes(table, file_changes, snapshot, operation, conflict_filter,
                                   extra_data=inserted_files, snapshot_properties=summary, commit_id=commit_id)
    return RowLevelOutcome(counts[0], counts[1], counts[2], committed)
