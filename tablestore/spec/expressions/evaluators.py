"""Deciding from metadata which manifests, partitions and files a filter can skip.

Every evaluator here is *inclusive*: ``eval`` returns False only when no row can match the
filter, under the semantics of :mod:`tablestore.spec.expressions.expression_tree` (SQL three-valued logic;
NaN above every value and equal to itself). Filters are bound and NOT-free before evaluation,
so "unknown" and "false" can be treated alike.

* :class:`InclusiveMetricsEvaluator` uses a data file's column statistics.
* :class:`PartitionEvaluator` projects the filter onto a partition spec and tests one
  partition tuple.
* :class:`ManifestEvaluator` tests the same projection against a manifest's partition summaries.
* :class:`ResidualEvaluator` gives what remains of the filter for the rows of one partition.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from tablestore.spec.expressions.binding import bind
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
    BoundExpression,
    Or,
)
from tablestore.spec.expressions.projection import PartitionFields, PartitionSpecLike, project, project_predicate
from tablestore.spec.partitioning.transforms import IdentityTransform
from tablestore.spec.schemas.conversions import from_bytes
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import DoubleType, FloatType, IcebergType, LongType

# Beyond this many IN values, checking each against the bounds costs more than it saves.
IN_PREDICATE_LIMIT = 200


# Read-only protocols, so that frozen dataclasses and plain ones both satisfy them.


class DataFileStats(Protocol):
    """The column statistics of a data file (tablestore.spec.manifests.manifest.DataFile has them)."""

    @property
    def record_count(self) -> int: ...

    @property
    def value_counts(self) -> Mapping[int, int] | None: ...

    @property
    def null_value_counts(self) -> Mapping[int, int] | None: ...

    @property
    def nan_value_counts(self) -> Mapping[int, int] | None: ...

    @property
    def lower_bounds(self) -> Mapping[int, bytes] | None: ...

    @property
    def upper_bounds(self) -> Mapping[int, bytes] | None: ...


class FieldSummaryLike(Protocol):
    @property
    def contains_null(self) -> bool: ...

    @property
    def contains_nan(self) -> bool | None: ...

    @property
    def lower_bound(self) -> bytes | None: ...

    @property
    def upper_bound(self) -> bytes | None: ...


class ManifestFileLike(Protocol):
    @property
    def partitions(self) -> Sequence[FieldSummaryLike] | None: ...


# -- value semantics shared by the evaluators ----------------------------------------------


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _equal(a: Any, b: Any) -> bool:
    if _is_nan(a) or _is_nan(b):
        return _is_nan(a) and _is_nan(b)
    return bool(a == b)


def _less(a: Any, b: Any) -> bool:
    """a < b for non-null values, with NaN above everything."""
    if _is_nan(a):
        return False
    if _is_nan(b):
        return True
    return bool(a < b)


def test_value(pred: BoundPredicate, value: Any) -> bool:
    """Whether the predicate is true for one value (None is null)."""
    op = pred.op
    if op == "is_null":
        return value is None
    if op == "not_null":
        return value is not None
    if op == "is_nan":
        return _is_nan(value)
    if op == "not_nan":
        return not _is_nan(value)
    if value is None:
        return False  # every comparison with null is unknown
    if isinstance(pred, BoundSetPredicate):
        found = any(_equal(value, v) for v in pred.literals)
        return found if op == "in" else not found
    assert isinstance(pred, BoundLiteralPredicate)
    lit = pred.literal
    if op == "eq":
        return _equal(value, lit)
    if op == "not_eq":
        return not _equal(value, lit)
    if op == "lt":
        return _less(value, lit)
    if op == "lt_eq":
        return _less(value, lit) or _equal(value, lit)
    if op == "gt":
        return _less(lit, value)
    if op == "gt_eq":
        return _less(lit, value) or _equal(value, lit)
    if op == "starts_with":
        return bool(value.startswith(lit))
    if op == "not_starts_with":
        return not value.startswith(lit)
    raise ValueError(f"unknown predicate {op!r}")


def evaluate(expr: BooleanExpression, value_of: Callable[[BoundPredicate], Any]) -> bool:
    """Evaluate a bound, NOT-free filter; ``value_of`` gives each predicate's column value."""
    if isinstance(expr, AlwaysTrue):
        return True
    if isinstance(expr, AlwaysFalse):
        return False
    if isinstance(expr, And):
        return evaluate(expr.left, value_of) and evaluate(expr.right, value_of)
    if isinstance(expr, Or):
        return evaluate(expr.left, value_of) or evaluate(expr.right, value_of)
    if isinstance(expr, BoundPredicate):
        return test_value(expr, value_of(expr))
    raise ValueError(f"cannot evaluate {expr!r}; bind it first")


