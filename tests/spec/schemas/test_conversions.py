"""Single values: binary (Appendix D) and JSON forms, Python values in and out, truncated bounds."""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg import conversions as pyi_conversions
from pyiceberg import types as pyi_types

from tablestore.errors import ValidationError
from tablestore.spec.schemas.conversions import (
    civil_from_days,
    days_from_civil,
    format_date,
    from_bytes,
    from_json_value,
    from_python,
    to_bytes,
    to_json_value,
    to_python,
    truncate_lower_bound,
    truncate_upper_bound,
)
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
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

UUID = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
TS = 1510871468000000  # 2017-11-16T22:31:08 UTC in micros
PLUS_ONE = dt.timezone(dt.timedelta(hours=1))

# -- binary -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "value", "hex_bytes"),
    [
        (BooleanType(), True, "01"),
        (BooleanType(), False, "00"),
        (IntegerType(), 34, "22000000"),
        (IntegerType(), -1, "ffffffff"),
        (LongType(), 34, "2200000000000000"),
        (FloatType(), 1.0, "0000803f"),
        (DoubleType(), 1.0, "000000000000f03f"),
        (DateType(), 17486, "4e440000"),
        (TimeType(), 81068000000, "008307e012000000"),
        (TimestampType(), TS, "00c3262d215e0500"),
        (TimestamptzType(), TS, "00c3262d215e0500"),
        (TimestampNanoType(), TS * 1000, "00b8695f98b1f714"),
        (StringType(), "iceberg", "69636562657267"),
        (StringType(), "é", "c3a9"),
        (UUIDType(), UUID, "f79c3e09677c4bbda4793f349cb785e7"),
        (FixedType(4), b"\x00\x01\x02\x03", "00010203"),
        (BinaryType(), b"\x00\x01\x02\x03", "00010203"),
        (DecimalType(4, 2), Decimal("14.20"), "058c"),
        (DecimalType(9, 2), Decimal("0.00"), "00"),
        (DecimalType(9, 2), Decimal("1.27"), "7f"),
        (DecimalType(9, 2), Decimal("1.28"), "0080"),
        (DecimalType(9, 2), Decimal("-1.28"), "80"),
        (DecimalType(9, 2), Decimal("-1.29"), "ff7f"),
        (DecimalType(9, 2), Decimal("14.2"), "058c"),  # quantized to the type's scale
    ],
)
def test_binary_single_values(t: IcebergType, value: Any, hex_bytes: str) -> None:
    assert to_bytes(t, value).hex() == hex_bytes
    back = from_bytes(t, bytes.fromhex(hex_bytes))
    assert back == value
    if isinstance(t, DecimalType):
        assert back.as_tuple().exponent == -t.scale


def test_binary_reads_promoted_bounds_and_rejects_bad_input() -> None:
    # A column promoted int -> long (float -> double) keeps 4-byte bounds in old manifests.
    assert from_bytes(LongType(), to_bytes(IntegerType(), -5)) == -5
    assert from_bytes(DoubleType(), to_bytes(FloatType(), 1.5)) == 1.5
    assert from_bytes(BooleanType(), b"\x02") is True
    with pytest.raises(ValidationError, match="cannot read a int value from bytes 0102"):
        from_bytes(IntegerType(), b"\x01\x02")
    with pytest.raises(ValidationError, match="cannot serialize 3000000000 as a int value"):
        to_bytes(IntegerType(), 3_000_000_000)
    with pytest.raises(ValidationError, match="more than 2 digits after the decimal point"):
        to_bytes(DecimalType(9, 2), Decimal("1.234"))
    with pytest.raises(ValidationError, match="has no single-value binary form"):
        to_bytes(ListType(1, IntegerType()), [1])


