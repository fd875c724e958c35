"""SQL writes and streamed queries through Spark Connect, as the stack's Dagster runs them.

The session is a Spark Connect client (gRPC) of a local Connect server that PySpark starts
(``SparkSession.builder.remote("local[2]")``): the statements' DataFrames are Connect plans, the
write tasks and the result stream run through the server.

Run by tests/sql/test_spark_connect_sql.py in a pytest process of its own: Spark refuses a
Connect session in a process that already holds a classic one, as earlier test modules leave.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tablestore.config import LakehouseConfig, SparkConfig, SqlCatalogConfig
from tablestore.sql.session import SqlSession

pytestmark = pytest.mark.spark

from pyspark.sql import SparkSession  # noqa: E402

from tablestore.spark import REQUIRED_CONF, register_data_source  # noqa: E402


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlSession]:
    root = tmp_path_factory.mktemp("connect")
    catalog = SqlCatalogConfig(name="lake", properties={"uri": f"sqlite:///{root}/catalog.db", "warehouse": str(root / "wh")}, default_database="db")
    config = LakehouseConfig(default_catalog="lake", catalogs={"lake": catalog}, spark=SparkConfig(master="local[2]", conf={}))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = SparkSession.builder.remote("local[2]").appName("tablestore-connect-sql").getOrCreate()
    assert type(spark).__module__.startswith("pyspark.sql.connect")
    for key, value in REQUIRED_CONF.items():
        if key.startswith("spark.sql."):
            spark.conf.set(key, value)
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    register_data_source(spark, config)
    sql = SqlSession(config, spark=spark)
    sql.execute("CREATE DATABASE db")
    try:
        yield sql
    finally:
        sql.manager.close()
        spark.stop()


def test_insert_and_dynamic_overwrite_write_in_tasks_through_connect(session: SqlSession) -> None:
    session.execute("CREATE TABLE t (id BIGINT, s STRING, g BIGINT) PARTITIONED BY (g)")
    result = session.execute_one("INSERT INTO t SELECT id, concat('row-', id), id % 3 FROM range(3000)")
    assert result.affected == 3000
    table = session.manager.catalog().load_table("db.t")
    snapshot = table.current_snapshot()
    assert snapshot is not None and int(snapshot.summary["tablestore.write.tasks"]) >= 1
    assert sorted(f.file.partition for f in table.scan().plan_files()) == [(0,), (1,), (2,)]

    session.execute_one("INSERT OVERWRITE t SELECT id, 'new', 1 FROM range(10)")
    rows = session.execute_one("SELECT g, count(*), min(s) FROM t GROUP BY g ORDER BY g").rows
    assert rows == [[0, 1000, "row-0"], [1, 10, "new"], [2, 1000, "row-1001"]]


def test_query_streams_batches_through_connect(session: SqlSession, tmp_path: Path) -> None:
    reader = session.query_arrow("SELECT id, id * 2 AS twice FROM range(250000) ORDER BY id DESC")
    assert isinstance(reader, pa.RecordBatchReader)
    seen, first, total = 0, None, 0
    for batch in reader:
        first = batch.column("id")[0].as_py() if first is None else first
        seen += batch.num_rows
        total += sum(batch.column("twice").to_pylist())
    assert (first, seen, total) == (249999, 250000, 2 * sum(range(250000)))


def test_static_partition_values_are_added_in_spark(session: SqlSession) -> None:
    import datetime

    session.execute("CREATE TABLE tp (id BIGINT, ts TIMESTAMP, ntz TIMESTAMP_NTZ, d DATE, tz TIMESTAMP_LTZ) "
                    "PARTITIONED BY (ts, ntz, d, tz)")
    session.execute_one("INSERT INTO tp PARTITION (ts='2024-03-01 10:00:00', ntz='2024-03-01 23:30:00', "
                        "d='2024-03-02', tz='2024-03-03 04:05:06') SELECT id FROM range(2)")
    rows = session.execute_one("SELECT id, ts, ntz, d, tz FROM tp ORDER BY id").rows
    # TIMESTAMP is Iceberg's timestamp without zone here (tablestore's DDL), as TIMESTAMP_NTZ.
    assert rows == [[i, datetime.datetime(2024, 3, 1, 10), datetime.datetime(2024, 3, 1, 23, 30),
                     datetime.date(2024, 3, 2), datetime.datetime(2024, 3, 3, 4, 5, 6, tzinfo=datetime.UTC)]
                    for i in (0, 1)]
    (task,) = session.manager.catalog().load_table("db.tp").scan().plan_files()
    assert task.file.record_count == 2


def written_in_tasks(session: SqlSession, name: str, mode: str) -> dict[str, str]:
    """The summary of the table's current snapshot, checked to record a column merge whose files
    the Connect server's tasks wrote (this client has no JVM and wrote none)."""
    import socket

    snapshot = session.manager.catalog().load_table(f"db.{name}").current_snapshot()
    assert snapshot is not None
    summary = snapshot.summary
    assert summary["column-merge"] == mode
    assert int(summary["tablestore.write.tasks"]) >= 1
    assert summary["tablestore.write.executors"] == "driver"  # the local server's one executor
    assert summary["tablestore.write.hosts"] == socket.gethostname()
    return dict(summary)


