"""SQL text to filter expressions: ``parse_filter("id > 5 AND region IN ('eu', 'us')")``.

The text is parsed with sqlglot in Spark's dialect, except that double-quoted words are column
names (as in standard SQL) rather than strings; string values use single quotes.

Supported: AND, OR, NOT, parentheses, = == != <> < <= > >=, IN / NOT IN, IS [NOT] NULL,
IS [NOT] TRUE/FALSE, [NOT] BETWEEN, [NOT] LIKE with a prefix pattern ('abc%'), isnan(c),
isnull(c), isnotnull(c), a bare boolean column, TRUE and FALSE. Values: numbers (integers stay
int, 1.5 is a Decimal so no precision is lost before binding, 1e3 is a float), strings, TRUE,
FALSE, X'hex', DATE '...', TIMESTAMP '...', CAST('...' AS DATE | TIMESTAMP). A value on the
left (``5 < id``) is moved to the right. Anything else is a FilterError that names it.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError

from tablestore.errors import FilterError
from tablestore.spec.expressions.expression_tree import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    EqualTo,
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
    NotNull,
    Or,
    StartsWith,
    UnboundPredicate,
)


class _FilterDialect(Spark):
    """Spark SQL, but "double quoted" is an identifier as in standard SQL."""

    class Tokenizer(Spark.Tokenizer):
        QUOTES = ["'"]
        IDENTIFIERS = ["`", '"']


_COMPARISONS: dict[type[exp.Expr], type[LiteralPredicate]] = {
    exp.EQ: EqualTo,
    exp.NEQ: NotEqualTo,
    exp.LT: LessThan,
    exp.LTE: LessThanOrEqual,
    exp.GT: GreaterThan,
    exp.GTE: GreaterThanOrEqual,
}
# With the value on the left, ``5 < id`` is ``id > 5``.
_FLIPPED: dict[type[LiteralPredicate], type[LiteralPredicate]] = {
    EqualTo: EqualTo,
    NotEqualTo: NotEqualTo,
    LessThan: GreaterThan,
    LessThanOrEqual: GreaterThanOrEqual,
    GreaterThan: LessThan,
    GreaterThanOrEqual: LessThanOrEqual,
}
_DATE_TYPES = {exp.DataType.Type.DATE}
_TIMESTAMP_TYPES = {
    exp.DataType.Type.TIMESTAMP,
    exp.DataType.Type.TIMESTAMPTZ,
    exp.DataType.Type.TIMESTAMPLTZ,
    exp.DataType.Type.TIMESTAMPNTZ,
    exp.DataType.Type.DATETIME,
}
_INTEGER = re.compile(r"^\d+$")
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv, exp.Neg, exp.DPipe,
               exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseXor)


def parse_filter(sql: str) -> BooleanExpression:
    """Parse a SQL boolean expression (a WHERE clause without the WHERE) into a filter."""
    if not isinstance(sql, str):
        raise FilterError(f"a filter must be SQL text, got {type(sql).__name__}")
    if not sql.strip():
        raise FilterError("the filter is empty; pass None or 'TRUE' to select every row")
    try:
        statements = sqlglot.parse(sql, read=_FilterDialect)
    except ParseError as e:
        raise FilterError(_syntax_message(sql, e)) from e
    except TokenError as e:
        raise FilterError(f"cannot read the filter {sql!r}: {e} (is a quote not closed?)") from e
    trees = [s for s in statements if s is not None]
    if len(trees) != 1:
        raise FilterError(f"the filter {sql!r} must be a single expression, not {len(trees)} statements")
    return _Converter().boolean(trees[0])


def filter_from_tree(tree: exp.Expr) -> BooleanExpression:
    """The filter of a boolean expression that sqlglot already parsed (Spark dialect), such as a
    DELETE's WHERE: the conversion of :func:`parse_filter` without reading any text again."""
    return _Converter().boolean(tree)


def _syntax_message(sql: str, error: ParseError) -> str:
    details = error.errors[0] if error.errors else {}
    line, col = details.get("line"), details.get("col")
    what = details.get("description") or str(error)
    where = f" at line {line}, column {col}" if line is not None else ""
    near = details.get("highlight")
    near_text = f" near {near!r}" if near else ""
    return f"syntax error in filter {sql!r}{where}{near_text}: {what}"


def _show(node: exp.Expr) -> str:
    try:
        return node.sql(dialect=_FilterDialect)
    except Exception:  # only for messages; never let rendering hide the real problem
        return repr(node)