_PYI: dict[type[IcebergType], pyi_types.PrimitiveType] = {
    BooleanType: pyi_types.BooleanType(), IntegerType: pyi_types.IntegerType(),
    LongType: pyi_types.LongType(),
    FloatType: pyi_types.FloatType(), DoubleType: pyi_types.DoubleType(), DateType: pyi_types.DateType(),
    TimeType: pyi_types.TimeType(), TimestampType: pyi_types.TimestampType(),
    TimestamptzType: pyi_types.TimestamptzType(), StringType: pyi_types.StringType(),
    UUIDType: pyi_types.UUIDType(), BinaryType: pyi_types.BinaryType(),
}
_VALUES: list[tuple[IcebergType, Any]] = [
    (BooleanType(), st.booleans()),
    (IntegerType(), st.integers(-(2**31), 2**31 - 1)),
    (LongType(), st.integers(-(2**63), 2**63 - 1)),
    (FloatType(), st.floats(width=32, allow_nan=False)),
    (DoubleType(), st.floats(allow_nan=False)),
    (DateType(), st.integers(-(2**31), 2**31 - 1)),
    (TimeType(), st.integers(0, 86_400_000_000 - 1)),
    (TimestampType(), st.integers(-(2**63), 2**63 - 1)),
    (TimestamptzType(), st.integers(-(2**63), 2**63 - 1)),
    (StringType(), st.text()),
    (UUIDType(), st.uuids()),
    (BinaryType(), st.binary()),
    (FixedType(5), st.binary(min_size=5, max_size=5)),
    (DecimalType(38, 10), st.decimals(min_value=Decimal("-" + "9" * 28), max_value=Decimal("9" * 28),
                                      places=10, allow_nan=False, allow_infinity=False)),
]


@pytest.mark.parametrize(("t", "strategy"), _VALUES, ids=[str(v[0]) for v in _VALUES])
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_binary_round_trip_and_pyiceberg(t: IcebergType, strategy: Any, data: Any) -> None:
    value = data.draw(strategy)
    encoded = to_bytes(t, value)
    assert from_bytes(t, encoded) == value
    if isinstance(t, FixedType):
        pyi_type: Any = pyi_types.FixedType(t.length)
    elif isinstance(t, DecimalType):
        pyi_type = pyi_types.DecimalType(t.precision, t.scale)
    else:
        pyi_type = _PYI[type(t)]
    assert pyi_conversions.to_bytes(pyi_type, value) == encoded
    # pyiceberg annotates from_bytes with an unbound TypeVar (mypy reads it as str): it returns
    # bytes for a UUID, the Python value otherwise.
    theirs: object = pyi_conversions.from_bytes(pyi_type, encoded)
    if isinstance(t, UUIDType):
        assert isinstance(theirs, bytes)
        theirs = uuid.UUID(bytes=theirs)
    assert theirs == value
    # JSON round trip too.
    assert from_json_value(t, json.loads(json.dumps(to_json_value(t, value)))) == value


# -- JSON (spec examples) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "value", "expected"),
    [
        (BooleanType(), True, True),
        (IntegerType(), 34, 34),
        (LongType(), 34, 34),
        (DoubleType(), 1.0, 1.0),
        (DecimalType(4, 2), Decimal("14.20"), "14.20"),
        (DecimalType(10, 8), Decimal("0.00000001"), "0.00000001"),  # plain, not 1E-8
        (DecimalType(10, 0), Decimal("5"), "5"),
        (DateType(), 17486, "2017-11-16"),
        (TimeType(), 81068123456, "22:31:08.123456"),
        (TimeType(), 81068000000, "22:31:08"),
        (TimestampType(), TS + 123456, "2017-11-16T22:31:08.123456"),
        (TimestampType(), TS + 1, "2017-11-16T22:31:08.000001"),
        (TimestamptzType(), TS + 123456, "2017-11-16T22:31:08.123456+00:00"),
        (TimestampNanoType(), TS * 1000 + 123456789, "2017-11-16T22:31:08.123456789"),
        (TimestamptzNanoType(), TS * 1000 + 123456789, "2017-11-16T22:31:08.123456789+00:00"),
        (TimestampType(), -1, "1969-12-31T23:59:59.999999"),
        (StringType(), "iceberg", "iceberg"),
        (UUIDType(), UUID, "f79c3e09-677c-4bbd-a479-3f349cb785e7"),
        (FixedType(4), b"\x00\x01\x02\xff", "000102ff"),
        (BinaryType(), b"\x00\x01\x02\xff", "000102ff"),
        (StructType(NestedField(1, "a", IntegerType()), NestedField(2, "b", StringType())),
         {"a": 1, "b": "bar"}, {"1": 1, "2": "bar"}),
        (ListType(3, IntegerType()), [1, 2, 3], [1, 2, 3]),
        (MapType(4, StringType(), 5, IntegerType()), {"a": 1, "b": 2},
         {"keys": ["a", "b"], "values": [1, 2]}),
    ],
)
def test_json_single_values(t: IcebergType, value: Any, expected: Any) -> None:
    assert to_json_value(t, value) == expected
    assert from_json_value(t, expected) == value


