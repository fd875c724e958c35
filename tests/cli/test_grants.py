"""`tablestore catalog grant|revoke|grants`: on a ``sql`` catalog (its database, directly) and on
a ``rest`` catalog (the service's admin API, with the catalog's token)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.cli import main
from tests.rest.grant_fixtures import ADMIN_TOKEN, ALICE_TOKEN, start_grants_service
from tests.services import CATALOG, RestService

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def run(capsys: pytest.CaptureFixture[str], config: Path, *args: str) -> tuple[int, list[list[object]], str]:
    """The exit code, the rows printed (JSON) and the error output of one command."""
    code = main(["catalog", *args, "--config", str(config), "--format", "json"])
    out, err = capsys.readouterr()
    rows = json.loads(out)["rows"] if code == 0 and out.strip() else []
    return code, rows, err


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestService]:
    workdir = tmp_path_factory.mktemp("cli-grants")
    started = start_grants_service(workdir, f"sqlite:///{workdir / 'catalog.db'}", str(workdir / "warehouse"))
    catalog = SqlCatalog(CATALOG, **started.direct_properties())
    try:
        catalog.create_namespace("db")
        catalog.create_table("db.t", SCHEMA)
        yield started
    finally:
        catalog.close()
        started.stop()


def _rest_config(path: Path, service: RestService, token: str) -> Path:
    path.write_text(yaml.safe_dump({"catalogs": [{"name": "remote", "type": "rest", "uri": service.uri,
                                                  "token": token}]}))
    return path


def test_grant_revoke_and_list_on_a_sql_catalog_write_its_database(
        service: RestService, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = service.config_path  # the service's own configuration: its catalog is a sql one
    code, rows, err = run(capsys, config, "grant", "read", "--on", "table:db.t", "--to", "role:analysts")
    assert (code, err) == (0, "")
    assert rows == [["table", "db.t", "READ", "role", "analysts", True]]
    assert run(capsys, config, "grant", "READ", "--on", "table:db.t", "--to", "role:analysts")[1][0][-1] is False
    run(capsys, config, "grant", "LIST", "--on", "catalog", "--to", "principal:alice")
    code, rows, _ = run(capsys, config, "grants")
    assert rows == [["catalog", "-", "LIST", "principal", "alice"], ["table", "db.t", "READ", "role", "analysts"]]
    assert run(capsys, config, "grants", "--to", "role:analysts")[1] == [["table", "db.t", "READ", "role", "analysts"]]
    # The service decides by them at once: alice (LIST on the catalog) lists the namespaces.
    client = service.client(ALICE_TOKEN)
    try:
        assert client.list_namespaces() == [("db",)]
    finally:
        client.close()
    assert run(capsys, config, "revoke", "LIST", "--on", "catalog", "--to", "principal:alice")[1][0][-1] is True
    assert run(capsys, config, "revoke", "READ", "--on", "table:db.t", "--to", "role:analysts")[1][0][-1] is True
    assert run(capsys, config, "grants")[1] == []


@pytest.mark.parametrize(("args", "message"), [
    (("grant", "READ", "--on", "table:db.t"), "needs a privilege, --on and --to"),
    (("grant", "SELECT", "--on", "table:db.t", "--to", "principal:alice"), "unknown privilege 'SELECT'"),
    (("grant", "READ", "--on", "db.t", "--to", "principal:alice"), "write catalog, namespace:LEVELS or table:"),
    (("grant", "READ", "--on", "table:db.t", "--to", "alice"), "write principal:NAME or role:NAME"),
    (("grant", "CREATE", "--on", "table:db.t", "--to", "principal:alice"), "grant it on the table's namespace"),
    (("grant", "READ", "--on", "table:db.nope", "--to", "principal:alice"), "no table, view or function"),
])
def test_bad_grants_exit_non_zero_naming_the_problem(service: RestService, capsys: pytest.CaptureFixture[str],
                                                     args: tuple[str, ...], message: str) -> None:
    code, _, err = run(capsys, service.config_path, *args)
    assert code == 1 and err.startswith("error: ") and message in err, err
    assert run(capsys, service.config_path, "grants")[1] == []


def test_on_a_rest_catalog_the_commands_use_the_admin_api_and_need_manage_grants(
        service: RestService, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    admin = _rest_config(tmp_path / "admin.yaml", service, ADMIN_TOKEN)
    alice = _rest_config(tmp_path / "alice.yaml", service, ALICE_TOKEN)
    code, rows, err = run(capsys, admin, "grant", "READ", "--on", "namespace:db", "--to", "principal:alice")
    assert (code, rows) == (0, [["namespace", "db", "READ", "principal", "alice", True]]), err
    try:
        # alice lists her own grants, and may not grant.
        assert run(capsys, alice, "grants")[1] == [["namespace", "db", "READ", "principal", "alice"]]
        code, _, err = run(capsys, alice, "grant", "READ", "--on", "namespace:db", "--to", "principal:carol")
        assert code == 1 and "lacks the MANAGE_GRANTS privilege on namespace 'db'" in err, err
    finally:
        code, rows, _ = run(capsys, admin, "revoke", "READ", "--on", "namespace:db", "--to", "principal:alice")
    assert rows[0][-1] is True
    assert run(capsys, admin, "grants")[1] == []
