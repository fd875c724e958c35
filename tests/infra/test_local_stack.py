"""The stack's topology without Docker (infra/local), one stack for the module:

- a Spark job on the standalone master writes a table through the REST catalog service (on
  PostgreSQL) into s3:// on the loopback server; pyiceberg's RestCatalog reads it identically;
  restarting the catalog service and PostgreSQL loses nothing;
- the whole asset graph (``pipelines``, the stack's settings with loopback addresses) runs on it;
  the catalog service and PostgreSQL are killed (SIGKILL) in the middle, the step that meets them
  dead fails, they restart on the same data and port, and the run resumes from that step. Nothing
  committed before the crash is lost, and pyiceberg reads every table as tablestore does.
"""

from __future__ import annotations

import importlib
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from minio import Minio

from infra.local import LocalStack
from infra.local.processes import http_ok
from infra.local.topology import ACCESS_KEY, BUCKET
from tablestore.config import LakehouseConfig, load_config

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.s3, pytest.mark.postgres]

PIPELINE_DATA = {"events-per-day": 600, "users": 150}
CRASH_AT = "customers and features"  # a step in the middle of the run, after events_hourly
ERASED = {7, 42, 101}  # pipelines/config/stack.yaml's erasure.requested-users
WARM_IMPORTS = ("pipelines.run", "great_expectations", "pyiceberg.catalog.rest")


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    # The Dagster services are left out: the asset graph runs in this process (dagster.materialize),
    # as the daemon would run it. The pipeline's data is small: this is about the topology.
    # The pipeline's imports (Dagster, Great Expectations: a minute on a busy machine) are warmed
    # while the services' JVMs start.
    warm = threading.Thread(target=lambda: [importlib.import_module(m) for m in WARM_IMPORTS], daemon=True)
    warm.start()
    with LocalStack.running(dagster=False, spark_cores=2, pipeline_data=PIPELINE_DATA) as running:
        warm.join()
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
    df.repartition(4).write.format("tablestore").mode("append").save("lakehouse.jobs.events")


def _pyiceberg_rows(stack: LocalStack) -> list[dict[str, Any]]:
    from pyiceberg.catalog.rest import RestCatalog

    catalog = RestCatalog("lakehouse", uri=stack.catalog_uri, token=stack.token)
    return _sorted(catalog.load_table("jobs.events").scan().to_arrow())


def test_spark_job_on_the_standalone_master_survives_catalog_and_postgres_restarts(
    stack: LocalStack, config: LakehouseConfig, spark: Any
) -> None:
    from tablestore.sql.session import SqlSession

    assert spark.sparkContext.master == stack.spark_master
    session = SqlSession(config, spark=spark)
    session.execute("CREATE DATABASE IF NOT EXISTS jobs; "
                    "CREATE TABLE jobs.events (id BIGINT, country STRING, amount DOUBLE) PARTITIONED BY (country)")

    _spark_append(spark, 0, 2000)
    # The job ran on the standalone master, on the worker's executor.
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.ports['spark-ui']}/json/", timeout=5) as r:
        state = json.load(r)
    assert [a["name"] for a in state["activeapps"]] == ["lakehouse-local-stack"]
    assert state["aliveworkers"] == 1

    catalog = config.catalog("lakehouse").load()
    table = catalog.load_table(("jobs", "events"))
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
    after_restart = config.catalog("lakehouse").load().load_table(("jobs", "events"))
    current = after_restart.current_snapshot()
    assert current is not None and current.snapshot_id == first.snapshot_id
    assert _sorted(after_restart.scan().to_arrow()) == ours

    # The run goes on: a second Spark job commits on top of the first.
    _spark_append(spark, 2000, 3000)
    final = config.catalog("lakehouse").load().load_table(("jobs", "events"))
    last = final.current_snapshot()
    assert last is not None and last.parent_snapshot_id == first.snapshot_id
    assert len(final.snapshots()) == 2
    rows = _sorted(final.scan().to_arrow())
    assert [r["id"] for r in rows] == list(range(3000))
    assert rows[2999] == {"id": 2999, "country": "US", "amount": 1499.5}
    assert _pyiceberg_rows(stack) == rows
    counts = session.execute_one("SELECT country, count(*) AS n FROM jobs.events GROUP BY country ORDER BY country")
    assert counts.rows == [["DE", 1000], ["FR", 1000], ["US", 1000]]


# -- the asset graph on the topology ---------------------------------------------------------------


def _table_state(table: Any) -> dict[str, Any]:
    """What a reader sees of a table: rows (sorted), schema (Iceberg JSON), snapshot ids."""
    return {"rows": _rows(table.scan().to_arrow()), "snapshots": [s.snapshot_id for s in table.snapshots()]}


def _rows(data: pa.Table) -> list[dict[str, Any]]:
    return sorted(data.to_pylist(), key=repr)


def _ancestors(table: Any) -> list[int]:
    ids, by_id = [], {s.snapshot_id: s for s in table.snapshots()}
    current = table.current_snapshot()
    while current is not None:
        ids.append(current.snapshot_id)
        current = by_id.get(current.parent_snapshot_id) if current.parent_snapshot_id is not None else None
    return ids


