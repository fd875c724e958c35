"""A script is lexed once: each statement, and each query inside one, carries the tokens that
lexing its own text would give, and sqlglot parses a query from them (no Spark needed)."""

from __future__ import annotations

import pytest
from sqlglot.tokens import Token

from tablestore.errors import ParseError
from tablestore.sql.parse import statements as st
from tablestore.sql.parse.parser import parse_script, parse_statement
from tablestore.sql.parse.tokens import relocate, split_statements, tokenize
from tablestore.sql.plan.planner import QueryPlanner, parse_query

# Statements mid-line and over lines, CRLF and a lone CR, a string over two lines, quoted names,
# a hint, 21L (lexed as 21 :: L), comments inside statements, before them and after them.
SCRIPT = (
    "USE db; SELECT `a b`, 'x;y' AS s FROM t WHERE n = 21L;\r\n"
    "  INSERT INTO t PARTITION (k = 1)\r\n    SELECT /*+ REPARTITION(2) */ a, 'two\nlines' FROM u -- why\n"
    "    WHERE b > 1;\r"
    "CREATE TABLE c AS WITH w AS (SELECT 1 AS x) SELECT * FROM w;\n"
    "-- a comment line before the statement\n"
    "CREATE VIEW v AS SELECT x FROM c /* after the query */ ;\n"
    "MERGE INTO t USING (SELECT * FROM u) s ON t.a = s.a WHEN MATCHED THEN DELETE"
)


def fields(tokens: tuple[Token, ...] | list[Token]) -> list[tuple[object, ...]]:
    return [(t.token_type, t.text, t.line, t.col, t.start, t.end, t.comments) for t in tokens]


def test_each_statement_carries_the_tokens_of_its_own_text() -> None:
    statements = split_statements(SCRIPT)
    assert [s.text.split()[0] for s in statements] == ["USE", "SELECT", "INSERT", "CREATE", "CREATE", "MERGE"]
    assert [s.line for s in statements] == [1, 1, 2, 6, 8, 9]
    for statement in statements:
        assert fields(statement.tokens) == fields(tokenize(statement.text)), statement.text


def test_queries_carry_their_tokens_and_parse_from_them_as_from_their_text() -> None:
    _, select, insert, ctas, view, _ = parse_script(SCRIPT)
    assert isinstance(select, st.Query) and isinstance(insert, st.Insert)
    assert isinstance(ctas, st.CreateTable) and isinstance(view, st.CreateView)
    queries = [(select.sql, select.query_tokens), (insert.query, insert.query_tokens),
               (ctas.query, ctas.query_tokens), (view.query, view.query_tokens)]
    assert [len(tokens) for _, tokens in queries] == [14, 11, 13, 4]
    assert insert.query.startswith("SELECT /*+ REPARTITION(2) */ a, 'two\nlines'")
    for text, tokens in queries:
        assert text is not None
        assert fields(relocate(tokens)) == fields(tokenize(text))
        tree = parse_query(text, tokens)
        assert tree == parse_query(text)
        # The tokens are the statement's to keep: a second run parses the same tree from them.
        assert parse_query(text, tokens).sql(dialect="spark") == tree.sql(dialect="spark")
    assert parse_query(insert.query, insert.query_tokens).sql(dialect="spark") == (
        "SELECT /*+ REPARTITION(2) */ a, 'two\\nlines' FROM u /* why */ WHERE b > 1"
    )


@pytest.mark.parametrize("sql", [
    "INSERT INTO t\n-- the query\nSELECT 1",  # a comment just before the query sits on its first token
    "EXPLAIN SELECT 1",  # Spark's tokenizer reads EXPLAIN as a command: the rest is one string
])
def test_a_query_that_only_lexing_again_can_tell_is_lexed_again(sql: str) -> None:
    statement = parse_statement(sql)
    text = statement.query if isinstance(statement, st.Insert) else statement.sql
    assert isinstance(statement, st.Insert | st.Query) and statement.query_tokens == ()
    assert parse_query(text) is not None


def test_a_syntax_error_in_a_query_keeps_its_line_and_column() -> None:
    insert = parse_script("USE db;\nINSERT INTO t\nSELECT a,\n  b FROM WHERE x")[1]
    assert isinstance(insert, st.Insert) and insert.query_tokens
    with pytest.raises(ParseError) as from_tokens:
        parse_query(insert.query, insert.query_tokens)
    with pytest.raises(ParseError) as from_text:
        parse_query(insert.query)
    assert (from_tokens.value.line, from_tokens.value.column) == (2, 14)
    assert str(from_tokens.value) == str(from_text.value)
    assert (from_text.value.line, from_text.value.column) == (2, 14)


def test_a_row_level_statement_parses_from_its_tokens_with_the_scripts_line() -> None:
    with pytest.raises(ParseError) as info:
        parse_script("SELECT 1;\n\nDELETE FROM t WHERE (")
    assert "syntax error" in str(info.value) and info.value.line == 3


def test_the_planner_writes_the_same_spark_sql_from_the_tokens_as_from_the_text() -> None:
    insert = parse_statement("INSERT INTO t WITH a AS (SELECT id FROM u) SELECT a.id FROM a JOIN v ON v.id = a.id")
    assert isinstance(insert, st.Insert) and insert.query_tokens
    # The names are bound to views up front, so neither a catalog nor Spark is asked.
    planner = QueryPlanner(None, None, "{}")  # type: ignore[arg-type]
    planner.bind("u", "view_u")
    planner.bind("v", "view_v")
    expected = "WITH a AS (SELECT id FROM view_u AS u) SELECT a.id FROM a JOIN view_v AS v ON v.id = a.id"
    assert planner.rewrite(insert.query, insert.query_tokens) == expected
    assert planner.rewrite(insert.query) == expected
