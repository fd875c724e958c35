"""The Docker Compose stack for real, on this machine's Docker engine (marker ``docker``, in
``make test``).

``../shared/docker-stack/setup`` installs and starts the engine when none answers, and builds
local stand-ins for the images that cannot be pulled here (its README says how they differ);
``make images`` (run by ``running_stack`` when needed) builds the pinned MinIO from source and
the real ``trinodb/trino:476``. The stack runs with the ``trino`` profile. Under a project name
of its own, with fresh secrets and engine-chosen loopback ports, the module:


- builds the image and brings every other service up (``docker compose up --build --wait``),
  and checks what ``docker inspect`` reports: loopback-only ports, an init, restart policies;
- checks MinIO is the release built from source, and who holds which MinIO key: the root key
  only ``storage-init``, the catalog's user (limited to the warehouse bucket) only the catalog,
  the landing reader (list and read of the landing bucket) only Dagster's code server;
- lands the events, then the erasure requests, in MinIO's landing bucket and watches, through
  Dagster's GraphQL API, the runs that the daemon's sensors and automation conditions start (the
  test launches none): every asset materialized, every asset check passed, every run's Spark
  work in the one application of the Spark Connect server;
  Trino's reconciliation passes (its counts equal tablestore's), Trino having logged in with
  OAuth2 client credentials and read MinIO with vended credentials; Dagster's runs are rows of
  its PostgreSQL database and its code location the code server's;
- materializes an asset in the stack's Dagster UI with headless Chromium;
- kills the catalog, MinIO and PostgreSQL with SIGKILL, and the Dagster daemon mid-run, restarts
  MinIO, Dagster's webserver and daemon, and takes the stack down and up again: each comes back
  by itself with every object, snapshot and run (docs/stack.md, Faults, has the times);
- empties the lakehouse and lands the files again, and the pipeline runs again while MinIO,
  the catalog, the Dagster daemon, PostgreSQL and the Spark Connect server are killed with
  SIGKILL one at a time, each at a point of a run's event log (``tests/infra/stack_faults.py``):
  the interrupted steps retry, the pipeline completes, no snapshot committed before a kill is lost, every column's checksum (through
  Trino) equals the undisturbed run's, and no snapshot references a file missing from MinIO;
- reads every table through the stack's catalog with the Trino token using Java Iceberg's REST
  client (``../shared/iceberg-oracle``, the library of Trino's Iceberg connector): table list,
  schemas and snapshots. Rows are not read: the oracle has no S3 FileIO and the warehouse is
  in MinIO;
- and ``docker compose down -v`` at the end, whatever happened.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.compose_stack import RUN_START_TIMEOUT_S, SETUP_WORK, Stack, StackError, running_stack
from infra.dagster_client import DONE, STATUS, TAGS, DagsterClient, RunResult
from infra.stack_pipeline import drive
from tests.infra.stack_faults import (
    FAULTS,
    catalog_get,
    column_checksums,
    differing_columns,
    empty_lakehouse,
    kill_and_wait,
    landing_writer,
    missing_files,
    run_with_faults,
    wait_for_daemon,
)

# The whole module: image build and start (~3 min with a warm cache), the pipeline, the crash.
pytestmark = [pytest.mark.docker, pytest.mark.timeout(3600)]

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
ORACLE = SHARED / "iceberg-oracle" / "oracle"
SERVICES = ("minio", "storage-init", "postgres", "catalog", "spark-master", "spark-worker", "spark-connect",
            "dagster-code", "dagster-webserver", "dagster-daemon", "trino")
IMAGE = "lakehouse/tablestore:0.1.0"
IMAGE_LIMIT_BYTES = 2_500_000_000
PLAN_TIMEOUT_S = 2400.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    try:
        with running_stack(tmp_path_factory.mktemp("stack")) as stack:
            print(f"\n[stack] docker compose up --build --wait: {stack.timings['up']:.1f} s")
            yield stack
    except StackError as e:  # no engine, or the stack did not come up: a failure, never a skip
        pytest.fail(str(e))


def test_image_builds_on_the_slim_base_small_and_without_the_uv_cache(stack: Stack) -> None:
    size = int(subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", IMAGE], capture_output=True,
                              text=True, check=True).stdout)
    assert size <= IMAGE_LIMIT_BYTES, f"{IMAGE} is {size / 1e9:.2f} GB"
    probe = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", IMAGE, "sh", "-c",
         # The cache mount leaves its empty mount point (/root/.cache/uv) in the layer: no file under it.
         'find /root/.cache -type f | wc -l; "$JAVA_HOME/bin/java" -version 2>&1 | head -1; echo "$SPARK_WORKER_DIR"'],
        capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    cached_files, java, work_dir = probe.stdout.strip().splitlines()
    assert cached_files == "0"
    assert java.startswith('openjdk version "17.') and work_dir == "/var/lib/spark/work"


# What the image is built from (.dockerignore keeps the rest out of the build context).
BUILD_INPUTS = ("infra", "tablestore", "pipelines", "quality", "README.md", "pyproject.toml", "uv.lock", ".dockerignore")


def test_a_fresh_clone_builds_from_the_layer_cache(stack: Stack, tmp_path: Path) -> None:
    """CI builds in a clean clone: the layers the stack's build left are reused there (the build
    context is the same bytes; BuildKit keys layers by content, not by path or mtime)."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--local", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    # The clone has the committed sources; the stack was built from the working tree.
    unchanged = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", *BUILD_INPUTS], cwd=ROOT).returncode == 0
    # Compose builds (this docker CLI has no buildx for `docker build`); an override names the
    # image otherwise, so the stack's tag stays on the stack's image.
    probe_tag = f"{stack.project}-cache-probe:1"
    override = tmp_path / "probe.yml"
    override.write_text(f"services:\n  catalog:\n    image: {probe_tag}\n")
    started = time.monotonic()
    built = subprocess.run(["docker", "compose", "--progress", "plain", "--project-directory", str(clone),
                            "-f", str(clone / "docker-compose.yml"), "-f", str(override), "--env-file", str(stack.env_file),
                            "-p", f"{stack.project}-probe", "build", "catalog"],
                           capture_output=True, text=True, timeout=1200, env={**os.environ, **stack.env})
    seconds = time.monotonic() - started
    subprocess.run(["docker", "image", "rm", probe_tag], capture_output=True)
    assert built.returncode == 0, built.stderr[-3000:]
    log = built.stderr + built.stdout
    steps = dict(re.findall(r"^(#\d+) \[[^\]]*?\d+/\d+\] (.*)$", log, re.M))  # step id -> instruction
    cached = set(re.findall(r"^(#\d+) CACHED$", log, re.M))
    runs = {step: text for step, text in steps.items() if text.startswith("RUN ")}
    dependencies = [step for step, text in runs.items() if "--no-install-project" in text]
    assert len(dependencies) == 1 and dependencies[0] in cached, log[-3000:]  # JRE and the locked dependencies
    if unchanged:
        assert set(runs) <= cached, {runs[s] for s in set(runs) - cached}
    print(f"[stack] docker build in a fresh clone: {seconds:.1f} s "
          f"({len(cached & set(steps))} of {len(steps)} steps cached)")


