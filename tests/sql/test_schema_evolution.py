"""Schema evolution through SQL, run for real on Spark: the design document's example to the
letter, every ALTER TABLE form, and the limits (an error, nothing committed)."""

from __future__ import annotations

import datetime

import pytest

from tablestore.errors import ParseError, SchemaEvolutionError
from tablestore.sql.session import SqlSession
from tests.sql.conftest import rows

pytestmark = pytest.mark.spark


def metadata_location(session: SqlSession, name: str = "t") -> str:
    catalog, identifier = session.manager.resolve_table((name,))
    location: str = catalog.load_table(identifier).metadata_location
    return location


def test_design_document_example_drop_then_add_reads_null_for_old_rows(session: SqlSession) -> None:
    session.execute("""
        CREATE TABLE T (a STRING, b STRING, c STRING);
        INSERT INTO T VALUES ('a1', 'b1', 'c1');
        ALTER TABLE T DROP COLUMN c;
        ALTER TABLE T ADD COLUMN c STRING;
        INSERT INTO T VALUES ('a2', 'b2', 'c2');
    """)
    assert rows(session, "SELECT * FROM T ORDER BY a") == [["a1", "b1", None], ["a2", "b2", "c2"]]


def test_rename_then_add_old_name_reads_old_data_under_new_name(session: SqlSession) -> None:
    session.execute("""
        CREATE TABLE t (id INT, name STRING);
        INSERT INTO t VALUES (1, 'one');
        ALTER TABLE t RENAME COLUMN name TO label;
        ALTER TABLE t ADD COLUMN name STRING;
        INSERT INTO t VALUES (2, 'two', 'zwei');
    """)
    assert rows(session, "SELECT id, label, name FROM t ORDER BY id") == [[1, "one", None], [2, "two", "zwei"]]


def test_add_columns_with_comment_position_and_nested_field(session: SqlSession) -> None:
    session.execute("""
        CREATE TABLE t (id INT, point STRUCT<x: INT, y: INT>);
        INSERT INTO t VALUES (1, named_struct('x', 1, 'y', 2));
        ALTER TABLE t ADD COLUMNS (first_col STRING COMMENT 'goes first' FIRST, point.z DOUBLE AFTER x, tail INT);
    """)
    assert rows(session, "DESCRIBE t")[:4] == [
        ["first_col", "string", "goes first"], ["id", "int", ""],
        ["point", "struct<x:int,z:double,y:int>", ""], ["tail", "int", ""],
    ]
    assert rows(session, "SELECT * FROM t") == [[None, 1, {"x": 1, "z": None, "y": 2}, None]]


def test_alter_column_type_comment_position_and_drop_not_null(session: SqlSession) -> None:
    session.execute("""
        CREATE TABLE t (id INT NOT NULL, amount FLOAT, price DECIMAL(9,2), note STRING);
        INSERT INTO t VALUES (1, 1.5, 3.25, 'n');
        ALTER TABLE t ALTER COLUMN id TYPE BIGINT;
        ALTER TABLE t ALTER COLUMN amount TYPE DOUBLE;
        ALTER TABLE t MODIFY price DECIMAL(12,2);
        ALTER TABLE t ALTER COLUMN note COMMENT 'free text';
        ALTER TABLE t ALTER COLUMN note FIRST;
        ALTER TABLE t ALTER COLUMN amount AFTER price;
        ALTER TABLE t ALTER COLUMN id DROP NOT NULL;
        INSERT INTO t VALUES ('m', NULL, 4.5, 2.5);
    """)
    assert rows(session, "DESCRIBE t") == [
        ["note", "string", "free text"], ["id", "bigint", ""], ["price", "decimal(12,2)", ""],
        ["amount", "double", ""],
    ]
    import decimal

    assert rows(session, "SELECT * FROM t ORDER BY note") == [
        ["m", None, decimal.Decimal("4.50"), 2.5], ["n", 1, decimal.Decimal("3.25"), 1.5],
    ]


def test_drop_columns_and_identifier_fields(session: SqlSession) -> None:
    session.execute("""
        CREATE TABLE t (id BIGINT NOT NULL, k STRING NOT NULL, a INT, b INT, c INT);
        ALTER TABLE t DROP COLUMNS a, b;
        ALTER TABLE t SET IDENTIFIER FIELDS id, k;
    """)
    catalog, identifier = session.manager.resolve_table(("t",))
    table = catalog.load_table(identifier)
    assert table.schema().column_names == ["id", "k", "c"]
    assert table.schema().identifier_field_ids == (1, 2)
    session.execute("ALTER TABLE t DROP IDENTIFIER FIELDS k")
    assert table.refresh().schema().identifier_field_ids == (1,)
    session.execute("ALTER TABLE t DROP COLUMN IF EXISTS nothing")
    assert table.refresh().schema().column_names == ["id", "k", "c"]


