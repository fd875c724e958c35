"""The Docker Compose stack for real, on this machine's Docker engine (marker ``docker``, in
``make test``).

``../shared/docker-stack/setup`` installs and starts the engine when none answers, and builds
local stand-ins for the images that cannot be pulled here (its README says how they differ).
Trino has no stand-in: the stack runs without its compose profile, and the Trino
reconciliation must say "no Trino in this stack". Under a project name of its own, with fresh
secrets and engine-chosen loopback ports, the module:

- builds the image and brings every other service up (``docker compose up --build --wait``),
  and checks what ``docker inspect`` reports: loopback-only ports, an init, restart policies;
- runs the pipeline's plan through Dagster's GraphQL API: every asset materialized, every
  asset check passed, one Spark application per run;
- kills the catalog container's process with SIGKILL and sees it come back healthy by itself
  with every committed snapshot;
- reads every table through the stack's catalog with the Trino token using Java Iceberg's REST
  client (``../shared/iceberg-oracle``, the library of Trino's Iceberg connector): table list,
  schemas and snapshots. Rows are not read: the oracle has no S3 FileIO and the warehouse is
  in MinIO;
- and ``docker compose down -v`` at the end, whatever happened.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from infra.dagster_client import DagsterClient, RunResult, run_plan, stack_plan

# The whole module: image build and start (~3 min with a warm cache), the pipeline, the crash.
pytestmark = [pytest.mark.docker, pytest.mark.timeout(2400)]

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
SETUP = SHARED / "docker-stack" / "setup"
ORACLE = SHARED / "iceberg-oracle" / "oracle"
COMPOSE_FILE = ROOT / "docker-compose.yml"
SERVICES = ("minio", "storage-init", "postgres", "catalog", "spark-master", "spark-worker",
            "dagster-webserver", "dagster-daemon")
IMAGE = "lakehouse/tablestore:0.1.0"
IMAGE_LIMIT_BYTES = 2_500_000_000
PLAN_TIMEOUT_S = 1500.0
ENGINE_HINT = ("check out ../shared beside the repository: ../shared/docker-stack/setup installs and starts "
               "the Docker engine and builds the stand-ins of the base images")


def _engine_answers() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return False


def ensure_engine() -> None:
    """A Docker engine that answers: ../shared/docker-stack/setup starts one (never a skip)."""
    if _engine_answers():
        return
    if not SETUP.exists():
        pytest.fail(f"no Docker engine answers and {SETUP} does not exist; {ENGINE_HINT}")
    done = subprocess.run([str(SETUP)], capture_output=True, text=True, timeout=1200)
    if done.returncode != 0 or not _engine_answers():
        pytest.fail(f"{SETUP} did not start a Docker engine (exit {done.returncode}): {done.stderr[-2000:]}")


@dataclass
class Stack:
    project: str
    env: dict[str, str]  # the secrets and settings of this stack (never printed)
    command: list[str]

    def compose(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        # The process environment may carry a user's COMPOSE_PROFILES or *_PORT: ours win.
        environ = {**os.environ, **self.env}
        done = subprocess.run([*self.command, *args], capture_output=True, text=True, timeout=timeout,
                              env=environ, cwd=ROOT)
        if check and done.returncode != 0:
            raise AssertionError(f"docker compose {' '.join(args)} failed: {done.stderr[-3000:]}")
        return done

    def address(self, service: str, port: int) -> str:
        """host:port that ``service``'s ``port`` is published on."""
        return self.compose("port", service, str(port)).stdout.strip()

    def container(self, service: str) -> dict[str, Any]:
        container_id = self.compose("ps", "-a", "-q", service).stdout.strip()
        inspected = subprocess.run(["docker", "inspect", container_id], capture_output=True, text=True, check=True)
        info: dict[str, Any] = json.loads(inspected.stdout)[0]
        return info

    def catalog_get(self, path: str, token: str | None = None) -> dict[str, Any]:
        request = urllib.request.Request(
            f"http://{self.address('catalog', 8181)}/v1/metastore/{path}",
            headers={"Authorization": f"Bearer {token or self.env['CATALOG_TOKEN_TRINO']}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: dict[str, Any] = json.load(response)
        return answer


def _env_file(path: Path, project: str) -> dict[str, str]:
    values = {
        "MINIO_ROOT_USER": "lakehouse",
        "MINIO_ROOT_PASSWORD": secrets.token_hex(16),
        "POSTGRES_PASSWORD": secrets.token_hex(16),
        "CATALOG_TOKEN_TRINO": secrets.token_hex(16),
        "CATALOG_TOKEN_SPARK": secrets.token_hex(16),
        "CATALOG_TOKEN_DAGSTER": secrets.token_hex(16),
        "CATALOG_TOKEN_SECRET": secrets.token_hex(24),
        "COMPOSE_PROJECT_NAME": project,
        "COMPOSE_PROFILES": "",  # no Trino: it has no stand-in here
        "LAKEHOUSE_BIND": "127.0.0.1",
        # Empty host ports: the engine picks free ones, so a user's stack on 3000, 8181... is untouched.
        **{name: "" for name in ("MINIO_PORT", "MINIO_CONSOLE_PORT", "POSTGRES_PORT", "CATALOG_PORT",
                                 "SPARK_MASTER_UI_PORT", "SPARK_WORKER_UI_PORT", "DAGSTER_PORT", "TRINO_PORT")},
    }
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    path.chmod(0o600)
    return values


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    ensure_engine()
    project = f"tablestore-test-{uuid.uuid4().hex[:8]}"
    env_path = tmp_path_factory.mktemp("stack") / ".env"
    env = _env_file(env_path, project)
    stack = Stack(project, env, ["docker", "compose", "--project-directory", str(ROOT), "-f", str(COMPOSE_FILE),
                                 "--env-file", str(env_path), "-p", project])
    try:
        up = stack.compose("up", "--build", "--wait", "--wait-timeout", "600", timeout=1500, check=False)
        if up.returncode != 0:
            logs = stack.compose("logs", "--tail=40", timeout=120, check=False).stdout
            pytest.fail(f"docker compose up --build --wait failed: {up.stderr[-3000:]}\n{logs[-6000:]}")
        yield stack
    finally:
        stack.compose("down", "-v", "--remove-orphans", timeout=600, check=False)


def test_image_builds_on_the_slim_base_small_and_without_the_uv_cache(stack: Stack) -> None:
    size = int(subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", IMAGE], capture_output=True,
                              text=True, check=True).stdout)
    assert size <= IMAGE_LIMIT_BYTES, f"{IMAGE} is {size / 1e9:.2f} GB"
    probe = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", IMAGE, "sh", "-c",
         'test ! -e /root/.cache/uv && "$JAVA_HOME/bin/java" -version 2>&1 | head -1 && echo "$SPARK_WORKER_DIR"'],
        capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    java, work_dir = probe.stdout.strip().splitlines()
    assert java.startswith('openjdk version "17.') and work_dir == "/var/lib/spark/work"


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
    assert "trino" not in listed
    published = {s: stack.address(s, p) for s, p in (("dagster-webserver", 3000), ("catalog", 8181))}
    assert all(a.startswith("127.0.0.1:") for a in published.values()), published


