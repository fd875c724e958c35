"""Table commits answered in the envelope (:mod:`tablestore.rest.routes.table_commits`) are the
route's answers: the same status, headers and body for what a commit can meet, compared on the
same running service with the same request sent through the router (a query parameter the fast
path does not take sends it there; the route ignores it)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from tablestore.config import load_config
from tablestore.rest.access import Service
from tablestore.rest.routes.table_commits import TableCommits
from tablestore.rest.settings import server_settings
from tablestore.rest.state.served_catalog import ServedSqlCatalog
from tests.rest.conftest import ON_BOTH_DATABASES
from tests.services import CATALOG, READ_TOKEN, WRITE_TOKEN, RestService, raw_answer, write_config

NAMESPACE = "fastcommit"
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}]}


def _both(service: RestService, path: str, body: Any = None, raw: bytes | None = None,
          **kwargs: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """The fast path's answer to a commit, after checking it is the router's."""
    fast = _send(service, path, body, raw, **kwargs)
    routed = _send(service, path + "?via=router", body, raw, **kwargs)
    assert fast == routed
    return fast


def _send(service: RestService, path: str, body: Any = None, raw: bytes | None = None, token: str = WRITE_TOKEN,
          headers: dict[str, str] | None = None, method: str = "POST") -> tuple[int, list[tuple[str, str]], bytes]:
    """An answer: status, headers but the volatile ones, body. ``body`` is sent as JSON, ``raw`` as is."""
    return raw_answer(service, method, path, token, body=body, raw=raw, headers=headers)


def _error(answer: tuple[int, list[tuple[str, str]], bytes]) -> tuple[int, str]:
    return answer[0], json.loads(answer[2])["error"]["type"]


@ON_BOTH_DATABASES  # on PostgreSQL the fast path commits on the event loop (ServedSqlCatalog.commit_on_loop)
def test_commits_answer_as_the_route_does(rest_service: RestService) -> None:
    service = rest_service
    base = f"/v1/{CATALOG}/namespaces"
    assert _send(service, base, body={"namespace": [NAMESPACE], "properties": {}})[0] in (200, 409)
    _send(service, f"{base}/{NAMESPACE}/tables/t", method="DELETE")
    status, _, created = _send(service, f"{base}/{NAMESPACE}/tables", body={"name": "t", "schema": SCHEMA})
    assert status == 200
    uuid = json.loads(created)["metadata"]["table-uuid"]
    table = f"{base}/{NAMESPACE}/tables/t"
    holds = [{"type": "assert-table-uuid", "uuid": uuid}]

    # A commit that changes nothing answers the current metadata: the same bytes either way.
    status, headers, body = _both(service, table, {"requirements": holds, "updates": []})
    assert status == 200 and json.loads(body)["metadata"]["table-uuid"] == uuid
    assert [k for k, _ in headers if k != "server"] == ["content-length", "content-type"]
    # Commits that land: the same answer but for the file each wrote.
    answers = []
    for path, via in ((table, "fast"), (table + "?via=router", "router")):
        status, headers, body = _send(service, path, body={"requirements": holds, "updates": [
            {"action": "set-properties", "updates": {"via": via}}]})
        answers.append((status, [k for k, _ in headers], json.loads(body)))
    (fast_status, fast_headers, fast), (routed_status, routed_headers, routed) = answers
    assert (fast_status, fast_headers) == (routed_status, routed_headers) == (200, fast_headers)
    assert sorted(fast) == sorted(routed) == ["metadata", "metadata-location"]
    assert fast["metadata"]["properties"]["via"] == "fast"
    assert routed["metadata"]["properties"]["via"] == "router"
    assert len(routed["metadata"]["metadata-log"]) == len(fast["metadata"]["metadata-log"]) + 1

    # Refusals and errors: the same status and body.
    wrong = [{"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}]
    assert _error(_both(service, table, {"requirements": wrong, "updates": []})) == (409, "CommitFailedException")
    assert _error(_both(service, f"{base}/{NAMESPACE}/tables/missing", {"requirements": [], "updates": [
        {"action": "set-properties", "updates": {"k": "v"}}]})) == (404, "NoSuchTableException")
    assert _error(_both(service, table, {"requirements": holds, "updates": []}, token=READ_TOKEN)) \
        == (403, "ForbiddenException")
    assert _error(_both(service, table, {"requirements": holds, "updates": [{"action": "no-such-update"}]})) \
        == (400, "BadRequestException")
    assert _error(_both(service, f"{base}/{NAMESPACE}/tables/{'x' * 300}", {"requirements": [], "updates": []})) \
        == (400, "BadRequestException")
    if service.catalog_uri.startswith("postgresql"):
        # The database closes every connection of the service (as a restart does): the pooled
        # connections of the swap on the event loop are found closed and replaced.
        engine = create_engine(service.catalog_uri, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                assert conn.execute(text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                         "WHERE datname = current_database() AND pid <> pg_backend_pid()")).scalar()
                # pg_terminate_backend only signals: until the backends have exited, a pooled
                # connection can look idle and die under the next statement (a 504, rightly, as
                # its outcome is unknown). A restart has ended them before the service sends more.
                deadline = time.monotonic() + 30
                while conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                        "AND pid <> pg_backend_pid()")).scalar():
                    assert time.monotonic() < deadline, "the terminated backends did not exit"
                    time.sleep(0.05)
        finally:
            engine.dispose()
        for value in ("after-restart-1", "after-restart-2"):
            status, _, body = _send(service, table, {"requirements": holds, "updates": [
                {"action": "set-properties", "updates": {"via": value}}]})
            assert status == 200 and json.loads(body)["metadata"]["properties"]["via"] == value
        assert json.loads(_send(service, table, method="GET")[2])["metadata"]["properties"]["via"] == value

    # Bodies the route refuses itself are handed to it: bad JSON (before the role), a wrong shape,
    # no content type.
    json_type = {"Content-Type": "application/json"}
    for raw, sent, token in [(b"{not json", json_type, READ_TOKEN), (b'{"updates": 3}', json_type, None),
                                (b'{"requirements": [], "updates": []}', {}, None)]:
        extra = {"token": token} if token else {}
        assert _error(_both(service, table, raw=raw, headers=sent, **extra)) == (400, "BadRequestException")


def test_the_fast_path_takes_plain_commits_and_leaves_the_rest_to_the_router(tmp_path: Path) -> None:
    config = tmp_path / "tablestore.yaml"
    write_config(config, f"sqlite:///{tmp_path / 'catalog.db'}", str(tmp_path / "warehouse"))
    lakehouse = load_config(config)
    catalog = ServedSqlCatalog(CATALOG, **lakehouse.catalog(CATALOG).properties)
    commits = TableCommits(Service(server_settings(lakehouse), {CATALOG: catalog}))
    try:
        def taken(method: str, path: str, query: bytes = b"", headers: list[tuple[bytes, bytes]] | None = None) -> bool:
            scope = {"method": method, "path": path, "query_string": query, "headers": headers or []}
            return commits.target(scope) is not None

        table = f"/v1/{CATALOG}/namespaces/db/tables/t"
        assert taken("POST", table)
        assert not taken("POST", table, b"x=1") and not taken("GET", table) and not taken("DELETE", table)
        key = (b"idempotency-key", b"017f22e2-79b0-7cc3-98c4-dc0c0c07398f")
        assert not taken("POST", table, headers=[key])  # the idempotency store's
        assert not taken("POST", f"{table}/metrics") and not taken("POST", f"/v1/{CATALOG}/namespaces/db/tables")
        assert not taken("POST", "/v1/other/namespaces/db/tables/t")  # no such catalog: the router says so
    finally:
        catalog.close()
