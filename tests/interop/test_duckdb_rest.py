"""DuckDB through our REST catalog service (``tablestore catalog serve``, started for real).

DuckDB attaches the service with a bearer token and with OAuth2 client credentials, lists and
reads tablestore's tables, and writes its own (CREATE, INSERT, DELETE, UPDATE, ALTER, rename,
DROP, a two-table transaction); tablestore and pyiceberg then read DuckDB's tables as DuckDB
does. A read-only token is refused with 403. DuckDB's own bugs are asserted and named.
"""

from __future__ import annotations

import datetime
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.spec.manifests.manifest import ManifestContent, read_manifest_list
from tests.interop.fixture_tables import events
from tests.interop.readers import duckdb_connect
from tests.interop.rows import canonical_rows
from tests.rest.conftest import CATALOG, CLIENT_ID, CLIENT_SECRET, READ_TOKEN, WRITE_TOKEN, RestService


@pytest.fixture(scope="module")
def service(catalog_service: RestService) -> RestService:
    """The service over a SQLite catalog and a plain local warehouse, as the README sets it up (the
    session's, emptied after the module)."""
    return catalog_service


@pytest.fixture(scope="module")
def direct(service: RestService) -> Iterator[SqlCatalog]:
    """tablestore on the service's own database: what DuckDB committed, read without the service."""
    catalog = SqlCatalog(CATALOG, **service.direct_properties())
    try:
        yield catalog
    finally:
        catalog.close()


def attach(service: RestService, secret: str) -> Any:
    """A fresh DuckDB with the service attached as ``lake`` through the secret's options."""
    con = duckdb_connect(Path(tempfile.mkdtemp(prefix="duckdb-ext-")))
    con.execute(f"CREATE SECRET lake_auth ({secret})")
    con.execute(f"ATTACH '{CATALOG}' AS lake (TYPE iceberg, ENDPOINT '{service.uri}', SECRET lake_auth)")
    return con


@pytest.fixture
def duck(service: RestService) -> Iterator[Any]:
    con = attach(service, f"TYPE iceberg, TOKEN '{WRITE_TOKEN}'")
    try:
        yield con
    finally:
        con.close()


def duck_rows(con: Any, table: str, direct: SqlCatalog, identifier: str) -> list[list[Any]]:
    """DuckDB's rows of a table, in the canonical form of the table's current schema."""
    schema = direct.load_table(identifier).schema()
    return canonical_rows(con.execute(f"SELECT * FROM {table}").to_arrow_table(), schema)


def assert_all_read_alike(con: Any, direct: SqlCatalog, identifier: str) -> list[list[Any]]:
    """DuckDB, tablestore and pyiceberg (from the current metadata file) return the same rows."""
    table = direct.load_table(identifier)
    ours = canonical_rows(table.scan().to_arrow(), table.schema())
    theirs = duck_rows(con, f"lake.{identifier}", direct, identifier)
    py = canonical_rows(StaticTable.from_metadata(table.metadata_location).scan().to_arrow(), table.schema())
    assert ours == theirs, f"tablestore and DuckDB differ on {identifier}"
    assert py == theirs, f"pyiceberg and DuckDB differ on {identifier}"
    return ours


def seed(direct: SqlCatalog, namespace: str) -> None:
    """A tablestore table with a merge-on-read delete, for DuckDB to find and read."""
    if not direct.namespace_exists((namespace,)):
        direct.create_namespace(namespace)
    table = direct.create_table((namespace, "events"), schema=events(0, 1).schema, partition_by=["day(ts)", "cat"],
                                properties={"write.delete.mode": "merge-on-read"})
    table.append(events(0, 30))
    table.delete("id IN (3, 4, 17)")