@pytest.fixture(scope="module")
def pipeline(stack: Stack) -> list[RunResult]:
    for key in ("MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD", "CATALOG_TOKEN_DAGSTER"):
        os.environ.setdefault(key, stack.env[key])  # the stack settings name them; only dates are read
    return run_plan(f"http://{stack.address('dagster-webserver', 3000)}", stack_plan(), timeout_s=PLAN_TIMEOUT_S)


def test_dagster_materializes_every_asset_and_every_check_passes(stack: Stack, pipeline: list[RunResult]) -> None:
    assert [(r.label, r.status, r.errors) for r in pipeline if r.status != "SUCCESS"] == []
    client = DagsterClient(f"http://{stack.address('dagster-webserver', 3000)}")
    materialized = {key for r in pipeline for key in r.materializations}
    assert materialized == {"/".join(k) for k in client.asset_keys()}
    checks = {(c.asset, c.name): c.passed for r in pipeline for c in r.checks}
    assert checks == {
        ("lakehouse/shop/events_schema_evolution", "null_device_before_evolution"): True,
        ("lakehouse/shop/events_schema_evolution", "evolved_types"): True,
        ("lakehouse/shop/events_hourly", "partition_specs_by_cutover"): True,
        ("lakehouse/shop/gdpr_erasure", "erased_users_gone"): True,
        ("lakehouse/shop/gdpr_erasure", "landing_reconciles"): True,
    }
    reconciliation = pipeline[-1].materializations["lakehouse/shop/trino_reconciliation"]
    assert str(reconciliation["skipped"]).startswith("no Trino in this stack"), reconciliation


