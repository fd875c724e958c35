"""Parsing of the session options' statements: ``SET key=value``, ``SET key``, ``SET``, ``RESET [key]``.

Options such as ``tablestore.insert-overwrite.mode`` (``dynamic`` or ``static``) and
``tablestore.commit-id``; :mod:`tablestore.sql.options` keeps them and runs these statements.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot.tokens import TokenType

from tablestore.sql.parse import statements as st
from tablestore.sql.parse.tokens import Cursor


def _set(c: Cursor) -> st.Statement:
    c.expect("SET")
    first = c.peek()
    if first is None:
        return st.SetOption(c.sql)
    if first.token_type == TokenType.EQ:
        raise c.error("expected an option name after SET")
    # Keys are dotted and may contain dashes (tablestore.insert-overwrite.mode): take the raw text.
    last = first
    while not c.at_end() and not c.is_type(TokenType.EQ):
        last = c.advance()
    key = c.sql[first.start:last.end + 1].strip().strip("`")
    if not c.accept_type(TokenType.EQ):
        return st.SetOption(c.sql, key)
    value_token = c.peek()
    if value_token is None:
        raise c.error(f"expected a value after SET {key}=")
    value = c.sql[value_token.start:].strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    c.pos = len(c.tokens)
    return st.SetOption(c.sql, key, value)


def _reset(c: Cursor) -> st.Statement:
    c.expect("RESET")
    first = c.peek()
    if first is None:
        return st.ResetOption(c.sql)
    key = c.sql[first.start:].strip().strip("`")
    c.pos = len(c.tokens)
    return st.ResetOption(c.sql, key)


STATEMENT_PARSERS: dict[str, Callable[[Cursor], st.Statement]] = {"SET": _set, "RESET": _reset}