def test_json_accepts_java_spellings_and_rejects_bad_values() -> None:
    assert from_json_value(FixedType(2), "00FF") == b"\x00\xff"  # Java writes upper-case hex
    assert from_json_value(TimestamptzType(), "2017-11-16T22:31:08Z") == TS
    assert from_json_value(TimeType(), "22:31:08.1") == 81068100000
    assert from_json_value(StructType(NestedField(1, "a", IntegerType())), (
        {})) == {"a": None}
    assert to_json_value(StructType(NestedField(1, "a", IntegerType())), (7,)) == {"1": 7}
    assert from_json_value(IntegerType(), None) is None
    with pytest.raises(ValidationError, match="exactly 2 digits after the point"):
        from_json_value(DecimalType(9, 2), "14.2")
    with pytest.raises(ValidationError, match="expected 2 bytes"):
        from_json_value(FixedType(2), "000102")
    with pytest.raises(ValidationError, match="expected a JSON integer"):
        from_json_value(IntegerType(), 1.5)
    with pytest.raises(ValidationError, match="out of range for int"):
        from_json_value(IntegerType(), 2**31)
    with pytest.raises(ValidationError, match="expected true or false"):
        from_json_value(BooleanType(), "true")
    with pytest.raises(ValidationError, match="not a valid date"):
        from_json_value(DateType(), "2023-02-29")