def test_asset_graph_on_the_topology_survives_a_crash_of_catalog_and_postgres(
    stack: LocalStack, spark: Any
) -> None:
    from pyiceberg.catalog.rest import RestCatalog

    from pipelines.run import run_pipeline
    from pipelines.settings import DATABASE, load_settings

    settings_file = str(stack.pipeline_settings_path)
    settings = load_settings(settings_file)
    assert settings.environment == "stack" and settings.tablestore.spark.master == stack.spark_master
    catalog_config = settings.tablestore.catalogs["lakehouse"]
    assert (catalog_config.type, catalog_config.properties["uri"]) == ("rest", stack.catalog_uri)

    def ours() -> Any:
        return settings.tablestore.catalog("lakehouse").load()

    before_crash: dict[str, dict[str, Any]] = {}
    current_before_crash: dict[str, int] = {}

    started = time.monotonic()

    def log(message: str) -> None:
        print(f"{time.monotonic() - started:6.0f} s  {message}", flush=True)  # shown when the test fails
        if message == f"materializing {CRASH_AT}" and not before_crash:
            catalog = ours()
            for name in (t[-1] for t in catalog.list_tables(DATABASE)):
                table = catalog.load_table((DATABASE, name))
                before_crash[name] = {**_table_state(table), "schema": table.schema().to_json()}
                current_before_crash[name] = table.current_snapshot().snapshot_id
            # kill -9, as a crashed container: no clean shutdown of either.
            stack.service("catalog").kill()
            stack.service("postgres").kill()

    first = run_pipeline(settings_file, log=log, log_level="WARNING")
    failed = [s for s in first.steps if not s.success]
    assert [s.label for s in failed] == [CRASH_AT], [(s.label, s.error) for s in failed]
    assert not http_ok(f"{stack.catalog_uri}/v1/config")  # it failed against the dead service
    assert {"landing_events", "events", "erasure_requests"} <= set(before_crash)
    # Spark ran the steps before the crash on the standalone master: the pipeline's session is ours.
    assert spark.sparkContext.master == stack.spark_master

    # PostgreSQL recovers from its WAL on the same data directory; the service comes back on its port.
    stack.service("postgres").start()
    stack.service("catalog").start()
    for name, state in before_crash.items():
        table = ours().load_table((DATABASE, name))
        assert [s.snapshot_id for s in table.snapshots()] == state["snapshots"], name
        assert table.current_snapshot().snapshot_id == current_before_crash[name], name

    resumed = run_pipeline(settings_file, log=log, log_level="WARNING", resume_from=CRASH_AT)
    assert [(s.label, s.error) for s in resumed.steps if not s.success] == []
    assert resumed.steps[0].label == CRASH_AT
    assert [c.name for c in [*first.checks, *resumed.checks] if not c.passed] == []

    catalog = ours()
    pyiceberg = RestCatalog("lakehouse", uri=stack.catalog_uri, token=stack.token)
    names = sorted(t[-1] for t in catalog.list_tables(DATABASE))
    assert names == sorted(t[-1] for t in pyiceberg.list_tables(DATABASE))
    assert {"events", "customers", "erasure_requests", "landing_events", "erasure_audit"} <= set(names)
    final: dict[str, dict[str, Any]] = {}
    for name in names:
        table = catalog.load_table((DATABASE, name))
        assert table.location.startswith(f"s3://{BUCKET}/warehouse/")
        final[name] = _table_state(table)
        theirs = pyiceberg.load_table((DATABASE, name))
        # pyiceberg reads every table as tablestore does: rows, schema, snapshots.
        assert _rows(theirs.scan().to_arrow()) == final[name]["rows"], name
        assert json.loads(theirs.schema().model_dump_json()) == table.schema().to_json(), name
        assert [s.snapshot_id for s in theirs.snapshots()] == final[name]["snapshots"], name
        assert theirs.metadata.current_snapshot_id == table.current_snapshot().snapshot_id, name

        # Nothing committed before the crash is lost: its snapshots stay in the history, the
        # then-current one is an ancestor of the current one, and its rows read back unchanged.
        if name in before_crash:
            old = before_crash[name]
            assert final[name]["snapshots"][:len(old["snapshots"])] == old["snapshots"], name
            assert current_before_crash[name] in _ancestors(table), name
            at_crash = table.scan(snapshot_id=current_before_crash[name]).to_arrow()
            assert _rows(at_crash) == old["rows"], name

    # The rows are right: every landed event, the erased users' events gone from events and customers.
    landed = final["landing_events"]["rows"]
    assert len(landed) == settings.data.days * PIPELINE_DATA["events-per-day"]
    expected = sorted(r["event_id"] for r in landed if r["user_id"] not in ERASED)
    assert sorted(r["event_id"] for r in final["events"]["rows"]) == expected
    customers = final["customers"]["rows"]
    assert customers and ERASED.isdisjoint(r["user_id"] for r in customers)
    assert {r["status"] for r in final["erasure_requests"]["rows"]} == {"done"}
    assert [r["verified"] for r in final["erasure_audit"]["rows"]] == [True]
    # The rows landed and ingested before the crash are the same rows at the end (minus erasures).
    assert _rows(catalog.load_table((DATABASE, "landing_events")).scan(
        snapshot_id=current_before_crash["landing_events"]).to_arrow()) == before_crash["landing_events"]["rows"]
