"""Column merges on Spark executors: fragments rewritten in Python tasks, committed once.

Disjoint integer key ranges (a table written in key order, the common case for keyed data):
:func:`staged_rewrite`, no JVM shuffle: the source goes to Python once, columnar to Arrow,
each row finds its fragment by a vectorised binary search, and the rows travel to the task
owning the fragment as Arrow IPC files under the table's location. Measured on Spark
local[2] at 1M rows, this took about half the wall time of the JVM shuffle below, whose
per-row cost (row format, shuffle write and read, row-to-Arrow) is what made Spark many
times slower than a pyarrow rewrite.

Otherwise: the driver plans the fragments; the JVM tags each source row with the fragment
whose key range holds it and shuffles the rows straight to the task that owns that fragment
(``repartitionById``); each Python task receives only its fragments' source rows as Arrow,
merges every fragment with the same vectorised code as the local engine
(:func:`tablestore.table.ops.column_merge.rewrite_fragment`: read the file with pyarrow, match,
write with field ids) and returns only the new fragments (a few hundred bytes each) for the
driver's single commit.

Tagging in the JVM: when the fragments' key ranges are known and disjoint the fragment is
found by a binary search compiled into one ``CASE WHEN`` tree, which Spark code-generates: no
join. When they overlap or are unknown the source is joined to a broadcast of one row per
fragment (a row may then go to several fragments).

Spark Connect. Both paths use DataFrame APIs only (``mapInArrow``, ``repartitionById``, a
``range`` with one partition per unit of work in place of ``parallelize``), so the same merge
runs through a Connect client, which has no SparkContext: the stack's Dagster runs merge their
features this way. Each task returns one row per fragment it rewrote (the pickled fragment,
a few hundred bytes) and where it ran; the driver commits once (:func:`merge_in_tasks`), with
the snapshot summary keys of every Spark write (``tablestore.write.tasks``, ``.executors``,
``.hosts``, ``.spark-stage``). Every file a task writes carries the job's write id in its name,
so a failed job's files are found and deleted, as for SQL writes (:mod:`tablestore.spark.tasks.write_files`).
"""

from __future__ import annotations

import contextlib
import pickle
import socket
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import pyarrow as pa

from tablestore.io.cleanup import deleted_unless_sent
from tablestore.names import to_location_uri
from tablestore.spark.native.parquet_files import SourceSlice, parquet_source_slices
from tablestore.spark.tasks.write_files import remove_write_files, writers_summary
from tablestore.spark.write_task import task_executor
from tablestore.table import CommitIdentity
from tablestore.table.ops.column_merge import (
    MergePlan,
    commit_fragments,
    commit_schema_only,
    context_of,
    disjoint_order,
    list_fragments,
    rewrite_fragment,
    rows_by_range,
    source_columns,
)
from tablestore.table.write.data_files import WriteContext

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from tablestore.spec.expressions.expression_tree import Expression
    from tablestore.spec.metadata.table_metadata import Snapshot
    from tablestore.table import Table
    from tablestore.table.ops.column_merge import Fragment

T = TypeVar("T")

# Python tasks per core: one task per core leaves a core idle while the last task of a stage
# finishes alone; many tasks cost a worker round trip each. Two keeps both small.
TASKS_PER_CORE = 2
# Above this many fragments the CASE WHEN tree would outgrow Spark's generated-code limits;
# the broadcast range join is used instead.
MAX_TREE_FRAGMENTS = 2048
FRAG, TASK, SEQ = "__frag", "__task", "__seq"
# One row per rewritten fragment: its pickled description and the task that wrote it.
RESULT_SCHEMA = "payload binary, task string, executor string, host string, stage long"