class _Converter:
    """Turns a sqlglot tree into a filter, rejecting what a filter cannot express."""

    def boolean(self, node: exp.Expr) -> BooleanExpression:
        if isinstance(node, exp.Paren):
            return self.boolean(node.this)
        if isinstance(node, exp.And):
            return And(self.boolean(node.this), self.boolean(node.expression))
        if isinstance(node, exp.Or):
            return Or(self.boolean(node.this), self.boolean(node.expression))
        if isinstance(node, exp.Not):
            inner = self.boolean(node.this)
            # A predicate's complement is itself a predicate (x IS NOT NULL, x NOT IN, ...).
            return inner.negate() if isinstance(inner, UnboundPredicate) else Not(inner)
        if isinstance(node, exp.Boolean):
            return AlwaysTrue() if node.this else AlwaysFalse()
        comparison = _COMPARISONS.get(type(node))
        if comparison is not None:
            return self.comparison(node, comparison)
        if isinstance(node, (exp.NullSafeEQ, exp.NullSafeNEQ)):
            raise FilterError(f"the null-safe comparison in {_show(node)} is not supported; "
                              "use = together with IS NULL")
        if isinstance(node, exp.In):
            return self.in_list(node)
        if isinstance(node, exp.Is):
            return self.is_(node)
        if isinstance(node, exp.Between):
            column = self.column(node.this, node)
            return And(GreaterThanOrEqual(column, self.value(node.args["low"], node)),
                       LessThanOrEqual(column, self.value(node.args["high"], node)))
        if isinstance(node, exp.Escape) and isinstance(node.this, exp.Like):
            escape = self.value(node.expression, node)
            if not isinstance(escape, str) or len(escape) != 1:
                raise FilterError(f"the ESCAPE of {_show(node)} must be a single character")
            return self.like(node.this, escape)
        if isinstance(node, exp.Like):
            return self.like(node, "\\")
        if isinstance(node, exp.IsNan):
            return IsNaN(self.column(node.this, node))
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in ("isnull", "isnotnull", "isnan"):
            if len(node.expressions) != 1:
                raise FilterError(f"{node.this}() takes one column, in {_show(node)}")
            column = self.column(node.expressions[0], node)
            name = str(node.this).lower()
            return IsNull(column) if name == "isnull" else NotNull(column) if name == "isnotnull" \
                else IsNaN(column)
        if isinstance(node, (exp.Column, exp.Dot)):
            # A bare boolean column, as in Spark's WHERE active.
            return EqualTo(self.column(node, node), True)
        raise FilterError(self.unsupported(node))

    def unsupported(self, node: exp.Expr) -> str:
        if isinstance(node, (exp.ILike, exp.RegexpLike)) or type(node).__name__ in ("RLike", "SimilarTo"):
            return f"only LIKE with a prefix pattern ('abc%') is supported, not {_show(node)}"
        if isinstance(node, _ARITHMETIC):
            return f"arithmetic is not supported in filters: {_show(node)}"
        if isinstance(node, exp.Func):
            name = node.sql_name() if not isinstance(node, exp.Anonymous) else str(node.this)
            return f"the function {name} is not supported in filters: {_show(node)}"
        if isinstance(node, (exp.Literal, exp.Null, exp.Cast)):
            return f"{_show(node)} is a value, not a condition; compare a column with it"
        if isinstance(node, (exp.Select, exp.Subquery)):
            return f"subqueries are not supported in filters: {_show(node)}"
        return f"{type(node).__name__.lower()} is not supported in filters: {_show(node)}"

    # -- columns and values --------------------------------------------------------------

    def column_name(self, node: exp.Expr) -> str | None:
        """The dotted name if ``node`` is a column reference, else None."""
        if isinstance(node, exp.Paren):
            return self.column_name(node.this)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                return None
            return ".".join(part.name for part in node.parts)
        if isinstance(node, exp.Dot):
            left = self.column_name(node.this)
            right = node.expression
            if left is None or not isinstance(right, exp.Identifier):
                return None
            return f"{left}.{right.name}"
        return None

    def column(self, node: exp.Expr, context: exp.Expr) -> str:
        name = self.column_name(node)
        if name is None:
            raise FilterError(f"expected a column in {_show(context)}, found {_show(node)}; "
                              "filters compare columns with values")
        return name

    def value(self, node: exp.Expr, context: exp.Expr) -> Any:
        """The Python value of a literal; FilterError for anything else."""
        if isinstance(node, exp.Paren):
            return self.value(node.this, context)
        if isinstance(node, exp.Literal):
            return node.this if node.is_string else _number(node.this)
        if isinstance(node, exp.Neg):
            inner = self.value(node.this, context)
            if isinstance(inner, bool) or not isinstance(inner, (int, float, Decimal)):
                raise FilterError(f"cannot negate {_show(node.this)} in {_show(context)}")
            return -inner
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.HexString):
            return bytes.fromhex(str(node.this))
        if isinstance(node, exp.Concat) and all(
            isinstance(e, exp.Literal) and e.is_string for e in node.expressions
        ):
            # Spark joins adjacent string literals: 'it' 's' is 'its'.
            return "".join(e.this for e in node.expressions)
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return self.cast(node, context)
        if self.column_name(node) is not None:
            raise FilterError(f"comparing two columns is not supported, in {_show(context)}")
        raise FilterError(self.unsupported(node))

    def cast(self, node: exp.Cast, context: exp.Expr) -> Any:
        target = node.to.this if isinstance(node.to, exp.DataType) else None
        text = self.value(node.this, context)
        if target in _DATE_TYPES or target in _TIMESTAMP_TYPES:
            if not isinstance(text, str):
                raise FilterError(f"expected a quoted date or timestamp in {_show(node)}")
            try:
                if target in _DATE_TYPES:
                    return date.fromisoformat(text.strip())
                return datetime.fromisoformat(text.strip())
            except ValueError as e:
                kind = "date" if target in _DATE_TYPES else "timestamp"
                raise FilterError(f"{text!r} is not a valid {kind} (in {_show(node)}); "
                                  "write it as 2024-01-31 or 2024-01-31 10:00:00") from e
        raise FilterError(f"only CAST(... AS DATE) and CAST(... AS TIMESTAMP) are supported in filters, "
                          f"not {_show(node)}")

    # -- predicates ----------------------------------------------------------------------

    def comparison(self, node: exp.Expr, cls: type[LiteralPredicate]) -> BooleanExpression:
        left, right = node.this, node.expression
        left_name, right_name = self.column_name(left), self.column_name(right)
        if left_name is not None and right_name is not None:
            raise FilterError(f"comparing two columns is not supported, in {_show(node)}")
        if left_name is None and right_name is None:
            self.value(left, node)  # raises for a function or arithmetic, naming it
            self.value(right, node)
            raise FilterError(f"{_show(node)} compares two values; a filter compares a column with a value")
        if left_name is None:
            cls = _FLIPPED[cls]
            left, right = right, left
        name = left_name if left_name is not None else right_name
        assert name is not None
        value = self.value(right, node)
        if value is None:
            fix = "IS NOT NULL" if cls is NotEqualTo else "IS NULL"
            raise FilterError(f"{_show(node)} compares with NULL, which is never true; use {name} {fix}")
        return cls(name, value)

    def in_list(self, node: exp.In) -> BooleanExpression:
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise FilterError(f"subqueries are not supported in filters: {_show(node)}")
        name = self.column(node.this, node)
        values = [self.value(v, node) for v in node.expressions]
        if not values:
            raise FilterError(f"the IN list of {_show(node)} is empty")
        return In(name, values)

    def is_(self, node: exp.Is) -> BooleanExpression:
        name = self.column(node.this, node)
        target = node.expression
        if isinstance(target, exp.Null):
            return IsNull(name)
        if isinstance(target, exp.Boolean):
            # x IS TRUE is false (not unknown) for null, so NOT (x IS TRUE) holds for null.
            return And(NotNull(name), EqualTo(name, bool(target.this)))
        raise FilterError(f"IS must be followed by NULL, TRUE or FALSE, in {_show(node)}")

    def like(self, node: exp.Like, escape: str) -> BooleanExpression:
        name = self.column(node.this, node)
        pattern = self.value(node.expression, node)
        if not isinstance(pattern, str):
            raise FilterError(f"LIKE needs a quoted pattern, in {_show(node)}")
        text, wildcard = _like_pattern(pattern, escape)
        if wildcard is None:
            result: BooleanExpression = EqualTo(name, text)  # no wildcard: plain equality
        elif wildcard:
            result = StartsWith(name, text)
        else:
            raise FilterError(f"only LIKE with a prefix pattern is supported (text followed by %, such as "
                              f"'abc%'), not {pattern!r} in {_show(node)}; escape a literal % or _ as \\% "
                              "or \\_")
        return result.negate() if node.args.get("negate") else result


