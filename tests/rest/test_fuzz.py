"""schemathesis against the service's OpenAPI document: no request, however malformed, gets a 5xx.

Bounded (a few examples per operation, a time budget) so it runs in the normal suite; the seed
makes a failure reproducible.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import requests

from tests.rest.conftest import WRITE_TOKEN, RestService

MAX_TIME_S = 60


def test_schemathesis_finds_no_server_error(rest_service: RestService, tmp_path: Path) -> None:
    # Some real objects, so that not every generated request stops at a 404.
    client = rest_service.client()
    try:
        if not client.namespace_exists("fuzz"):
            import pyarrow as pa

            client.create_namespace("fuzz")
            client.create_table("fuzz.t", pa.schema([pa.field("id", pa.int64())]))
    finally:
        client.close()
    schema = requests.get(f"{rest_service.uri}/openapi.json", timeout=30).json()
    assert sum(len(item) for item in schema["paths"].values()) == 31

    cli = Path(sys.executable).parent / "schemathesis"
    result = subprocess.run(
        [str(cli), "run", f"{rest_service.uri}/openapi.json", "--checks", "not_a_server_error",
         "--header", f"Authorization: Bearer {WRITE_TOKEN}", "--max-examples", "5",
         "--max-time", str(MAX_TIME_S), "--generation-database", "none", "--seed", "1", "--no-color",
         "--request-timeout", "30"],
        capture_output=True, text=True, timeout=MAX_TIME_S + 240, cwd=tmp_path,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert "passed" in output
    assert "unexpected error" not in rest_service.log()
