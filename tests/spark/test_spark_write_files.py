"""Spark tasks write a table's data files and describe them to the driver, which commits once
(tablestore.spark.tasks.write_files)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

from tablestore.errors import CommitConflictError
from tablestore.table import Table
from tests.spark.conftest import Lake

pytestmark = pytest.mark.spark

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from tablestore.spark.commit import OVERWRITE, WRITE_ID_PROPERTY, FilesCommit  # noqa: E402
from tablestore.spark.tasks.write_files import commit_written, table_target, write_files  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string()), ("x", pa.float64()), ("g", pa.int64())])


def rows(spark: SparkSession, n: int, parts: int) -> DataFrame:
    return spark.range(0, n, 1, parts).select(
        F.col("id"), F.concat(F.lit("row-"), F.col("id")).alias("s"), (F.col("id") * 1.5).alias("x"),
        (F.col("id") % 4).alias("g"),
    )


def source(lake: Lake, spark: SparkSession, name: str, n: int, parts: int) -> DataFrame:
    """``n`` rows read from a table of ``parts`` files: a DataFrame whose size Spark cannot
    estimate, so the write keeps its partitions (a small estimated write runs as one task)."""
    table = lake.create(name, SCHEMA)
    step = -(-n // parts)
    for start in range(0, n, step):
        ids = list(range(start, min(n, start + step)))
        table.append(pa.table({"id": ids, "s": [f"row-{i}" for i in ids], "x": [i * 1.5 for i in ids],
                               "g": [i % 4 for i in ids]}, SCHEMA))
    return spark.read.format("tablestore").load(f"db.{name}")


def data_files(table: Table) -> set[str]:
    return {p.name for p in Path(table.location.removeprefix("file://"), "data").glob("**/*.parquet")}


def test_tasks_write_files_and_one_append_commits_them(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("written", SCHEMA)
    target = table_target(table, lake.config.model_dump_json())
    written = write_files(source(lake, spark, "written_src", 1000, 3), target)

    assert written.rows == 1000 and len(written.tasks) == len(written.files) == 3
    # Written by Spark's Python workers, not by this process.
    assert all(t.pid != os.getpid() for t in written.tasks)
    assert {t.partition for t in written.tasks} == {0, 1, 2}
    assert all(target.write_id in f.file_path for f in written.files)

    snapshot = commit_written(table, written).snapshot
    assert snapshot.summary["operation"] == "append"
    assert snapshot.summary["added-records"] == "1000"
    assert snapshot.summary[WRITE_ID_PROPERTY] == target.write_id
    assert snapshot.summary["tablestore.write.tasks"] == "3"
    assert snapshot.summary["tablestore.write.executors"] == "driver"  # local mode's executor
    table.refresh()
    data = table.scan().to_arrow().sort_by("id")
    assert data.column("id").to_pylist() == list(range(1000))
    assert data.column("s").to_pylist()[:2] == ["row-0", "row-1"]
    assert sum(data.column("x").to_pylist()) == 1.5 * sum(range(1000))
    # The descriptions the tasks sent are what the manifests now hold, metrics included.
    planned = {t.file.file_path: t.file for t in table.scan().plan_files()}
    for f in written.files:
        held = planned[f.file_path]
        assert (held.record_count, held.file_size_in_bytes, held.partition) == (f.record_count, f.file_size_in_bytes,
                                                                               f.partition)
        assert (held.lower_bounds, held.upper_bounds, held.null_value_counts) == (f.lower_bounds, f.upper_bounds,
                                                                                  f.null_value_counts)


def test_rows_of_a_partition_are_brought_to_one_task(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("clustered", SCHEMA, partition_by=["g"])
    written = write_files(source(lake, spark, "clustered_src", 1000, 3), table_target(table, lake.config.model_dump_json()))
    # Three input partitions, each with rows of all four table partitions: one file per partition.
    assert sorted(f.partition for f in written.files) == [(0,), (1,), (2,), (3,)]
    assert sorted(f.record_count for f in written.files) == [250] * 4
    table.append_files(written.files)
    table.refresh()
    assert table.scan(filter="g = 2").to_arrow().num_rows == 250


def test_a_small_write_is_one_task_and_one_file(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("small", SCHEMA)
    written = write_files(rows(spark, 100, 4), table_target(table, lake.config.model_dump_json()))
    assert (len(written.tasks), len(written.files), written.rows) == (1, 1, 100)


def test_failed_job_leaves_no_file_of_the_write(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("failed_write", SCHEMA)
    table.append(pa.table({"id": [1], "s": ["a"], "x": [1.0], "g": [0]}, SCHEMA))
    before = data_files(table)

    @F.udf("string")
    def boom(row_id: int, s: str) -> str:
        if row_id == 1500:
            time.sleep(3)  # the other task has written and reported its files by then
            raise RuntimeError("boom")
        return s

    df = source(lake, spark, "failed_src", 2000, 2).withColumn("s", boom("id", "s"))
    with pytest.raises(Exception, match="boom"):
        write_files(df, table_target(table, lake.config.model_dump_json()))
    assert data_files(table) == before
    table.refresh()
    assert table.scan().to_arrow().num_rows == 1


def test_refused_commit_deletes_the_written_files(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("refused", SCHEMA)
    written = write_files(source(lake, spark, "refused_src", 100, 2), table_target(table, lake.config.model_dump_json()))
    assert len(data_files(table)) == 2

    # Another writer adds rows after the write loaded the table: an overwrite of every row would
    # lose them, so the commit is refused.
    lake.load("refused").append(pa.table({"id": [7], "s": ["other"], "x": [0.5], "g": [3]}, SCHEMA))
    other = data_files(table) - {p for p in data_files(table) if written.write_id in p}

    with pytest.raises(CommitConflictError):
        commit_written(table, written, FilesCommit(OVERWRITE))
    assert data_files(table) == other
    assert lake.load("refused").scan().to_arrow().column("id").to_pylist() == [7]


def test_columns_the_table_lacks_fail_before_any_task_runs(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("strict_write", SCHEMA)
    with pytest.raises(Exception, match="bogus"):
        write_files(rows(spark, 10, 1).withColumn("bogus", F.lit(1)), table_target(table, lake.config.model_dump_json()))
    assert data_files(table) == set()
