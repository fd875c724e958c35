"""The statement parser: what each statement parses to, and errors with line and column."""

from __future__ import annotations

import pytest

from tablestore.errors import ParseError
from tablestore.sql.parse import statements as st
from tablestore.sql.parse.parser import parse_script, parse_statement


def test_create_table_with_every_clause() -> None:
    s = parse_statement(
        "CREATE TABLE IF NOT EXISTS c.db.t (a struct<x: int, y: array<map<string, bigint>>> NOT NULL COMMENT 'hi', "
        "b decimal(10, 2)) USING iceberg PARTITIONED BY (days(ts), bucket(16, a)) COMMENT 'tbl' "
        "TBLPROPERTIES ('k'='v', x.y = 3)"
    )
    assert isinstance(s, st.CreateTable)
    assert s.name == ("c", "db", "t") and s.if_not_exists and s.using == "iceberg"
    assert s.columns == (
        st.ColumnDef("a", "struct<x: int, y: array<map<string, bigint>>>", True, "hi"),
        st.ColumnDef("b", "decimal(10, 2)", False, None),
    )
    assert s.partitioned_by == ("days(ts)", "bucket(16, a)")
    assert s.properties == {"k": "v", "x.y": "3"} and s.comment == "tbl"


def test_ctas_keeps_the_query_text() -> None:
    s = parse_statement("CREATE TABLE t2 PARTITIONED BY (k) AS SELECT k, count(*) AS n FROM t GROUP BY k")
    assert isinstance(s, st.CreateTable)
    assert s.query == "SELECT k, count(*) AS n FROM t GROUP BY k" and s.partitioned_by == ("k",)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("USE c.db", st.Use("USE c.db", ("c", "db"))),
        ("SHOW CATALOGS", st.ShowCatalogs("SHOW CATALOGS")),
        ("SHOW DATABASES IN c LIKE 'x*'", st.ShowDatabases("SHOW DATABASES IN c LIKE 'x*'", ("c",), "x*")),
        ("SHOW TABLES FROM db", st.ShowObjects("SHOW TABLES FROM db", "tables", ("db",))),
        ("SHOW VIEWS", st.ShowObjects("SHOW VIEWS", "views")),
        ("SHOW USER FUNCTIONS", st.ShowObjects("SHOW USER FUNCTIONS", "functions")),
        ("DESC EXTENDED t", st.DescribeTable("DESC EXTENDED t", ("t",), True)),
        ("DESCRIBE DATABASE EXTENDED d", st.DescribeDatabase("DESCRIBE DATABASE EXTENDED d", ("d",), True)),
        ("DROP TABLE IF EXISTS db.t PURGE", st.DropTable("DROP TABLE IF EXISTS db.t PURGE", ("db", "t"), True, True)),
        ("DROP DATABASE d CASCADE", st.DropDatabase("DROP DATABASE d CASCADE", ("d",), False, True)),
        ("ALTER TABLE t RENAME TO u", st.RenameTable("ALTER TABLE t RENAME TO u", ("t",), ("u",))),
        ("ALTER TABLE t UNSET TBLPROPERTIES IF EXISTS ('a', b.c)",
         st.UnsetTableProperties("ALTER TABLE t UNSET TBLPROPERTIES IF EXISTS ('a', b.c)", ("t",), ("a", "b.c"), True)),
        ("CREATE OR REPLACE FUNCTION f AS 'm.f' RETURNS INT",
         st.CreateFunction("CREATE OR REPLACE FUNCTION f AS 'm.f' RETURNS INT", ("f",), "m.f", "INT", True)),
        ("DROP FUNCTION IF EXISTS f", st.DropFunction("DROP FUNCTION IF EXISTS f", ("f",), True)),
        ("SHOW CREATE TABLE v", st.ShowCreateTable("SHOW CREATE TABLE v", ("v",))),
    ],
)
def test_statements_parse_to(sql: str, expected: st.Statement) -> None:
    assert parse_statement(sql) == expected


def test_insert_with_partition_and_columns() -> None:
    s = parse_statement("INSERT OVERWRITE TABLE t PARTITION (a=1, b) VALUES (1, 2)")
    assert s == st.Insert(s.sql, ("t",), True, (("a", "1"), ("b", None)), (), "VALUES (1, 2)")
    s = parse_statement("INSERT INTO db.t (x, y) SELECT 1, 2")
    assert isinstance(s, st.Insert) and s.columns == ("x", "y") and s.query == "SELECT 1, 2" and not s.overwrite


def test_view_with_columns_and_comment() -> None:
    s = parse_statement("CREATE OR REPLACE VIEW v (a COMMENT 'x', b) COMMENT 'vv' AS SELECT 1, 2")
    assert isinstance(s, st.CreateView)
    assert s.columns == (("a", "x"), ("b", None)) and s.comment == "vv" and s.query == "SELECT 1, 2" and s.or_replace


def test_queries_and_scripts_split_on_semicolons_outside_strings() -> None:
    statements = parse_script("SELECT ';' AS x; -- note;\nSHOW TABLES;;\nUSE db")
    assert [type(s).__name__ for s in statements] == ["Query", "ShowObjects", "Use"]
    assert statements[0].sql == "SELECT ';' AS x"


def test_syntax_errors_give_line_and_column() -> None:
    with pytest.raises(ParseError) as info:
        parse_script("SHOW TABLES;\nCREATE TABLE t (a int,\n  b int c int)")
    assert info.value.line == 3 and info.value.column == 5
    assert "unknown type" in str(info.value)
    assert info.value.highlight == "  b int c int)\n    ^"
    with pytest.raises(ParseError, match=r"after SHOW \(line 2, column 6\)"):
        parse_script("SELECT 1;\nSHOW TABLEZ")
    with pytest.raises(ParseError, match="unsupported statement 'MERGEX'"):
        parse_statement("MERGEX INTO t")
