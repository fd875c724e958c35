"""Java's REST catalog client (``oracle rest-sql``: the library inside Trino's Iceberg connector)
against the service, where it found defects: REPLACE TABLE with fewer columns, and logging in
with client credentials."""

from __future__ import annotations

import json
import subprocess

import pytest

from tablestore.catalog.sql_catalog import SqlCatalog
from tests.oracle import ORACLE_DIR, _ensure_built
from tests.rest.conftest import CATALOG, CLIENT_ID, CLIENT_SECRET, RestService


@pytest.fixture
def local_service(catalog_service: RestService) -> RestService:
    """The session's catalog service (the default configuration), emptied after the module."""
    return catalog_service


@pytest.mark.oracle
def test_java_replaces_a_table_with_fewer_columns_logged_in_with_client_credentials(
    local_service: RestService,
) -> None:
    """``CREATE OR REPLACE TABLE ... AS SELECT`` with one column of two got 400 "invalid last
    column id 1 < 2": Java sends the new schema's highest id as AddSchema's last-column-id."""
    _ensure_built()
    statements = [
        "CREATE NAMESPACE rest.j",
        "CREATE TABLE rest.j.t (id BIGINT, name STRING) USING iceberg",
        "INSERT INTO rest.j.t VALUES (1, 'a'), (2, 'b')",
        "CREATE OR REPLACE TABLE rest.j.t USING iceberg AS SELECT id * 10 AS id FROM rest.j.t",
        "SELECT * FROM rest.j.t ORDER BY id",
        "REPLACE TABLE rest.j.t (id BIGINT, added STRING) USING iceberg",
        "INSERT INTO rest.j.t VALUES (3, 'c')",
        "SELECT * FROM rest.j.t ORDER BY id",
    ]
    done = subprocess.run(
        [str(ORACLE_DIR / "oracle"), "rest-sql", local_service.uri, "--credential", f"{CLIENT_ID}:{CLIENT_SECRET}",
         "--warehouse", CATALOG, "-e", "; ".join(statements)],
        capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line)["rows"] for line in done.stdout.splitlines() if line.startswith("{")]
    # The two SELECTs' rows are the last results (statements without rows may print none).
    assert results[-2:] == [[[10], [20]], [[3, "c"]]], done.stdout[-2000:]
    direct = SqlCatalog(CATALOG, **local_service.direct_properties())
    try:
        metadata = direct.load_table("j.t").metadata
        # The column ids only grew: id 1 kept, name's id 2 never reused, added got 3.
        assert [(f.field_id, f.name) for f in metadata.schema().fields] == [(1, "id"), (3, "added")]
        assert metadata.last_column_id == 3
    finally:
        direct.close()
