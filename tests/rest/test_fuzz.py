"""schemathesis against the service's OpenAPI document: no request, however malformed, gets a 5xx.

Bounded (a few examples per operation, a time budget) so it runs in the normal suite; the seed
makes a failure reproducible. The scan planning operations get the name of a real partitioned
table with a few snapshots (a ``schemathesis.toml`` pins their path parameters), so their
generated bodies (filters, selections, snapshot ids, plan tasks) reach the planner rather than a 404.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import requests

from tests.rest.conftest import ON_BOTH_DATABASES, WRITE_TOKEN, RestService

pytestmark = ON_BOTH_DATABASES  # it found PostgreSQL refusing a NUL that SQLite stored (f0d53ef)

# Per backend: the run is time-bound (40 operations, at most 5 examples each); the two backends
# share the generation seed, so the second budget mostly re-checks the SQL store, not the routes.
MAX_TIME_S = 35
PLANNING = ("/plan", "/tasks")
# The table the planning operations are pinned to, by path parameter.
SCHEMATHESIS_TOML = """
[[operations]]
include-path-regex = "/(plan|tasks)"
parameters = { "path.namespace" = "fuzz", "path.table" = "t" }
"""


def test_schemathesis_finds_no_server_error(rest_service: RestService, tmp_path: Path) -> None:
    # Some real objects, so that not every generated request stops at a 404.
    client = rest_service.client()
    try:
        if not client.namespace_exists("fuzz"):
            import pyarrow as pa

            client.create_namespace("fuzz")
            table = client.create_table("fuzz.t", pa.schema([pa.field("id", pa.int64()), pa.field("s", pa.string())]),
                                        partition_by=["s"])
            table.append(pa.table({"id": [1, 2, 3], "s": ["a", "b", "a"]}))
            table.append(pa.table({"id": [4], "s": ["c"]}))
    finally:
        client.close()
    schema = requests.get(f"{rest_service.uri}/openapi.json", timeout=30).json()
    operations = {f"{method.upper()} {path}" for path, item in schema["paths"].items() for method in item}
    # The Iceberg REST operations we serve, plus the grants administration and changelog planning
    # (tablestore extensions).
    assert len(operations) == 41
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan-changelog" in operations
    assert {"GET /v1/admin/grants", "POST /v1/admin/grants", "DELETE /v1/admin/grants"} <= operations
    assert "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials" in operations
    # Remote signing and token revocation are fuzzed as every other operation is.
    assert {"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign", "POST /v1/oauth/revoke"} <= operations
    planning = sorted(o for o in operations if o.endswith(PLANNING) or "/plan/" in o)
    assert planning == [
        "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
        "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
    ]
    (tmp_path / "schemathesis.toml").write_text(SCHEMATHESIS_TOML)

    cli = Path(sys.executable).parent / "schemathesis"
    result = subprocess.run(
        [str(cli), "run", f"{rest_service.uri}/openapi.json", "--checks", "not_a_server_error",
         "--header", f"Authorization: Bearer {WRITE_TOKEN}", "--max-examples", "5",
         "--max-time", str(MAX_TIME_S), "--generation-database", "none", "--seed", "1", "--no-color",
         "--request-timeout", "30", "--report", "junit", "--report-dir", str(tmp_path / "report")],
        capture_output=True, text=True, timeout=MAX_TIME_S + 240, cwd=tmp_path,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert "passed" in output
    # Every planning operation was exercised: the JUnit report has a test case per operation tested.
    [report] = (tmp_path / "report").glob("*.xml")
    tested = {case.get("name") for case in ElementTree.parse(report).iter("testcase")}
    assert set(planning) <= tested, sorted(str(t) for t in tested)
    assert "unexpected error" not in rest_service.log()
