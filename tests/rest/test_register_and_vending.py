"""Register (with the spec's ``overwrite``) and S3 settings vended in the LoadTableResult config."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
import requests

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.errors import TableAlreadyExistsError, ValidationError
from tests.rest.conftest import CATALOG, ON_BOTH_DATABASES, READ_TOKEN, WRITE_TOKEN, RestService, write_config

SCHEMA = pa.schema([pa.field("id", pa.int64())])
# Distinctive S3 credentials (a MinIO user made for the test), so that a leak into a log is found by search.
ACCESS_KEY = "AKIAVENDED0123456789"
SECRET_KEY = "vended-secret-key-0123456789abcdefXYZ"


def _ids(table: object) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())  # type: ignore[attr-defined]


@ON_BOTH_DATABASES  # the catalog database swaps the pointer
def test_register_with_overwrite_repoints_an_existing_table(rest_service: RestService) -> None:
    ns = f"reg_{uuid.uuid4().hex[:8]}"
    client = rest_service.client()
    try:
        client.create_namespace(ns)
        target = client.create_table(f"{ns}.target", SCHEMA)
        target.append(pa.table({"id": [1]}, schema=SCHEMA))
        old_location = client.load_table(f"{ns}.target").metadata_location
        source = client.create_table(f"{ns}.source", SCHEMA)
        source.append(pa.table({"id": [7, 8]}, schema=SCHEMA))
        source_location = client.load_table(f"{ns}.source").metadata_location

        with pytest.raises(TableAlreadyExistsError):
            client.register_table(f"{ns}.target", source_location)
        assert _ids(client.load_table(f"{ns}.target")) == [1]  # a refused register changes nothing
        # While source is live, its files have an owner: a second one is refused.
        with pytest.raises(ValidationError, match=rf"overlaps the location .* of live table {ns}\.source"):
            client.register_table(f"{ns}.target", source_location, overwrite=True)
        assert _ids(client.load_table(f"{ns}.target")) == [1]
        client.drop_table(f"{ns}.source")  # not purged: its files wait for a new owner

        replaced = client.register_table(f"{ns}.target", source_location, overwrite=True)
        assert replaced.metadata_location == source_location
        assert _ids(client.load_table(f"{ns}.target")) == [7, 8]
        # Overwrite of a name that does not exist registers it.
        created = client.register_table(f"{ns}.fresh", old_location, overwrite=True)
        assert created.metadata_location == old_location
        assert _ids(client.load_table(f"{ns}.fresh")) == [1]
        # The table keeps working: a commit after the overwrite builds on the registered metadata.
        again = client.load_table(f"{ns}.target")
        again.append(pa.table({"id": [9]}, schema=SCHEMA))
        assert _ids(client.load_table(f"{ns}.target")) == [7, 8, 9]
    finally:
        client.close()

    # The catalog row, as every JDBC-layout client sees it, keeps the previous location.
    direct = SqlCatalog(CATALOG, **rest_service.direct_properties())
    try:
        from sqlalchemy import select

        from tablestore.catalog.sql_tables import ICEBERG_TABLES

        with direct.engine.connect() as conn:
            rows = dict(conn.execute(select(ICEBERG_TABLES.c.table_name, ICEBERG_TABLES.c.previous_metadata_location)
                                     .where(ICEBERG_TABLES.c.table_namespace == ns)).all())
        assert rows["fresh"] is None
        assert rows["target"] == source_location  # the append after the overwrite built on it
        assert _ids(direct.load_table(f"{ns}.target")) == [7, 8, 9]
        direct.drop_table(f"{ns}.fresh")  # not purged; its files may now belong to target again
    finally:
        direct.close()

    # pyiceberg sends the same request body; a read-only token may not register.
    response = requests.post(f"{rest_service.uri}/v1/{CATALOG}/namespaces/{ns}/register", timeout=30,
                             headers={"Authorization": f"Bearer {READ_TOKEN}"},
                             json={"name": "target", "metadata-location": old_location, "overwrite": True})
    assert response.status_code == 403
    body = requests.post(f"{rest_service.uri}/v1/{CATALOG}/namespaces/{ns}/register", timeout=30,
                         headers={"Authorization": f"Bearer {WRITE_TOKEN}"},
                         json={"name": "target", "metadata-location": old_location, "overwrite": True})
    assert body.status_code == 200, body.text
    assert body.json()["metadata-location"] == old_location


@ON_BOTH_DATABASES
def test_register_with_overwrite_cannot_replace_a_view(rest_service: RestService) -> None:
    ns = f"regv_{uuid.uuid4().hex[:8]}"
    client = rest_service.client()
    try:
        client.create_namespace(ns)
        table = client.create_table(f"{ns}.t", SCHEMA)
        client.create_view(f"{ns}.v", f"SELECT id FROM {ns}.t", SCHEMA)
        with pytest.raises(TableAlreadyExistsError):
            client.register_table(f"{ns}.v", table.metadata_location, overwrite=True)
        assert client.view_exists(f"{ns}.v")
    finally:
        client.close()


@pytest.fixture
def vending_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RestService]:
    """A service on a warehouse in S3 whose (distinctive) credentials only its config holds: a
    service of its own (its MinIO user sees one bucket), on SQLite (what it vends comes from its
    configuration, not from the database)."""
    server = request.getfixturevalue("s3_server")
    bucket = server.create_bucket()
    server.create_user(ACCESS_KEY, SECRET_KEY, [bucket])
    s3 = {**server.properties, "s3.access-key-id": ACCESS_KEY, "s3.secret-access-key": SECRET_KEY}
    warehouse = f"s3://{bucket}/warehouse"
    catalog_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    config = tmp_path / "tablestore.yaml"
    write_config(config, catalog_uri, warehouse, s3)
    service = RestService(config, catalog_uri, warehouse, tmp_path, s3_properties=s3)
    service.start()
    try:
        yield service
    finally:
        service.stop()


@pytest.mark.s3
def test_s3_settings_are_vended_and_never_logged(vending_service: RestService,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    service = vending_service
    caplog.set_level(logging.DEBUG)
    client = service.client()  # the URI and a token: nothing about S3
    try:
        client.create_namespace("vend")
        table = client.create_table("vend.t", SCHEMA)
        assert table.metadata.location.startswith(service.warehouse)
        table.append(pa.table({"id": [1, 2]}, schema=SCHEMA))
        client.load_table("vend.t").append(pa.table({"id": [3]}, schema=SCHEMA))
        assert _ids(client.load_table("vend.t")) == [1, 2, 3]
    finally:
        client.close()

    # The LoadTableResult carries the settings (what pyiceberg and Java clients read them from):
    # the endpoint for everyone, and vended credentials (never the catalog's key) for clients
    # that ask for them (tests/rest/test_credentials.py proves their scope).
    loaded = requests.get(f"{service.uri}/v1/{CATALOG}/namespaces/vend/tables/t", timeout=30,
                          headers={"Authorization": f"Bearer {READ_TOKEN}",
                                   "X-Iceberg-Access-Delegation": "vended-credentials"})
    assert loaded.status_code == 200
    config = loaded.json()["config"]
    assert config["s3.access-key-id"] != ACCESS_KEY and config["s3.secret-access-key"] != SECRET_KEY
    assert config["s3.session-token"]
    assert config["s3.endpoint"] == service.s3_properties["s3.endpoint"]
    # The region under both names: pyiceberg reads s3.region, Java's S3FileIO client.region.
    region = service.s3_properties["s3.region"]
    assert (config["s3.region"], config["client.region"]) == (region, region)
    defaults = requests.get(f"{service.uri}/v1/config", timeout=30,
                            headers={"Authorization": f"Bearer {READ_TOKEN}"}).json()["defaults"]
    assert (defaults["s3.region"], defaults["client.region"]) == (region, region)

    # pyiceberg, given only the URI and a token, reads and writes the table with those settings.
    py = service.pyiceberg()
    py_table = py.load_table("vend.t")
    assert sorted(py_table.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
    py_table.append(pa.table({"id": [4]}, schema=SCHEMA))
    reader = service.client(READ_TOKEN)
    try:
        assert _ids(reader.load_table("vend.t")) == [1, 2, 3, 4]
    finally:
        reader.close()

    # A failing request with a bad token, then the logs: the server's and this process's.
    assert requests.get(f"{service.uri}/v1/{CATALOG}/namespaces/vend/tables/t", timeout=30,
                        headers={"Authorization": "Bearer wrong-token-0123456789"}).status_code == 401
    service.stop()  # flushes the server's log
    for text in (service.log(), caplog.text):
        assert SECRET_KEY not in text
        assert WRITE_TOKEN not in text and READ_TOKEN not in text


@ON_BOTH_DATABASES
def test_register_view_from_the_rest_client_and_the_sql_catalog(rest_service: RestService) -> None:
    from tablestore.errors import NoSuchNamespaceError, ViewAlreadyExistsError

    ns = f"regview_{uuid.uuid4().hex[:8]}"
    client = rest_service.client()
    try:
        client.create_namespace(ns)
        client.create_table(f"{ns}.t", SCHEMA).append(pa.table({"id": [5, 6]}, schema=SCHEMA))
        made = client.create_view(f"{ns}.v", f"SELECT id FROM {ns}.t WHERE id > 5", SCHEMA)
        client.drop_view(f"{ns}.v")
        assert not client.view_exists(f"{ns}.v")
        registered = client.register_view(f"{ns}.v", made.metadata_location)
        assert registered.metadata_location == made.metadata_location
        assert client.load_view(f"{ns}.v").metadata.current_version().representations == \
            made.metadata.current_version().representations
        with pytest.raises(ViewAlreadyExistsError):
            client.register_view(f"{ns}.v", made.metadata_location)
        with pytest.raises(ViewAlreadyExistsError):
            client.register_view(f"{ns}.t", made.metadata_location)  # a table holds the name
        with pytest.raises(NoSuchNamespaceError):
            client.register_view("nowhere.v", made.metadata_location)
    finally:
        client.close()
    # The in-process SQL catalog registers the same file under another name.
    direct = SqlCatalog(CATALOG, **rest_service.direct_properties())
    try:
        again = direct.register_view(f"{ns}.v2", made.metadata_location)
        assert again.metadata.view_uuid == made.metadata.view_uuid
        assert sorted(direct.list_views(ns)) == [(ns, "v"), (ns, "v2")]
        with pytest.raises(ViewAlreadyExistsError):
            direct.register_view(f"{ns}.t", made.metadata_location)
    finally:
        direct.close()