def _like_pattern(pattern: str, escape: str) -> tuple[str, bool | None]:
    """The literal text of a LIKE pattern, and whether it is a prefix pattern.

    Returns (text, None) without wildcards, (prefix, True) for 'prefix%' (also 'prefix%%'),
    and (pattern, False) for any other use of % or _.
    """
    text: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape and i + 1 < len(pattern):
            text.append(pattern[i + 1])
            i += 2
            continue
        if c == "_":
            return pattern, False
        if c == "%":
            rest = pattern[i:]
            return ("".join(text), True) if rest == "%" * len(rest) else (pattern, False)
        text.append(c)
        i += 1
    return "".join(text), None


def _number(text: str) -> int | float | Decimal:
    if _INTEGER.match(text):
        return int(text)
    if "e" in text.lower():
        # Exponent notation reads as a double, as in Spark.
        return float(text)
    try:
        return Decimal(text)
    except InvalidOperation as e:
        raise FilterError(f"{text!r} is not a number") from e


def to_expression(filter: str | BooleanExpression | None) -> BooleanExpression:
    """A filter given as SQL text, an expression or None (everything) as an expression."""
    if filter is None:
        return AlwaysTrue()
    if isinstance(filter, BooleanExpression):
        return filter
    if isinstance(filter, str):
        return parse_filter(filter)
    raise FilterError(f"a filter must be SQL text or an expression, got {type(filter).__name__}: {filter!r}")


__all__ = ["filter_from_tree", "parse_filter", "to_expression"]
