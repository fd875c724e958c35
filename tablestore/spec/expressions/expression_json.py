"""Filters as the REST spec's ``Expression`` JSON (PlanTableScanRequest ``filter``, a file scan
task's ``residual-filter``).

``true`` / ``false``; ``{"type": "and"|"or", "left", "right"}``; ``{"type": "not", "child"}``;
``{"type": "is-null"|"not-null"|"is-nan"|"not-nan", "term"}``;
``{"type": "lt"|"lt-eq"|"gt"|"gt-eq"|"eq"|"not-eq"|"starts-with"|"not-starts-with", "term", "value"}``;
``{"type": "in"|"not-in", "term", "values"}``. A term is a column name (a full dotted name) or
``{"type": "reference", "term": name}``. Values are the spec's JSON single-value forms
(``"2024-01-02"`` for a date, a decimal as a string, binary as hex), as pyiceberg and Java send
them.

Writing takes bound filters (names from the bound columns, values by the column's type);
reading gives unbound filters whose values the binder converts, after turning the hex of a
binary or fixed column and the string of a decimal into bytes and Decimal when a schema is given.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from tablestore.errors import FilterError
from tablestore.spec.expressions.bound_predicates import (
    BoundLiteralPredicate,
    BoundPredicate,
    BoundSetPredicate,
)
from tablestore.spec.expressions.expression_tree import (
    UNBOUND_CLASSES,
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    LiteralPredicate,
    Not,
    Or,
    SetPredicate,
    UnboundPredicate,
)
from tablestore.spec.schemas.conversions import to_json_value
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import BinaryType, DecimalType, FixedType, IcebergType

UNARY = frozenset({"is-null", "not-null", "is-nan", "not-nan"})
LITERAL = frozenset({"lt", "lt-eq", "gt", "gt-eq", "eq", "not-eq", "starts-with", "not-starts-with"})
SET = frozenset({"in", "not-in"})


def _value_json(t: IcebergType, value: Any) -> Any:
    out = to_json_value(t, value)
    # The spec writes binary and fixed values as uppercase hex.
    return out.upper() if isinstance(t, BinaryType | FixedType) and isinstance(out, str) else out


def expression_to_json(expr: BooleanExpression) -> Any:
    """The JSON form of a filter (bound, or unbound with plain JSON-able values)."""
    if isinstance(expr, AlwaysTrue):
        return True
    if isinstance(expr, AlwaysFalse):
        return False
    if isinstance(expr, And | Or):
        return {"type": "and" if isinstance(expr, And) else "or",
                "left": expression_to_json(expr.left), "right": expression_to_json(expr.right)}
    if isinstance(expr, Not):
        return {"type": "not", "child": expression_to_json(expr.child)}
    if isinstance(expr, BoundPredicate):
        kind = expr.op.replace("_", "-")
        t = expr.field.field_type
        if isinstance(expr, BoundSetPredicate):
            try:
                ordered = sorted(expr.literals)
            except TypeError:
                ordered = list(expr.literals)
            return {"type": kind, "term": expr.name, "values": [_value_json(t, v) for v in ordered]}
        if isinstance(expr, BoundLiteralPredicate):
            return {"type": kind, "term": expr.name, "value": _value_json(t, expr.literal)}
        return {"type": kind, "term": expr.name}
    if isinstance(expr, UnboundPredicate):
        kind = expr.op.replace("_", "-")
        if isinstance(expr, SetPredicate):
            return {"type": kind, "term": expr.term.name, "values": list(expr.values)}
        if isinstance(expr, LiteralPredicate):
            return {"type": kind, "term": expr.term.name, "value": expr.literal}
        return {"type": kind, "term": expr.term.name}
    raise FilterError(f"cannot write the filter {expr!r} as JSON")


def _term(obj: Any) -> str:
    if isinstance(obj, str):
        return obj
    if isinstance(obj, dict) and obj.get("type") == "reference" and isinstance(obj.get("term"), str):
        return str(obj["term"])
    if isinstance(obj, dict) and obj.get("type") == "transform":
        raise FilterError("filters on transform terms (a 'transform' term) are not supported; "
                          "filter on the column itself")
    raise FilterError(f"a filter term must be a column name, got {obj!r}")


def _typed(schema: Schema | None, name: str, case_sensitive: bool, value: Any) -> Any:
    """The JSON value as the binder takes it: bytes from hex for binary and fixed columns, a
    Decimal from a decimal column's string; anything else as sent."""
    if schema is None or not isinstance(value, str):
        return value
    field_id = schema.find_field_id(name, case_sensitive)
    if field_id is None:
        return value  # the binder names the unknown column
    t = schema.find_type(field_id)
    if isinstance(t, BinaryType | FixedType):
        try:
            return bytes.fromhex(value)
        except ValueError:
            raise FilterError(f"the value {value!r} for binary column {name!r} is not hexadecimal") from None
    if isinstance(t, DecimalType):
        try:
            return Decimal(value)
        except InvalidOperation:
            raise FilterError(f"the value {value!r} for decimal column {name!r} is not a number") from None
    return value


def expression_from_json(obj: Any, schema: Schema | None = None, case_sensitive: bool = True) -> BooleanExpression:
    """An unbound filter from its JSON form; malformed JSON is a FilterError naming the part."""
    if obj is True or obj is None:
        return AlwaysTrue()
    if obj is False:
        return AlwaysFalse()
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise FilterError(f"a filter must be true, false or an object with a 'type', got {obj!r}")
    kind = obj["type"]

    def child(key: str) -> BooleanExpression:
        if key not in obj:
            raise FilterError(f"a {kind!r} filter needs {key!r}")
        return expression_from_json(obj[key], schema, case_sensitive)

    if kind in ("true", "false"):
        return AlwaysTrue() if kind == "true" else AlwaysFalse()
    if kind == "and":
        return And(child("left"), child("right"))
    if kind == "or":
        return Or(child("left"), child("right"))
    if kind == "not":
        return Not(child("child"))
    op = kind.replace("-", "_")
    if kind in UNARY:
        return UNBOUND_CLASSES[op](_term(obj.get("term")))
    if kind in LITERAL:
        if "value" not in obj:
            raise FilterError(f"a {kind!r} filter needs a 'value'")
        name = _term(obj.get("term"))
        return UNBOUND_CLASSES[op](name, _typed(schema, name, case_sensitive, obj["value"]))  # type: ignore[call-arg]
    if kind in SET:
        values = obj.get("values")
        if not isinstance(values, list):
            raise FilterError(f"a {kind!r} filter needs a list of 'values'")
        name = _term(obj.get("term"))
        return UNBOUND_CLASSES[op](name, [_typed(schema, name, case_sensitive, v) for v in values])  # type: ignore[call-arg]
    raise FilterError(f"unknown filter type {kind!r}; expected and, or, not, a comparison, in, not-in, "
                      "is-null, not-null, is-nan or not-nan")


__all__ = ["expression_from_json", "expression_to_json"]