def parallelism(spark: SparkSession) -> int:
    """The cores Spark runs tasks on: the SparkContext's default parallelism, or through Spark
    Connect (no SparkContext in the client) the session's ``spark.default.parallelism``, else
    its shuffle partitions (what the stack's server sets to its cores)."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except (AttributeError, NotImplementedError):  # Connect: PySparkAttributeError
        pass
    for key in ("spark.default.parallelism", "spark.sql.shuffle.partitions"):
        value = spark.conf.get(key, None)
        if value and value.isdigit():
            return max(1, int(value))
    return 2


def assign_tasks(order: list[int], counts: list[int], tasks: int) -> list[int]:
    """The task of each fragment: ``order`` cut into ``tasks`` contiguous runs of about equal
    record counts (neighbouring fragments share a task, so its source rows form one range)."""
    weights = np.array([max(1, counts[i]) for i in order], dtype=np.float64)
    middles = np.cumsum(weights) - weights / 2
    runs = np.minimum((middles * tasks / weights.sum()).astype(np.int64), tasks - 1)
    task_of = [0] * len(order)
    for position, fragment in enumerate(order):
        task_of[fragment] = int(runs[position])
    return task_of


def _search_tree(key: Column, ranges: list[tuple[int, int, int]]) -> Column:
    """The fragment whose [lo, hi] holds ``key`` (NULL when none): a binary search over
    ``ranges`` (lo, hi, fragment), sorted and disjoint, as nested CASE WHENs."""
    from pyspark.sql import functions as F

    if len(ranges) == 1:
        lo, hi, fragment = ranges[0]
        return F.when((key >= F.lit(lo)) & (key <= F.lit(hi)), F.lit(fragment))
    mid = len(ranges) // 2
    return F.when(key < F.lit(ranges[mid][0]), _search_tree(key, ranges[:mid])).otherwise(
        _search_tree(key, ranges[mid:])
    )


def tag_fragments(source: DataFrame, fragments: list[Fragment], plan: MergePlan, tasks: int) -> DataFrame:
    """The source rows (keys, columns, arrival order when duplicates are resolved) with the
    fragment they can match and its task; rows that match no fragment are dropped."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    src = source.select(*plan.keys, *plan.columns)
    if plan.duplicates != "error":  # "first"/"last" need the source's order within a fragment
        src = src.withColumn(SEQ, F.monotonically_increasing_id())
    key = F.col(plan.keys[0])
    bounds = [plan.key_bounds(f) for f in fragments]
    order = disjoint_order(bounds) if len(fragments) <= MAX_TREE_FRAGMENTS else None
    if order is not None:
        ranges = [(int(bounds[i][0]), int(bounds[i][1]), i) for i in order]  # type: ignore[arg-type]
        tagged = src.withColumn(FRAG, _search_tree(key, ranges)).where(F.col(FRAG).isNotNull())
    else:
        order = list(range(len(fragments)))
        spans = source.sparkSession.createDataFrame(
            [(i, lo, hi) for i, (lo, hi) in enumerate(bounds)],
            StructType(
                [StructField(FRAG, IntegerType()), StructField("__lo", LongType()), StructField("__hi", LongType())]
            ),
        )
        condition = (F.col("__lo").isNull() | (key >= F.col("__lo"))) & (
            F.col("__hi").isNull() | (key <= F.col("__hi"))
        )
        tagged = src.join(F.broadcast(spans), condition).drop("__lo", "__hi")
    task_of = assign_tasks(order, [f.record_count for f in fragments], tasks)
    lookup = F.array(*[F.lit(t) for t in task_of])
    return tagged.withColumn(TASK, F.element_at(lookup, F.col(FRAG) + 1))


@dataclass(frozen=True)
class ExecutorRewrite:
    """The fragments one Spark job rewrote (not committed) and the tasks that wrote them."""

    write_id: str
    fragments: list[Fragment]
    #: (task, executor, host, stage) of each task that rewrote a fragment.
    writers: list[tuple[str, str, str, int]]

    def summary(self) -> dict[str, str]:
        """Snapshot summary properties recording where the files were written."""
        return writers_summary(self.writers) if self.writers else {}


def _rewritten(payloads: list[bytes]) -> pa.RecordBatch:
    """The task's result: one row per fragment it rewrote, with where it ran."""
    from pyspark import TaskContext

    context = TaskContext.get()
    n = len(payloads)
    return pa.RecordBatch.from_pydict(
        {
            "payload": pa.array(payloads, pa.binary()),
            "task": pa.array(
                [f"{context.stageId()}.{context.partitionId()}" if context else "unknown"] * n, pa.string()
            ),
            "executor": pa.array([task_executor(context)] * n, pa.string()),
            "host": pa.array([socket.gethostname()] * n, pa.string()),
            "stage": pa.array([context.stageId() if context else -1] * n, pa.int64()),
        }
    )