def test_column_merge_procedures_write_in_tasks_through_connect(session: SqlSession) -> None:
    assert getattr(session.spark, "_jvm", None) is None  # a Connect client: no SparkContext here
    session.execute("""
        CREATE TABLE cm (id BIGINT, name STRING);
        INSERT INTO cm SELECT id, concat('n', id) FROM range(0, 500);
        INSERT INTO cm SELECT id, concat('n', id) FROM range(500, 1000);
        CREATE TABLE cm_src (id BIGINT, segment STRING);
        INSERT INTO cm_src SELECT id, concat('s', id) FROM range(0, 1000, 3);
        CREATE TABLE cm_upd (id BIGINT, segment STRING);
        INSERT INTO cm_upd VALUES (0, NULL), (3, 'u3'), (601, 'new601'), (999, 'u999'), (5000, 'none')
    """)
    # Every file holds a key of the source (a multiple of 3 in every 500 ids): all are rewritten.
    files = len(session.manager.catalog().load_table("db.cm").scan().plan_files())
    result = session.execute_one("CALL system.merge_columns(table => 'db.cm', source => 'db.cm_src', on => 'id')")
    assert result.columns == ["rewritten_fragments", "snapshot_id"] and result.rows[0][0] == files
    summary = written_in_tasks(session, "cm", "merge")
    assert summary["deleted-data-files"] == summary["added-data-files"] == str(files)
    counts = session.execute_one("SELECT count(*), count_if(segment = concat('s', id)), count_if(segment IS NULL), "
                                 "count_if(name = concat('n', id)) FROM cm").rows
    assert counts == [[1000, 334, 666, 1000]]

    result = session.execute_one("CALL system.update_columns(table => 'db.cm', source => 'db.cm_upd', on => 'id', "
                                 "columns => 'segment')")
    assert 2 <= result.rows[0][0] <= files  # the files of ids 0-3 and 601-999 (two inserts)
    written_in_tasks(session, "cm", "update")
    rows = session.execute_one("SELECT id, segment FROM cm WHERE id IN (0, 3, 6, 601, 602, 999) ORDER BY id").rows
    # A NULL new value keeps the old one; an absent key keeps its value; 5000 matches no row.
    assert rows == [[0, "s0"], [3, "u3"], [6, "s6"], [601, "new601"], [602, None], [999, "u999"]]


def test_a_computed_feature_merges_in_tasks_through_connect(session: SqlSession) -> None:
    from tablestore.spark.tasks.column_merge_tasks import merge_in_tasks

    # A string key: the Connect server's JVM tags the rows with their fragments and shuffles them.
    session.execute("""
        CREATE TABLE cs (k STRING, v BIGINT);
        INSERT INTO cs SELECT concat('k', id), id FROM range(0, 300);
        INSERT INTO cs SELECT concat('k', id), id FROM range(300, 600)
    """)
    source = session.planner().dataframe("SELECT concat('k', id) AS k, id * 10 AS w FROM range(0, 600, 10)")
    table = session.manager.catalog().load_table("db.cs")
    files = len(table.scan().plan_files())
    merged = merge_in_tasks(table, source, "k", ["w"], "merge")
    assert merged.rewritten == files and merged.snapshot is not None
    written_in_tasks(session, "cs", "merge")
    counts = session.execute_one("SELECT count(*), count_if(w = v * 10), count_if(w IS NULL AND v % 10 <> 0) FROM cs").rows
    assert counts == [[600, 60, 540]]


def test_branch_ddl_writes_and_publish_run_in_tasks_through_connect(session: SqlSession) -> None:
    session.execute("CREATE TABLE r (id BIGINT, g BIGINT) PARTITIONED BY (g)")
    session.execute("INSERT INTO r SELECT id, id % 2 FROM range(10)")
    session.execute("ALTER TABLE r CREATE BRANCH audit")
    session.execute("ALTER TABLE r CREATE TAG v1")
    session.execute("INSERT INTO r.branch_audit SELECT id, id % 2 FROM range(10, 1010)")
    session.execute("DELETE FROM r.branch_audit WHERE id < 5")
    session.execute("UPDATE r.branch_audit SET g = 7 WHERE id = 5")
    table = session.manager.catalog().load_table("db.r")
    branch_head = table.snapshot_by_id(table.refs()["audit"].snapshot_id)
    appended = table.snapshot_by_id(branch_head.parent_snapshot_id)  # type: ignore[union-attr, arg-type]
    appended = table.snapshot_by_id(appended.parent_snapshot_id)  # type: ignore[union-attr, arg-type]
    # The branch's INSERT was written by Spark tasks, as a write to main is.
    assert appended is not None and int(appended.summary["tablestore.write.tasks"]) >= 1
    assert session.execute_one("SELECT count(*) FROM r").rows == [[10]]
    assert session.execute_one("SELECT count(*), sum(g) FROM r.branch_audit WHERE id < 10").rows[0][0] == 5
    assert session.execute_one("SELECT count(*) FROM r.tag_v1").rows == [[10]]
    session.execute("CALL lake.system.fast_forward('db.r', 'main', 'audit')")
    assert session.execute_one("SELECT count(*) FROM r").rows == [[1005]]
    assert session.execute_one("SELECT g FROM r WHERE id = 5").rows == [[7]]
