"""Execution of ``CALL``: the procedure is found in the registry of ``procedures.py`` and runs
in the catalog the call names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tablestore.errors import ValidationError
from tablestore.sql.parse.statements import Call
from tablestore.sql.procedures.arguments import literal_value
from tablestore.sql.procedures.registry import find_procedure

if TYPE_CHECKING:
    from tablestore.sql.context import SessionContext
    from tablestore.sql.result import StatementResult


def call(context: SessionContext, s: Call) -> StatementResult:
    """``CALL cat.system.p(...)`` runs in catalog ``cat``; ``CALL system.p(...)`` in the current one."""
    if len(s.name) == 3:
        catalog, namespace, name = context.manager.catalog(s.name[0]), s.name[1], s.name[2]
    elif len(s.name) == 2:
        catalog, namespace, name = context.manager.catalog(), s.name[0], s.name[1]
    else:
        raise ValidationError(f"procedure names have the form [catalog.]system.name; got {'.'.join(s.name)!r}")
    if namespace.lower() != "system":
        raise ValidationError(f"procedures live in the namespace 'system'; got {'.'.join(s.name)!r}")
    found = find_procedure(name)
    args = found.bind([(arg_name, literal_value(text)) for arg_name, text in s.args])
    return found.body(context, catalog, args)
