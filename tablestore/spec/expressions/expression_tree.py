"""Row filters: the expression tree, unbound as users write it and bound as evaluators use it.

This module holds the tree alone, so that the binder
(:func:`tablestore.spec.expressions.binding.bind`) and the filter parser
(:func:`tablestore.spec.expressions.expression_parser.to_expression`), which build trees, sit
above it without an import cycle.

An *unbound* predicate names a column (``Reference("a.b")``) and holds a plain Python value.
:func:`bind` resolves the column against a schema and converts the value to the column's
internal representation (see docs/dev/contracts.md), giving *bound* predicates
(:mod:`tablestore.spec.expressions.bound_predicates`) that expose ``.field`` (the :class:`NestedField`),
``.path`` and ``.literal`` / ``.literals``. ``str()`` of either tree is SQL
(:mod:`tablestore.spec.expressions.expression_text`).

Semantics are those of SQL, so that a filter selects the same rows as a SQL engine would:

* Three-valued logic: a comparison with a null value is unknown, and a row is selected only
  when the whole filter is true. ``NOT (x = 1)`` does not select rows where ``x`` is null.
* ``IS NULL``, ``IS NOT NULL``, ``isnan`` and ``NOT isnan`` are never unknown
  (``isnan(NULL)`` is false, as in Spark).
* NaN sorts above every other value and equals itself (Spark, PostgreSQL and Iceberg's Java
  evaluator agree on this; plain IEEE comparisons do not).

:func:`bind` first pushes every NOT down to the predicates (:func:`rewrite_not`); with the
semantics above each predicate has an exact complement, so bound trees never contain NOT and
evaluators may treat "unknown" like "false".
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from tablestore.errors import FilterError
from tablestore.spec.expressions.expression_text import (
    literal_predicate_sql,
    quote_name,
    quote_part,
    set_predicate_sql,
    unary_predicate_sql,
)
from tablestore.spec.schemas.types import NestedField

# -- base classes ----------------------------------------------------------------------------


class BooleanExpression(ABC):
    """A node of a filter tree. ``~e``, ``a & b`` and ``a | b`` build NOT, AND and OR."""

    __slots__ = ()

    @abstractmethod
    def negate(self) -> BooleanExpression:
        """The SQL complement, with the NOT pushed into the children."""

    def __invert__(self) -> BooleanExpression:
        return Not(self)

    def __and__(self, other: BooleanExpression) -> BooleanExpression:
        return And(self, other)

    def __or__(self, other: BooleanExpression) -> BooleanExpression:
        return Or(self, other)


#: The name the contract uses for any filter tree.
Expression = BooleanExpression
#: A tree returned by :func:`bind`: And, Or, AlwaysTrue, AlwaysFalse and bound predicates only.
BoundExpression = BooleanExpression


class AlwaysTrue(BooleanExpression):
    """Selects every row. A singleton."""

    __slots__ = ()
    _instance: ClassVar[AlwaysTrue | None] = None

    def __new__(cls) -> AlwaysTrue:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def negate(self) -> BooleanExpression:
        return AlwaysFalse()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AlwaysTrue)

    def __hash__(self) -> int:
        return hash("AlwaysTrue")

    def __str__(self) -> str:
        return "TRUE"

    def __repr__(self) -> str:
        return "AlwaysTrue()"


class AlwaysFalse(BooleanExpression):
    """Selects no row. A singleton."""

    __slots__ = ()
    _instance: ClassVar[AlwaysFalse | None] = None

    def __new__(cls) -> AlwaysFalse:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def negate(self) -> BooleanExpression:
        return AlwaysTrue()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AlwaysFalse)

    def __hash__(self) -> int:
        return hash("AlwaysFalse")

    def __str__(self) -> str:
        return "FALSE"

    def __repr__(self) -> str:
        return "AlwaysFalse()"


def check_expression(value: object) -> BooleanExpression:
    if not isinstance(value, BooleanExpression):
        raise FilterError(f"expected a filter expression, got {value!r}")
    return value


class And(BooleanExpression):
    """Both sides hold. ``And(a, b, c)`` nests to the left; constants simplify away."""

    __slots__ = ("left", "right")
    left: BooleanExpression
    right: BooleanExpression

    # Construction happens in __new__ so that simplification can return another node type
    # (And(AlwaysTrue(), x) is x), like pyiceberg does; __init__ must then do nothing.
    def __new__(  # type: ignore[misc]
        cls, left: BooleanExpression, right: BooleanExpression, *rest: BooleanExpression
    ) -> BooleanExpression:
        if rest:
            return And(And(left, right), *rest)
        left, right = check_expression(left), check_expression(right)
        if isinstance(left, AlwaysFalse) or isinstance(right, AlwaysFalse):
            return AlwaysFalse()
        if isinstance(left, AlwaysTrue):
            return right
        if isinstance(right, AlwaysTrue) or left == right:
            return left
        node = super().__new__(cls)
        node.left = left
        node.right = right
        return node

    def __init__(self, left: BooleanExpression, right: BooleanExpression, *rest: BooleanExpression) -> None:
        pass

    def __getnewargs__(self) -> tuple[BooleanExpression, BooleanExpression]:
        return (self.left, self.right)

    def negate(self) -> BooleanExpression:
        return Or(self.left.negate(), self.right.negate())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, And) and self.left == other.left and self.right == other.right

    def __hash__(self) -> int:
        return hash(("And", self.left, self.right))

    def __str__(self) -> str:
        return f"{_paren(self.left, And)} AND {_paren(self.right, And)}"

    def __repr__(self) -> str:
        return f"And({self.left!r}, {self.right!r})"


class Or(BooleanExpression):
    """Either side holds. ``Or(a, b, c)`` nests to the left; constants simplify away."""

    __slots__ = ("left", "right")
    left: BooleanExpression
    right: BooleanExpression

    def __new__(  # type: ignore[misc]
        cls, left: BooleanExpression, right: BooleanExpression, *rest: BooleanExpression
    ) -> BooleanExpression:
        if rest:
            return Or(Or(left, right), *rest)
        left, right = check_expression(left), check_expression(right)
        if isinstance(left, AlwaysTrue) or isinstance(right, AlwaysTrue):
            return AlwaysTrue()
        if isinstance(left, AlwaysFalse):
            return right
        if isinstance(right, AlwaysFalse) or left == right:
            return left
        node = super().__new__(cls)
        node.left = left
        node.right = right
        return node

    def __init__(self, left: BooleanExpression, right: BooleanExpression, *rest: BooleanExpression) -> None:
        pass

    def __getnewargs__(self) -> tuple[BooleanExpression, BooleanExpression]:
        return (self.left, self.right)

    def negate(self) -> BooleanExpression:
        return And(self.left.negate(), self.right.negate())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Or) and self.left == other.left and self.right == other.right

    def __hash__(self) -> int:
        return hash(("Or", self.left, self.right))

    def __str__(self) -> str:
        return f"{_paren(self.left, Or)} OR {_paren(self.right, Or)}"

    def __repr__(self) -> str:
        return f"Or({self.left!r}, {self.right!r})"


class Not(BooleanExpression):
    """The SQL complement of the child. ``Not(Not(x))`` is ``x``; constants flip."""

    __slots__ = ("child",)
    child: BooleanExpression

    def __new__(cls, child: BooleanExpression) -> BooleanExpression:  # type: ignore[misc]
        child = check_expression(child)
        if isinstance(child, AlwaysTrue):
            return AlwaysFalse()
        if isinstance(child, AlwaysFalse):
            return AlwaysTrue()
        if isinstance(child, Not):
            return child.child
        node = super().__new__(cls)
        node.child = child
        return node

    def __init__(self, child: BooleanExpression) -> None:
        pass

    def __getnewargs__(self) -> tuple[BooleanExpression]:
        return (self.child,)

    def negate(self) -> BooleanExpression:
        return self.child

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Not) and self.child == other.child

    def __hash__(self) -> int:
        return hash(("Not", self.child))

    def __str__(self) -> str:
        return f"NOT ({self.child})" if isinstance(self.child, (And, Or)) else f"NOT {self.child}"

    def __repr__(self) -> str:
        return f"Not({self.child!r})"


def _paren(expr: BooleanExpression, parent: type) -> str:
    # AND binds tighter than OR, so only an OR inside an AND needs parentheses; we also
    # parenthesize AND inside OR because people read it more easily.
    return f"({expr})" if isinstance(expr, (And, Or)) and not isinstance(expr, parent) else str(expr)


# -- terms -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    """A column by name; nested struct fields by dotted name (``"address.city"``)."""

    name: str

    def __str__(self) -> str:
        return quote_name(self.name)


@dataclass(frozen=True)
class BoundReference:
    """A column resolved against a schema: the field and the names leading to it."""

    field: NestedField
    path: tuple[str, ...]

    @property
    def name(self) -> str:
        return ".".join(self.path)

    @property
    def field_id(self) -> int:
        return self.field.field_id

    def __str__(self) -> str:
        return ".".join(quote_part(p) for p in self.path)


# -- unbound predicates ----------------------------------------------------------------------


class Predicate(BooleanExpression):
    """A leaf that tests one column: unbound (:class:`UnboundPredicate`, by name) or bound
    (:class:`~tablestore.spec.expressions.bound_predicates.BoundPredicate`, by field); ``op`` names the kind."""

    __slots__ = ("term",)
    op: ClassVar[str]
    term: Reference | BoundReference


class UnboundPredicate(Predicate):
    """A predicate on a named column; ``op`` identifies the kind (``"eq"``, ``"in"``, ...)."""

    __slots__ = ()
    term: Reference

    def __init__(self, term: str | Reference) -> None:
        if isinstance(term, str):
            term = Reference(term)
        if not isinstance(term, Reference):
            raise FilterError(f"a predicate needs a column name, got {term!r}")
        self.term = term

    def negate(self) -> BooleanExpression:
        return _with_op(self, NEGATION[self.op])

    def _key(self) -> tuple[Any, ...]:
        return (self.op, self.term)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnboundPredicate) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


class UnaryPredicate(UnboundPredicate):
    __slots__ = ()

    def __str__(self) -> str:
        return unary_predicate_sql(self.op, self.term)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.term.name!r})"


class LiteralPredicate(UnboundPredicate):
    __slots__ = ("literal",)
    literal: Any

    def __init__(self, term: str | Reference, literal: Any) -> None:
        super().__init__(term)
        self.literal = literal

    def _key(self) -> tuple[Any, ...]:
        # type() keeps True and 1 (and 1 and 1.0) apart, which bind treats differently.
        return (self.op, self.term, type(self.literal), hashable_literal(self.literal))

    def __str__(self) -> str:
        return literal_predicate_sql(self.op, self.term, self.literal)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.term.name!r}, {self.literal!r})"


class SetPredicate(UnboundPredicate):
    __slots__ = ("values",)
    values: tuple[Any, ...]

    def __init__(self, term: str | Reference, values: Iterable[Any]) -> None:
        super().__init__(term)
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise FilterError(f"IN needs a collection of values, got {values!r}")
        # Keep the first occurrence of each value, in the order given, for readable output.
        seen: dict[Any, Any] = {}
        for v in values:
            seen.setdefault((type(v), hashable_literal(v)), v)
        self.values = tuple(seen.values())

    def _key(self) -> tuple[Any, ...]:
        return (self.op, self.term, frozenset((type(v), hashable_literal(v)) for v in self.values))

    def __str__(self) -> str:
        return set_predicate_sql(self.op, self.term, self.values)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.term.name!r}, {list(self.values)!r})"


def hashable_literal(value: Any) -> Any:
    """A literal as a set member or dict key that equals exactly the values a predicate equates."""
    if isinstance(value, (list, bytearray)):
        return tuple(value) if isinstance(value, list) else bytes(value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"  # NaN != NaN would make equal predicates compare unequal
    return value


class IsNull(UnaryPredicate):
    __slots__ = ()
    op = "is_null"


class NotNull(UnaryPredicate):
    __slots__ = ()
    op = "not_null"


class IsNaN(UnaryPredicate):
    __slots__ = ()
    op = "is_nan"


class NotNaN(UnaryPredicate):
    __slots__ = ()
    op = "not_nan"


class EqualTo(LiteralPredicate):
    __slots__ = ()
    op = "eq"


class NotEqualTo(LiteralPredicate):
    __slots__ = ()
    op = "not_eq"


class LessThan(LiteralPredicate):
    __slots__ = ()
    op = "lt"


class LessThanOrEqual(LiteralPredicate):
    __slots__ = ()
    op = "lt_eq"


class GreaterThan(LiteralPredicate):
    __slots__ = ()
    op = "gt"


class GreaterThanOrEqual(LiteralPredicate):
    __slots__ = ()
    op = "gt_eq"


class StartsWith(LiteralPredicate):
    """``term LIKE 'prefix%'``."""

    __slots__ = ()
    op = "starts_with"


class NotStartsWith(LiteralPredicate):
    """``term NOT LIKE 'prefix%'``: false for rows whose value is null (SQL semantics)."""

    __slots__ = ()
    op = "not_starts_with"


class In(SetPredicate):
    __slots__ = ()
    op = "in"


class NotIn(SetPredicate):
    __slots__ = ()
    op = "not_in"


#: The op of each predicate's SQL complement, for unbound and bound predicates alike.
NEGATION = {
    "is_null": "not_null", "not_null": "is_null", "is_nan": "not_nan", "not_nan": "is_nan",
    "eq": "not_eq", "not_eq": "eq", "lt": "gt_eq", "gt_eq": "lt", "gt": "lt_eq", "lt_eq": "gt",
    "starts_with": "not_starts_with", "not_starts_with": "starts_with", "in": "not_in", "not_in": "in",
}
UNARY_OPS = frozenset({"is_null", "not_null", "is_nan", "not_nan"})
LITERAL_OPS = frozenset({"eq", "not_eq", "lt", "lt_eq", "gt", "gt_eq", "starts_with", "not_starts_with"})
SET_OPS = frozenset({"in", "not_in"})

UNBOUND_CLASSES: dict[str, type[UnboundPredicate]] = {
    c.op: c
    for c in (IsNull, NotNull, IsNaN, NotNaN, EqualTo, NotEqualTo, LessThan, LessThanOrEqual, GreaterThan,
              GreaterThanOrEqual, StartsWith, NotStartsWith, In, NotIn)
}


def _with_op(pred: UnboundPredicate, op: str) -> UnboundPredicate:
    cls = UNBOUND_CLASSES[op]
    if isinstance(pred, LiteralPredicate):
        return cls(pred.term, pred.literal)  # type: ignore[call-arg]
    if isinstance(pred, SetPredicate):
        return cls(pred.term, pred.values)  # type: ignore[call-arg]
    return cls(pred.term)


# -- traversal -------------------------------------------------------------------------------


def rewrite_not(expr: BooleanExpression) -> BooleanExpression:
    """The same filter with every NOT pushed down into the predicates (De Morgan)."""
    if isinstance(expr, Not):
        return rewrite_not(expr.child.negate())
    if isinstance(expr, And):
        return And(rewrite_not(expr.left), rewrite_not(expr.right))
    if isinstance(expr, Or):
        return Or(rewrite_not(expr.left), rewrite_not(expr.right))
    return expr


def predicates(expr: BooleanExpression) -> Iterator[Predicate]:
    """Every predicate (leaf other than TRUE/FALSE) of the tree, left to right."""
    if isinstance(expr, (And, Or)):
        yield from predicates(expr.left)
        yield from predicates(expr.right)
    elif isinstance(expr, Not):
        yield from predicates(expr.child)
    elif isinstance(expr, Predicate):
        yield expr


def referenced_names(expr: BooleanExpression) -> set[str]:
    """The (dotted) column names a bound or unbound filter mentions."""
    names: set[str] = set()
    for pred in predicates(expr):
        names.add(pred.term.name)
    return names
