"""Binding filters to a schema: resolving columns and converting literals.

:func:`bind` pushes every NOT down to the predicates (:func:`rewrite_not`) and binds the
result; each predicate has an exact complement, so bound trees never contain NOT and evaluators
may treat "unknown" like "false". Besides looking up columns this makes
comparisons exact where a naive literal conversion would round or fail:

* ``id < 2.5`` on an int column becomes ``id <= 2``, ``id = 2.5`` becomes FALSE;
* a value beyond the column type's range (``id < 10000000000`` on an int) becomes
  ``id IS NOT NULL`` or FALSE;
* NaN literals on float columns become ``isnan`` predicates;
* NULL in an IN list never matches, and NOT IN with a NULL never holds (SQL).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal, localcontext
from typing import Any

from tablestore.errors import FilterError, ValidationError
from tablestore.spec.expressions.bound_predicates import (
    BoundEqualTo,
    BoundIn,
    BoundIsNaN,
    BoundIsNull,
    BoundNotEqualTo,
    BoundNotIn,
    BoundNotNaN,
    BoundNotNull,
    BoundPredicate,
    make_bound,
)
from tablestore.spec.expressions.expression_tree import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    BoundExpression,
    BoundReference,
    LiteralPredicate,
    Not,
    Or,
    SetPredicate,
    UnboundPredicate,
    check_expression,
    rewrite_not,
)
from tablestore.spec.schemas.conversions import from_python
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import (
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
)


@dataclass(frozen=True)
class _Column:
    ref: BoundReference
    # False when the column or any struct it sits in is optional: then a "required" field is
    # still null in rows where an enclosing struct is null.
    never_null: bool


def _struct_columns(schema: Schema) -> dict[int, _Column]:
    """Every field reachable through structs only; fields in lists and maps cannot be filtered."""
    out: dict[int, _Column] = {}

    def walk(fields: tuple[NestedField, ...], prefix: tuple[str, ...], never_null: bool) -> None:
        for f in fields:
            path = (*prefix, f.name)
            nn = never_null and f.required
            out[f.field_id] = _Column(BoundReference(f, path), nn)
            if isinstance(f.field_type, StructType):
                walk(f.field_type.fields, path, nn)

    walk(schema.fields, (), True)
    return out


def bind(schema: Schema, expr: BooleanExpression, case_sensitive: bool = True) -> BoundExpression:
    """Resolve the columns of ``expr`` and convert its literals; the result has no NOT.

    Raises FilterError for an unknown column (listing the columns), a value that cannot be
    converted to the column's type, or a predicate that does not apply to the column.
    """
    return Binder(schema, case_sensitive).bind(rewrite_not(check_expression(expr)))


class Binder:
    """Binds the predicates of a NOT-free filter to one schema."""

    def __init__(self, schema: Schema, case_sensitive: bool) -> None:
        self.schema = schema
        self.case_sensitive = case_sensitive
        self.columns = _struct_columns(schema)

    def bind(self, expr: BooleanExpression) -> BooleanExpression:
        if isinstance(expr, And):
            return And(self.bind(expr.left), self.bind(expr.right))
        if isinstance(expr, Or):
            return Or(self.bind(expr.left), self.bind(expr.right))
        if isinstance(expr, Not):  # not reached after rewrite_not, kept for safety
            return self.bind(rewrite_not(expr))
        if isinstance(expr, BoundPredicate):
            if self.columns.get(expr.field_id) is None:
                raise FilterError(f"the bound filter {expr} refers to field id {expr.field_id}, "
                                  "which is not in the schema")
            return expr
        if isinstance(expr, UnboundPredicate):
            return self.bind_predicate(expr)
        return expr

    def column(self, name: str) -> _Column:
        field_id = self.schema.find_field_id(name, self.case_sensitive)
        if field_id is None:
            names = [".".join(c.ref.path) for c in self.columns.values()]
            raise FilterError(f"unknown column {name!r} in filter; the columns are: {', '.join(names)}")
        column = self.columns.get(field_id)
        if column is None:
            raise FilterError(f"column {name!r} is inside a list or map; filters can use top-level "
                              "columns and fields of structs only")
        t = column.ref.field.field_type
        if not t.is_primitive:
            raise FilterError(f"column {name!r} has type {t}; filters can only compare primitive columns")
        return column

    def bind_predicate(self, pred: UnboundPredicate) -> BooleanExpression:
        column = self.column(pred.term.name)
        ref = column.ref
        t = ref.field.field_type
        op = pred.op
        if op == "is_null":
            return AlwaysFalse() if column.never_null else BoundIsNull(ref)
        if op == "not_null":
            return AlwaysTrue() if column.never_null else BoundNotNull(ref)
        if op in ("is_nan", "not_nan"):
            if isinstance(t, (FloatType, DoubleType)):
                return make_bound(op, ref)
            # isnan of a non-float value is false, also for null (as in Spark).
            return AlwaysFalse() if op == "is_nan" else AlwaysTrue()
        if isinstance(pred, LiteralPredicate):
            return self.bind_literal(column, op, pred.literal)
        if isinstance(pred, SetPredicate):
            return self.bind_set(column, op, pred.values)
        raise FilterError(f"cannot bind {pred!r}")

    def not_null(self, column: _Column) -> BooleanExpression:
        return AlwaysTrue() if column.never_null else BoundNotNull(column.ref)

    def bind_literal(self, column: _Column, op: str, value: Any) -> BooleanExpression:
        ref = column.ref
        t = ref.field.field_type
        if value is None:
            word = {"eq": "IS NULL", "not_eq": "IS NOT NULL"}.get(op, "IS NULL or IS NOT NULL")
            raise FilterError(f"comparing column {ref.name!r} with NULL is never true; use {word}")
        if op in ("starts_with", "not_starts_with"):
            if not isinstance(t, StringType):
                raise FilterError(f"LIKE needs a string column, but {ref.name!r} has type {t}")
            if not isinstance(value, str):
                raise FilterError(f"the LIKE prefix for column {ref.name!r} must be a string, got {value!r}")
            return make_bound(op, ref, value)
        if isinstance(t, (IntegerType, LongType, DecimalType)) and _is_number(value):
            return self.grid_comparison(column, op, value)
        converted = self.convert(ref, value)
        if isinstance(t, (FloatType, DoubleType)) and _is_nan(converted):
            return self.nan_comparison(column, op)
        return make_bound(op, ref, converted)

    def bind_set(self, column: _Column, op: str, values: tuple[Any, ...]) -> BooleanExpression:
        ref = column.ref
        t = ref.field.field_type
        if any(v is None for v in values):
            if op == "not_in":
                # x NOT IN (.., NULL) is never true: it is false or unknown for every row.
                return AlwaysFalse()
            values = tuple(v for v in values if v is not None)  # x IN (.., NULL): NULL never matches
        has_nan = False
        converted: set[Any] = set()
        for v in values:
            if isinstance(t, (IntegerType, LongType, DecimalType)) and _is_number(v):
                exact = self.grid_value(column, v)
                if exact is not None:  # values the column cannot hold match nothing
                    converted.add(exact)
                continue
            internal = self.convert(ref, v)
            if isinstance(t, (FloatType, DoubleType)) and _is_nan(internal):
                has_nan = True  # NaN equals NaN; an isnan predicate expresses that
            else:
                converted.add(internal)
        if op == "in":
            if not converted:
                result: BooleanExpression = AlwaysFalse()
            elif len(converted) == 1:
                result = BoundEqualTo(ref, next(iter(converted)))
            else:
                result = BoundIn(ref, converted)
            return Or(result, BoundIsNaN(ref)) if has_nan else result
        if not converted:
            result = self.not_null(column)
        elif len(converted) == 1:
            result = BoundNotEqualTo(ref, next(iter(converted)))
        else:
            result = BoundNotIn(ref, converted)
        return And(result, BoundNotNaN(ref)) if has_nan else result

    def convert(self, ref: BoundReference, value: Any) -> Any:
        t = ref.field.field_type
        try:
            return from_python(t, value)
        except (ValidationError, ValueError, TypeError, OverflowError, ArithmeticError) as e:
            raise FilterError(
                f"cannot compare column {ref.name!r} of type {t} with the value {value!r}: {e}"
            ) from e

    def nan_comparison(self, column: _Column, op: str) -> BooleanExpression:
        # NaN is the largest value and equal to itself (see the module docstring).
        ref = column.ref
        if op == "eq":
            return BoundIsNaN(ref)
        if op in ("not_eq", "lt"):
            return And(self.not_null(column), BoundNotNaN(ref))
        if op == "lt_eq":
            return self.not_null(column)
        if op == "gt":
            return AlwaysFalse()
        return BoundIsNaN(ref)  # gt_eq

    def grid_value(self, column: _Column, value: Any) -> Any | None:
        """The internal value equal to ``value``, or None if the column cannot hold it."""
        position = _grid_position(column.ref.field.field_type, value)
        if position is None or position[0] != position[1] or position[2] != 0:
            return None
        return self.convert_exact(column.ref, position[0])

    def convert_exact(self, ref: BoundReference, exact: Decimal) -> Any:
        t = ref.field.field_type
        return self.convert(ref, exact if isinstance(t, DecimalType) else int(exact))

    def grid_comparison(self, column: _Column, op: str, value: Any) -> BooleanExpression:
        """Compare an int or decimal column with a number it may not be able to hold exactly.

        ``id < 2.5`` is ``id <= 2`` and ``id = 2.5`` is false: the comparison is made exact
        instead of rounding the value (or failing), and values beyond the type's range give
        TRUE-for-non-null or FALSE.
        """
        ref = column.ref
        position = _grid_position(ref.field.field_type, value)
        if position is None:  # NaN: no comparison holds except !=
            return self.not_null(column) if op == "not_eq" else AlwaysFalse()
        lo, hi, out_of_range = position
        on_grid = lo == hi
        if op == "eq":
            return make_bound(op, ref, self.convert_exact(ref, lo)) if on_grid and not out_of_range \
                else AlwaysFalse()
        if op == "not_eq":
            return make_bound(op, ref, self.convert_exact(ref, lo)) if on_grid and not out_of_range \
                else self.not_null(column)
        if out_of_range:
            # Above the maximum every value is smaller, below the minimum every value is larger.
            smaller = out_of_range > 0
            return self.not_null(column) if smaller == (op in ("lt", "lt_eq")) else AlwaysFalse()
        if op in ("lt", "lt_eq"):
            new_op = op if on_grid else "lt_eq"
            return make_bound(new_op, ref, self.convert_exact(ref, lo))
        new_op = op if on_grid else "gt_eq"
        return make_bound(new_op, ref, self.convert_exact(ref, hi))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def _is_nan(value: Any) -> bool:
    return (isinstance(value, float) and math.isnan(value)) or (isinstance(value, Decimal) and value.is_nan())


_INT_RANGE: dict[type, tuple[int, int]] = {
    IntegerType: (-(2**31), 2**31 - 1),
    LongType: (-(2**63), 2**63 - 1),
}
# Enough digits for any in-range value of a long or a decimal(38, s).
_WIDE = Context(prec=100)


def _grid_position(t: IcebergType, value: Any) -> tuple[Decimal, Decimal, int] | None:
    """Where ``value`` lies among the values an int, long or decimal column can hold.

    Returns the nearest representable values below and above (equal when exact) and whether
    the value is above (1) or below (-1) the type's range (0 inside); None for NaN.
    """
    d = Decimal(repr(value)) if isinstance(value, float) and math.isfinite(value) else Decimal(value)
    if d.is_nan():
        return None
    if isinstance(t, DecimalType):
        high = Decimal(10**t.precision - 1).scaleb(-t.scale)
        low = -high
        quantum = Decimal(1).scaleb(-t.scale)
    else:
        ilow, ihigh = _INT_RANGE[type(t)]
        low, high = Decimal(ilow), Decimal(ihigh)
        quantum = Decimal(1)
    if d > high:
        return high, high, 1
    if d < low:
        return low, low, -1
    with localcontext(_WIDE):
        lo = d.quantize(quantum, rounding=ROUND_FLOOR)
        hi = d.quantize(quantum, rounding=ROUND_CEILING)
    return lo, hi, 0
