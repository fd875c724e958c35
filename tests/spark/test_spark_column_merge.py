"""Column merges in Spark tasks, committed once by the driver (tablestore.spark.tasks.column_merge_tasks):
merged values, row lineage, the summary of the tasks that wrote, and no file left by a failed job.
The same merges through Spark Connect: tests/sql/spark_connect_sql_cases.py."""

from __future__ import annotations

import socket
from pathlib import Path

import pyarrow as pa
import pytest

from tablestore.table import Table
from tests.spark.conftest import Lake

pytestmark = pytest.mark.spark

from pyspark.sql import SparkSession  # noqa: E402

from tablestore.spark.tasks import column_merge_tasks as spark_column_merge  # noqa: E402
from tablestore.spark.tasks.column_merge_tasks import merge_in_tasks  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
LINEAGE = ["_row_id", "_last_updated_sequence_number"]


def keyed_table(lake: Lake, name: str, files: int = 4, rows: int = 100, format_version: int = 2) -> Table:
    """``files`` fragments of ``rows`` ids each, in disjoint key ranges (0-99, 100-199, ...)."""
    table = lake.catalog.create_table(f"db.{name}", schema=SCHEMA, format_version=format_version)
    for f in range(files):
        ids = list(range(f * rows, (f + 1) * rows))
        table.append(pa.table({"id": ids, "name": [f"n{i}" for i in ids]}, SCHEMA))
    return table


def column(table: Table, name: str) -> dict[int, object]:
    data = table.refresh().scan(columns=["id", name]).to_arrow().to_pylist()
    return {r["id"]: r[name] for r in data}


def data_files(table: Table) -> set[str]:
    return {p.name for p in Path(table.location.removeprefix("file://"), "data").glob("**/*.parquet")}


def assert_written_in_tasks(table: Table, mode: str, rewritten: int) -> None:
    snapshot = table.refresh().current_snapshot()
    assert snapshot is not None
    summary = snapshot.summary
    assert summary["column-merge"] == mode
    assert 1 <= int(summary["tablestore.write.tasks"]) <= rewritten
    assert summary["tablestore.write.executors"] == "driver"  # local[2]: the driver's executor
    assert summary["tablestore.write.hosts"] == socket.gethostname()
    assert summary["tablestore.write.spark-stage"] != ""
    assert summary["deleted-data-files"] == summary["added-data-files"] == str(rewritten)


def test_merge_then_update_in_tasks_with_staged_rows(lake: Lake, spark: SparkSession) -> None:
    table = keyed_table(lake, "staged")
    # A computed source (Spark hands its rows to the staging tasks), keys in three of the four
    # fragments and one key (999) in none.
    source = spark.range(0, 400, 7).selectExpr("id", "concat('s', id) AS segment", "id * 0.5 AS ltv") \
        .union(spark.createDataFrame([(999, "none", 1.0)], "id bigint, segment string, ltv double")) \
        .where("id < 300 OR id = 999")
    outcome = merge_in_tasks(table, source, "id", ["segment", "ltv"], "merge")
    assert outcome.rewritten == 3 and outcome.snapshot is not None
    assert_written_in_tasks(table, "merge", 3)
    expected = {i: (f"s{i}" if i < 300 and i % 7 == 0 else None) for i in range(400)}
    assert column(table, "segment") == expected
    assert column(table, "ltv") == {i: (i * 0.5 if i < 300 and i % 7 == 0 else None) for i in range(400)}
    assert column(table, "name") == {i: f"n{i}" for i in range(400)}

    # update_columns: NULL keeps the old value ("keep"), absent keys keep theirs.
    update = spark.createDataFrame([(0, None), (7, "u7"), (350, "u350")], "id bigint, segment string")
    outcome = merge_in_tasks(table, update, "id", ["segment"], "update")
    assert outcome.rewritten == 2
    assert_written_in_tasks(table, "update", 2)
    expected.update({7: "u7", 350: "u350"})
    assert column(table, "segment") == expected
    # The rows the staging tasks exchanged are gone.
    assert not list(Path(table.location.removeprefix("file://"), "data").glob(".column-merge-*"))


def test_update_in_tasks_with_rows_shuffled_by_the_jvm_keeps_row_lineage(lake: Lake, spark: SparkSession) -> None:
    # Overlapping fragments (odd ids in one file, even in the other): the JVM tags each row with
    # the fragments whose range holds it and shuffles it to their tasks.
    table = lake.catalog.create_table("db.overlap", schema=SCHEMA, format_version=3)
    for parity in (1, 0):
        ids = [i for i in range(200) if i % 2 == parity]
        table.append(pa.table({"id": ids, "name": [f"n{i}" for i in ids]}, SCHEMA))
    before = {r["id"]: r["_row_id"] for r in table.scan(columns=["id", *LINEAGE]).to_arrow().to_pylist()}
    source = spark.createDataFrame([(i, f"u{i}") for i in (3, 4, 151, 500)], "id bigint, name string").repartition(3)
    outcome = merge_in_tasks(table, source, "id", ["name"], "update", null_policy="overwrite")
    assert outcome.rewritten == 2
    assert_written_in_tasks(table, "update", 2)
    names = column(table, "name")
    assert names == {i: (f"u{i}" if i in (3, 4, 151) else f"n{i}") for i in range(200)}
    after = table.scan(columns=["id", *LINEAGE]).to_arrow().to_pylist()
    snapshot = table.current_snapshot()
    assert snapshot is not None
    # Every row keeps its _row_id; the updated rows alone take the merge's sequence number.
    assert {r["id"]: r["_row_id"] for r in after} == before
    assert {r["id"] for r in after if r["_last_updated_sequence_number"] == snapshot.sequence_number} == {3, 4, 151}


def test_a_failed_merge_job_leaves_no_file_of_its_write(lake: Lake, spark: SparkSession,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Four fragments, four merge tasks on two cores: tasks 0 and 1 run (and write) first; the
    # last fragment's duplicate key fails task 3, which fails the job.
    table = keyed_table(lake, "failing")
    rows = [(i, f"s{i}") for i in (5, 105, 205, 305, 305)]
    source = spark.createDataFrame(rows, "id bigint, segment string")
    before = data_files(table)
    # Without the write-id cleanup the tasks that succeeded leave their files: the test can fail.
    removed: list[str] = []
    monkeypatch.setattr(spark_column_merge, "remove_write_files", lambda io, location, write_id: removed.append(write_id))
    with pytest.raises(Exception, match="2 rows with the key id=305"):
        merge_in_tasks(table, source, "id", ["segment"], "merge")
    left = data_files(table) - before
    assert left and len(removed) == 1 and all(removed[0] in name for name in left)
    for name in left:
        next(Path(table.location.removeprefix("file://"), "data").glob(f"**/{name}")).unlink()
    monkeypatch.undo()

    with pytest.raises(Exception, match="2 rows with the key id=305"):
        merge_in_tasks(table, source, "id", ["segment"], "merge")
    assert data_files(table) == before
    assert "segment" not in table.refresh().schema().column_names
    assert table.scan().to_arrow().num_rows == 400
