"""The stack's topology without Docker (infra/local): the whole asset graph runs on it, through a crash.

The pipeline (``pipelines``, with the stack's settings and this topology's loopback addresses,
``LocalStack.pipeline_settings_path``) runs in this process through its definitions, driven as
the Dagster daemon drives it (``pipelines.drive``: its sensors and automation conditions decide
every run): Spark jobs go to the standalone master and its worker, tables sit in
``s3://lakehouse/warehouse`` on the loopback MinIO, and the catalog is the REST service on
PostgreSQL. When the erasure's run starts, the catalog service, PostgreSQL and MinIO are killed
(SIGKILL); that run fails; all three restart on the same data directory and port, and the
daemon goes on (``drive(..., resume=...)``: the same instance and cursors, the failed run
launched again as Dagster's run retries do). Then nothing committed
before the crash is lost, every table's rows
are right, and pyiceberg's RestCatalog reads every table as tablestore does.

It takes a few minutes: two JVMs, a Spark application and the whole graph on a small worker.
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

from infra.local.processes import http_ok
from infra.local.topology import ACCESS_KEY, BUCKET, LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.s3, pytest.mark.postgres, pytest.mark.timeout(3600)]

PIPELINE_DATA = {"events-per-day": 600, "users": 150}  # small: this is about the topology
CRASH_AT = "lakehouse/shop/gdpr_erasure"  # the services die when the run of this asset starts
ERASED = {7, 42, 101}  # pipelines/config/stack.yaml's erasure.requested-users
TABLES = {"events", "customers", "erasure_requests", "landing_events", "erasure_audit"}
WARM_IMPORTS = ("pipelines.drive", "great_expectations", "pyiceberg.catalog.rest")


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    # The Dagster webserver and daemon are left out: the graph runs in this process. Its imports
    # (Dagster, Great Expectations: a minute on a busy machine) are warmed while the JVMs start.
    warm = threading.Thread(target=lambda: [importlib.import_module(m) for m in WARM_IMPORTS], daemon=True)
    warm.start()
    with LocalStack.running(dagster=False, spark_cores=2, pipeline_data=PIPELINE_DATA) as running:
        warm.join()
        yield running


@pytest.fixture(scope="module")
def spark(stack: LocalStack) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from pipelines.defs.resources import resources

    # An earlier module's local session would be returned unchanged by getOrCreate; the pipeline
    # needs one on the standalone master: the one its Spark resource makes from its settings.
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    session = resources(str(stack.pipeline_settings_path))["spark"].session()
    try:
        yield session
    finally:
        session.stop()


def _rows(data: pa.Table) -> list[dict[str, Any]]:
    return sorted(data.to_pylist(), key=repr)


def _table_state(table: Any) -> dict[str, Any]:
    """What a reader sees of a table: its rows (sorted) and snapshot ids."""
    return {"rows": _rows(table.scan().to_arrow()), "snapshots": [s.snapshot_id for s in table.snapshots()]}


def _schema_json(schema: dict[str, Any]) -> dict[str, Any]:
    # An empty identifier-field-ids may be written or left out (the spec's default is empty).
    return {"identifier-field-ids": [], **schema}


def _ancestors(table: Any) -> list[int]:
    ids, by_id = [], {s.snapshot_id: s for s in table.snapshots()}
    current = table.current_snapshot()
    while current is not None:
        ids.append(current.snapshot_id)
        current = by_id.get(current.parent_snapshot_id) if current.parent_snapshot_id is not None else None
    return ids


def test_asset_graph_on_the_topology_survives_a_crash_of_catalog_postgres_and_minio(
    stack: LocalStack, spark: Any
) -> None:
    from pyiceberg.catalog.rest import RestCatalog

    from pipelines.defs.erasure.assets import ERASED_TABLES
    from pipelines.drive import drive
    from pipelines.settings import DATABASE, load_settings

    settings_file = str(stack.pipeline_settings_path)
    settings = load_settings(settings_file)
    assert settings.environment == "stack" and settings.tablestore.spark.master == stack.spark_master
    catalog_config = settings.tablestore.catalogs["lakehouse"]
    assert (catalog_config.type, catalog_config.properties["uri"]) == ("rest", stack.catalog_uri)
    assert spark.sparkContext.master == stack.spark_master

    def ours() -> Any:
        return settings.tablestore.catalog("lakehouse").load()

    before_crash: dict[str, dict[str, Any]] = {}
    current_before_crash: dict[str, int] = {}
    started = time.monotonic()

    def log(message: str) -> None:
        print(f"{time.monotonic() - started:6.0f} s  {message}", flush=True)  # shown when the test fails
        if message.startswith("run ") and CRASH_AT in message and not before_crash:
            catalog = ours()
            for name in (t[-1] for t in catalog.list_tables(DATABASE)):
                table = catalog.load_table((DATABASE, name))
                before_crash[name] = _table_state(table)
                current_before_crash[name] = table.current_snapshot().snapshot_id
            # kill -9, as a crashed container: no clean shutdown of any. MinIO too: what was
            # committed must be in its objects on disk, not in a process's memory.
            stack.service("catalog").kill()
            stack.service("postgres").kill()
            stack.service("s3").kill()

    first = drive(settings_file, log=log, log_level="WARNING")
    failed = [s for s in first.steps if not s.success]
    assert [CRASH_AT in s.label for s in failed] == [True], [(s.label, s.error) for s in failed]
    assert not http_ok(f"{stack.catalog_uri}/v1/config")  # it failed against the dead service
    assert {"landing_events", "events", "erasure_requests"} <= set(before_crash)

    # The Spark jobs ran on the standalone master, on the worker's executor.
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.ports['spark-ui']}/json/", timeout=30) as r:
        master = json.load(r)
    assert [a["name"] for a in master["activeapps"]] == [spark.sparkContext.appName]
    assert master["aliveworkers"] == 1 and master["coresused"] == 2

    # PostgreSQL recovers from its WAL on the same data directory, MinIO finds its objects on its
    # drive; each service comes back on its port.
    stack.service("s3").start()
    stack.service("postgres").start()
    stack.service("catalog").start()
    for name, state in before_crash.items():
        table = ours().load_table((DATABASE, name))
        assert [s.snapshot_id for s in table.snapshots()] == state["snapshots"], name
        assert table.current_snapshot().snapshot_id == current_before_crash[name], name

    # The daemon goes on: the same instance and cursors, the failed run launched again.
    resumed = drive(settings_file, log=log, log_level="WARNING", resume=first)
    assert [(s.label, s.error) for s in resumed.steps if not s.success] == []
    assert any(CRASH_AT in s.materializations for s in resumed.steps)
    assert [c.name for c in [*first.checks, *resumed.checks] if not c.passed] == []

    catalog = ours()
    pyiceberg = RestCatalog("lakehouse", uri=stack.catalog_uri, token=stack.token)
    names = sorted(t[-1] for t in catalog.list_tables(DATABASE))
    assert names == sorted(t[-1] for t in pyiceberg.list_tables(DATABASE))
    assert set(names) >= TABLES
    final: dict[str, dict[str, Any]] = {}
    for name in names:
        table = catalog.load_table((DATABASE, name))
        final[name] = _table_state(table)
        theirs = pyiceberg.load_table((DATABASE, name))
        # pyiceberg reads every table as tablestore does: rows, schema, snapshots.
        assert _rows(theirs.scan().to_arrow()) == final[name]["rows"], name
        assert _schema_json(json.loads(theirs.schema().model_dump_json())) == _schema_json(
            table.schema().to_json()), name
        assert [s.snapshot_id for s in theirs.snapshots()] == final[name]["snapshots"], name
        assert theirs.metadata.current_snapshot_id == table.current_snapshot().snapshot_id, name
        if name != "landing_events":  # external: over the landing files on local disk
            assert table.location.startswith(f"s3://{BUCKET}/warehouse/"), name

        # Nothing committed before the crash is lost: its snapshots stay in the history, the
        # then-current one is an ancestor of the current one, and it reads back as it did. The
        # erasure expires the snapshots of the tables it rewrites (they hold the erased rows):
        # there, what was committed before the crash survives as rows.
        if name in before_crash and name in ERASED_TABLES:
            old_rows = [r for r in before_crash[name]["rows"] if r["user_id"] not in ERASED]
            assert old_rows and final[name]["rows"] == old_rows, name
        elif name in before_crash:
            old = before_crash[name]
            assert final[name]["snapshots"][:len(old["snapshots"])] == old["snapshots"], name
            assert current_before_crash[name] in _ancestors(table), name
            assert _rows(table.scan(snapshot_id=current_before_crash[name]).to_arrow()) == old["rows"], name

    # The rows are right: every landed event; the erased users' events and customers gone.
    landed = final["landing_events"]["rows"]
    assert len(landed) == settings.data.days * PIPELINE_DATA["events-per-day"]
    expected = sorted(r["event_id"] for r in landed if r["user_id"] not in ERASED)
    assert sorted(r["event_id"] for r in final["events"]["rows"]) == expected
    customers = final["customers"]["rows"]
    assert customers and ERASED.isdisjoint(r["user_id"] for r in customers)
    assert {r["status"] for r in final["erasure_requests"]["rows"]} == {"done"}
    assert [r["verified"] for r in final["erasure_audit"]["rows"]] == [True]

    # The data files are objects in the bucket storage-init made (listed with the minio SDK, as MinIO).
    s3 = Minio(stack.s3_endpoint.removeprefix("http://"), access_key=ACCESS_KEY, secret_key=stack.secret_key,
               secure=False)
    keys = [o.object_name for o in s3.list_objects(BUCKET, prefix="warehouse/", recursive=True)]
    events_files = catalog.load_table((DATABASE, "events")).inspect.data_files().column("file_path").to_pylist()
    assert events_files and {f.removeprefix(f"s3://{BUCKET}/") for f in events_files} <= set(keys)