def decode_bound(t: IcebergType, data: bytes | None) -> Any:
    """A bound's value, or None if absent or unreadable (which only costs pruning)."""
    if data is None:
        return None
    try:
        return from_bytes(t, data)
    except Exception:
        # Files written before a type promotion keep the old encoding (int for long, float
        # for double); anything else unreadable is treated as missing.
        try:
            if isinstance(t, LongType) and len(data) == 4:
                return int.from_bytes(data, "little", signed=True)
            if isinstance(t, DoubleType) and len(data) == 4:
                return float(struct.unpack("<f", data)[0])
        except Exception:
            return None
        return None


def _floating(t: IcebergType) -> bool:
    return isinstance(t, (FloatType, DoubleType))


# -- data files ------------------------------------------------------------------------------


class InclusiveMetricsEvaluator:
    """Whether a data file may hold rows matching the filter, from its column statistics."""

    def __init__(
        self, schema: Schema, expr: BooleanExpression, case_sensitive: bool = True,
        include_empty_files: bool = False,
    ) -> None:
        self.expr = bind(schema, expr, case_sensitive)
        self.include_empty_files = include_empty_files

    def eval(self, file: DataFileStats) -> bool:
        if file.record_count == 0 and not self.include_empty_files:
            return False
        if file.record_count is None or file.record_count < 0:
            # Some importers write -1 when they do not know the count; know nothing then.
            return True
        return _MetricsVisit(file).visit(self.expr)


class _MetricsVisit:
    def __init__(self, file: DataFileStats) -> None:
        self.value_counts = file.value_counts or {}
        self.null_counts = file.null_value_counts or {}
        self.nan_counts = file.nan_value_counts or {}
        self.lower_bounds = file.lower_bounds or {}
        self.upper_bounds = file.upper_bounds or {}

    def visit(self, expr: BooleanExpression) -> bool:
        if isinstance(expr, AlwaysTrue):
            return True
        if isinstance(expr, AlwaysFalse):
            return False
        if isinstance(expr, And):
            return self.visit(expr.left) and self.visit(expr.right)
        if isinstance(expr, Or):
            return self.visit(expr.left) or self.visit(expr.right)
        if isinstance(expr, BoundPredicate):
            return self.predicate(expr)
        return True

    def nulls_only(self, field_id: int) -> bool:
        values, nulls = self.value_counts.get(field_id), self.null_counts.get(field_id)
        return values is not None and nulls is not None and values == nulls

    def nans_only(self, field_id: int) -> bool:
        values, nans = self.value_counts.get(field_id), self.nan_counts.get(field_id)
        return bool(values) and nans == values

    def may_have_nan(self, pred: BoundPredicate) -> bool:
        return _floating(pred.field.field_type) and self.nan_counts.get(pred.field_id) != 0

    def lower(self, pred: BoundPredicate) -> Any:
        return decode_bound(pred.field.field_type, self.lower_bounds.get(pred.field_id))

    def upper(self, pred: BoundPredicate) -> Any:
        return decode_bound(pred.field.field_type, self.upper_bounds.get(pred.field_id))

    def predicate(self, pred: BoundPredicate) -> bool:
        fid = pred.field_id
        op = pred.op
        if op == "is_null":
            return self.null_counts.get(fid) != 0
        if self.nulls_only(fid):
            # Every other predicate is false or unknown on null, except NOT isnan (true).
            return op == "not_nan"
        if op == "not_null":
            return True
        if op == "is_nan":
            return self.nan_counts.get(fid) != 0
        if op == "not_nan":
            return not self.nans_only(fid)
        if op in ("gt", "gt_eq", "not_eq", "not_in") and self.may_have_nan(pred):
            return True  # NaN is greater than and different from every literal
        if op in ("not_eq", "not_in"):
            # Bounds need not be actual values, so they cannot prove that every row equals x.
            return True
        if self.nans_only(fid):
            return False  # <, <=, =, IN and prefixes never hold for NaN
        return _range_may_match(pred, self.lower(pred), self.upper(pred))


