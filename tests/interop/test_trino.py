"""The real Trino 476 against our REST catalog service, as the stack runs it.

Trino's Iceberg connector logs in with OAuth2 client credentials, gets per-table vended S3
credentials (its catalog file holds no storage key) and reads and writes in the loopback S3
server. It reads tablestore's tables (evolved schemas, day-to-hour partition evolution,
merge-on-read deletes, time travel, metadata tables) as tablestore does; it writes tables that
tablestore, our Spark source and pyiceberg read alike, and then reads what tablestore wrote; its
views list and describe in tablestore; and it keeps working past its token's lifetime.

One Trino and one service per module: Trino starts in 20 to 60 seconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.errors import UnsupportedError
from tablestore.spec.schemas.schema import Schema
from tests.interop.built import BuiltTable, build_table
from tests.interop.fixture_tables import FIXTURES, NAMESPACE
from tests.interop.rows import canonical, canonical_rows, sort_rows
from tests.rest.conftest import CATALOG, CLIENT_ID, CLIENT_SECRET, WRITE_TOKEN, RestService, write_config
from tests.services import S3Server
from tests.trino import TrinoServer, rest_catalog_properties

pytestmark = [pytest.mark.trino, pytest.mark.s3]

# Issued tokens live this long: Java's client (inside Trino) refreshes them by token exchange
# at nine tenths of it, so a query after three lifetimes proves the refresh.
TOKEN_TTL_S = 20
# What Trino reads: old rows of added columns, widened types, renames and drops; the day to hour
# rollover with deletes of both kinds across specs; merge-on-read deletes and updates; four specs.
READ_FIXTURES = ("evolve_schema", "evolve_day_to_hour", "deletes_merge_on_read", "evolve_specs")


@dataclass
class Lake:
    service: RestService
    trino: TrinoServer
    direct: SqlCatalog
    built: dict[str, BuiltTable]
    s3: S3Server
    trino_since: float  # when Trino first logged in to the catalog (time.monotonic())


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server, trino: TrinoServer) -> Iterator[Lake]:
    workdir = tmp_path_factory.mktemp("trino")
    uri = f"sqlite:///{workdir / 'catalog.db'}"
    warehouse = f"s3://{s3_server.create_bucket()}/warehouse"
    config = workdir / "tablestore.yaml"
    write_config(config, uri, warehouse, s3_server.properties, server_extra={"token-ttl-seconds": TOKEN_TTL_S})
    service = RestService(config, uri, warehouse, workdir, s3_properties=s3_server.properties)
    service.start()
    direct = SqlCatalog(CATALOG, **service.direct_properties())
    try:
        direct.create_namespace(NAMESPACE)
        fixtures = {f.name: f for f in FIXTURES}
        built = {name: build_table(direct, fixtures[name]) for name in READ_FIXTURES}
        properties = rest_catalog_properties(service.uri, CATALOG, f"{CLIENT_ID}:{CLIENT_SECRET}", s3_server.endpoint,
                                             s3_server.region)
        # The tests expire snapshots and remove orphans at once, below Trino's 7-day floors.
        properties.update({"iceberg.expire-snapshots.min-retention": "0s",
                           "iceberg.remove-orphan-files.min-retention": "0s"})
        since = time.monotonic()
        trino.create_catalog("lakehouse", properties)
        yield Lake(service, trino, direct, built, s3_server, since)
    finally:
        trino.drop_catalog("lakehouse")
        direct.close()
        service.stop()


def trino_rows(lake: Lake, sql: str, schema: Schema) -> list[list[Any]]:
    """Trino's rows of ``sql``, in the canonical form of ``schema``'s columns, sorted."""
    types = [f.field_type for f in schema.fields]
    return sort_rows([[canonical(v, t) for v, t in zip(row, types, strict=True)] for row in lake.trino.query(sql)])


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def test_trino_reads_our_tables_at_every_snapshot_as_we_do(lake: Lake) -> None:
    for name, built in lake.built.items():
        table = f"lakehouse.{NAMESPACE}.{quoted(name)}"
        current = built.snapshots[-1]
        assert trino_rows(lake, f"SELECT * FROM {table}", current.schema) == current.rows, name
        assert lake.trino.query(f"SELECT count(*) FROM {table}") == [[len(current.rows)]]
        for snapshot in built.snapshots:
            # Time travel: Trino reads a snapshot with the schema it was written with.
            travelled = f"SELECT * FROM {table} FOR VERSION AS OF {snapshot.snapshot_id}"
            assert trino_rows(lake, travelled, snapshot.schema) == snapshot.rows, (name, snapshot.step)


def test_old_rows_read_null_for_added_columns_and_widened_types_read_right(lake: Lake) -> None:
    table = f"lakehouse.{NAMESPACE}.evolve_schema"
    rows = lake.trino.query(f"SELECT id, added, big, typeof(big), typeof(ratio), typeof(price) FROM {table} ORDER BY id")
    assert [r[:3] for r in rows[:4]] == [[1, None, 10], [2, None, None], [3, None, -30], [4, "new", 40]]
    assert rows[4][2] == 2**40
    assert rows[0][3:] == ["bigint", "double", "decimal(18,2)"]
    columns = [r[0] for r in lake.trino.query(f"SHOW COLUMNS FROM {table}")]
    assert columns == ["added", "big", "ratio", "price", "id"]


def test_trino_reads_both_partition_specs_and_merge_on_read_deletes(lake: Lake) -> None:
    table = f"lakehouse.{NAMESPACE}.evolve_day_to_hour"
    ours = lake.direct.load_table(f"{NAMESPACE}.evolve_day_to_hour")
    specs = {row[0] for row in lake.trino.query(f'SELECT spec_id FROM {table[:-len("evolve_day_to_hour")]}'
                                                 f'"evolve_day_to_hour$files" WHERE content = 0')}
    assert specs == {0, 1}
    # Position delete files (content 1) from the merge-on-read delete are applied.
    deletes = lake.trino.query(f'SELECT count(*) FROM lakehouse.{NAMESPACE}."deletes_merge_on_read$files" '
                               "WHERE content = 1")
    assert deletes[0][0] > 0
    filtered = lake.trino.query(f"SELECT count(*) FROM {table} WHERE ts >= TIMESTAMP '2024-03-31 10:00:00'")
    expected = ours.scan(filter="ts >= '2024-03-31T10:00:00'").to_arrow().num_rows
    assert filtered == [[expected]] and expected > 0


def test_trino_metadata_tables_agree_with_ours(lake: Lake) -> None:
    for name in READ_FIXTURES:
        ours = lake.direct.load_table(f"{NAMESPACE}.{name}")
        prefix = f'lakehouse.{NAMESPACE}."{name}'
        snapshots = lake.trino.query(f'SELECT snapshot_id, parent_id, operation FROM {prefix}$snapshots" '
                                     "ORDER BY committed_at")
        inspected = ours.inspect.snapshots()
        assert snapshots == [[s, p, o] for s, p, o in zip(*(inspected.column(c).to_pylist() for c in
                                                            ("snapshot_id", "parent_id", "operation")), strict=True)]
        history = lake.trino.query(f'SELECT snapshot_id, is_current_ancestor FROM {prefix}$history" '
                                   "ORDER BY made_current_at")
        ours_history = ours.inspect.history()
        assert history == [list(r) for r in zip(ours_history.column("snapshot_id").to_pylist(),
                                                ours_history.column("is_current_ancestor").to_pylist(), strict=True)]
        files = lake.trino.query(f'SELECT content, count(*), sum(record_count) FROM {prefix}$files" '
                                 "GROUP BY content ORDER BY content")
        ours_files = ours.inspect.files()
        by_content: dict[int, list[int]] = {}
        for content, count in zip(ours_files.column("content").to_pylist(),
                                  ours_files.column("record_count").to_pylist(), strict=True):
            entry = by_content.setdefault(content, [0, 0])
            entry[0] += 1
            entry[1] += count
        assert files == [[c, n, r] for c, (n, r) in sorted(by_content.items())], name
        # The rows and files per partition add up alike. How partitions of different specs are
        # grouped differs between readers: Trino keeps one row per partition layout, Java 1.10
        # (as ours) one per spec, except that Java joins a null partition of a replaced field.
        partitions = lake.trino.query(f'SELECT sum(record_count), sum(file_count) FROM {prefix}$partitions"')
        ours_partitions = ours.inspect.partitions()
        assert partitions == [[sum(ours_partitions.column("record_count").to_pylist()),
                               sum(ours_partitions.column("file_count").to_pylist())]], name


WRITES = [
    "CREATE SCHEMA lakehouse.tw",
    "CREATE TABLE lakehouse.tw.orders (id bigint, name varchar, amount decimal(9, 2), day date) "
    "WITH (partitioning = ARRAY['day(day)'], format_version = 2)",
    "INSERT INTO lakehouse.tw.orders VALUES (1, 'a', 1.50, DATE '2024-01-01'), (2, 'b', 2.25, DATE '2024-01-01'), "
    "(3, 'c', 3.00, DATE '2024-01-02'), (4, 'd', 4.75, DATE '2024-01-03')",
    "INSERT INTO lakehouse.tw.orders VALUES (5, 'e', 5.00, DATE '2024-01-03')",
    "UPDATE lakehouse.tw.orders SET amount = amount * 2 WHERE id = 2",
    "DELETE FROM lakehouse.tw.orders WHERE id = 3",
    "MERGE INTO lakehouse.tw.orders t USING (VALUES (4, 'D'), (6, 'f')) AS s(id, name) ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET name = s.name "
    "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.name, 6.00, DATE '2024-01-04')",
    "ALTER TABLE lakehouse.tw.orders ADD COLUMN note varchar",
    "INSERT INTO lakehouse.tw.orders VALUES (7, 'g', 7.00, DATE '2024-01-04', 'noted')",
    "ALTER TABLE lakehouse.tw.orders RENAME COLUMN name TO label",
    "ALTER TABLE lakehouse.tw.orders DROP COLUMN note",
    "ALTER TABLE lakehouse.tw.orders EXECUTE optimize",
    "ALTER TABLE lakehouse.tw.orders EXECUTE expire_snapshots(retention_threshold => '0s')",
    "ALTER TABLE lakehouse.tw.orders EXECUTE remove_orphan_files(retention_threshold => '0s')",
    "CREATE VIEW lakehouse.tw.big_orders AS SELECT id, label FROM lakehouse.tw.orders WHERE amount > 4",
    # A replace with fewer columns: the table's last column id must not go down (Java's rule).
    "CREATE TABLE lakehouse.tw.replaced (a bigint, b varchar, c double)",
    "CREATE OR REPLACE TABLE lakehouse.tw.replaced AS SELECT 1 AS a",
]
EXPECTED = [[1, "a", "1.50", "2024-01-01"], [2, "b", "4.50", "2024-01-01"], [4, "D", "4.75", "2024-01-03"],
            [5, "e", "5.00", "2024-01-03"], [6, "f", "6.00", "2024-01-04"], [7, "g", "7.00", "2024-01-04"]]


ORPHAN = "data/orphan-of-no-snapshot.parquet"


def _object(lake: Lake, location: str) -> tuple[str, str]:
    bucket, _, key = location.removeprefix("s3://").partition("/")
    return bucket, key


@pytest.fixture(scope="module")
def trino_wrote(lake: Lake) -> Lake:
    for statement in WRITES:
        if "remove_orphan_files" in statement:
            # A file in the table's location that no snapshot names: remove_orphan_files deletes it.
            bucket, key = _object(lake, f"{lake.direct.load_table('tw.orders').location}/{ORPHAN}")
            lake.s3.client().put_object(Bucket=bucket, Key=key, Body=b"orphan")
        lake.trino.query(statement)
    return lake


def test_trino_writes_and_tablestore_and_pyiceberg_read_the_same_rows(trino_wrote: Lake) -> None:
    lake = trino_wrote
    table = lake.direct.load_table("tw.orders")
    schema = table.schema()
    assert [f.name for f in schema.fields] == ["id", "label", "amount", "day"]
    assert [f.name for f in table.spec().fields] == ["day_day"]
    assert canonical_rows(table.scan().to_arrow(), schema) == EXPECTED
    assert trino_rows(lake, "SELECT * FROM lakehouse.tw.orders", schema) == EXPECTED
    # Through the service, as a client with only a token gets it (vended credentials).
    client = lake.service.client()
    try:
        assert canonical_rows(client.load_table("tw.orders").scan().to_arrow(), schema) == EXPECTED
    finally:
        client.close()
    py = lake.service.pyiceberg(WRITE_TOKEN)
    assert canonical_rows(py.load_table("tw.orders").scan().to_arrow(), schema) == EXPECTED
    # optimize left one data file per day (01-01, 01-03, 01-04; 01-02's one row was deleted)
    # and no delete file; expire_snapshots left one snapshot.
    assert len(table.snapshots()) == 1
    assert sorted(table.inspect.files().column("content").to_pylist()) == [0, 0, 0]
    bucket, key = _object(lake, f"{table.location}/{ORPHAN}")
    assert lake.s3.client().list_objects_v2(Bucket=bucket, Prefix=key).get("KeyCount") == 0
    replaced = lake.direct.load_table("tw.replaced").metadata
    assert [f.name for f in replaced.schema().fields] == ["a"] and replaced.last_column_id == 3
    assert lake.trino.query("SELECT * FROM lakehouse.tw.replaced") == [[1]]


@pytest.mark.spark
def test_our_spark_source_reads_trinos_table_and_column_profiles_agree(trino_wrote: Lake) -> None:
    """Our Spark source and tablestore's SQL read Trino's table; and the stack's reconciliation (the column profiles
    of ``pipelines/defs/reconcile/profiles.py``, one query in each engine) finds Trino and
    tablestore's SQL on Spark equal on every table."""
    from pipelines.defs.reconcile.profiles import differences, profile, profile_query, spark_quote, trino_quote
    from tablestore.config import LakehouseConfig, SparkConfig, SqlCatalogConfig
    from tablestore.spark import spark_session
    from tablestore.sql.session import SqlSession

    lake = trino_wrote
    catalog = SqlCatalogConfig(name=CATALOG, properties=lake.service.direct_properties(), default_database="tw")
    config = LakehouseConfig(default_catalog=CATALOG, catalogs={CATALOG: catalog}, spark=SparkConfig(master="local[1]", conf={"spark.sql.shuffle.partitions": "2"}))
    spark = spark_session(config, app_name="tablestore-trino")
    session = SqlSession(config, spark=spark)
    try:
        arrow = spark.read.format("tablestore").load("tw.orders").toArrow()
        # tablestore's SQL reads Trino's table alike.
        sql_rows = session.execute_one(f"SELECT * FROM {CATALOG}.tw.orders").rows
        compared = 0
        for namespace, name in [*((NAMESPACE, n) for n in READ_FIXTURES), ("tw", "orders")]:
            schema = lake.direct.load_table((namespace, name)).schema()
            trino_sql, labels = profile_query(f"lakehouse.{namespace}.{trino_quote(name)}", schema, trino_quote)
            ours_sql, _ = profile_query(f"{CATALOG}.{namespace}.{spark_quote(name)}", schema, spark_quote)
            theirs = profile(labels, lake.trino.query(trino_sql)[0])
            ours = profile(labels, session.execute_one(ours_sql).rows[0])
            assert differences(ours, theirs) == {}, name
            assert ours["rows"] > 0
            compared += len(labels)
        assert compared > 60
    finally:
        session.manager.close()
        spark.stop()
    schema = lake.direct.load_table("tw.orders").schema()
    assert canonical_rows(arrow.select([f.name for f in schema.fields]), schema) == EXPECTED
    assert sort_rows([[canonical(v, f.field_type) for v, f in zip(row, schema.fields, strict=True)]
                      for row in sql_rows]) == EXPECTED


