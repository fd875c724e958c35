"""Row filters: the unbound expression tree users write, and the bound tree evaluators use.

An *unbound* predicate names a column (``Reference("a.b")``) and holds a plain Python value.
:func:`bind` resolves the column against a schema and converts the value to the column's
internal representation (see docs/dev/contracts.md), giving *bound* predicates
(:mod:`tablestore.spec.bound_predicates`) that expose ``.field`` (the :class:`NestedField`),
``.path`` and ``.literal`` / ``.literals``. ``str()`` of either tree is SQL
(:mod:`tablestore.spec.expression_text`). The tree's classes and its semantics are in
:mod:`tablestore.spec.expression_tree`, the binder in :mod:`tablestore.spec.binding`, the
parser of SQL filter text in :mod:`tablestore.spec.expression_parser`; this module puts them
together and is where the rest of the project imports them from.

:func:`bind` first pushes every NOT down to the predicates (:func:`rewrite_not`); each
predicate has an exact complement, so bound trees never contain NOT and evaluators may treat
"unknown" like "false".
"""

from __future__ import annotations

from tablestore.errors import FilterError
from tablestore.spec.binding import Binder
from tablestore.spec.expression_parser import parse_filter
from tablestore.spec.expression_tree import (
    LITERAL_OPS,
    NEGATION,
    SET_OPS,
    UNARY_OPS,
    UNBOUND_CLASSES,
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    BoundExpression,
    BoundReference,
    EqualTo,
    Expression,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    LiteralPredicate,
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    Predicate,
    Reference,
    SetPredicate,
    StartsWith,
    UnaryPredicate,
    UnboundPredicate,
    check_expression,
    hashable_literal,
    predicates,
    referenced_names,
    rewrite_not,
)
from tablestore.spec.schema import Schema


def to_expression(filter: str | BooleanExpression | None) -> BooleanExpression:
    """A filter given as SQL text, an expression or None (everything) as an expression."""
    if filter is None:
        return AlwaysTrue()
    if isinstance(filter, BooleanExpression):
        return filter
    if isinstance(filter, str):
        return parse_filter(filter)
    raise FilterError(f"a filter must be SQL text or an expression, got {type(filter).__name__}: {filter!r}")


def bind(schema: Schema, expr: BooleanExpression, case_sensitive: bool = True) -> BoundExpression:
    """Resolve the columns of ``expr`` and convert its literals; the result has no NOT.

    Raises FilterError for an unknown column (listing the columns), a value that cannot be
    converted to the column's type, or a predicate that does not apply to the column.
    """
    return Binder(schema, case_sensitive).bind(rewrite_not(check_expression(expr)))


__all__ = [
    "LITERAL_OPS",
    "NEGATION",
    "SET_OPS",
    "UNARY_OPS",
    "UNBOUND_CLASSES",
    "AlwaysFalse",
    "AlwaysTrue",
    "And",
    "BooleanExpression",
    "BoundExpression",
    "BoundReference",
    "EqualTo",
    "Expression",
    "GreaterThan",
    "GreaterThanOrEqual",
    "In",
    "IsNaN",
    "IsNull",
    "LessThan",
    "LessThanOrEqual",
    "LiteralPredicate",
    "Not",
    "NotEqualTo",
    "NotIn",
    "NotNaN",
    "NotNull",
    "NotStartsWith",
    "Or",
    "Predicate",
    "Reference",
    "SetPredicate",
    "StartsWith",
    "UnaryPredicate",
    "UnboundPredicate",
    "bind",
    "check_expression",
    "hashable_literal",
    "predicates",
    "referenced_names",
    "rewrite_not",
    "to_expression",
]
