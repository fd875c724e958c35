"""The exactly-once Structured Streaming sink: one commit per micro-batch carrying the query id
and batch id, replays skipped, a killed query restarted from its checkpoint, complete mode.

One local Spark session serves the module; the killed query runs in a process of its own.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tablestore.table import Table
from tests.spark.conftest import Lake
from tests.spark.stream_schema import INPUT_SCHEMA

pytestmark = pytest.mark.spark

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from tablestore.spark.convert import spark_schema  # noqa: E402
from tablestore.spark.datasource.source import TablestoreDataSource  # noqa: E402
from tablestore.spark.datasource.stream import (  # noqa: E402
    EPOCH_ID_PROPERTY,
    QUERY_ID_PROPERTY,
    StreamCommitMessage,
    TablestoreStreamWriter,
)

REPO = Path(__file__).resolve().parents[2]
ARROW_SCHEMA = pa.schema([("id", pa.int64()), ("grp", pa.string()), ("payload", pa.string())])


def input_files(directory: Path, files: int, rows_per_file: int) -> set[int]:
    """Parquet files of distinct ids (grp a/b/c), one micro-batch each; returns every id."""
    directory.mkdir(parents=True)
    ids: set[int] = set()
    for n in range(files):
        batch = [n * 100_000 + i for i in range(rows_per_file)]
        ids.update(batch)
        pq.write_table(pa.table({
            "id": pa.array(batch, pa.int64()),
            "grp": [("a", "b", "c")[i % 3] for i in batch],
            "payload": [f"row-{i}" for i in batch],
        }, schema=ARROW_SCHEMA), directory / f"part-{n:03d}.parquet")
    return ids


def streaming_snapshots(table: Table, query_id: str | None = None) -> list[dict[str, str]]:
    return [s.summary for s in table.refresh().snapshots()
            if QUERY_ID_PROPERTY in s.summary and (query_id is None or s.summary[QUERY_ID_PROPERTY] == query_id)]


def checkpoint_query_id(checkpoint: Path) -> str:
    return str(json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"])


def test_a_killed_query_restarted_from_its_checkpoint_writes_every_row_exactly_once(
    lake: Lake, spark: SparkSession, tmp_path: Path,
) -> None:
    table = lake.create("killed", ARROW_SCHEMA, partition_by=["grp"])
    expected = input_files(tmp_path / "in", files=10, rows_per_file=400)
    checkpoint = tmp_path / "checkpoint"
    log_path = tmp_path / "job.log"
    with log_path.open("w") as job_log:
        job = subprocess.Popen(
            [sys.executable, "-m", "tests.spark.stream_job", lake.config.model_dump_json(), "db.killed",
             str(tmp_path / "in"), str(checkpoint)],
            cwd=REPO, stdout=job_log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 300
            while len(streaming_snapshots(table)) < 2:
                assert job.poll() is None, f"the streaming job ended early:\n{log_path.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"no 2 batches in 300 s:\n{log_path.read_text()[-3000:]}"
                time.sleep(0.5)
        finally:
            os.killpg(job.pid, signal.SIGKILL)  # the job's own process group: its driver and JVM
            job.wait()
    before = streaming_snapshots(table)
    query_id = checkpoint_query_id(checkpoint)
    assert {s[QUERY_ID_PROPERTY] for s in before} == {query_id}
    assert 2 <= len(before) < 10, "the job was killed mid-run"
    committed = max(int(s[EPOCH_ID_PROPERTY]) for s in before)

    # The window the sink guards: Spark commits the table, then notes the batch in its commit
    # log. Take the newest committed batch out of that log, as if the driver had died between
    # the two; the restarted query must run it again and the sink must skip it. The kill may
    # land after Spark planned a later batch (its offsets written): drop those plans too, or
    # Spark resumes at the newest plan and never replays the committed batch.
    commit_log, offset_log = checkpoint / "commits", checkpoint / "offsets"
    logged = max(int(p.name) for p in commit_log.iterdir() if p.name.isdigit())
    assert logged <= committed
    for log in (commit_log, offset_log):
        for entry in list(log.iterdir()):
            batch = entry.name.lstrip(".").split(".")[0]
            if batch.isdigit() and int(batch) >= committed + (log is offset_log):
                entry.unlink()
    assert (offset_log / str(committed)).exists(), "the committed batch's plan stays for the replay"

    # The restart replays the logged batch as it was, then takes the rest of the input at once.
    query = (spark.readStream.schema(INPUT_SCHEMA).parquet(str(tmp_path / "in"))
             .writeStream.format("tablestore").outputMode("append")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start("db.killed"))
    query.awaitTermination(600)
    assert str(query.id) == query_id, "the query id is the checkpoint's"
    assert query.exception() is None
    replayed = [p["batchId"] for p in query.recentProgress]
    assert committed in replayed, "the restarted query ran the committed batch again"

    rows = lake.load("killed").scan().to_arrow()
    ids = rows.column("id").to_pylist()
    assert len(ids) == len(expected) == 4_000
    assert set(ids) == expected
    after = streaming_snapshots(table, query_id)
    epochs = [int(s[EPOCH_ID_PROPERTY]) for s in after]
    assert len(epochs) == len(set(epochs)), "every batch is committed once"
    assert sorted(epochs) == list(range(min(epochs), max(epochs) + 1))
    assert all(s["operation"] == "append" for s in after)


def local_path(location: str) -> Path:
    """A data file's local path: table locations are file:// URIs, which Path would take as a
    relative name that never exists (and every 'file is gone' assertion would pass vacuously)."""
    return Path(urllib.parse.urlparse(location).path) if location.startswith("file:") else Path(location)


def _writer(lake: Lake, name: str, complete: bool = False) -> TablestoreStreamWriter:
    source = TablestoreDataSource({"path": f"db.{name}", "config": lake.config.model_dump_json()})
    writer = source.streamWriter(spark_schema(lake.load(name).schema()), complete)
    assert isinstance(writer, TablestoreStreamWriter)
    return writer


def _task(writer: TablestoreStreamWriter, ids: range, query_id: str) -> StreamCommitMessage:
    batch = pa.record_batch({
        "id": pa.array(list(ids), pa.int64()), "grp": ["a"] * len(ids), "payload": [f"p{i}" for i in ids],
    }, schema=ARROW_SCHEMA)
    message = writer.write(iter([batch]))
    return dataclasses.replace(message, query_id=query_id)


def test_a_replayed_batch_id_is_skipped_and_its_files_deleted(lake: Lake) -> None:
    table = lake.create("replay", ARROW_SCHEMA)
    writer = _writer(lake, "replay")
    writer.commit([_task(writer, range(0, 10), "q-1")], 0)
    writer.commit([_task(writer, range(10, 20), "q-1")], 1)
    assert [(s[QUERY_ID_PROPERTY], s[EPOCH_ID_PROPERTY]) for s in streaming_snapshots(table)] == [
        ("q-1", "0"), ("q-1", "1"),
    ]

    for batch_id in (1, 0):  # the newest batch again, then an older one
        replay = _task(writer, range(100, 110), "q-1")
        writer.commit([replay], batch_id)
        assert not any(local_path(f.file_path).exists() for f in replay.files), "the replay's files are deleted"
    assert len(streaming_snapshots(table)) == 2
    assert sorted(table.refresh().scan().to_arrow().column("id").to_pylist()) == list(range(20))

    # Another query (another checkpoint) has its own batch ids.
    writer.commit([_task(writer, range(20, 25), "q-2")], 0)
    writer.commit([_task(writer, range(25, 30), "q-1")], 2)
    assert [(s[QUERY_ID_PROPERTY], s[EPOCH_ID_PROPERTY]) for s in streaming_snapshots(table)][2:] == [
        ("q-2", "0"), ("q-1", "2"),
    ]
    assert sorted(table.refresh().scan().to_arrow().column("id").to_pylist()) == list(range(30))


def test_an_aborted_batch_deletes_its_files_unless_it_was_committed(lake: Lake) -> None:
    table = lake.create("aborted", ARROW_SCHEMA)
    writer = _writer(lake, "aborted")
    failed = _task(writer, range(0, 5), "q-3")
    writer.abort([failed, None], 0)
    assert not any(local_path(f.file_path).exists() for f in failed.files)
    landed = _task(writer, range(5, 10), "q-3")
    writer.commit([landed], 1)
    writer.abort([landed], 1)  # Spark may abort after a commit that failed late
    assert all(local_path(f.file_path).exists() for f in landed.files)
    assert table.refresh().scan().to_arrow().num_rows == 5


def test_complete_mode_replaces_the_table_every_batch(lake: Lake, spark: SparkSession, tmp_path: Path) -> None:
    table = lake.create("counts", pa.schema([("grp", pa.string()), ("n", pa.int64())]))
    input_files(tmp_path / "in", files=3, rows_per_file=30)
    checkpoint = tmp_path / "checkpoint"
    counts = (spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))
              .groupBy("grp").agg(F.count("*").alias("n")))
    query = (counts.writeStream.format("tablestore").outputMode("complete")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start("db.counts"))
    query.awaitTermination(600)
    assert query.exception() is None
    result = {r["grp"]: r["n"] for r in lake.load("counts").scan().to_arrow().to_pylist()}
    assert result == {"a": 30, "b": 30, "c": 30}
    snapshots = streaming_snapshots(table)
    assert [s[EPOCH_ID_PROPERTY] for s in snapshots] == ["0", "1", "2"]
    assert all(s["operation"] == "overwrite" for s in snapshots)
    assert [s["total-records"] for s in snapshots] == ["3", "3", "3"]