def test_the_docker_engine_does_not_die_with_the_test_run(stack: Stack) -> None:
    """The engine that ../shared/docker-stack/setup started (for this run or before it) is in a
    process group of its own, so Ctrl-C on `make test` or a killed run does not take it and every
    stack on the machine down (infra.compose_stack.ensure_engine)."""
    pid_file = SETUP_WORK / "dockerd.pid"
    if not pid_file.exists():
        pytest.skip(f"the engine was not started by ../shared/docker-stack/setup (no {pid_file})")
    pid = int(pid_file.read_text().strip())
    # Its process group is what a Ctrl-C or `kill -- -PGID` reaches (setup's nohup covers SIGHUP).
    assert os.getpgid(pid) != os.getpgid(0), pid


def test_ports_are_loopback_only_with_an_init_and_restart_policies(stack: Stack) -> None:
    for service in SERVICES:
        info = stack.container(service)
        host = info["HostConfig"]
        assert host["Init"] is True, f"{service} runs without an init"
        expected_policy = "no" if service == "storage-init" else "unless-stopped"
        assert host["RestartPolicy"]["Name"] == expected_policy, service
        for port, bindings in (info["NetworkSettings"]["Ports"] or {}).items():
            for binding in bindings or []:
                assert binding["HostIp"] == "127.0.0.1", f"{service} publishes {port} on {binding['HostIp']}"
    # `make ps` is `ps -a`: the one-shot storage-init shows, exited 0.
    listed = {c["Service"]: c for c in map(json.loads, stack.compose("ps", "-a", "--format", "json").stdout.splitlines())}
    assert listed["storage-init"]["State"] == "exited" and listed["storage-init"]["ExitCode"] == 0
    assert listed["trino"]["Health"] == "healthy", listed["trino"]
    published = {s: stack.address(s, p) for s, p in (("dagster-webserver", 3000), ("catalog", 8181))}
    assert all(a.startswith("127.0.0.1:") for a in published.values()), published


# What may start a run in the stack: the sensors (their names) and the automation conditions.
STARTERS = {"landing_events_sensor", "erasure_requests_sensor", "lakehouse_automation"}
EVERY_CHECK_PASSED = {
    # Write-audit-publish: each ingest's gate, on its run's audit branch, before main moves.
    ("lakehouse/shop/events", "events_batch_valid"): True,
    ("lakehouse/shop/events_hourly", "events_batch_valid"): True,
    ("lakehouse/shop/events_schema_evolution", "null_device_before_evolution"): True,
    ("lakehouse/shop/events_schema_evolution", "evolved_types"): True,
    ("lakehouse/shop/events_hourly", "partition_specs_by_cutover"): True,
    ("lakehouse/shop/gdpr_erasure", "erased_users_gone"): True,
    ("lakehouse/shop/gdpr_erasure", "landing_reconciles"): True,
}


