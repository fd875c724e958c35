"""Column profiles: one aggregate query per table that Trino and tablestore (SQL on Spark) both
run, so their results can be compared without moving a row out of either engine.

A profile is the row count and, per column, the non-null count and what the column's type
allows to be compared exactly in both engines: min and max of orderable primitives, the sum of
integers and decimals, the summed length of strings, the count of true booleans. Floating sums
are left out (their rounding depends on the order of addition), and so are nested and uuid
columns beyond their non-null count. Values are compared in one canonical form (timestamps in
UTC ISO-8601, decimals as text), so a difference is a different value, never another shape.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable, Sequence
from typing import Any

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
    StringType,
    TimestampType,
    TimestamptzType,
)

_SUMMED = (IntegerType, LongType, DecimalType)
_ORDERED = (IntegerType, LongType, DecimalType, FloatType, DoubleType, StringType, DateType, TimestampType,
            TimestamptzType)


def _aggregates(t: IcebergType, column: str) -> list[tuple[str, str]]:
    """(label, SQL) of the aggregates a column of type ``t`` is profiled by."""
    out = [("count", f"count({column})")]
    if isinstance(t, _ORDERED):
        out += [("min", f"min({column})"), ("max", f"max({column})")]
    if isinstance(t, _SUMMED):
        out.append(("sum", f"sum({column})"))
    if isinstance(t, StringType):
        out.append(("length", f"sum(length({column}))"))
    if isinstance(t, BooleanType):
        out.append(("true", f"count_if({column})"))
    return out


def profile_query(table: str, schema: Schema, quote: Callable[[str], str]) -> tuple[str, list[str]]:
    """The profile query of ``table`` (already qualified and quoted for the engine), and the
    label of each of its result columns (``rows``, ``<column>.<aggregate>``)."""
    labels, expressions = ["rows"], ["count(*)"]
    for field in schema.fields:
        for label, expression in _aggregates(field.field_type, quote(field.name)):
            labels.append(f"{field.name}.{label}")
            expressions.append(expression)
    return f"SELECT {', '.join(expressions)} FROM {table}", labels


def canonical(value: Any) -> Any:
    """A profile value in one form across engines and drivers."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC).replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    return value


def profile(labels: Sequence[str], row: Sequence[Any]) -> dict[str, Any]:
    return {label: canonical(value) for label, value in zip(labels, row, strict=True)}


def differences(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The labels whose values differ: (ours, theirs)."""
    return {k: (ours.get(k), theirs.get(k)) for k in sorted(set(ours) | set(theirs)) if ours.get(k) != theirs.get(k)}


def trino_quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def spark_quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


__all__ = ["canonical", "differences", "profile", "profile_query", "spark_quote", "trino_quote"]
