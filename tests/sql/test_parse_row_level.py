"""Parsing DELETE, UPDATE and MERGE (no Spark needed)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlglot import exp

from tablestore.errors import ParseError
from tablestore.sql.parse.parser import parse_statement
from tablestore.sql.parse.statements import DeleteFrom, MergeClause, MergeInto, UpdateTable


def _sql(node: exp.Expr | None) -> str | None:
    return node.sql(dialect="spark") if node is not None else None


def _clause(c: MergeClause) -> tuple[Any, ...]:
    """A MERGE clause with its trees written out as Spark SQL."""
    return (c.matched, c.action, _sql(c.condition),
            None if c.assignments is None else tuple((n, _sql(v)) for n, v in c.assignments),
            c.insert_columns, None if c.insert_values is None else tuple(_sql(v) for v in c.insert_values))


def test_delete_with_alias_and_subquery() -> None:
    s = parse_statement("DELETE FROM db.user u WHERE id > (SELECT count(*) FROM employee)")
    assert isinstance(s, DeleteFrom) and (s.name, s.alias) == (("db", "user"), "u")
    assert _sql(s.where) == "id > (SELECT COUNT(*) FROM employee)"
    assert parse_statement("DELETE FROM t") == DeleteFrom("DELETE FROM t", ("t",), None, None)


def test_update_assignments_keep_their_trees() -> None:
    s = parse_statement("UPDATE user SET name = 'u1', n = n + 1 WHERE id > 10")
    assert isinstance(s, UpdateTable)
    assert [(n, _sql(v)) for n, v in s.assignments] == [("name", "'u1'"), ("n", "n + 1")]
    assert isinstance(s.where, exp.GT) and _sql(s.where) == "id > 10"


def test_merge_clauses_in_order() -> None:
    s = parse_statement(
        "MERGE INTO t USING (SELECT * FROM src) AS s ON t.id = s.id "
        "WHEN MATCHED AND s.x > 1 THEN UPDATE SET t.name = s.name WHEN MATCHED THEN DELETE "
        "WHEN NOT MATCHED AND s.y THEN INSERT (id, name) VALUES (s.id, s.name) WHEN NOT MATCHED THEN INSERT *"
    )
    assert isinstance(s, MergeInto)
    assert (s.name, _sql(s.source), s.source_alias, _sql(s.on)) == (("t",), "(SELECT * FROM src)", "s",
                                                                     "t.id = s.id")
    assert [_clause(c) for c in s.clauses] == [
        (True, "update", "s.x > 1", (("name", "s.name"),), None, None),
        (True, "delete", None, None, None, None),
        (False, "insert", "s.y", None, ("id", "name"), ("s.id", "s.name")),
        (False, "insert", None, None, None, None),
    ]


@pytest.mark.parametrize("sql, message", [
    ("UPDATE t SET", "UPDATE needs SET"),
    ("DELETE FROM t WHERE (", "syntax error"),
    ("MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED BY SOURCE THEN DELETE", "BY SOURCE"),
    ("MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (a, b) VALUES (1)", "2 column"),
])
def test_syntax_errors_name_the_problem(sql: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_statement(sql)
