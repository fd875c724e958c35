"""Grants enforced by every endpoint of the catalog service (``server.authorization: grants``).

One service per catalog database (SQLite, PostgreSQL) for the module. Each endpoint (on SQLite)
is called by ``alice`` three times: holding nothing (403 naming the privilege and the object), holding
every other privilege on the object (still 403: the one named is the one needed), and holding
just the privilege it needs (the endpoint's own answer). Inheritance, roles, listings, the admin
API and the grants table run on both databases.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest
import requests
from sqlalchemy import create_engine

from tablestore.rest.auth.grants import TABLE_PRIVILEGES, Grant, Grantee, GrantStore, Privilege, Securable
from tests.rest.conftest import BACKENDS
from tests.rest.grant_fixtures import ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, CAROL_TOKEN, Admin, start_grants_service
from tests.services import CATALOG, RestService

SCHEMA = pa.schema([pa.field("id", pa.int64())])
SCHEMA_JSON = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}]}
NS = "sales"
INNER = ("sales", "inner")


@dataclass
class Lake:
    service: RestService
    admin: Admin
    # The same grants table the service reads, written directly: the matrix below grants and
    # revokes hundreds of times, and the admin API has tests of its own.
    store: GrantStore

    def grant(self, privilege: str, kind: str, name: tuple[str, ...], grantee: str = "alice") -> None:
        assert self.store.grant(Grant(Securable(kind, name), Privilege(privilege), Grantee("principal", grantee)),
                                "test")

    def clear(self, grantee: str = "alice") -> None:
        for grant in self.store.grants([Grantee("principal", grantee)]):
            self.store.revoke(grant)

    def call(self, method: str, path: str, token: str = ALICE_TOKEN, body: Any = None,
             params: dict[str, str] | None = None) -> requests.Response:
        return requests.request(method, f"{self.service.uri}/v1/{CATALOG}/{path}", json=body, params=params,
                                headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def as_admin(self) -> Any:
        return self.service.client(ADMIN_TOKEN)


@pytest.fixture(scope="module")
def lake(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    """One service per catalog database for the module: tests name theirs (``indirect``)."""
    workdir = tmp_path_factory.mktemp("grants")
    uri = f"sqlite:///{workdir / 'catalog.db'}" if request.param == "sqlite" else \
        request.getfixturevalue("postgres_server").create_database()
    service = start_grants_service(workdir, uri, str(workdir / "warehouse"))
    client = service.client(ADMIN_TOKEN)
    engine = create_engine(uri)
    try:
        client.create_namespace(NS)
        client.create_namespace(INNER)
        client.create_table(f"{NS}.t", SCHEMA).append(pa.table({"id": [1, 2]}, schema=SCHEMA))
        client.create_view(f"{NS}.v", "SELECT id FROM t", SCHEMA, default_namespace=(NS,))
        client.create_function(f"{NS}.f", "com.example.F")
        yield Lake(service, Admin(service), GrantStore(engine, CATALOG))
    finally:
        client.close()
        engine.dispose()
        service.stop()


def _fresh(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


# -- the cases: what each endpoint needs, on what ----------------------------------------------------


@dataclass
class Case:
    """One endpoint: the request (made after ``setup``, which returns names for it), the grants it
    needs (each on its securable), and its answer once they are held."""

    id: str
    request: Callable[[dict[str, str]], tuple[str, str, Any]]
    needs: list[tuple[str, str, tuple[str, ...]]]  # (privilege, securable type, name) with {placeholders}
    status: int
    setup: Callable[[Lake], dict[str, str]] = field(default=lambda _lake: {})
    # Listing and loading namespaces show what any privilege reaches; for them, other privileges
    # on the object are not refused, so that step is skipped.
    any_privilege_shows: bool = False


def _new_table(lake: Lake) -> dict[str, str]:
    name = _fresh("t")
    client = lake.as_admin()
    try:
        client.create_table(f"{NS}.{name}", SCHEMA)
    finally:
        client.close()
    return {"name": name}


def _new_view(lake: Lake) -> dict[str, str]:
    name = _fresh("v")
    client = lake.as_admin()
    try:
        client.create_view(f"{NS}.{name}", "SELECT 1", SCHEMA, default_namespace=(NS,))
    finally:
        client.close()
    return {"name": name}


def _new_function(lake: Lake) -> dict[str, str]:
    name = _fresh("f")
    client = lake.as_admin()
    try:
        client.create_function(f"{NS}.{name}", "com.example.F")
    finally:
        client.close()
    return {"name": name}


def _new_namespace(lake: Lake) -> dict[str, str]:
    name = _fresh("ns")
    client = lake.as_admin()
    try:
        client.create_namespace(name)
    finally:
        client.close()
    return {"name": name}


def _dropped_table(lake: Lake) -> dict[str, str]:
    """A table dropped without purge: its metadata file is left to register."""
    client = lake.as_admin()
    name = _fresh("t")
    try:
        location = client.create_table(f"{NS}.{name}", SCHEMA).metadata_location
        client.drop_table(f"{NS}.{name}")
    finally:
        client.close()
    return {"name": name, "location": location}


def _dropped_view(lake: Lake) -> dict[str, str]:
    client = lake.as_admin()
    name = _fresh("v")
    try:
        location = client.create_view(f"{NS}.{name}", "SELECT 1", SCHEMA, default_namespace=(NS,)).metadata_location
        client.drop_view(f"{NS}.{name}")
    finally:
        client.close()
    return {"name": name, "location": location}


def _view_body(name: str) -> dict[str, Any]:
    return {"name": name, "schema": SCHEMA_JSON, "properties": {},
            "view-version": {"version-id": 1, "timestamp-ms": int(time.time() * 1000), "schema-id": 0,
                             "summary": {}, "default-namespace": [NS],
                             "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"}]}}


T = ("table", (NS, "t"))
CASES = [
    # namespaces
    Case("list namespaces", lambda _: ("GET", f"namespaces?parent={NS}", None), [("LIST", "namespace", (NS,))], 200,
         any_privilege_shows=True),
    Case("load namespace", lambda _: ("GET", f"namespaces/{NS}", None), [("LIST", "namespace", (NS,))], 200,
         any_privilege_shows=True),
    Case("namespace exists", lambda _: ("HEAD", f"namespaces/{NS}", None), [("LIST", "namespace", (NS,))], 204,
         any_privilege_shows=True),
    Case("create namespace", lambda _: ("POST", "namespaces", {"namespace": [NS, _fresh("n")]}),
         [("CREATE", "namespace", (NS,))], 200),
    Case("create top-level namespace", lambda _: ("POST", "namespaces", {"namespace": [_fresh("n")]}),
         [("CREATE", "catalog", ())], 200),
    Case("update namespace properties", lambda _: ("POST", f"namespaces/{NS}/properties", {"updates": {"k": "v"}}),
         [("WRITE", "namespace", (NS,))], 200),
    Case("drop namespace", lambda n: ("DELETE", f"namespaces/{n['name']}", None),
         [("DROP", "namespace", ("{name}",))], 204, _new_namespace),
    # tables
    Case("list tables", lambda _: ("GET", f"namespaces/{NS}/tables", None), [("LIST", "namespace", (NS,))], 200,
         any_privilege_shows=True),
    Case("create table", lambda _: ("POST", f"namespaces/{NS}/tables", {"name": _fresh("t"), "schema": SCHEMA_JSON}),
         [("CREATE", "namespace", (NS,))], 200),
    Case("register table",
         lambda n: ("POST", f"namespaces/{NS}/register", {"name": n["name"], "metadata-location": n["location"]}),
         [("CREATE", "namespace", (NS,))], 200, _dropped_table),
    Case("load table", lambda _: ("GET", f"namespaces/{NS}/tables/t", None), [("READ", *T)], 200),
    Case("table exists", lambda _: ("HEAD", f"namespaces/{NS}/tables/t", None), [("READ", *T)], 204),
    Case("commit table",
         lambda _: ("POST", f"namespaces/{NS}/tables/t",
                    {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}),
         [("WRITE", *T)], 200),
    Case("commit transaction",
         lambda _: ("POST", "transactions/commit",
                    {"table-changes": [{"identifier": {"namespace": [NS], "name": "t"}, "requirements": [],
                                        "updates": [{"action": "set-properties", "updates": {"x": "y"}}]}]}),
         [("WRITE", *T)], 204),
    Case("drop table", lambda n: ("DELETE", f"namespaces/{NS}/tables/{n['name']}", None),
         [("DROP", "table", (NS, "{name}"))], 204, _new_table),
    Case("rename table",
         lambda n: ("POST", "tables/rename", {"source": {"namespace": [NS], "name": n["name"]},
                                              "destination": {"namespace": list(INNER), "name": n["name"]}}),
         [("DROP", "table", (NS, "{name}")), ("CREATE", "namespace", INNER)], 204, _new_table),
    Case("report metrics", lambda _: ("POST", f"namespaces/{NS}/tables/t/metrics", {"report-type": "scan-report"}),
         [("READ", *T)], 204),
    Case("load credentials", lambda _: ("GET", f"namespaces/{NS}/tables/t/credentials", None), [("READ", *T)], 200),
    Case("plan scan", lambda _: ("POST", f"namespaces/{NS}/tables/t/plan", {}), [("READ", *T)], 200),
    # Past the check, an unknown plan id is the plan store's 404.
    Case("fetch plan", lambda _: ("GET", f"namespaces/{NS}/tables/t/plan/no-such-plan", None), [("READ", *T)], 404),
    Case("cancel plan", lambda _: ("DELETE", f"namespaces/{NS}/tables/t/plan/no-such-plan", None),
         [("READ", *T)], 404),
    Case("fetch scan tasks", lambda _: ("POST", f"namespaces/{NS}/tables/t/tasks", {"plan-task": "no-such:1"}),
         [("READ", *T)], 404),
    # views (tables, for grants)
    Case("list views", lambda _: ("GET", f"namespaces/{NS}/views", None), [("LIST", "namespace", (NS,))], 200,
         any_privilege_shows=True),
    Case("create view", lambda _: ("POST", f"namespaces/{NS}/views", _view_body(_fresh("v"))),
         [("CREATE", "namespace", (NS,))], 200),
    Case("register view",
         lambda n: ("POST", f"namespaces/{NS}/register-view", {"name": n["name"], "metadata-location": n["location"]}),
         [("CREATE", "namespace", (NS,))], 200, _dropped_view),
    Case("load view", lambda _: ("GET", f"namespaces/{NS}/views/v", None), [("READ", "table", (NS, "v"))], 200),
    Case("view exists", lambda _: ("HEAD", f"namespaces/{NS}/views/v", None), [("READ", "table", (NS, "v"))], 204),
    Case("replace view", lambda _: ("POST", f"namespaces/{NS}/views/v", {"requirements": [], "updates": []}),
         [("WRITE", "table", (NS, "v"))], 200),
    Case("drop view", lambda n: ("DELETE", f"namespaces/{NS}/views/{n['name']}", None),
         [("DROP", "table", (NS, "{name}"))], 204, _new_view),
    Case("rename view",
         lambda n: ("POST", "views/rename", {"source": {"namespace": [NS], "name": n["name"]},
                                             "destination": {"namespace": list(INNER), "name": n["name"]}}),
         [("DROP", "table", (NS, "{name}")), ("CREATE", "namespace", INNER)], 204, _new_view),
    # functions (tables, for grants)
    Case("list functions", lambda _: ("GET", f"namespaces/{NS}/functions", None), [("LIST", "namespace", (NS,))],
         200, any_privilege_shows=True),
    Case("create function",
         lambda _: ("POST", f"namespaces/{NS}/functions", {"name": _fresh("f"), "class-name": "com.example.G"}),
         [("CREATE", "namespace", (NS,))], 200),
    Case("load function", lambda _: ("GET", f"namespaces/{NS}/functions/f", None), [("READ", "table", (NS, "f"))],
         200),
    Case("drop function", lambda n: ("DELETE", f"namespaces/{NS}/functions/{n['name']}", None),
         [("DROP", "table", (NS, "{name}"))], 204, _new_function),
]


def _named(name: tuple[str, ...], names: dict[str, str]) -> tuple[str, ...]:
    return tuple(level.format(**names) for level in name)


def _others(privilege: str, kind: str) -> list[str]:
    """Every privilege but ``privilege`` and those that give it, that ``kind`` takes."""
    giving = {privilege, "WRITE"} if privilege == "READ" else {privilege}
    allowed = {p.value for p in TABLE_PRIVILEGES} if kind == "table" else {p.value for p in Privilege}
    return sorted(allowed - giving)


def _refused(response: requests.Response, privilege: str, what: str) -> None:
    assert response.status_code == 403, (response.status_code, response.text)
    if response.request.method == "HEAD":
        return  # no body
    error = response.json()["error"]
    assert error["type"] == "ForbiddenException" and error["code"] == 403
    assert f"'alice' lacks the {privilege} privilege on {what}" in error["message"], error["message"]


def _describe(kind: str, name: tuple[str, ...]) -> str:
    return f"catalog '{CATALOG}'" if kind == "catalog" else f"{kind} '{'.'.join(name)}' of catalog '{CATALOG}'"


# The matrix runs on SQLite: the endpoints decide the same on either database, and the tests
# below run the grants table's queries on both.
@pytest.mark.parametrize("lake", ["sqlite"], indirect=True)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_each_endpoint_needs_its_privilege_on_its_object(lake: Lake, case: Case) -> None:
    names = case.setup(lake)
    needs = [(p, kind, _named(name, names)) for p, kind, name in case.needs]
    try:
        # Holding nothing: refused, naming the first privilege it needs and on what.
        method, path, body = case.request(names)
        first, kind, name = needs[0]
        _refused(lake.call(method, path, body=body), first, _describe(kind, name))
        # Holding every other privilege on each object: still refused.
        if not case.any_privilege_shows:
            for privilege, kind, name in needs:
                for other in _others(privilege, kind):
                    lake.grant(other, kind, name)
            method, path, body = case.request(names)
            assert lake.call(method, path, body=body).status_code == 403
            lake.clear()
        # Each needed privilege alone is not enough when two are needed (rename).
        if len(needs) > 1:
            for privilege, kind, name in needs:
                lake.grant(privilege, kind, name)
                method, path, body = case.request(names)
                assert lake.call(method, path, body=body).status_code == 403
                lake.clear()
        # Holding what it needs: the endpoint's own answer.
        for privilege, kind, name in needs:
            lake.grant(privilege, kind, name)
        method, path, body = case.request(names)
        response = lake.call(method, path, body=body)
        assert response.status_code == case.status, response.text
    finally:
        lake.clear()


@pytest.mark.parametrize("lake", BACKENDS, indirect=True)
def test_privileges_are_inherited_from_the_catalog_and_namespaces_and_held_through_roles(lake: Lake) -> None:
    table = f"namespaces/{NS}/tables/t"
    for kind, name in (("catalog", ()), ("namespace", (NS,))):
        lake.admin.grant("READ", kind, name, "alice")
        assert lake.call("GET", table).status_code == 200
        lake.admin.revoke_all("alice")
        assert lake.call("GET", table).status_code == 403
    # A nested namespace inherits from its parent; a sibling does not.
    client = lake.as_admin()
    try:
        client.create_table((*INNER, "deep"), SCHEMA)
    finally:
        client.close()
    deep = f"namespaces/{NS}%1Finner/tables/deep"
    lake.admin.grant("WRITE", "namespace", (NS,), "alice")
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "b"}}]}
    assert lake.call("GET", deep).status_code == 200  # WRITE gives READ
    assert lake.call("POST", deep, body=commit).status_code == 200
    assert lake.call("DELETE", deep).status_code == 403  # WRITE is not DROP
    lake.admin.revoke_all("alice")
    lake.admin.grant("READ", "namespace", INNER, "alice")
    assert lake.call("GET", deep).status_code == 200
    assert lake.call("GET", table).status_code == 403  # the parent's table: not below the grant
    lake.admin.revoke_all("alice")
    # Through a role: bob is a member of analysts; carol is not.
    lake.admin.grant("READ", "table", (NS, "t"), "analysts", "role")
    try:
        assert lake.call("GET", table, token=BOB_TOKEN).status_code == 200
        assert lake.call("GET", table, token=CAROL_TOKEN).status_code == 403
    finally:
        lake.admin.revoke_all("analysts", "role")
    assert lake.call("GET", table, token=BOB_TOKEN).status_code == 403


@pytest.mark.parametrize("lake", BACKENDS, indirect=True)
def test_listings_show_what_the_principals_privileges_reach(lake: Lake) -> None:
    client = lake.as_admin()
    other = _fresh("other")
    try:
        client.create_namespace(other)
        client.create_table(f"{other}.hidden", SCHEMA)
        client.create_table(f"{NS}.second", SCHEMA)
    finally:
        client.close()
    # Nothing held: the top level lists nothing, a namespace is refused.
    assert lake.call("GET", "namespaces").json()["namespaces"] == []
    _refused(lake.call("GET", f"namespaces/{NS}/tables"), "LIST", f"namespace '{NS}' of catalog '{CATALOG}'")
    # READ on one table: its namespace is listed (not the others), and in it that table alone.
    lake.admin.grant("READ", "table", (NS, "t"), "alice")
    try:
        assert lake.call("GET", "namespaces").json()["namespaces"] == [[NS]]
        assert lake.call("GET", f"namespaces/{NS}").status_code == 200
        assert lake.call("GET", f"namespaces/{NS}/tables").json()["identifiers"] == [{"namespace": [NS], "name": "t"}]
        assert lake.call("GET", f"namespaces/{NS}/views").json()["identifiers"] == []
        assert lake.call("GET", "namespaces", params={"parent": NS}).json()["namespaces"] == []
        _refused(lake.call("GET", f"namespaces/{other}/tables"), "LIST", f"namespace '{other}' of catalog '{CATALOG}'")
        assert lake.call("GET", f"namespaces/{other}").status_code == 403
        # LIST on the namespace: all of it.
        lake.admin.grant("LIST", "namespace", (NS,), "alice")
        tables = {i["name"] for i in lake.call("GET", f"namespaces/{NS}/tables").json()["identifiers"]}
        assert {"t", "second"} <= tables
        assert [NS, "inner"] in lake.call("GET", "namespaces", params={"parent": NS}).json()["namespaces"]
        # LIST on the catalog: every namespace at the top level.
        lake.admin.grant("LIST", "catalog", (), "alice")
        top = lake.call("GET", "namespaces").json()["namespaces"]
        assert [NS] in top and [other] in top
    finally:
        lake.admin.revoke_all("alice")


@pytest.mark.parametrize("lake", BACKENDS, indirect=True)
def test_config_needs_some_privilege_and_the_admin_api_needs_manage_grants(lake: Lake) -> None:
    config = requests.get(f"{lake.service.uri}/v1/config", headers={"Authorization": f"Bearer {ALICE_TOKEN}"},
                          timeout=30)
    assert config.status_code == 403 and "holds no privilege in catalog 'lake'" in config.json()["error"]["message"]
    alice = Admin(lake.service, ALICE_TOKEN)
    # alice may not grant herself anything.
    refused = alice.grant("READ", "namespace", (NS,), "alice")
    assert refused.status_code == 403, refused.text
    assert "'alice' lacks the MANAGE_GRANTS privilege on namespace 'sales'" in refused.json()["error"]["message"]
    lake.admin.grant("MANAGE_GRANTS", "namespace", (NS,), "alice")
    try:
        config = requests.get(f"{lake.service.uri}/v1/config", headers={"Authorization": f"Bearer {ALICE_TOKEN}"},
                              timeout=30)
        assert config.status_code == 200 and config.json()["overrides"]["prefix"] == CATALOG
        # MANAGE_GRANTS on sales: grants inside it, to anyone; nothing above it.
        assert alice.grant("READ", "table", (NS, "t"), "carol").json()["granted"] is True
        assert alice.grant("READ", "table", (NS, "t"), "carol").json()["granted"] is False  # held already
        assert alice.grant("READ", "catalog", (), "carol").status_code == 403
        assert lake.call("GET", f"namespaces/{NS}/tables/t", token=CAROL_TOKEN).status_code == 200
        # alice sees the grants she manages and her own; not the admin's elsewhere.
        lake.admin.grant("LIST", "catalog", (), "bob")
        seen = {(g["privilege"], g["grantee"]["name"]) for g in alice.grants()}
        assert seen == {("MANAGE_GRANTS", "alice"), ("READ", "carol")}
        assert alice.revoke("READ", "table", (NS, "t"), "carol").json()["revoked"] is True
        assert alice.revoke("READ", "table", (NS, "t"), "carol").json()["revoked"] is False
        assert lake.call("GET", f"namespaces/{NS}/tables/t", token=CAROL_TOKEN).status_code == 403
    finally:
        lake.admin.revoke_all("alice")
        lake.admin.revoke_all("bob")
    # Bad grants are refused with what to do.
    bad = lake.admin.grant("LIST", "table", (NS, "t"), "alice")
    assert bad.status_code == 400 and "grant it on the table's namespace" in bad.json()["error"]["message"]
    unknown = lake.admin.grant("SELECT", "table", (NS, "t"), "alice")
    assert unknown.status_code == 400 and "LIST, READ, WRITE, CREATE, DROP, MANAGE_GRANTS" in unknown.text
    missing = lake.admin.grant("READ", "table", (NS, "nope"), "alice")
    assert missing.status_code == 404 and "no table, view or function has that name" in missing.text


@pytest.mark.parametrize("lake", BACKENDS, indirect=True)
def test_a_dropped_table_takes_its_grants_and_a_renamed_one_keeps_them(lake: Lake) -> None:
    name = _new_table(lake)["name"]
    lake.admin.grant("READ", "table", (NS, name), "alice")
    lake.admin.grant("DROP", "table", (NS, name), "alice")
    lake.admin.grant("CREATE", "namespace", INNER, "alice")
    try:
        renamed = lake.call("POST", "tables/rename", body={"source": {"namespace": [NS], "name": name},
                                                            "destination": {"namespace": list(INNER), "name": name}})
        assert renamed.status_code == 204, renamed.text
        moved = f"namespaces/{NS}%1Finner/tables/{name}"
        assert lake.call("GET", moved).status_code == 200
        assert lake.call("DELETE", moved).status_code == 204
        # Created again under the same name by the admin: alice's grants went with the old one.
        client = lake.as_admin()
        try:
            client.create_table((*INNER, name), SCHEMA)
        finally:
            client.close()
        assert lake.call("GET", moved).status_code == 403
        held = {(g["securable"]["type"], tuple(g["securable"]["name"]), g["privilege"])
                for g in lake.admin.grants() if g["grantee"]["name"] == "alice"}
        assert held == {("namespace", INNER, "CREATE")}
    finally:
        lake.admin.revoke_all("alice")


@pytest.mark.parametrize("lake", BACKENDS, indirect=True)
def test_grants_live_in_the_catalog_database(lake: Lake) -> None:
    """A second service on the same database decides alike: the grants are in its table."""
    from sqlalchemy import create_engine, text

    lake.admin.grant("READ", "table", (NS, "t"), "alice")
    try:
        engine = create_engine(lake.service.catalog_uri)
        try:
            with engine.connect() as conn:
                rows = conn.execute(text("SELECT catalog_name, securable_type, securable_name, privilege, "
                                         "grantee_type, grantee_name, granted_by FROM tablestore_grants "
                                         "WHERE grantee_name = 'alice'")).all()
        finally:
            engine.dispose()
        assert [tuple(r) for r in rows] == [(CATALOG, "table", '["sales","t"]', "READ", "principal", "alice", "admin")]
    finally:
        lake.admin.revoke_all("alice")


def _authorization(section: str) -> Any:
    from tablestore.config import parse_config
    from tablestore.rest.settings import server_settings

    config = parse_config(f"""
catalogs:
  - {{name: lake, type: sql, uri: "sqlite:////tmp/x.db", warehouse: /tmp/wh}}
server:
  tokens: [{{token: aaaaaaaaaaaaaaaaaaaa, role: read}}]
{section}
""")
    return server_settings(config).authorization


def test_the_authorization_setting_is_roles_by_default_and_reports_mistakes() -> None:
    from tablestore.errors import ConfigError

    assert _authorization("").mode == "roles"
    assert _authorization("  authorization: grants").mode == "grants"
    full = _authorization("  authorization: {mode: grants, admins: ops, roles: {analysts: [bob, trino]}}")
    assert (full.admins, full.roles) == (("ops",), {"analysts": ("bob", "trino")})
    assert [(g.kind, g.name) for g in full.grantees("bob")] == [("principal", "bob"), ("role", "analysts")]
    for section, message in (
            ("  authorization: everyone", "server.authorization.mode must be 'roles' or 'grants', got 'everyone'"),
            ("  authorization: {mode: grants, owners: [x]}", "unknown key server.authorization.owners"),
            ("  authorization: {roles: [x]}", "server.authorization.roles must be a mapping of role names")):
        with pytest.raises(ConfigError, match=message):
            _authorization(section)
