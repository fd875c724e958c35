"""Faults in the Docker Compose stack while its pipeline runs, and what is checked after them.

``tests/infra/test_docker_stack.py`` drives the pipeline once undisturbed (its ``pipeline``
fixture: files landed in MinIO, the sensors and automation run the rest) and takes every table's
column checksums through Trino. Then it empties the lakehouse on the same stack through the
stack's own APIs (``empty_lakehouse``: the daemon stopped, every warehouse table dropped with its
files, Dagster's record of their materializations wiped and the automation sensor's cursor
cleared) and lands the files again, while ``FAULTS`` kill one service at a time with SIGKILL,
each when the event log of a run the daemon started reaches a chosen point.
Before each kill the snapshots of every table are listed; once the service is back (by itself,
its restart policy), each of them must still be there and each table's snapshot log must
extend the one before. After the pipeline: every run succeeded (the interrupted steps retried, the
pipeline's retry policy), every GX check passed, every column reads as in the undisturbed run
(but the wall-clock ones and the erasure's count of files removed),
and no snapshot of any table references a file missing from MinIO.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infra.compose_stack import Stack
from infra.dagster_client import LOCATION, REPOSITORY, STATUS, DagsterClient, RunResult
from infra.landing_feed import LandingBucketWriter
from infra.stack_pipeline import drive
from pipelines.defs.automation import AUTOMATION_SENSOR
from tablestore.spec.manifests.manifest import read_manifest, read_manifest_list
from tablestore.spec.metadata.table_metadata import TableMetadata

BUCKET = "lakehouse"
EVENT_PAGE = """query($id: ID!, $cursor: String) { logsForRun(runId: $id, afterCursor: $cursor) { __typename
  ... on EventConnection { cursor hasMore events { __typename ... on MessageEvent { stepKey timestamp } } }
  ... on PythonError { message } } }"""


@dataclass(frozen=True)
class Fault:
    """Kill ``service`` ``delay_s`` after the event ``event`` (its GraphQL type) of the step whose
    key ends with ``step`` (None: the run's own), in the run number ``run`` or a later one (from 0,
    in the order the daemon created them; None: any run). "Or later": how the landing sensor
    groups the days decides which run is the third, and a fault before this one may fire in it
    after its enqueued event went by (CI's run of 2026-11-29: the schema evolution was run 2)."""

    service: str
    run: int | None
    event: str
    step: str | None
    delay_s: float
    point: str  # what the pipeline is doing then


# One at a time, at five points of the sensor-driven pipeline: the longest steps, or the queue.
FAULTS = (
    Fault("minio", None, "ExecutionStepStartEvent", "lakehouse__shop__events", 3.0,
          "the landing sensor's first run, `events` (two days, one INSERT OVERWRITE): its Spark tasks "
          "write Parquet to MinIO"),
    Fault("catalog", None, "ExecutionStepStartEvent", "evolved_types", 2.0,
          "the automation's schema evolution, its `evolved_types` GX suite: it loads and reads `events` "
          "through the catalog"),
    # At the queue: the daemon dequeues the third run (or the first after the fault before) once
    # a second, so the kill lands while the run is queued (it starts after the restart), while the daemon
    # launches it (marked STARTING but not yet handed to the code server: run monitoring fails
    # it after its start timeout and run retries re-execute it, infra/dagster/dagster.yaml), or
    # just after (it runs in the code server without the daemon). The daemon runs the sensors
    # too: their ticks wait for its restart, and their cursors (in PostgreSQL) survive it.
    Fault("dagster-daemon", 2, "RunEnqueuedEvent", None, 0.0,
          "the third run the sensors and automation started (which one depends on how the landing "
          "sensor grouped the days) queued and being dequeued: the daemon's queue, its launch and its "
          "sensor ticks"),
    Fault("postgres", None, "ExecutionStepStartEvent", "lakehouse__shop__events_hourly", 2.0,
          "`events_hourly` (24 hours, one INSERT OVERWRITE): the catalog's metastore and Dagster's run "
          "storage"),
    Fault("spark-connect", None, "ExecutionStepStartEvent", "lakehouse__shop__customers", 4.0,
          "`customers` (INSERT OVERWRITE from a GROUP BY of `events`), run by the automation: a Spark "
          "job of the Connect server"),
)

# Columns whose values are the wall clock of the run, not data the pipeline derives.
WALL_CLOCK = {("erasure_requests", "completed_at"), ("erasure_audit", "erased_at")}
# Columns that count files, not rows: the erasure's `files_removed` is the files of the snapshots
# it expires plus the orphans it removes, so it follows how many commits the runs made (how the
# landing sensor grouped the days: 2026-11-01 and -02 in two runs undisturbed, in one run in the
# faults pass of 29 November) and the files a fault's commit of unknown outcome left (orphans,
# which the erasure clears: docs/design.md, who may delete a written file).
FILE_COUNTS = {("erasure_audit", "files_removed")}


@dataclass
class FaultRecord:
    fault: Fault
    run_id: str
    status_at_kill: str
    killed_at: float  # time.time()
    seconds_back: float
    lost: dict[str, list[int]] = field(default_factory=dict)  # snapshots seen before, gone after
    log_rewritten: list[str] = field(default_factory=list)  # tables whose snapshot log did not grow


def catalog_get(stack: Stack, path: str, token: str | None = None) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{stack.url('catalog', 8181)}/v1/metastore/{path}",
        headers={"Authorization": f"Bearer {token or stack.env['CATALOG_TOKEN_TRINO']}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.load(response)
    return answer


# Services back once Dagster records a heartbeat of each of their daemons after the kill: the
# record the daemon's healthcheck (`dagster-daemon liveness-check`, every 30 s: each is a Python
# process importing Dagster) reads, read at once through the webserver instead of at the next check.
BACK_BY_HEARTBEAT = ("dagster-daemon",)


def kill_and_wait(stack: Stack, service: str, timeout_s: float = 300) -> float:
    """SIGKILL the container's init (the container dies, as in a crash); answer the seconds until
    it is back by itself (its restart policy) and healthy (the daemon: running, with a heartbeat
    of each of its daemons after the kill)."""
    info = stack.container(service)
    restarts = info["RestartCount"]
    started, killed_at = time.monotonic(), time.time()
    os.kill(info["State"]["Pid"], signal.SIGKILL)
    deadline = started + timeout_s

    def back(info: dict[str, Any]) -> bool:
        state = info["State"]
        up = state.get("Running") if service in BACK_BY_HEARTBEAT else state.get("Health", {}).get("Status") == "healthy"
        return info["RestartCount"] == restarts + 1 and bool(up)

    while time.monotonic() < deadline:
        info = stack.container(service)
        if back(info):
            break
        time.sleep(1)
    if not back(info):
        raise AssertionError(f"{service} is not back and healthy {timeout_s:.0f} s after SIGKILL: {info['State']}")
    if service in BACK_BY_HEARTBEAT:
        client = DagsterClient(f"http://{stack.address('dagster-webserver', 3000)}")
        wait_for_daemon(client, killed_at, timeout_s=max(deadline - time.monotonic(), 1.0))
    return time.monotonic() - started


def tables(stack: Stack) -> dict[str, dict[str, Any]]:
    """Every table of ``shop`` as the catalog loads it (``metadata-location``, ``metadata``)."""
    out = {}
    for ident in catalog_get(stack, "namespaces/shop/tables")["identifiers"]:
        out[ident["name"]] = catalog_get(stack, f"namespaces/shop/tables/{urllib.parse.quote(ident['name'])}")
    return out


def external(loaded: dict[str, Any]) -> bool:
    return str(loaded["metadata"].get("properties", {}).get("EXTERNAL", "")).upper() == "TRUE"


def snapshot_state(loaded: dict[str, dict[str, Any]]) -> dict[str, tuple[set[int], list[int]]]:
    """Per table: its snapshot ids, and its snapshot log (the ids the main branch pointed at)."""
    return {name: ({s["snapshot-id"] for s in t["metadata"].get("snapshots") or []},
                   [e["snapshot-id"] for e in t["metadata"].get("snapshot-log") or []]) for name, t in loaded.items()}


def _retrying(what: Callable[[], Any], timeout_s: float = 120) -> Any:
    """``what()``, again every 2 s while a service is still reconnecting (PostgreSQL's clients)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return what()
        except (urllib.error.URLError, OSError, RuntimeError):
            if time.monotonic() > deadline:
                raise
            time.sleep(2)


def _inject(stack: Stack, client: DagsterClient, run_id: str, fault: Fault,
            log: Callable[[str], None]) -> FaultRecord:
    time.sleep(fault.delay_s)
    before = snapshot_state(tables(stack))
    status = client.graphql(STATUS, {"id": run_id})["runOrError"]["status"]
    killed_at = time.time()
    seconds = kill_and_wait(stack, fault.service)
    after = _retrying(lambda: snapshot_state(tables(stack)))
    record = FaultRecord(fault, run_id, status, killed_at, seconds)
    for name, (ids, snapshot_log) in before.items():
        now_ids, now_log = after.get(name, (set(), []))
        if ids - now_ids:
            record.lost[name] = sorted(ids - now_ids)
        if now_log[:len(snapshot_log)] != snapshot_log:
            record.log_rewritten.append(name)
    log(f"[faults] {fault.service} killed with SIGKILL ({fault.point}; run {status}): back and healthy in "
        f"{seconds:.1f} s; snapshots lost: {record.lost or 'none'}")
    return record


def _matches(fault: Fault, index: int, event: dict[str, Any]) -> bool:
    if event["__typename"] != fault.event or (fault.run is not None and index < fault.run):
        return False
    return fault.step is None or str(event.get("stepKey") or "").endswith(fault.step)


def landing_writer(stack: Stack) -> LandingBucketWriter:
    """The stack's landing bucket, written with MinIO's root key (the test is the data's source).
    MinIO's host port is looked up at each put: killed and restarted, it is published on another."""
    return LandingBucketWriter(lambda: stack.address("minio", 9000), stack.env["MINIO_ROOT_USER"],
                               stack.env["MINIO_ROOT_PASSWORD"])


def run_with_faults(stack: Stack, faults: tuple[Fault, ...], timeout_s: float,
                    log: Callable[[str], None] = print) -> tuple[list[RunResult], list[FaultRecord]]:
    """The pipeline driven by landing its files (``infra.stack_pipeline.drive``), while the
    event log of each run the daemon starts is followed and each fault fires at its point, one
    at a time."""
    url = f"http://{stack.address('dagster-webserver', 3000)}"
    client = DagsterClient(url)
    pending = list(faults)
    records: list[FaultRecord] = []

    def on_events(index: int, run_id: str, events: list[dict[str, Any]]) -> None:
        for event in events:
            if pending and _matches(pending[0], index, event):
                records.append(_inject(stack, client, run_id, pending.pop(0), log))

    flow = drive(url, landing_writer(stack), timeout_s=timeout_s, on_events=on_events,
                 log=lambda line: log(f"[faults] {line}"))
    if pending:
        raise AssertionError(f"the pipeline settled before the points of {pending}")
    return flow.results, records


WIPE = """mutation($ranges: [PartitionsByAssetSelector!]!) { wipeAssets(assetPartitionRanges: $ranges) {
  __typename ... on PythonError { message } } }"""
SET_CURSOR = """mutation($selector: SensorSelector!) { setSensorCursor(sensorSelector: $selector, cursor: null) {
  __typename ... on Sensor { sensorState { typeSpecificData { ... on SensorData { lastCursor } } } }
  ... on PythonError { message } } }"""
MATERIALIZED = """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { __typename
  ... on AssetNode { assetMaterializations(limit: 1) { timestamp } partitionStats { numMaterialized } } } }"""
DAEMONS = """{ instance { daemonHealth { allDaemonStatuses { daemonType required healthy lastHeartbeatTime } } } }"""


def drop_every_table(stack: Stack) -> None:
    """Every table of ``shop`` dropped with its files (purge), but the external landing table,
    whose files are the landing data (its metadata lies among them, and an external table is not
    created again over a location holding one: the next ingest finds it and registers no file)."""
    for name, loaded in tables(stack).items():
        if external(loaded):
            continue
        request = urllib.request.Request(
            f"{stack.url('catalog', 8181)}/v1/metastore/namespaces/shop/tables/{urllib.parse.quote(name)}"
            "?purgeRequested=true", method="DELETE",
            headers={"Authorization": f"Bearer {stack.env['CATALOG_TOKEN_DAGSTER']}"})
        with urllib.request.urlopen(request, timeout=300):
            pass


def wait_for_daemon(client: DagsterClient, since: float, timeout_s: float = 300) -> float:
    """Until every required daemon of Dagster's instance has written a heartbeat after ``since``
    (time.time()): the daemon process is up and running its loops. Dagster's own record, read
    through the webserver, without waiting for the container's healthcheck (every 30 s)."""
    deadline = time.monotonic() + timeout_s
    statuses: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            statuses = client.graphql(DAEMONS)["instance"]["daemonHealth"]["allDaemonStatuses"]
        except (urllib.error.URLError, OSError, RuntimeError):
            statuses = []
        required = [d for d in statuses if d["required"]]
        # Live, as `dagster-daemon liveness-check` has it: a heartbeat, errors or not (a sensor
        # tick's error while the code server restarts is no death of the daemon).
        if required and all((d["lastHeartbeatTime"] or 0) > since for d in required):
            return time.time() - since
        time.sleep(1)
    raise AssertionError(f"Dagster's daemons have no heartbeat {timeout_s:.0f} s after {since}: {statuses}")


def empty_lakehouse(stack: Stack) -> dict[str, float]:
    """The lakehouse as on a new stack, through the stack's APIs, with the daemon stopped: every
    warehouse table dropped and purged (the catalog); Dagster's record of every ``lakehouse/shop``
    asset's materializations and checks wiped (GraphQL ``wipeAssets``), each then read back as never
    materialized, with no partition materialized; and the automation sensor's cursor cleared
    (``setSensorCursor``), so that its next evaluation starts from nothing, as a new instance's
    first does. Answers the seconds of each step.

    Why the daemon is stopped: an automation tick reads every asset's materializations one query
    at a time, over seconds. A tick that reads part of them before the wipe and part after sees
    ``customers`` newly missing while ``events`` still looks materialized, and requests
    ``customers`` and everything after it before ``events`` exists: what the first try, with the
    daemon running, did. Stopped, no tick runs across the wipe. The sensors' cursors stay (in
    PostgreSQL): the files landed again are new to them (a new modification time)."""
    client = DagsterClient(f"http://{stack.address('dagster-webserver', 3000)}")
    seconds: dict[str, float] = {}
    started = time.monotonic()
    stack.compose("stop", "dagster-daemon", timeout=120)
    seconds["daemon stopped"] = time.monotonic() - started
    try:
        started = time.monotonic()
        drop_every_table(stack)
        seconds["tables dropped"] = time.monotonic() - started
        started = time.monotonic()
        keys = [k for k in client.asset_keys() if k[:2] == ["lakehouse", "shop"]]
        answer = client.graphql(WIPE, {"ranges": [{"assetKey": {"path": key}} for key in keys]})["wipeAssets"]
        if answer["__typename"] != "AssetWipeSuccess":
            raise AssertionError(f"wiping {len(keys)} assets failed: {answer}")
        selector = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "sensorName": AUTOMATION_SENSOR}
        cleared = client.graphql(SET_CURSOR, {"selector": selector})["setSensorCursor"]
        if cleared["__typename"] != "Sensor" or cleared["sensorState"]["typeSpecificData"]["lastCursor"] is not None:
            raise AssertionError(f"clearing {AUTOMATION_SENSOR}'s cursor failed: {cleared}")
        left = {}
        for key in keys:
            node = client.graphql(MATERIALIZED, {"key": {"path": key}})["assetNodeOrError"]
            materialized = (len(node.get("assetMaterializations") or []),
                            (node.get("partitionStats") or {}).get("numMaterialized", 0))
            if materialized != (0, 0):
                left["/".join(key)] = materialized
        if left:
            raise AssertionError(f"after the wipe, Dagster still reads these assets as materialized "
                                 f"(materializations, partitions): {left}")
        seconds["materializations wiped"] = time.monotonic() - started
    finally:
        started, since = time.monotonic(), time.time()
        stack.compose("start", "dagster-daemon", timeout=300)
    wait_for_daemon(client, since)
    seconds["daemon started"] = time.monotonic() - started
    return seconds


def column_checksums(stack: Stack) -> dict[str, dict[str, str | None]]:
    """Per table of the warehouse (not the external landing table, whose files Trino does not
    mount): its row count and Trino's order-insensitive ``checksum`` of every column. Trino
    reads the rows; only one row per table comes back."""
    import trino

    host, port = stack.address("trino", 8080).rsplit(":", 1)
    connection = trino.dbapi.connect(host=host, port=int(port), user="stack-test", catalog="lakehouse",
                                     schema="shop")
    out: dict[str, dict[str, str | None]] = {}
    for name, loaded in sorted(tables(stack).items()):
        if external(loaded):
            continue
        metadata = loaded["metadata"]
        schema = next(s for s in metadata["schemas"] if s["schema-id"] == metadata["current-schema-id"])
        columns = [f["name"] for f in schema["fields"]]
        cursor = connection.cursor()
        cursor.execute(f'SELECT count(*), {", ".join(f"checksum({_quote(c)})" for c in columns)} FROM {_quote(name)}')
        row = cursor.fetchone()
        out[name] = {"rows": str(row[0]), **{c: (v.hex() if v is not None else None) for c, v in zip(columns, row[1:],
                                                                                                    strict=True)}}
    return out


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def differing_columns(undisturbed: dict[str, dict[str, str | None]],
                      faulted: dict[str, dict[str, str | None]]) -> dict[str, list[str]]:
    """Per table, the columns (and ``rows``) whose checksums differ, but the wall-clock ones and
    the erasure's count of files removed."""
    out: dict[str, list[str]] = {}
    for name in sorted(set(undisturbed) | set(faulted)):
        ours, theirs = undisturbed.get(name, {}), faulted.get(name, {})
        columns = [c for c in sorted(set(ours) | set(theirs)) if (name, c) not in WALL_CLOCK | FILE_COUNTS
                   and ours.get(c, "missing") != theirs.get(c, "missing")]
        if columns:
            out[name] = columns
    return out


class _ObjectIO:
    """The reads of tablestore's manifest readers (``new_input(path).read()``) from MinIO."""

    def __init__(self, s3: Any) -> None:
        self.s3 = s3

    def new_input(self, path: str) -> Any:
        s3 = self.s3

        class _Input:
            def read(self) -> bytes:
                body: bytes = s3.get_object(Bucket=BUCKET, Key=key_of(path))["Body"].read()
                return body

        return _Input()

    def new_output(self, path: str) -> Any:
        raise NotImplementedError("read only")


def key_of(path: str) -> str:
    prefix = f"s3://{BUCKET}/"
    if not path.startswith(prefix):
        raise AssertionError(f"{path} is not in bucket {BUCKET}")
    return path[len(prefix):]


def s3_client(stack: Stack) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=stack.url("minio", 9000), aws_access_key_id=stack.env["MINIO_ROOT_USER"],
                        aws_secret_access_key=stack.env["MINIO_ROOT_PASSWORD"], region_name="us-east-1")


def missing_files(stack: Stack) -> tuple[int, list[str]]:
    """Every file that a snapshot of a warehouse table references (its metadata file, every
    snapshot's manifest list, manifests, and live data and delete files), looked up in one listing
    of the bucket: (files checked, those missing)."""
    s3 = s3_client(stack)
    present: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        present.update(o["Key"] for o in page.get("Contents", []))
    io = _ObjectIO(s3)
    referenced: set[str] = set()
    manifests_read: set[str] = set()
    for loaded in tables(stack).values():
        if external(loaded):
            continue
        metadata = TableMetadata.from_json(loaded["metadata"])
        referenced.add(loaded["metadata-location"])
        for snapshot in metadata.snapshots:
            if snapshot.manifest_list is None:
                continue
            referenced.add(snapshot.manifest_list)
            if key_of(snapshot.manifest_list) not in present:
                continue
            for manifest in read_manifest_list(io, snapshot.manifest_list):
                referenced.add(manifest.manifest_path)
                if manifest.manifest_path in manifests_read or key_of(manifest.manifest_path) not in present:
                    continue
                manifests_read.add(manifest.manifest_path)
                for entry in read_manifest(io, manifest, discard_deleted=True, specs=metadata.specs()):
                    referenced.add(entry.data_file.file_path)
    return len(referenced), sorted(p for p in referenced if key_of(p) not in present)