def test_we_write_and_evolve_and_trino_reads_the_result(trino_wrote: Lake) -> None:
    lake = trino_wrote
    table = lake.direct.load_table("tw.orders")
    arrow = pa.table({"id": pa.array([8, 9], pa.int64()), "label": ["h", "i"],
                      "amount": pa.array([pa.scalar(8, pa.decimal128(9, 2)).as_py(), None], pa.decimal128(9, 2)),
                      "day": pa.array([pa.scalar(19730, pa.date32()).as_py()] * 2, pa.date32())})
    table.append(arrow)
    table.update_properties({"write.delete.mode": "merge-on-read"})
    table.delete("id = 1")
    with table.update_schema() as update:
        update.add_column("tag", "string")
    table.refresh()
    schema = table.schema()
    ours = canonical_rows(table.scan().to_arrow(), schema)
    assert len(ours) == 7 and all(row[-1] is None for row in ours)
    assert trino_rows(lake, "SELECT * FROM lakehouse.tw.orders", schema) == ours


def test_a_trino_view_lists_and_describes_in_tablestore_and_reading_it_names_its_dialect(
    trino_wrote: Lake, tmp_path: Path,
) -> None:
    from tablestore.config import parse_config
    from tablestore.sql.session import SqlSession

    lake = trino_wrote
    assert ("tw", "big_orders") in lake.direct.list_views("tw")
    view = lake.direct.load_view("tw.big_orders")
    assert [f.name for f in view.schema.fields] == ["id", "label"] and view.dialect == "trino"
    text = f"default-catalog: lake\ncatalogs:\n  - name: lake\n    type: rest\n    uri: {lake.service.uri}\n" \
           f"    token: {WRITE_TOKEN}\n"
    session = SqlSession(parse_config(text, source=str(tmp_path / "tablestore.yaml")))
    try:
        described = session.execute("DESCRIBE EXTENDED lake.tw.big_orders")[-1].rows
        assert [row[:2] for row in described[:2]] == [["id", "bigint"], ["label", "string"]]
        texts = {row[0]: row[1] for row in described}
        assert "lakehouse.tw.orders" in texts["View Text (trino)"] and texts["Type"] == "VIEW"
        assert [row[1] for row in session.execute("SHOW VIEWS IN lake.tw")[-1].rows] == ["big_orders"]
        with pytest.raises(UnsupportedError) as refused:
            session.execute("SELECT * FROM lake.tw.big_orders")
    finally:
        session.manager.close()
    assert "'trino'" in str(refused.value) and "lake.tw.big_orders" in str(refused.value)
    # Trino itself reads its view.
    assert sorted(lake.trino.query("SELECT id FROM lakehouse.tw.big_orders")) == [[2], [4], [5], [6], [7], [8]]