# -- from_python / to_python -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "value", "expected"),
    [
        (IntegerType(), 5, 5),
        (IntegerType(), np.int16(5), 5),
        (LongType(), "-42", -42),
        (LongType(), 2**63 - 1, 2**63 - 1),
        (DoubleType(), 3, 3.0),
        (DoubleType(), np.float32(0.5), 0.5),
        (DoubleType(), Decimal("1.5"), 1.5),
        (FloatType(), "NaN", math.nan),
        (BooleanType(), np.bool_(True), True),
        (BooleanType(), "FALSE", False),
        (DecimalType(9, 2), Decimal("1.5"), Decimal("1.50")),
        (DecimalType(9, 2), 3, Decimal("3.00")),
        (DecimalType(9, 2), 0.1, Decimal("0.10")),
        (DecimalType(9, 2), " 12.3 ", Decimal("12.30")),
        (DecimalType(38, 0), 10**37, Decimal(10**37)),
        (StringType(), "x", "x"),
        (StringType(), b"caf\xc3\xa9", "café"),
        (UUIDType(), str(UUID), UUID),
        (UUIDType(), UUID.bytes, UUID),
        (FixedType(2), bytearray(b"ab"), b"ab"),
        (BinaryType(), memoryview(b"ab"), b"ab"),
        (DateType(), dt.date(2017, 11, 16), 17486),
        (DateType(), "2017-11-16", 17486),
        (DateType(), dt.datetime(2017, 11, 16), 17486),
        (DateType(), np.datetime64("2017-11-16"), 17486),
        (DateType(), pd.Timestamp("2017-11-16"), 17486),
        (DateType(), dt.date(1, 1, 1), -719162),
        (TimeType(), dt.time(22, 31, 8), 81068000000),
        (TimeType(), "22:31:08.5", 81068500000),
        (TimeType(), dt.timedelta(hours=1), 3600000000),
        (TimestampType(), dt.datetime(2017, 11, 16, 22, 31, 8), TS),
        (TimestampType(), "2017-11-16 22:31:08", TS),
        (TimestampType(), "2017-11-16T22:31:08.123456789", TS + 123456),  # truncated to micros
        (TimestampType(), "2017-11-16", TS - (22 * 3600 + 31 * 60 + 8) * 10**6),
        (TimestampType(), np.datetime64("2017-11-16T22:31:08"), TS),
        (TimestampType(), pd.Timestamp("2017-11-16 22:31:08.000001"), TS + 1),
        (TimestamptzType(), "2017-11-16T14:31:08-08:00", TS),
        (TimestamptzType(), "2017-11-16T22:31:08Z", TS),
        (TimestamptzType(), "2017-11-16 22:31:08", TS),  # no zone: UTC
        (TimestamptzType(), dt.datetime(2017, 11, 16, 22, 31, 8, tzinfo=dt.UTC), TS),
        (TimestamptzType(), dt.datetime(2017, 11, 16, 23, 31, 8, tzinfo=PLUS_ONE), TS),
        (TimestamptzType(), pd.Timestamp("2017-11-16 14:31:08", tz="America/Los_Angeles"), TS),
        (TimestampNanoType(), "2017-11-16T22:31:08.000000001", TS * 1000 + 1),
        (TimestampNanoType(), np.datetime64("2017-11-16T22:31:08.000000001"), TS * 1000 + 1),
        (TimestamptzNanoType(), pd.Timestamp("2017-11-16 22:31:08.000000001", tz="UTC"), TS * 1000 + 1),
        (TimestampNanoType(), dt.datetime(2017, 11, 16, 22, 31, 8, 1), TS * 1000 + 1000),
        (IntegerType(), None, None),
        (DateType(), pd.NaT, None),
        (TimestampType(), np.datetime64("NaT"), None),
        (LongType(), pd.NA, None),
        (ListType(1, DateType()), ["2017-11-16", None], [17486, None]),
        (MapType(1, StringType(), 2, LongType()), {"a": np.int64(1)}, {"a": 1}),
        (StructType(NestedField(1, "a", DateType())), ("2017-11-16",), {"a": 17486}),
    ],
)
def test_from_python(t: IcebergType, value: Any, expected: Any) -> None:
    result = from_python(t, value)
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(result)
    else:
        assert result == expected
        assert type(result) is type(expected)
    if isinstance(expected, Decimal):
        assert result.as_tuple().exponent == -t.scale  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("t", "value", "message"),
    [
        (IntegerType(), 2**31, "value 2147483648 is out of range for int (-2147483648 to 2147483647)"),
        (LongType(), -(2**63) - 1, "out of range for long"),
        (IntegerType(), 5.0, "a fractional number is not converted implicitly"),
        (LongType(), Decimal("5"), "a fractional number is not converted implicitly"),
        (IntegerType(), True, "booleans are not numbers"),
        (IntegerType(), "5x", "expected an integer"),
        (DoubleType(), "abc", "expected a number"),
        (BooleanType(), 1, "expected true or false"),
        (DecimalType(4, 2), Decimal("123.45"), "does not fit decimal(4, 2): it needs more than 4 digits"),
        (DecimalType(9, 2), Decimal("1.234"), "more than 2 digits after the decimal point"),
        (DecimalType(9, 2), "NaN", "not a finite decimal number"),
        (DecimalType(9, 2), float("inf"), "expected a finite number"),
        (StringType(), 5, "expected a str"),
        (StringType(), b"\xff", "expected a str or UTF-8 bytes"),
        (UUIDType(), "not-a-uuid", "expected a UUID"),
        (FixedType(3), b"ab", "must be exactly 3 bytes, got 2"),
        (BinaryType(), "ab", "expected bytes"),
        (DateType(), "2017-13-01", "'2017-13-01' is not a valid date"),
        (DateType(), "16/11/2017", "use the ISO form YYYY-MM-DD"),
        (DateType(), dt.datetime(2017, 11, 16, 1), "this datetime has a time of day"),
        (DateType(), 2**31, "out of range for date"),
        (TimeType(), "25:00", "not a valid time of day"),
        (TimeType(), -1, "is not a time of day"),
        (TimeType(), dt.time(1, tzinfo=dt.UTC), "a time without a time zone"),
        (TimestampType(), "yesterday", "is not a timestamp; use the ISO form"),
        (TimestampType(), 1.5, "expected a datetime"),
        (TimestampNanoType(), "9999-01-01", "out of range for long"),
        (UnknownType(), 1, "a column of type unknown holds only nulls"),
        (ListType(1, IntegerType()), "abc", "expected a list"),
    ],
)
def test_from_python_errors(t: IcebergType, value: Any, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        from_python(t, value)
    assert message in str(info.value)


def test_to_python() -> None:
    assert to_python(DateType(), 17486) == dt.date(2017, 11, 16)
    assert to_python(TimeType(), 81068000001) == dt.time(22, 31, 8, 1)
    assert to_python(TimestampType(), TS) == dt.datetime(2017, 11, 16, 22, 31, 8)
    assert to_python(TimestamptzType(), -1) == dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC)
    nanos = to_python(TimestampNanoType(), TS * 1000 + 1)
    assert isinstance(nanos, pd.Timestamp) and nanos.nanosecond == 1 and nanos.tzinfo is None
    assert to_python(TimestamptzNanoType(), 0).tzinfo is not None
    assert to_python(DecimalType(4, 2), Decimal("14.20")) == Decimal("14.20")
    assert to_python(StructType(NestedField(1, "d", DateType())), {"d": 0}) == {"d": dt.date(1970, 1, 1)}
    assert to_python(IntegerType(), None) is None
    with pytest.raises(ValidationError, match="outside the range Python can represent"):
        to_python(DateType(), 2**31 - 1)


