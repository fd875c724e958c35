"""Parsing of schema evolution (issue 4): ALTER TABLE ... ADD/DROP/RENAME/ALTER COLUMN, identifier fields.

``parse_alter_table`` is tried by :func:`tablestore.sql.parser._alter` after the common ALTER
TABLE actions; it returns None when the action is not one of this module's. Top-level
statements of this module are registered in ``STATEMENT_HANDLERS`` (first keyword -> parser).
Statement classes of this module live here too; the session dispatches them by class name.
"""

from __future__ import annotations

from collections.abc import Callable

from tablestore.sql import statements as st
from tablestore.sql.tokens import Cursor


def parse_alter_table(c: Cursor, name: st.Name, is_view: bool) -> st.Statement | None:
    return None


STATEMENT_HANDLERS: dict[str, Callable[[Cursor], st.Statement]] = {}
