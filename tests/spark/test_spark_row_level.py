"""``apply_changes``: a statement's effect written by Spark tasks, committed once against the
snapshot its query read (what SQL DELETE, UPDATE and MERGE run on)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tablestore.errors import CommitConflictError, ValidationError
from tablestore.table import Table
from tablestore.table.ops.row_level import RowLevelOperation
from tests.spark.conftest import Lake

pytestmark = pytest.mark.spark

from pyspark.sql import SparkSession  # noqa: E402

from tablestore.spark.tasks.row_level_tasks import DELETE, INSERT, UPDATE, apply_changes  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string())])
CHANGES = "_file string, _pos bigint, __kind int, id bigint, s string"


def _table(lake: Lake, name: str, mode: str) -> Table:
    table = lake.create(name, SCHEMA)
    table.update_properties({f"write.{op}.mode": mode for op in ("delete", "update", "merge")})
    for start in (0, 10):
        table.append(pa.table({"id": list(range(start, start + 10)), "s": [f"r{i}" for i in range(start, start + 10)]},
                              schema=SCHEMA))
    return lake.load(name)


def _files_on_disk(table: Table) -> set[Path]:
    return {p for p in Path(table.location.removeprefix("file://"), "data").rglob("*") if p.is_file()}


def _paths(table: Table) -> list[str]:
    """The data files, the one holding ids 0-9 first."""
    return sorted((t.file.file_path for t in table.scan().plan_files()),
                  key=lambda path: pq.read_table(path.removeprefix("file://"), columns=["id"]).column("id")[0].as_py())


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_tasks_delete_update_and_insert_then_the_driver_commits_once(lake: Lake, spark: SparkSession, mode: str) -> None:
    table = _table(lake, f"applied_{mode.replace('-', '_')}", mode)
    first, second = _paths(table)
    snapshots = len(table.snapshots())
    changes = spark.createDataFrame([
        (first, 0, DELETE, None, None), (first, 3, UPDATE, 3, "u3"), (second, 9, UPDATE, 19, "u19"),
        (None, None, INSERT, 100, "new"), (None, None, INSERT, 101, "new"),
    ], CHANGES).repartition(3)
    outcome = apply_changes(table, table.current_snapshot(), RowLevelOperation.MERGE, changes)
    assert (outcome.deleted, outcome.updated, outcome.inserted) == (1, 2, 2)
    table = lake.load(table.identifier[-1])
    assert len(table.snapshots()) == snapshots + 1 and outcome.snapshot == table.current_snapshot()
    # Which Spark tasks wrote the files: both changed files and the inserted rows, on local[2]'s
    # one executor ("driver"), in one stage.
    assert outcome.snapshot is not None
    summary = outcome.snapshot.summary
    assert 1 <= int(summary["tablestore.write.tasks"]) <= 3
    assert summary["tablestore.write.executors"] == "driver" and summary["tablestore.write.hosts"]
    assert summary["tablestore.write.spark-stage"].isdigit()
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    expected = [{"id": i, "s": "u3" if i == 3 else "u19" if i == 19 else f"r{i}"} for i in range(1, 20)]
    assert rows == [*expected, {"id": 100, "s": "new"}, {"id": 101, "s": "new"}]


def test_a_commit_that_lost_its_files_to_a_concurrent_delete_fails_and_leaves_no_files(
    lake: Lake, spark: SparkSession
) -> None:
    table = _table(lake, "conflicting", "copy-on-write")
    scanned = table.current_snapshot()
    first, _ = _paths(table)
    # Another writer rewrites the file the statement read, after the statement's query ran.
    lake.load("conflicting").delete("id = 5")
    before = _files_on_disk(table)
    changes = spark.createDataFrame([(first, 1, UPDATE, 1, "late")], CHANGES)
    with pytest.raises(CommitConflictError):
        apply_changes(table, scanned, RowLevelOperation.UPDATE, changes)
    table = lake.load("conflicting")
    assert _files_on_disk(table) == before  # the task's rewrite was deleted
    assert sorted(r["id"] for r in table.scan().to_arrow().to_pylist()) == [i for i in range(20) if i != 5]
    assert "late" not in table.scan().to_arrow().column("s").to_pylist()


def test_a_row_selected_twice_or_a_file_outside_the_snapshot_is_refused_before_any_commit(
    lake: Lake, spark: SparkSession
) -> None:
    table = _table(lake, "refused", "merge-on-read")
    first, _ = _paths(table)
    location, before = table.metadata_location, _files_on_disk(table)
    twice = spark.createDataFrame([(first, 2, UPDATE, 2, "a"), (first, 2, UPDATE, 2, "b"),
                                   (None, None, INSERT, 50, "x")], CHANGES)
    with pytest.raises(ValidationError, match="selected twice"):
        apply_changes(table, table.current_snapshot(), RowLevelOperation.MERGE, twice)
    elsewhere = spark.createDataFrame([(first + ".other", 0, DELETE, None, None)], CHANGES)
    with pytest.raises(ValidationError, match="not in the snapshot"):
        apply_changes(table, table.current_snapshot(), RowLevelOperation.DELETE, elsewhere)
    table = lake.load("refused")
    assert table.metadata_location == location and _files_on_disk(table) == before


def test_row_level_sql_sees_the_rows_of_a_data_file_without_field_ids(lake: Lake, spark: SparkSession) -> None:
    """A file without Parquet field ids (as write_dataframe once wrote them, or an imported
    file) is read by tablestore's reader, not by Spark's id-matching one: every row is seen."""
    from tablestore.spark.native.native_read import read_table
    from tablestore.sql.session import SqlSession

    table = _table(lake, "without_ids", "copy-on-write")
    first, _ = _paths(table)
    local = first.removeprefix("file://")
    pq.write_table(pq.read_table(local).replace_schema_metadata(None).cast(SCHEMA), local)
    assert all(not f.metadata for f in pq.read_schema(local))
    outcome = read_table(spark, "db.without_ids", config=lake.config)
    assert (outcome.path, outcome.reason) == ("data-source", f"data file {first} has no Parquet field ids")
    session = SqlSession(lake.config, spark=spark)
    assert session.execute_one("UPDATE db.without_ids SET s = 'u' WHERE id IN (SELECT id FROM range(0, 20, 2))"
                               ).affected == 10
    assert session.execute_one("SELECT count(*), count_if(s = 'u') FROM db.without_ids").rows == [[20, 10]]


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_a_job_whose_task_fails_leaves_no_file_of_its_write(lake: Lake, spark: SparkSession, mode: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from tablestore.spark.tasks import row_level_tasks as spark_row_level

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.string())])
    table = lake.create(f"failing_{mode.replace('-', '_')}", schema)
    table.update_properties({f"write.{op}.mode": mode for op in ("delete", "update", "merge")})
    for start in (0, 10):
        table.append(pa.table({"id": list(range(start, start + 10)), "s": [f"r{i}" for i in range(start, start + 10)]},
                              schema=schema))
    table = lake.load(table.identifier[-1])
    a, b = sorted(t.file.file_path for t in table.scan().plan_files())
    before = _files_on_disk(table)
    # One task takes every group in order: the inserted rows, then file a (a delete: a rewrite
    # or a delete file), written and not reported, then file b, whose updated row has no id
    # (a required column) and fails the task, and the job.
    changes = spark.createDataFrame([(None, None, INSERT, 100, "new"), (a, 0, DELETE, None, None),
                                     (b, 1, UPDATE, None, "x")], CHANGES)
    previous = str(spark.conf.get("spark.sql.shuffle.partitions"))
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        # Without the write-id cleanup the files written before the failure stay: the test can fail.
        removed: list[str] = []
        with monkeypatch.context() as patched:
            patched.setattr(spark_row_level, "remove_write_files", lambda io, location, write_id: removed.append(write_id))
            with pytest.raises(Exception, match="required"):
                apply_changes(table, table.current_snapshot(), RowLevelOperation.MERGE, changes)
        left = _files_on_disk(table) - before
        assert len(left) >= 2 and len(removed) == 1 and all(removed[0] in p.name for p in left), left
        for path in left:
            path.unlink()

        with pytest.raises(Exception, match="required"):
            apply_changes(table, table.current_snapshot(), RowLevelOperation.MERGE, changes)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
    assert _files_on_disk(table) == before
    assert len(lake.load(table.identifier[-1]).scan().to_arrow()) == 20
