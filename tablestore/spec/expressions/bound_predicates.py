"""Bound predicates: the leaves of a filter after :func:`~tablestore.spec.expressions.binding.bind`.

A bound predicate tests one resolved column (a :class:`BoundReference`: the field and the names
leading to it), and its literals are internal values of the column's type (day numbers for dates,
microseconds for timestamps; see docs/dev/contracts.md). Evaluators, projection and the Arrow
filter read these; users build the unbound tree of
:mod:`tablestore.spec.expressions.expression_tree`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tablestore.errors import FilterError
from tablestore.spec.expressions.expression_text import literal_predicate_sql, set_predicate_sql, unary_predicate_sql
from tablestore.spec.expressions.expression_tree import (
    NEGATION,
    UNARY_OPS,
    BooleanExpression,
    BoundReference,
    Predicate,
    hashable_literal,
    predicates,
)
from tablestore.spec.schemas.conversions import to_python
from tablestore.spec.schemas.types import IcebergType, NestedField


class BoundPredicate(Predicate):
    """A predicate on a resolved column; literals hold internal values of the column's type."""

    __slots__ = ()
    term: BoundReference

    def __init__(self, term: BoundReference) -> None:
        self.term = term

    @property
    def field(self) -> NestedField:
        return self.term.field

    @property
    def field_id(self) -> int:
        return self.term.field.field_id

    @property
    def path(self) -> tuple[str, ...]:
        return self.term.path

    @property
    def name(self) -> str:
        return self.term.name

    def negate(self) -> BooleanExpression:
        return _bound_with_op(self, NEGATION[self.op])

    def _key(self) -> tuple[Any, ...]:
        return (self.op, self.term.field.field_id, self.term.path)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BoundPredicate) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


class BoundUnaryPredicate(BoundPredicate):
    __slots__ = ()

    def __str__(self) -> str:
        return unary_predicate_sql(self.op, self.term)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, field_id={self.field_id})"


class BoundLiteralPredicate(BoundPredicate):
    __slots__ = ("literal",)
    literal: Any

    def __init__(self, term: BoundReference, literal: Any) -> None:
        super().__init__(term)
        self.literal = literal

    def _key(self) -> tuple[Any, ...]:
        return (*super()._key(), hashable_literal(self.literal))

    def __str__(self) -> str:
        # A LIKE prefix is a string already; other literals are shown as users write them.
        prefix = self.op in ("starts_with", "not_starts_with")
        shown = self.literal if prefix else _external(self.field.field_type, self.literal)
        return literal_predicate_sql(self.op, self.term, shown)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.literal!r}, field_id={self.field_id})"


class BoundSetPredicate(BoundPredicate):
    __slots__ = ("literals",)
    literals: frozenset[Any]

    def __init__(self, term: BoundReference, literals: Iterable[Any]) -> None:
        super().__init__(term)
        self.literals = frozenset(literals)

    def _key(self) -> tuple[Any, ...]:
        return (*super()._key(), self.literals)

    def __str__(self) -> str:
        try:
            ordered = sorted(self.literals)
        except TypeError:  # NaN-free values of one type always sort; be safe anyway
            ordered = list(self.literals)
        return set_predicate_sql(self.op, self.term, [_external(self.field.field_type, v) for v in ordered])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {set(self.literals)!r}, field_id={self.field_id})"


def _external(t: IcebergType, value: Any) -> Any:
    """The value as users write it (a date rather than a day number), for display only."""
    try:
        return to_python(t, value)
    except Exception:  # display must never fail; fall back to the internal value
        return value


class BoundIsNull(BoundUnaryPredicate):
    __slots__ = ()
    op = "is_null"


class BoundNotNull(BoundUnaryPredicate):
    __slots__ = ()
    op = "not_null"


class BoundIsNaN(BoundUnaryPredicate):
    __slots__ = ()
    op = "is_nan"


class BoundNotNaN(BoundUnaryPredicate):
    __slots__ = ()
    op = "not_nan"


class BoundEqualTo(BoundLiteralPredicate):
    __slots__ = ()
    op = "eq"


class BoundNotEqualTo(BoundLiteralPredicate):
    __slots__ = ()
    op = "not_eq"


class BoundLessThan(BoundLiteralPredicate):
    __slots__ = ()
    op = "lt"


class BoundLessThanOrEqual(BoundLiteralPredicate):
    __slots__ = ()
    op = "lt_eq"


class BoundGreaterThan(BoundLiteralPredicate):
    __slots__ = ()
    op = "gt"


class BoundGreaterThanOrEqual(BoundLiteralPredicate):
    __slots__ = ()
    op = "gt_eq"


class BoundStartsWith(BoundLiteralPredicate):
    __slots__ = ()
    op = "starts_with"


class BoundNotStartsWith(BoundLiteralPredicate):
    __slots__ = ()
    op = "not_starts_with"


class BoundIn(BoundSetPredicate):
    __slots__ = ()
    op = "in"


class BoundNotIn(BoundSetPredicate):
    __slots__ = ()
    op = "not_in"


BOUND_CLASSES: dict[str, type[BoundPredicate]] = {
    c.op: c
    for c in (BoundIsNull, BoundNotNull, BoundIsNaN, BoundNotNaN, BoundEqualTo, BoundNotEqualTo,
              BoundLessThan, BoundLessThanOrEqual, BoundGreaterThan, BoundGreaterThanOrEqual,
              BoundStartsWith, BoundNotStartsWith, BoundIn, BoundNotIn)
}


def _bound_with_op(pred: BoundPredicate, op: str) -> BoundPredicate:
    return make_bound(op, pred.term, getattr(pred, "literals", getattr(pred, "literal", None)))


def make_bound(op: str, term: BoundReference, value: Any = None) -> BoundPredicate:
    """A bound predicate of kind ``op``; ``value`` is the literal, or the literals for IN/NOT IN."""
    cls = BOUND_CLASSES[op]
    if op in UNARY_OPS:
        return cls(term)
    return cls(term, value)  # type: ignore[call-arg]


def referenced_field_ids(expr: BooleanExpression) -> set[int]:
    """The ids of the columns a bound filter reads."""
    ids: set[int] = set()
    for pred in predicates(expr):
        if not isinstance(pred, BoundPredicate):
            raise FilterError(f"the filter is not bound ({pred}); call bind(schema, expr) first")
        ids.add(pred.field_id)
    return ids
