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
(:func:`tablestore.table.column_merge.rewrite_fragment`: read the file with pyarrow, match,
write with field ids) and returns only the new fragments (a few hundred bytes each) for the
driver's single commit.

Tagging in the JVM: when the fragments' key ranges are known and disjoint the fragment is
found by a binary search compiled into one ``CASE WHEN`` tree, which Spark code-generates: no
join. When they overlap or are unknown the source is joined to a broadcast of one row per
fragment (a row may then go to several fragments).
"""

from __future__ import annotations

import contextlib
import pickle
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from tablestore.engine.spark.source_files import SourceSlice, parquet_source_slices
from tablestore.io import to_location_uri
from tablestore.table.column_merge import disjoint_order, rewrite_fragment, rows_by_range
from tablestore.table.fragments import source_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from tablestore.table.column_merge import MergePlan
    from tablestore.table.fragments import Fragment

# Python tasks per core: one task per core leaves a core idle while the last task of a stage
# finishes alone; many tasks cost a worker round trip each. Two keeps both small.
TASKS_PER_CORE = 2
# Above this many fragments the CASE WHEN tree would outgrow Spark's generated-code limits;
# the broadcast range join is used instead.
MAX_TREE_FRAGMENTS = 2048
FRAG, TASK, SEQ = "__frag", "__task", "__seq"


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
    return F.when(key < F.lit(ranges[mid][0]), _search_tree(key, ranges[:mid])) \
        .otherwise(_search_tree(key, ranges[mid:]))


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
            StructType([StructField(FRAG, IntegerType()), StructField("__lo", LongType()),
                        StructField("__hi", LongType())]),
        )
        condition = (F.col("__lo").isNull() | (key >= F.col("__lo"))) & \
            (F.col("__hi").isNull() | (key <= F.col("__hi")))
        tagged = src.join(F.broadcast(spans), condition).drop("__lo", "__hi")
    task_of = assign_tasks(order, [f.record_count for f in fragments], tasks)
    lookup = F.array(*[F.lit(t) for t in task_of])
    return tagged.withColumn(TASK, F.element_at(lookup, F.col(FRAG) + 1))


def spark_rewrite(source: DataFrame, fragments: list[Fragment], plan: MergePlan) -> list[Fragment]:
    """Rewrite the fragments that have source rows on Spark executors; the new fragments."""
    staged = staged_rewrite(source, fragments, plan)
    if staged is not None:
        return staged
    spark = source.sparkSession
    tasks = max(1, min(len(fragments), spark.sparkContext.defaultParallelism * TASKS_PER_CORE))
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
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            part = plan.prepare_arrow(data.slice(start, end - start))
            out = rewrite_fragment(fragments[int(frag[start])], plan, part)
            if out is not None:
                yield pa.RecordBatch.from_arrays([pa.array([pickle.dumps(out)], pa.binary())], ["payload"])

    shuffled = tagged.repartitionById(tasks, TASK).drop(TASK)
    # One row per rewritten fragment (its pickled description): capped by the plan, never rows.
    rows = shuffled.mapInArrow(task, "payload binary").collect()
    return [pickle.loads(r["payload"]) for r in rows]


def staged_rewrite(source: DataFrame, fragments: list[Fragment], plan: MergePlan) -> list[Fragment] | None:
    """The same rewrite without a JVM shuffle, for disjoint integer key ranges (else None).

    Stage 1 (``mapInArrow`` over the source's own partitions: the cheapest way from the JVM to
    Python, columnar to Arrow; or, for a source that is a plain scan of local Parquet files,
    Python tasks reading those files themselves, see :mod:`tablestore.engine.spark.source_files`)
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
    sc = spark.sparkContext
    tasks = max(1, min(len(fragments), sc.defaultParallelism * TASKS_PER_CORE))
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
        task = task_at[pos]
        starts = np.flatnonzero(np.r_[True, task[1:] != task[:-1]]) if len(task) else np.array([], np.int64)
        ends = np.r_[starts[1:], len(task)]
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            piece = data.take(rows[start:end]).append_column(FRAG, pa.array(pos[start:end]))
            path = f"{staging}/task-{int(task[start])}/{uuid.uuid4().hex}.arrow"
            with io.new_output(path).create() as stream, pa.ipc.new_file(stream, piece.schema) as writer:
                writer.write_table(piece)
            yield int(task[start]), path

    def stage(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        collected = [b for b in batches if b.num_rows]
        if not collected:
            return
        for task_id, path in stage_table(pa.Table.from_batches(collected)):
            yield pa.RecordBatch.from_arrays([pa.array([task_id], pa.int32()), pa.array([path])], ["task", "path"])

    source_types = dict(source_columns(source))
    staged_types = [(name, source_types[name]) for name in columns]
    staging_schema = pa.schema(staged_types)

    def stage_files(run: list[SourceSlice]) -> list[tuple[int, str]]:
        # The same rows Spark would hand to ``stage``, read from the source's own files.
        out: list[tuple[int, str]] = []
        for piece in run:
            data = piece.read(columns).select(columns).cast(staging_schema)
            if data.num_rows:
                out.extend(stage_table(data))
        return out

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
            parts = [piece.slice(c[i], c[i + 1] - c[i]) for piece, c in zip(pieces, cuts, strict=True)
                     if c[i + 1] > c[i]]
            if not parts:
                continue
            part = plan.prepare_arrow(pa.concat_tables(parts).select(columns))
            new = rewrite_fragment(fragments[int(sorted_frags[first + i])], plan, part)
            if new is not None:
                out.append(pickle.dumps(new))
        return out

    try:
        runs = parquet_source_slices(source, staged_types, sc.defaultParallelism * TASKS_PER_CORE)
        # Staging returns (task, path) pairs of the staged files only: the rows stay in the files.
        if runs is not None:
            staged = [pair for pairs in sc.parallelize(runs, max(1, len(runs))).map(stage_files).collect()
                      for pair in pairs]
        else:
            staged_rows = source.select(*columns).mapInArrow(stage, "task int, path string").collect()
            staged = [(r["task"], r["path"]) for r in staged_rows]
        groups: dict[int, list[str]] = {}
        for task_id, path in staged:
            groups.setdefault(task_id, []).append(path)
        work = list(groups.values())
        if not work:
            return []
        # The new fragments' descriptions, a few hundred bytes each: capped by the plan.
        results = sc.parallelize(work, len(work)).map(merge).collect()
        return [pickle.loads(p) for batch in results for p in batch]
    finally:
        # The whole staging directory: also what failed or retried task attempts wrote.
        fs, local = io.filesystem_for(staging)
        with contextlib.suppress(FileNotFoundError, OSError):
            fs.delete_dir(local)
