"""pyiceberg's RestCatalog against the service, and tablestore reading and writing the same tables."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tablestore.catalog.sql_catalog import SqlCatalog
from tests.rest.conftest import CATALOG, RestService


def _rows(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def test_pyiceberg_writes_evolves_deletes_and_tablestore_reads_the_same(rest_service: RestService) -> None:
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DoubleType

    py = rest_service.pyiceberg()
    py.create_namespace("shop", {"owner": "ops"})
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("country", pa.string())])
    table = py.create_table("shop.orders", schema=schema)
    table.append(pa.table({"id": [1, 2, 3], "country": ["DE", "FR", "DE"]}, schema=schema))

    with table.update_schema() as update:
        update.add_column("amount", DoubleType())
    with table.update_spec() as spec:
        spec.add_field("country", IdentityTransform(), "country")
    table = py.load_table("shop.orders")
    schema2 = table.schema().as_arrow()
    table.append(pa.table({"id": [4, 5], "country": ["FR", "IT"], "amount": [4.5, 5.5]}, schema=schema2))
    table.delete("id = 2")

    expected = [
        {"id": 1, "country": "DE", "amount": None},
        {"id": 3, "country": "DE", "amount": None},
        {"id": 4, "country": "FR", "amount": 4.5},
        {"id": 5, "country": "IT", "amount": 5.5},
    ]
    assert _rows(py.load_table("shop.orders").scan().to_arrow()) == expected

    direct = SqlCatalog(CATALOG, **rest_service.direct_properties())
    client = rest_service.client()
    try:
        for catalog in (direct, client):
            t = catalog.load_table("shop.orders")
            assert _rows(t.scan().to_arrow()) == expected
            assert [f.name for f in t.schema().fields] == ["id", "country", "amount"]
            assert [f.name for f in t.metadata.spec().fields] == ["country"]
        # The service answers the namespace's default location too (Trino needs one).
        assert client.load_namespace_properties("shop") == {"owner": "ops",
                                                            "location": f"{direct.warehouse}/shop"}
        assert client.load_table("shop.orders").metadata_location == direct.load_table("shop.orders").metadata_location
    finally:
        direct.close()
        client.close()


def test_tablestore_writes_through_the_service_and_pyiceberg_reads(rest_service: RestService) -> None:
    client = rest_service.client()
    try:
        client.create_namespace("db")
        schema = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
        table = client.create_table("db.people", schema, partition_by=["name"])
        table.append(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=schema))
        table = client.load_table("db.people")
        table.append(pa.table({"id": [3], "name": ["a"]}, schema=schema))
        assert client.list_tables("db") == [("db", "people")]
    finally:
        client.close()

    py = rest_service.pyiceberg()
    loaded = py.load_table("db.people")
    assert _rows(loaded.scan().to_arrow()) == [
        {"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": "a"},
    ]
    assert len(loaded.metadata.snapshots) == 2
    assert [f.name for f in loaded.spec().fields] == ["name"]


@pytest.mark.s3
def test_clients_need_only_the_uri_and_a_token_for_tables_in_s3(s3_rest_service: RestService) -> None:
    service = s3_rest_service
    client = service.client()  # no s3 settings: they come from the server
    try:
        assert client.properties["s3.endpoint"] == service.s3_properties["s3.endpoint"]
        client.create_namespace("s3db")
        schema = pa.schema([pa.field("id", pa.int64())])
        table = client.create_table("s3db.t", schema)
        assert table.metadata.location.startswith(service.warehouse)
        table.append(pa.table({"id": [1, 2]}, schema=schema))
    finally:
        client.close()
    py = service.pyiceberg()
    loaded = py.load_table("s3db.t")
    assert sorted(loaded.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    loaded.append(pa.table({"id": [3]}, schema=schema))
    again = service.client()
    try:
        assert sorted(again.load_table("s3db.t").scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
    finally:
        again.close()


@pytest.mark.oracle
def test_the_java_reference_reads_tables_committed_through_the_service(rest_service: RestService) -> None:

    from tests import oracle

    py = rest_service.pyiceberg()
    py.create_namespace("javaread")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("country", pa.string())])
    table = py.create_table("javaread.t", schema=schema)
    table.append(pa.table({"id": [1, 2, 3], "country": ["DE", "FR", "IT"]}, schema=schema))
    table.delete("id = 2")
    client = rest_service.client()
    try:
        ours = client.load_table("javaread.t")
        ours.append(pa.table({"id": [4], "country": ["ES"]}, schema=schema))
        location = client.load_table("javaread.t").metadata_location
    finally:
        client.close()
    batch = oracle.OracleBatch()
    job = batch.read(location)
    result = oracle.check(batch.run()[job])
    assert result["rows"] == [[1, "DE"], [3, "IT"], [4, "ES"]]


def test_views_created_by_pyiceberg_and_by_tablestore_read_the_same(rest_service: RestService) -> None:
    from pyiceberg.view.metadata import SQLViewRepresentation, ViewRepresentation, ViewVersion

    py = rest_service.pyiceberg()
    py.create_namespace("viewns")
    schema = pa.schema([pa.field("id", pa.int64())])
    # By the JSON names: pyiceberg's models take the aliases, which mypy checks.
    version = ViewVersion.model_validate({
        "schema-id": 0, "summary": {"engine-name": "pyiceberg"}, "default-namespace": ["viewns"],
        "representations": [ViewRepresentation(SQLViewRepresentation(type="sql", sql="SELECT 1 AS id", dialect="spark"))],
    })
    py.create_view("viewns.from_py", schema, version)
    client = rest_service.client()
    try:
        view = client.load_view("viewns.from_py")
        assert (view.sql, [f.name for f in view.schema.fields], view.default_namespace) == (
            "SELECT 1 AS id", ["id"], ("viewns",))
        client.create_view("viewns.from_ts", "SELECT 2 AS id", schema, default_namespace=("viewns",))
    finally:
        client.close()
    loaded = py.load_view("viewns.from_ts")
    assert loaded.metadata.versions[0].representations[0].root.sql == "SELECT 2 AS id"
    assert sorted(py.list_views("viewns")) == [("viewns", "from_py"), ("viewns", "from_ts")]
    py.drop_view("viewns.from_py")
    assert not py.view_exists("viewns.from_py")
