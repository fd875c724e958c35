"""Bound filters as ``pyarrow.compute.Expression`` s, to filter Arrow tables and Parquet scans.

The expression selects exactly the rows for which the SQL filter is true (see the semantics in
:mod:`tablestore.spec.expressions.expression_tree`); rows where it is false or unknown give false or null,
which ``Table.filter`` and dataset scans both drop.
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tablestore.errors import FilterError
from tablestore.spec.expressions.bound_predicates import (
    BoundLiteralPredicate,
    BoundPredicate,
    BoundSetPredicate,
)
from tablestore.spec.expressions.expression_tree import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    Or,
    UnboundPredicate,
    rewrite_not,
)
from tablestore.spec.schemas.schema import Schema, primitive_to_arrow
from tablestore.spec.schemas.types import DoubleType, FloatType, IcebergType, NestedField, StructType


def _literal_bool(value: bool) -> pc.Expression:
    # Built on use: pc.scalar imports pandas, which costs seconds at import time.
    return pc.scalar(value)


def to_arrow_expression(bound_expr: BooleanExpression, schema: Schema) -> pc.Expression:
    """The filter on the column names of ``schema``, matching columns by field id.

    ``schema`` may differ from the one the filter was bound to (a data file's own schema with
    other names after a rename): columns are looked up by field id. A column the schema does
    not have is treated as all nulls, which is what reading such a file yields.
    """
    paths = _paths_by_id(schema)
    return _convert(rewrite_not(bound_expr), paths)


def _paths_by_id(schema: Schema) -> dict[int, tuple[tuple[str, ...], IcebergType]]:
    out: dict[int, tuple[tuple[str, ...], IcebergType]] = {}

    def walk(fields: tuple[NestedField, ...], prefix: tuple[str, ...]) -> None:
        for f in fields:
            path = (*prefix, f.name)
            out[f.field_id] = (path, f.field_type)
            if isinstance(f.field_type, StructType):
                walk(f.field_type.fields, path)

    walk(schema.fields, ())
    return out


def _convert(expr: BooleanExpression, paths: dict[int, tuple[tuple[str, ...], IcebergType]]) -> pc.Expression:
    if isinstance(expr, AlwaysTrue):
        return _literal_bool(True)
    if isinstance(expr, AlwaysFalse):
        return _literal_bool(False)
    if isinstance(expr, And):
        return _convert(expr.left, paths) & _convert(expr.right, paths)
    if isinstance(expr, Or):
        return _convert(expr.left, paths) | _convert(expr.right, paths)
    if isinstance(expr, BoundPredicate):
        found = paths.get(expr.field_id)
        if found is None:
            return _on_missing_column(expr)
        path, file_type = found
        return _predicate(expr, path, file_type)
    if isinstance(expr, UnboundPredicate):
        raise FilterError(f"the filter is not bound ({expr}); call bind(schema, expr) first")
    raise FilterError(f"cannot turn {expr!r} into an Arrow expression")


def _on_missing_column(pred: BoundPredicate) -> pc.Expression:
    # Every value is null: only IS NULL and NOT isnan hold (isnan(NULL) is false).
    return _literal_bool(True) if pred.op in ("is_null", "not_nan") else _literal_bool(False)


def _predicate(pred: BoundPredicate, path: tuple[str, ...], file_type: IcebergType) -> pc.Expression:
    column = pc.field(*path)
    bound_type = pred.field.field_type
    is_float = any(isinstance(t, (FloatType, DoubleType)) for t in (file_type, bound_type))
    if is_float:
        # Compare in double precision: literals are Python floats, and is_in would otherwise
        # round the value set to float32.
        column = column.cast(pa.float64())
    op = pred.op
    if op == "is_null":
        return column.is_null()
    if op == "not_null":
        return column.is_valid()
    if op == "is_nan":
        return pc.is_nan(column) & column.is_valid() if is_float else _literal_bool(False)
    if op == "not_nan":
        return ~pc.is_nan(column) | column.is_null() if is_float else _literal_bool(True)
    if isinstance(pred, BoundSetPredicate):
        literals = [_python_value(bound_type, v) for v in pred.literals]
        if is_float and any(v == 0 for v in literals):
            # is_in hashes -0.0 and 0.0 apart; = (and the metrics evaluators) hold them equal.
            literals += [0.0, -0.0]
        values = pa.array(literals, _arrow_type(bound_type))
        matches = pc.is_in(column, value_set=values)
        if op == "in":
            return matches
        # is_in is false (not null) for nulls; NOT IN must not select them.
        return ~matches & column.is_valid()
    assert isinstance(pred, BoundLiteralPredicate)
    if op == "starts_with":
        return pc.starts_with(column, pattern=pred.literal)
    if op == "not_starts_with":
        return ~pc.starts_with(column, pattern=pred.literal)
    value = pa.scalar(_python_value(bound_type, pred.literal), _arrow_type(bound_type))
    if op == "eq":
        return column == value
    if op == "not_eq":
        return column != value
    if op == "lt":
        return column < value
    if op == "lt_eq":
        return column <= value
    if op == "gt":
        result = column > value
    elif op == "gt_eq":
        result = column >= value
    else:
        raise FilterError(f"unknown predicate {op!r}")
    # NaN sorts above every value, so it is greater than any (non-NaN) literal.
    return result | pc.is_nan(column) if is_float else result


def _arrow_type(t: IcebergType) -> pa.DataType:
    if isinstance(t, (FloatType, DoubleType)):
        return pa.float64()
    return primitive_to_arrow(t)


def _python_value(t: IcebergType, value: Any) -> Any:
    # Internal values are what pa.scalar takes for the Arrow type (days for date32, ticks for
    # timestamps and times), except UUIDs, which Arrow stores as their 16 bytes.
    if isinstance(value, uuid.UUID):
        return value.bytes
    return value


__all__ = ["to_arrow_expression"]