def _range_may_match(pred: BoundPredicate, lower: Any, upper: Any) -> bool:
    """Whether a value between ``lower`` and ``upper`` (None: unbounded) may satisfy ``pred``, a
    comparison, IN or prefix predicate; the file and the manifest evaluators share this."""
    op = pred.op
    if _is_nan(lower) or _is_nan(upper):
        return True  # old writers put NaN into bounds; then they prove nothing
    if isinstance(pred, BoundSetPredicate):  # IN
        if len(pred.literals) > IN_PREDICATE_LIMIT:
            return True
        return any((lower is None or not _less(v, lower)) and (upper is None or not _less(upper, v))
                   for v in pred.literals)
    assert isinstance(pred, BoundLiteralPredicate)
    lit = pred.literal
    if op == "lt":
        return lower is None or _less(lower, lit)
    if op == "lt_eq":
        return lower is None or not _less(lit, lower)
    if op == "gt":
        return upper is None or _less(lit, upper)
    if op == "gt_eq":
        return upper is None or not _less(upper, lit)
    if op == "eq":
        return (lower is None or not _less(lit, lower)) and (upper is None or not _less(upper, lit))
    if op == "starts_with":
        return _may_start_with(lower, upper, lit)
    if op == "not_starts_with":
        return not _all_start_with(lower, upper, lit)
    return True


def _may_start_with(lower: Any, upper: Any, prefix: Any) -> bool:
    # Bounds may be truncated; comparing only their first len(prefix) characters stays valid.
    n = len(prefix)
    if lower is not None and lower[:n] > prefix:
        return False
    return not (upper is not None and upper[:n] < prefix)


def _all_start_with(lower: Any, upper: Any, prefix: Any) -> bool:
    # Values starting with a prefix form one contiguous range, so if both bounds start with it
    # every value between them does.
    if lower is None or upper is None:
        return False
    return bool(lower.startswith(prefix) and upper.startswith(prefix))


# -- partitions ------------------------------------------------------------------------------


class PartitionEvaluator:
    """Whether a partition (a tuple of partition values) may hold rows matching the filter."""

    def __init__(
        self, spec: PartitionSpecLike, schema: Schema, expr: BooleanExpression, case_sensitive: bool = True
    ) -> None:
        self.fields = PartitionFields(spec, schema)
        self.expr = project(self.fields, bind(schema, expr, case_sensitive))

    def eval(self, partition: Sequence[Any]) -> bool:
        positions = self.fields.positions

        def value_of(pred: BoundPredicate) -> Any:
            pos = positions[pred.field_id]
            return partition[pos] if pos < len(partition) else None

        return evaluate(self.expr, value_of)


