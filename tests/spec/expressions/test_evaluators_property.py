"""Evaluators, property-based: Arrow filtering and pruning by metrics, partitions, manifest summaries
and residuals agree with a pure-Python SQL evaluation."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tablestore.errors import ValidationError
from tablestore.spec.expressions.arrow_filter import to_arrow_expression
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.evaluators import (
    InclusiveMetricsEvaluator,
    ManifestEvaluator,
    PartitionEvaluator,
    ResidualEvaluator,
)
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
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    StartsWith,
    UnboundPredicate,
)
from tablestore.spec.partitioning.partition_spec import PartitionSpec, build_partition_spec
from tablestore.spec.schemas.conversions import from_python
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
)
from tests.spec.expressions.evaluator_fixtures import NAN, File, Manifest, stats_file, summary

PSCHEMA = Schema((
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "i", IntegerType()),
    NestedField(3, "f", DoubleType()),
    NestedField(4, "g", FloatType()),
    NestedField(5, "s", StringType()),
    NestedField(6, "d", DateType()),
    NestedField(7, "ts", TimestampType()),
    NestedField(8, "dec", DecimalType(6, 2)),
    NestedField(9, "b", BooleanType()),
    NestedField(10, "st", StructType(NestedField(11, "a", IntegerType()))),
))
LEAVES = ["i", "f", "g", "s", "d", "ts", "dec", "b", "st.a"]
EPOCH = dt.datetime(1970, 1, 1)
F32 = [-1.5, 0.0, 0.5, 3.0, float(__import__("numpy").float32(0.1))]
FLOATS = [-1.5, -0.0, 0.0, 0.5, 1.0, 2.25, math.inf, -math.inf, NAN]


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "i": st.integers(-6, 6),
    "f": st.sampled_from(FLOATS),
    "g": st.sampled_from([*F32, NAN]),
    "s": st.text(alphabet="ab\u00e9\U0001f600", max_size=3),
    "d": st.integers(-40, 40).map(lambda n: dt.date(1970, 1, 1) + dt.timedelta(days=n)),
    "ts": st.tuples(st.integers(-60, 60), st.sampled_from([0, 1, -1, 1_800_000_000])).map(
        lambda t: EPOCH + dt.timedelta(microseconds=t[0] * 3_600_000_000 + t[1])),
    "dec": st.integers(-300, 300).map(lambda n: Decimal(n).scaleb(-2)),
    "b": st.booleans(),
    "st.a": st.integers(-3, 3),
}
# Values the column cannot hold exactly, or beyond its range, and numbers of other types.
_EXTRA_LITERALS: dict[str, list[Any]] = {
    "i": [Decimal("2.5"), Decimal("-0.5"), 10**10, -(10**10), 2.5],
    "f": [1, Decimal("0.5"), 7.0],
    "g": [0.1, 1, Decimal("0.5")],
    "dec": [Decimal("1.005"), Decimal("-0.001"), 2, 10**6, Decimal("-99999")],
    "st.a": [Decimal("0.5")],
}
LITERALS: dict[str, st.SearchStrategy[Any]] = {
    c: st.one_of(v, st.sampled_from(_EXTRA_LITERALS[c])) if c in _EXTRA_LITERALS else v
    for c, v in VALUES.items()
}
OPTIONAL_VALUES = {c: st.one_of(st.none(), v, v) for c, v in VALUES.items()}  # a third null


@st.composite
def predicates(draw: st.DrawFn, columns: tuple[str, ...]) -> UnboundPredicate:
    column = draw(st.sampled_from(columns))
    kinds = ["cmp", "cmp", "cmp", "in", "null", "nan"] + (["like", "like"] if column == "s" else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "cmp":
        cls = draw(st.sampled_from([EqualTo, NotEqualTo, LessThan, LessThanOrEqual, GreaterThan,
                                    GreaterThanOrEqual]))
        return cls(column, draw(LITERALS[column]))
    if kind == "in":
        element = st.one_of(LITERALS[column], st.none()) if draw(st.booleans()) else LITERALS[column]
        values = draw(st.lists(element, min_size=1, max_size=4))
        return draw(st.sampled_from([In, NotIn]))(column, values)
    if kind == "null":
        return draw(st.sampled_from([IsNull, NotNull]))(column)
    if kind == "nan":
        return draw(st.sampled_from([IsNaN, NotNaN]))(column)
    prefix = draw(st.text(alphabet="ab\u00e9", max_size=2))
    return draw(st.sampled_from([StartsWith, NotStartsWith]))(column, prefix)


def filters(columns: tuple[str, ...] = tuple(LEAVES), max_leaves: int = 6) -> st.SearchStrategy[BooleanExpression]:
    return st.recursive(
        predicates(columns),
        lambda children: st.one_of(
            st.tuples(children, children).map(lambda t: And(*t)),
            st.tuples(children, children).map(lambda t: Or(*t)),
            children.map(Not),
        ),
        max_leaves=max_leaves,
    )


@st.composite
def focused_filters(draw: st.DrawFn) -> BooleanExpression:
    """Mostly small filters on one column, so that pruning decisions are actually exercised."""
    if draw(st.integers(0, 3)) == 0:
        return draw(filters())
    return draw(filters((draw(st.sampled_from(LEAVES)),), max_leaves=3))


_ROW = st.fixed_dictionaries({
    **{c: OPTIONAL_VALUES[c] for c in ("i", "f", "g", "s", "d", "ts", "dec", "b")},
    "st": st.one_of(st.none(), st.fixed_dictionaries({"a": OPTIONAL_VALUES["st.a"]})),
})


@st.composite
def rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    return [{"id": i, **row} for i, row in enumerate(draw(st.lists(_ROW, max_size=10)))]


def _get(row: dict[str, Any], column: str) -> Any:
    value: Any = row
    for part in column.split("."):
        value = None if value is None else value.get(part)
    return value


def _nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _eq(a: Any, b: Any) -> bool:
    return (_nan(a) and _nan(b)) or (not _nan(a) and not _nan(b) and a == b)


def _lt(a: Any, b: Any) -> bool:
    if _nan(a):
        return False
    return True if _nan(b) else bool(a < b)


def _lit(column: str, value: Any) -> Any:
    # Literals take the column's type: numbers become doubles for float columns, as in SQL.
    if value is not None and column in ("f", "g"):
        return float(value)
    return value


def reference(expr: BooleanExpression, row: dict[str, Any]) -> bool | None:
    """SQL three-valued evaluation of an unbound filter on external values (NaN largest)."""
    if isinstance(expr, AlwaysTrue):
        return True
    if isinstance(expr, AlwaysFalse):
        return False
    if isinstance(expr, Not):
        inner = reference(expr.child, row)
        return None if inner is None else not inner
    if isinstance(expr, (And, Or)):
        left, right = reference(expr.left, row), reference(expr.right, row)
        stop = isinstance(expr, Or)  # the value that decides: True for OR, False for AND
        if left is stop or right is stop:
            return stop
        return None if left is None or right is None else not stop
    assert isinstance(expr, UnboundPredicate)
    column = expr.term.name
    v = _get(row, column)
    if isinstance(expr, IsNull):
        return v is None
    if isinstance(expr, NotNull):
        return v is not None
    if isinstance(expr, IsNaN):
        return _nan(v)
    if isinstance(expr, NotNaN):
        return not _nan(v)
    if v is None:
        return None
    if isinstance(expr, (In, NotIn)):
        values = [_lit(column, x) for x in expr.values]
        if any(_eq(v, x) for x in values if x is not None):
            found: bool | None = True
        else:
            found = None if any(x is None for x in values) else False
        return found if isinstance(expr, In) or found is None else not found
    lit = _lit(column, expr.literal)  # type: ignore[attr-defined]
    if isinstance(expr, EqualTo):
        return _eq(v, lit)
    if isinstance(expr, NotEqualTo):
        return not _eq(v, lit)
    if isinstance(expr, LessThan):
        return _lt(v, lit)
    if isinstance(expr, LessThanOrEqual):
        return _lt(v, lit) or _eq(v, lit)
    if isinstance(expr, GreaterThan):
        return _lt(lit, v)
    if isinstance(expr, GreaterThanOrEqual):
        return _lt(lit, v) or _eq(v, lit)
    if isinstance(expr, StartsWith):
        return bool(v.startswith(lit))
    if isinstance(expr, NotStartsWith):
        return not v.startswith(lit)
    raise AssertionError(expr)


def _stats(chunk: list[dict[str, Any]], truncate: int | None) -> File:
    values = {PSCHEMA.find_field(c).field_id: [_get(r, c) for r in chunk] for c in LEAVES}
    file = stats_file(values, PSCHEMA, truncate)
    file.record_count = len(chunk)
    return file


TRANSFORMS = {
    "i": ["i", "bucket(3, i)", "truncate(2, i)", "void(i)"],
    "f": ["f"],
    "g": ["g"],
    "s": ["s", "truncate(1, s)", "truncate(2, s)", "bucket(2, s)"],
    "d": ["d", "day(d)", "month(d)", "year(d)", "bucket(4, d)"],
    "ts": ["ts", "hour(ts)", "day(ts)", "month(ts)", "year(ts)", "bucket(3, ts)"],
    "dec": ["dec", "truncate(50, dec)", "bucket(3, dec)"],
    "b": ["b"],
    "st.a": ["st.a", "bucket(2, st.a)", "truncate(2, st.a)"],
}
SPEC_CHOICES = [t for ts in TRANSFORMS.values() for t in ts]


@st.composite
def partitioned_filters(draw: st.DrawFn) -> tuple[list[str], BooleanExpression]:
    """A spec with one or two fields on a column, maybe another field, and a filter mostly on it."""
    column = draw(st.sampled_from(LEAVES))
    choices = draw(st.lists(st.sampled_from(TRANSFORMS[column]), min_size=1, max_size=2, unique=True))
    if draw(st.booleans()):
        choices.append(draw(st.sampled_from(SPEC_CHOICES)))
    if draw(st.integers(0, 3)) == 0:
        return choices, draw(filters())
    return choices, draw(filters((column,), max_leaves=3))


def _partition(spec_: PartitionSpec, row: dict[str, Any]) -> tuple[Any, ...]:
    out = []
    for pf in spec_.fields:
        source = PSCHEMA.find_field(pf.source_id)
        name = PSCHEMA.find_column_name(pf.source_id)
        assert name is not None
        out.append(pf.transform.apply(from_python(source.field_type, _get(row, name)), source.field_type))
    return tuple(out)


def _key(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple("NaN" if _nan(v) else v for v in values)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=rows(), expr=filters())
def test_property_arrow_filter_agrees_with_sql(data: list[dict[str, Any]], expr: BooleanExpression) -> None:
    bound = bind(PSCHEMA, expr)
    expected = [r["id"] for r in data if reference(expr, r) is True]
    table = pa.Table.from_pylist(data, schema=PSCHEMA.as_arrow())
    actual = table.filter(to_arrow_expression(bound, PSCHEMA)).column("id").to_pylist()
    assert actual == expected, f"{expr} bound as {bound}"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=rows(), expr=focused_filters(), chunks=st.integers(1, 3), truncate=st.sampled_from([None, 1, 2]))
def test_property_metrics_never_prune_a_match(
    data: list[dict[str, Any]], expr: BooleanExpression, chunks: int, truncate: int | None
) -> None:
    expected = [r["id"] for r in data if reference(expr, r) is True]
    evaluator = InclusiveMetricsEvaluator(PSCHEMA, expr)
    for k in range(chunks):
        chunk = [r for r in data if r["id"] % chunks == k]
        if any(r["id"] in expected for r in chunk):
            assert evaluator.eval(_stats(chunk, truncate)), f"{expr} pruned a file with a match"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=rows(), case=partitioned_filters(), manifests=st.integers(1, 2))
def test_property_partitions_manifests_residuals(
    data: list[dict[str, Any]], case: tuple[list[str], BooleanExpression], manifests: int
) -> None:
    choices, expr = case
    try:
        spec_ = build_partition_spec(PSCHEMA, choices)
    except ValidationError:
        return  # redundant fields (day(ts) with hour(ts)) are rejected; nothing to test
    expected = {r["id"] for r in data if reference(expr, r) is True}
    groups: dict[tuple[Any, ...], tuple[tuple[Any, ...], list[dict[str, Any]]]] = {}
    for r in data:
        partition = _partition(spec_, r)
        groups.setdefault(_key(partition), (partition, []))[1].append(r)

    table = pa.Table.from_pylist(data, schema=PSCHEMA.as_arrow())
    partition_ev = PartitionEvaluator(spec_, PSCHEMA, expr)
    residual_ev = ResidualEvaluator(spec_, PSCHEMA, expr)
    for partition, members in groups.values():
        matching = [r["id"] for r in members if r["id"] in expected]
        if matching:
            assert partition_ev.eval(partition), f"{expr} pruned partition {partition} ({partition_ev.expr})"
        residual = residual_ev.residual_for(partition)
        part_table = table.take([r["id"] for r in members])  # ids are row positions
        got = part_table.filter(to_arrow_expression(residual, PSCHEMA)).column("id").to_pylist()
        assert got == matching, f"{expr}: residual {residual} for {partition}"

    result_types = [pf.transform.result_type(PSCHEMA.find_type(pf.source_id)) for pf in spec_.fields]
    manifest_ev = ManifestEvaluator(spec_, PSCHEMA, expr)
    for k in range(manifests):
        parts = [g for j, g in enumerate(groups.values()) if j % manifests == k]
        if not parts:
            continue
        summaries = [summary(t, [p[0][pos] for p in parts]) for pos, t in enumerate(result_types)]
        if any(r["id"] in expected for _, members in parts for r in members):
            assert manifest_ev.eval(Manifest(summaries)), f"{expr} pruned a manifest ({manifest_ev.expr})"