@pytest.fixture(scope="module")
def pipeline(stack: Stack) -> list[RunResult]:
    """The pipeline as the stack runs it by itself: the test lands the events in MinIO's landing
    bucket, then the erasure requests, and watches the runs the daemon's sensors and automation
    start through GraphQL; it launches none."""
    for key in ("CATALOG_TOKEN_DAGSTER",):
        os.environ.setdefault(key, stack.env[key])  # the stack settings name them; only dates are read
    started = time.monotonic()
    flow = drive(f"http://{stack.address('dagster-webserver', 3000)}", landing_writer(stack), timeout_s=PLAN_TIMEOUT_S)
    print(f"[stack] the pipeline driven by its sensors and automation: {time.monotonic() - started:.1f} s "
          f"({', '.join(f'{name}: {s:.1f} s' for name, s in flow.seconds.items())}; {len(flow.results)} runs)")
    return flow.results


def last_materialization(results: list[RunResult], key: str) -> dict[str, Any]:
    """The metadata of the last materialization of ``key`` among the runs."""
    found = [r.materializations[key] for r in results if key in r.materializations]
    assert found, f"{key} was not materialized"
    return found[-1]


def ingested_days(results: list[RunResult]) -> list[str]:
    """The days the landing sensor's runs ingested (a day of hours counts once), in run order."""
    days = []
    for r in results:
        if r.label.startswith("landing_events_sensor:"):
            first, last = (d[:10] for d in r.label.split(" ")[-3::2])
            day = datetime.date.fromisoformat(first)
            while day <= datetime.date.fromisoformat(last):
                days.append(day.isoformat())
                day += datetime.timedelta(days=1)
    return days


# Assets that no sensor or automation condition starts in the stack: the table maintenance runs
# on its nightly schedule, the retention (off by default) when launched; the landing assets are
# the embedded demo's data generators, and in the stack the sources land the files instead.
NOT_AUTOMATED = {"lakehouse/shop/events_retention", "landing/events", "landing/erasure_requests"}


@pytest.fixture(scope="module")
def undisturbed(stack: Stack, pipeline: list[RunResult]) -> dict[str, dict[str, str | None]]:
    """Every warehouse table's row count and column checksums right after the undisturbed pipeline."""
    return column_checksums(stack)


def test_dagster_materializes_every_asset_and_every_check_passes(
        stack: Stack, pipeline: list[RunResult], undisturbed: dict[str, dict[str, str | None]]) -> None:
    assert [(r.label, r.status, r.errors) for r in pipeline if r.status != "SUCCESS"] == []
    client = DagsterClient(f"http://{stack.address('dagster-webserver', 3000)}")
    materialized = {key for r in pipeline for key in r.materializations}
    # Nothing launched a run: each was started by a sensor or by the automation conditions.
    assert all(r.label.split(":")[0] in STARTERS for r in pipeline), [r.label for r in pipeline]
    automated = {"/".join(k) for k in client.asset_keys()
                 if k[:3] != ["lakehouse", "shop", "maintenance"] and "/".join(k) not in NOT_AUTOMATED}
    assert materialized == automated
    assert {(c.asset, c.name): c.passed for r in pipeline for c in r.checks} == EVERY_CHECK_PASSED
    reconciliation = last_materialization(pipeline, "lakehouse/shop/trino_reconciliation")
    assert "skipped" not in reconciliation, reconciliation
    counts = reconciliation["counts"]
    counts = json.loads(counts) if isinstance(counts, str) else counts
    assert counts and all(c["trino"] == c["tablestore"] > 0 for c in counts.values()), counts
    # Every column of every reachable table profiled alike in both engines; no erased user left.
    assert int(reconciliation["columns_compared"]) >= 20, reconciliation
    erased = reconciliation["erased_users_left"]
    assert (json.loads(erased) if isinstance(erased, str) else erased) == {"events": 0, "customers": 0}


def test_one_long_lived_spark_application_serves_every_run_and_work_directories_outside_the_venv(
        stack: Stack, pipeline: list[RunResult]) -> None:
    with urllib.request.urlopen(f"http://{stack.address('spark-master', 8080)}/json/", timeout=30) as response:
        master = json.load(response)
    # Every run's Spark work went to the Spark Connect server's application, still running: no
    # run started an application of its own (each did, 30-50 s apiece, before the server).
    assert [a["name"] for a in master["activeapps"]] == ["lakehouse-spark-connect"]
    assert master["completedapps"] == []
    assert master["aliveworkers"] == 1 and master["cores"] == 2 and master["coresused"] == 2
    app = master["activeapps"][0]
    listing = subprocess.run(["docker", "exec", stack.container("spark-worker")["Id"], "sh", "-c",
                              "ls /var/lib/spark/work; ls -d /app/.venv/lib/python3.11/site-packages/pyspark/work"],
                             capture_output=True, text=True, timeout=60)
    assert app["id"] in listing.stdout.split(), (listing.stdout, listing.stderr)
    assert "No such file" in listing.stderr  # nothing inside the venv


