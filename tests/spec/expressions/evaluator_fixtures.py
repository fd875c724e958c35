"""Shared helpers of the evaluator tests: the schema, files with the statistics a writer computes,
and manifests with partition summaries."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tablestore.spec.manifests.manifest import FieldSummary
from tablestore.spec.schemas.conversions import from_python, to_bytes, truncate_lower_bound, truncate_upper_bound
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

SCHEMA = Schema((
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "i", IntegerType()),
    NestedField(3, "f", DoubleType()),
    NestedField(4, "g", FloatType()),
    NestedField(5, "s", StringType()),
    NestedField(6, "d", DateType()),
    NestedField(7, "ts", TimestamptzType()),
    NestedField(8, "dec", DecimalType(9, 2)),
    NestedField(9, "st", StructType(NestedField(10, "a", IntegerType()), NestedField(11, "b", StringType()))),
    NestedField(12, "u", UUIDType()),
    NestedField(13, "flag", BooleanType()),
    NestedField(14, "t", TimeType()),
    NestedField(15, "lt", TimestampType()),
))
NAN = float("nan")


@dataclass
class File:
    record_count: int
    value_counts: dict[int, int] | None = field(default_factory=dict)
    null_value_counts: dict[int, int] | None = field(default_factory=dict)
    nan_value_counts: dict[int, int] | None = field(default_factory=dict)
    lower_bounds: dict[int, bytes] | None = field(default_factory=dict)
    upper_bounds: dict[int, bytes] | None = field(default_factory=dict)


def stats_file(values: dict[int, list[Any]], schema: Schema = SCHEMA, truncate: int | None = None) -> File:
    """Statistics as a writer computes them, from external values per field id."""
    count = len(next(iter(values.values())))
    f = File(count)
    assert f.value_counts is not None and f.null_value_counts is not None and f.nan_value_counts is not None
    assert f.lower_bounds is not None and f.upper_bounds is not None
    for fid, vals in values.items():
        t = schema.find_type(fid)
        internal = [from_python(t, v) for v in vals]
        f.value_counts[fid] = len(vals)
        f.null_value_counts[fid] = sum(v is None for v in internal)
        if isinstance(t, (FloatType, DoubleType)):
            f.nan_value_counts[fid] = sum(v is not None and math.isnan(v) for v in internal)
        real = [v for v in internal if v is not None and not (isinstance(v, float) and math.isnan(v))]
        if real:
            low, high = min(real), max(real)
            if truncate is not None:
                low, high = truncate_lower_bound(t, low, truncate), truncate_upper_bound(t, high, truncate)
            f.lower_bounds[fid] = to_bytes(t, low)
            if high is not None:
                f.upper_bounds[fid] = to_bytes(t, high)
    return f


@dataclass
class Manifest:
    partitions: list[FieldSummary] | None


def summary(t: IcebergType, values: list[Any]) -> FieldSummary:
    real = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return FieldSummary(
        contains_null=any(v is None for v in values),
        contains_nan=any(isinstance(v, float) and math.isnan(v) for v in values)
        if isinstance(t, (FloatType, DoubleType)) else None,
        lower_bound=to_bytes(t, min(real)) if real else None,
        upper_bound=to_bytes(t, max(real)) if real else None,
    )
