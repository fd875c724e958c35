"""The service as operators watch it: ``/metrics`` after a known workload, the JSON access log,
``/healthz`` and ``/readyz`` (the service started for real, on SQLite and on PostgreSQL)."""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.config import load_config
from tablestore.errors import ConfigError
from tablestore.rest.settings import server_settings
from tablestore.spec.metadata.update_models import requirement_from_json, update_from_json
from tests.rest.conftest import (
    CATALOG,
    CLIENT_ID,
    CLIENT_SECRET,
    READ_TOKEN,
    WRITE_TOKEN,
    RestService,
    start_service,
    write_config,
)

AUTH = {"Authorization": f"Bearer {WRITE_TOKEN}"}
SCHEMA: dict[str, Any] = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
TABLE_ROUTE = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(service: RestService, token: str = READ_TOKEN) -> Samples:
    response = requests.get(f"{service.uri}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def _url(service: RestService, path: str) -> str:
    return f"{service.uri}/v1/{CATALOG}{path}"


def _commit(service: RestService, ns: str, table: str, table_uuid: str, properties: dict[str, str],
            key: str | None = None) -> requests.Response:
    body: dict[str, Any] = {"requirements": [{"type": "assert-table-uuid", "uuid": table_uuid}],
            "updates": [{"action": "set-properties", "updates": properties}]}
    headers = {**AUTH, **({"Idempotency-Key": key} if key else {})}
    return requests.post(_url(service, f"/namespaces/{ns}/tables/{table}"), json=body, headers=headers, timeout=60)


def _access_lines(service: RestService, *request_ids: str, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """The access log's lines so far, once those of ``request_ids`` are in (a line is written just
    after its answer is sent, so a client can read the log before it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        lines = [json.loads(line) for line in service.log().splitlines() if line.startswith("{")]
        missing = set(request_ids) - {line["request_id"] for line in lines}
        if not missing or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_metrics_count_a_known_workload(fresh_rest_service: RestService) -> None:
    service = fresh_rest_service
    postgres = service.catalog_uri.startswith("postgresql")
    before = scrape(service)
    # A fresh service: every catalog series is there, at 0.
    for kind in ("table", "transaction", "create", "register"):
        assert (("tablestore_commits_total", frozenset({"catalog": CATALOG, "kind": kind}.items()))) in before
        assert value(before, "tablestore_commits_total", catalog=CATALOG, kind=kind) == 0
    assert value(before, "tablestore_requests_signed_total", catalog=CATALOG) == 0

    ns = f"metrics_{uuid.uuid4().hex[:8]}"
    assert requests.post(_url(service, "/namespaces"), json={"namespace": [ns]}, headers=AUTH,
                         timeout=30).status_code == 200
    uuids = {}
    for name in ("t0", "t1", "t2"):  # 3 creates: 3 commits of kind create
        created = requests.post(_url(service, f"/namespaces/{ns}/tables"), json={"name": name, "schema": SCHEMA},
                                headers=AUTH, timeout=60)
        assert created.status_code == 200, created.text
        uuids[name] = created.json()["metadata"]["table-uuid"]
    assert _commit(service, ns, "t0", uuids["t0"], {"k": "1"}).status_code == 200
    # A forced conflict: a requirement that fails.
    conflict = _commit(service, ns, "t0", str(uuid.uuid4()), {"k": "2"})
    assert conflict.status_code == 409 and conflict.json()["error"]["type"] == "CommitFailedException"
    # One commit sent twice with one Idempotency-Key: applied once, replayed once.
    key = str(uuid.uuid4())
    assert _commit(service, ns, "t1", uuids["t1"], {"k": "1"}, key).status_code == 200
    replay = _commit(service, ns, "t1", uuids["t1"], {"k": "1"}, key)
    assert replay.status_code == 200 and replay.headers["idempotent-replayed"] == "true"
    transaction: dict[str, Any] = {"table-changes": [
        {"identifier": {"namespace": [ns], "name": t},
         "requirements": [{"type": "assert-table-uuid", "uuid": uuids[t]}],
         "updates": [{"action": "set-properties", "updates": {"tx": "1"}}]} for t in ("t1", "t2")]}
    assert requests.post(_url(service, "/transactions/commit"), json=transaction, headers=AUTH,
                         timeout=60).status_code == 204
    missing = requests.get(_url(service, f"/namespaces/{ns}/tables/missing"), headers=AUTH, timeout=30)
    assert missing.status_code == 404
    assert requests.get(f"{service.uri}/no/such/path", timeout=30).status_code == 404
    assert requests.post(_url(service, f"/namespaces/{ns}/tables/t2/plan"), json={}, headers=AUTH,
                         timeout=60).status_code == 200

    # Two loads of a table the service has seen: both answered from the metadata cache.
    loads_before = scrape(service)
    for _ in range(2):
        assert requests.get(_url(service, f"/namespaces/{ns}/tables/t0"), headers=AUTH, timeout=30).status_code == 200
    after = scrape(service)
    assert value(after, "tablestore_cache_hits_total", catalog=CATALOG, cache="metadata") == \
        value(loads_before, "tablestore_cache_hits_total", catalog=CATALOG, cache="metadata") + 2
    assert value(after, "tablestore_cache_misses_total", catalog=CATALOG, cache="metadata") == \
        value(loads_before, "tablestore_cache_misses_total", catalog=CATALOG, cache="metadata")

    def commits(kind: str) -> float:
        return value(after, "tablestore_commits_total", catalog=CATALOG, kind=kind)

    assert (commits("create"), commits("table"), commits("transaction"), commits("register")) == (3, 2, 1, 0)
    assert value(after, "tablestore_commit_conflicts_total", catalog=CATALOG, kind="table") == 1
    assert value(after, "tablestore_commit_conflicts_total", catalog=CATALOG, kind="create") == 0
    assert value(after, "tablestore_idempotent_replays_total", catalog=CATALOG) == 1
    assert value(after, "tablestore_scan_plans_total", catalog=CATALOG) == 1
    assert value(after, "tablestore_scan_file_tasks_total", catalog=CATALOG) == 0  # an empty table
    assert value(after, "tablestore_scan_plan_tasks_served_total", catalog=CATALOG) == 0
    # A local warehouse: nothing to vend, nothing signed.
    assert value(after, "tablestore_credentials_vended_total", catalog=CATALOG, access="write") == 0
    assert value(after, "tablestore_requests_signed_total", catalog=CATALOG) == 0
    # On PostgreSQL the conflicting commit was tried on the state last seen, then judged again on
    # the table's current row (one retry); SQLite commits on the current row at once.
    assert value(after, "tablestore_commit_retries_total", catalog=CATALOG) == (1 if postgres else 0)

    # Requests by route template, never by path.
    assert value(after, "tablestore_http_requests_total", method="GET", route=TABLE_ROUTE, status="404") == 1
    assert value(after, "tablestore_http_requests_total", method="GET", route=TABLE_ROUTE, status="200") == 2
    assert value(after, "tablestore_http_requests_total", method="POST", route=TABLE_ROUTE, status="200") == 3
    assert value(after, "tablestore_http_requests_total", method="POST", route=TABLE_ROUTE, status="409") == 1
    assert value(after, "tablestore_http_requests_total", method="POST",
                 route="/v1/{prefix}/namespaces/{namespace}/tables", status="200") == 3
    assert value(after, "tablestore_http_requests_total", method="GET", route="unmatched", status="404") == 1
    assert value(after, "tablestore_http_request_duration_seconds_count", method="GET", route=TABLE_ROUTE) == 3
    assert value(after, "tablestore_http_request_duration_seconds_bucket", method="GET", route=TABLE_ROUTE,
                 le="+Inf") == 3
    routes = {dict(labels).get("route", "") for (_, labels) in after}
    assert not [r for r in routes if ns in r or "t0" in r or "missing" in r]
    replayed = [line for line in _access_lines(service, replay.headers["x-request-id"]) if line.get("replayed")]
    assert [(x["method"], x["route"], x["status"], x["request_id"]) for x in replayed] == \
        [("POST", TABLE_ROUTE, 200, replay.headers["x-request-id"])]

    if postgres:
        # Another writer moves t0 behind the service's back: the service's commit on the state it
        # last saw loses the swap and is made again on the current row (a retry), and lands.
        direct = SqlCatalog(CATALOG, **service.direct_properties())
        try:
            direct.commit_table((ns, "t0"), [requirement_from_json({"type": "assert-table-uuid", "uuid": uuids["t0"]})],
                                [update_from_json({"action": "set-properties", "updates": {"k": "direct"}})])
        finally:
            direct.close()
        assert _commit(service, ns, "t0", uuids["t0"], {"k": "3"}).status_code == 200
        last = scrape(service)
        assert value(last, "tablestore_commit_retries_total", catalog=CATALOG) == 2
        assert value(last, "tablestore_commits_total", catalog=CATALOG, kind="table") == 3
        assert value(last, "tablestore_commit_conflicts_total", catalog=CATALOG, kind="table") == 1


def test_metrics_need_a_token_unless_opened(rest_service: RestService, tmp_path: Path) -> None:
    refused = requests.get(f"{rest_service.uri}/metrics", timeout=30)
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert "tablestore_" not in refused.text
    assert requests.get(f"{rest_service.uri}/metrics", headers={"Authorization": "Bearer not-a-token-at-all"},
                        timeout=30).status_code == 401
    scrape(rest_service, READ_TOKEN)  # any principal: read is enough
    # Opened on purpose (a private port): no token needed. And the access log turned off.
    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    write_config(tmp_path / "open.yaml", uri, str(tmp_path / "warehouse"),
                 server_extra={"metrics-auth": "none", "access-log": "false"})
    opened = RestService(tmp_path / "open.yaml", uri, str(tmp_path / "warehouse"), tmp_path)
    opened.start()
    try:
        response = requests.get(f"{opened.uri}/metrics", timeout=30)
        assert response.status_code == 200 and "tablestore_commits_total" in response.text
        # The API itself still needs its token.
        assert requests.get(f"{opened.uri}/v1/{CATALOG}/namespaces", timeout=30).status_code == 401
    finally:
        opened.stop()
    assert [line for line in opened.log().splitlines() if line.startswith("{")] == []
    # Only the two values are taken.
    write_config(tmp_path / "wrong.yaml", uri, str(tmp_path / "warehouse"), server_extra={"metrics-auth": "sometimes"})
    with pytest.raises(ConfigError, match="metrics-auth"):
        server_settings(load_config(str(tmp_path / "wrong.yaml")))


def test_access_log_has_a_line_per_request_and_no_secret(rest_service: RestService) -> None:
    service = rest_service
    # Logging in with the client secret, then a 404 with the issued token and a query string
    # holding something secret-looking; a 401 with a wrong token; a 400 with the secret in the body.
    issued = requests.post(f"{service.uri}/v1/oauth/tokens", timeout=30, data={
        "grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET})
    assert issued.status_code == 200
    token = issued.json()["access_token"]
    secret_query = "X-Amz-Signature=feedfacecafebeef0123456789abcdef"
    request_id = f"test-{uuid.uuid4().hex}"
    ns = f"log_{uuid.uuid4().hex[:8]}"
    missing = requests.get(f"{service.uri}/v1/{CATALOG}/namespaces/{ns}/tables/nothing_here?{secret_query}",
                           headers={"Authorization": f"Bearer {token}", "X-Request-ID": request_id}, timeout=30)
    assert missing.status_code == 404 and missing.headers["x-request-id"] == request_id
    wrong_token = "wrong-token-0123456789abcdef-guessed"
    refused = requests.get(f"{service.uri}/v1/{CATALOG}/namespaces", timeout=30,
                           headers={"Authorization": f"Bearer {wrong_token}", "X-Request-ID": 'forged" "status":200'})
    assert refused.status_code == 401
    # Not an id a log line can carry as is: replaced by one of the service's.
    assert re.fullmatch("[0-9a-f]{16}", refused.headers["x-request-id"])
    bad = requests.post(f"{service.uri}/v1/{CATALOG}/namespaces", headers=AUTH, timeout=30,
                        data=f'{{"namespace": ["{CLIENT_SECRET}"'.encode())
    assert bad.status_code == 400

    lines = _access_lines(service, request_id, refused.headers["x-request-id"], bad.headers["x-request-id"],
                          issued.headers["x-request-id"])
    by_id = {line["request_id"]: line for line in lines}
    line = by_id[request_id]
    assert line["principal"] == CLIENT_ID
    assert line["method"] == "GET"
    assert line["route"] == TABLE_ROUTE
    assert line["status"] == 404
    assert line["error"] == "NoSuchTableException"
    assert isinstance(line["latency_ms"], float) and line["latency_ms"] >= 0
    assert set(line) == {"ts", "request_id", "principal", "method", "route", "status", "latency_ms", "error"}
    unauthorized = by_id[refused.headers["x-request-id"]]
    assert (unauthorized["status"], unauthorized["principal"], unauthorized["route"]) == \
        (401, "-", "/v1/{prefix}/namespaces")
    assert by_id[bad.headers["x-request-id"]]["status"] == 400
    token_line = [x for x in lines if x["route"] == "/v1/oauth/tokens"]
    assert token_line and token_line[-1]["status"] == 200

    log = service.log()
    for secret in (token, WRITE_TOKEN, READ_TOKEN, CLIENT_SECRET, wrong_token, "feedfacecafebeef", "test-signing-secret"):
        assert secret not in log, f"a secret reached the log: {secret[:6]}..."
    assert ns not in "\n".join(json.dumps(x) for x in lines)  # paths are not logged, templates are


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def readiness_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RestService]:
    service = start_service(request, request.param, tmp_path)
    try:
        yield service
    finally:
        service.stop()


def _probe(service: RestService, ready_ids: list[str]) -> tuple[int, int]:
    health = requests.get(f"{service.uri}/healthz", timeout=30)
    ready = requests.get(f"{service.uri}/readyz", timeout=30)
    ready_ids.append(ready.headers["x-request-id"])
    assert "lake" not in ready.text and "catalog" not in ready.text  # strangers learn nothing
    return health.status_code, ready.status_code


def test_readyz_answers_503_while_the_catalog_database_is_gone(
    readiness_service: RestService, request: pytest.FixtureRequest
) -> None:
    service = readiness_service
    ready_ids: list[str] = []
    assert _probe(service, ready_ids) == (200, 200)
    if service.catalog_uri.startswith("sqlite"):
        database = Path(str(make_url(service.catalog_uri).database))
        moved = database.with_name("moved-away.db")
        os.rename(database, moved)
        try:
            assert _probe(service, ready_ids) == (200, 503)
            assert _probe(service, ready_ids) == (200, 503)
        finally:
            os.rename(moved, database)
        assert _probe(service, ready_ids) == (200, 200)
    else:
        name = str(make_url(service.catalog_uri).database)
        server = request.getfixturevalue("postgres_server")
        engine = create_engine(server.uri(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as connection:
                connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        finally:
            engine.dispose()
        assert _probe(service, ready_ids) == (200, 503)
        assert _probe(service, ready_ids) == (200, 503)
    log = service.log()
    # Logged once per change of state, naming the catalog; the probes' own lines are in the access log.
    assert log.count(f"not ready: the database of catalog {CATALOG} does not answer") == 1
    statuses = [x["status"] for x in _access_lines(service, ready_ids[-1]) if x["route"] == "/readyz"]
    assert statuses.count(503) == 2


def test_plan_tasks_served_are_counted(tmp_path: Path) -> None:
    import pyarrow as pa

    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    write_config(tmp_path / "paged.yaml", uri, str(tmp_path / "warehouse"),
                 server_extra={"scan-planning-page-size": 1})
    service = RestService(tmp_path / "paged.yaml", uri, str(tmp_path / "warehouse"), tmp_path)
    service.start()
    try:
        client = service.client()
        try:
            client.create_namespace("plans")
            table = client.create_table("plans.t", pa.schema([pa.field("id", pa.int64())]))
            table.append(pa.table({"id": [1]}))
            client.load_table("plans.t").append(pa.table({"id": [2]}))
        finally:
            client.close()
        before = scrape(service)
        plan = requests.post(_url(service, "/namespaces/plans/tables/t/plan"), json={}, headers=AUTH, timeout=60)
        assert plan.status_code == 200
        body = plan.json()
        assert len(body["file-scan-tasks"]) == 1 and len(body["plan-tasks"]) == 1  # two files, pages of one
        fetched = requests.post(_url(service, "/namespaces/plans/tables/t/tasks"), headers=AUTH, timeout=60,
                                json={"plan-task": body["plan-tasks"][0]})
        assert fetched.status_code == 200 and len(fetched.json()["file-scan-tasks"]) == 1
        after = scrape(service)
        for name, delta in (("tablestore_scan_plans_total", 1), ("tablestore_scan_file_tasks_total", 2),
                            ("tablestore_scan_plan_tasks_served_total", 1)):
            assert value(after, name, catalog=CATALOG) - value(before, name, catalog=CATALOG) == delta, name
    finally:
        service.stop()


@pytest.mark.s3
def test_vended_credentials_are_counted_and_never_logged(s3_rest_service: RestService) -> None:
    service = s3_rest_service
    delegation = {"X-Iceberg-Access-Delegation": "vended-credentials"}
    assert requests.post(_url(service, "/namespaces"), json={"namespace": ["vend"]}, headers=AUTH,
                         timeout=30).status_code == 200
    created = requests.post(_url(service, "/namespaces/vend/tables"), json={"name": "t", "schema": SCHEMA},
                            headers=AUTH, timeout=60)
    assert created.status_code == 200 and "storage-credentials" not in created.json()  # not asked for
    before = scrape(service)
    secrets = []
    for _ in range(2):  # the second load reuses the read credentials of the first
        loaded = requests.get(_url(service, "/namespaces/vend/tables/t"), timeout=30,
                              headers={"Authorization": f"Bearer {READ_TOKEN}", **delegation})
        assert loaded.status_code == 200
        secrets += [loaded.json()["config"]["s3.secret-access-key"], loaded.json()["config"]["s3.session-token"]]
    written = requests.get(_url(service, "/namespaces/vend/tables/t/credentials"), headers=AUTH, timeout=30)
    assert written.status_code == 200
    secrets += [written.json()["storage-credentials"][0]["config"]["s3.secret-access-key"]]
    after = scrape(service)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, catalog=CATALOG, **labels) - value(before, name, catalog=CATALOG, **labels)

    assert delta("tablestore_credentials_vended_total", access="read") == 2
    assert delta("tablestore_credentials_vended_total", access="write") == 1
    assert delta("tablestore_cache_misses_total", cache="credentials") == 2  # two AssumeRoles: read, write
    assert delta("tablestore_cache_hits_total", cache="credentials") == 1
    assert delta("tablestore_requests_signed_total") == 0
    log = service.log()
    for secret in [*secrets, service.s3_properties["s3.secret-access-key"]]:
        assert secret not in log
