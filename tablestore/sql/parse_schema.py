"""Parsing of schema evolution (issue 4): ALTER TABLE ... ADD/DROP/RENAME/ALTER COLUMN, identifier fields.

``parse_alter_table`` is tried by :func:`tablestore.sql.parser._alter` after the common ALTER
TABLE actions; it returns None when the action is not one of this module's. Top-level
statements of this module are registered in ``STATEMENT_HANDLERS`` (first keyword -> parser).
Statement classes of this module live here too; the session dispatches them by class name.

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
from tablestore.sql import statements as st
from tablestore.sql.tokens import Cursor

T = TypeVar("T")
_TYPE_STOPS = ("NOT NULL", "NULL", "DEFAULT", "COMMENT", "FIRST", "AFTER")
_DEFAULT_STOPS = ("NOT NULL", "COMMENT", "FIRST", "AFTER")


@dataclass(frozen=True)
class AddColumnAction:
    column: st.Name
    type_text: str
    not_null: bool = False
    comment: str | None = None
    first: bool = False
    after: str | None = None
    default: Any = None  # the DEFAULT literal's value (format v3), None without one


@dataclass(frozen=True)
class DropColumnAction:
    column: st.Name
    if_exists: bool = False


@dataclass(frozen=True)
class RenameColumnAction:
    column: st.Name
    new_name: str


@dataclass(frozen=True)
class AlterColumnAction:
    column: st.Name
    type_text: str | None = None
    comment: str | None = None
    first: bool = False
    after: str | None = None
    drop_not_null: bool = False
    set_not_null: bool = False
    set_default: bool = False  # SET DEFAULT default / DROP DEFAULT (default None)
    default: Any = None


@dataclass(frozen=True)
class IdentifierFieldsAction:
    columns: tuple[st.Name, ...]
    drop: bool = False


Action = AddColumnAction | DropColumnAction | RenameColumnAction | AlterColumnAction | IdentifierFieldsAction


@dataclass(frozen=True)
class AlterSchema(st.Statement):
    """One ALTER TABLE statement changing the schema; its actions land in one commit."""

    name: st.Name
    actions: tuple[Action, ...]


def parse_alter_table(c: Cursor, name: st.Name, is_view: bool) -> st.Statement | None:
    start = c.pos
    actions = _actions(c)
    if actions is None:
        c.pos = start
        return None
    if is_view:
        raise c.error("views have no schema of their own to change; change the view's query (CREATE OR REPLACE VIEW)")
    return AlterSchema(c.sql, name, tuple(actions))


def _actions(c: Cursor) -> list[Action] | None:
    if c.word() == "ADD" and c.word(1) in ("COLUMN", "COLUMNS"):
        c.advance()
        c.advance()
        return list(_column_list(c, _add_column))
    if c.word() == "DROP" and c.word(1) in ("COLUMN", "COLUMNS"):
        c.advance()
        c.advance()
        if_exists = c.accept("IF", "EXISTS")
        return [DropColumnAction(col, if_exists) for col in _column_list(c, lambda c: c.qualified_name("a column"))]
    if c.accept("RENAME", "COLUMN"):
        column = c.qualified_name("the column to rename")
        c.expect("TO")
        return [RenameColumnAction(column, c.identifier("the new column name"))]
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
        return [IdentifierFieldsAction(columns, drop)]
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


def _type_text(c: Cursor, column: str) -> str:
    if c.at_end():
        raise c.error(f"expected a type for column {column!r}")
    first, last = c.balanced_until(*_TYPE_STOPS)
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


def _add_column(c: Cursor) -> AddColumnAction:
    column = c.qualified_name("a column name")
    type_text = _type_text(c, ".".join(column))
    not_null = False
    comment = None
    default = None
    first, after = False, None
    while True:
        if c.accept("NOT", "NULL"):
            not_null = True
        elif c.accept("NULL"):
            not_null = False
        elif c.accept("DEFAULT"):
            default = _default(c, ".".join(column))
        elif c.accept("COMMENT"):
            comment = c.string("a comment")
        elif c.word() in ("FIRST", "AFTER"):
            first, after = _position(c)
        else:
            return AddColumnAction(column, type_text, not_null, comment, first, after, default)


def _modify_column(c: Cursor) -> AlterColumnAction:
    """Flink: ``MODIFY c newtype [COMMENT '..'] [FIRST | AFTER x]``."""
    column = c.qualified_name("a column name")
    type_text = _type_text(c, ".".join(column))
    comment = None
    first, after = False, None
    drop_not_null = set_not_null = False
    while True:
        if c.accept("NOT", "NULL"):
            set_not_null = True
        elif c.accept("NULL"):
            drop_not_null = True
        elif c.accept("COMMENT"):
            comment = c.string("a comment")
        elif c.word() in ("FIRST", "AFTER"):
            first, after = _position(c)
        else:
            return AlterColumnAction(column, type_text, comment, first, after, drop_not_null, set_not_null)


def _alter_column(c: Cursor) -> AlterColumnAction:
    column = c.qualified_name("a column name")
    if c.accept("TYPE"):
        return AlterColumnAction(column, type_text=_type_text(c, ".".join(column)))
    if c.accept("COMMENT"):
        return AlterColumnAction(column, comment=c.string("a comment"))
    if c.word() in ("FIRST", "AFTER"):
        first, after = _position(c)
        return AlterColumnAction(column, first=first, after=after)
    if c.accept("DROP", "NOT", "NULL"):
        return AlterColumnAction(column, drop_not_null=True)
    if c.accept("SET", "NOT", "NULL"):
        return AlterColumnAction(column, set_not_null=True)
    if c.accept("SET", "DEFAULT"):
        return AlterColumnAction(column, set_default=True, default=_default(c, ".".join(column)))
    if c.accept("DROP", "DEFAULT"):
        return AlterColumnAction(column, set_default=True)
    raise c.error("expected TYPE, COMMENT, FIRST, AFTER, DROP NOT NULL, SET DEFAULT or DROP DEFAULT after "
                  "ALTER COLUMN name")


STATEMENT_HANDLERS: dict[str, Callable[[Cursor], st.Statement]] = {}