def test_conversion_by_rewrite_through_sql(session: SqlSession) -> None:
    session.execute("""
        CREATE TABLE t (id INT, d DATE);
        INSERT INTO t VALUES (1, DATE '2024-01-02');
        ALTER TABLE t ALTER COLUMN id TYPE DOUBLE;
        ALTER TABLE t MODIFY d STRING;
        INSERT INTO t VALUES (2.5, 'x');
    """)
    assert rows(session, "SELECT * FROM t ORDER BY id") == [[1.0, "2024-01-02"], [2.5, "x"]]


def test_cast_modes_through_table_properties(session: SqlSession) -> None:
    session.execute("""
        CREATE TABLE t (id INT, code STRING);
        INSERT INTO t VALUES (1, '10'), (2, 'x');
    """)
    before = metadata_location(session)
    with pytest.raises(SchemaEvolutionError, match="cast-mode"):
        session.execute("ALTER TABLE t ALTER COLUMN code TYPE INT")
    session.execute("ALTER TABLE t SET TBLPROPERTIES ('tablestore.schema.cast-mode' = 'strict')")
    strict = metadata_location(session)
    with pytest.raises(SchemaEvolutionError, match="'x' does not convert"):
        session.execute("ALTER TABLE t ALTER COLUMN code TYPE INT")
    assert metadata_location(session) == strict != before
    session.execute("""
        ALTER TABLE t SET TBLPROPERTIES ('tablestore.schema.cast-mode' = 'null-on-error');
        ALTER TABLE t ALTER COLUMN code TYPE INT;
    """)
    assert rows(session, "SELECT id, code FROM t ORDER BY id") == [[1, 10], [2, None]]


@pytest.mark.parametrize(("setup", "statement", "message"), [
    ("CREATE TABLE t (a INT, b INT)", "ALTER TABLE t ADD COLUMN c INT NOT NULL", "NOT NULL"),
    ("CREATE TABLE t (id INT NOT NULL, b INT); ALTER TABLE t SET IDENTIFIER FIELDS id",
     "ALTER TABLE t DROP COLUMN id", "identifier"),
    ("CREATE TABLE t (id INT NOT NULL, b INT); ALTER TABLE t SET IDENTIFIER FIELDS id",
     "ALTER TABLE t RENAME COLUMN id TO key", "identifier"),
    ("CREATE TABLE t (id INT NOT NULL, b INT); ALTER TABLE t SET IDENTIFIER FIELDS id",
     "ALTER TABLE t ALTER COLUMN id TYPE BIGINT", "identifier"),
    ("CREATE TABLE t (a INT, p STRING) PARTITIONED BY (p)", "ALTER TABLE t DROP COLUMN p", "partition field"),
    ("CREATE TABLE t (a INT, p INT) PARTITIONED BY (p)", "ALTER TABLE t ALTER COLUMN p TYPE BIGINT",
     "partition field"),
    ("CREATE TABLE t (a BIGINT, b INT)", "ALTER TABLE t ALTER COLUMN a TYPE INT", "narrows"),
    ("CREATE TABLE t (a DOUBLE, b INT)", "ALTER TABLE t MODIFY a FLOAT", "narrows"),
    ("CREATE TABLE t (a INT, b INT)", "ALTER TABLE t ADD COLUMN B STRING", "exists already"),
    ("CREATE TABLE t (a INT, b INT)", "ALTER TABLE t RENAME COLUMN a TO b", "exists already"),
    ("CREATE TABLE t (a INT, b INT)", "ALTER TABLE t ADD COLUMN `` STRING", "empty"),
    ("CREATE TABLE t (a INT)", "ALTER TABLE t DROP COLUMN a", "last column"),
    ("CREATE TABLE t (a INT, b INT)", "ALTER TABLE t DROP COLUMNS a, b", "last column"),
    ("CREATE TABLE t (a STRING, b INT)", "ALTER TABLE t ALTER COLUMN a TYPE INT", "cast-mode"),
    ("CREATE TABLE t (a INT, b INT)", "ALTER TABLE t ALTER COLUMN a SET NOT NULL", "NOT NULL"),
    ("CREATE TABLE t (a INT, p STRING) PARTITIONED BY (p); ALTER TABLE t RENAME COLUMN p TO q",
     "ALTER TABLE t ADD COLUMN p INT", "partition field named 'p'"),
])
def test_limits_fail_with_a_clear_error_and_commit_nothing(
    session: SqlSession, setup: str, statement: str, message: str
) -> None:
    session.execute(setup)
    session.execute("INSERT INTO t SELECT * FROM t")  # a snapshot, so a commit would show
    before = metadata_location(session)
    with pytest.raises(SchemaEvolutionError, match=message):
        session.execute(statement)
    assert metadata_location(session) == before


