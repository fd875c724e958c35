"""A changelog as a Spark DataFrame: the change tasks read on the executors, the rows cleaned there.

The driver plans the changelog from the manifests of its range (``ChangelogScan.plan_tasks``:
a few hundred bytes per changed data file) and ships the tasks, pickled, as the rows of a small
DataFrame. Then, all in Spark tasks:

1. ``mapInArrow`` reads each task's data file with the delete files that applied before and
   after (:class:`~tablestore.table.read.changelog.ChangeReader`): the raw DELETE and INSERT rows;
2. the raw rows are hashed across partitions by what decides on them (every column and the
   ordinal for carry-overs; the key and the ordinal for updates; every column for net changes,
   then the key for their updates), and each partition is cleaned by the same Arrow functions
   as the Python API (:mod:`tablestore.table.read.changelog_rows`).

No row reaches the driver: the result is a DataFrame (the procedure makes it a temporary view).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from tablestore.spark.convert import spark_arrow_schema, spark_schema, to_spark_table
from tablestore.table.read.changelog_rows import (
    CHANGE_ORDINAL,
    CHANGE_TYPE,
    COMMIT_SNAPSHOT_ID,
    compute_updates,
    net_changes,
    pair_updates,
    remove_carryovers,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tablestore.table.read.changelog import ChangelogScan

# Spark tasks per job at most: a changelog's tasks are files, and each Python task has a cost.
MAX_PARTITIONS = 64

Batches = Iterator[pa.RecordBatch]


def _parallelism(spark: SparkSession) -> int:
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect has no SparkContext
        return 4


def _cleaned(clean: Callable[[pa.Table], pa.Table], target: pa.Schema) -> Callable[[Batches], Batches]:
    def run(batches: Batches) -> Batches:
        rows = pa.Table.from_batches(list(batches), schema=target)
        if rows.num_rows:
            yield from to_spark_table(clean(rows), target).to_batches()

    return run


def changelog_dataframe(spark: SparkSession, scan: ChangelogScan) -> DataFrame:
    """The changelog ``scan`` as a DataFrame computed by Spark tasks: the table's columns (in the
    ``to`` snapshot's schema) and ``_change_type``, ``_change_ordinal``, ``_commit_snapshot_id``."""
    from pyspark.sql import types as st

    tasks = scan.plan_tasks()
    reader = scan.reader()
    raw_type = st.StructType([*spark_schema(reader.read_schema).fields,
                              st.StructField(CHANGE_TYPE, st.StringType(), False),
                              st.StructField(CHANGE_ORDINAL, st.IntegerType(), False),
                              st.StructField(COMMIT_SNAPSHOT_ID, st.LongType(), False)])
    target = spark_arrow_schema(raw_type)

    def read(batches: Batches) -> Batches:
        for batch in batches:
            for payload in batch.column(1).to_pylist():
                rows = reader.read(pickle.loads(payload))
                if rows.num_rows:
                    yield from to_spark_table(rows, target).to_batches()

    width = max(1, min(len(tasks), _parallelism(spark), MAX_PARTITIONS))
    payloads = spark.createDataFrame([(i, pickle.dumps(t)) for i, t in enumerate(tasks)],
                                     "task_index long, task binary")
    raw = payloads.repartition(width, "task_index").mapInArrow(read, raw_type)
    values, keys = scan.value_columns, scan.key_columns

    def step(df: DataFrame, by: list[str], clean: Callable[[pa.Table], pa.Table]) -> DataFrame:
        return df.repartition(width, *by).mapInArrow(_cleaned(clean, target), raw_type)

    if scan.net:
        out = step(raw, values, lambda t: net_changes(remove_carryovers(t, values), values))
        if keys:
            out = step(out, list(keys), lambda t: pair_updates(t, keys))
    elif keys:
        out = step(raw, [*keys, CHANGE_ORDINAL], lambda t: compute_updates(t, keys, values))
    else:
        out = step(raw, [*values, CHANGE_ORDINAL], lambda t: remove_carryovers(t, values))
    return out.select(*values, CHANGE_TYPE, CHANGE_ORDINAL, COMMIT_SNAPSHOT_ID)
