"""Tests against a user's running Docker Compose stack (``make up``; marker ``stack``; run by
``make e2e-stack``). Each skips, saying why, when its service does not answer on localhost.
(``test_docker_stack.py``, marker ``docker``, starts a stack of its own in ``make test``.)

- Trino reconciliation: every table the catalog lists in MinIO is read by Trino's Iceberg
  connector, at the catalog's current snapshot, with the row count the snapshot summary records.
  Skipped with "no Trino in this stack" when the stack runs without the compose profile ``trino``.
- Dagster: the events, then the erasure requests, land in MinIO's landing bucket, and the runs
  that the stack's sensors and automation start materialize every asset they reach, every asset
  check passing (``infra.stack_pipeline``).
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest

# Longer than the plan's own deadline, so that the deadline, not pytest-timeout (pyproject's
# default), ends a slow run, with a message that says which run was still going.
PLAN_TIMEOUT_S = 2400.0
pytestmark = [pytest.mark.stack, pytest.mark.timeout(int(PLAN_TIMEOUT_S) + 600)]

ROOT = Path(__file__).resolve().parents[2]
CATALOG_URL = os.environ.get("LAKEHOUSE_CATALOG_URL", "http://localhost:8181")
TRINO_HOST = os.environ.get("LAKEHOUSE_TRINO_HOST", "localhost")
TRINO_PORT = int(os.environ.get("LAKEHOUSE_TRINO_PORT", "8080"))
DAGSTER_URL = os.environ.get("LAKEHOUSE_DAGSTER_URL", "http://localhost:3000")
MINIO_ADDRESS = os.environ.get("LAKEHOUSE_MINIO_ADDRESS", "localhost:9000")


def _secrets() -> dict[str, str]:
    """The stack's .env (what `make up` used), overridden by the environment."""
    values: dict[str, str] = {}
    env_file = ROOT / ".env"
    if env_file.exists():
        for line in env_file.read_text().splitlines():
            if "=" in line and not line.startswith("#"):
                key, value = line.split("=", 1)
                values[key.strip()] = value.strip()
    values.update({k: v for k, v in os.environ.items() if k.startswith(("CATALOG_TOKEN_", "MINIO_", "COMPOSE_PROFILES"))})
    return values


def _answers(url: str, headers: dict[str, str] | None = None) -> str | None:
    """None when ``url`` answers 2xx, else why not."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5):
            return None
    except (urllib.error.URLError, OSError) as e:
        return f"{url} does not answer ({e}); start the stack with `make up`"


def _require(url: str, headers: dict[str, str] | None = None) -> None:
    why = _answers(url, headers)
    if why:
        pytest.skip(f"no stack is up: {why}")


def test_trino_reads_every_catalog_table_at_the_current_snapshot() -> None:
    token = _secrets().get("CATALOG_TOKEN_TRINO", "")
    _require(f"{CATALOG_URL}/v1/config", {"Authorization": f"Bearer {token}"})
    if "trino" not in {p.strip() for p in _secrets().get("COMPOSE_PROFILES", "").split(",")}:
        pytest.skip("no Trino in this stack: COMPOSE_PROFILES (in .env) does not include trino")
    _require(f"http://{TRINO_HOST}:{TRINO_PORT}/v1/info")
    import trino
    from pyiceberg.catalog.rest import RestCatalog

    catalog = RestCatalog("lakehouse", uri=CATALOG_URL, token=token)
    # The external landing table lies on the volume of the Dagster and Spark containers, which
    # Trino does not mount; every other table is in the warehouse in MinIO.
    tables = [t for ns in catalog.list_namespaces() for t in catalog.list_tables(ns)
              if catalog.load_table(t).location().startswith("s3://")]
    if not tables:
        pytest.skip("the stack has no tables yet; materialize the pipeline first (Dagster UI or the next test)")
    conn = trino.dbapi.connect(host=TRINO_HOST, port=TRINO_PORT, user="stack-tests", catalog="lakehouse")
    cur = conn.cursor()
    for identifier in tables:
        schema, name = ".".join(identifier[:-1]), identifier[-1]
        metadata = catalog.load_table(identifier).metadata
        snapshot = metadata.current_snapshot()
        expected = int(snapshot.summary["total-records"]) if snapshot and snapshot.summary else 0
        cur.execute(f'SELECT count(*) FROM "{schema}"."{name}"')
        assert cur.fetchall() == [[expected]], identifier
        if snapshot is not None:
            cur.execute(f'SELECT snapshot_id FROM "{schema}"."{name}$snapshots" ORDER BY committed_at DESC LIMIT 1')
            assert cur.fetchall() == [[snapshot.snapshot_id]], identifier


def test_dagster_sensors_and_automation_materialize_every_asset_and_every_check_passes() -> None:
    _require(f"{DAGSTER_URL}/server_info")
    from infra.dagster_client import DagsterClient
    from infra.landing_feed import LandingBucketWriter
    from infra.stack_pipeline import ERASED, INGESTED, drive

    keys = {"/".join(k) for k in DagsterClient(DAGSTER_URL).asset_keys()}
    assert keys, "the pipelines code location defines no assets"
    secrets = _secrets()
    for key, value in secrets.items():  # the stack's pipeline settings name them
        os.environ.setdefault(key, value)
    # The test lands the files, as the sources would, and launches no run.
    writer = LandingBucketWriter(MINIO_ADDRESS, secrets["MINIO_ROOT_USER"], secrets["MINIO_ROOT_PASSWORD"])
    results = drive(DAGSTER_URL, writer, ROOT / ".env", timeout_s=PLAN_TIMEOUT_S).results
    assert [(r.label, r.status, r.errors) for r in results if r.status != "SUCCESS"] == []
    assert {k for r in results for k in r.materializations} >= {*INGESTED, *ERASED}
    checks = {(c.asset, c.name): c.passed for r in results for c in r.checks}
    assert len(checks) == 7 and [name for name, passed in checks.items() if not passed] == []