def _collect_rewrite(df: DataFrame, write_id: str) -> ExecutorRewrite:
    # One row per rewritten fragment (its pickled description): capped by the plan, never rows.
    rows = df.collect()
    return ExecutorRewrite(
        write_id,
        [pickle.loads(r["payload"]) for r in rows],
        [(r["task"], r["executor"], r["host"], int(r["stage"])) for r in rows],
    )


def _file_uuid(write_id: str) -> str:
    # Unique per file (fragments of one partition share a directory), found by the write id.
    return f"{write_id}-{uuid.uuid4().hex[:12]}"


def per_item(spark: SparkSession, items: Sequence[T], fn: Callable[[T], Iterable[bytes]]) -> DataFrame:
    """A DataFrame of the rows ``fn`` makes of each item, one Spark task per item: the
    DataFrame-only (Spark Connect) form of ``sc.parallelize(items, len(items)).flatMap(fn)``.
    ``range`` with as many slices as ids puts id i alone in partition i; the items travel in
    the task function (file names and plans, never rows)."""

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in batch.column(0).to_pylist():
                yield _rewritten(list(fn(items[i])))

    return spark.range(0, len(items), 1, len(items)).mapInArrow(task, RESULT_SCHEMA)


def executor_rewrite(source: DataFrame, fragments: list[Fragment], plan: MergePlan) -> ExecutorRewrite:
    """Rewrite the fragments that have source rows in Spark tasks (staged, else shuffled in the
    JVM: see the module docstring); nothing is committed. A failed job leaves no file."""
    write_id = uuid.uuid4().hex
    if not fragments:
        return ExecutorRewrite(write_id, [], [])
    context = fragments[0].context
    location = WriteContext(context.io, context.location, plan.schema, fragments[0].spec, context.properties)

    with deleted_unless_sent(lambda: remove_write_files(context.io, location.data_location, write_id)):
        staged = _staged_rewrite(source, fragments, plan, write_id)
        return staged if staged is not None else _shuffled_rewrite(source, fragments, plan, write_id)


def spark_rewrite(source: DataFrame, fragments: list[Fragment], plan: MergePlan) -> list[Fragment]:
    """Rewrite the fragments that have source rows on Spark executors; the new fragments."""
    return executor_rewrite(source, fragments, plan).fragments


def _shuffled_rewrite(source: DataFrame, fragments: list[Fragment], plan: MergePlan, write_id: str) -> ExecutorRewrite:
    """The JVM tags each source row with its fragment and shuffles it to the fragment's task."""
    tasks = max(1, min(len(fragments), parallelism(source.sparkSession) * TASKS_PER_CORE))
    tagged = tag_fragments(source, fragments, plan, tasks)
    columns = [*plan.keys, *plan.columns]
    ordered = plan.duplicates != "error"

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        collected = [b for b in batches if b.num_rows]
        if not collected:
            return
        data = pa.Table.from_batches(collected)
        frag = data.column(FRAG).to_numpy()
        # By fragment; within one, in the source's order (its row ids) when duplicates resolve.
        order = np.lexsort((data.column(SEQ).to_numpy(), frag)) if ordered else np.argsort(frag, kind="stable")
        data, frag = data.select(columns).take(order), frag[order]
        starts = np.flatnonzero(np.r_[True, frag[1:] != frag[:-1]])
        ends = np.r_[starts[1:], len(frag)]
        payloads = []
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            part = plan.prepare_arrow(data.slice(start, end - start))
            out = rewrite_fragment(fragments[int(frag[start])], plan, part, write_uuid=_file_uuid(write_id))
            if out is not None:
                payloads.append(pickle.dumps(out))
        if payloads:
            yield _rewritten(payloads)

    shuffled = tagged.repartitionById(tasks, TASK).drop(TASK)
    return _collect_rewrite(shuffled.mapInArrow(task, RESULT_SCHEMA), write_id)