def test_trino_reads_our_branches_and_tags_by_name(lake: Lake) -> None:
    table = lake.direct.create_table(f"{NAMESPACE}.refs", pa.schema([pa.field("id", pa.int64())]))
    first = table.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    table.manage_snapshots().create_tag(first.snapshot_id, "v1").commit()
    table.append(pa.table({"id": pa.array([3], pa.int64())}), branch="audit")
    table.append(pa.table({"id": pa.array([4], pa.int64())}))
    name = f"lakehouse.{NAMESPACE}.refs"

    def ids(sql: str) -> list[int]:
        return sorted(row[0] for row in lake.trino.query(sql))

    assert ids(f"SELECT id FROM {name}") == [1, 2, 4]
    assert ids(f"SELECT id FROM {name} FOR VERSION AS OF 'audit'") == [1, 2, 3]
    assert ids(f"SELECT id FROM {name} FOR VERSION AS OF 'v1'") == [1, 2]
    refs = lake.trino.query(f'SELECT name, type, snapshot_id FROM lakehouse.{NAMESPACE}."refs$refs" ORDER BY name')
    ours = table.refresh().refs()
    assert refs == [[n, ours[n].type.upper(), ours[n].snapshot_id] for n in ("audit", "main", "v1")]


def test_a_batch_on_an_audit_branch_stays_invisible_to_trino_until_it_is_published(lake: Lake) -> None:
    """Write-audit-publish as the pipeline does it (pipelines/defs/publish.py), read by Trino: a
    bad batch on an audit branch never shows in Trino's reads of the table; a good one shows once
    main is fast-forwarded to it, as the very snapshot that was audited."""
    from pipelines.defs.publish import publish

    table = lake.direct.create_table(f"{NAMESPACE}.wap", pa.schema([pa.field("id", pa.int64()),
                                                                    pa.field("quantity", pa.int64())]))
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "quantity": pa.array([1, 2], pa.int64())}))
    main_before = table.refs()["main"].snapshot_id
    name = f"lakehouse.{NAMESPACE}.wap"
    table.append(pa.table({"id": pa.array([3], pa.int64()), "quantity": pa.array([50_000], pa.int64())}),
                 branch="audit_bad")
    assert lake.trino.query(f"SELECT count(*), max(quantity) FROM {name}") == [[2, 2]]
    assert lake.trino.query(f"SELECT max(quantity) FROM {name} FOR VERSION AS OF 'audit_bad'") == [[50_000]]
    assert table.refresh().refs()["main"].snapshot_id == main_before
    audited = table.append(pa.table({"id": pa.array([4], pa.int64()), "quantity": pa.array([3], pa.int64())}),
                           branch="audit_good")
    assert lake.trino.query(f"SELECT count(*) FROM {name}") == [[2]]
    assert publish(table, "audit_good") == audited.snapshot_id
    assert lake.trino.query(f"SELECT id FROM {name} ORDER BY id") == [[1], [2], [4]]
    main = lake.trino.query(f"SELECT snapshot_id FROM lakehouse.{NAMESPACE}.\"wap$refs\" WHERE name = 'main'")
    assert main == [[audited.snapshot_id]]


def test_trino_keeps_working_past_its_tokens_lifetime(lake: Lake) -> None:
    """Trino logged in with client credentials when its catalog was made; its token lives
    TOKEN_TTL_S seconds. Java's client refreshes it by RFC 8693 token exchange, which the service
    refused before. Last in the module, so the tests above are what Trino does meanwhile, and it
    waits only for what remains of three lifetimes."""
    table = f"lakehouse.{NAMESPACE}.evolve_schema"
    time.sleep(max(0.0, lake.trino_since + 3 * TOKEN_TTL_S + 2 - time.monotonic()))
    assert lake.trino.query(f"SELECT count(*) FROM {table}") == [[7]]
    # Its refreshes by token exchange were understood (the service logs every refused request:
    # before, "POST /v1/oauth/tokens -> 400 unsupported_grant_type"), and no request of
    # Trino's was refused for an expired token. A session's token that expired before Java
    # got to refresh it (a busy machine delays the refresh past the token's end) is refused
    # with invalid_grant, as RFC 8693 asks, and Java logs in again with its credential.
    log = lake.service.log()
    assert "unsupported_grant_type" not in log and " -> 401 " not in log, log[-3000:]
