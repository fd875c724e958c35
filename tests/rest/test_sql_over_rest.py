"""`tablestore sql` on a `type: rest` catalog: DDL, tables and functions go through the service."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tablestore.catalog.sql_catalog import SqlCatalog
from tests.rest.conftest import CATALOG, WRITE_TOKEN, RestService


def test_sql_ddl_and_functions_on_a_rest_catalog(rest_service: RestService, tmp_path: Path) -> None:
    config = tmp_path / "client.yaml"
    config.write_text(f"""
catalogs:
  - name: lake
    type: rest
    uri: {rest_service.uri}
    token: {WRITE_TOKEN}
""")
    statements = ("CREATE DATABASE sqlrest; CREATE TABLE sqlrest.t (id BIGINT, name STRING) PARTITIONED BY (name); "
                  "SHOW TABLES IN sqlrest; CREATE FUNCTION sqlrest.f AS 'math.sqrt' RETURNS double; SHOW FUNCTIONS IN sqlrest; "
                  "DROP FUNCTION sqlrest.f; SHOW FUNCTIONS IN sqlrest")
    result = subprocess.run([sys.executable, "-m", "tablestore.cli", "sql", "--config", str(config), "--format", "json",
                             "-e", statements], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    outputs = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert outputs[2]["rows"] == [["sqlrest", "t", False]]
    assert outputs[4]["rows"] == [["lake.sqlrest.f"]]
    assert outputs[6]["rows"] == []

    direct = SqlCatalog(CATALOG, **rest_service.direct_properties())
    try:
        table = direct.load_table("sqlrest.t")
        assert [f.name for f in table.schema().fields] == ["id", "name"]
        assert [f.name for f in table.metadata.spec().fields] == ["name"]
    finally:
        direct.close()
