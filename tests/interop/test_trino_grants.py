"""Grants through Trino: two Trino catalogs on one catalog service, logged in as two OAuth2
clients. ``team-a`` holds LIST and READ on namespace ``team_a``; the role ``team_b_readers``
(client ``team-b``) holds them on ``team_b``. Each sees and reads its own namespace only, and is
refused the other's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pytest
from trino.exceptions import TrinoQueryError

from tests.rest.grant_fixtures import ADMIN_TOKEN, Admin, write_grants_config
from tests.services import CATALOG, RestService, S3Server
from tests.trino import TrinoServer, rest_catalog_properties

pytestmark = [pytest.mark.trino, pytest.mark.s3]

SCHEMA = pa.schema([pa.field("id", pa.int64())])
CLIENTS = {"team-a": "team-a-secret-0123456789", "team-b": "team-b-secret-0123456789"}


@dataclass
class Teams:
    trino: TrinoServer
    service: RestService


@pytest.fixture(scope="module")
def teams(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server, trino: TrinoServer) -> Iterator[Teams]:
    workdir = tmp_path_factory.mktemp("trino-grants")
    uri = f"sqlite:///{workdir / 'catalog.db'}"
    warehouse = f"s3://{s3_server.create_bucket()}/warehouse"
    config = workdir / "tablestore.yaml"
    write_grants_config(config, uri, warehouse, s3_server.properties, clients=CLIENTS,
                        roles={"team_b_readers": ["team-b"]})
    service = RestService(config, uri, warehouse, workdir, s3_properties=s3_server.properties)
    service.start()
    client = service.client(ADMIN_TOKEN)
    created: list[str] = []
    try:
        for namespace, rows in (("team_a", [1, 2, 3]), ("team_b", [42])):
            client.create_namespace(namespace)
            client.create_table(f"{namespace}.orders", SCHEMA).append(pa.table({"id": rows}, schema=SCHEMA))
        admin = Admin(service)
        for privilege in ("LIST", "READ"):
            assert admin.grant(privilege, "namespace", ("team_a",), "team-a").status_code == 200
            assert admin.grant(privilege, "namespace", ("team_b",), "team_b_readers", "role").status_code == 200
        for name, client_id in (("grants_a", "team-a"), ("grants_b", "team-b")):
            trino.create_catalog(name, rest_catalog_properties(
                service.uri, CATALOG, f"{client_id}:{CLIENTS[client_id]}", s3_server.endpoint, s3_server.region))
            created.append(name)
        yield Teams(trino, service)
    finally:
        for name in created:
            trino.drop_catalog(name)
        client.close()
        service.stop()


def _refused(teams: Teams, sql: str, catalog: str) -> str:
    with pytest.raises(TrinoQueryError) as refused:
        teams.trino.query(sql, catalog)
    return str(refused.value)


@pytest.mark.parametrize(("catalog", "mine", "theirs", "rows"),
                         [("grants_a", "team_a", "team_b", [[1], [2], [3]]), ("grants_b", "team_b", "team_a", [[42]])])
def test_each_trino_catalog_sees_and_reads_only_its_namespace(teams: Teams, catalog: str, mine: str, theirs: str,
                                                              rows: list[list[int]]) -> None:
    schemas = {row[0] for row in teams.trino.query("SHOW SCHEMAS", catalog)}
    assert mine in schemas and theirs not in schemas, schemas
    assert sorted(teams.trino.query(f"SELECT id FROM {mine}.orders", catalog)) == rows
    # The other team's namespace and table: the service refuses them (403: LIST, READ), and Trino
    # reports its catalog call failed (it asks for a view of that name first, then a table).
    for sql in (f"SELECT id FROM {theirs}.orders", f"SHOW TABLES FROM {theirs}"):
        message = _refused(teams, sql, catalog)
        assert "ICEBERG_CATALOG_ERROR" in message or "Forbidden" in message, message
