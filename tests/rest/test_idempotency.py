"""The spec's ``Idempotency-Key``: a mutation retried after a lost response replays the first
response and is not applied twice, across a second service instance on the same database too.

Responses are lost for real: a proxy between client and service forwards a request, receives
the service's answer and closes the client's connection without sending it.
"""

from __future__ import annotations

import http.client
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pytest
import requests

from tablestore.catalog.rest import RestCatalog, uuid7
from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.spec.metadata.update_models import (
    AddSchemaUpdate,
    AssertCurrentSchemaId,
    SetCurrentSchemaUpdate,
)
from tablestore.spec.schemas.schema import Schema
from tests.rest.conftest import CATALOG, ON_BOTH_DATABASES, WRITE_TOKEN, RestService

# The keys and their replays are kept in the catalog database: the replays run on both.

SCHEMA = pa.schema([pa.field("id", pa.int64())])
AUTH = {"Authorization": f"Bearer {WRITE_TOKEN}"}


@dataclass
class Exchange:
    method: str
    path: str
    request_headers: dict[str, str]
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class LossyProxy:
    """Forwards HTTP to ``target``; drops the response of the first request ``lose`` picks."""

    target: str
    lose: Callable[[str, str], bool]
    exchanges: list[Exchange] = field(default_factory=list)
    lost: list[Exchange] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def uri(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> None:
        proxy = self
        target = urlsplit(self.target)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                upstream = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                    upstream.request(self.command, self.path, body=body or None, headers=headers)
                    response = upstream.getresponse()
                    data = response.read()
                    exchange = Exchange(self.command, self.path, dict(self.headers.items()), response.status,
                                        {k.lower(): v for k, v in response.getheaders()}, data)
                finally:
                    upstream.close()
                if not proxy.lost and proxy.lose(self.command, self.path):
                    proxy.lost.append(exchange)
                    # The service answered; the client never hears it.
                    self.close_connection = True
                    return
                proxy.exchanges.append(exchange)
                self.send_response(exchange.status)
                for name, value in exchange.headers.items():
                    if name not in ("connection", "transfer-encoding", "date", "server"):
                        self.send_header(name, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_HEAD = _forward

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def namespace(rest_service: RestService) -> Iterator[str]:
    ns = f"idem_{uuid.uuid4().hex[:8]}"
    client = rest_service.client()
    try:
        client.create_namespace(ns)
        yield ns
    finally:
        client.close()


def _post(service: RestService, path: str, body: Any, key: str | None, method: str = "POST") -> requests.Response:
    headers = {**AUTH, **({"Idempotency-Key": key} if key else {})}
    return requests.request(method, f"{service.uri}/v1/{CATALOG}{path}", json=body, headers=headers, timeout=60)


def test_config_advertises_the_key_lifetime_and_the_header(rest_service: RestService) -> None:
    config = requests.get(f"{rest_service.uri}/v1/config", headers=AUTH, timeout=30).json()
    assert config["idempotency-key-lifetime"] == "PT30M"  # the default: 1800 s
    document = requests.get(f"{rest_service.uri}/openapi.json", timeout=30).json()
    commit = document["paths"]["/v1/{prefix}/namespaces/{namespace}/tables/{table}"]["post"]
    assert "Idempotency-Key" in [p["name"] for p in commit["parameters"]]
    load = document["paths"]["/v1/{prefix}/namespaces/{namespace}/tables/{table}"]["get"]
    assert "Idempotency-Key" not in [p["name"] for p in load["parameters"]]


@ON_BOTH_DATABASES
def test_commit_whose_response_was_lost_is_replayed_and_applied_once(rest_service: RestService, namespace: str) -> None:
    proxy = LossyProxy(rest_service.uri,
                       lambda method, path: method == "POST" and path.endswith(f"/namespaces/{namespace}/tables/t"))
    proxy.start()
    client = RestCatalog("rest", uri=proxy.uri, token=WRITE_TOKEN)
    try:
        table = client.create_table(f"{namespace}.t", SCHEMA)
        # The commit's response is lost; the client sends it again with the same key.
        table.append(pa.table({"id": [1, 2, 3]}, schema=SCHEMA))
    finally:
        client.close()
        proxy.stop()

    assert len(proxy.lost) == 1
    first = proxy.lost[0]
    assert first.status == 200
    retry = [e for e in proxy.exchanges if e.method == "POST" and e.path == first.path]
    assert len(retry) == 1
    assert retry[0].request_headers["Idempotency-Key"] == first.request_headers["Idempotency-Key"]
    assert retry[0].status == 200
    assert retry[0].headers["idempotent-replayed"] == "true"
    assert retry[0].body == first.body  # the very response the client lost

    direct = SqlCatalog(CATALOG, **rest_service.direct_properties())
    try:
        loaded = direct.load_table(f"{namespace}.t")
        assert len(loaded.metadata.snapshots) == 1
        assert loaded.metadata_location == json.loads(first.body)["metadata-location"]
        assert sorted(loaded.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
    finally:
        direct.close()


@ON_BOTH_DATABASES
def test_transaction_whose_response_was_lost_is_replayed_and_applied_once(
    rest_service: RestService, namespace: str
) -> None:
    proxy = LossyProxy(rest_service.uri, lambda method, path: path.endswith("/transactions/commit"))
    proxy.start()
    client = RestCatalog("rest", uri=proxy.uri, token=WRITE_TOKEN)
    wider = Schema.from_json({"type": "struct", "schema-id": 1, "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "note", "type": "string", "required": False},
    ]})
    try:
        client.create_table(f"{namespace}.a", SCHEMA)
        client.create_table(f"{namespace}.b", SCHEMA)
        # Applied twice, the second would fail its requirement (schema 0 is no longer current).
        change = ([AssertCurrentSchemaId(current_schema_id=0)], [AddSchemaUpdate(schema_=wider), SetCurrentSchemaUpdate(schema_id=-1)])
        client.commit_tables([(f"{namespace}.a", *change), (f"{namespace}.b", *change)])
    finally:
        client.close()
        proxy.stop()

    assert [e.status for e in proxy.lost] == [204]
    retry = [e for e in proxy.exchanges if e.path.endswith("/transactions/commit")]
    assert [(e.status, e.headers.get("idempotent-replayed"), e.body) for e in retry] == [(204, "true", b"")]
    direct = SqlCatalog(CATALOG, **rest_service.direct_properties())
    try:
        for name in ("a", "b"):
            metadata = direct.load_table(f"{namespace}.{name}").metadata
            assert [s.schema_id for s in metadata.schemas] == [0, 1]
            assert metadata.current_schema_id == 1
            assert [f.name for f in metadata.schema().fields] == ["id", "note"]
    finally:
        direct.close()


@ON_BOTH_DATABASES
def test_create_drop_and_rename_replay_their_first_response(rest_service: RestService, namespace: str) -> None:
    create = {"name": "c", "schema": {"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False}]}}
    key = uuid7()
    first = _post(rest_service, f"/namespaces/{namespace}/tables", create, key)
    again = _post(rest_service, f"/namespaces/{namespace}/tables", create, key)
    assert first.status_code == again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true" and "idempotent-replayed" not in first.headers
    assert again.content == first.content
    # Without the key the same create is a new operation: the table exists.
    assert _post(rest_service, f"/namespaces/{namespace}/tables", create, None).status_code == 409

    rename = {"source": {"namespace": [namespace], "name": "c"}, "destination": {"namespace": [namespace], "name": "d"}}
    key = uuid7()
    assert _post(rest_service, "/tables/rename", rename, key).status_code == 204
    replay = _post(rest_service, "/tables/rename", rename, key)
    assert (replay.status_code, replay.headers["idempotent-replayed"]) == (204, "true")  # not 404: c is gone
    assert _post(rest_service, "/tables/rename", rename, uuid7()).status_code == 404  # a new key runs it

    key = uuid7()
    assert _post(rest_service, f"/namespaces/{namespace}/tables/d", None, key, "DELETE").status_code == 204
    replay = _post(rest_service, f"/namespaces/{namespace}/tables/d", None, key, "DELETE")
    assert (replay.status_code, replay.headers["idempotent-replayed"]) == (204, "true")
    assert _post(rest_service, f"/namespaces/{namespace}/tables/d", None, uuid7(), "DELETE").status_code == 404

    # A final 4xx is replayed too (the spec: deterministic terminal 4xx), even once it would succeed.
    key = uuid7()
    missing = _post(rest_service, f"/namespaces/{namespace}/tables/later", None, key, "DELETE")
    assert missing.status_code == 404
    assert _post(rest_service, f"/namespaces/{namespace}/tables",
                 {**create, "name": "later"}, uuid7()).status_code == 200
    replay = _post(rest_service, f"/namespaces/{namespace}/tables/later", None, key, "DELETE")
    assert (replay.status_code, replay.content) == (404, missing.content)


@ON_BOTH_DATABASES
def test_a_key_names_one_request(rest_service: RestService, namespace: str) -> None:
    create = {"name": "x", "schema": {"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False}]}}
    key = uuid7()
    assert _post(rest_service, f"/namespaces/{namespace}/tables", create, key).status_code == 200
    other = _post(rest_service, f"/namespaces/{namespace}/tables", {**create, "name": "y"}, key)
    assert other.status_code == 422
    assert other.json()["error"]["type"] == "UnprocessableEntityException"
    assert "different request" in other.json()["error"]["message"]
    head = requests.head(f"{rest_service.uri}/v1/{CATALOG}/namespaces/{namespace}/tables/y", headers=AUTH, timeout=30)
    assert head.status_code == 404  # refused, nothing done

    bad = _post(rest_service, f"/namespaces/{namespace}/tables", {**create, "name": "z"}, "not-a-uuid")
    assert bad.status_code == 400
    assert "UUID" in bad.json()["error"]["message"]


@ON_BOTH_DATABASES
def test_a_second_instance_on_the_same_database_replays(
    rest_service: RestService, namespace: str, tmp_path: Path
) -> None:
    client = rest_service.client()
    try:
        client.create_table(f"{namespace}.s", SCHEMA)
    finally:
        client.close()
    commit = {"requirements": [{"type": "assert-current-schema-id", "current-schema-id": 0}],
              "updates": [{"action": "set-properties", "updates": {"owner": "first"}},
                          {"action": "add-schema", "schema": {"type": "struct", "schema-id": 1, "fields": [
                              {"id": 1, "name": "id", "type": "long", "required": False},
                              {"id": 2, "name": "v", "type": "int", "required": False}]}},
                          {"action": "set-current-schema", "schema-id": -1}]}
    key = uuid7()
    first = _post(rest_service, f"/namespaces/{namespace}/tables/s", commit, key)
    assert first.status_code == 200

    second = RestService(rest_service.config_path, rest_service.catalog_uri, rest_service.warehouse, tmp_path)
    second.start()
    try:
        replay = _post(second, f"/namespaces/{namespace}/tables/s", commit, key)
        assert (replay.status_code, replay.headers["idempotent-replayed"]) == (200, "true")
        assert replay.content == first.content
        # Without the key the second instance runs it, and the requirement refuses a second apply.
        assert _post(second, f"/namespaces/{namespace}/tables/s", commit, uuid7()).status_code == 409
    finally:
        second.stop()
    direct = SqlCatalog(CATALOG, **rest_service.direct_properties())
    try:
        location, metadata = direct.load_table_metadata(f"{namespace}.s")
        assert location == first.json()["metadata-location"]
        assert [s.schema_id for s in metadata.schemas] == [0, 1]
    finally:
        direct.close()


def test_the_key_store_waits_releases_takes_over_and_expires(tmp_path: Path) -> None:
    from sqlalchemy import update

    from tablestore.rest.service_tables import IDEMPOTENCY_KEYS
    from tablestore.rest.state.idempotency import (
        ABANDONED_AFTER_S,
        GRACE_S,
        Claimed,
        IdempotencyStore,
        Mismatch,
        Running,
        Stored,
    )

    catalog = SqlCatalog(CATALOG, uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=str(tmp_path / "wh"))
    store = IdempotencyStore(catalog.engine, CATALOG, lifetime_s=60)
    other = IdempotencyStore(catalog.engine, "other", lifetime_s=60)  # another catalog on the database
    try:
        key = uuid7()
        assert isinstance(store.claim(key, "a"), Claimed)
        assert isinstance(store.claim(key, "a"), Running)  # the first request has not finished
        assert isinstance(store.claim(key, "b"), Mismatch)
        assert isinstance(other.claim(key, "b"), Claimed)  # keys are per catalog
        store.release(key)  # a 5xx: not final, the retry runs again
        assert isinstance(store.claim(key, "a"), Claimed)
        store.finish(key, Stored(409, [("content-type", "application/json")], b'{"error": 1}'))
        assert store.claim(key, "a") == Stored(409, [("content-type", "application/json")], b'{"error": 1}')
        store.release(key)  # a finished key is not released
        assert isinstance(store.claim(key, "a"), Stored)

        # A key still running long after its request must have finished: its service died.
        dead = uuid7()
        assert isinstance(store.claim(dead, "a"), Claimed)
        with catalog.engine.begin() as conn:
            conn.execute(update(IDEMPOTENCY_KEYS).where(IDEMPOTENCY_KEYS.c.idempotency_key == dead)
                         .values(created_ms=IDEMPOTENCY_KEYS.c.created_ms - (ABANDONED_AFTER_S + 1) * 1000))
        assert isinstance(store.claim(dead, "a"), Claimed)
        # Past its lifetime (and the grace period) a finished key is forgotten.
        with catalog.engine.begin() as conn:
            conn.execute(update(IDEMPOTENCY_KEYS).where(IDEMPOTENCY_KEYS.c.idempotency_key == key)
                         .values(created_ms=IDEMPOTENCY_KEYS.c.created_ms - (60 + GRACE_S + 1) * 1000))
        assert isinstance(store.claim(key, "new request"), Claimed)
    finally:
        catalog.close()
