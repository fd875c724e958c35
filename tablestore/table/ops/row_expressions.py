"""SQL scalar expressions evaluated on Arrow tables, for UPDATE SET values and MERGE conditions
on the local engine (no Spark).

The text is parsed with sqlglot in Spark's dialect and evaluated with pyarrow compute. The
supported subset:

- column references, qualified (``t.id``, ``s.name``) or not; literals (numbers, strings,
  TRUE/FALSE, NULL, ``DATE '...'``, ``TIMESTAMP '...'``);
- arithmetic ``+ - * / %`` and unary minus; ``||`` concatenation;
- comparisons ``= == != <> < <= > >=``, ``AND``, ``OR``, ``NOT``, ``IS [NOT] NULL``,
  ``[NOT] IN (values)``, ``[NOT] BETWEEN``, ``[NOT] LIKE``;
- ``CASE WHEN ... THEN ... [ELSE ...] END``, ``CASE x WHEN v THEN ...``, ``IF(c, a, b)``,
  ``CAST(x AS type)``;
- functions ``upper``, ``lower``, ``concat``, ``coalesce``, ``nullif``, ``abs``, ``length``,
  ``trim``, ``ltrim``, ``rtrim``, ``round``, ``substring``/``substr``, ``greatest``, ``least``.

Anything else (subqueries, aggregates, window functions) is a ValidationError naming it; the
SQL layer runs such statements in Spark instead.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from tablestore.errors import ValidationError
from tablestore.spec.schemas.schema import type_to_arrow
from tablestore.spec.schemas.types import parse_sql_type

Resolver = Callable[[str | None, str], pa.Array | pa.ChunkedArray]


def parse_expression(sql: str) -> exp.Expr:
    """Parse one scalar SQL expression (Spark dialect).

    The tree is cached and shared (a MERGE evaluates the same clauses for every file): read it,
    never change it.
    """
    if not isinstance(sql, str) or not sql.strip():
        raise ValidationError(f"expected a SQL expression, got {sql!r}")
    return _parse(sql)


@functools.lru_cache(maxsize=1024)
def _parse(sql: str) -> exp.Expr:
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except (ParseError, TokenError) as e:
        raise ValidationError(f"cannot parse the expression {sql!r}: {e}") from None
    if tree is None:
        raise ValidationError(f"cannot parse the expression {sql!r}")
    return tree


def referenced_columns(tree: exp.Expr) -> list[tuple[str | None, str]]:
    """(qualifier or None, column name) of every column the expression reads."""
    return [(c.table or None, c.name) for c in tree.find_all(exp.Column)]


class ArrowEvaluator:
    """Evaluates parsed expressions over rows whose columns ``resolve(qualifier, name)`` gives."""

    def __init__(self, resolve: Resolver, num_rows: int) -> None:
        self.resolve = resolve
        self.num_rows = num_rows

    def evaluate(self, node: exp.Expr) -> Any:
        """An Arrow array (or a pyarrow scalar for constants) of the expression's values."""
        handler = getattr(self, f"_{type(node).__name__}", None)
        if handler is None:
            raise ValidationError(
                f"the expression {node.sql(dialect='spark')!r} uses {type(node).__name__}, which the local "
                "engine does not evaluate; see docs/row-level-operations.md for the supported subset, "
                "or run the statement through SQL (Spark)"
            )
        return handler(node)

    def array(self, node: exp.Expr) -> pa.Array | pa.ChunkedArray:
        """The expression's values as an array of num_rows (constants broadcast)."""
        value = self.evaluate(node)
        if isinstance(value, pa.Scalar):
            if not value.is_valid and value.type == pa.null():
                return pa.nulls(self.num_rows)
            return pa.array([value.as_py()] * self.num_rows, value.type) if self.num_rows else \
                pa.array([], value.type)
        return value

    def mask(self, node: exp.Expr) -> pa.Array:
        """A boolean mask, true only where the condition is true (NULL counts as false)."""
        values = self.array(node)
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if values.type == pa.null():
            return pa.array([False] * self.num_rows)
        if not pa.types.is_boolean(values.type):
            raise ValidationError(f"the condition {node.sql(dialect='spark')!r} is not a boolean expression")
        return pc.fill_null(values, False)

    # -- leaves -----------------------------------------------------------------------------------
    def _Column(self, node: exp.Column) -> Any:
        return self.resolve(node.table or None, node.name)

    def _Identifier(self, node: exp.Identifier) -> Any:
        return self.resolve(None, node.name)

    def _Literal(self, node: exp.Literal) -> Any:
        if node.is_string:
            return pa.scalar(node.this, pa.string())
        text = node.this
        if any(ch in text.lower() for ch in ".e"):
            if "e" in text.lower():
                return pa.scalar(float(text), pa.float64())
            d = Decimal(text)
            exponent = d.as_tuple().exponent
            scale = -exponent if isinstance(exponent, int) else 0
            precision = max(len(d.as_tuple().digits), scale + 1)
            return pa.scalar(d, pa.decimal128(min(38, precision), scale))
        value = int(text)
        return pa.scalar(value, pa.int32() if -(2**31) <= value < 2**31 else pa.int64())

    def _Boolean(self, node: exp.Boolean) -> Any:
        return pa.scalar(bool(node.this), pa.bool_())

    def _Null(self, node: exp.Null) -> Any:
        return pa.scalar(None, pa.null())

    def _Paren(self, node: exp.Paren) -> Any:
        return self.evaluate(node.this)

    # -- arithmetic and logic -----------------------------------------------------------------------
    def _binary(self, node: exp.Binary, fn: Callable[[Any, Any], Any]) -> Any:
        left, right = _unify(self.evaluate(node.left), self.evaluate(node.right))
        try:
            return fn(left, right)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise ValidationError(f"cannot evaluate {node.sql(dialect='spark')!r}: {e}") from None

    def _Add(self, node: exp.Add) -> Any:
        return self._binary(node, pc.add_checked)

    def _Sub(self, node: exp.Sub) -> Any:
        return self._binary(node, pc.subtract_checked)

    def _Mul(self, node: exp.Mul) -> Any:
        return self._binary(node, pc.multiply_checked)

    def _Div(self, node: exp.Div) -> Any:
        # SQL's / on integers is a true division (Spark gives a double).
        def divide(a: Any, b: Any) -> Any:
            if pa.types.is_integer(a.type) and pa.types.is_integer(b.type):
                a, b = pc.cast(a, pa.float64()), pc.cast(b, pa.float64())
            return pc.divide(a, b)

        return self._binary(node, divide)

    def _IntDiv(self, node: exp.IntDiv) -> Any:
        return self._binary(node, pc.divide)

    def _Mod(self, node: exp.Mod) -> Any:
        def mod(a: Any, b: Any) -> Any:
            return pc.subtract(a, pc.multiply(pc.divide(a, b), b))

        return self._binary(node, mod)

    def _Neg(self, node: exp.Neg) -> Any:
        return pc.negate_checked(self.evaluate(node.this))

    def _DPipe(self, node: exp.DPipe) -> Any:
        return self._binary(node, lambda a, b: pc.binary_join_element_wise(_text(a), _text(b), ""))

    def _EQ(self, node: exp.EQ) -> Any:
        return self._binary(node, pc.equal)

    def _NEQ(self, node: exp.NEQ) -> Any:
        return self._binary(node, pc.not_equal)

    def _GT(self, node: exp.GT) -> Any:
        return self._binary(node, pc.greater)

    def _GTE(self, node: exp.GTE) -> Any:
        return self._binary(node, pc.greater_equal)

    def _LT(self, node: exp.LT) -> Any:
        return self._binary(node, pc.less)

    def _LTE(self, node: exp.LTE) -> Any:
        return self._binary(node, pc.less_equal)

    def _And(self, node: exp.And) -> Any:
        return self._binary(node, pc.and_kleene)

    def _Or(self, node: exp.Or) -> Any:
        return self._binary(node, pc.or_kleene)

    def _Not(self, node: exp.Not) -> Any:
        return pc.invert(self.evaluate(node.this))

    def _Is(self, node: exp.Is) -> Any:
        if isinstance(node.expression, exp.Null):
            return pc.is_null(self.array(node.this))
        raise ValidationError(f"unsupported IS expression {node.sql(dialect='spark')!r}")

    def _In(self, node: exp.In) -> Any:
        if node.args.get("query") is not None:
            raise ValidationError("IN (subquery) needs Spark: run the statement through SQL")
        values = [self.evaluate(v) for v in node.expressions]
        if any(not isinstance(v, pa.Scalar) for v in values):
            raise ValidationError(f"IN takes constant values: {node.sql(dialect='spark')!r}")
        column = self.array(node.this)
        target = column.type
        try:
            value_set = pa.array([v.as_py() for v in values if v.is_valid], target)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
            raise ValidationError(f"the values of {node.sql(dialect='spark')!r} do not match the column: {e}") \
                from None
        result = pc.is_in(column, value_set=value_set)
        # SQL: NULL IN (...) is NULL.
        return pc.if_else(pc.is_null(column), pa.scalar(None, pa.bool_()), result)

    def _Between(self, node: exp.Between) -> Any:
        value = self.evaluate(node.this)
        low, high = self.evaluate(node.args["low"]), self.evaluate(node.args["high"])
        a, lo = _unify(value, low)
        b, hi = _unify(value, high)
        return pc.and_kleene(pc.greater_equal(a, lo), pc.less_equal(b, hi))

    def _Like(self, node: exp.Like) -> Any:
        pattern = self.evaluate(node.expression)
        if not isinstance(pattern, pa.Scalar):
            raise ValidationError("LIKE takes a constant pattern")
        return pc.match_like(self.array(node.this), pattern.as_py())

    def _ILike(self, node: exp.ILike) -> Any:
        pattern = self.evaluate(node.expression)
        if not isinstance(pattern, pa.Scalar):
            raise ValidationError("ILIKE takes a constant pattern")
        return pc.match_like(self.array(node.this), pattern.as_py(), ignore_case=True)

    # -- conditionals ---------------------------------------------------------------------------------
    def _Case(self, node: exp.Case) -> Any:
        subject = node.this
        default = node.args.get("default")
        result = self.array(default) if default is not None else None
        for branch in reversed(node.args.get("ifs") or []):
            condition = branch.this
            if subject is not None:
                condition = exp.EQ(this=subject, expression=condition)
            value = self.array(branch.args["true"])
            mask = self.mask(condition)
            if result is None:
                result = pa.nulls(self.num_rows, value.type)
            value, result = _unify(value, result)
            result = pc.if_else(mask, value, result)
        if result is None:
            return pa.nulls(self.num_rows)
        return result

    def _If(self, node: exp.If) -> Any:
        value = self.array(node.args["true"])
        other = node.args.get("false")
        otherwise = self.array(other) if other is not None else pa.nulls(self.num_rows, value.type)
        value, otherwise = _unify(value, otherwise)
        return pc.if_else(self.mask(node.this), value, otherwise)

    def _Coalesce(self, node: exp.Coalesce) -> Any:
        values = [self.array(node.this), *(self.array(e) for e in node.expressions)]
        first = values[0]
        unified = [first, *(_unify(first, v)[1] for v in values[1:])]
        return pc.coalesce(*unified)

    def _Nullif(self, node: exp.Nullif) -> Any:
        value = self.array(node.this)
        other = self.evaluate(node.expression)
        a, b = _unify(value, other)
        return pc.if_else(pc.fill_null(pc.equal(a, b), False), pa.scalar(None, value.type), value)

    def _Cast(self, node: exp.Cast) -> Any:
        target = type_to_arrow(parse_sql_type(node.to.sql(dialect="spark")))
        value = self.evaluate(node.this)
        if isinstance(value, pa.Scalar) and pa.types.is_string(value.type) and value.is_valid:
            parsed = _parse_temporal(value.as_py(), target)
            if parsed is not None:
                return pa.scalar(parsed, target)
        try:
            return pc.cast(value, target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise ValidationError(f"cannot evaluate {node.sql(dialect='spark')!r}: {e}") from None

    def _TryCast(self, node: exp.TryCast) -> Any:
        return self._Cast(node)

    # -- functions ---------------------------------------------------------------------------------------
    def _Upper(self, node: exp.Upper) -> Any:
        return pc.utf8_upper(self.evaluate(node.this))

    def _Lower(self, node: exp.Lower) -> Any:
        return pc.utf8_lower(self.evaluate(node.this))

    def _Length(self, node: exp.Length) -> Any:
        return pc.utf8_length(self.evaluate(node.this))

    def _Trim(self, node: exp.Trim) -> Any:
        position = (node.args.get("position") or "").upper()
        value = self.evaluate(node.this)
        if position == "LEADING":
            return pc.utf8_ltrim_whitespace(value)
        if position == "TRAILING":
            return pc.utf8_rtrim_whitespace(value)
        return pc.utf8_trim_whitespace(value)

    def _Abs(self, node: exp.Abs) -> Any:
        return pc.abs_checked(self.evaluate(node.this))

    def _Round(self, node: exp.Round) -> Any:
        digits = node.args.get("decimals")
        n = self.evaluate(digits).as_py() if digits is not None else 0
        return pc.round(self.evaluate(node.this), ndigits=int(n), round_mode="half_up")

    def _Concat(self, node: exp.Concat) -> Any:
        parts = [_text(self.evaluate(e)) for e in node.expressions]
        if len(parts) == 1:
            return parts[0]
        return pc.binary_join_element_wise(*parts, "")

    def _Substring(self, node: exp.Substring) -> Any:
        start = self.evaluate(node.args["start"]).as_py()
        length = node.args.get("length")
        begin = max(0, int(start) - 1)
        stop = begin + int(self.evaluate(length).as_py()) if length is not None else None
        return pc.utf8_slice_codeunits(self.evaluate(node.this), start=begin, stop=stop)

    def _Greatest(self, node: exp.Greatest) -> Any:
        values = [self.array(node.this), *(self.array(e) for e in node.expressions)]
        return pc.max_element_wise(*[_unify(values[0], v)[1] for v in values], skip_nulls=False)

    def _Least(self, node: exp.Least) -> Any:
        values = [self.array(node.this), *(self.array(e) for e in node.expressions)]
        return pc.min_element_wise(*[_unify(values[0], v)[1] for v in values], skip_nulls=False)

    def _Anonymous(self, node: exp.Anonymous) -> Any:
        name = node.name.lower()
        args = [self.evaluate(e) for e in node.expressions]
        if name in ("ltrim", "rtrim") and len(args) == 1:
            return pc.utf8_ltrim_whitespace(args[0]) if name == "ltrim" else pc.utf8_rtrim_whitespace(args[0])
        raise ValidationError(
            f"function {node.name}() is one the local engine does not evaluate; see docs/row-level-operations.md "
            "for the supported subset, or run the statement through SQL (Spark)"
        )

    def _Subquery(self, node: exp.Subquery) -> Any:
        raise ValidationError("subqueries need Spark: run the statement through SQL")

    def _Exists(self, node: exp.Exists) -> Any:
        raise ValidationError("EXISTS needs Spark: run the statement through SQL")


def _text(value: Any) -> Any:
    if isinstance(value, pa.Scalar):
        return pa.scalar(None if not value.is_valid else str(value.as_py()), pa.string()) \
            if not pa.types.is_string(value.type) else value
    if pa.types.is_string(value.type) or pa.types.is_large_string(value.type):
        return value
    return pc.cast(value, pa.string())


def _parse_temporal(text: str, target: pa.DataType) -> Any:
    try:
        if pa.types.is_date(target):
            return datetime.date.fromisoformat(text.strip())
        if pa.types.is_timestamp(target):
            value = datetime.datetime.fromisoformat(text.strip())
            if target.tz is not None and value.tzinfo is None:
                value = value.replace(tzinfo=datetime.UTC)
            return value
    except ValueError:
        raise ValidationError(f"{text!r} is not a valid {target}") from None
    return None


def _unify(a: Any, b: Any) -> tuple[Any, Any]:
    """Cast a literal to its partner's type so that comparisons and arithmetic line up."""
    ta, tb = a.type, b.type
    if ta == tb:
        return a, b
    if ta == pa.null():
        return (pa.scalar(None, tb) if isinstance(a, pa.Scalar) else pa.nulls(len(a), tb)), b
    if tb == pa.null():
        return a, (pa.scalar(None, ta) if isinstance(b, pa.Scalar) else pa.nulls(len(b), ta))
    if isinstance(b, pa.Scalar) and not isinstance(a, pa.Scalar):
        converted = _convert_scalar(b, ta)
        if converted is not None:
            return a, converted
    if isinstance(a, pa.Scalar) and not isinstance(b, pa.Scalar):
        converted = _convert_scalar(a, tb)
        if converted is not None:
            return converted, b
    return a, b


def _convert_scalar(value: pa.Scalar, target: pa.DataType) -> pa.Scalar | None:
    if pa.types.is_string(value.type) and (pa.types.is_date(target) or pa.types.is_timestamp(target)):
        parsed = _parse_temporal(value.as_py(), target) if value.is_valid else None
        return pa.scalar(parsed, target)
    numeric = (pa.types.is_integer(value.type) or pa.types.is_floating(value.type) or pa.types.is_decimal(value.type))
    target_numeric = pa.types.is_integer(target) or pa.types.is_floating(target) or pa.types.is_decimal(target)
    if numeric and target_numeric:
        if pa.types.is_integer(target) and not pa.types.is_integer(value.type):
            return None  # 1.5 compared with an int column: let pyarrow promote the column
        try:
            return pc.cast(value, target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
    return None
