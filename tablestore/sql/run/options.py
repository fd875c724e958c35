"""The session options' statements: ``SET k=v``, ``SET k``, ``SET`` and ``RESET [k]``, run on
the session's :class:`~tablestore.sql.options.SessionOptions`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tablestore.sql.options import UNDEFINED
from tablestore.sql.result import StatementResult

if TYPE_CHECKING:
    from tablestore.sql.context import SessionContext
    from tablestore.sql.parse.statements import ResetOption, SetOption


def set_option(context: SessionContext, s: SetOption) -> StatementResult:
    """``SET k=v`` sets a session option, ``SET k`` shows one and ``SET`` lists them."""
    options = context.options
    if s.key is None:
        return StatementResult(["key", "value"], [[k, v] for k, v in options.items()])
    if s.value is None:
        value = options.get(s.key)
        return StatementResult(["key", "value"], [[s.key, UNDEFINED if value is None else value]])
    return StatementResult(["key", "value"], [[s.key, options.set(s.key, s.value)]])


def reset_option(context: SessionContext, s: ResetOption) -> StatementResult:
    """``RESET`` forgets every option ``SET`` in the session; ``RESET key`` forgets one."""
    context.options.reset(s.key)
    return StatementResult()
