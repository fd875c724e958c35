"""``/v1/config``'s ``endpoints`` are exactly what the service serves, and ``register-view``."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import requests

from tablestore.catalog.sql_catalog import SqlCatalog
from tests.rest.conftest import CATALOG, WRITE_TOKEN, RestService

AUTH = {"Authorization": f"Bearer {WRITE_TOKEN}"}
SCHEMA = pa.schema([pa.field("id", pa.int64())])
# Not catalog resources: the spec's endpoint list names the routes under a prefix.
# The OAuth2 endpoints are outside the spec's list of endpoints, as /v1/config is.
# The grants' admin API is tablestore's own, outside the catalog's prefix, and so is changelog
# planning (a client that does not know it must not be told the server offers a spec operation).
OUTSIDE_THE_LIST = {"GET /v1/config", "POST /v1/oauth/tokens", "POST /v1/oauth/revoke",
                    "GET /v1/admin/grants", "POST /v1/admin/grants", "DELETE /v1/admin/grants",
                    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan-changelog"}


def _served(service: RestService) -> set[str]:
    """Every route the service serves, as "METHOD path", from its OpenAPI document (FastAPI
    makes it from the app's routes)."""
    paths = requests.get(f"{service.uri}/openapi.json", timeout=30).json()["paths"]
    return {f"{method.upper()} {path}" for path, item in paths.items() for method in item}


def test_advertised_endpoints_are_exactly_the_served_routes(rest_service: RestService) -> None:
    config = requests.get(f"{rest_service.uri}/v1/config", headers=AUTH, timeout=30).json()
    advertised = config["endpoints"]
    assert len(advertised) == len(set(advertised))  # no duplicates
    served = _served(rest_service)
    assert set(advertised) == served - OUTSIDE_THE_LIST
    assert served >= OUTSIDE_THE_LIST
    assert "POST /v1/{prefix}/namespaces/{namespace}/register-view" in advertised
    # And each advertised route is routed for real: a request reaches its handler, which
    # answers about the missing object (a routing miss would be NotFoundException or 405).
    names = {"{prefix}": CATALOG, "{namespace}": f"nowhere_{uuid.uuid4().hex[:6]}", "{table}": "t",
             "{view}": "v", "{name}": "f", "{plan-id}": "no-such-plan"}
    for endpoint in advertised:
        method, route = endpoint.split(" ")
        if method == "HEAD":
            continue  # no body to tell a handler's 404 from the router's
        url = route
        for placeholder, value in names.items():
            url = url.replace(placeholder, value)
        response = requests.request(method, f"{rest_service.uri}{url}", headers=AUTH, json={}, timeout=30)
        assert response.status_code != 405, endpoint
        if response.status_code == 404:
            assert response.json()["error"]["type"] != "NotFoundException", (endpoint, response.text)


def _register(service: RestService, namespace: str, name: str, location: str) -> requests.Response:
    return requests.post(f"{service.uri}/v1/{CATALOG}/namespaces/{namespace}/register-view", headers=AUTH,
                         json={"name": name, "metadata-location": location}, timeout=30)


def test_register_view_adds_a_view_by_its_metadata_file(rest_service: RestService) -> None:
    ns = f"regview_{uuid.uuid4().hex[:8]}"
    client = rest_service.client()
    try:
        client.create_namespace(ns)
        client.create_table(f"{ns}.t", SCHEMA).append(pa.table({"id": [4, 5]}, schema=SCHEMA))
        view = client.create_view(f"{ns}.v", "SELECT id FROM t WHERE id > 4", SCHEMA, default_namespace=(ns,))
        location = view.metadata_location
        client.drop_view(f"{ns}.v")
        assert not client.view_exists(f"{ns}.v")

        response = _register(rest_service, ns, "again", location)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        assert body["metadata-location"] == location
        assert body["metadata"]["view-uuid"] == view.metadata.view_uuid
        assert body["metadata"]["versions"][0]["representations"][0]["sql"] == "SELECT id FROM t WHERE id > 4"
        loaded_location, loaded = client.load_view_metadata(f"{ns}.again")
        assert (loaded_location, loaded.view_uuid) == (location, view.metadata.view_uuid)

        taken = _register(rest_service, ns, "again", location)
        assert (taken.status_code, taken.json()["error"]["type"]) == (409, "AlreadyExistsException")
        table_name = _register(rest_service, ns, "t", location)
        assert table_name.status_code == 409
        missing_ns = _register(rest_service, f"{ns}_missing", "v", location)
        assert (missing_ns.status_code, missing_ns.json()["error"]["type"]) == (404, "NoSuchNamespaceException")
        no_file = _register(rest_service, ns, "ghost", location.replace(".metadata.json", "-gone.metadata.json"))
        assert (no_file.status_code, no_file.json()["error"]["type"]) == (404, "NotFoundException")
        assert no_file.json()["error"]["message"].startswith("Failed to open input stream for file: ")
        outside = _register(rest_service, ns, "outside", "/etc/passwd")
        assert outside.status_code == 400 and "warehouse" in outside.json()["error"]["message"]
        assert sorted(i[-1] for i in client.list_views(ns)) == ["again"]
    finally:
        client.close()

    # The row is a view row in the JDBC layout, as every other client of the database sees it.
    direct = SqlCatalog(CATALOG, **rest_service.direct_properties())
    try:
        assert direct.load_view_metadata(f"{ns}.again")[0] == location
        assert not direct.table_exists(f"{ns}.again")
    finally:
        direct.close()
