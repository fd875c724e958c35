"""Transforms: the spec's test vectors, Java's human strings, and Arrow == per-value == pyiceberg."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg import transforms as pyi_transforms
from pyiceberg import types as pyi_types

from tablestore.errors import UnsupportedError, ValidationError
from tablestore.spec.partitioning.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    UnknownTransform,
    VoidTransform,
    YearTransform,
    hash_value,
    murmur3_longs,
    parse_transform,
)
from tablestore.spec.schemas.conversions import from_python
from tablestore.spec.schemas.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)


def _arrow_type(source: IcebergType) -> pa.DataType:
    if isinstance(source, DecimalType):
        return pa.decimal128(source.precision, source.scale)
    if isinstance(source, FixedType):
        return pa.binary(source.length)
    by_type: dict[type[IcebergType], pa.DataType] = {
        IntegerType: pa.int32(), LongType: pa.int64(), DateType: pa.date32(), TimeType: pa.time64("us"),
        TimestampType: pa.timestamp("us"), TimestamptzType: pa.timestamp("us", "UTC"),
        TimestampNanoType: pa.timestamp("ns"), TimestamptzNanoType: pa.timestamp("ns", "UTC"),
        StringType: pa.string(), BinaryType: pa.binary(), UUIDType: pa.binary(16),
    }
    return by_type[type(source)]


def _arrow(values: list[Any], arrow_type: pa.DataType) -> pa.Array:
    return pa.array([v.bytes if isinstance(v, uuid.UUID) else v for v in values], arrow_type)


# -- spec Appendix B: 32-bit hash test vectors --------------------------------------------------


@pytest.mark.parametrize(
    ("source", "value", "expected"),
    [
        (IntegerType(), 34, 2017239379),
        (LongType(), 34, 2017239379),
        (DecimalType(4, 2), Decimal("14.20"), -500754589),
        (DateType(), "2017-11-16", -653330422),
        (TimeType(), "22:31:08", -662762989),
        (TimestampType(), "2017-11-16T22:31:08", -2047944441),
        (TimestampType(), "2017-11-16T22:31:08.000001", -1207196810),
        (TimestamptzType(), "2017-11-16T14:31:08-08:00", -2047944441),
        (TimestamptzType(), "2017-11-16T14:31:08.000001-08:00", -1207196810),
        (TimestampNanoType(), "2017-11-16T22:31:08", -2047944441),
        (TimestampNanoType(), "2017-11-16T22:31:08.000001001", -1207196810),
        (TimestamptzNanoType(), "2017-11-16T14:31:08-08:00", -2047944441),
        (TimestamptzNanoType(), "2017-11-16T14:31:08.000001001-08:00", -1207196810),
        (StringType(), "iceberg", 1210000089),
        (UUIDType(), "f79c3e09-677c-4bbd-a479-3f349cb785e7", 1488055340),
        (FixedType(4), b"\x00\x01\x02\x03", -188683207),
        (BinaryType(), b"\x00\x01\x02\x03", -188683207),
    ],
)
def test_spec_hash_vectors(source: IcebergType, value: Any, expected: int) -> None:
    internal = from_python(source, value)
    assert hash_value(internal, source) == expected
    bucket = BucketTransform(2**31 - 1)
    assert bucket.apply(internal, source) == (expected & 0x7FFFFFFF) % (2**31 - 1)
    arrow = _arrow([internal, None], _arrow_type(source))
    assert bucket.apply_arrow(arrow, source).to_pylist() == [(expected & 0x7FFFFFFF) % (2**31 - 1), None]


def test_vectorized_murmur3_matches_mmh3() -> None:
    import mmh3

    values = np.array([0, 1, -1, 34, 2**63 - 1, -(2**63), 1510871468000000], dtype=np.int64)
    expected = [mmh3.hash(int(v).to_bytes(8, "little", signed=True)) for v in values]
    assert murmur3_longs(values).tolist() == expected


def test_int_and_long_buckets_agree_for_promotion() -> None:
    b = BucketTransform(16)
    ints = pa.array([1, -1, 34, None, 2**31 - 1], pa.int32())
    assert b.apply_arrow(ints).to_pylist() == b.apply_arrow(ints.cast(pa.int64())).to_pylist()


def test_bucket_rejects_unhashable_values() -> None:
    with pytest.raises(ValidationError, match="not bucketable"):
        BucketTransform(4).apply(True)
    with pytest.raises(ValidationError, match="not bucketable"):
        BucketTransform(4).apply(1.5, DoubleType())
    with pytest.raises(ValidationError, match="cannot be applied to Arrow type double"):
        BucketTransform(4).apply_arrow(pa.array([1.5]))
    with pytest.raises(ValidationError, match="positive integer"):
        BucketTransform(0)


# -- truncate (spec examples) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("width", "source", "value", "expected"),
    [
        (10, IntegerType(), 1, 0),
        (10, IntegerType(), -1, -10),
        (10, LongType(), 1, 0),
        (10, LongType(), -1, -10),
        (50, DecimalType(9, 2), Decimal("10.65"), Decimal("10.50")),
        (10, DecimalType(9, 2), Decimal("-0.05"), Decimal("-0.10")),
        (3, StringType(), "iceberg", "ice"),
        (3, BinaryType(), b"\x01\x02\x03\x04\x05", b"\x01\x02\x03"),
        (2, StringType(), "😀é日本", "😀é"),  # code points, not UTF-16 units or bytes
    ],
)
def test_truncate_spec_examples(width: int, source: IcebergType, value: Any, expected: Any) -> None:
    t = TruncateTransform(width)
    assert t.apply(value, source) == expected
    if isinstance(expected, Decimal):
        assert t.apply(value, source).as_tuple().exponent == -2
    assert t.apply_arrow(pa.array([value, None], _arrow_type(source))).to_pylist() == [expected, None]


def test_truncate_wraps_like_java_near_min_value() -> None:
    t = TruncateTransform(1000)
    assert t.apply(-2_147_483_001, IntegerType()) == 2147483296  # Java: int arithmetic wraps
    assert t.apply_arrow(pa.array([-2_147_483_001], pa.int32())).to_pylist() == [2147483296]
    assert t.apply(-2_147_483_001) == -2147484000  # an untyped Python int does not wrap


def test_truncate_wide_decimal_and_large_strings() -> None:
    t = TruncateTransform(7)
    values = [Decimal("12345678901234567890123.456789"), Decimal("-1.000001"), None]
    out = t.apply_arrow(pa.array(values, pa.decimal128(38, 6)))
    assert out.to_pylist() == [t.apply(v, DecimalType(38, 6)) for v in values]
    assert out.to_pylist()[1] == Decimal("-1.000006")  # -1000001 - (-1000001 mod 7 = 5)
    assert t.apply_arrow(pa.array(["abcdefghij"], pa.large_string())).to_pylist() == ["abcdefg"]
    assert t.apply_arrow(pa.array([b"abcdefghij"], pa.large_binary())).to_pylist() == [b"abcdefg"]


# -- time transforms ----------------------------------------------------------------------------


TS = from_python(TimestampType(), "2017-11-16T22:31:08")
BEFORE_EPOCH = from_python(TimestampType(), "1969-12-31T23:59:59.999999")


@pytest.mark.parametrize(
    ("transform", "expected_ts", "expected_before_epoch"),
    [
        (YearTransform(), 47, -1),
        (MonthTransform(), 47 * 12 + 10, -1),
        (DayTransform(), 17486, -1),
        (HourTransform(), 17486 * 24 + 22, -1),
    ],
)
def test_time_transforms(transform: Transform, expected_ts: int, expected_before_epoch: int) -> None:
    for source, scale in ((TimestampType(), 1), (TimestamptzType(), 1), (TimestampNanoType(), 1000)):
        assert transform.apply(TS * scale, source) == expected_ts
        assert transform.apply(BEFORE_EPOCH * scale, source) == expected_before_epoch
        unit = "ns" if scale == 1000 else "us"
        arr = pa.array([TS * scale, BEFORE_EPOCH * scale, None], pa.timestamp(unit))
        assert transform.apply_arrow(arr).to_pylist() == [expected_ts, expected_before_epoch, None]
        # Plain integer arrays work when the source type says what they count.
        ints = pa.array([TS * scale, BEFORE_EPOCH * scale, None], pa.int64())
        assert transform.apply_arrow(ints, source).to_pylist() == [expected_ts, expected_before_epoch, None]
    if not isinstance(transform, HourTransform):
        days = from_python(DateType(), "2017-11-16")
        assert transform.apply(days, DateType()) == transform.apply(TS, TimestampType())
        assert transform.apply(-1, DateType()) == -1
        assert transform.apply_arrow(pa.array([days, -1, None], pa.date32())).to_pylist() == [
            expected_ts if not isinstance(transform, DayTransform) else days, -1, None
        ]


def test_time_transforms_need_a_source_type_for_integers() -> None:
    with pytest.raises(ValidationError, match="source_type"):
        DayTransform().apply(17486)
    with pytest.raises(ValidationError, match="source_type"):
        DayTransform().apply_arrow(pa.array([1, 2]))
    # datetime objects say what they are.
    assert DayTransform().apply(dt.date(2017, 11, 16)) == 17486
    assert HourTransform().apply(dt.datetime(2017, 11, 16, 22, 31, 8)) == 17486 * 24 + 22
    plus_two = dt.timezone(dt.timedelta(hours=2))
    assert DayTransform().apply(dt.datetime(2017, 11, 16, 1, tzinfo=plus_two)) == 17485
    with pytest.raises(ValidationError, match="hour cannot be applied to a date"):
        HourTransform().apply_arrow(pa.array([1], pa.date32()))


def test_result_types_and_capabilities() -> None:
    assert DayTransform().result_type(TimestampType()) == DateType()
    for t in (YearTransform(), MonthTransform(), HourTransform(), BucketTransform(8)):
        assert t.result_type(TimestamptzType()) == IntegerType()
    assert TruncateTransform(4).result_type(StringType()) == StringType()
    assert IdentityTransform().result_type(UUIDType()) == UUIDType()
    assert VoidTransform().result_type(DoubleType()) == DoubleType()
    assert not HourTransform().can_transform(DateType())
    assert DayTransform().can_transform(DateType()) and DayTransform().can_transform(TimestamptzNanoType())
    assert not BucketTransform(2).can_transform(FloatType())
    assert not BucketTransform(2).can_transform(BooleanType())
    assert not TruncateTransform(2).can_transform(FixedType(3))
    assert TruncateTransform(2).can_transform(DecimalType(9, 2))
    assert not IdentityTransform().can_transform(StructType())
    assert not IdentityTransform().can_transform(ListType(1, StringType()))
    assert VoidTransform().can_transform(StructType())
    assert [t.preserves_order for t in (IdentityTransform(), TruncateTransform(1), YearTransform(),
                                        MonthTransform(), DayTransform(), HourTransform())] == [True] * 6
    assert not BucketTransform(3).preserves_order and not VoidTransform().preserves_order


def test_names_strings_and_parsing() -> None:
    cases = {
        "identity": IdentityTransform(), "bucket[16]": BucketTransform(16),
        "truncate[4]": TruncateTransform(4),
        "year": YearTransform(), "month": MonthTransform(), "day": DayTransform(), "hour": HourTransform(),
        "void": VoidTransform(),
    }
    for text, t in cases.items():
        assert str(t) == text
        assert parse_transform(text) == t
        assert parse_transform(text.upper()) == t
    assert parse_transform(" bucket[ 8 ] ") == BucketTransform(8)
    assert BucketTransform(16) != BucketTransform(8) and hash(BucketTransform(3)) == hash(BucketTransform(3))
    times = (YearTransform(), MonthTransform(), DayTransform(), HourTransform())
    assert [t.default_partition_name("ts") for t in times] == ["ts_year", "ts_month", "ts_day", "ts_hour"]
    assert BucketTransform(16).default_partition_name("id") == "id_bucket"
    assert TruncateTransform(4).default_partition_name("s") == "s_trunc"
    assert VoidTransform().default_partition_name("x") == "x_null"
    assert IdentityTransform().default_partition_name("a.b") == "a.b"
    assert DayTransform().dedup_name == HourTransform().dedup_name == "time"
    assert BucketTransform(4).dedup_name == "bucket[4]"
    with pytest.raises(ValidationError, match="unknown transform 'zorder'"):
        parse_transform("zorder")
    unknown = parse_transform("zorder", allow_unknown=True)
    assert isinstance(unknown, UnknownTransform) and str(unknown) == "zorder"
    assert not unknown.can_transform(LongType())
    with pytest.raises(UnsupportedError):
        unknown.apply(1)


# -- human strings (Java's Transform.toHumanString) ----------------------------------------------


def test_human_strings() -> None:
    assert YearTransform().to_human_string(IntegerType(), 47) == "2017"
    assert MonthTransform().to_human_string(IntegerType(), 574) == "2017-11"
    assert MonthTransform().to_human_string(IntegerType(), -1) == "1969-12"
    assert DayTransform().to_human_string(DateType(), 17486) == "2017-11-16"
    assert HourTransform().to_human_string(IntegerType(), 17486 * 24 + 22) == "2017-11-16-22"
    assert HourTransform().to_human_string(IntegerType(), -1) == "1969-12-31-23"
    assert DayTransform().to_human_string(DateType(), None) == "null"
    ident = IdentityTransform()
    assert ident.to_human_string(DateType(), 17486) == "2017-11-16"
    assert ident.to_human_string(TimeType(), 81068000001) == "22:31:08.000001"
    assert ident.to_human_string(TimestampType(), TS) == "2017-11-16T22:31:08"
    assert ident.to_human_string(TimestamptzType(), TS + 1) == "2017-11-16T22:31:08.000001+00:00"
    assert ident.to_human_string(TimestampNanoType(), TS * 1000 + 1) == "2017-11-16T22:31:08.000000001"
    assert ident.to_human_string(BinaryType(), b"\x00\x01\x02") == "AAEC"
    assert ident.to_human_string(FixedType(3), b"\xff\xfe\xfd") == "//79"
    assert ident.to_human_string(UUIDType(), uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")) == \
        "f79c3e09-677c-4bbd-a479-3f349cb785e7"
    assert ident.to_human_string(BooleanType(), True) == "true"
    assert ident.to_human_string(DecimalType(9, 2), Decimal("14.20")) == "14.20"
    assert ident.to_human_string(StringType(), "a/b") == "a/b"
    assert ident.to_human_string(LongType(), None) == "null"
    # Java's Double.toString / Float.toString.
    assert ident.to_human_string(DoubleType(), 1.0) == "1.0"
    assert ident.to_human_string(DoubleType(), 1e10) == "1.0E10"
    assert ident.to_human_string(DoubleType(), 1.5e-4) == "1.5E-4"
    assert ident.to_human_string(DoubleType(), -123.25) == "-123.25"
    assert ident.to_human_string(FloatType(), float(np.float32(0.1))) == "0.1"
    assert ident.to_human_string(DoubleType(), float("nan")) == "NaN"
    assert BucketTransform(16).to_human_string(IntegerType(), 3) == "3"
    assert TruncateTransform(4).to_human_string(BinaryType(), b"\x00\x01") == "AAE="


# -- Arrow inputs: chunked, sliced, dictionary, extension -----------------------------------------


def test_arrow_layouts() -> None:
    b = BucketTransform(10)
    base = pa.array(["a", None, "b", "c", "a", None], pa.string())
    expected = [b.apply(v) for v in base.to_pylist()]
    assert b.apply_arrow(base).to_pylist() == expected
    assert b.apply_arrow(base.slice(2)).to_pylist() == expected[2:]
    assert b.apply_arrow(pa.chunked_array([base.slice(0, 2), base.slice(2)])).to_pylist() == expected
    assert b.apply_arrow(base.dictionary_encode()).to_pylist() == expected
    assert b.apply_arrow(pa.chunked_array([], pa.string())).to_pylist() == []
    assert b.apply_arrow(pa.nulls(3)).to_pylist() == [None] * 3
    ids = [uuid.uuid4() for _ in range(5)]
    ext = pa.ExtensionArray.from_storage(pa.uuid(), pa.array([u.bytes for u in ids], pa.binary(16)))
    assert b.apply_arrow(ext).to_pylist() == [b.apply(u) for u in ids]
    ints = pa.array([5, None, -7, 12], pa.int64()).slice(1)
    assert TruncateTransform(5).apply_arrow(ints).to_pylist() == [None, -10, 10]
    assert IdentityTransform().apply_arrow(pa.chunked_array([base])).equals(base)
    assert VoidTransform().apply_arrow(base).to_pylist() == [None] * 6
    assert VoidTransform().apply_arrow(base).type == pa.string()


# -- properties: Arrow == per value == pyiceberg --------------------------------------------------

# Python's (and so pyiceberg's) years 1..9999.
MICROS = st.integers(-62_135_596_800 * 10**6, 253_402_300_799 * 10**6)
NANOS = st.integers(-(2**63), 2**63 - 1)
DAYS = st.integers(-719_162, 2_932_896)
DECIMALS = st.decimals(min_value=Decimal("-9999999.99"), max_value=Decimal("9999999.99"), places=2,
                       allow_nan=False, allow_infinity=False)

_CASES: list[tuple[IcebergType, pa.DataType, Any, Any]] = [
    (IntegerType(), pa.int32(), st.integers(-(2**31), 2**31 - 1), pyi_types.IntegerType()),
    (LongType(), pa.int64(), st.integers(-(2**63), 2**63 - 1), pyi_types.LongType()),
    (DateType(), pa.date32(), DAYS, pyi_types.DateType()),
    (TimeType(), pa.time64("us"), st.integers(0, 86_400_000_000 - 1), pyi_types.TimeType()),
    (TimestampType(), pa.timestamp("us"), MICROS, pyi_types.TimestampType()),
    (TimestamptzType(), pa.timestamp("us", "UTC"), MICROS, pyi_types.TimestamptzType()),
    (TimestampNanoType(), pa.timestamp("ns"), NANOS, pyi_types.TimestampNanoType()),
    (StringType(), pa.string(), st.text(max_size=12), pyi_types.StringType()),
    (BinaryType(), pa.binary(), st.binary(max_size=12), pyi_types.BinaryType()),
    (FixedType(7), pa.binary(7), st.binary(min_size=7, max_size=7), pyi_types.FixedType(7)),
    (DecimalType(9, 2), pa.decimal128(9, 2), DECIMALS, pyi_types.DecimalType(9, 2)),
    (UUIDType(), pa.binary(16), st.uuids(), pyi_types.UUIDType()),
]


def _wrap(value: int | None, bits: int) -> int | None:
    return None if value is None else (value + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)


def _pyiceberg_transform(t: Transform) -> Any:
    if isinstance(t, BucketTransform):
        return pyi_transforms.BucketTransform(t.num_buckets)
    if isinstance(t, TruncateTransform):
        return pyi_transforms.TruncateTransform(t.width)
    by_type: dict[type[Transform], pyi_transforms.Transform[Any, Any]] = {
        YearTransform: pyi_transforms.YearTransform(), MonthTransform: pyi_transforms.MonthTransform(),
        DayTransform: pyi_transforms.DayTransform(), HourTransform: pyi_transforms.HourTransform(),
        IdentityTransform: pyi_transforms.IdentityTransform(),
    }
    return by_type[type(t)]


@pytest.mark.parametrize(("source", "arrow_type", "strategy", "pyi_source"), _CASES,
                         ids=[str(c[0]) for c in _CASES])
@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.sampled_from([1, 7, 16, 1000]))
def test_arrow_matches_per_value_and_pyiceberg(
    source: IcebergType, arrow_type: pa.DataType, strategy: Any, pyi_source: Any, data: Any, n: int
) -> None:
    values = data.draw(st.lists(st.one_of(st.none(), strategy), max_size=30))
    transforms: list[Transform] = [BucketTransform(n), IdentityTransform()]
    if TruncateTransform(n).can_transform(source):
        transforms.append(TruncateTransform(n))
    transforms += [t for t in (YearTransform(), MonthTransform(), DayTransform(), HourTransform())
                   if t.can_transform(source)]
    arr = _arrow(values, arrow_type)
    for t in transforms:
        per_value = [t.apply(v, source) for v in values]
        if isinstance(t, IdentityTransform):
            assert per_value == values
            assert t.apply_arrow(arr, source).equals(arr)
        else:
            assert t.apply_arrow(arr, source).to_pylist() == per_value, t
        oracle = _pyiceberg_transform(t).transform(pyi_source)
        expected = [None if v is None else oracle(v) for v in values]
        if isinstance(t, TruncateTransform) and isinstance(source, IntegerType | LongType):
            # Just above MIN_VALUE truncation leaves the type's range; we wrap like Java's
            # int/long arithmetic, pyiceberg does not.
            expected = [_wrap(e, 32 if isinstance(source, IntegerType) else 64) for e in expected]
        assert per_value == expected, t


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.decimals(min_value=Decimal("-1e20"), max_value=Decimal("1e20"),
                                                 places=6, allow_nan=False, allow_infinity=False)),
                max_size=20), st.integers(1, 10**9))
def test_wide_decimals_match_pyiceberg(values: list[Decimal | None], n: int) -> None:
    source = DecimalType(38, 6)
    arr = pa.array(values, pa.decimal128(38, 6))
    for t in (BucketTransform(n), TruncateTransform(n)):
        oracle = _pyiceberg_transform(t).transform(pyi_types.DecimalType(38, 6))
        expected = [None if v is None else oracle(v) for v in values]
        assert [t.apply(v, source) for v in values] == expected
        assert t.apply_arrow(arr).to_pylist() == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-(2**62), 2**62)), max_size=20))
def test_time_transforms_far_from_epoch(values: list[int | None]) -> None:
    # Beyond Python's datetime range: our integer calendar and numpy's must still agree.
    for t in (YearTransform(), MonthTransform(), DayTransform(), HourTransform()):
        per_value = [t.apply(v, TimestampType()) for v in values]
        assert t.apply_arrow(pa.array(values, pa.timestamp("us"))).to_pylist() == [
            None if v is None else np.int32(v).item() for v in per_value  # int32 like Java's int
        ]
    days = [None if v is None else v // 86_400_000_000 for v in values]
    for t in (YearTransform(), MonthTransform()):
        assert t.apply_arrow(pa.array(days, pa.int64()), DateType()).to_pylist() == [
            t.apply(d, DateType()) for d in days
        ]


def test_large_batch_is_vectorized() -> None:
    n = 1_000_000
    rng = np.random.default_rng(7)
    micros = rng.integers(-(2**50), 2**50, n)
    arr = pa.array(micros, pa.timestamp("us"))
    sample = micros[:: n // 50].tolist()
    for t in (BucketTransform(16), DayTransform(), MonthTransform(), YearTransform(), HourTransform()):
        out = t.apply_arrow(arr)
        assert len(out) == n and out.type == pa.int32()
        assert out.to_pylist()[:: n // 50] == [t.apply(v, TimestampType()) for v in sample]
