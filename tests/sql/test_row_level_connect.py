"""Row-level SQL through Spark Connect, as the stack's Dagster runs use it.

The server is the stack's (``infra.spark_connect``: tablestore's daemon and settings), started
here on ``local[2]``; the client has no JVM, so the statements' files can only be written by the
server's tasks, and their descriptions are all that comes back.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.local.processes import die_with_parent, free_port
from infra.spark_connect import command
from tablestore.config import CatalogConfig, LakehouseConfig, SparkConfig
from tablestore.sql.session import SqlSession

pytestmark = pytest.mark.spark

MODES = ["copy-on-write", "merge-on-read"]


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("connect") / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(command("local[2]", port), stdout=out, stderr=subprocess.STDOUT,
                                  env={**os.environ, "PYSPARK_PYTHON": sys.executable}, preexec_fn=die_with_parent)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the Spark Connect server did not start:\n{log.read_text()[-3000:]}") from None
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(60)


@pytest.fixture(scope="module")
def session(connect_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlSession]:
    from tablestore.engine.spark import spark_session

    root = tmp_path_factory.mktemp("connect-lake")
    catalog = CatalogConfig("lake", "sql", {"uri": f"sqlite:///{root}/catalog.db", "warehouse": str(root / "wh")}, "db")
    config = LakehouseConfig("lake", {"lake": catalog}, SparkConfig(connect_url, {}))
    spark = spark_session(config, app_name="tablestore-row-level-connect")
    assert getattr(spark, "_jvm", None) is None  # a Connect client: no JVM in this process
    s = SqlSession(config, spark=spark)
    s.execute("CREATE DATABASE db")
    try:
        yield s
    finally:
        spark.stop()


@pytest.mark.parametrize("mode", MODES)
def test_update_delete_and_merge_run_through_spark_connect(session: SqlSession, mode: str, tmp_path: Path) -> None:
    table = f"db.t_{mode.replace('-', '_')}"
    props = ", ".join(f"'write.{op}.mode'='{mode}'" for op in ("delete", "update", "merge"))
    session.execute(f"CREATE TABLE {table} (id BIGINT, s STRING) TBLPROPERTIES ({props})")
    session.execute(f"INSERT INTO {table} SELECT id, concat('r', id) FROM range(0, 1000)")
    assert session.execute_one(f"UPDATE {table} SET s = 'u' WHERE id < 100").affected == 100
    assert session.execute_one(f"DELETE FROM {table} WHERE id IN (SELECT id FROM range(100, 200))").affected == 100
    merged = session.execute_one(
        f"MERGE INTO {table} t USING (SELECT id * 2 AS id, 'm' AS s FROM range(400, 600)) k ON t.id = k.id "
        "WHEN MATCHED THEN UPDATE SET s = k.s WHEN NOT MATCHED THEN INSERT *")
    assert merged.rows == [[200, 100, 0, 100]]
    counts = session.execute_one(f"SELECT count(*), count(DISTINCT id), count_if(s = 'u'), count_if(s = 'm'), "
                                 f"count_if(id BETWEEN 100 AND 199) FROM {table}")
    assert counts.rows == [[1000, 1000, 100, 200, 0]]