def test_the_spark_worker_writes_the_ingest_files(stack: Stack, pipeline: list[RunResult]) -> None:
    # Each ingest's INSERT OVERWRITE records the hosts of the Spark tasks that wrote its files.
    worker = stack.container("spark-worker")["Config"]["Hostname"]
    ingests = [m for r in pipeline for key, m in r.materializations.items()
               if key in ("lakehouse/shop/events", "lakehouse/shop/events_hourly") and m.get("action") == "overwritten"]
    assert ingests and all(m["write_hosts"] == worker and int(m["write_tasks"]) >= 1 for m in ingests), ingests


def _snapshots(stack: Stack) -> dict[str, tuple[int | None, list[int]]]:
    tables = catalog_get(stack, "namespaces/shop/tables")["identifiers"]
    out = {}
    for ident in tables:
        metadata = catalog_get(stack, f"namespaces/shop/tables/{urllib.parse.quote(ident['name'])}")["metadata"]
        out[ident["name"]] = (metadata.get("current-snapshot-id"),
                              sorted(s["snapshot-id"] for s in metadata.get("snapshots") or []))
    return out


def test_catalog_killed_with_sigkill_comes_back_by_itself_with_every_snapshot(
        stack: Stack, pipeline: list[RunResult]) -> None:
    before = _snapshots(stack)
    assert {"events", "customers", "erasure_requests", "erasure_audit", "landing_events"} <= set(before)
    assert all(current is not None for current, _ in before.values())
    seconds = kill_and_wait(stack, "catalog")
    print(f"[stack] catalog killed with SIGKILL: healthy again in {seconds:.1f} s")
    assert _snapshots(stack) == before


def _schemas(stack: Stack) -> dict[str, list[str]]:
    """Each table's current column names, as the catalog serves them."""
    out = {}
    for ident in catalog_get(stack, "namespaces/shop/tables")["identifiers"]:
        metadata = catalog_get(stack, f"namespaces/shop/tables/{urllib.parse.quote(ident['name'])}")["metadata"]
        schema = next(s for s in metadata["schemas"] if s["schema-id"] == metadata["current-schema-id"])
        out[ident["name"]] = [f["name"] for f in schema["fields"]]
    return out


