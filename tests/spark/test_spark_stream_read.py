"""Reading a table's changes from Spark: incremental append scans (``start-snapshot-id`` and
``end-snapshot-id``) and streaming reads (``spark.readStream.format("tablestore")``), including a
query killed between micro-batches and restarted from its checkpoint.

One local Spark session serves the module; the killed query runs in a process of its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from tablestore.table import Table
from tests.spark.conftest import Lake

pytestmark = pytest.mark.spark

from pyspark.errors import StreamingQueryException  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from tablestore.spark.datasource.stream import EPOCH_ID_PROPERTY, QUERY_ID_PROPERTY  # noqa: E402
from tablestore.spark.native.native_read import read_dataframe  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCHEMA = pa.schema([("id", pa.int64()), ("grp", pa.string())])


def rows(ids: range | list[int]) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "grp": [("a", "b", "c")[i % 3] for i in ids]})


def ids_of(df: object) -> list[int]:
    return sorted(r["id"] for r in df.collect())  # type: ignore[attr-defined]


def test_start_and_end_snapshot_options_read_the_rows_appended_in_between(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("incremental", SCHEMA, partition_by=["grp"])
    table.append(rows(range(0, 3)))
    table.append(rows(range(3, 6)))
    table.delete("id = 4")  # a delete adds no rows to an append scan, and removes none from it
    table.append(rows(range(6, 8)))
    first, second, _, third = (s.snapshot_id for s in table.snapshots())

    def read(**options: int) -> list[int]:
        reader = spark.read.format("tablestore")
        for key, value in options.items():
            reader = reader.option(key.replace("_", "-"), value)
        return ids_of(reader.load("db.incremental"))

    assert read(start_snapshot_id=first) == [3, 4, 5, 6, 7]
    assert read(start_snapshot_id=first, end_snapshot_id=second) == [3, 4, 5]
    assert read(start_snapshot_id=third) == []
    # read_dataframe plans the same range and reads it with Spark's Parquet reader.
    df = read_dataframe(spark, "db.incremental", config=lake.config, start_snapshot_id=second, filter="id > 6")
    assert ids_of(df) == [7]
    with pytest.raises(Exception, match="end-snapshot-id needs start-snapshot-id"):
        spark.read.format("tablestore").option("end-snapshot-id", second).load("db.incremental")
    with pytest.raises(Exception, match="not an ancestor"):
        read(start_snapshot_id=third, end_snapshot_id=first)


def _stream(spark: SparkSession, name: str, sink: str, **options: object) -> list[int]:
    """Runs a stream of the table to a memory sink until it has read what is there; its ids."""
    reader = spark.readStream.format("tablestore")
    for key, value in options.items():
        reader = reader.option(key.replace("_", "-"), str(value))
    query = reader.load(f"db.{name}").writeStream.format("memory").queryName(sink) \
        .trigger(availableNow=True).start()
    try:
        query.awaitTermination(300)
        if query.exception() is not None:
            raise query.exception()  # type: ignore[misc]
        return ids_of(spark.table(sink))
    finally:
        query.stop()


def test_a_stream_reads_appends_and_fails_on_a_delete_unless_told_to_pass_over_it(
    lake: Lake, spark: SparkSession,
) -> None:
    # Merge-on-read: the delete is a `delete` snapshot (copy-on-write would make it an overwrite).
    table = lake.catalog.create_table("db.streamed", SCHEMA, properties={"write.delete.mode": "merge-on-read"})
    table.append(rows(range(0, 3)))
    table.append(rows(range(3, 6)))
    table.delete("id = 1")
    table.append(rows(range(6, 9)))
    table.overwrite(rows([100]), "id = 8")
    table.append(rows(range(9, 10)))
    assert [s.operation for s in table.snapshots()] == ["append", "append", "delete", "append", "overwrite", "append"]

    with pytest.raises(StreamingQueryException, match="streaming-skip-delete-snapshots=true"):
        _stream(spark, "streamed", "fails_on_delete")
    with pytest.raises(StreamingQueryException, match="streaming-skip-overwrite-snapshots=true"):
        _stream(spark, "streamed", "fails_on_overwrite", streaming_skip_delete_snapshots=True)
    # Passed over, the delete and the overwrite add nothing: every appended row, once.
    assert _stream(spark, "streamed", "skips", streaming_skip_delete_snapshots=True,
                   streaming_skip_overwrite_snapshots=True) == list(range(10))
    # From a time on: the appends committed at or after the third append's time.
    third = table.snapshots()[3]
    assert _stream(spark, "streamed", "from_time", stream_from_timestamp=third.timestamp_ms,
                   streaming_skip_delete_snapshots=True, streaming_skip_overwrite_snapshots=True) == [6, 7, 8, 9]


def _target_batches(table: Table) -> list[int]:
    return [int(s.summary[EPOCH_ID_PROPERTY]) for s in table.refresh().snapshots()
            if QUERY_ID_PROPERTY in s.summary]


def test_a_stream_killed_between_micro_batches_resumes_from_its_checkpoint_with_every_row_once(
    lake: Lake, spark: SparkSession, tmp_path: Path,
) -> None:
    source = lake.create("stream_source", SCHEMA)
    target = lake.create("stream_target", SCHEMA)
    for n in range(8):  # one file per snapshot; the job reads one snapshot per micro-batch
        source.append(rows(range(n * 100, n * 100 + 50)))
    checkpoint = tmp_path / "checkpoint"
    log_path = tmp_path / "job.log"
    with log_path.open("w") as job_log:
        job = subprocess.Popen(
            [sys.executable, "-m", "tests.spark.stream_read_job", lake.config.model_dump_json(), "db.stream_source",
             "db.stream_target", str(checkpoint)],
            cwd=REPO, stdout=job_log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 300
            while len(_target_batches(target)) < 2:
                assert job.poll() is None, f"the streaming job ended early:\n{log_path.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"no 2 batches in 300 s:\n{log_path.read_text()[-3000:]}"
                time.sleep(0.2)
        finally:
            os.killpg(job.pid, signal.SIGKILL)  # the job's own process group: its driver and JVM
            job.wait()
    before = _target_batches(target)
    assert 2 <= len(before) < 8, "the job was killed mid-run"
    # Appends after the kill reach the restarted query too.
    for n in range(8, 10):
        source.append(rows(range(n * 100, n * 100 + 50)))

    query = (spark.readStream.format("tablestore").load("db.stream_source")
             .writeStream.format("tablestore").outputMode("append")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start("db.stream_target"))
    query.awaitTermination(600)
    assert query.exception() is None

    written = target.refresh().scan().to_arrow().column("id").to_pylist()
    expected = [i for n in range(10) for i in range(n * 100, n * 100 + 50)]
    assert sorted(written) == expected, "every source row once: none lost, none repeated"
    batches = _target_batches(target)
    assert len(batches) == len(set(batches)), "every batch committed once"
    assert max(batches) > max(before), "the restarted query went on after the batches it had committed"


def test_a_changelog_stream_carries_inserts_updates_and_deletes(lake: Lake, spark: SparkSession) -> None:
    keyed = pa.schema([pa.field("id", pa.int64(), nullable=False), ("grp", pa.string())])
    table = lake.catalog.create_table("db.changing", keyed, properties={"write.delete.mode": "merge-on-read",
                                                                         "write.update.mode": "merge-on-read"})
    with table.update_schema() as update:
        update.set_identifier_fields("id")
    table.append(rows(range(0, 3)).cast(keyed))
    table.update({"grp": "'z'"}, "id = 1")
    table.delete("id = 2")
    snapshots = [s.snapshot_id for s in table.snapshots()]
    query = (spark.readStream.format("tablestore").option("streaming-changelog", "true").load("db.changing")
             .writeStream.format("memory").queryName("changelog").trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    got = sorted((r["_commit_snapshot_id"], r["_change_type"], r["id"], r["grp"])
                 for r in spark.table("changelog").collect())
    inserted, updated, deleted = snapshots
    assert got == sorted([
        (inserted, "INSERT", 0, "a"), (inserted, "INSERT", 1, "b"), (inserted, "INSERT", 2, "c"),
        (updated, "UPDATE_BEFORE", 1, "b"), (updated, "UPDATE_AFTER", 1, "z"),
        (deleted, "DELETE", 2, "c"),
    ])
    # One micro-batch of three snapshots: their ordinals in it.
    ordinals = {r["_commit_snapshot_id"]: r["_change_ordinal"] for r in spark.table("changelog").collect()}
    assert ordinals == {inserted: 0, updated: 1, deleted: 2}
