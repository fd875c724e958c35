"""What Iceberg's REST Compatibility Kit asks of the service, one behaviour at a time, over HTTP
as a Java client sends it: a missing metadata file, view schema ids, locations as requested,
Java's messages and namespace names with dots."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import requests

from tablestore.io import load_file_io
from tests.rest.conftest import CATALOG, WRITE_TOKEN, RestService, write_config

AUTH = {"Authorization": f"Bearer {WRITE_TOKEN}"}
SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _url(service: RestService, path: str) -> str:
    return f"{service.uri}/v1/{CATALOG}/{path}"


def _namespace(service: RestService, prefix: str) -> str:
    ns = f"{prefix}_{uuid.uuid4().hex[:8]}"
    created = requests.post(_url(service, "namespaces"), headers=AUTH, json={"namespace": [ns]}, timeout=30)
    assert created.status_code == 200, created.text
    return ns


def _error(response: requests.Response) -> tuple[int, str, str]:
    body: dict[str, Any] = response.json()["error"]
    return response.status_code, body["type"], body["message"]


def test_a_table_whose_metadata_file_is_gone_is_not_served_from_the_cache(rest_service: RestService) -> None:
    ns = _namespace(rest_service, "gone")
    client = rest_service.client()
    try:
        table = client.create_table(f"{ns}.t", SCHEMA)
        location = table.metadata_location
        # Loaded once, so the service has the parsed file in its cache.
        first = requests.get(_url(rest_service, f"namespaces/{ns}/tables/t"), headers=AUTH, timeout=30)
        assert first.status_code == 200 and first.json()["metadata-location"] == location
        io = load_file_io({})
        data = io.new_input(location).read()
        io.delete(location)
        try:
            missing = requests.get(_url(rest_service, f"namespaces/{ns}/tables/t"), headers=AUTH, timeout=30)
            status, kind, message = _error(missing)
            assert (status, kind) == (404, "NotFoundException")
            assert message.startswith(f"Failed to open input stream for file: {location}")
        finally:
            io.new_output(location).write(data)
        again = requests.get(_url(rest_service, f"namespaces/{ns}/tables/t"), headers=AUTH, timeout=30)
        assert again.status_code == 200 and again.json()["metadata-location"] == location
    finally:
        client.close()



def _view_version(version_id: int, schema_id: int, *queries: tuple[str, str]) -> dict[str, Any]:
    return {
        "version-id": version_id, "schema-id": schema_id, "timestamp-ms": 1_700_000_000_000,
        "summary": {"engine-name": "test"}, "default-namespace": [],
        "representations": [{"type": "sql", "sql": sql, "dialect": dialect} for dialect, sql in queries],
    }


def _schema(schema_id: int, *names: str) -> dict[str, Any]:
    return {"type": "struct", "schema-id": schema_id,
            "fields": [{"id": i + 1, "name": n, "type": "long", "required": False} for i, n in enumerate(names)]}


def test_view_schema_ids_are_renumbered_as_javas_view_metadata_does(rest_service: RestService) -> None:
    ns = _namespace(rest_service, "viewids")
    created = requests.post(_url(rest_service, f"namespaces/{ns}/views"), headers=AUTH, timeout=30, json={
        "name": "v", "schema": _schema(5, "id"), "view-version": _view_version(1, 5, ("spark", "SELECT 1 AS id")),
        "properties": {},
    })
    assert created.status_code == 200, created.text
    metadata = created.json()["metadata"]
    # The client's 5 becomes the first id, 0; the version refers to it.
    assert [s["schema-id"] for s in metadata["schemas"]] == [0]
    assert [(v["version-id"], v["schema-id"]) for v in metadata["versions"]] == [(1, 0)]
    assert metadata["current-version-id"] == 1

    replaced = requests.post(_url(rest_service, f"namespaces/{ns}/views/v"), headers=AUTH, timeout=30, json={
        "requirements": [{"type": "assert-view-uuid", "uuid": metadata["view-uuid"]}],
        "updates": [
            {"action": "add-schema", "schema": _schema(6, "id", "name")},
            {"action": "add-view-version",
             "view-version": _view_version(2, -1, ("spark", "SELECT 1 AS id, 2 AS name"))},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    })
    assert replaced.status_code == 200, replaced.text
    metadata = replaced.json()["metadata"]
    # The highest id plus 1, not the client's 6.
    assert [s["schema-id"] for s in metadata["schemas"]] == [0, 1]
    assert [(v["version-id"], v["schema-id"]) for v in metadata["versions"]] == [(1, 0), (2, 1)]
    assert metadata["current-version-id"] == 2


def test_a_view_version_with_two_queries_for_one_dialect_is_refused(rest_service: RestService) -> None:
    ns = _namespace(rest_service, "viewdialect")
    twice = _view_version(1, 0, ("trino", "SELECT 1 AS id"), ("Trino", "SELECT 2 AS id"))
    created = requests.post(_url(rest_service, f"namespaces/{ns}/views"), headers=AUTH, timeout=30, json={
        "name": "v", "schema": _schema(0, "id"), "view-version": twice, "properties": {},
    })
    assert _error(created) == (400, "IllegalArgumentException",
                               "Invalid view version: Cannot add multiple queries for dialect trino")
    exists = requests.head(_url(rest_service, f"namespaces/{ns}/views/v"), headers=AUTH, timeout=30)
    assert exists.status_code == 404

    one = _view_version(1, 0, ("trino", "SELECT 1 AS id"), ("spark", "SELECT 1 AS id"))
    created = requests.post(_url(rest_service, f"namespaces/{ns}/views"), headers=AUTH, timeout=30, json={
        "name": "v", "schema": _schema(0, "id"), "view-version": one, "properties": {},
    })
    assert created.status_code == 200, created.text
    replaced = requests.post(_url(rest_service, f"namespaces/{ns}/views/v"), headers=AUTH, timeout=30, json={
        "requirements": [],
        "updates": [{"action": "add-view-version", "view-version": {**twice, "version-id": 2}},
                    {"action": "set-current-view-version", "view-version-id": -1}],
    })
    assert _error(replaced) == (400, "IllegalArgumentException",
                                "Invalid view version: Cannot add multiple queries for dialect trino")


def test_namespace_names_may_contain_dots(rest_service: RestService) -> None:
    name = f"new.db_{uuid.uuid4().hex[:6]}"
    assert requests.head(_url(rest_service, f"namespaces/{name}"), headers=AUTH, timeout=30).status_code == 404
    created = requests.post(_url(rest_service, "namespaces"), headers=AUTH, json={"namespace": [name]}, timeout=30)
    assert created.status_code == 200 and created.json()["namespace"] == [name]
    assert requests.head(_url(rest_service, f"namespaces/{name}"), headers=AUTH, timeout=30).status_code == 204
    listed = requests.get(_url(rest_service, "namespaces"), headers=AUTH, timeout=30).json()["namespaces"]
    assert [name] in listed and name.split(".") not in listed
    # A level with a dot under another level, and a table with a dot in its name.
    child = requests.post(_url(rest_service, "namespaces"), headers=AUTH, timeout=30,
                          json={"namespace": [name, "x.y"]})
    assert child.status_code == 200, child.text
    children = requests.get(_url(rest_service, "namespaces"), headers=AUTH, params={"parent": name}, timeout=30)
    assert children.json()["namespaces"] == [[name, "x.y"]]
    client = rest_service.client()
    try:
        client.create_table((name, "x.y", "ta.ble"), SCHEMA)
        assert client.list_tables((name, "x.y")) == [(name, "x.y", "ta.ble")]
        loaded = requests.get(_url(rest_service, f"namespaces/{name}\x1fx.y/tables/ta.ble"), headers=AUTH, timeout=30)
        assert loaded.status_code == 200, loaded.text
        client.drop_table((name, "x.y", "ta.ble"))
    finally:
        client.close()
    for namespace in (f"{name}\x1fx.y", name):
        dropped = requests.delete(_url(rest_service, f"namespaces/{namespace}"), headers=AUTH, timeout=30)
        assert dropped.status_code == 204, dropped.text
    assert requests.head(_url(rest_service, f"namespaces/{name}"), headers=AUTH, timeout=30).status_code == 404


def test_the_namespace_separator_is_configurable(tmp_path: Path) -> None:
    config = tmp_path / "tablestore.yaml"
    catalog_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = str(tmp_path / "warehouse")
    write_config(config, catalog_uri, warehouse, server_extra={"namespace-separator": '"%3A%3A"'})
    service = RestService(config, catalog_uri, warehouse, tmp_path)
    service.start()
    try:
        overrides = requests.get(f"{service.uri}/v1/config", headers=AUTH, timeout=30).json()["overrides"]
        assert overrides["namespace-separator"] == "%3A%3A"
        created = requests.post(_url(service, "namespaces"), headers=AUTH, json={"namespace": ["a.b", "c"]},
                                timeout=30)
        assert created.status_code == 200, created.text
        # The advertised separator, and %1F for older clients, both split levels.
        for path in ("a.b::c", "a.b%1Fc"):
            loaded = requests.get(_url(service, f"namespaces/{path}"), headers=AUTH, timeout=30)
            assert (loaded.status_code, loaded.json()["namespace"]) == (200, ["a.b", "c"]), path
    finally:
        service.stop()


def test_locations_come_back_as_requested(rest_service: RestService) -> None:
    ns = _namespace(rest_service, "locations")
    base = os.path.abspath(rest_service.warehouse)
    location = f"file:{base}/{ns}/custom/"  # Hadoop's spelling, with a trailing slash
    metadata_path = f"file:{base}/{ns}/custom-metadata"
    created = requests.post(_url(rest_service, f"namespaces/{ns}/tables"), headers=AUTH, timeout=30, json={
        "name": "t", "schema": {"type": "struct", "schema-id": 0,
                                "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]},
        "location": location, "properties": {"write.metadata.path": metadata_path},
    })
    assert created.status_code == 200, created.text
    body = created.json()
    # Unchanged but for the trailing slash (Java strips it too); not rewritten as file:///.
    assert body["metadata"]["location"] == location.rstrip("/")
    assert body["metadata"]["properties"]["write.metadata.path"] == metadata_path
    assert body["metadata-location"].startswith(metadata_path + "/00000-")
    assert os.path.exists(body["metadata-location"].removeprefix("file:"))

    # Files are written and read under it, in the same spelling.
    client = rest_service.client()
    try:
        table = client.load_table(f"{ns}.t")
        table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
        table = client.load_table(f"{ns}.t")
        assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
        assert table.location == location.rstrip("/")
        assert table.metadata_location.startswith(metadata_path + "/00001-")
        data_file = next(iter(table.scan().plan_files())).file.file_path
        assert data_file.startswith(f"file:{base}/{ns}/custom/data/") and os.path.exists(data_file[len("file:"):])
    finally:
        client.close()

    view_location = f"file:{base}/{ns}/a-view"
    view = requests.post(_url(rest_service, f"namespaces/{ns}/views"), headers=AUTH, timeout=30, json={
        "name": "v", "schema": _schema(0, "id"), "view-version": _view_version(1, 0, ("spark", "SELECT 1 AS id")),
        "location": view_location, "properties": {},
    })
    assert view.status_code == 200, view.text
    assert view.json()["metadata"]["location"] == view_location
    assert view.json()["metadata-location"].startswith(view_location + "/metadata/")


TABLE_SCHEMA: dict[str, Any] = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def _create(service: RestService, ns: str, name: str) -> requests.Response:
    return requests.post(_url(service, f"namespaces/{ns}/tables"), headers=AUTH, timeout=30,
                         json={"name": name, "schema": TABLE_SCHEMA})


def test_errors_carry_javas_message_first(rest_service: RestService) -> None:
    ns = _namespace(rest_service, "messages")
    missing = f"nope_{uuid.uuid4().hex[:6]}"
    get = requests.get
    assert _error(get(_url(rest_service, f"namespaces/{ns}/tables/t"), headers=AUTH, timeout=30)) == (
        404, "NoSuchTableException", f"Table does not exist: {ns}.t")
    # Exactly Java's: its kit matches the whole message of a listing under a missing parent.
    assert _error(get(_url(rest_service, "namespaces"), headers=AUTH, params={"parent": missing}, timeout=30)) == (
        404, "NoSuchNamespaceException", f"Namespace does not exist: {missing}")
    assert _error(get(_url(rest_service, f"namespaces/{missing}"), headers=AUTH, timeout=30)) == (
        404, "NoSuchNamespaceException", f"Namespace does not exist: {missing}")
    again = requests.post(_url(rest_service, "namespaces"), headers=AUTH, json={"namespace": [ns]}, timeout=30)
    assert _error(again) == (409, "AlreadyExistsException", f"Namespace already exists: {ns}")

    assert _create(rest_service, ns, "a").status_code == 200
    assert _create(rest_service, ns, "b").status_code == 200
    assert _error(_create(rest_service, ns, "a")) == (409, "AlreadyExistsException", f"Table already exists: {ns}.a")
    assert _error(_create(rest_service, missing, "a")) == (
        404, "NoSuchNamespaceException", f"Namespace does not exist: {missing}")
    renamed = requests.post(_url(rest_service, "tables/rename"), headers=AUTH, timeout=30, json={
        "source": {"namespace": [ns], "name": "a"}, "destination": {"namespace": [ns], "name": "b"}})
    assert _error(renamed) == (409, "AlreadyExistsException", f"Cannot rename {ns}.a to {ns}.b. Table already exists")

    commit = requests.post(_url(rest_service, f"namespaces/{ns}/tables/a"), headers=AUTH, timeout=30, json={
        "requirements": [{"type": "assert-current-schema-id", "current-schema-id": 5}],
        "updates": [{"action": "set-properties", "updates": {"x": "1"}}]})
    assert _error(commit) == (409, "CommitFailedException",
                              "Requirement failed: current schema changed: expected id 5 != 0")

    view = requests.post(_url(rest_service, f"namespaces/{ns}/views"), headers=AUTH, timeout=30, json={
        "name": "v", "schema": _schema(0, "id"), "view-version": _view_version(1, 0, ("spark", "SELECT 1 AS id")),
        "properties": {}})
    assert view.status_code == 200, view.text
    status, kind, message = _error(_create(rest_service, ns, "v"))
    assert (status, kind) == (409, "AlreadyExistsException")
    assert message.startswith(f"View with same name already exists: {ns}.v")
    on_table = requests.post(_url(rest_service, f"namespaces/{ns}/views"), headers=AUTH, timeout=30, json={
        "name": "a", "schema": _schema(0, "id"), "view-version": _view_version(1, 0, ("spark", "SELECT 1 AS id")),
        "properties": {}})
    assert _error(on_table) == (409, "AlreadyExistsException", f"Table with same name already exists: {ns}.a")
    assert _error(get(_url(rest_service, f"namespaces/{ns}/views/w"), headers=AUTH, timeout=30)) == (
        404, "NoSuchViewException", f"View does not exist: {ns}.w")


def test_a_create_table_transaction_on_a_view_is_already_exists(rest_service: RestService) -> None:
    ns = _namespace(rest_service, "createtx")
    view = requests.post(_url(rest_service, f"namespaces/{ns}/views"), headers=AUTH, timeout=30, json={
        "name": "v", "schema": _schema(0, "id"), "view-version": _view_version(1, 0, ("spark", "SELECT 1 AS id")),
        "properties": {}})
    assert view.status_code == 200, view.text
    # A staged create, then its commit with assert-create, as Java's createTransaction sends it.
    staged = requests.post(_url(rest_service, f"namespaces/{ns}/tables"), headers=AUTH, timeout=30,
                           json={"name": "v", "schema": TABLE_SCHEMA, "stage-create": True})
    assert staged.status_code == 200, staged.text
    metadata = staged.json()["metadata"]
    updates = [
        {"action": "assign-uuid", "uuid": metadata["table-uuid"]},
        {"action": "upgrade-format-version", "format-version": 2},
        {"action": "add-schema", "schema": TABLE_SCHEMA},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-location", "location": metadata["location"]},
    ]
    commit = requests.post(_url(rest_service, f"namespaces/{ns}/tables/v"), headers=AUTH, timeout=30,
                           json={"requirements": [{"type": "assert-create"}], "updates": updates})
    status, kind, message = _error(commit)
    assert (status, kind) == (409, "AlreadyExistsException")
    assert message.startswith(f"View with same name already exists: {ns}.v")
    # The same commit on a free name creates the table; once more, it is Java's failed requirement.
    free = requests.post(_url(rest_service, f"namespaces/{ns}/tables/t"), headers=AUTH, timeout=30,
                         json={"requirements": [{"type": "assert-create"}], "updates": updates})
    assert free.status_code == 200, free.text
    twice = requests.post(_url(rest_service, f"namespaces/{ns}/tables/t"), headers=AUTH, timeout=30,
                          json={"requirements": [{"type": "assert-create"}], "updates": updates})
    assert _error(twice) == (409, "CommitFailedException", "Requirement failed: table already exists")