def test_schemas_and_history_metadata_tables_show_the_versions(session: SqlSession) -> None:
    session.execute("""
        CREATE TABLE t (a STRING, b STRING);
        INSERT INTO t VALUES ('a1', 'b1');
        ALTER TABLE t ADD COLUMN c INT;
        ALTER TABLE t DROP COLUMN c;
        INSERT INTO t VALUES ('a2', 'b2');
    """)
    assert rows(session, "SELECT schema_id, is_current, schema FROM db.t.schemas ORDER BY schema_id") == [
        [0, True, "a string, b string"], [1, False, "a string, b string, c int"],
    ]
    history = rows(session, "SELECT snapshot_id, is_current_ancestor FROM db.t.history")
    assert len(history) == 2 and all(r[1] for r in history)
    catalog, identifier = session.manager.resolve_table(("t",))
    snapshots = catalog.load_table(identifier).snapshots()
    assert [s.schema_id for s in snapshots] == [0, 0]


def test_syntax_error_points_at_the_statement(session: SqlSession) -> None:
    session.execute("CREATE TABLE t (a INT)")
    with pytest.raises(ParseError, match="TYPE, COMMENT, FIRST, AFTER, DROP NOT NULL, SET DEFAULT or DROP DEFAULT"):
        session.execute("ALTER TABLE t ALTER COLUMN a BOGUS")


def _data_files(session: SqlSession, name: str = "t") -> list[str]:
    catalog, identifier = session.manager.resolve_table((name,))
    return sorted(catalog.load_table(identifier).inspect.data_files().column("file_path").to_pylist())


def test_v3_add_column_not_null_default_rewrites_nothing_and_insert_without_it_writes_the_write_default(
    session: SqlSession,
) -> None:
    session.execute("""
        CREATE TABLE t (id INT, name STRING);
        INSERT INTO t VALUES (1, 'one');
    """)
    before = metadata_location(session)
    with pytest.raises(SchemaEvolutionError, match=r"cannot add column 'c' as NOT NULL: .*upgrade the table to format "
                                                   r"version 3 .*ADD COLUMN c \.\.\. NOT NULL DEFAULT <value>"):
        session.execute("ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 0")
    assert metadata_location(session) == before
    files = _data_files(session)
    session.execute("""
        ALTER TABLE t SET TBLPROPERTIES ('format-version'='3');
        ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 0;
        ALTER TABLE t ADD COLUMNS (s STRING DEFAULT 'x' COMMENT 'a default', d DATE DEFAULT DATE '2024-02-29');
    """)
    assert _data_files(session) == files  # no data file rewritten
    assert rows(session, "SELECT * FROM t") == [[1, "one", 0, "x", datetime.date(2024, 2, 29)]]
    session.execute("""
        INSERT INTO t (id, name) VALUES (2, 'two');
        ALTER TABLE t ALTER COLUMN c SET DEFAULT 9;
        INSERT INTO t (id, s) VALUES (3, 'given');
        ALTER TABLE t ALTER COLUMN s DROP DEFAULT;
        INSERT INTO t (id) VALUES (4);
    """)
    day = datetime.date(2024, 2, 29)
    assert rows(session, "SELECT * FROM t ORDER BY id") == [
        [1, "one", 0, "x", day], [2, "two", 0, "x", day], [3, None, 9, "given", day], [4, None, 9, None, day]]
    catalog, identifier = session.manager.resolve_table(("t",))
    c = catalog.load_table(identifier).schema().find_field("c")
    assert (c.required, c.initial_default, c.write_default) == (True, 0, 9)


def test_spark_reads_timestamp_ns_with_whole_microseconds_and_refuses_nanoseconds_naming_the_table(
    session: SqlSession,
) -> None:
    import pyarrow as pa

    from tablestore.errors import SchemaError

    session.execute("""
        CREATE TABLE ns (id INT, ts TIMESTAMP_NS) TBLPROPERTIES ('format-version'='3');
        INSERT INTO ns VALUES (1, TIMESTAMP_NTZ '2024-01-02 03:04:05.123456');
    """)
    assert rows(session, "SELECT id, ts FROM ns") == [[1, datetime.datetime(2024, 1, 2, 3, 4, 5, 123456)]]
    catalog, identifier = session.manager.resolve_table(("ns",))
    table = catalog.load_table(identifier)
    assert str(table.schema().find_field("ts").field_type) == "timestamp_ns"
    table.append(pa.table({"id": pa.array([2], pa.int32()),
                           "ts": pa.array([1_704_164_645_123_456_789], pa.timestamp("ns"))}))
    with pytest.raises(SchemaError, match=r"column 'ts' of table cat\.db\.ns holds timestamp_ns values with "
                                          r"nanoseconds, which Spark \(microseconds\) cannot show without truncating"):
        rows(session, "SELECT id, ts FROM ns ORDER BY id")
    # Spark's Python data source reads every column (it has no column pruning): a query that
    # does not select ts fails the same way rather than hide the value.
    with pytest.raises(SchemaError, match=r"column 'ts' of table cat\.db\.ns holds timestamp_ns values"):
        rows(session, "SELECT id FROM ns ORDER BY id")
    table.delete("id = 2")
    assert rows(session, "SELECT id, ts FROM ns ORDER BY id") == [[1, datetime.datetime(2024, 1, 2, 3, 4, 5, 123456)]]