def test_java_rest_client_reads_every_table_through_the_catalog_with_the_trino_token(
        stack: Stack, pipeline: list[RunResult]) -> None:
    """Java Iceberg's RESTCatalog (Trino's connector's library) loads every table with Trino's
    token: its columns and current snapshot are the catalog's. Metadata tables (``.snapshots``)
    and rows are out of reach: they read files in MinIO, and the oracle has no S3 FileIO."""
    if not ORACLE.exists():
        pytest.fail(f"the Java reference implementation is not at {ORACLE}; check out ../shared beside the repository")
    snapshots, schemas = _snapshots(stack), _schemas(stack)
    names = sorted(snapshots)
    statements = ["SHOW TABLES IN rest.shop"]
    for name in names:
        statements += [f"SHOW TBLPROPERTIES rest.shop.{name} ('current-snapshot-id')", f"DESCRIBE TABLE rest.shop.{name}"]
    uri = stack.url("catalog", 8181)
    done = subprocess.run([str(ORACLE), "rest-sql", uri, "--token", stack.env["CATALOG_TOKEN_TRINO"],
                           "-e", "; ".join(statements)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(statements), done.stdout[-2000:]
    assert sorted(row[1] for row in results[0]["rows"]) == names
    for i, name in enumerate(names):
        current, described = results[1 + 2 * i]["rows"], results[2 + 2 * i]["rows"]
        assert current == [["current-snapshot-id", str(snapshots[name][0])]], name
        # Spark's DESCRIBE lists the columns, then (for a partitioned table) a "# Partition
        # Information" section, with or without a blank row before it.
        names_described = [row[0] for row in described]
        ends = [i for i, n in enumerate(names_described) if n == "" or n.startswith("#")]
        columns = names_described[:ends[0]] if ends else names_described
        assert columns == schemas[name], name
    # The token is what lets it in: the same request without it is refused.
    with pytest.raises(urllib.error.HTTPError) as refused:
        catalog_get(stack, "namespaces/shop/tables", token="not-a-token")
    assert refused.value.code == 401


# -- MinIO, least privilege, Dagster's deployment, restarts ---------------------------------------


def _s3(stack: Stack, user: str, password: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=stack.url("minio", 9000), aws_access_key_id=user,
                        aws_secret_access_key=password, region_name="us-east-1")


def _objects(stack: Stack) -> dict[str, str]:
    """Every object of the lakehouse bucket (key -> ETag), listed with the root key."""
    s3 = _s3(stack, stack.env["MINIO_ROOT_USER"], stack.env["MINIO_ROOT_PASSWORD"])
    out: dict[str, str] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="lakehouse"):
        out.update({o["Key"]: o["ETag"] for o in page.get("Contents", [])})
    return out


def _wait_healthy(stack: Stack, services: tuple[str, ...], timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    states: dict[str, Any] = {}
    while time.monotonic() < deadline:
        states = {s: stack.container(s)["State"].get("Health", {}).get("Status") for s in services}
        if set(states.values()) == {"healthy"}:
            return
        time.sleep(2)
    raise AssertionError(f"not healthy after {timeout_s:.0f} s: {states}")


def _runs(stack: Stack) -> dict[str, str]:
    """Every run Dagster's instance knows (run id -> status), through the webserver."""
    client = DagsterClient(f"http://{stack.address('dagster-webserver', 3000)}")
    answer = client.graphql("{ runsOrError(limit: 1000) { ... on Runs { results { runId status } } } }")
    return {r["runId"]: r["status"] for r in answer["runsOrError"]["results"]}


def _psql(stack: Stack, database: str, sql: str) -> str:
    done = subprocess.run(["docker", "exec", stack.container("postgres")["Id"], "psql", "-U", "lakehouse", "-d",
                           database, "-tAc", sql], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_minio_is_the_release_built_from_source_not_the_stand_in(stack: Stack) -> None:
    from infra.images.minio import MC_COMMIT, MINIO_COMMIT, RELEASE

    labels = stack.container("minio")["Config"]["Labels"]
    assert labels["org.opencontainers.image.title"] == "minio"  # the stand-in's is minio-standin-moto
    versions = subprocess.run(["docker", "exec", stack.container("minio")["Id"], "sh", "-c",
                               "minio --version | head -1; mc --version | head -1; curl --version | head -1"],
                              capture_output=True, text=True, timeout=60).stdout.splitlines()
    assert versions[0] == f"minio version {RELEASE} (commit-id={MINIO_COMMIT})"
    assert versions[1].endswith(f"(commit-id={MC_COMMIT})") and versions[2].startswith("curl ")


def test_only_storage_init_has_the_root_key_and_the_catalogs_user_has_the_bucket_alone(stack: Stack) -> None:
    import botocore.exceptions

    root_secret = stack.env["MINIO_ROOT_PASSWORD"]
    holders = {s for s in SERVICES if any(root_secret in e for e in stack.container(s)["Config"]["Env"] or [])}
    assert holders == {"minio", "storage-init"}
    catalog_secret = stack.env["MINIO_CATALOG_PASSWORD"]
    holders = {s for s in SERVICES if any(catalog_secret in e for e in stack.container(s)["Config"]["Env"] or [])}
    assert holders == {"storage-init", "catalog"}
    # The catalog's key: the warehouse bucket's objects, nothing else (no other bucket, no
    # listing of buckets, no bucket creation, no admin).
    s3 = _s3(stack, stack.env["MINIO_CATALOG_USER"], catalog_secret)
    s3.put_object(Bucket="lakehouse", Key="probe/least-privilege", Body=b"x")
    assert s3.get_object(Bucket="lakehouse", Key="probe/least-privilege")["Body"].read() == b"x"
    s3.delete_object(Bucket="lakehouse", Key="probe/least-privilege")
    # MinIO lists to a user only the buckets its policy reaches.
    _s3(stack, stack.env["MINIO_ROOT_USER"], stack.env["MINIO_ROOT_PASSWORD"]).create_bucket(Bucket="other")
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["lakehouse"]
    for call, kwargs in ((s3.create_bucket, {"Bucket": "not-the-catalogs"}),
                         (s3.put_object, {"Bucket": "other", "Key": "x", "Body": b"x"}),
                         (s3.list_objects_v2, {"Bucket": "other"}),
                         (s3.list_objects_v2, {"Bucket": "landing"})):
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            call(**kwargs)
        assert refused.value.response["Error"]["Code"] == "AccessDenied", call
    # The landing reader's key (the sensors'): only Dagster's code server has it; it lists and
    # reads the landing bucket and can do nothing else: no write there, no other bucket.
    landing_secret = stack.env["MINIO_LANDING_PASSWORD"]
    holders = {s for s in SERVICES if any(landing_secret in e for e in stack.container(s)["Config"]["Env"] or [])}
    assert holders == {"storage-init", "dagster-code"}
    root = _s3(stack, stack.env["MINIO_ROOT_USER"], stack.env["MINIO_ROOT_PASSWORD"])
    root.put_object(Bucket="landing", Key="probe/least-privilege", Body=b"y")
    reader = _s3(stack, stack.env["MINIO_LANDING_USER"], landing_secret)
    try:
        assert [o["Key"] for o in reader.list_objects_v2(Bucket="landing", Prefix="probe/")["Contents"]] == [
            "probe/least-privilege"]
        assert reader.get_object(Bucket="landing", Key="probe/least-privilege")["Body"].read() == b"y"
        assert [b["Name"] for b in reader.list_buckets()["Buckets"]] == ["landing"]
        for call, kwargs in ((reader.put_object, {"Bucket": "landing", "Key": "probe/x", "Body": b"x"}),
                             (reader.delete_object, {"Bucket": "landing", "Key": "probe/least-privilege"}),
                             (reader.list_objects_v2, {"Bucket": "lakehouse"}),
                             (reader.get_object, {"Bucket": "lakehouse", "Key": "probe/least-privilege"}),
                             (reader.create_bucket, {"Bucket": "not-the-readers"})):
            with pytest.raises(botocore.exceptions.ClientError) as refused:
                call(**kwargs)
            assert refused.value.response["Error"]["Code"] == "AccessDenied", call
    finally:
        root.delete_object(Bucket="landing", Key="probe/least-privilege")


def test_dagster_keeps_its_instance_in_postgres_and_loads_the_code_server(
        stack: Stack, pipeline: list[RunResult]) -> None:
    runs = _runs(stack)
    assert {r.run_id for r in pipeline} <= set(runs)
    # The runs are rows of the `dagster` database of the stack's PostgreSQL.
    stored = dict(line.split("|") for line in _psql(stack, "dagster", "SELECT run_id, status FROM runs").splitlines())
    assert stored == runs
    assert int(_psql(stack, "dagster", "SELECT count(*) FROM event_logs")) > 100
    # No SQLite storage anywhere on the shared volume.
    listing = subprocess.run(["docker", "exec", stack.container("dagster-webserver")["Id"], "sh", "-c",
                              "find /opt/dagster/home -name '*.db' | wc -l"], capture_output=True, text=True, timeout=60)
    assert listing.stdout.strip() == "0"
    # The code location the webserver serves comes from the code server's gRPC port.
    client = DagsterClient(f"http://{stack.address('dagster-webserver', 3000)}")
    answer = client.graphql("{ workspaceOrError { ... on Workspace { locationEntries { name "
                            "displayMetadata { key value } } } } }")
    (entry,) = answer["workspaceOrError"]["locationEntries"]
    metadata = {m["key"]: m["value"] for m in entry["displayMetadata"]}
    assert (entry["name"], metadata.get("host"), metadata.get("port")) == ("pipelines", "dagster-code", "4000")


def test_restarting_the_webserver_and_the_daemon_loses_no_run(stack: Stack, pipeline: list[RunResult]) -> None:
    before = _settled_runs(stack)
    assert {r.run_id for r in pipeline} <= set(before) and set(before.values()) == {"SUCCESS"}
    started, since = time.monotonic(), time.time()
    stack.compose("restart", "dagster-webserver", "dagster-daemon", timeout=300)
    _wait_healthy(stack, ("dagster-webserver",))
    # The daemon: a heartbeat of each of its daemons since the restart (what its healthcheck reads).
    wait_for_daemon(DagsterClient(f"http://{stack.address('dagster-webserver', 3000)}"), since)
    print(f"[stack] Dagster's webserver and daemon restarted and healthy in {time.monotonic() - started:.1f} s")
    assert _runs(stack) == before


def test_minio_restarted_or_killed_loses_no_object(stack: Stack, pipeline: list[RunResult]) -> None:
    objects, snapshots = _objects(stack), _snapshots(stack)
    assert len(objects) > 50
    started = time.monotonic()
    stack.compose("restart", "minio", timeout=300)
    _wait_healthy(stack, ("minio",))
    print(f"[stack] docker compose restart minio: healthy again in {time.monotonic() - started:.1f} s")
    assert _objects(stack) == objects
    assert _snapshots(stack) == snapshots
    seconds = kill_and_wait(stack, "minio")
    print(f"[stack] MinIO killed with SIGKILL: healthy again in {seconds:.1f} s")
    assert _objects(stack) == objects
    assert _snapshots(stack) == snapshots


def test_postgres_killed_with_sigkill_keeps_the_catalog_and_dagsters_history(
        stack: Stack, pipeline: list[RunResult]) -> None:
    runs = _settled_runs(stack)
    snapshots = _snapshots(stack)
    seconds = kill_and_wait(stack, "postgres")
    print(f"[stack] PostgreSQL killed with SIGKILL: healthy again in {seconds:.1f} s")
    # The catalog and Dagster reconnect by themselves (their pools drop the dead connections).
    deadline = time.monotonic() + 120
    while True:
        try:
            assert _snapshots(stack) == snapshots and _runs(stack) == runs
            break
        except (AssertionError, urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(2)


def test_materialize_an_asset_in_the_stacks_dagster_ui_with_headless_chromium(
        stack: Stack, pipeline: list[RunResult], tmp_path: Path) -> None:
    from tests.pipelines.dagster_ui import chromium, materialize_in_ui

    url = f"http://{stack.address('dagster-webserver', 3000)}"
    with chromium() as browser:
        run_id, status, page = materialize_in_ui(browser, url, "landing/erasure_requests", tmp_path / "run.png",
                                                 timeout_s=600)
    assert status == "Success", page[:2000]
    assert _runs(stack)[run_id] == "SUCCESS"
    assert _psql(stack, "dagster", f"SELECT status FROM runs WHERE run_id = '{run_id}'") == "SUCCESS"


def _settled_runs(stack: Stack, timeout_s: float = 600) -> dict[str, str]:
    """The runs once none is queued or in progress (another test may have launched one)."""
    deadline = time.monotonic() + timeout_s
    while True:
        runs = _runs(stack)
        if set(runs.values()) <= set(DONE) or time.monotonic() > deadline:
            return runs
        time.sleep(2)


def test_down_and_up_keep_every_table_object_and_run(stack: Stack, pipeline: list[RunResult]) -> None:
    runs = _settled_runs(stack)
    objects, snapshots = _objects(stack), _snapshots(stack)
    started = time.monotonic()
    stack.compose("down", timeout=600)  # `make down`: the volumes stay
    stack.compose("up", "-d", "--wait", "--wait-timeout", "600", timeout=900)
    print(f"[stack] make down, make up: {time.monotonic() - started:.1f} s")
    assert _objects(stack) == objects
    assert _snapshots(stack) == snapshots
    assert _runs(stack) == runs


def test_the_daemon_killed_mid_run_loses_no_run_the_code_server_finishes_it(
        stack: Stack, pipeline: list[RunResult]) -> None:
    _settled_runs(stack)
    client = DagsterClient(f"http://{stack.address('dagster-webserver', 3000)}")
    # The Trino reconciliation again (every table profiled by Trino and by Spark: most of a
    # minute). A leaf of the graph, so the automation conditions start nothing after it.
    run_id = client.launch_assets("reconciliation again", [["lakehouse", "shop", "trino_reconciliation"]])
    deadline = time.monotonic() + 300
    while (status := client.graphql(STATUS, {"id": run_id})["runOrError"]["status"]) != "STARTED":
        assert status not in DONE and time.monotonic() < deadline, status
        time.sleep(0.5)
    killed_at = time.time()
    seconds = kill_and_wait(stack, "dagster-daemon")
    print(f"[stack] dagster-daemon killed with SIGKILL mid-run: healthy again in {seconds:.1f} s")
    assert client.wait(run_id, time.monotonic() + 600) == "SUCCESS"
    run = client.graphql(STATUS, {"id": run_id})["runOrError"]
    assert run["endTime"] > killed_at  # the run was in progress when the daemon died
    assert _runs(stack)[run_id] == "SUCCESS"


# What the daemon does when it dequeues a run (``DagsterInstance.launch_run``): it records the run
# STARTING, then hands it to the code server. A daemon that dies between the two leaves this.
MARK_STARTING = """import sys
import dagster as dg
instance = dg.DagsterInstance.get()
run = instance.get_run_by_id(sys.argv[1])
instance.report_dagster_event(dg.DagsterEvent(event_type_value=dg.DagsterEventType.RUN_STARTING.value,
                                              job_name=run.job_name), run_id=run.run_id)
print(instance.get_run_by_id(run.run_id).status.value)
"""


def test_a_run_the_daemon_left_starting_is_failed_by_run_monitoring_and_run_again(
        stack: Stack, pipeline: list[RunResult]) -> None:
    """The state a daemon killed mid-launch leaves, made on purpose: the run marked STARTING and
    never handed to the code server. Run monitoring fails it after its start timeout, and run
    retries re-execute it as a new run, which succeeds (infra/dagster/dagster.yaml)."""
    _settled_runs(stack)
    client = DagsterClient(f"http://{stack.address('dagster-webserver', 3000)}")
    stack.compose("stop", "dagster-daemon", timeout=120)
    try:
        run_id = client.launch_assets("erasure requests", [["landing", "erasure_requests"]])
        assert client.graphql(STATUS, {"id": run_id})["runOrError"]["status"] == "QUEUED"
        marked = stack.compose("exec", "-T", "dagster-webserver", "python", "-c", MARK_STARTING, run_id, timeout=120)
        assert marked.stdout.strip().splitlines()[-1] == "STARTING", marked.stdout
    finally:
        stack.compose("start", "dagster-daemon", timeout=300)
    started = time.monotonic()
    assert client.wait(run_id, started + 600) == "FAILURE"
    failed_after = time.monotonic() - started
    # The test stack's start timeout (set through its environment, infra.compose_stack), not
    # the image's 90 s: the daemon took it from DAGSTER_RUN_START_TIMEOUT_SECONDS.
    assert f"taking longer than {RUN_START_TIMEOUT_S} seconds to start" in client.failure_of(run_id)
    retry = client.retry_of(run_id, time.monotonic() + 300)
    assert retry is not None
    assert client.wait(retry, time.monotonic() + 600) == "SUCCESS"
    run = client.graphql(TAGS, {"id": retry})["runOrError"]
    tags = {t["key"]: t["value"] for t in run["tags"]}
    assert (tags["dagster/parent_run_id"], tags["dagster/retry_number"]) == (run_id, "1")
    assert _runs(stack)[run_id] == "FAILURE"
    print(f"[stack] a run left STARTING: failed by run monitoring {failed_after:.1f} s after the daemon's start, "
          f"re-executed as {retry}, which succeeded")


def test_every_service_killed_while_the_plan_runs_and_every_table_reads_as_undisturbed(
        stack: Stack, pipeline: list[RunResult], undisturbed: dict[str, dict[str, str | None]]) -> None:
    """The pipeline again on the emptied lakehouse (its files landed again), while MinIO, the
    catalog, the Dagster daemon, PostgreSQL and the Spark Connect server are killed with SIGKILL one at a time, each at a
    point of the run's event log (``tests/infra/stack_faults.FAULTS``): each comes back by
    itself, the interrupted steps retry, the pipeline completes; nothing committed before a kill is
    lost, every column reads as after the undisturbed pipeline, and no snapshot of any table
    references a file missing from MinIO (docs/stack.md, Faults while the pipeline runs)."""
    assert undisturbed and all(int(t["rows"] or 0) > 0 for t in undisturbed.values()), undisturbed
    checked, missing = missing_files(stack)
    print(f"[stack] undisturbed: {checked} files referenced by the tables' snapshots, none missing")
    assert missing == [] and checked > 20, (checked, missing[:20])
    _settled_runs(stack)
    # The lakehouse emptied on this stack, as a new stack's is (the daemon stopped meanwhile, see
    # empty_lakehouse): no `down --volumes` and `up`, and `make down`/`make up` proves restart once.
    started = time.monotonic()
    steps = empty_lakehouse(stack)
    print(f"[stack] the lakehouse emptied through the catalog and Dagster's API: {time.monotonic() - started:.1f} s "
          f"({', '.join(f'{name} {s:.1f} s' for name, s in steps.items())})")
    assert [t["name"] for t in catalog_get(stack, "namespaces/shop/tables")["identifiers"]] == ["landing_events"]
    started = time.monotonic()
    results, records = run_with_faults(stack, FAULTS, timeout_s=PLAN_TIMEOUT_S)
    print(f"[stack] the pipeline with {len(records)} services killed: {time.monotonic() - started:.1f} s")
    assert [(r.label, r.status, r.errors) for r in results if r.status != "SUCCESS"] == []
    # The same runs materialized the same assets as undisturbed (the sensors' cursors, in
    # PostgreSQL, survived the daemon's and PostgreSQL's deaths: no file was ingested twice).
    # Each landed day was ingested once in each pass (how the landing sensor grouped the days
    # into runs depends on which files a tick saw, as the files were being uploaded).
    assert ingested_days(results) == ingested_days(pipeline) == sorted(ingested_days(pipeline))
    assert len(set(ingested_days(results))) == len(ingested_days(results)) == 4
    assert {k for r in results for k in r.materializations} == {k for r in pipeline for k in r.materializations}
    assert [r.fault.service for r in records] == [f.service for f in FAULTS]
    assert {(c.asset, c.name): c.passed for r in results for c in r.checks} == EVERY_CHECK_PASSED
    # Nothing committed before a kill was lost by it; every snapshot log only grew.
    assert {r.fault.service: (r.lost, r.log_rewritten) for r in records if r.lost or r.log_rewritten} == {}
    reconciliation = last_materialization(results, "lakehouse/shop/trino_reconciliation")
    assert "skipped" not in reconciliation, reconciliation
    faulted = column_checksums(stack)
    assert sorted(faulted) == sorted(undisturbed)
    assert differing_columns(undisturbed, faulted) == {}
    checked, missing = missing_files(stack)
    print(f"[stack] after the faults: {checked} files referenced by the tables' snapshots, none missing")
    assert missing == [] and checked > 20, (checked, missing[:20])
    for record in records:
        print(f"[stack] fault: {record.fault.service} at {record.fault.point}: the run {record.status_at_kill}, "
              f"back in {record.seconds_back:.1f} s")
    for result in results:
        for key, error in result.retries:
            print(f"[stack] retried in {result.label!r}: {key}: {error[:300]}")
        for run_id, error in result.failed_runs:
            print(f"[stack] run {run_id} of {result.label!r} failed and Dagster re-executed it: {error[:300]}")