def test_duckdb_lists_and_reads_tablestore_tables_with_a_bearer_token(duck: Any, direct: SqlCatalog) -> None:
    seed(direct, "bearer")
    tables = {(schema, name) for _, schema, name, *_ in duck.execute("SHOW ALL TABLES").fetchall()}
    assert ("bearer", "events") in tables
    rows = assert_all_read_alike(duck, direct, "bearer.events")
    assert len(rows) == 27
    filtered = duck.execute("SELECT id FROM lake.bearer.events WHERE cat = 'south' AND ts >= TIMESTAMP '2024-03-31' "
                            "ORDER BY id").fetchall()
    expected = sorted(r.as_py() for r, c, ts in zip(*[direct.load_table("bearer.events").scan().to_arrow().column(n)
                                                     for n in ("id", "cat", "ts")], strict=True)
                      if c.as_py() == "south" and ts.as_py() is not None and ts.as_py() >= datetime.datetime(2024, 3, 31))
    assert [r[0] for r in filtered] == expected and expected


def test_duckdb_attaches_with_oauth2_client_credentials(service: RestService, direct: SqlCatalog) -> None:
    """DuckDB sends the client id and secret with HTTP Basic, which RFC 6749 §2.3.1 requires servers to take."""
    seed(direct, "oauth")
    con = attach(service, f"TYPE iceberg, CLIENT_ID '{CLIENT_ID}', CLIENT_SECRET '{CLIENT_SECRET}', "
                          f"OAUTH2_SERVER_URI '{service.uri}/v1/oauth/tokens'")
    try:
        assert len(assert_all_read_alike(con, direct, "oauth.events")) == 27
        con.execute("INSERT INTO lake.oauth.events (id, cat) VALUES (1000, 'oauth')")
        assert direct.load_table("oauth.events").scan(filter="id = 1000").to_arrow().column("cat").to_pylist() == ["oauth"]
    finally:
        con.close()


def test_duckdb_creates_writes_alters_renames_and_drops_and_others_read_it(duck: Any, direct: SqlCatalog) -> None:
    duck.execute("CREATE SCHEMA lake.ddl")
    duck.execute("CREATE TABLE lake.ddl.orders (id BIGINT, name VARCHAR, amount DECIMAL(10, 2), ts TIMESTAMP, "
                 "tstz TIMESTAMPTZ, d DATE, ok BOOLEAN, score DOUBLE, raw BLOB, tags VARCHAR[], "
                 "pt STRUCT(a INTEGER, b VARCHAR))")
    duck.execute("INSERT INTO lake.ddl.orders VALUES "
                 "(1, 'ä b', 1.50, TIMESTAMP '2024-01-01 10:00:00.123456', TIMESTAMPTZ '2024-01-01 10:00:00+00', "
                 "DATE '2024-01-01', true, 0.5, '\\x00\\xff'::BLOB, ['x', 'y'], {'a': 1, 'b': 'q'}), "
                 "(2, NULL, NULL, NULL, NULL, NULL, NULL, 'NaN'::DOUBLE, NULL, [], NULL), "
                 "(3, 'c', -2.25, TIMESTAMP '2024-02-29 23:59:59', NULL, DATE '1970-01-01', false, -1e300, '', NULL, "
                 "{'a': NULL, 'b': 'z'})")
    assert len(assert_all_read_alike(duck, direct, "ddl.orders")) == 3
    assert duck.execute("DELETE FROM lake.ddl.orders WHERE id = 2").fetchall() == [(1,)]
    assert duck.execute("UPDATE lake.ddl.orders SET name = upper(name), amount = amount * 2 WHERE id = 3").fetchall() == [(1,)]
    rows = assert_all_read_alike(duck, direct, "ddl.orders")
    assert [(r[0], r[1], r[2]) for r in rows] == [(1, "ä b", "1.50"), (3, "C", "-4.50")]
    duck.execute("ALTER TABLE lake.ddl.orders ADD COLUMN extra INTEGER")
    duck.execute("INSERT INTO lake.ddl.orders (id, extra) VALUES (4, 44)")
    duck.execute("ALTER TABLE lake.ddl.orders RENAME TO orders2")
    assert not direct.table_exists("ddl.orders")
    rows = assert_all_read_alike(duck, direct, "ddl.orders2")
    assert [(r[0], r[-1]) for r in rows] == [(1, None), (3, None), (4, 44)]
    assert [f.name for f in direct.load_table("ddl.orders2").schema().fields][-1] == "extra"
    duck.execute("CREATE TABLE lake.ddl.copy AS SELECT id, name FROM lake.ddl.orders2 WHERE id < 4")
    assert assert_all_read_alike(duck, direct, "ddl.copy") == [[1, "ä b"], [3, "C"]]
    duck.execute("DROP TABLE lake.ddl.copy")
    duck.execute("DROP TABLE lake.ddl.orders2")
    assert not direct.table_exists("ddl.copy") and not direct.table_exists("ddl.orders2")


