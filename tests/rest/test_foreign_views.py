"""Views written by another engine read in tablestore: Spark, through Java Iceberg's REST client,
creates views whose SQL names Spark's catalog (``rest.jv.t``) and whose default catalog is
Spark's (``spark_catalog``); tablestore resolves those names in the catalog the
view lives in. A view with SQL only in a dialect tablestore does not run is refused, naming it.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tablestore.config import parse_config
from tablestore.errors import UnsupportedError
from tablestore.sql.session import SqlSession
from tests.oracle import ORACLE_DIR, _ensure_built
from tests.rest.conftest import CATALOG, WRITE_TOKEN, RestService

# In Java's catalog (registered in Spark as `rest`): a table, a view naming it fully from
# Spark's session catalog, and one naming it unqualified after USE rest.jv.
JAVA_STATEMENTS = [
    "CREATE NAMESPACE rest.jv",
    "CREATE TABLE rest.jv.t (id BIGINT, name STRING) USING iceberg",
    "INSERT INTO rest.jv.t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    "CREATE VIEW rest.jv.v AS SELECT id, upper(name) AS name FROM rest.jv.t WHERE id > 1",
    "SELECT * FROM rest.jv.v ORDER BY id",
    "USE rest.jv",
    "CREATE VIEW v2 AS SELECT count(*) AS n FROM t",
    "SELECT * FROM rest.jv.v2",
]


@pytest.fixture(scope="module")
def service(catalog_service: RestService) -> RestService:
    # Local warehouse only: the oracle's Java build has no S3 FileIO. One backend: the view
    # resolution under test is the client's, the same over either database. The session's
    # service, emptied after the module.
    return catalog_service


@pytest.fixture(scope="module")
def java_results(service: RestService) -> list[dict[str, Any]]:
    _ensure_built()  # fails naming what is missing if ../shared/iceberg-oracle is not there
    done = subprocess.run(
        [str(ORACLE_DIR / "oracle"), "rest-sql", service.uri, "--token", WRITE_TOKEN, "--warehouse", CATALOG,
         "-e", "; ".join(JAVA_STATEMENTS)],
        capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def session(service: RestService, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlSession]:
    path = tmp_path_factory.mktemp("client") / "tablestore.yaml"
    text = textwrap.dedent(f"""
        default-catalog: lake
        catalogs:
          - name: lake
            type: rest
            uri: {service.uri}
            token: {WRITE_TOKEN}
    """)
    path.write_text(text)
    s = SqlSession(parse_config(text, source=str(path)))
    try:
        yield s
    finally:
        s.manager.close()


def _view_version(service: RestService, name: str) -> dict[str, Any]:
    body = requests.get(f"{service.uri}/v1/{CATALOG}/namespaces/jv/views/{name}",
                        headers={"Authorization": f"Bearer {WRITE_TOKEN}"}, timeout=30).json()
    metadata = body["metadata"]
    return next(v for v in metadata["versions"] if v["version-id"] == metadata["current-version-id"])


def test_spark_views_through_the_java_client_read_in_tablestore(
    service: RestService, java_results: list[dict[str, Any]], session: SqlSession
) -> None:
    java_rows = java_results[-2]["rows"]
    assert java_rows == [[2, "B"], [3, "C"]]
    assert java_results[-1]["rows"] == [[3]]

    # What Spark wrote: its own catalog names, unknown to tablestore.
    full = _view_version(service, "v")
    assert full["default-catalog"] == "spark_catalog"
    assert full["representations"][0]["dialect"] == "spark"
    assert "rest.jv.t" in full["representations"][0]["sql"]
    short = _view_version(service, "v2")
    # Java leaves the default catalog out when it is the view's own (`rest`): the namespace is
    # then all there is, and unqualified names resolve in it.
    assert (short.get("default-catalog"), short["default-namespace"]) == (None, ["jv"])

    assert session.execute("SELECT * FROM lake.jv.v ORDER BY id")[-1].rows == java_rows
    assert session.execute("SELECT * FROM lake.jv.v2")[-1].rows == [[3]]
    # A tablestore view over the foreign view: names resolve through both levels.
    session.execute("USE lake.jv; CREATE VIEW over AS SELECT max(id) AS top FROM v")
    assert session.execute("SELECT * FROM lake.jv.over")[-1].rows == [[3]]


def test_a_view_in_a_dialect_tablestore_does_not_run_is_refused_naming_it(
    service: RestService, java_results: list[dict[str, Any]], session: SqlSession
) -> None:
    assert java_results  # the namespace and table exist
    schema: dict[str, Any] = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "n", "type": "long", "required": False}]}
    created = requests.post(
        f"{service.uri}/v1/{CATALOG}/namespaces/jv/views", headers={"Authorization": f"Bearer {WRITE_TOKEN}"},
        json={"name": "trino_only", "schema": schema, "view-version": {
            "version-id": 1, "timestamp-ms": 1, "schema-id": 0, "summary": {"engine-name": "trino"},
            "default-namespace": ["jv"], "default-catalog": "iceberg",
            "representations": [{"type": "sql", "sql": "SELECT count(*) AS n FROM t", "dialect": "trino"}]}},
        timeout=30,
    )
    assert created.status_code == 200, created.text
    with pytest.raises(UnsupportedError) as refused:
        session.execute("SELECT * FROM lake.jv.trino_only")
    message = str(refused.value)
    assert "'trino'" in message and "lake.jv.trino_only" in message and "'spark' dialect" in message

