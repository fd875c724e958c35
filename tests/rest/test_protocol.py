"""The REST protocol as the service speaks it: requirements, no-op commits, transactions, ETags,
stage-create, register, rename, drop with purge, every update and requirement type."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import requests

from tablestore.catalog.sql_catalog import SqlCatalog
from tests.rest.conftest import CATALOG, ON_BOTH_DATABASES, WRITE_TOKEN, RestService

pytestmark = ON_BOTH_DATABASES  # commits, transactions, renames and purges are the database's

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
AUTH = {"Authorization": f"Bearer {WRITE_TOKEN}"}


def _ns() -> str:
    return f"ns_{uuid.uuid4().hex[:8]}"


def _url(service: RestService, path: str) -> str:
    return f"{service.uri}/v1/{CATALOG}/{path}"


def _table(service: RestService, rows: int = 0) -> tuple[str, str]:
    ns = _ns()
    client = service.client()
    try:
        client.create_namespace(ns)
        table = client.create_table(f"{ns}.t", SCHEMA)
        for i in range(rows):
            table.append(pa.table({"id": [i], "name": [f"n{i}"]}, schema=SCHEMA))
            table = client.load_table(f"{ns}.t")
    finally:
        client.close()
    return ns, f"namespaces/{ns}/tables/t"


def _load(service: RestService, path: str, **params: str) -> dict[str, Any]:
    response = requests.get(_url(service, path), headers=AUTH, params=params, timeout=30)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _commit(service: RestService, path: str, requirements: list[Any], updates: list[Any]) -> requests.Response:
    return requests.post(_url(service, path), headers=AUTH, timeout=30,
                         json={"requirements": requirements, "updates": updates})


def _metadata_files(service: RestService, ns: str, table: str = "t") -> list[str]:
    return sorted(p.name for p in (Path(service.warehouse) / ns / table / "metadata").glob("*.metadata.json"))


def test_stale_requirements_get_409_and_the_retry_succeeds(rest_service: RestService,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    ns, path = _table(rest_service, rows=1)
    stale = _load(rest_service, path)["metadata"]["current-snapshot-id"]
    py = rest_service.pyiceberg()
    first, second = py.load_table(f"{ns}.t"), py.load_table(f"{ns}.t")
    first.append(pa.table({"id": [10], "name": ["a"]}, schema=SCHEMA))

    response = _commit(rest_service, path, [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": stale}],
                       [{"action": "set-properties", "updates": {"k": "v"}}])
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == 409 and error["type"] == "CommitFailedException" and "main" in error["message"]
    assert "k" not in _load(rest_service, path)["metadata"]["properties"]

    # pyiceberg's append on the stale table gets the 409, refreshes and retries.
    second.append(pa.table({"id": [20], "name": ["b"]}, schema=SCHEMA))
    assert "Commit failed due to a concurrent update, retrying" in caplog.text
    ids = sorted(py.load_table(f"{ns}.t").scan().to_arrow().column("id").to_pylist())
    assert ids == [0, 10, 20]


def test_a_commit_that_changes_nothing_writes_no_metadata_file(rest_service: RestService) -> None:
    ns, path = _table(rest_service)
    before = _load(rest_service, path)
    files = _metadata_files(rest_service, ns)
    uuid_ = before["metadata"]["table-uuid"]
    for updates in ([], [{"action": "set-properties", "updates": {}}],
                    [{"action": "remove-properties", "removals": ["absent"]}],
                    [{"action": "set-current-schema", "schema-id": before["metadata"]["current-schema-id"]}]):
        response = _commit(rest_service, path, [{"type": "assert-table-uuid", "uuid": uuid_}], updates)
        assert response.status_code == 200, response.text
        assert response.json()["metadata-location"] == before["metadata-location"]
    assert _metadata_files(rest_service, ns) == files


def test_a_multi_table_transaction_commits_all_tables_or_none(rest_service: RestService) -> None:
    ns = _ns()
    client = rest_service.client()
    client.create_namespace(ns)
    a, b = client.create_table(f"{ns}.a", SCHEMA), client.create_table(f"{ns}.b", SCHEMA)
    client.close()

    def change(name: str, uuid_: str, value: str) -> dict[str, Any]:
        return {"identifier": {"namespace": [ns], "name": name},
                "requirements": [{"type": "assert-table-uuid", "uuid": uuid_}],
                "updates": [{"action": "set-properties", "updates": {"owner": value}}]}

    url = _url(rest_service, "transactions/commit")
    bad = change("b", str(uuid.uuid4()), "x")
    response = requests.post(url, headers=AUTH, timeout=30,
                             json={"table-changes": [change("a", a.metadata.table_uuid, "x"), bad]})
    assert response.status_code == 409
    assert response.json()["error"]["type"] == "CommitFailedException"
    assert _metadata_files(rest_service, ns, "a") == [a.metadata_location.rsplit("/", 1)[1]]
    assert _metadata_files(rest_service, ns, "b") == [b.metadata_location.rsplit("/", 1)[1]]
    direct = SqlCatalog(CATALOG, **rest_service.direct_properties())
    try:
        assert direct.load_table(f"{ns}.a").metadata_location == a.metadata_location
        assert direct.load_table(f"{ns}.b").metadata_location == b.metadata_location

        response = requests.post(url, headers=AUTH, timeout=30, json={"table-changes": [
            change("a", a.metadata.table_uuid, "x"), change("b", b.metadata.table_uuid, "y")]})
        assert response.status_code == 204, response.text
        assert direct.load_table(f"{ns}.a").metadata.properties["owner"] == "x"
        assert direct.load_table(f"{ns}.b").metadata.properties["owner"] == "y"
    finally:
        direct.close()

    # The client's commit_tables goes through the same endpoint.
    from tablestore.spec.metadata.update_models import AssertTableUUID, SetPropertiesUpdate

    client = rest_service.client()
    try:
        a, b = client.load_table(f"{ns}.a"), client.load_table(f"{ns}.b")
        results = client.commit_tables([
            ((ns, "a"), [AssertTableUUID(uuid=a.metadata.table_uuid)], [SetPropertiesUpdate(updates={"owner": "z"})]),
            ((ns, "b"), [AssertTableUUID(uuid=b.metadata.table_uuid)], [SetPropertiesUpdate(updates={"owner": "z"})]),
        ])
        assert [m.properties["owner"] for _, m in results] == ["z", "z"]
    finally:
        client.close()


def test_load_table_etag_304_and_snapshots_refs(rest_service: RestService) -> None:
    _, path = _table(rest_service, rows=2)
    response = requests.get(_url(rest_service, path), headers=AUTH, timeout=30)
    etag = response.headers["ETag"]
    assert len(response.json()["metadata"]["snapshots"]) == 2
    again = requests.get(_url(rest_service, path), headers={**AUTH, "If-None-Match": etag}, timeout=30)
    assert again.status_code == 304 and again.content == b""

    refs = _load(rest_service, path, snapshots="refs")
    current = refs["metadata"]["current-snapshot-id"]
    assert [s["snapshot-id"] for s in refs["metadata"]["snapshots"]] == [current]

    assert _commit(rest_service, path, [], [{"action": "set-properties", "updates": {"a": "b"}}]).status_code == 200
    changed = requests.get(_url(rest_service, path), headers={**AUTH, "If-None-Match": etag}, timeout=30)
    assert changed.status_code == 200 and changed.headers["ETag"] != etag
    assert changed.json()["metadata"]["properties"]["a"] == "b"


def test_stage_create_writes_nothing_until_the_transaction_commits(rest_service: RestService) -> None:
    ns = _ns()
    py = rest_service.pyiceberg()
    py.create_namespace(ns)
    response = requests.post(_url(rest_service, f"namespaces/{ns}/tables"), headers=AUTH, timeout=30, json={
        "name": "staged", "stage-create": True,
        "schema": {"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "id", "type": "long", "required": False}]},
    })
    assert response.status_code == 200, response.text
    assert response.json()["metadata-location"] is None
    assert not py.table_exists(f"{ns}.staged")
    # Only the empty metadata/ directory, for clients that write manifests before the commit.
    staged = Path(rest_service.warehouse) / ns / "staged"
    assert [p.relative_to(staged).as_posix() for p in staged.rglob("*")] == ["metadata"]

    with py.create_table_transaction(f"{ns}.created", schema=SCHEMA) as txn:
        txn.set_properties(stage="yes")
    table = py.load_table(f"{ns}.created")
    assert table.properties["stage"] == "yes"
    assert [f.name for f in table.schema().fields] == ["id", "name"]


def test_register_rename_and_drop_with_purge(rest_service: RestService) -> None:
    ns, _ = _table(rest_service, rows=1)
    client = rest_service.client()
    try:
        table = client.load_table(f"{ns}.t")
        client.drop_table(f"{ns}.t")
        assert not client.table_exists(f"{ns}.t")
        registered = client.register_table(f"{ns}.again", table.metadata_location)
        assert registered.metadata_location == table.metadata_location
        renamed = client.rename_table(f"{ns}.again", f"{ns}.renamed")
        assert renamed.scan().to_arrow().column("id").to_pylist() == [0]
        assert client.list_tables(ns) == [(ns, "renamed")]

        table_dir = Path(rest_service.warehouse) / ns / "t"
        assert any(table_dir.rglob("*.parquet"))
        client.drop_table(f"{ns}.renamed", purge=True)
        assert not any(table_dir.rglob("*"))
    finally:
        client.close()


def test_every_update_type_is_applied(rest_service: RestService) -> None:
    ns, path = _table(rest_service, rows=2)
    md = _load(rest_service, path)["metadata"]
    snapshots = [s["snapshot-id"] for s in md["snapshots"]]
    new_schema = {"type": "struct", "schema-id": 1, "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "name", "type": "string", "required": False},
        {"id": 3, "name": "extra", "type": "int", "required": False}]}
    statistics = {"snapshot-id": snapshots[1], "statistics-path": f"{md['location']}/metadata/s.puffin",
                  "file-size-in-bytes": 10, "file-footer-size-in-bytes": 5, "blob-metadata": []}
    part_stats = {"snapshot-id": snapshots[1], "statistics-path": f"{md['location']}/metadata/p.parquet",
                  "file-size-in-bytes": 10}
    steps: list[list[dict[str, Any]]] = [
        [{"action": "assign-uuid", "uuid": md["table-uuid"]},
         {"action": "upgrade-format-version", "format-version": 2},
         {"action": "add-schema", "schema": new_schema},
         {"action": "set-current-schema", "schema-id": -1},
         {"action": "add-spec", "spec": {"spec-id": 1, "fields": [
             {"source-id": 2, "field-id": 1000, "name": "name", "transform": "identity"}]}},
         {"action": "set-default-spec", "spec-id": -1},
         {"action": "add-sort-order", "sort-order": {"order-id": 1, "fields": [
             {"source-id": 1, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}]}},
         {"action": "set-default-sort-order", "sort-order-id": -1},
         {"action": "set-properties", "updates": {"a": "1", "b": "2"}},
         {"action": "remove-properties", "removals": ["b"]},
         {"action": "set-location", "location": md["location"]},
         {"action": "set-snapshot-ref", "ref-name": "tag1", "type": "tag", "snapshot-id": snapshots[0]},
         {"action": "set-statistics", "statistics": statistics},
         {"action": "set-partition-statistics", "partition-statistics": part_stats}],
        [{"action": "remove-snapshot-ref", "ref-name": "tag1"},
         {"action": "remove-statistics", "snapshot-id": snapshots[1]},
         {"action": "remove-partition-statistics", "snapshot-id": snapshots[1]}],
        [{"action": "set-default-spec", "spec-id": 0}, {"action": "remove-partition-specs", "spec-ids": [1]},
         {"action": "set-current-schema", "schema-id": 0}, {"action": "remove-schemas", "schema-ids": [1]},
         {"action": "remove-snapshots", "snapshot-ids": [snapshots[0]]}],
    ]
    results = []
    for updates in steps:
        response = _commit(rest_service, path, [], updates)
        assert response.status_code == 200, response.text
        results.append(response.json()["metadata"])
    first, second, third = results
    assert first["current-schema-id"] == 1 and first["default-spec-id"] == 1 and first["default-sort-order-id"] == 1
    assert first["properties"] == {"a": "1"}
    assert first["refs"]["tag1"] == {"snapshot-id": snapshots[0], "type": "tag"}
    assert [s["statistics-path"] for s in first["statistics"]] == [statistics["statistics-path"]]
    assert [s["statistics-path"] for s in first["partition-statistics"]] == [part_stats["statistics-path"]]
    assert "tag1" not in second["refs"] and second["statistics"] == [] and second["partition-statistics"] == []
    assert [s["spec-id"] for s in third["partition-specs"]] == [0]
    assert [s["schema-id"] for s in third["schemas"]] == [0]
    assert [s["snapshot-id"] for s in third["snapshots"]] == [snapshots[1]]
    assert SqlCatalog(CATALOG, **rest_service.direct_properties()).load_table(f"{ns}.t").metadata.to_json() == third


REQUIREMENTS = [
    {"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"},
    {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 1},
    {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 99},
    {"type": "assert-current-schema-id", "current-schema-id": 7},
    {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 1500},
    {"type": "assert-default-spec-id", "default-spec-id": 3},
    {"type": "assert-default-sort-order-id", "default-sort-order-id": 4},
    {"type": "assert-create"},
]


def test_every_requirement_type_is_checked(rest_service: RestService) -> None:
    _, path = _table(rest_service)
    md = _load(rest_service, path)["metadata"]
    for failing in REQUIREMENTS:
        response = _commit(rest_service, path, [failing], [{"action": "set-properties", "updates": {"x": "1"}}])
        assert response.status_code == 409, failing
    holding = [
        {"type": "assert-table-uuid", "uuid": md["table-uuid"]},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None},
        {"type": "assert-last-assigned-field-id", "last-assigned-field-id": md["last-column-id"]},
        {"type": "assert-current-schema-id", "current-schema-id": md["current-schema-id"]},
        {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": md["last-partition-id"]},
        {"type": "assert-default-spec-id", "default-spec-id": md["default-spec-id"]},
        {"type": "assert-default-sort-order-id", "default-sort-order-id": md["default-sort-order-id"]},
    ]
    response = _commit(rest_service, path, holding, [{"action": "set-properties", "updates": {"x": "1"}}])
    assert response.status_code == 200, response.text
    assert _load(rest_service, path)["metadata"]["properties"] == {"x": "1"}


def test_errors_have_the_spec_shape_and_status(rest_service: RestService) -> None:
    ns, path = _table(rest_service)
    cases: list[tuple[str, str, dict[str, Any] | None, int, str]] = [
        ("GET", f"namespaces/{ns}/tables/missing", None, 404, "NoSuchTableException"),
        ("GET", "namespaces/nope", None, 404, "NoSuchNamespaceException"),
        ("POST", "namespaces", {"namespace": [ns]}, 409, "AlreadyExistsException"),
        ("DELETE", f"namespaces/{ns}", None, 409, "NamespaceNotEmptyException"),
        ("POST", "namespaces", {"namespace": ["..", "x"]}, 400, "BadRequestException"),
        ("POST", "namespaces", {"namespace": "notalist"}, 400, "BadRequestException"),
        ("POST", path, {"updates": [{"action": "bogus"}]}, 400, "BadRequestException"),
        ("POST", path, {"updates": [{"action": "set-location", "location": "/etc/evil"}]}, 400, "BadRequestException"),
        ("POST", f"namespaces/{ns}/tables", {"name": "x", "location": "/tmp/elsewhere", "schema": {
            "type": "struct", "fields": []}}, 400, "BadRequestException"),
        ("POST", f"namespaces/{ns}/register", {"name": "x", "metadata-location": "/etc/passwd"}, 400,
         "BadRequestException"),
        ("POST", "namespaces", {"namespace": [ns + "_w"], "properties": {"location": "/var/other"}}, 400,
         "BadRequestException"),
    ]
    for method, sub, body, status, kind in cases:
        response = requests.request(method, _url(rest_service, sub), headers=AUTH, json=body, timeout=30)
        assert response.status_code == status, (method, sub, response.text)
        assert response.json() == {"error": {"message": response.json()["error"]["message"], "type": kind,
                                              "code": status}}
        assert response.json()["error"]["message"]


def test_namespaces_list_with_parent_exists_and_properties(rest_service: RestService) -> None:
    ns = _ns()
    client = rest_service.client()
    try:
        client.create_namespace(ns, {"a": "1"})
        client.create_namespace((ns, "child"))
        client.create_namespace((ns, "child2"))
        assert (ns,) in client.list_namespaces()
        assert client.list_namespaces(ns) == [(ns, "child"), (ns, "child2")]
        assert client.namespace_exists((ns, "child")) and not client.namespace_exists((ns, "nope"))
        summary = client.update_namespace_properties(ns, {"a", "zz"}, {"b": "2"})
        assert (summary.removed, summary.updated, summary.missing) == (["a"], ["b"], ["zz"])
        # With the default location the service answers for a namespace that has none.
        properties = client.load_namespace_properties(ns)
        assert properties == {"b": "2", "location": properties["location"]}
        assert properties["location"].endswith(f"/warehouse/{ns}")
        client.drop_namespace((ns, "child2"))
        assert client.list_namespaces(ns) == [(ns, "child")]
        pages = requests.get(_url(rest_service, "namespaces"), headers=AUTH, timeout=30,
                             params={"parent": ns, "pageSize": "1"}).json()
        assert pages == {"namespaces": [[ns, "child"]], "next-page-token": None}
    finally:
        client.close()


def test_a_nul_character_in_a_namespace_property_is_refused_with_400_on_either_database(
        rest_service: RestService) -> None:
    """PostgreSQL's text cannot hold NUL (it answered 500, found by schemathesis); SQLite can. The
    catalog refuses it on both, naming the property, and creates or changes nothing."""
    ns = _ns()
    for properties in ({"k": "v\x00"}, {"k\x00": "v"}):
        created = requests.post(_url(rest_service, "namespaces"), headers=AUTH, timeout=30,
                                json={"namespace": [ns], "properties": properties})
        assert created.status_code == 400, created.text
        assert "NUL character" in created.json()["error"]["message"]
    assert requests.head(_url(rest_service, f"namespaces/{ns}"), headers=AUTH, timeout=30).status_code == 404
    assert requests.post(_url(rest_service, "namespaces"), headers=AUTH, timeout=30,
                         json={"namespace": [ns], "properties": {"k": "v"}}).status_code == 200
    changed = requests.post(_url(rest_service, f"namespaces/{ns}/properties"), headers=AUTH, timeout=30,
                            json={"removals": [], "updates": {"k": "w\x00"}})
    assert changed.status_code == 400 and "NUL character" in changed.json()["error"]["message"]
    properties = requests.get(_url(rest_service, f"namespaces/{ns}"), headers=AUTH, timeout=30).json()
    assert properties["properties"]["k"] == "v"


def test_views_create_load_replace_rename_drop(rest_service: RestService) -> None:
    ns, _ = _table(rest_service)
    client = rest_service.client()
    direct = SqlCatalog(CATALOG, **rest_service.direct_properties())
    try:
        view = client.create_view(f"{ns}.v", "SELECT id FROM t", pa.schema([pa.field("id", pa.int64())]),
                                  default_namespace=(ns,), comment="first")
        assert view.sql == "SELECT id FROM t" and view.comment == "first"
        assert client.list_views(ns) == [(ns, "v")] and client.view_exists(f"{ns}.v")
        assert direct.load_view(f"{ns}.v").sql == "SELECT id FROM t"

        replaced = client.create_view(f"{ns}.v", "SELECT id, name FROM t", SCHEMA, default_namespace=(ns,),
                                      replace=True)
        assert replaced.sql == "SELECT id, name FROM t" and replaced.metadata.current_version_id == 2
        assert direct.load_view(f"{ns}.v").metadata.current_version_id == 2
        same = client.create_view(f"{ns}.v", "SELECT id, name FROM t", SCHEMA, default_namespace=(ns,),
                                  replace=True)
        assert same.metadata_location == replaced.metadata_location

        client.rename_view(f"{ns}.v", f"{ns}.w")
        assert client.list_views(ns) == [(ns, "w")]
        assert [p.name for p in SCHEMA] == [f.name for f in client.load_view(f"{ns}.w").schema.fields]
        from tablestore.errors import ViewAlreadyExistsError

        with pytest.raises(ViewAlreadyExistsError):
            client.create_view(f"{ns}.t", "SELECT 1", SCHEMA)
        client.drop_view(f"{ns}.w")
        assert client.list_views(ns) == []
    finally:
        client.close()
        direct.close()


def test_functions_extension_endpoints(rest_service: RestService) -> None:
    from tablestore.errors import FunctionAlreadyExistsError, NoSuchFunctionError

    ns = _ns()
    client = rest_service.client()
    try:
        client.create_namespace(ns)
        created = client.create_function(f"{ns}.f", "com.example.Upper", "string", properties={"k": "v"})
        assert (created.identifier, created.class_name, created.return_type) == ((ns, "f"), "com.example.Upper",
                                                                                   "string")
        assert client.list_functions(ns) == [(ns, "f")]
        assert client.load_function(f"{ns}.f").properties == {"k": "v"}
        with pytest.raises(FunctionAlreadyExistsError):
            client.create_function(f"{ns}.f", "x.Y")
        client.create_function(f"{ns}.f", "x.Y", replace=True)
        direct = SqlCatalog(CATALOG, **rest_service.direct_properties())
        assert direct.load_function(f"{ns}.f").class_name == "x.Y"
        direct.close()
        client.drop_function(f"{ns}.f")
        assert not client.function_exists(f"{ns}.f")
        with pytest.raises(NoSuchFunctionError):
            client.load_function(f"{ns}.f")
    finally:
        client.close()


def test_metrics_reports_are_accepted_and_config_lists_the_endpoints(rest_service: RestService) -> None:
    _, path = _table(rest_service)
    report: dict[str, Any] = {"report-type": "commit-report", "table-name": "t", "snapshot-id": 1, "sequence-number": 1,
              "operation": "append", "metrics": {}}
    response = requests.post(_url(rest_service, f"{path}/metrics"), headers=AUTH, json=report, timeout=30)
    assert response.status_code == 204 and response.content == b""

    config = requests.get(f"{rest_service.uri}/v1/config", headers=AUTH, timeout=30).json()
    assert config["overrides"]["prefix"] == CATALOG
    endpoints = set(config["endpoints"])
    for expected in ("POST /v1/{prefix}/transactions/commit", "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
                     "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
                     "GET /v1/{prefix}/namespaces/{namespace}/functions"):
        assert expected in endpoints
    # Every listed endpoint is a route of the OpenAPI document.
    paths = requests.get(f"{rest_service.uri}/openapi.json", timeout=30).json()["paths"]
    for endpoint in endpoints:
        method, route = endpoint.split(" ")
        assert method.lower() in paths[route], endpoint
    other = requests.get(f"{rest_service.uri}/v1/config", headers=AUTH, params={"warehouse": "nope"}, timeout=30)
    assert other.status_code == 404


def test_v3_only_types_are_refused_in_a_v2_table_with_400(rest_service: RestService) -> None:
    """DuckDB, iceberg-rust, pyiceberg and Java fail on a v2 table holding timestamp_ns; Java
    refuses to write one, and so does the service, on create and on commit."""
    ns, path = _table(rest_service)
    nanos: dict[str, Any] = {"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "id", "required": False, "type": "long"},
        {"id": 2, "name": "at", "required": False, "type": "timestamptz_ns"},
    ]}
    create = requests.post(_url(rest_service, f"namespaces/{ns}/tables"), headers=AUTH, timeout=30,
                           json={"name": "nanos", "schema": nanos})
    assert create.status_code == 400, create.text
    message = create.json()["error"]["message"]
    assert "'at'" in message and "timestamptz_ns" in message and "format version 3" in message
    assert "use timestamptz (microseconds)" in message
    assert requests.head(_url(rest_service, f"namespaces/{ns}/tables/nanos"), headers=AUTH, timeout=30
                         ).status_code == 404

    before = _metadata_files(rest_service, ns)
    commit = _commit(rest_service, path, [], [{"action": "add-schema", "schema": {**nanos, "schema-id": 1},
                                               "last-column-id": 2},
                                              {"action": "set-current-schema", "schema-id": -1}])
    assert commit.status_code == 400, commit.text
    assert "'at'" in commit.json()["error"]["message"]
    assert _metadata_files(rest_service, ns) == before

    # The check is keyed on the format version: a v3 table holds nanosecond timestamps.
    v3 = requests.post(_url(rest_service, f"namespaces/{ns}/tables"), headers=AUTH, timeout=30,
                       json={"name": "v3", "schema": nanos, "properties": {"format-version": "3"}})
    assert v3.status_code == 200, v3.text
    metadata = v3.json()["metadata"]
    assert metadata["format-version"] == 3
    assert [f["type"] for f in metadata["schemas"][0]["fields"]] == ["long", "timestamptz_ns"]


def test_duckdb_create_table_as_select_works_on_a_local_warehouse(rest_service: RestService,
                                                                  tmp_path: Path) -> None:
    """DuckDB stage-creates the table, writes its data file and first manifests into the table's
    location, then commits with assert-create. It creates no directories for its manifests, so on
    a local warehouse the stage-create must leave ``metadata/`` in place (DuckDB's commit failed
    with "Cannot open file .../metadata/<uuid>-m0.avro: No such file or directory")."""
    from tablestore.catalog.sql_catalog import SqlCatalog
    from tests.interop.readers import duckdb_connect

    ns = _ns()
    con = duckdb_connect(tmp_path / "duckdb-ext")
    try:
        con.execute(f"CREATE SECRET lake_auth (TYPE iceberg, TOKEN '{WRITE_TOKEN}')")
        con.execute(f"ATTACH '{CATALOG}' AS lake (TYPE iceberg, ENDPOINT '{rest_service.uri}', SECRET lake_auth)")
        con.execute(f"CREATE SCHEMA lake.{ns}")
        con.execute(f"CREATE TABLE lake.{ns}.copy AS SELECT range AS id, 'r' || range AS name FROM range(3)")
        assert con.execute(f"SELECT id, name FROM lake.{ns}.copy ORDER BY id").fetchall() == [
            (0, "r0"), (1, "r1"), (2, "r2")]
    finally:
        con.close()
    assert (Path(rest_service.warehouse) / ns / "copy" / "metadata").is_dir()
    direct = SqlCatalog(CATALOG, **rest_service.direct_properties())
    try:
        table = direct.load_table(f"{ns}.copy")
        assert table.scan().to_arrow().sort_by("id").to_pydict() == {"id": [0, 1, 2], "name": ["r0", "r1", "r2"]}
        assert table.metadata.location == f"file://{rest_service.warehouse}/{ns}/copy"
    finally:
        direct.close()