def test_duckdb_commits_a_two_table_transaction_at_once(duck: Any, direct: SqlCatalog) -> None:
    duck.execute("CREATE SCHEMA lake.tx")
    duck.execute("CREATE TABLE lake.tx.a (id BIGINT)")
    duck.execute("CREATE TABLE lake.tx.b (id BIGINT, note VARCHAR)")
    before = (direct.load_table("tx.a").metadata_location, direct.load_table("tx.b").metadata_location)
    duck.execute("BEGIN TRANSACTION")
    duck.execute("INSERT INTO lake.tx.a VALUES (1), (2)")
    duck.execute("INSERT INTO lake.tx.b VALUES (10, 'ten')")
    # Nothing reaches the catalog before COMMIT.
    assert (direct.load_table("tx.a").metadata_location, direct.load_table("tx.b").metadata_location) == before
    duck.execute("COMMIT")
    assert assert_all_read_alike(duck, direct, "tx.a") == [[1], [2]]
    assert assert_all_read_alike(duck, direct, "tx.b") == [[10, "ten"]]
    duck.execute("BEGIN TRANSACTION")
    duck.execute("INSERT INTO lake.tx.a VALUES (3)")
    duck.execute("DELETE FROM lake.tx.b")
    duck.execute("ROLLBACK")
    assert assert_all_read_alike(duck, direct, "tx.a") == [[1], [2]]
    assert assert_all_read_alike(duck, direct, "tx.b") == [[10, "ten"]]


def test_a_read_only_token_reads_but_is_refused_writes_with_403(service: RestService, direct: SqlCatalog) -> None:
    seed(direct, "readonly")
    con = attach(service, f"TYPE iceberg, TOKEN '{READ_TOKEN}'")
    try:
        assert len(assert_all_read_alike(con, direct, "readonly.events")) == 27
        before = direct.load_table("readonly.events").metadata_location
        with pytest.raises(Exception, match=r"403") as refused:
            con.execute("INSERT INTO lake.readonly.events (id) VALUES (99)")
        assert "ForbiddenException" in str(refused.value) or "Forbidden" in str(refused.value)
        with pytest.raises(Exception, match=r"403"):
            con.execute("CREATE TABLE lake.readonly.other (id BIGINT)")
        assert direct.load_table("readonly.events").metadata_location == before
        assert not direct.table_exists("readonly.other")
    finally:
        con.close()


def test_duckdb_bug_writes_fixed_columns_as_byte_array(duck: Any, direct: SqlCatalog) -> None:
    """DuckDB bug: a ``fixed[4]`` value goes to Parquet as BYTE_ARRAY; the spec maps fixed(L) to
    FIXED_LEN_BYTE_ARRAY[L]. tablestore reads the bytes; pyiceberg refuses the file."""
    direct.create_namespace("fixed")
    direct.create_table(("fixed", "f"), schema=pa.schema([("id", pa.int64()), ("fx", pa.binary(4))]))
    duck.execute("INSERT INTO lake.fixed.f VALUES (1, '\\x01\\x02\\x03\\x04'::BLOB)")
    table = direct.load_table("fixed.f")
    ours = canonical_rows(table.scan().to_arrow(), table.schema())
    assert ours == duck_rows(duck, "lake.fixed.f", direct, "fixed.f") == [[1, "01020304"]]
    (task,) = table.scan().plan_files()
    column = pq.ParquetFile(task.file.file_path.removeprefix("file://")).metadata.schema.column(1)
    assert column.name == "fx"
    assert column.physical_type == "BYTE_ARRAY", "DuckDB now writes fixed as the spec says: drop this bug from docs/readers.md"
    with pytest.raises(Exception, match=r"Cannot promote an binary to fixed\[4\]"):
        StaticTable.from_metadata(table.metadata_location).scan().to_arrow()


