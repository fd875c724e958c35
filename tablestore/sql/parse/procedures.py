"""Parsing of ``CALL [catalog.]system.name(arg => value, ...)``."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot.tokens import TokenType

from tablestore.sql.parse import statements as st
from tablestore.sql.parse.tokens import Cursor


def _call(c: Cursor) -> st.Statement:
    c.expect("CALL")
    name = c.qualified_name("a procedure name such as system.expire_snapshots")
    c.expect_type(TokenType.L_PAREN, "(")
    args: list[tuple[str | None, str]] = []
    if not c.accept_type(TokenType.R_PAREN):
        while True:
            arg_name = None
            token, after = c.peek(), c.peek(1)
            if token is not None and after is not None and after.token_type == TokenType.FARROW:
                arg_name = c.identifier("an argument name")
                c.advance()
            first, last = c.balanced_until()
            args.append((arg_name, c.text_between(first, last)))
            if c.accept_type(TokenType.COMMA):
                continue
            c.expect_type(TokenType.R_PAREN, ", or )")
            break
    return st.Call(c.sql, name, tuple(args))


STATEMENT_PARSERS: dict[str, Callable[[Cursor], st.Statement]] = {"CALL": _call}
