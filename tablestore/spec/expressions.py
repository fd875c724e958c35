"""Row filters: the unbound expression tree users write, and the bound tree evaluators use.

An *unbound* predicate names a column (``Reference("a.b")``) and holds a plain Python value.
:func:`bind` resolves the column against a schema and converts the value to the column's
internal representation (see docs/dev/contracts.md), giving *bound* predicates that expose
``.field`` (the :class:`NestedField`), ``.path`` and ``.literal`` / ``.literals``.

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
import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any, ClassVar

from tablestore.errors import FilterError
from tablestore.spec.conversions import to_python
from tablestore.spec.schema import Schema
from tablestore.spec.types import (
    IcebergType,
    NestedField,
)

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


def _check_expression(value: object) -> BooleanExpression:
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
        left, right = _check_expression(left), _check_expression(right)
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
        left, right = _check_expression(left), _check_expression(right)
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
        child = _check_expression(child)
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
        return _quote_name(self.name)


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
        return ".".join(_quote_part(p) for p in self.path)


_SIMPLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Words that would be read as SQL rather than as a column name.
_RESERVED = frozenset(
    {"and", "or", "not", "in", "is", "null", "true", "false", "like", "between", "date", "timestamp",
     "cast", "case", "when", "then", "else", "end", "select", "from", "where", "escape", "interval"}
)


def _quote_part(part: str) -> str:
    if _SIMPLE_NAME.match(part) and part.lower() not in _RESERVED:
        return part
    return "`" + part.replace("`", "``") + "`"


def _quote_name(name: str) -> str:
    return ".".join(_quote_part(p) for p in name.split("."))


def format_literal(value: Any) -> str:
    """A Python value written as a SQL literal that :func:`parse_filter` reads back."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f") if value.is_finite() else f"'{value}'"
    if isinstance(value, float):
        # The parser reads 1.5 back as a Decimal, which binds to the same value.
        return repr(value) if math.isfinite(value) else f"'{value}'"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, time):
        return f"'{value.isoformat()}'"
    if isinstance(value, uuid.UUID):
        return f"'{value}'"
    if isinstance(value, (bytes, bytearray)):
        return f"X'{bytes(value).hex()}'"
    return repr(value)


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return format_literal(escaped + "%")


# -- unbound predicates ----------------------------------------------------------------------


class UnboundPredicate(BooleanExpression):
    """A predicate on a named column; ``op`` identifies the kind (``"eq"``, ``"in"``, ...)."""

    __slots__ = ("term",)
    op: ClassVar[str]
    term: Reference

    def __init__(self, term: str | Reference) -> None:
        if isinstance(term, str):
            term = Reference(term)
        if not isinstance(term, Reference):
            raise FilterError(f"a predicate needs a column name, got {term!r}")
        self.term = term

    def negate(self) -> BooleanExpression:
        return _with_op(self, _NEGATION[self.op])

    def _key(self) -> tuple[Any, ...]:
        return (self.op, self.term)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnboundPredicate) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


class UnaryPredicate(UnboundPredicate):
    __slots__ = ()

    def __str__(self) -> str:
        return _UNARY_FORMAT[self.op].format(term=self.term)

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
        return (self.op, self.term, type(self.literal), _hashable(self.literal))

    def __str__(self) -> str:
        if self.op == "starts_with":
            return f"{self.term} LIKE {_like_prefix(self.literal)}"
        if self.op == "not_starts_with":
            return f"{self.term} NOT LIKE {_like_prefix(self.literal)}"
        return f"{self.term} {_OPERATOR[self.op]} {format_literal(self.literal)}"

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
            seen.setdefault((type(v), _hashable(v)), v)
        self.values = tuple(seen.values())

    def _key(self) -> tuple[Any, ...]:
        return (self.op, self.term, frozenset((type(v), _hashable(v)) for v in self.values))

    def __str__(self) -> str:
        word = "IN" if self.op == "in" else "NOT IN"
        return f"{self.term} {word} ({', '.join(format_literal(v) for v in self.values)})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.term.name!r}, {list(self.values)!r})"


def _hashable(value: Any) -> Any:
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