def test_duckdb_bug_files_deletes_under_the_current_spec_after_partition_evolution(duck: Any, direct: SqlCatalog) -> None:
    """DuckDB bug: after day(ts) became hour(ts), DuckDB files the position delete for a row of a
    day(ts) file in a delete manifest of the hour(ts) spec, with a partition struct holding both
    fields. The spec applies a position delete only to data files of the same spec and partition,
    so that delete does not apply: tablestore shows the row, as Java 1.10 does (checked with
    ``oracle read``), while DuckDB hides it. pyiceberg, and Polars through it, misread the wider
    struct by position and miss the other, correctly filed delete as well (pyiceberg's bug)."""
    direct.create_namespace("evolved")
    table = direct.create_table(("evolved", "e"), schema=events(0, 1).schema, partition_by=["day(ts)"],
                                properties={"write.delete.mode": "merge-on-read"})
    table.append(events(0, 10))
    with table.update_spec() as update:
        update.replace_field("ts_day", "hour(ts)")
    table.append(events(10, 10))
    duck.execute("DELETE FROM lake.evolved.e WHERE id IN (2, 15)")  # 2 in a day(ts) file, 15 in an hour(ts) one
    table = direct.load_table("evolved.e")
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    manifests = read_manifest_list(table.io, snapshot.manifest_list)
    assert {m.partition_spec_id for m in manifests if m.content == ManifestContent.DATA} == {0, 1}
    assert {m.partition_spec_id for m in manifests if m.content == ManifestContent.DELETES} == {1}, \
        "DuckDB now files deletes under the data file's spec: drop this bug from docs/readers.md"
    everything = list(range(20))
    assert [r[0] for r in duck.execute("SELECT id FROM lake.evolved.e ORDER BY id").fetchall()] == \
        [k for k in everything if k not in (2, 15)]
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [k for k in everything if k != 15]
    py = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
    assert sorted(py.column("id").to_pylist()) == everything, "pyiceberg now reads the wider struct by field id"


def test_duckdb_writes_a_v3_table_with_deletion_vectors_that_tablestore_reads_alike(
        duck: Any, direct: SqlCatalog) -> None:
    """DuckDB 1.5 creates a format v3 table through the service (our metadata builder accepts its
    v3 commits: next-row-id advanced by each snapshot's added-rows) and deletes with DVs."""
    duck.execute("CREATE SCHEMA lake.v3")
    duck.execute("CREATE TABLE lake.v3.t (id BIGINT, v VARCHAR) WITH ('format-version'='3')")
    duck.execute("INSERT INTO lake.v3.t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')")
    assert duck.execute("DELETE FROM lake.v3.t WHERE id IN (2, 4)").fetchall() == [(2,)]
    assert duck.execute("UPDATE lake.v3.t SET v = 'C' WHERE id = 3").fetchall() == [(1,)]
    assert assert_all_read_alike(duck, direct, "v3.t") == [[1, "a"], [3, "C"]]
    table = direct.load_table("v3.t")
    assert table.metadata.format_version == 3
    first = table.metadata.snapshots[0]
    assert first.first_row_id == 0 and table.metadata.next_row_id is not None and table.metadata.next_row_id >= 4
    dvs = [d for task in table.scan().plan_files() for d in task.delete_files]
    assert dvs and all(d.file_format.value == "PUFFIN" and d.referenced_data_file for d in dvs)


