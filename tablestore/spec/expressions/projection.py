"""Inclusive projection of a row filter onto partition values, as in Iceberg's ProjectionUtil.

A row filter on source columns becomes a filter on partition fields that is true for every
partition that may hold a matching row: ``ts < '2024-03-01T00:00'`` becomes
``ts_day <= 2024-02-29``, ``id = 7`` becomes ``id_bucket = bucket(7)``, and a predicate that
cannot be projected (``id > 7`` through a bucket) becomes TRUE.

The result is bound to the partition fields: each predicate's ``field`` is a NestedField with
the partition field's id, name and result type, so the evaluators find its value by position.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Protocol

from tablestore.spec.expressions.bound_predicates import (
    BoundLiteralPredicate,
    BoundPredicate,
    BoundSetPredicate,
    make_bound,
)
from tablestore.spec.expressions.expression_tree import (
    AlwaysTrue,
    And,
    BooleanExpression,
    BoundReference,
    Or,
    rewrite_not,
)
from tablestore.spec.partitioning.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import (
    BinaryType,
    DecimalType,
    IcebergType,
    NestedField,
    StringType,
)


class PartitionFieldLike(Protocol):
    """What the evaluators read of a partitioning.PartitionField (read-only, so frozen fits)."""

    @property
    def source_id(self) -> int: ...

    @property
    def field_id(self) -> int: ...

    @property
    def transform(self) -> Transform: ...

    @property
    def name(self) -> str: ...


class PartitionSpecLike(Protocol):
    @property
    def fields(self) -> Sequence[PartitionFieldLike]: ...


_TIME_TRANSFORMS = (YearTransform, MonthTransform, DayTransform, HourTransform)


class PartitionFields:
    """The partition fields of a spec as bindable columns: NestedFields with the result types."""

    def __init__(self, spec: PartitionSpecLike, schema: Schema) -> None:
        self.spec = spec
        self.positions: dict[int, int] = {}
        self.refs: list[BoundReference | None] = []
        self.sources: dict[int, list[tuple[PartitionFieldLike, BoundReference]]] = {}
        for pos, pf in enumerate(spec.fields):
            source = schema.find_field(pf.source_id) if schema.has_field(pf.source_id) else None
            if source is None or not pf.transform.can_transform(source.field_type):
                # The source column was dropped: no filter on the current schema can refer to it.
                self.refs.append(None)
                continue
            result = NestedField(pf.field_id, pf.name, pf.transform.result_type(source.field_type), False)
            ref = BoundReference(result, (pf.name,))
            self.refs.append(ref)
            self.positions[pf.field_id] = pos
            self.sources.setdefault(pf.source_id, []).append((pf, ref))


def project(fields: PartitionFields, bound_expr: BooleanExpression) -> BooleanExpression:
    """The inclusive projection of a bound row filter onto the partition fields."""
    return _project(fields, rewrite_not(bound_expr))


def _project(fields: PartitionFields, expr: BooleanExpression) -> BooleanExpression:
    if isinstance(expr, And):
        return And(_project(fields, expr.left), _project(fields, expr.right))
    if isinstance(expr, Or):
        return Or(_project(fields, expr.left), _project(fields, expr.right))
    if isinstance(expr, BoundPredicate):
        result: BooleanExpression = AlwaysTrue()
        # Several partition fields on one source (day(ts) and hour(ts)) each narrow the set.
        for pf, ref in fields.sources.get(expr.field_id, ()):
            projected = project_predicate(pf.transform, ref, expr)
            if projected is not None:
                result = And(result, projected)
        return result
    return expr  # AlwaysTrue / AlwaysFalse


def project_predicate(
    transform: Transform, ref: BoundReference, pred: BoundPredicate
) -> BooleanExpression | None:
    """The predicate on the partition field ``ref``, or None when it cannot be projected."""
    source_type = pred.field.field_type
    op = pred.op
    if isinstance(transform, IdentityTransform):
        return make_bound(op, ref, _value_of(pred))
    if op in ("is_null", "not_null"):
        # Every transform but void maps null to null and other values to non-null values.
        return None if not isinstance(transform, (BucketTransform, TruncateTransform, *_TIME_TRANSFORMS)) \
            else make_bound(op, ref)
    if isinstance(transform, BucketTransform):
        if op == "eq":
            assert isinstance(pred, BoundLiteralPredicate)
            return make_bound("eq", ref, transform.apply(pred.literal, source_type))
        if op == "in":
            assert isinstance(pred, BoundSetPredicate)
            return make_bound("in", ref, {transform.apply(v, source_type) for v in pred.literals})
        return None  # order and inequality are lost by hashing
    if isinstance(transform, TruncateTransform):
        if isinstance(source_type, (StringType, BinaryType)):
            return _truncate_array(transform, ref, pred)
        return _truncate_number(transform, ref, pred, source_type)
    if isinstance(transform, _TIME_TRANSFORMS):
        return _fix_time_projection(_truncate_number(transform, ref, pred, source_type))
    return None  # void, or a transform we do not know


def _value_of(pred: BoundPredicate) -> Any:
    if isinstance(pred, BoundSetPredicate):
        return pred.literals
    if isinstance(pred, BoundLiteralPredicate):
        return pred.literal
    return None


def _step(source_type: IcebergType) -> Any:
    """The distance between adjacent values of an ordered discrete type."""
    if isinstance(source_type, DecimalType):
        return Decimal(1).scaleb(-source_type.scale)
    return 1  # ints, longs, dates (days), times and timestamps (ticks)


def _truncate_number(
    transform: Transform, ref: BoundReference, pred: BoundPredicate, source_type: IcebergType
) -> BooleanExpression | None:
    """Projection through an order-preserving transform of a discrete type (ProjectionUtil)."""
    op = pred.op

    def apply(v: Any) -> Any:
        return transform.apply(v, source_type)

    if op == "in":
        assert isinstance(pred, BoundSetPredicate)
        return make_bound("in", ref, {apply(v) for v in pred.literals})
    if not isinstance(pred, BoundLiteralPredicate):
        return None
    value = pred.literal
    if op == "lt":
        # x < v is x <= v - 1, and f(x) <= f(v - 1) for monotonic f.
        return make_bound("lt_eq", ref, apply(value - _step(source_type)))
    if op == "lt_eq":
        return make_bound("lt_eq", ref, apply(value))
    if op == "gt":
        return make_bound("gt_eq", ref, apply(value + _step(source_type)))
    if op == "gt_eq":
        return make_bound("gt_eq", ref, apply(value))
    if op == "eq":
        return make_bound("eq", ref, apply(value))
    return None  # !=, NOT IN: other values may share the partition


def _truncate_array(
    transform: TruncateTransform, ref: BoundReference, pred: BoundPredicate
) -> BooleanExpression | None:
    """Projection through truncate of a string or binary, where truncation keeps a prefix."""
    op = pred.op
    source_type = pred.field.field_type

    def apply(v: Any) -> Any:
        return transform.apply(v, source_type)

    if op == "in":
        assert isinstance(pred, BoundSetPredicate)
        return make_bound("in", ref, {apply(v) for v in pred.literals})
    if not isinstance(pred, BoundLiteralPredicate):
        return None
    value = pred.literal
    if op in ("lt", "lt_eq"):
        return make_bound("lt_eq", ref, apply(value))
    if op in ("gt", "gt_eq"):
        return make_bound("gt_eq", ref, apply(value))
    if op == "eq":
        return make_bound("eq", ref, apply(value))
    if op == "starts_with":
        # A value with the prefix truncates to something starting with the truncated prefix.
        return make_bound("starts_with", ref, apply(value))
    if op == "not_starts_with":
        # Truncated values keep the first `width` characters: a prefix no longer than that
        # decides the same on the truncated value; a longer one cannot be decided.
        if len(value) < transform.width:
            return make_bound("not_starts_with", ref, value)
        if len(value) == transform.width:
            return make_bound("not_eq", ref, value)
        return None
    return None


def _fix_time_projection(projected: BooleanExpression | None) -> BooleanExpression | None:
    """Widen projections for pre-1970 values written by writers with Iceberg's old time bug.

    Java Iceberg before 1.0 truncated times before the epoch towards zero, so the partition of
    such a row can be one larger than the correct (floor) value. Like Java's
    ``fixInclusiveTimeProjection`` we accept both, which never rejects a correct partition.
    """
    if not isinstance(projected, (BoundLiteralPredicate, BoundSetPredicate)):
        return projected
    op = projected.op
    if isinstance(projected, BoundSetPredicate):
        if op != "in" or not any(v < 0 for v in projected.literals):
            return projected
        widened = projected.literals | {v + 1 for v in projected.literals if v < 0}
        return make_bound("in", projected.term, widened)
    value = projected.literal
    if value >= 0:
        return projected
    if op in ("lt", "lt_eq"):
        return make_bound(op, projected.term, value + 1)
    if op == "eq":
        return make_bound("in", projected.term, {value, value + 1})
    return projected


__all__ = ["PartitionFieldLike", "PartitionFields", "PartitionSpecLike", "project", "project_predicate"]