_NEGATION = {
    "is_null": "not_null", "not_null": "is_null", "is_nan": "not_nan", "not_nan": "is_nan",
    "eq": "not_eq", "not_eq": "eq", "lt": "gt_eq", "gt_eq": "lt", "gt": "lt_eq", "lt_eq": "gt",
    "starts_with": "not_starts_with", "not_starts_with": "starts_with", "in": "not_in", "not_in": "in",
}
_OPERATOR = {"eq": "=", "not_eq": "!=", "lt": "<", "lt_eq": "<=", "gt": ">", "gt_eq": ">="}
_UNARY_FORMAT = {
    "is_null": "{term} IS NULL", "not_null": "{term} IS NOT NULL",
    "is_nan": "isnan({term})", "not_nan": "NOT isnan({term})",
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


# -- bound predicates ------------------------------------------------------------------------


class BoundPredicate(BooleanExpression):
    """A predicate on a resolved column; literals hold internal values of the column's type."""

    __slots__ = ("term",)
    op: ClassVar[str]
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
        return _bound_with_op(self, _NEGATION[self.op])

    def _key(self) -> tuple[Any, ...]:
        return (self.op, self.term.field.field_id, self.term.path)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BoundPredicate) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


class BoundUnaryPredicate(BoundPredicate):
    __slots__ = ()

    def __str__(self) -> str:
        return _UNARY_FORMAT[self.op].format(term=self.term)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, field_id={self.field_id})"


class BoundLiteralPredicate(BoundPredicate):
    __slots__ = ("literal",)
    literal: Any

    def __init__(self, term: BoundReference, literal: Any) -> None:
        super().__init__(term)
        self.literal = literal

    def _key(self) -> tuple[Any, ...]:
        return (*super()._key(), _hashable(self.literal))

    def __str__(self) -> str:
        shown = _external(self.field.field_type, self.literal)
        if self.op == "starts_with":
            return f"{self.term} LIKE {_like_prefix(self.literal)}"
        if self.op == "not_starts_with":
            return f"{self.term} NOT LIKE {_like_prefix(self.literal)}"
        return f"{self.term} {_OPERATOR[self.op]} {format_literal(shown)}"

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
        word = "IN" if self.op == "in" else "NOT IN"
        try:
            ordered = sorted(self.literals)
        except TypeError:  # NaN-free values of one type always sort; be safe anyway
            ordered = list(self.literals)
        shown = [format_literal(_external(self.field.field_type, v)) for v in ordered]
        return f"{self.term} {word} ({', '.join(shown)})"

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


def predicates(expr: BooleanExpression) -> Iterator[BooleanExpression]:
    """Every predicate (leaf other than TRUE/FALSE) of the tree, left to right."""
    if isinstance(expr, (And, Or)):
        yield from predicates(expr.left)
        yield from predicates(expr.right)
    elif isinstance(expr, Not):
        yield from predicates(expr.child)
    elif isinstance(expr, (UnboundPredicate, BoundPredicate)):
        yield expr


def referenced_field_ids(expr: BooleanExpression) -> set[int]:
    """The ids of the columns a bound filter reads."""
    ids: set[int] = set()
    for pred in predicates(expr):
        if not isinstance(pred, BoundPredicate):
            raise FilterError(f"the filter is not bound ({pred}); call bind(schema, expr) first")
        ids.add(pred.field_id)
    return ids


def referenced_names(expr: BooleanExpression) -> set[str]:
    """The (dotted) column names a bound or unbound filter mentions."""
    names: set[str] = set()
    for pred in predicates(expr):
        names.add(pred.term.name)  # type: ignore[attr-defined]
    return names


def to_expression(filter: str | BooleanExpression | None) -> BooleanExpression:
    """A filter given as SQL text, an expression or None (everything) as an expression."""
    if filter is None:
        return AlwaysTrue()
    if isinstance(filter, BooleanExpression):
        return filter
    if isinstance(filter, str):
        # Imported here: the parser builds expressions, so it imports this module.
        from tablestore.spec.expression_parser import parse_filter

        return parse_filter(filter)
    raise FilterError(f"a filter must be SQL text or an expression, got {type(filter).__name__}: {filter!r}")


# -- binding ---------------------------------------------------------------------------------


def bind(schema: Schema, expr: BooleanExpression, case_sensitive: bool = True) -> BoundExpression:
    """Resolve the columns of ``expr`` and convert its literals; the result has no NOT.

    Raises FilterError for an unknown column (listing the columns), a value that cannot be
    converted to the column's type, or a predicate that does not apply to the column.
    """
    # The binder lives in its own module to keep this one readable; it imports this module.
    from tablestore.spec.binding import Binder

    return Binder(schema, case_sensitive).bind(rewrite_not(_check_expression(expr)))

