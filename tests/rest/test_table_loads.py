"""Table loads answered in the envelope (:mod:`tablestore.rest.routes.table_loads`) are the
route's answers, byte for byte: the same status, headers and body for every case a load can
meet, compared on the same running service with the same request sent through the router (a
query parameter the fast path does not know sends it there; the route ignores it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tablestore.config import load_config
from tablestore.rest.access import Service
from tablestore.rest.routes.table_loads import TableLoads
from tablestore.rest.settings import server_settings
from tablestore.rest.state.served_catalog import ServedSqlCatalog
from tests.services import CATALOG, READ_TOKEN, WRITE_TOKEN, RestService, raw_answer, write_config

NAMESPACE = "fastload"


def _call(service: RestService, method: str, path: str, token: str = WRITE_TOKEN,
          headers: dict[str, str] | None = None, body: Any = None) -> tuple[int, list[tuple[str, str]], bytes]:
    return raw_answer(service, method, path, token, body=body, headers=headers)


def _both(service: RestService, method: str, path: str, **kwargs: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """The fast path's answer, after checking it is the router's."""
    fast = _call(service, method, path, **kwargs)
    routed = _call(service, method, path + ("?snapshots=all&via=router" if method == "GET" else "?via=router"),
                   **kwargs)
    assert fast == routed
    return fast


def test_loads_answer_as_the_route_does(rest_service: RestService) -> None:
    service = rest_service
    base = f"/v1/{CATALOG}/namespaces"
    status, _, _ = _call(service, "POST", base, body={"namespace": [NAMESPACE], "properties": {}})
    assert status in (200, 409)
    _call(service, "DELETE", f"{base}/{NAMESPACE}/tables/t")
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}]}
    status, _, created = _call(service, "POST", f"{base}/{NAMESPACE}/tables", body={"name": "t", "schema": schema})
    assert status == 200
    table = f"{base}/{NAMESPACE}/tables/t"

    status, headers, body = _both(service, "GET", table)
    loaded = json.loads(body)
    assert status == 200 and loaded["metadata-location"] == json.loads(created)["metadata-location"]
    assert loaded["metadata"]["table-uuid"] == json.loads(created)["metadata"]["table-uuid"]
    etag = dict(headers)["etag"]
    assert [k for k, _ in headers if k != "server"] == ["etag", "content-length", "content-type"]

    # A reader, and a client asking for delegated access (none on a local warehouse: the same config).
    assert _both(service, "GET", table, token=READ_TOKEN)[2] == body
    assert _both(service, "GET", table, headers={"X-Iceberg-Access-Delegation": "vended-credentials"})[0] == 200
    assert _both(service, "GET", table, headers={"X-Iceberg-Access-Delegation": "remote-signing"})[0] == 200
    # ETags: 304 for the current one, among others or as *; 200 for another.
    for match in (etag, f'"x", {etag}', "*"):
        status, headers, body304 = _both(service, "GET", table, headers={"If-None-Match": match})
        assert (status, dict(headers)["etag"], body304) == (304, etag, b"")
    assert _both(service, "GET", table, headers={"If-None-Match": '"other"'})[0] == 200
    # A commit moves the ETag.
    status, _, _ = _call(service, "POST", table, body={"requirements": [], "updates": [
        {"action": "set-properties", "updates": {"k": "v"}}]})
    assert status == 200
    assert _both(service, "GET", table, headers={"If-None-Match": etag})[0] == 200

    # Errors: the same error bodies and headers.
    for path, expected in [(f"{base}/{NAMESPACE}/tables/missing", "NoSuchTableException"),
                           (f"{base}/nowhere/tables/t", "NoSuchTableException"),
                           (f"{base}/{NAMESPACE}/tables/{'x' * 300}", "BadRequestException")]:
        status, _, error = _both(service, "GET", path)
        assert (status, json.loads(error)["error"]["type"]) == (400 if expected == "BadRequestException" else 404,
                                                                expected)
    # Exists: 204, and 404 without a body.
    assert _both(service, "HEAD", table)[0] == 204
    assert _both(service, "HEAD", f"{base}/{NAMESPACE}/tables/missing")[:3:2] == (404, b"")
    assert _both(service, "HEAD", table, token=READ_TOKEN)[0] == 204


def test_the_fast_path_takes_plain_loads_and_leaves_the_rest_to_the_router(tmp_path: Path) -> None:
    config = tmp_path / "tablestore.yaml"
    write_config(config, f"sqlite:///{tmp_path / 'catalog.db'}", str(tmp_path / "warehouse"))
    lakehouse = load_config(config)
    catalog = ServedSqlCatalog(CATALOG, **lakehouse.catalog(CATALOG).properties)
    loads = TableLoads(Service(server_settings(lakehouse), {CATALOG: catalog}))
    try:
        def taken(method: str, path: str, query: bytes = b"") -> bool:
            return loads.target({"method": method, "path": path, "query_string": query}) is not None

        table = f"/v1/{CATALOG}/namespaces/db/tables/t"
        assert taken("GET", table) and taken("GET", table, b"snapshots=all") and taken("HEAD", table)
        assert not taken("GET", table, b"snapshots=refs") and not taken("HEAD", table, b"x=1")
        assert not taken("POST", table) and not taken("DELETE", table)
        assert not taken("GET", f"{table}/credentials") and not taken("GET", f"/v1/{CATALOG}/namespaces/db/tables")
        assert not taken("GET", "/v1/other/namespaces/db/tables/t")  # no such catalog: the router says so
    finally:
        catalog.close()


