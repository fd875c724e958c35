"""Two replicas of the catalog service (real processes) on one PostgreSQL database.

Eight writers append to one table through both replicas while one replica is killed with
SIGKILL; each writer retries a request whose replica died against the surviving one with the
same Idempotency-Key. Every writer's rows are then counted: none lost, none applied twice. A
paged scan plan made on one replica is paged through on the other (also after the replica that
made it died), a token revoked on one replica is refused by the other, and a commit that landed
just before its replica died is answered to the retry, not run again.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import requests
from sqlalchemy import create_engine

from tablestore.catalog.rest import RestCatalog, uuid7
from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.errors import TableStoreError
from tablestore.names import metadata_file_uuid
from tablestore.rest.service_tables import IDEMPOTENCY_KEYS
from tablestore.rest.state.idempotency import fingerprint
from tablestore.rest.state.replicas import keyed_uuid, written_for
from tablestore.spec.metadata.update_models import AssertTableUUID, SetPropertiesUpdate
from tests.rest.conftest import CATALOG, CLIENT_ID, CLIENT_SECRET, WRITE_TOKEN, RestService, write_config
from tests.services import PostgresServer

pytestmark = pytest.mark.postgres

WRITERS = 8
APPENDS = 5  # per writer
ROWS = 7  # per append
PAGE = 4  # file scan tasks per page of a plan
AUTH = {"Authorization": f"Bearer {WRITE_TOKEN}"}
SCHEMA = pa.schema([pa.field("writer", pa.int32()), pa.field("seq", pa.int32())])


@pytest.fixture
def replicas(postgres_server: PostgresServer, tmp_path: Path) -> Iterator[list[RestService]]:
    """Two service processes with the same configuration on one PostgreSQL database."""
    uri = postgres_server.create_database()
    warehouse = str(tmp_path / "warehouse")
    config = tmp_path / "tablestore.yaml"
    write_config(config, uri, warehouse, server_extra={"scan-planning-page-size": PAGE})
    services = []
    try:
        for name in ("a", "b"):
            workdir = tmp_path / name
            workdir.mkdir()
            service = RestService(config, uri, warehouse, workdir)
            service.start()
            services.append(service)
        yield services
    finally:
        for service in services:
            service.stop()


class FailoverCatalog(RestCatalog):
    """tablestore's REST client over several replicas, as behind a load balancer: a request
    whose replica does not answer (or answers 5xx) goes to the next one with the same
    Idempotency-Key, until one gives a final answer."""

    def __init__(self, uris: list[str], first: int) -> None:
        self.uris = uris[first:] + uris[:first]
        self.replayed = 0
        self.failovers = 0
        super().__init__("rest", uri=self.uris[0], token=WRITE_TOKEN)

    def _request(self, method: str, url: str, json: Any = None, params: Any = None,
                 conflict: type[TableStoreError] = TableStoreError, commit: bool = False) -> Any:
        path = url.removeprefix(self.uri)
        headers = {"Idempotency-Key": uuid7()} if method in ("POST", "DELETE") else {}
        deadline = time.monotonic() + 120
        while True:
            try:
                response = self._session.request(method, self.uris[0] + path, json=json, params=params,
                                                 headers=headers, timeout=(5, 60))
            except (requests.ConnectionError, requests.ReadTimeout):
                response = None
            if response is not None and response.status_code < 500:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"no replica gave a final answer to {method} {path}")
            if response is None:
                # This replica is gone: the others, the same key.
                self.uris = self.uris[1:] + self.uris[:1]
                self.failovers += 1
            time.sleep(0.2)
        if response.headers.get("idempotent-replayed") == "true":
            self.replayed += 1
        if response.status_code in (200, 204) or (method == "HEAD" and response.status_code < 300):
            return response.json() if response.content else None
        self._raise(response, conflict, commit)


def _rows(catalog: SqlCatalog, table: str) -> Counter[tuple[int, int]]:
    rows = catalog.load_table(("ns", table)).scan().to_arrow()
    return Counter(zip(rows["writer"].to_pylist(), rows["seq"].to_pylist(), strict=True))


def _plan(uri: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    response = requests.post(f"{uri}/v1/{CATALOG}/namespaces/ns/tables/events/plan", json=body or {},
                             headers=AUTH, timeout=60)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def _page(uri: str, token: str) -> requests.Response:
    return requests.post(f"{uri}/v1/{CATALOG}/namespaces/ns/tables/events/tasks", json={"plan-task": token},
                         headers=AUTH, timeout=60)


def _files_of(plan: dict[str, Any], pages: list[dict[str, Any]]) -> list[str]:
    return [t["data-file"]["file-path"] for body in [plan, *pages] for t in body["file-scan-tasks"]]


def test_eight_writers_over_two_replicas_one_killed(replicas: list[RestService]) -> None:
    a, b = replicas
    setup = a.client()
    setup.create_namespace("ns")
    setup.create_table(("ns", "events"), SCHEMA)
    setup.close()

    committed = Counter[int]()
    errors: list[BaseException] = []
    clients: list[FailoverCatalog] = []
    lock = threading.Lock()

    def writer(index: int) -> None:
        try:
            catalog = FailoverCatalog([a.uri, b.uri], index % 2)  # half start on each replica
            with lock:
                clients.append(catalog)
            for seq in range(APPENDS):
                table = catalog.load_table(("ns", "events"))
                table.append(pa.table({"writer": [index] * ROWS, "seq": [seq] * ROWS}, schema=SCHEMA))
                with lock:
                    committed[index] += 1
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    for t in threads:
        t.start()
    # A plan made on replica b while the writers run, paged through on a after b died.
    deadline = time.monotonic() + 300
    while sum(committed.values()) < WRITERS and time.monotonic() < deadline and not errors:
        time.sleep(0.05)
    early = _plan(b.uri)
    while sum(committed.values()) < 2 * WRITERS and time.monotonic() < deadline and not errors:
        time.sleep(0.05)
    b.kill()  # SIGKILL, mid-run: requests in flight on b die with it
    killed_at = sum(committed.values())
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors
    assert killed_at < WRITERS * APPENDS, "the replica was killed after the run, not during it"

    # Every commit once: each writer's rows, append by append.
    direct = SqlCatalog(CATALOG, **a.direct_properties())
    try:
        rows = _rows(direct, "events")
        assert rows == Counter({(w, s): ROWS for w in range(WRITERS) for s in range(APPENDS)})
        files = {f.file.file_path for f in direct.load_table(("ns", "events")).scan().plan_files()}
    finally:
        direct.close()
    print(f"killed after {killed_at} commits; failovers {sum(c.failovers for c in clients)}, "
          f"replayed {sum(c.replayed for c in clients)}")
    for c in clients:
        c.close()

    # The early plan (made on b) is paged through on a: every page served once.
    tokens = early.get("plan-tasks", [])
    pages = []
    for token in tokens:
        response = _page(a.uri, token)
        assert response.status_code == 200, response.text
        pages.append(response.json())
        assert _page(a.uri, token).status_code == 404  # each plan task is served once
    assert len(set(_files_of(early, pages))) == len(_files_of(early, pages)) >= 1

    # b again, and a plan of the whole table made on a, its pages fetched from b.
    b.start()
    plan = _plan(a.uri)
    assert len(plan["plan-tasks"]) == -(-len(files) // PAGE) - 1
    assert requests.get(f"{b.uri}/v1/{CATALOG}/namespaces/ns/tables/events/plan/{plan['plan-id']}",
                        headers=AUTH, timeout=30).json()["status"] == "completed"
    pages = []
    for token in plan["plan-tasks"]:
        response = _page(b.uri, token)
        assert response.status_code == 200, response.text
        pages.append(response.json())
    assert sorted(_files_of(plan, pages)) == sorted(files)
    # Every plan task fetched: the plan is gone on both replicas.
    for service in (a, b):
        gone = requests.get(f"{service.uri}/v1/{CATALOG}/namespaces/ns/tables/events/plan/{plan['plan-id']}",
                            headers=AUTH, timeout=30)
        assert gone.status_code == 404

    # Both replicas serve the same current metadata (their caches are only of immutable files).
    loads = [requests.get(f"{s.uri}/v1/{CATALOG}/namespaces/ns/tables/events", headers=AUTH, timeout=30).json()
             for s in (a, b)]
    assert loads[0]["metadata-location"] == loads[1]["metadata-location"]


def test_a_plan_cancelled_on_one_replica_is_cancelled_on_the_other(replicas: list[RestService]) -> None:
    a, b = replicas
    client = a.client()
    client.create_namespace("ns")
    table = client.create_table(("ns", "events"), SCHEMA)
    for seq in range(3 * PAGE):
        table.append(pa.table({"writer": [0], "seq": [seq]}, schema=SCHEMA))
        table = client.load_table(("ns", "events"))
    client.close()
    plan = _plan(a.uri)
    assert len(plan["plan-tasks"]) == 2
    url = f"/v1/{CATALOG}/namespaces/ns/tables/events/plan/{plan['plan-id']}"
    assert requests.delete(f"{b.uri}{url}", headers=AUTH, timeout=30).status_code == 204
    assert requests.get(f"{a.uri}{url}", headers=AUTH, timeout=30).json() == {"status": "cancelled"}
    assert _page(a.uri, plan["plan-tasks"][0]).status_code == 404
    # Another principal cannot page through a plan, on any replica.
    other = _plan(b.uri)
    reader = {"Authorization": "Bearer read-token-0123456789abcdef"}
    refused = requests.post(f"{a.uri}/v1/{CATALOG}/namespaces/ns/tables/events/tasks",
                            json={"plan-task": other["plan-tasks"][0]}, headers=reader, timeout=30)
    assert refused.status_code == 404
    assert _page(a.uri, other["plan-tasks"][0]).status_code == 200


def test_a_token_revoked_on_one_replica_is_refused_by_the_other(replicas: list[RestService]) -> None:
    a, b = replicas
    issued = requests.post(f"{a.uri}/v1/oauth/tokens", timeout=30, data={
        "grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}).json()
    token = issued["access_token"]
    bearer = {"Authorization": f"Bearer {token}"}
    for service in (a, b):
        assert requests.get(f"{service.uri}/v1/config", headers=bearer, timeout=30).status_code == 200
    revoked = requests.post(f"{a.uri}/v1/oauth/revoke", data={"token": token}, headers=AUTH, timeout=30)
    assert revoked.status_code == 200, revoked.text
    assert requests.get(f"{a.uri}/v1/config", headers=bearer, timeout=30).status_code == 401
    deadline = time.monotonic() + 15
    while requests.get(f"{b.uri}/v1/config", headers=bearer, timeout=30).status_code != 401:
        assert time.monotonic() < deadline, "replica b still accepts the revoked token"
        time.sleep(0.2)
    # It cannot be refreshed either, and a static token is not revoked this way.
    exchanged = requests.post(f"{b.uri}/v1/oauth/tokens", timeout=30, data={
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange", "subject_token": token})
    assert exchanged.status_code == 400
    static = requests.post(f"{b.uri}/v1/oauth/revoke", data={"token": WRITE_TOKEN}, headers=AUTH, timeout=30)
    assert static.status_code == 400 and static.json()["error"] == "unsupported_token_type"
    # A fresh token of the same client is good.
    fresh = requests.post(f"{b.uri}/v1/oauth/tokens", timeout=30, data={
        "grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}).json()
    assert requests.get(f"{a.uri}/v1/config", headers={"Authorization": f"Bearer {fresh['access_token']}"},
                        timeout=30).status_code == 200


@pytest.mark.parametrize("landed", [True, False])
def test_a_retry_finds_whether_a_dead_replicas_commit_landed(replicas: list[RestService], landed: bool) -> None:
    """A replica died holding a key: after its commit swapped the pointer but before it recorded
    the response (``landed``), or before the commit. The retry on the other replica answers the
    landed commit, or runs the commit, once either way."""
    a, _ = replicas
    client = a.client()
    client.create_namespace("ns")
    created = client.create_table(("ns", "t"), SCHEMA)
    client.close()
    table_uuid = created.metadata.table_uuid
    key = uuid7()
    path = f"/v1/{CATALOG}/namespaces/ns/tables/t"
    body = json.dumps({"identifier": {"namespace": ["ns"], "name": "t"},
                       "requirements": [AssertTableUUID(uuid=table_uuid).to_json()],
                       "updates": [SetPropertiesUpdate(updates={"run": "1"}).to_json()]}).encode()
    engine = create_engine(a.catalog_uri)
    direct = SqlCatalog(CATALOG, **a.direct_properties())
    try:
        # What the dead replica left: its key, still running, owned by a replica that never beats.
        with engine.begin() as conn:
            conn.execute(IDEMPOTENCY_KEYS.insert().values(
                catalog_name=CATALOG, idempotency_key=key, created_ms=int(time.time() * 1000),
                fingerprint=fingerprint("POST", path, b"", body, "writer"), owner=str(uuid.uuid4())))
        before, _ = direct.load_table_metadata(("ns", "t"))
        if landed:
            # ... and its commit, with the metadata file named after the key as the service names it.
            named = metadata_file_uuid.set(keyed_uuid(key))
            try:
                done, _ = direct.commit_table(("ns", "t"), [AssertTableUUID(uuid=table_uuid)],
                                              [SetPropertiesUpdate(updates={"run": "1"})])
            finally:
                metadata_file_uuid.reset(named)
            # Another writer moved the table on since.
            direct.commit_table(("ns", "t"), [], [SetPropertiesUpdate(updates={"other": "1"})])
        retried = requests.post(f"{a.uri}{path}", data=body, timeout=60,
                                headers={**AUTH, "Idempotency-Key": key, "Content-Type": "application/json"})
        assert retried.status_code == 200, retried.text
        location, metadata = direct.load_table_metadata(("ns", "t"))
        log = [e.metadata_file for e in metadata.metadata_log]
        if landed:
            assert retried.headers.get("idempotent-replayed") == "true"
            assert retried.json()["metadata-location"] == done
            assert log == [before, done]  # not run again
        else:
            assert retried.json()["metadata-location"] == location
            assert metadata.properties["run"] == "1" and log == [before]
            # The service named the file after the key, as the dead replica had (the next retry's clue).
            assert written_for(key, [location]) == location
        # The answer is recorded: a further retry replays it.
        again = requests.post(f"{a.uri}{path}", data=body, timeout=60,
                              headers={**AUTH, "Idempotency-Key": key, "Content-Type": "application/json"})
        assert again.headers.get("idempotent-replayed") == "true"
        assert again.json()["metadata-location"] == retried.json()["metadata-location"]
    finally:
        direct.close()
        engine.dispose()
