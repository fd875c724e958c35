"""Parsing DELETE, UPDATE and MERGE (no Spark needed)."""

from __future__ import annotations

import pytest

from tablestore.errors import ParseError
from tablestore.sql.parse.parser import parse_statement
from tablestore.sql.parse.statements import DeleteFrom, MergeClause, MergeInto, UpdateTable


def test_delete_with_alias_and_subquery() -> None:
    s = parse_statement("DELETE FROM db.user u WHERE id > (SELECT count(*) FROM employee)")
    assert s == DeleteFrom(s.sql, ("db", "user"), "u", "id > (SELECT COUNT(*) FROM employee)")
    assert parse_statement("DELETE FROM t") == DeleteFrom("DELETE FROM t", ("t",), None, None)


def test_update_assignments_keep_their_sql() -> None:
    s = parse_statement("UPDATE user SET name = 'u1', n = n + 1 WHERE id > 10")
    assert isinstance(s, UpdateTable)
    assert s.assignments == (("name", "'u1'"), ("n", "n + 1")) and s.where == "id > 10"


def test_merge_clauses_in_order() -> None:
    s = parse_statement(
        "MERGE INTO t USING (SELECT * FROM src) AS s ON t.id = s.id "
        "WHEN MATCHED AND s.x > 1 THEN UPDATE SET t.name = s.name WHEN MATCHED THEN DELETE "
        "WHEN NOT MATCHED AND s.y THEN INSERT (id, name) VALUES (s.id, s.name) WHEN NOT MATCHED THEN INSERT *"
    )
    assert isinstance(s, MergeInto)
    assert (s.name, s.source, s.source_alias, s.on) == (("t",), "(SELECT * FROM src)", "s", "t.id = s.id")
    assert s.clauses == (
        MergeClause(True, "update", "s.x > 1", (("name", "s.name"),)),
        MergeClause(True, "delete"),
        MergeClause(False, "insert", "s.y", None, ("id", "name"), ("s.id", "s.name")),
        MergeClause(False, "insert"),
    )


@pytest.mark.parametrize("sql, message", [
    ("UPDATE t SET", "UPDATE needs SET"),
    ("DELETE FROM t WHERE (", "syntax error"),
    ("MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED BY SOURCE THEN DELETE", "BY SOURCE"),
    ("MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (a, b) VALUES (1)", "2 column"),
])
def test_syntax_errors_name_the_problem(sql: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_statement(sql)