class ManifestEvaluator:
    """Whether a manifest may list files matching the filter, from its partition summaries."""

    def __init__(
        self, spec: PartitionSpecLike, schema: Schema, expr: BooleanExpression, case_sensitive: bool = True
    ) -> None:
        self.fields = PartitionFields(spec, schema)
        self.expr = project(self.fields, bind(schema, expr, case_sensitive))

    def eval(self, manifest_file: ManifestFileLike) -> bool:
        if isinstance(self.expr, AlwaysTrue):
            return True
        summaries = manifest_file.partitions
        if summaries is None:
            return True
        return self._visit(self.expr, summaries)

    def _visit(self, expr: BooleanExpression, summaries: Sequence[FieldSummaryLike]) -> bool:
        if isinstance(expr, AlwaysTrue):
            return True
        if isinstance(expr, AlwaysFalse):
            return False
        if isinstance(expr, And):
            return self._visit(expr.left, summaries) and self._visit(expr.right, summaries)
        if isinstance(expr, Or):
            return self._visit(expr.left, summaries) or self._visit(expr.right, summaries)
        if isinstance(expr, BoundPredicate):
            pos = self.fields.positions[expr.field_id]
            return pos >= len(summaries) or _summary_may_match(expr, summaries[pos])
        return True


def _summary_may_match(pred: BoundPredicate, summary: FieldSummaryLike) -> bool:
    t = pred.field.field_type
    op = pred.op
    lower = decode_bound(t, summary.lower_bound)
    upper = decode_bound(t, summary.upper_bound)
    contains_nan = summary.contains_nan if _floating(t) else False
    # Bounds cover the non-null, non-NaN values; without them there are none.
    no_values = summary.lower_bound is None and summary.upper_bound is None
    if op == "is_null":
        return summary.contains_null is not False
    if op == "is_nan":
        return contains_nan is not False
    if op == "not_nan":
        # All NaN: NaN seen, no null, no other value.
        return not (contains_nan is True and summary.contains_null is False and no_values)
    if no_values and contains_nan is False:
        return False  # only nulls: nothing but IS NULL and NOT isnan holds
    if op == "not_null":
        return True
    if op in ("gt", "gt_eq", "not_eq", "not_in") and contains_nan is not False:
        return True  # NaN is greater than and different from every literal
    if op in ("not_eq", "not_in"):
        return True
    if no_values:
        return False  # only NaNs and nulls: no <, <=, =, IN or prefix holds
    return _range_may_match(pred, lower, upper)


def _constant(value: Any) -> Callable[[BoundPredicate], Any]:
    def value_of(_pred: BoundPredicate) -> Any:
        return value

    return value_of


# -- residuals -------------------------------------------------------------------------------


class ResidualEvaluator:
    """What is left of a filter for the rows of one partition.

    Predicates on a column with an identity partition field are decided by the partition
    value (all rows of the partition share it) and become TRUE or FALSE; predicates that the
    inclusive projection rules out for this partition become FALSE; the rest remain.
    """

    def __init__(
        self, spec: PartitionSpecLike, schema: Schema, expr: BooleanExpression, case_sensitive: bool = True
    ) -> None:
        self.fields = PartitionFields(spec, schema)
        self.expr = bind(schema, expr, case_sensitive)

    def residual_for(self, partition: Sequence[Any]) -> BoundExpression:
        return self._residual(self.expr, partition)

    def _residual(self, expr: BooleanExpression, partition: Sequence[Any]) -> BooleanExpression:
        if isinstance(expr, And):
            return And(self._residual(expr.left, partition), self._residual(expr.right, partition))
        if isinstance(expr, Or):
            return Or(self._residual(expr.left, partition), self._residual(expr.right, partition))
        if not isinstance(expr, BoundPredicate):
            return expr
        for pf, ref in self.fields.sources.get(expr.field_id, ()):
            pos = self.fields.positions[pf.field_id]
            value = partition[pos] if pos < len(partition) else None
            if isinstance(pf.transform, IdentityTransform):
                return AlwaysTrue() if test_value(expr, value) else AlwaysFalse()
            projected = project_predicate(pf.transform, ref, expr)
            if projected is not None and not evaluate(projected, _constant(value)):
                return AlwaysFalse()
        return expr


__all__ = [
    "IN_PREDICATE_LIMIT", "DataFileStats", "FieldSummaryLike", "InclusiveMetricsEvaluator",
    "ManifestEvaluator", "ManifestFileLike", "PartitionEvaluator", "ResidualEvaluator", "evaluate",
    "test_value",
]
