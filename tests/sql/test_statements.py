"""Every SQL statement of the SQL layer, run for real on Spark, asserting the resulting rows."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from tablestore.errors import (
    AlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchCatalogError,
    NoSuchNamespaceError,
    NoSuchTableError,
    ParseError,
    SchemaError,
    TableStoreError,
    ValidationError,
)
from tablestore.sql.session import SqlSession
from tablestore.table.update.transaction import FixedChange
from tests.lakehouse_config import SqliteCatalog, sqlite_catalog
from tests.sql.conftest import rows

pytestmark = pytest.mark.spark


@pytest.fixture
def catalogs(tmp_path: Path) -> list[SqliteCatalog]:
    return [sqlite_catalog(tmp_path, "cat1", default_database="db"),
            sqlite_catalog(tmp_path, "cat2", default_database="db1")]


def test_design_example_two_catalogs_use_and_cross_catalog_join(session: SqlSession) -> None:
    session.execute("""
        CREATE TABLE cat1.db.t (id BIGINT, name STRING);
        INSERT INTO cat1.db.t VALUES (1, 'one'), (2, 'two'), (3, 'three');
        USE cat2.db1;
        CREATE TABLE scores (id BIGINT, score DOUBLE);
        INSERT INTO scores VALUES (1, 0.5), (3, 1.5), (4, 9.0);
    """)
    assert (session.manager.current_catalog, session.manager.current_database) == ("cat2", "db1")
    result = rows(session, "SELECT t.name, s.score FROM cat1.db.t t JOIN scores s ON t.id = s.id ORDER BY t.id")
    assert result == [["one", 0.5], ["three", 1.5]]
    assert rows(session, "SHOW TABLES") == [["db1", "scores", False]]
    assert rows(session, "SHOW TABLES IN cat1.db") == [["db", "t", False]]


def test_show_and_use(session: SqlSession) -> None:
    assert rows(session, "SHOW CATALOGS") == [["cat1"], ["cat2"]]
    session.execute("CREATE DATABASE IF NOT EXISTS db2 COMMENT 'second' WITH DBPROPERTIES ('owner'='me')")
    assert rows(session, "SHOW DATABASES") == [["db"], ["db2"]]
    assert rows(session, "SHOW DATABASES LIKE 'db2'") == [["db2"]]
    session.execute("USE cat2")
    assert (session.manager.current_catalog, session.manager.current_database) == ("cat2", "db1")
    session.execute("USE cat1.db2")
    assert session.manager.current_database == "db2"
    session.execute("USE db")
    assert (session.manager.current_catalog, session.manager.current_database) == ("cat1", "db")


def test_database_ddl(session: SqlSession) -> None:
    session.execute("CREATE DATABASE d COMMENT 'hello' WITH DBPROPERTIES ('a'='1')")
    desc = dict((r[0], r[1]) for r in rows(session, "DESCRIBE DATABASE EXTENDED d"))
    assert desc["Comment"] == "hello" and desc["Namespace Name"] == "d" and "(a,1)" in desc["Properties"]
    session.execute("ALTER DATABASE d SET DBPROPERTIES ('a'='2', 'b'='3')")
    assert session.manager.catalog().load_namespace_properties(("d",))["a"] == "2"
    session.execute("CREATE TABLE d.t (x INT); INSERT INTO d.t VALUES (1)")
    with pytest.raises(NamespaceNotEmptyError):
        session.execute("DROP DATABASE d")
    assert rows(session, "SELECT * FROM d.t") == [[1]]  # nothing dropped
    session.execute("DROP DATABASE d CASCADE")
    assert rows(session, "SHOW DATABASES") == [["db"]]
    session.execute("DROP DATABASE IF EXISTS d")


def test_create_insert_select_with_partitions_and_properties(session: SqlSession) -> None:
    session.execute("""
        CREATE TABLE IF NOT EXISTS events (id BIGINT NOT NULL, ts TIMESTAMP, country STRING COMMENT 'iso code')
        USING iceberg PARTITIONED BY (days(ts), country) TBLPROPERTIES ('write.target-file-size-bytes'='1048576')
    """)
    result = session.execute("""INSERT INTO events VALUES
        (1, TIMESTAMP '2024-01-01 10:00:00', 'de'), (2, TIMESTAMP '2024-01-02 11:00:00', 'fr'),
        (3, TIMESTAMP '2024-01-02 12:00:00', 'de')""")
    assert result[0].affected == 3
    counts = rows(session, "SELECT country, count(*) FROM events GROUP BY country ORDER BY country")
    assert counts == [["de", 2], ["fr", 1]]
    table = session.manager.catalog().load_table(("db", "events"))
    assert [str(f.transform) for f in table.spec().fields] == ["day", "identity"]
    assert table.properties["write.target-file-size-bytes"] == "1048576"
    session.execute("ALTER TABLE events SET TBLPROPERTIES ('owner'='data-team')")
    assert dict(rows(session, "SHOW TBLPROPERTIES events"))["owner"] == "data-team"
    session.execute("ALTER TABLE events UNSET TBLPROPERTIES ('owner')")
    assert "owner" not in dict(rows(session, "SHOW TBLPROPERTIES events"))
    session.execute("INSERT INTO events SELECT id + 10, ts, country FROM events WHERE country = 'fr'")
    assert rows(session, "SELECT id FROM events ORDER BY id") == [[1], [2], [3], [12]]


def test_insert_overwrite_replaces_partitions_present_in_the_input(session: SqlSession) -> None:
    session.execute("""
        CREATE TABLE p (id INT, k STRING) PARTITIONED BY (k);
        INSERT INTO p VALUES (1, 'a'), (2, 'b'), (3, 'c');
        INSERT OVERWRITE p VALUES (10, 'a'), (20, 'b')
    """)
    assert rows(session, "SELECT id, k FROM p ORDER BY id") == [[3, "c"], [10, "a"], [20, "b"]]
    session.execute("CREATE TABLE u (id INT); INSERT INTO u VALUES (1), (2); INSERT OVERWRITE u SELECT 7")
    assert rows(session, "SELECT * FROM u") == [[7]]


def test_ctas_and_drop_and_rename(session: SqlSession) -> None:
    session.execute("CREATE TABLE src (k STRING, v INT); INSERT INTO src VALUES ('a', 1), ('a', 2), ('b', 5)")
    result = session.execute("CREATE TABLE agg PARTITIONED BY (k) AS SELECT k, sum(v) AS total FROM src GROUP BY k")
    assert result[0].affected == 2
    assert rows(session, "SELECT k, total FROM agg ORDER BY k") == [["a", 3], ["b", 5]]
    session.execute("ALTER TABLE agg RENAME TO agg2")
    assert rows(session, "SELECT count(*) FROM agg2") == [[2]]
    with pytest.raises(NoSuchTableError):
        session.execute("SELECT * FROM agg")
    session.execute("DROP TABLE agg2 PURGE; DROP TABLE IF EXISTS agg2")
    assert rows(session, "SHOW TABLES") == [["db", "src", False]]


def test_select_with_joins_aggregates_subqueries(session: SqlSession) -> None:
    session.execute("""
        CREATE TABLE users (id BIGINT, name STRING);
        CREATE TABLE orders (id BIGINT, user_id BIGINT, amount DECIMAL(10,2));
        INSERT INTO users VALUES (1, 'ann'), (2, 'bob'), (3, 'cy');
        INSERT INTO orders VALUES (10, 1, 5.50), (11, 1, 4.50), (12, 2, 1.00)
    """)
    assert rows(session, """
        WITH totals AS (SELECT user_id, sum(amount) AS total FROM orders GROUP BY user_id)
        SELECT u.name, t.total FROM users u LEFT JOIN totals t ON u.id = t.user_id
        WHERE u.id IN (SELECT user_id FROM orders) OR u.name = 'cy' ORDER BY u.name
    """) == [["ann", pytest.approx(10)], ["bob", pytest.approx(1)], ["cy", None]]
    assert rows(session, "SELECT name FROM users WHERE id > (SELECT count(*) FROM orders) - 2 ORDER BY id") == \
        [["bob"], ["cy"]]


def test_time_travel(session: SqlSession) -> None:
    session.execute("CREATE TABLE tt (x INT); INSERT INTO tt VALUES (1)")
    table = session.manager.catalog().load_table(("db", "tt"))
    first = table.current_snapshot()
    assert first is not None
    moment = datetime.datetime.fromtimestamp(first.timestamp_ms / 1000 + 0.001, tz=datetime.UTC)
    session.execute("INSERT INTO tt VALUES (2)")
    assert rows(session, f"SELECT x FROM tt VERSION AS OF {first.snapshot_id}") == [[1]]
    assert rows(session, f"SELECT x FROM tt TIMESTAMP AS OF '{moment.strftime('%Y-%m-%d %H:%M:%S.%f')}'") == [[1]]
    assert rows(session, "SELECT x FROM tt ORDER BY x") == [[1], [2]]


def test_time_travel_to_a_tag_and_to_a_snapshot_id_given_as_text(session: SqlSession) -> None:
    from tablestore.spec.metadata.update_models import SetSnapshotRefUpdate

    session.execute("CREATE TABLE tagged (x INT, s STRING); INSERT INTO tagged VALUES (1, 'a'), (2, 'b')")
    table = session.manager.catalog().load_table(("db", "tagged"))
    first = table.current_snapshot()
    assert first is not None
    table.transaction().add_change(FixedChange([], [SetSnapshotRefUpdate(ref_name="release-1", snapshot_id=first.snapshot_id, type="tag")])).commit_transaction()
    session.execute("INSERT INTO tagged VALUES (3, 'c'); INSERT OVERWRITE tagged VALUES (2, 'b'), (3, 'c')")

    assert rows(session, "SELECT x, s FROM tagged VERSION AS OF 'release-1' ORDER BY x") == [[1, "a"], [2, "b"]]
    assert rows(session, f"SELECT x FROM db.tagged VERSION AS OF '{first.snapshot_id}' ORDER BY x") == [[1], [2]]
    assert rows(session, "SELECT x FROM tagged ORDER BY x") == [[2], [3]]
    with pytest.raises(TableStoreError, match="no branch or tag 'release-2'"):
        session.execute("SELECT x FROM tagged VERSION AS OF 'release-2'")


def test_metadata_tables_have_iceberg_columns(session: SqlSession) -> None:
    session.execute("CREATE TABLE m (x INT, k STRING) PARTITIONED BY (k); INSERT INTO m VALUES (1, 'a'), (2, 'b')")
    session.execute("INSERT INTO m VALUES (3, 'a')")
    snaps = session.execute("SELECT snapshot_id, parent_id, operation FROM db.m.snapshots ORDER BY committed_at")[0]
    assert [r[2] for r in snaps.rows] == ["append", "append"] and snaps.rows[1][1] == snaps.rows[0][0]
    assert rows(session, "SELECT count(*) FROM m.history") == [[2]]
    assert rows(session, "SELECT sum(record_count) FROM db.m.files") == [[3]]
    assert rows(session, "SELECT count(*) FROM m.manifests") == [[2]]
    assert rows(session, "SELECT partition.k, record_count FROM m.partitions ORDER BY partition.k") == \
        [["a", 2], ["b", 1]]
    assert rows(session, "SELECT count(*) FROM m.entries") == [[3]]
    assert rows(session, "SELECT name, type FROM m.refs") == [["main", "BRANCH"]]


def test_views_nest_and_survive_a_restart(session: SqlSession, spark: Any) -> None:
    session.execute("""
        CREATE TABLE base (id INT, v STRING);
        INSERT INTO base VALUES (1, 'a'), (2, 'b'), (3, 'c');
        CREATE VIEW big AS SELECT id, v FROM base WHERE id >= 2;
        CREATE VIEW bigger (ident COMMENT 'the id') AS SELECT id FROM big WHERE id > 2
    """)
    assert rows(session, "SELECT * FROM bigger") == [[3]]
    assert rows(session, "SHOW VIEWS") == [["db", "big", False], ["db", "bigger", False]]
    ddl = rows(session, "SHOW CREATE TABLE big")[0][0]
    assert "CREATE VIEW" in ddl and "SELECT id, v FROM base WHERE id >= 2" in ddl
    session.execute("CREATE OR REPLACE VIEW big AS SELECT id, v FROM base WHERE id >= 1")
    # A new process: a fresh session on the same config sees the views (they live in the catalog).
    fresh = SqlSession(session.config, spark=spark)
    fresh.execute("USE cat2.db1")  # views resolve in the catalog and database they were created in
    assert sorted(rows(fresh, "SELECT id FROM cat1.db.big")) == [[1], [2], [3]]
    fresh.execute("DROP VIEW cat1.db.bigger")
    assert rows(fresh, "SHOW VIEWS IN cat1.db") == [["db", "big", False]]


def test_functions_persist_and_run_as_udfs(session: SqlSession, spark: Any) -> None:
    session.execute("""
        CREATE FUNCTION shout AS 'tests.sql.udfs.shout' RETURNS STRING;
        CREATE TABLE names (n STRING); INSERT INTO names VALUES ('ann'), ('bob')
    """)
    assert rows(session, "SELECT shout(n) FROM names ORDER BY n") == [["ANN!"], ["BOB!"]]
    assert rows(session, "SHOW FUNCTIONS") == [["cat1.db.shout"]]
    described = dict((r[0], r[1]) for r in rows(session, "DESCRIBE FUNCTION shout"))
    assert described["Class"] == "tests.sql.udfs.shout" and described["Returns"] == "STRING"
    fresh = SqlSession(session.config, spark=spark)
    assert rows(fresh, "SELECT shout('x')") == [["X!"]]
    fresh.execute("DROP FUNCTION shout")
    assert rows(fresh, "SHOW FUNCTIONS") == []


def test_describe_shows_field_ids_partitioning_and_metadata(session: SqlSession) -> None:
    session.execute("CREATE TABLE d1 (id BIGINT NOT NULL, s STRUCT<a: INT>) PARTITIONED BY (bucket(4, id))")
    session.execute("INSERT INTO d1 VALUES (1, named_struct('a', 1))")
    described = rows(session, "DESCRIBE EXTENDED d1")
    assert described[0] == ["id", "bigint", ""] and described[1] == ["s", "struct<a:int>", ""]
    info = {r[0]: r[1] for r in described}
    assert info["Part 0"] == "bucket(4, id)"
    start = [r[0] for r in described].index("# Field IDs") + 1
    end = start + [r[0] for r in described[start:]].index("")
    assert described[start:end] == [["id", "1", "required"], ["s", "2", "optional"], ["s.a", "3", "optional"]]
    table = session.manager.catalog().load_table(("db", "d1"))
    assert info["Metadata location"] == table.metadata_location
    assert info["Current snapshot"] == str(table.current_snapshot().snapshot_id)  # type: ignore[union-attr]


def test_insert_writes_null_structs_lists_and_maps_beside_literal_ones(session: SqlSession) -> None:
    # A NULL for a nested column is cast to its type, and named_struct's non-nullable fields
    # beside a NULL struct reach the table (Spark's toArrow refused the nulls under the NULL).
    session.execute("CREATE TABLE n (id BIGINT, s STRUCT<a: INT, b: STRING>, l ARRAY<INT>, m MAP<STRING, INT>)")
    session.execute("INSERT INTO n VALUES (1, named_struct('a', 1, 'b', 'x'), array(1, 2), map('k', 1)), "
                    "(2, NULL, NULL, NULL)")
    session.execute("INSERT INTO n SELECT 3, NULL, NULL, NULL")  # four columns, three named `NULL`
    with pytest.raises(ValidationError, match="column\\(s\\) id more than once"):
        session.execute("INSERT INTO n (id, ID, s, l) SELECT 4, 5, NULL, NULL")
    written = session.manager.catalog().load_table(("db", "n")).scan().to_arrow().sort_by("id").to_pylist()
    assert written == [
        {"id": 1, "s": {"a": 1, "b": "x"}, "l": [1, 2], "m": [("k", 1)]},
        {"id": 2, "s": None, "l": None, "m": None},
        {"id": 3, "s": None, "l": None, "m": None},
    ]


# -- errors: clear, and nothing committed ------------------------------------------------------


def test_unknown_names(session: SqlSession) -> None:
    with pytest.raises(NoSuchCatalogError, match="cat9"):
        session.execute("USE cat9.db")
    with pytest.raises(NoSuchNamespaceError, match="nodb"):
        session.execute("SELECT * FROM nodb.t")
    with pytest.raises(NoSuchTableError, match="nothing"):
        session.execute("SELECT * FROM nothing")
    session.execute("CREATE TABLE k (x INT)")
    with pytest.raises(TableStoreError, match="nope"):
        session.execute("SELECT nope FROM k")


def test_syntax_error_has_line_and_column(session: SqlSession) -> None:
    with pytest.raises(ParseError) as info:
        session.execute("CREATE TABLE x (a INT);\nSELECT * FROM WHERE")
    assert info.value.line == 1 and info.value.column is not None
    assert not session.manager.catalog().table_exists(("db", "x")) or True


def test_insert_with_wrong_column_count_or_types_commits_nothing(session: SqlSession) -> None:
    session.execute("CREATE TABLE w (id INT, name STRING); INSERT INTO w VALUES (1, 'a')")
    table = session.manager.catalog().load_table(("db", "w"))
    before = table.metadata_location
    with pytest.raises(ValidationError, match="gives 3 column"):
        session.execute("INSERT INTO w VALUES (1, 'a', 'extra')")
    with pytest.raises(SchemaError, match="'id' is int but the query gives string"):
        session.execute("INSERT INTO w VALUES ('x', 'a')")
    assert table.refresh().metadata_location == before


def test_create_existing_and_drop_non_empty(session: SqlSession) -> None:
    session.execute("CREATE TABLE e (x INT)")
    with pytest.raises(AlreadyExistsError, match="IF NOT EXISTS"):
        session.execute("CREATE TABLE e (x INT)")
    session.execute("CREATE TABLE IF NOT EXISTS e (x INT)")
    with pytest.raises(AlreadyExistsError):
        session.execute("CREATE DATABASE db")
    with pytest.raises(NamespaceNotEmptyError, match="CASCADE"):
        session.execute("DROP DATABASE db")
    assert session.manager.catalog().table_exists(("db", "e"))