def _staged_rewrite(
    source: DataFrame, fragments: list[Fragment], plan: MergePlan, write_id: str
) -> ExecutorRewrite | None:
    """The same rewrite without a JVM shuffle, for disjoint integer key ranges (else None).

    Stage 1 (``mapInArrow`` over the source's own partitions: the cheapest way from the JVM to
    Python, columnar to Arrow; or, for a source that is a plain scan of local Parquet files,
    Python tasks reading those files themselves, see :mod:`tablestore.spark.native.parquet_files`)
    finds each row's fragment with a vectorised binary search and writes one Arrow IPC file per
    (source slice, task) under the table's location. Stage 2
    (one Python task per group of neighbouring fragments) reads its files, merges and writes
    the fragments. Only file names and new fragments travel through the driver; the staged
    files are deleted afterwards.
    """
    if not pa.types.is_integer(dict(source_columns(source))[plan.keys[0]]):
        return None  # the JVM path casts it, with the merge's own error for a bad value
    bounds = [plan.key_bounds(f) for f in fragments]
    order = disjoint_order(bounds)
    if order is None:
        return None
    spark = source.sparkSession
    cores = parallelism(spark)
    tasks = max(1, min(len(fragments), cores * TASKS_PER_CORE))
    task_of = np.array(assign_tasks(order, [f.record_count for f in fragments], tasks), dtype=np.int32)
    lows = np.array([bounds[i][0] for i in order], dtype=np.int64)
    highs = np.array([bounds[i][1] for i in order], dtype=np.int64)
    sorted_frags = np.array(order, dtype=np.int32)
    task_at = task_of[sorted_frags]  # the task of each position in key order: non-decreasing
    context = fragments[0].context
    io = context.io
    staging = f"{to_location_uri(context.location)}/data/.column-merge-{uuid.uuid4().hex}"
    columns = [*plan.keys, *plan.columns]
    key = plan.keys[0]

    def stage_table(data: pa.Table) -> Iterator[tuple[int, str]]:
        # By key-order position: rows of one task are contiguous (its positions are a run),
        # each fragment's rows too, in the source's order. The merge task then slices each
        # fragment out of every staged piece without sorting again.
        rows, pos = rows_by_range(data.column(key), lows, highs)
        if not len(rows):
            return  # no row of this slice falls in a fragment's range: nothing to stage
        task = task_at[pos]
        starts = np.flatnonzero(np.r_[True, task[1:] != task[:-1]])
        ends = np.r_[starts[1:], len(task)]
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            piece = data.take(rows[start:end]).append_column(FRAG, pa.array(pos[start:end]))
            path = f"{staging}/task-{int(task[start])}/{uuid.uuid4().hex}.arrow"
            with io.new_output(path).create() as stream, pa.ipc.new_file(stream, piece.schema) as writer:
                writer.write_table(piece)
            yield int(task[start]), path

    def staged_batch(pairs: list[tuple[int, str]]) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays(
            [pa.array([t for t, _ in pairs], pa.int32()), pa.array([p for _, p in pairs], pa.string())],
            ["task", "path"],
        )

    def stage(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        collected = [b for b in batches if b.num_rows]
        if collected:
            yield staged_batch(list(stage_table(pa.Table.from_batches(collected))))

    source_types = dict(source_columns(source))
    staged_types = [(name, source_types[name]) for name in columns]
    staging_schema = pa.schema(staged_types)

    def stage_files(runs: list[list[SourceSlice]]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
        def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            # The same rows Spark would hand to ``stage``, read from the source's own files:
            # each id is one run of file slices.
            for batch in batches:
                for i in batch.column(0).to_pylist():
                    out: list[tuple[int, str]] = []
                    for piece in runs[i]:
                        data = piece.read(columns).select(columns).cast(staging_schema)
                        if data.num_rows:
                            out.extend(stage_table(data))
                    yield staged_batch(out)

        return task

    def merge(paths: list[str]) -> list[bytes]:
        # ``paths`` are in the source's partition order and each piece is sorted by position,
        # in the source's order within one: a fragment's rows, concatenated piece by piece, are
        # in the source's order, which duplicates="first"/"last" resolve by.
        pieces = []
        for path in paths:
            with io.new_input(path).open() as stream:
                pieces.append(pa.ipc.open_file(stream).read_all())
        positions = [p.column(FRAG).to_numpy() for p in pieces]
        first = min(int(p[0]) for p in positions)
        last = max(int(p[-1]) for p in positions)
        wanted = np.arange(first, last + 2)
        cuts = [np.searchsorted(p, wanted, "left") for p in positions]
        out = []
        for i in range(last - first + 1):
            parts = [
                piece.slice(c[i], c[i + 1] - c[i]) for piece, c in zip(pieces, cuts, strict=True) if c[i + 1] > c[i]
            ]
            if not parts:
                continue
            part = plan.prepare_arrow(pa.concat_tables(parts).select(columns))
            new = rewrite_fragment(fragments[int(sorted_frags[first + i])], plan, part, write_uuid=_file_uuid(write_id))
            if new is not None:
                out.append(pickle.dumps(new))
        return out

    try:
        runs = parquet_source_slices(source, staged_types, cores * TASKS_PER_CORE)
        # Staging returns (task, path) pairs of the staged files only: the rows stay in the files.
        if runs is not None:
            staging_df = spark.range(0, len(runs), 1, max(1, len(runs))).mapInArrow(
                stage_files(runs), "task int, path string"
            )
        else:
            staging_df = source.select(*columns).mapInArrow(stage, "task int, path string")
        staged = [(r["task"], r["path"]) for r in staging_df.collect()]
        groups: dict[int, list[str]] = {}
        for task_id, path in staged:
            groups.setdefault(task_id, []).append(path)
        work = list(groups.values())
        if not work:
            return ExecutorRewrite(write_id, [], [])
        return _collect_rewrite(per_item(spark, work, merge), write_id)
    finally:
        # The whole staging directory: also what failed or retried task attempts wrote.
        fs, local = io.filesystem_for(staging)
        with contextlib.suppress(FileNotFoundError, OSError):
            fs.delete_dir(local)


# -- a whole table -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnMergeOutcome:
    """A committed column merge: its snapshot (None when no fragment changed) and how many
    fragments Spark tasks rewrote."""

    snapshot: Snapshot | None
    rewritten: int


def merge_in_tasks(
    table: Table,
    source: DataFrame,
    on: str | list[str],
    columns: str | list[str] | None,
    mode: str,
    null_policy: str = "keep",
    duplicates: str = "error",
    filter: str | Expression | None = None,
    snapshot_properties: dict[str, str] | None = None,
    commit_id: str | CommitIdentity | None = None,
) -> ColumnMergeOutcome:
    """``Table.merge_columns`` (``mode="merge"``) or ``update_columns`` (``"update"``) from a
    Spark DataFrame (classic or Connect), whatever the table's engine: the driver plans the
    fragments, Spark tasks rewrite them, and one commit (validated against the planned
    snapshot and schema) records them with the tasks that wrote them. The same semantics as the
    table core's :func:`~tablestore.table.ops.column_merge.merge_table`, which runs them."""
    identity = CommitIdentity.of(commit_id)
    earlier = identity.applied(table.metadata, table.branch) if identity is not None else None
    if earlier is not None:  # a retry of a merge that landed: nothing is merged again
        return ColumnMergeOutcome(earlier, 0)
    fragments = list_fragments(table, filter)
    context = fragments[0].context if fragments else context_of(table)
    plan = MergePlan.build(context, source_columns(source), on, columns, mode, null_policy, duplicates)
    rewrite = executor_rewrite(source, fragments, plan)
    if not rewrite.fragments:
        if plan.new_columns:
            commit_schema_only(table, context, plan.schema)
        return ColumnMergeOutcome(None, 0)
    props = {"column-merge": plan.mode, **rewrite.summary(), **(snapshot_properties or {})}
    # The table core's one commit owns the tasks' files: deleted only when it surely did not land.
    snapshot = commit_fragments(table, rewrite.fragments, props, commit_id)
    return ColumnMergeOutcome(snapshot, len(rewrite.fragments))


def table_source(spark: SparkSession, table: Table, columns: list[str], config_json: str) -> DataFrame:
    """``columns`` of a tablestore table's current snapshot as a Spark DataFrame, to merge from:
    read by Spark's own Parquet reader where the files allow (else the ``tablestore`` source),
    so its rows go from the files to the tasks, never through this process."""
    from tablestore.spark.native.native_read import read_with_options

    name = ".".join((table.catalog.name, *table.identifier))
    return read_with_options(spark, name, {"config": config_json}).df.select(*columns)


__all__ = [
    "ColumnMergeOutcome",
    "ExecutorRewrite",
    "assign_tasks",
    "executor_rewrite",
    "merge_in_tasks",
    "parallelism",
    "per_item",
    "spark_rewrite",
    "table_source",
    "tag_fragments",
]
