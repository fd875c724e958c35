"""Tests against the running Docker Compose stack (``make up``; marker ``stack``; run by
``make e2e-stack``). Each skips, saying why, when its service does not answer on localhost.

- Trino reconciliation: every table the catalog lists in MinIO is read by Trino's Iceberg
  connector, at the catalog's current snapshot, with the row count the snapshot summary records.
- Dagster: the GraphQL API materializes every asset of the ``pipelines`` code location.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.stack

ROOT = Path(__file__).resolve().parents[2]
CATALOG_URL = os.environ.get("LAKEHOUSE_CATALOG_URL", "http://localhost:8181")
TRINO_HOST = os.environ.get("LAKEHOUSE_TRINO_HOST", "localhost")
TRINO_PORT = int(os.environ.get("LAKEHOUSE_TRINO_PORT", "8080"))
DAGSTER_URL = os.environ.get("LAKEHOUSE_DAGSTER_URL", "http://localhost:3000")


def _secrets() -> dict[str, str]:
    """The stack's .env (what `make up` used), overridden by the environment."""
    values: dict[str, str] = {}
    env_file = ROOT / ".env"
    if env_file.exists():
        for line in env_file.read_text().splitlines():
            if "=" in line and not line.startswith("#"):
                key, value = line.split("=", 1)
                values[key.strip()] = value.strip()
    values.update({k: v for k, v in os.environ.items() if k.startswith(("CATALOG_TOKEN_", "MINIO_"))})
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


def _graphql(query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(f"{DAGSTER_URL}/graphql", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        answer: dict[str, Any] = json.load(r)
    assert "errors" not in answer, answer["errors"]
    data: dict[str, Any] = answer["data"]
    return data


def test_trino_reads_every_catalog_table_at_the_current_snapshot() -> None:
    token = _secrets().get("CATALOG_TOKEN_TRINO", "")
    _require(f"{CATALOG_URL}/v1/config", {"Authorization": f"Bearer {token}"})
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


def test_dagster_graphql_materializes_every_asset() -> None:
    _require(f"{DAGSTER_URL}/server_info")
    nodes = _graphql("{ assetNodes { assetKey { path } } }")["assetNodes"]
    keys = [n["assetKey"] for n in nodes]
    assert keys, "the pipelines code location defines no assets"
    # Day and hour partitioned assets beside unpartitioned ones: one asset backfill of every
    # partition of every asset, run by the daemon (a single run cannot span partitions).
    started_ms = time.time() * 1000
    launched = _graphql(
        """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
             __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }""",
        {"params": {"assetSelection": keys, "allPartitions": True}},
    )["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    backfill_id = launched["backfillId"]
    deadline = time.monotonic() + 3600
    status = ""
    while time.monotonic() < deadline:
        status = _graphql("query($id: String!) { partitionBackfillOrError(backfillId: $id) { "
                          "... on PartitionBackfill { status } } }", {"id": backfill_id})["partitionBackfillOrError"]["status"]
        if status in ("COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"):
            break
        time.sleep(10)
    assert status in ("COMPLETED", "COMPLETED_SUCCESS"), (
        f"backfill {backfill_id} ended {status}; see {DAGSTER_URL}/overview/backfills/{backfill_id}")
    for key in keys:
        latest = _graphql(
            "query($k: AssetKeyInput!) { assetOrError(assetKey: $k) { ... on Asset { "
            "assetMaterializations(limit: 1) { timestamp } } } }", {"k": key})["assetOrError"]
        assert latest["assetMaterializations"], f"{key} was never materialized"
        assert float(latest["assetMaterializations"][0]["timestamp"]) >= started_ms, key