def test_one_spark_application_per_run_and_work_directories_outside_the_venv(
        stack: Stack, pipeline: list[RunResult]) -> None:
    with urllib.request.urlopen(f"http://{stack.address('spark-master', 8080)}/json/", timeout=30) as response:
        master = json.load(response)
    apps = master["completedapps"] + master["activeapps"]
    # Every run but the landing, the schema evolution, the rollover and the reconciliation uses
    # Spark; each of those has at most one application (the multiprocess executor had one per step).
    assert {a["name"] for a in apps} == {"lakehouse-pipelines"}
    assert 0 < len(apps) <= len(pipeline)
    assert master["aliveworkers"] == 1 and master["cores"] == 2
    listing = subprocess.run(["docker", "exec", stack.container("spark-worker")["Id"], "sh", "-c",
                              "ls /var/lib/spark/work; ls -d /app/.venv/lib/python3.11/site-packages/pyspark/work"],
                             capture_output=True, text=True, timeout=60)
    work = listing.stdout.split()
    assert {a["id"] for a in apps} <= set(work), (work, listing.stderr)
    assert "No such file" in listing.stderr  # nothing inside the venv


def _snapshots(stack: Stack) -> dict[str, tuple[int | None, list[int]]]:
    tables = stack.catalog_get("namespaces/shop/tables")["identifiers"]
    out = {}
    for ident in tables:
        metadata = stack.catalog_get(f"namespaces/shop/tables/{urllib.parse.quote(ident['name'])}")["metadata"]
        out[ident["name"]] = (metadata.get("current-snapshot-id"),
                              sorted(s["snapshot-id"] for s in metadata.get("snapshots") or []))
    return out


def test_catalog_killed_with_sigkill_comes_back_by_itself_with_every_snapshot(
        stack: Stack, pipeline: list[RunResult]) -> None:
    before = _snapshots(stack)
    assert {"events", "customers", "erasure_requests", "erasure_audit", "landing_events"} <= set(before)
    assert all(current is not None for current, _ in before.values())
    info = stack.container("catalog")
    restarts = info["RestartCount"]
    os.kill(info["State"]["Pid"], signal.SIGKILL)  # the container's init: the container dies, as in a crash
    deadline = time.monotonic() + 180
    state: dict[str, Any] = {}
    while time.monotonic() < deadline:
        info = stack.container("catalog")
        state = info["State"]
        if info["RestartCount"] > restarts and state.get("Health", {}).get("Status") == "healthy":
            break
        time.sleep(2)
    assert info["RestartCount"] == restarts + 1, state
    assert state["Health"]["Status"] == "healthy", state
    assert _snapshots(stack) == before


def test_java_rest_client_reads_every_table_through_the_catalog_with_the_trino_token(
        stack: Stack, pipeline: list[RunResult]) -> None:
    if not ORACLE.exists():
        pytest.fail(f"the Java reference implementation is not at {ORACLE}; check out ../shared beside the repository")
    expected = _snapshots(stack)
    names = sorted(expected)
    statements = ["SHOW TABLES IN rest.shop"] + [
        f"SELECT snapshot_id FROM rest.shop.{name}.snapshots ORDER BY snapshot_id" for name in names]
    uri = f"http://{stack.address('catalog', 8181)}"
    done = subprocess.run([str(ORACLE), "rest-sql", uri, "--token", stack.env["CATALOG_TOKEN_TRINO"],
                           "-e", "; ".join(statements)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(statements), done.stdout[-2000:]
    listed = sorted(row[1] for row in results[0]["rows"])
    assert listed == names
    for name, result in zip(names, results[1:], strict=True):
        assert [int(row[0]) for row in result["rows"]] == expected[name][1], name
    refused = subprocess.run([str(ORACLE), "rest-sql", uri, "--token", "not-a-token", "-e", "SHOW TABLES IN rest.shop"],
                             capture_output=True, text=True, timeout=900)
    assert refused.returncode != 0
