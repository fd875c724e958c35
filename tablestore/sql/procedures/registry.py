"""Stored procedures in Iceberg's convention: ``CALL <catalog>.system.<name>(arg => value, ...)``.

A procedure is a Python function registered under a name with its parameters; arguments may be
named (``table => 'db.t'``) or positional, in the order of the parameters. Values are SQL
literals: strings, numbers, booleans, NULL, ``TIMESTAMP '...'``, ``DATE '...'``, ``INTERVAL``-free
``array(...)`` and ``map(...)`` (:mod:`tablestore.sql.procedures.arguments` reads them). Each family
registers its procedures in its own module of this package, listed in ``_PROCEDURE_MODULES``
(imported on first use so ``import tablestore`` stays light).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tablestore.errors import ValidationError

if TYPE_CHECKING:
    from tablestore.catalog.base import Catalog
    from tablestore.sql.context import SessionContext
    from tablestore.sql.result import StatementResult

# Modules that register procedures when imported (maintenance: issue 9; column merges: issue 7;
# snapshot management: issue 38; changelog views: issue 45).
_PROCEDURE_MODULES = ("tablestore.sql.procedures.maintenance", "tablestore.sql.procedures.columns",
                      "tablestore.sql.procedures.refs", "tablestore.sql.procedures.changelog")


@dataclass(frozen=True)
class Parameter:
    name: str
    required: bool = False
    doc: str = ""


ProcedureBody = Callable[["SessionContext", "Catalog", dict[str, Any]], "StatementResult"]


@dataclass(frozen=True)
class Procedure:
    name: str
    parameters: tuple[Parameter, ...]
    body: ProcedureBody
    doc: str = ""

    def bind(self, args: list[tuple[str | None, Any]]) -> dict[str, Any]:
        """Named and positional arguments -> {parameter name: value}; errors name the problem."""
        known = {p.name for p in self.parameters}
        bound: dict[str, Any] = {}
        seen_named = False
        for index, (name, value) in enumerate(args):
            if name is None:
                if seen_named:
                    raise ValidationError(f"{self.name}: a positional argument cannot follow named arguments")
                if index >= len(self.parameters):
                    raise ValidationError(
                        f"{self.name} takes at most {len(self.parameters)} arguments; got {len(args)}"
                    )
                name = self.parameters[index].name
            else:
                seen_named = True
                name = name.lower()
                if name not in known:
                    raise ValidationError(
                        f"{self.name} has no parameter {name!r}; its parameters are {', '.join(sorted(known))}"
                    )
            if name in bound:
                raise ValidationError(f"{self.name}: argument {name!r} is given twice")
            bound[name] = value
        missing = [p.name for p in self.parameters if p.required and bound.get(p.name) is None]
        if missing:
            raise ValidationError(f"{self.name}: missing required argument(s) {', '.join(missing)}")
        return bound


_REGISTRY: dict[str, Procedure] = {}
_loaded = False


def procedure(name: str, *parameters: Parameter, doc: str = "") -> Callable[[ProcedureBody], ProcedureBody]:
    """Register ``body`` as ``system.<name>``."""

    def register(body: ProcedureBody) -> ProcedureBody:
        _REGISTRY[name.lower()] = Procedure(name.lower(), tuple(parameters), body, doc or (body.__doc__ or ""))
        return body

    return register


def procedures() -> dict[str, Procedure]:
    global _loaded
    if not _loaded:
        for module in _PROCEDURE_MODULES:
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as e:
                if e.name != module:  # a missing dependency of a module that exists is a real error
                    raise
        _loaded = True
    return _REGISTRY


def find_procedure(name: str) -> Procedure:
    found = procedures().get(name.lower())
    if found is None:
        names = ", ".join(sorted(procedures())) or "none"
        raise ValidationError(f"unknown procedure system.{name}; the procedures are {names}")
    return found


__all__ = ["Parameter", "Procedure", "find_procedure", "procedure", "procedures"]