def test_tablestore_dvs_are_read_by_duckdb_and_merge_the_dvs_duckdb_wrote(duck: Any, direct: SqlCatalog) -> None:
    """Both ways on format v3: DuckDB and pyiceberg read a table with our deletion vectors, and
    our merge-on-read delete on DuckDB's v3 table merges DuckDB's DV into ours."""
    from tablestore.spec.manifests.manifest import FileFormat

    mor = {"write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read"}
    direct.create_namespace("dv")
    ours = direct.create_table("dv.ours", pa.schema([("id", pa.int64()), ("v", pa.string())]), format_version=3,
                               properties=mor)
    ours.append(pa.table({"id": pa.array(range(10), pa.int64()), "v": [f"v{i}" for i in range(10)]}))
    direct.load_table("dv.ours").delete("id IN (1, 5)")
    direct.load_table("dv.ours").update({"v": "'changed'"}, "id = 8")  # merges into a new DV
    expected = [[i, "changed" if i == 8 else f"v{i}"] for i in range(10) if i not in (1, 5)]
    assert assert_all_read_alike(duck, direct, "dv.ours") == expected
    (dv,) = [d for t in direct.load_table("dv.ours").scan().plan_files() for d in t.delete_files]
    assert (dv.file_format, dv.record_count) == (FileFormat.PUFFIN, 3)

    duck.execute("CREATE TABLE lake.dv.theirs (id BIGINT, v VARCHAR) WITH ('format-version'='3')")
    duck.execute("INSERT INTO lake.dv.theirs SELECT range, 'v' || range FROM range(10)")
    assert duck.execute("DELETE FROM lake.dv.theirs WHERE id IN (2, 3)").fetchall() == [(2,)]
    (theirs,) = [d for t in direct.load_table("dv.theirs").scan().plan_files() for d in t.delete_files]
    assert theirs.file_format == FileFormat.PUFFIN and theirs.record_count == 2
    direct.load_table("dv.theirs").update_properties(mor)
    assert direct.load_table("dv.theirs").delete("id IN (3, 7)") == 1  # 3 is gone already
    assert assert_all_read_alike(duck, direct, "dv.theirs") == [[i, f"v{i}"] for i in range(10) if i not in (2, 3, 7)]
    (merged,) = [d for t in direct.load_table("dv.theirs").scan().plan_files() for d in t.delete_files]
    assert merged.file_path != theirs.file_path and merged.record_count == 3


def test_duckdb_and_tablestore_read_the_row_lineage_of_each_others_v3_tables_alike(
        duck: Any, direct: SqlCatalog) -> None:
    """Row ids of a v3 table DuckDB wrote (two inserts, a DV delete, an update) read as DuckDB reads
    them; and DuckDB reads those of a table tablestore wrote through the same catalog."""
    lineage = "id, _row_id, _last_updated_sequence_number"
    duck.execute("CREATE SCHEMA lake.lineage")
    duck.execute("CREATE TABLE lake.lineage.d (id BIGINT, v VARCHAR) WITH ('format-version'='3')")
    duck.execute("INSERT INTO lake.lineage.d VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    duck.execute("INSERT INTO lake.lineage.d VALUES (4, 'd')")
    duck.execute("DELETE FROM lake.lineage.d WHERE id = 1")
    duck.execute("UPDATE lake.lineage.d SET v = 'D' WHERE id = 4")
    theirs = sorted(list(r) for r in duck.execute(f"SELECT {lineage} FROM lake.lineage.d").fetchall())
    table = direct.load_table("lineage.d")
    ours = sorted([[r["id"], r["_row_id"], r["_last_updated_sequence_number"]]
                   for r in table.scan(columns=["id", "_row_id", "_last_updated_sequence_number"]).to_arrow().to_pylist()])
    assert ours == theirs
    # Rows 2 and 3 kept the ids of the first insert (0-2, row 1 deleted by a DV).
    assert [r[1:] for r in ours[:2]] == [[1, 1], [2, 1]]

    mine = direct.create_table(("lineage", "t"), schema=pa.schema([("id", pa.int64()), ("v", pa.string())]),
                               properties={"format-version": "3"})
    mine.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]}))
    mine.update({"v": "'B'"}, "id = 2")
    mine.append(pa.table({"id": pa.array([4], pa.int64()), "v": ["d"]}))
    expected = sorted([[r["id"], r["_row_id"], r["_last_updated_sequence_number"]] for r in
                       mine.refresh().scan(columns=["id", "_row_id", "_last_updated_sequence_number"]).to_arrow().to_pylist()])
    assert expected[:3] == [[1, 0, 1], [2, 1, 2], [3, 2, 1]]
    assert sorted(list(r) for r in duck.execute(f"SELECT {lineage} FROM lake.lineage.t").fetchall()) == expected
