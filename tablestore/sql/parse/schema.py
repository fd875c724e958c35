"""Parsing of schema evolution (issue 4): ALTER TABLE ... ADD/DROP/RENAME/ALTER COLUMN, identifier fields.

``parse_alter_table`` is an :class:`~tablestore.sql.parse.parser.AlterTableAction`, tried by the
parser after the common ALTER TABLE actions. The statements are classes of :mod:`tablestore.sql.parse.statements`.

Spark SQL (with Iceberg's extensions) syntax::

    ALTER TABLE t ADD COLUMN[S] [(] c type [NOT NULL] [DEFAULT literal] [COMMENT '..'] [FIRST | AFTER x], ... [)]
    ALTER TABLE t DROP COLUMN[S] [IF EXISTS] [(] c, ... [)]
    ALTER TABLE t RENAME COLUMN a TO b
    ALTER TABLE t ALTER|CHANGE [COLUMN] c TYPE type | COMMENT '..' | FIRST | AFTER x | DROP NOT NULL
                                        | SET DEFAULT literal | DROP DEFAULT     (defaults: format v3)
    ALTER TABLE t SET IDENTIFIER FIELDS a, b          ALTER TABLE t DROP IDENTIFIER FIELDS a
    ALTER TABLE t MODIFY [(] c type [COMMENT '..'] [FIRST | AFTER x], ... [)]     (Flink)

Nested fields are named with dots (``point.z``).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlglot.tokens import TokenType

from tablestore.errors import SchemaError
from tablestore.spec.schemas.types import parse_sql_type
from tablestore.sql.parse import statements as st
from tablestore.sql.parse.tokens import Cursor

T = TypeVar("T")
_TYPE_STOPS = ("NOT NULL", "NULL", "DEFAULT", "COMMENT", "FIRST", "AFTER")
_DEFAULT_STOPS = ("NOT NULL", "COMMENT", "FIRST", "AFTER")


def parse_alter_table(c: Cursor, name: st.Name, is_view: bool) -> st.Statement | None:
    actions = _actions(c)
    if actions is None:
        return None
    if is_view:
        raise c.error("views have no schema of their own to change; change the view's query (CREATE OR REPLACE VIEW)")
    return st.AlterSchema(c.sql, name, tuple(actions))


def _actions(c: Cursor) -> list[st.Action] | None:
    if c.word() == "ADD" and c.word(1) in ("COLUMN", "COLUMNS"):
        c.advance()
        c.advance()
        return list(_column_list(c, _add_column))
    if c.word() == "DROP" and c.word(1) in ("COLUMN", "COLUMNS"):
        c.advance()
        c.advance()
        if_exists = c.accept("IF", "EXISTS")
        return [st.DropColumnAction(col, if_exists) for col in _column_list(c, lambda c: c.qualified_name("a column"))]
    if c.accept("RENAME", "COLUMN"):
        column = c.qualified_name("the column to rename")
        c.expect("TO")
        return [st.RenameColumnAction(column, c.identifier("the new column name"))]
    if c.word() in ("ALTER", "CHANGE") and c.word(1) not in ("PARTITION",):
        c.advance()
        c.accept("COLUMN")
        return [_alter_column(c)]
    if c.accept("MODIFY"):
        return list(_column_list(c, _modify_column))
    if (c.word() in ("SET", "DROP")) and c.word(1) == "IDENTIFIER":
        drop = c.advance().text.upper() == "DROP"
        c.advance()
        c.expect("FIELDS")
        columns = tuple(_column_list(c, lambda c: c.qualified_name("an identifier column")))
        return [st.IdentifierFieldsAction(columns, drop)]
    return None


def _column_list(c: Cursor, item: Callable[[Cursor], T]) -> list[T]:
    """``item, item`` or ``(item, item)``."""
    parens = c.accept_type(TokenType.L_PAREN) is not None
    out = [item(c)]
    while c.accept_type(TokenType.COMMA):
        out.append(item(c))
    if parens:
        c.expect_type(TokenType.R_PAREN, ", or )")
    return out


def column_type(c: Cursor, column: str, stops: tuple[str, ...] = _TYPE_STOPS) -> str:
    """The type of ``column``, up to the first of ``stops`` (its text, once the house's type parser took it)."""
    if c.at_end():
        raise c.error(f"expected a type for column {column!r}")
    first, last = c.balanced_until(*stops)
    text = c.text_between(first, last)
    try:
        parse_sql_type(text)
    except SchemaError as e:
        raise c.error(f"column {column!r}: {e}", first) from None
    return text


def _position(c: Cursor) -> tuple[bool, str | None]:
    if c.accept("FIRST"):
        return True, None
    if c.accept("AFTER"):
        return False, ".".join(c.qualified_name("a column name after AFTER"))
    return False, None


def _default(c: Cursor, column: str) -> Any:
    """The literal after DEFAULT: a number, a string, TRUE/FALSE, NULL, or DATE/TIMESTAMP '...'
    (whose text the column's type parses)."""
    import sqlglot
    from sqlglot import exp

    if c.at_end():
        raise c.error(f"expected a value after DEFAULT for column {column!r}")
    first, last = c.balanced_until(*_DEFAULT_STOPS)
    text = c.text_between(first, last)
    try:
        node = sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.ParseError:
        node = None
    negative = False
    if isinstance(node, exp.Neg):
        negative, node = True, node.this
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string and not negative:
        return node.this.this  # DATE '2024-01-02', TIMESTAMP '2024-01-02 03:04:05'
    if isinstance(node, exp.Literal):
        if node.is_string:
            if not negative:
                return node.this
        else:
            value: Any = int(node.this) if node.this.lstrip("-").isdigit() else decimal.Decimal(node.this)
            return -value if negative else value
    if isinstance(node, exp.Boolean) and not negative:
        return bool(node.this)
    if isinstance(node, exp.Null) and not negative:
        return None
    raise c.error(
        f"the DEFAULT of column {column!r} must be a literal (a number, a string, TRUE, FALSE, NULL, DATE '...' or "
        f"TIMESTAMP '...'), not {text!r}", first)


@dataclass
class ColumnClauses:
    """What may follow a column's type, in any order (None: not said)."""

    not_null: bool | None = None
    comment: str | None = None
    default: Any = None
    first: bool = False
    after: str | None = None


def column_clauses(c: Cursor, column: str, *, default: bool = False, position: bool = False) -> ColumnClauses:
    """The clauses after ``column``'s type: NOT NULL or NULL, COMMENT, and where the statement
    takes them, DEFAULT and FIRST or AFTER (CREATE TABLE, ADD COLUMN and MODIFY share them)."""
    found = ColumnClauses()
    while True:
        if c.accept("NOT", "NULL"):
            found.not_null = True
        elif c.accept("NULL"):
            found.not_null = False
        elif default and c.accept("DEFAULT"):
            found.default = _default(c, column)
        elif c.accept("COMMENT"):
            found.comment = c.string("a comment")
        elif position and c.word() in ("FIRST", "AFTER"):
            found.first, found.after = _position(c)
        else:
            return found


def _add_column(c: Cursor) -> st.AddColumnAction:
    column = c.qualified_name("a column name")
    type_text = column_type(c, ".".join(column))
    k = column_clauses(c, ".".join(column), default=True, position=True)
    return st.AddColumnAction(column, type_text, k.not_null is True, k.comment, k.first, k.after, k.default)


def _modify_column(c: Cursor) -> st.AlterColumnAction:
    """Flink: ``MODIFY c newtype [NOT NULL | NULL] [COMMENT '..'] [FIRST | AFTER x]``."""
    column = c.qualified_name("a column name")
    type_text = column_type(c, ".".join(column))
    k = column_clauses(c, ".".join(column), position=True)
    return st.AlterColumnAction(column, type_text, k.comment, k.first, k.after, drop_not_null=k.not_null is False,
                                set_not_null=k.not_null is True)


def _alter_column(c: Cursor) -> st.AlterColumnAction:
    column = c.qualified_name("a column name")
    if c.accept("TYPE"):
        return st.AlterColumnAction(column, type_text=column_type(c, ".".join(column)))
    if c.accept("COMMENT"):
        return st.AlterColumnAction(column, comment=c.string("a comment"))
    if c.word() in ("FIRST", "AFTER"):
        first, after = _position(c)
        return st.AlterColumnAction(column, first=first, after=after)
    if c.accept("DROP", "NOT", "NULL"):
        return st.AlterColumnAction(column, drop_not_null=True)
    if c.accept("SET", "NOT", "NULL"):
        return st.AlterColumnAction(column, set_not_null=True)
    if c.accept("SET", "DEFAULT"):
        return st.AlterColumnAction(column, set_default=True, default=_default(c, ".".join(column)))
    if c.accept("DROP", "DEFAULT"):
        return st.AlterColumnAction(column, set_default=True)
    raise c.error("expected TYPE, COMMENT, FIRST, AFTER, DROP NOT NULL, SET DEFAULT or DROP DEFAULT after "
                  "ALTER COLUMN name")