@settings(max_examples=200, deadline=None)
@given(st.datetimes(timezones=st.none()))
def test_python_round_trips(value: dt.datetime) -> None:
    nanos_fit = dt.datetime(1677, 9, 22) <= value <= dt.datetime(2262, 4, 11)
    if not nanos_fit:
        with pytest.raises(ValidationError, match="out of range for long"):
            from_python(TimestampNanoType(), value)
    for t in (TimestampType(), TimestampNanoType()) if nanos_fit else (TimestampType(),):
        internal = from_python(t, value)
        assert to_python(t, internal) == value
        assert from_python(t, to_json_value(t, internal)) == internal
    assert to_python(DateType(), from_python(DateType(), value.date())) == value.date()
    assert to_python(TimeType(), from_python(TimeType(), value.time())) == value.time()
    aware = value.replace(tzinfo=dt.UTC)
    assert to_python(TimestamptzType(), from_python(TimestamptzType(), aware)) == aware


@settings(max_examples=300, deadline=None)
@given(st.integers(-(10**9), 10**9))
def test_calendar_matches_python(days: int) -> None:
    y, m, d = civil_from_days(days)
    assert days_from_civil(y, m, d) == days
    if -719162 <= days <= 2932896:
        assert dt.date(y, m, d) == dt.date(1970, 1, 1) + dt.timedelta(days=days)
        assert format_date(days) == dt.date(y, m, d).isoformat()


def test_far_dates_format_as_java() -> None:
    assert format_date(days_from_civil(10000, 1, 1)) == "+10000-01-01"
    assert format_date(days_from_civil(-1, 3, 1)) == "-0001-03-01"
    assert from_python(DateType(), "+10000-01-01") == days_from_civil(10000, 1, 1)


# -- truncated bounds (Iceberg's truncate(16) metrics) ---------------------------------------------


@pytest.mark.parametrize(
    ("value", "n", "lower", "upper"),
    [
        ("iceberg", 16, "iceberg", "iceberg"),
        ("abcdefgh", 3, "abc", "abd"),
        ("ab\U0010ffff\U0010ffffzz", 4, "ab\U0010ffff\U0010ffff", "ac"),
        ("\U0010ffff\U0010ffffx", 2, "\U0010ffff\U0010ffff", None),
        ("a\ud7ffxyz", 2, "a\ud7ff", "a\ue000"),  # skips the surrogate range
        ("日本語テキスト", 2, "日本", "日札"),
        ("😀😀😀", 2, "😀😀", "😀😁"),
    ],
)
def test_truncated_string_bounds(value: str, n: int, lower: str, upper: str | None) -> None:
    assert truncate_lower_bound(StringType(), value, n) == lower
    assert truncate_upper_bound(StringType(), value, n) == upper
    if upper is not None:
        # An upper bound is above every value that starts with the prefix, in UTF-8 byte order.
        assert upper.encode() >= value.encode()
        assert len(upper) <= n


@pytest.mark.parametrize(
    ("value", "n", "lower", "upper"),
    [
        (b"\x01\x02\x03\x04", 8, b"\x01\x02\x03\x04", b"\x01\x02\x03\x04"),
        (b"\x01\x02\x03\x04", 2, b"\x01\x02", b"\x01\x03"),
        (b"\x01\xff\xff\x00", 3, b"\x01\xff\xff", b"\x02"),
        (b"\xff\xff\x00", 2, b"\xff\xff", None),
    ],
)
def test_truncated_binary_bounds(value: bytes, n: int, lower: bytes, upper: bytes | None) -> None:
    assert truncate_lower_bound(BinaryType(), value, n) == lower
    assert truncate_upper_bound(BinaryType(), value, n) == upper


def test_truncation_leaves_other_types_alone() -> None:
    assert truncate_lower_bound(LongType(), 12345, 2) == 12345
    assert truncate_upper_bound(FixedType(4), b"\xff\xff\xff\xff", 2) == b"\xff\xff\xff\xff"
    assert truncate_upper_bound(StringType(), None, 2) is None
