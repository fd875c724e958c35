"""Parsing of the schema evolution statements (no Spark): every form, and errors that point."""

from __future__ import annotations

import pytest

from tablestore.errors import ParseError
from tablestore.sql.parse.parser import parse_statement
from tablestore.sql.parse.statements import (
    AddColumnAction,
    AlterColumnAction,
    AlterSchema,
    DropColumnAction,
    IdentifierFieldsAction,
    RenameColumnAction,
)


def actions(sql: str) -> tuple[object, ...]:
    statement = parse_statement(sql)
    assert isinstance(statement, AlterSchema)
    return statement.actions


@pytest.mark.parametrize(("sql", "expected"), [
    ("ALTER TABLE db.t ADD COLUMN c STRING", (AddColumnAction(("c",), "STRING"),)),
    ("ALTER TABLE t ADD COLUMNS (c DECIMAL(10, 2) NOT NULL COMMENT 'x' FIRST, p.z STRUCT<a: INT> AFTER y)", (
        AddColumnAction(("c",), "DECIMAL(10, 2)", True, "x", True, None),
        AddColumnAction(("p", "z"), "STRUCT<a: INT>", after="y"),
    )),
    ("ALTER TABLE t DROP COLUMNS a, b", (DropColumnAction(("a",)), DropColumnAction(("b",)))),
    ("ALTER TABLE t DROP COLUMN IF EXISTS (s.x)", (DropColumnAction(("s", "x"), True),)),
    ("ALTER TABLE t RENAME COLUMN s.a TO b", (RenameColumnAction(("s", "a"), "b"),)),
    ("ALTER TABLE t ALTER COLUMN c TYPE bigint", (AlterColumnAction(("c",), type_text="bigint"),)),
    ("ALTER TABLE t CHANGE COLUMN c TYPE bigint", (AlterColumnAction(("c",), type_text="bigint"),)),
    ("ALTER TABLE t ALTER COLUMN c FIRST", (AlterColumnAction(("c",), first=True),)),
    ("ALTER TABLE t ALTER COLUMN s.c AFTER d", (AlterColumnAction(("s", "c"), after="d"),)),
    ("ALTER TABLE t ALTER COLUMN c COMMENT 'why'", (AlterColumnAction(("c",), comment="why"),)),
    ("ALTER TABLE t ALTER COLUMN c DROP NOT NULL", (AlterColumnAction(("c",), drop_not_null=True),)),
    ("ALTER TABLE t SET IDENTIFIER FIELDS id, k", (IdentifierFieldsAction((("id",), ("k",))),)),
    ("ALTER TABLE t DROP IDENTIFIER FIELDS (k)", (IdentifierFieldsAction((("k",),), drop=True),)),
    ("ALTER TABLE t MODIFY n BIGINT", (AlterColumnAction(("n",), type_text="BIGINT"),)),
    ("ALTER TABLE t MODIFY (n BIGINT COMMENT 'c', m DOUBLE AFTER n)", (
        AlterColumnAction(("n",), type_text="BIGINT", comment="c"),
        AlterColumnAction(("m",), type_text="DOUBLE", after="n"),
    )),
])
def test_schema_statements_parse(sql: str, expected: tuple[object, ...]) -> None:
    assert actions(sql) == expected


@pytest.mark.parametrize(("sql", "message", "column"), [
    ("ALTER TABLE t ADD COLUMN c NOSUCHTYPE", "unknown type", 28),
    ("ALTER TABLE t ALTER COLUMN c WIDEN", "expected TYPE, COMMENT", 30),
    ("ALTER TABLE t RENAME COLUMN a b", "expected TO", 31),
    ("ALTER TABLE t ADD COLUMN c", "expected a type", 26),
    ("ALTER VIEW v ADD COLUMN c INT", "views have no schema", None),
])
def test_syntax_errors_point_at_the_mistake(sql: str, message: str, column: int | None) -> None:
    with pytest.raises(ParseError, match=message) as info:
        parse_statement(sql)
    if column is not None:
        assert info.value.column == column
