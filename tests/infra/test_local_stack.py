"""The stack's topology without Docker (infra/local): a Spark job on the standalone master writes a
table through the REST catalog service (on PostgreSQL) into s3:// on the loopback server; pyiceberg's
RestCatalog reads it identically; restarting the catalog service and PostgreSQL loses nothing."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from minio import Minio

from infra.local import LocalStack
from infra.local.topology import ACCESS_KEY, BUCKET
from tablestore.config import LakehouseConfig, load_config

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.s3, pytest.mark.postgres]


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    # Dagster is left out here: this module proves the storage, catalog and Spark path.
    with LocalStack.running(dagster=False) as running:
        yield running


@pytest.fixture(scope="module")
def config(stack: LocalStack) -> LakehouseConfig:
    return load_config(stack.config_path)


@pytest.fixture(scope="module")
def spark(config: LakehouseConfig) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from tablestore.engine.spark import spark_session

    # An earlier module's local session would be returned unchanged by getOrCreate; this module
    # needs a session on the standalone master.
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    session = spark_session(config, app_name="lakehouse-local-stack")
    try:
        yield session
    finally:
        session.stop()


def _sorted(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def _spark_append(spark: Any, start: int, end: int) -> None:
    df = spark.range(start, end).selectExpr(
        "id", "element_at(array('DE', 'FR', 'US'), cast(id % 3 as int) + 1) AS country",
        "CAST(id * 0.5 AS DOUBLE) AS amount")
    df.repartition(4).write.format("tablestore").mode("append").save("lakehouse.shop.events")


def _pyiceberg_rows(stack: LocalStack) -> list[dict[str, Any]]:
    from pyiceberg.catalog.rest import RestCatalog

    catalog = RestCatalog("lakehouse", uri=stack.catalog_uri, token=stack.token)
    return _sorted(catalog.load_table("shop.events").scan().to_arrow())


def test_spark_job_on_the_standalone_master_survives_catalog_and_postgres_restarts(
    stack: LocalStack, config: LakehouseConfig, spark: Any
) -> None:
    from tablestore.sql.session import SqlSession

    assert spark.sparkContext.master == stack.spark_master
    session = SqlSession(config, spark=spark)
    session.execute("CREATE DATABASE IF NOT EXISTS shop; "
                    "CREATE TABLE shop.events (id BIGINT, country STRING, amount DOUBLE) PARTITIONED BY (country)")

    _spark_append(spark, 0, 2000)
    # The job ran on the standalone master, on the worker's executor.
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.ports['spark-ui']}/json/", timeout=5) as r:
        state = json.load(r)
    assert [a["name"] for a in state["activeapps"]] == ["lakehouse-local-stack"]
    assert state["aliveworkers"] == 1

    catalog = config.catalog("lakehouse").load()
    table = catalog.load_table(("shop", "events"))
    assert table.location.startswith(f"s3://{BUCKET}/warehouse/")
    first = table.current_snapshot()
    assert first is not None
    ours = _sorted(table.scan().to_arrow())
    assert len(ours) == 2000 and ours[7] == {"id": 7, "country": "FR", "amount": 3.5}
    assert _pyiceberg_rows(stack) == ours

    # The data files sit in the bucket storage-init made (read with the minio SDK, as MinIO would be).
    s3 = Minio(stack.s3_endpoint.removeprefix("http://"), access_key=ACCESS_KEY, secret_key=stack.secret_key,
               secure=False)
    keys = [o.object_name for o in s3.list_objects(BUCKET, prefix="warehouse/", recursive=True)]
    assert sum(k.endswith(".parquet") for k in keys) >= 3  # one per country partition at least
    assert any(k.endswith(".metadata.json") for k in keys)

    # Restart the metastore and the catalog service in the middle of the run.
    stack.service("postgres").restart()
    stack.service("catalog").restart()
    after_restart = config.catalog("lakehouse").load().load_table(("shop", "events"))
    current = after_restart.current_snapshot()
    assert current is not None and current.snapshot_id == first.snapshot_id
    assert _sorted(after_restart.scan().to_arrow()) == ours

    # The run goes on: a second Spark job commits on top of the first.
    _spark_append(spark, 2000, 3000)
    final = config.catalog("lakehouse").load().load_table(("shop", "events"))
    last = final.current_snapshot()
    assert last is not None and last.parent_snapshot_id == first.snapshot_id
    assert len(final.snapshots()) == 2
    rows = _sorted(final.scan().to_arrow())
    assert [r["id"] for r in rows] == list(range(3000))
    assert rows[2999] == {"id": 2999, "country": "US", "amount": 1499.5}
    assert _pyiceberg_rows(stack) == rows
    counts = session.execute_one("SELECT country, count(*) AS n FROM shop.events GROUP BY country ORDER BY country")
    assert counts.rows == [["DE", 1000], ["FR", 1000], ["US", 1000]]
