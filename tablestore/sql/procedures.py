"""Stored procedures in Iceberg's convention: ``CALL <catalog>.system.<name>(arg => value, ...)``.

A procedure is a Python function registered under a name with its parameters; arguments may be
named (``table => 'db.t'``) or positional, in the order of the parameters. Values are SQL
literals: strings, numbers, booleans, NULL, ``TIMESTAMP '...'``, ``DATE '...'``, ``INTERVAL``-free
``array(...)`` and ``map(...)``. Each capability registers its procedures in its own module, listed
in ``_PROCEDURE_MODULES`` (imported on first use so ``import tablestore`` stays light).
"""

from __future__ import annotations

import datetime
import decimal
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tablestore.errors import ValidationError
from tablestore.option_values import aware_datetime, epoch_ms

if TYPE_CHECKING:
    from tablestore.catalog.base import Catalog
    from tablestore.sql.context import SessionContext
    from tablestore.sql.result import StatementResult
    from tablestore.table import Table

# Modules that register procedures when imported (maintenance: issue 9; column merges: issue 7;
# snapshot management: issue 38; changelog views: issue 45).
_PROCEDURE_MODULES = ("tablestore.sql.procedures_maintenance", "tablestore.sql.procedures_columns",
                      "tablestore.sql.procedures_refs", "tablestore.sql.procedures_changelog")


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


# -- argument values ------------------------------------------------------------------------------


def table_argument(catalog: Catalog, args: dict[str, Any]) -> Table:
    """The table the ``table`` argument names, loaded from ``catalog``."""
    name = args["table"]
    if not isinstance(name, str):
        raise ValidationError(f"table must be a string like 'db.t', got {name!r}")
    return catalog.load_table(name)


def int_argument(value: Any, name: str) -> int | None:
    """An integer argument, None when not given."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{name} must be an integer, got {value!r}")
    return value


def time_argument(value: Any, name: str) -> int | None:
    """A point-in-time argument (a TIMESTAMP or DATE literal, an ISO string, epoch milliseconds)
    in epoch milliseconds, None when not given."""
    if value is None:
        return None
    if not isinstance(value, int | str | datetime.datetime | datetime.date) or isinstance(value, bool):
        raise ValidationError(f"{name} must be a TIMESTAMP, got {value!r}")
    return epoch_ms(value, name)


def literal_value(sql: str) -> Any:
    """The Python value of one SQL literal argument (raises ValidationError otherwise)."""
    import sqlglot
    from sqlglot import exp

    try:
        node = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.ParseError as e:
        raise ValidationError(f"cannot read the argument {sql!r}: {e}") from None
    return _value(node, sql, exp)


def _value(node: Any, sql: str, exp: Any) -> Any:
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        try:
            return int(text)
        except ValueError:
            return decimal.Decimal(text) if "." in text and "e" not in text.lower() else float(text)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Neg):
        return -_value(node.this, sql, exp)
    if isinstance(node, exp.Paren):
        return _value(node.this, sql, exp)
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal):
        target = node.to.this.name.upper() if hasattr(node.to.this, "name") else str(node.to).upper()
        text = node.this.this
        if target.startswith("TIMESTAMP"):
            return aware_datetime(text)
        if target == "DATE":
            return datetime.date.fromisoformat(text)
        return text
    if isinstance(node, exp.Array):
        return [_value(e, sql, exp) for e in node.expressions]
    if isinstance(node, (exp.Map, exp.VarMap)):
        keys, values = node.args.get("keys"), node.args.get("values")
        ks = [_value(e, sql, exp) for e in (keys.expressions if keys is not None else [])]
        vs = [_value(e, sql, exp) for e in (values.expressions if values is not None else [])]
        return dict(zip(ks, vs, strict=True))
    if isinstance(node, exp.Anonymous) and node.name.lower() == "map":
        items = [_value(e, sql, exp) for e in node.expressions]
        return dict(zip(items[::2], items[1::2], strict=True))
    raise ValidationError(f"procedure arguments must be literals; {sql!r} is not one")


__all__ = ["Parameter", "Procedure", "find_procedure", "int_argument", "literal_value", "procedure", "procedures",
           "table_argument", "time_argument"]
