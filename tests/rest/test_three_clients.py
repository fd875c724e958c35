"""Three independent Iceberg clients share the served catalog, each reading and writing.

pyiceberg's ``RestCatalog``, DuckDB 1.5 (its iceberg extension, attached with a bearer token)
and Java Iceberg's ``RESTCatalog`` (``../shared/iceberg-oracle/oracle rest-sql``, the client
Trino's connector uses) each create a table, write it, delete rows from it, write into another
client's table and drop a table another client made; then every client, and tablestore, reads
all three tables and gets the same rows. Over a local warehouse with all three (one JVM), and over S3 (MinIO on loopback) with
vended credentials, where the Java build has no S3 FileIO and tablestore takes its place.
"""

from __future__ import annotations

import datetime
import decimal
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tablestore.catalog.sql_catalog import SqlCatalog
from tests.interop.readers import duckdb_connect
from tests.interop.rows import canonical_rows, sort_rows
from tests.oracle import ORACLE_DIR, _ensure_built
from tests.rest.conftest import CATALOG, WRITE_TOKEN, RestService

NS = "trio"
TABLES = ("p", "d", "j")  # made by pyiceberg, DuckDB, and Java (tablestore over S3)
ARROW = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string()),
                   pa.field("amount", pa.decimal128(10, 2)), pa.field("day", pa.date32())])
COLUMNS = "id BIGINT, name STRING, amount DECIMAL(10, 2), day DATE"


def _rows(*rows: tuple[int, str, str, str]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "name": n, "amount": decimal.Decimal(a),
                                  "day": datetime.date.fromisoformat(d)} for i, n, a, d in rows], schema=ARROW)


def pyiceberg_writes(service: RestService) -> None:
    """pyiceberg: creates ``p`` partitioned by name, appends, deletes a row; creates ``p_tmp``
    for DuckDB to drop."""
    py = service.pyiceberg()
    py.create_namespace(NS)
    py.create_table(f"{NS}.p_tmp", schema=ARROW).append(_rows((0, "tmp", "0.01", "2000-01-01")))
    table = py.create_table(f"{NS}.p", schema=ARROW)
    with table.update_spec() as spec:
        spec.add_identity("name")
    table = py.load_table(f"{NS}.p")
    table.append(_rows((1, "a", "1.50", "2024-01-01"), (2, "b", "-2.25", "2024-02-29"),
                       (3, "a", "0.00", "1970-01-01"), (4, "c", "99999999.99", "2038-01-19")))
    table.delete("id = 2")


def duckdb_writes(con: Any) -> None:
    """DuckDB: creates ``d``, inserts, deletes a row, inserts into pyiceberg's ``p``, drops
    pyiceberg's ``p_tmp`` and creates ``d_tmp`` for the next client to drop."""
    con.execute(f"CREATE TABLE lake.{NS}.d (id BIGINT, name VARCHAR, amount DECIMAL(10, 2), day DATE)")
    con.execute(f"INSERT INTO lake.{NS}.d VALUES (10, 'x', 10.10, DATE '2024-03-01'), "
                "(11, 'y', 11.11, DATE '2024-03-02'), (12, NULL, NULL, NULL)")
    assert con.execute(f"DELETE FROM lake.{NS}.d WHERE id = 11").fetchall() == [(1,)]
    con.execute(f"INSERT INTO lake.{NS}.p VALUES (5, 'duck', 5.55, DATE '2024-05-05')")
    assert con.execute(f"SELECT count(*) FROM lake.{NS}.p_tmp").fetchall() == [(1,)]
    con.execute(f"DROP TABLE lake.{NS}.p_tmp")
    con.execute(f"CREATE TABLE lake.{NS}.d_tmp AS SELECT * FROM lake.{NS}.d")


# Java: creates ``j`` (merge-on-read deletes), inserts, deletes, inserts into DuckDB's ``d``,
# deletes from pyiceberg's ``p``, drops DuckDB's ``d_tmp``, creates ``j_tmp`` for pyiceberg to
# drop, then reads all three.
JAVA_STATEMENTS = [
    f"CREATE TABLE rest.{NS}.j ({COLUMNS}) USING iceberg TBLPROPERTIES ('write.delete.mode'='merge-on-read')",
    f"INSERT INTO rest.{NS}.j VALUES (20, 'j', 20.20, DATE '2024-06-01'), (21, 'k', 21.21, DATE '2024-06-02'), "
    "(22, 'l', -0.01, DATE '2024-06-03')",
    f"DELETE FROM rest.{NS}.j WHERE id = 21",
    f"INSERT INTO rest.{NS}.d VALUES (13, 'java', 13.13, DATE '2024-07-01')",
    f"DELETE FROM rest.{NS}.p WHERE id = 3",
    f"DROP TABLE rest.{NS}.d_tmp",
    f"CREATE TABLE rest.{NS}.j_tmp USING iceberg AS SELECT * FROM rest.{NS}.j",
    *[f"SELECT * FROM rest.{NS}.{t} ORDER BY id" for t in TABLES],
]


def tablestore_writes(service: RestService) -> None:
    """tablestore in Java's place over S3: the same table ``j`` and the same writes."""
    client = service.client()
    try:
        table = client.create_table(f"{NS}.j", ARROW, properties={"write.delete.mode": "merge-on-read"})
        table.append(_rows((20, "j", "20.20", "2024-06-01"), (21, "k", "21.21", "2024-06-02"),
                           (22, "l", "-0.01", "2024-06-03")))
        client.load_table(f"{NS}.j").delete("id = 21")
        client.load_table(f"{NS}.d").append(_rows((13, "java", "13.13", "2024-07-01")))
        client.load_table(f"{NS}.p").delete("id = 3")
        client.drop_table(f"{NS}.d_tmp")
        client.create_table(f"{NS}.j_tmp", ARROW).append(client.load_table(f"{NS}.j").scan().to_arrow())
    finally:
        client.close()


EXPECTED = {
    "p": [[1, "a", "1.50", "2024-01-01"], [4, "c", "99999999.99", "2038-01-19"], [5, "duck", "5.55", "2024-05-05"]],
    "d": [[10, "x", "10.10", "2024-03-01"], [12, None, None, None], [13, "java", "13.13", "2024-07-01"]],
    "j": [[20, "j", "20.20", "2024-06-01"], [22, "l", "-0.01", "2024-06-03"]],
}


def attach_duckdb(service: RestService) -> Any:
    con = duckdb_connect(Path(tempfile.mkdtemp(prefix="duckdb-ext-")))
    con.execute(f"CREATE SECRET lake_auth (TYPE iceberg, TOKEN '{WRITE_TOKEN}')")
    con.execute(f"ATTACH '{CATALOG}' AS lake (TYPE iceberg, ENDPOINT '{service.uri}', SECRET lake_auth)")
    return con


def pyiceberg_drops_the_last_clients_table(service: RestService) -> None:
    py = service.pyiceberg()
    assert len(py.load_table(f"{NS}.j_tmp").scan().to_arrow()) == 2
    py.drop_table(f"{NS}.j_tmp")
    assert sorted(name for _, name in py.list_tables(NS)) == sorted(TABLES)


def everyone_reads(service: RestService, con: Any) -> dict[str, dict[str, list[list[Any]]]]:
    """Each table as pyiceberg, DuckDB and tablestore read it through the service, canonical."""
    py = service.pyiceberg()
    client = service.client()
    seen: dict[str, dict[str, list[list[Any]]]] = {"pyiceberg": {}, "duckdb": {}, "tablestore": {}}
    try:
        for name in TABLES:
            table = client.load_table(f"{NS}.{name}")
            schema = table.schema()
            seen["tablestore"][name] = canonical_rows(table.scan().to_arrow(), schema)
            seen["pyiceberg"][name] = canonical_rows(py.load_table(f"{NS}.{name}").scan().to_arrow(), schema)
            duck = con.execute(f"SELECT * FROM lake.{NS}.{name}").to_arrow_table()
            seen["duckdb"][name] = canonical_rows(duck, schema)
    finally:
        client.close()
    return seen


@pytest.fixture
def local_service(catalog_service: RestService) -> RestService:
    """The session's catalog service (the default configuration), emptied after the module."""
    return catalog_service


@pytest.mark.oracle
def test_pyiceberg_duckdb_and_java_write_and_read_each_others_tables_alike(local_service: RestService) -> None:
    _ensure_built()  # fails naming what is missing if ../shared/iceberg-oracle is not there
    service = local_service
    pyiceberg_writes(service)
    con = attach_duckdb(service)
    try:
        duckdb_writes(con)
        done = subprocess.run(
            [str(ORACLE_DIR / "oracle"), "rest-sql", service.uri, "--token", WRITE_TOKEN, "--warehouse", CATALOG,
             "-e", "; ".join(JAVA_STATEMENTS)],
            capture_output=True, text=True, timeout=900,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        java = [json.loads(line)["rows"] for line in done.stdout.splitlines() if line.startswith("{")]
        java_reads = dict(zip(TABLES, [sort_rows(rows) for rows in java[-3:]], strict=True))
        assert java_reads == EXPECTED
        pyiceberg_drops_the_last_clients_table(service)
        seen = everyone_reads(service, con)
    finally:
        con.close()
    for client, tables in seen.items():
        assert tables == java_reads, f"{client} reads differently from Java"
    # The catalog's own view of the tables: three clients' commits, one catalog.
    direct = SqlCatalog(CATALOG, **service.direct_properties())
    try:
        assert sorted(direct.list_tables(NS)) == [(NS, t) for t in sorted(TABLES)]
        j = direct.load_table(f"{NS}.j")
        assert any(task.delete_files for task in j.scan().plan_files())  # Java's merge-on-read delete
        assert [f.name for f in direct.load_table(f"{NS}.p").spec().fields] == ["name"]
    finally:
        direct.close()


@pytest.mark.s3
def test_pyiceberg_duckdb_and_tablestore_share_tables_in_s3_with_vended_credentials(
        s3_rest_service: RestService) -> None:
    service = s3_rest_service
    catalog_key = service.s3_properties["s3.access-key-id"]
    pyiceberg_writes(service)
    con = attach_duckdb(service)  # no S3 secret: DuckDB gets vended credentials from the service
    try:
        duckdb_writes(con)
        tablestore_writes(service)
        pyiceberg_drops_the_last_clients_table(service)
        seen = everyone_reads(service, con)
        # DuckDB made one S3 secret per table from the vended storage-credentials: scoped to
        # the table's location, a temporary key (not the catalog's), with its expiry.
        secrets = con.execute("SELECT scope, secret_string FROM duckdb_secrets() WHERE type = 's3'").fetchall()
    finally:
        con.close()
    for client, tables in seen.items():
        assert tables == EXPECTED, f"{client} reads differently"
    touched = (*TABLES, "p_tmp", "d_tmp")  # every table DuckDB read or wrote
    assert {scope[0] for scope, _ in secrets} == {f"{service.warehouse}/{NS}/{t}" for t in touched}
    for _, text in secrets:
        assert f"key_id={catalog_key};" not in text and "session_token=redacted" in text
        assert "expires_at=" in text
    # Every client held vended credentials for the table, not the catalog's key.
    io = service.pyiceberg().load_table(f"{NS}.p").io.properties
    assert io["s3.access-key-id"] != catalog_key and io["s3.session-token"]
