"""Single values: the spec's binary and JSON forms, and Python values in and out.

Internal values are the ones in docs/dev/contracts.md (dates as days, timestamps as micros or
nanos since the epoch, decimals as ``Decimal`` at the type's scale, ...). Bounds in manifests use
the binary form of Appendix D; defaults in schemas use the JSON form. Dates and times are
formatted and parsed with our own integer arithmetic rather than ``datetime`` because Iceberg
values may lie outside Python's years 1..9999.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

from tablestore.errors import ValidationError
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

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
MICROS_PER_SECOND = 1_000_000
NANOS_PER_SECOND = 1_000_000_000
MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND
NANOS_PER_DAY = 86_400 * NANOS_PER_SECOND

_MICRO_TS = (TimestampType, TimestamptzType)
_NANO_TS = (TimestampNanoType, TimestamptzNanoType)
_UTC_TS = (TimestamptzType, TimestamptzNanoType)


# -- calendar arithmetic (proleptic Gregorian, any year) ------------------------------------


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day count since 1970-01-01 (H. Hinnant's algorithm)."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (1 if month <= 2 else 0), month, day


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a calendar date (inverse of :func:`civil_from_days`)."""
    year -= 1 if month <= 2 else 0
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def format_date(days: int) -> str:
    """ISO date as Java's LocalDate prints it (``+10000-01-01`` past year 9999)."""
    y, m, d = civil_from_days(days)
    if y > 9999:
        year = f"+{y}"
    elif y < 0:
        year = f"-{-y:04d}"
    else:
        year = f"{y:04d}"
    return f"{year}-{m:02d}-{d:02d}"


def format_time(ticks: int, per_second: int = MICROS_PER_SECOND) -> str:
    """``HH:MM:SS`` plus a 6 (micros) or 9 (nanos) digit fraction when it is not zero."""
    seconds, frac = divmod(ticks, per_second)
    minutes, sec = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    text = f"{hours:02d}:{minute:02d}:{sec:02d}"
    if frac:
        text += f".{frac:0{len(str(per_second)) - 1}d}"
    return text


def format_timestamp(ticks: int, per_second: int = MICROS_PER_SECOND, utc: bool = False) -> str:
    """``2017-11-16T22:31:08[.ffffff]``, with ``+00:00`` when ``utc``."""
    days, rest = divmod(ticks, 86_400 * per_second)
    text = f"{format_date(days)}T{format_time(rest, per_second)}"
    return text + "+00:00" if utc else text


_DATE_RE = r"(?P<y>[+-]?\d{4,})-(?P<mo>\d{1,2})-(?P<d>\d{1,2})"
_TIME_RE = r"(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<f>\d{1,9}))?)?"
_ZONE_RE = r"(?P<z>[Zz]|\s*UTC|[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)"
_DATE_ONLY = re.compile(rf"^{_DATE_RE}$")
_TIME_ONLY = re.compile(rf"^{_TIME_RE}$")
_TIMESTAMP = re.compile(rf"^{_DATE_RE}(?:[Tt ]{_TIME_RE})?{_ZONE_RE}?$")


def _checked_days(text: str, y: str, mo: str, d: str) -> int:
    year, month, day = int(y), int(mo), int(d)
    days = days_from_civil(year, month, day)
    if not 1 <= month <= 12 or civil_from_days(days) != (year, month, day):
        raise ValidationError(f"{text!r} is not a valid date; use YYYY-MM-DD")
    return days


def _time_ticks(text: str, m: re.Match[str], per_second: int) -> int:
    hours, minutes, seconds = int(m["h"]), int(m["mi"]), int(m["s"] or 0)
    if hours > 23 or minutes > 59 or seconds > 59:
        raise ValidationError(f"{text!r} is not a valid time of day; use HH:MM:SS[.ffffff]")
    digits = len(str(per_second)) - 1
    # Digits beyond the type's precision are dropped (truncated), as Spark's cast does.
    frac = int(((m["f"] or "") + "0" * 9)[:digits])
    return ((hours * 60 + minutes) * 60 + seconds) * per_second + frac


def parse_date(text: str) -> int:
    m = _DATE_ONLY.match(text.strip())
    if not m:
        raise ValidationError(f"{text!r} is not a date; use the ISO form YYYY-MM-DD, like 2024-01-31")
    return _checked_days(text, m["y"], m["mo"], m["d"])


def parse_time(text: str, per_second: int = MICROS_PER_SECOND) -> int:
    m = _TIME_ONLY.match(text.strip())
    if not m:
        raise ValidationError(f"{text!r} is not a time; use the ISO form HH:MM:SS[.ffffff]")
    return _time_ticks(text, m, per_second)


def parse_timestamp(text: str, per_second: int = MICROS_PER_SECOND) -> tuple[int, bool]:
    """Ticks since the epoch of an ISO timestamp (a zone offset is applied) and whether it had one.

    Accepts ``2024-01-02``, ``2024-01-02 13:00``, ``2024-01-02T13:00:00.123456789``, with an
    optional ``Z``/``UTC``/``+02:00`` zone.
    """
    m = _TIMESTAMP.match(text.strip())
    if not m:
        raise ValidationError(
            f"{text!r} is not a timestamp; use the ISO form 2024-01-31T13:45:00[.ffffff][+00:00]"
        )
    ticks = _checked_days(text, m["y"], m["mo"], m["d"]) * 86_400 * per_second
    if m["h"] is not None:
        ticks += _time_ticks(text, m, per_second)
    zone = m["z"]
    if zone is None:
        return ticks, False
    zone = zone.strip()
    if zone[0] in "+-":
        digits = zone[1:].replace(":", "")
        offset = int(digits[:2]) * 3600 + int(digits[2:4] or 0) * 60 + int(digits[4:6] or 0)
        ticks -= (offset if zone[0] == "+" else -offset) * per_second
    return ticks, True


# -- decimals ---------------------------------------------------------------------------------


def decimal_to_unscaled(value: Decimal, scale: int) -> int:
    """The unscaled integer of ``value`` at ``scale``; ValidationError if digits would be lost."""
    if not value.is_finite():
        raise ValidationError(f"decimal value {value} is not a finite number")
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    coefficient = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    if shift >= 0:
        unscaled = coefficient * 10**shift
    else:
        unscaled, rest = divmod(coefficient, 10**-shift)
        if rest:
            raise ValidationError(
                f"decimal value {value} has more than {scale} digits after the decimal point; "
                f"round it to {scale} places first"
            )
    return -unscaled if sign else unscaled


def unscaled_to_decimal(unscaled: int, scale: int) -> Decimal:
    # Built from a tuple so that 38-digit values are exact (Decimal arithmetic rounds to 28).
    return Decimal((1 if unscaled < 0 else 0, tuple(int(c) for c in str(abs(unscaled))), -scale))


def decimal_value_scale(value: Decimal) -> int:
    exponent = value.as_tuple().exponent
    return -exponent if isinstance(exponent, int) else 0


def min_bytes_twos_complement(value: int) -> bytes:
    """Big-endian two's complement in the fewest bytes (Java's BigInteger.toByteArray)."""
    bits = value.bit_length() if value >= 0 else (~value).bit_length()
    return value.to_bytes(bits // 8 + 1, "big", signed=True)


# -- binary single-value serialization (Appendix D) ------------------------------------------


def to_bytes(t: IcebergType, value: Any) -> bytes:
    """The spec's single-value binary form (used for bounds and partition summaries)."""
    try:
        if isinstance(t, BooleanType):
            return b"\x01" if value else b"\x00"
        if isinstance(t, IntegerType | DateType):
            return struct.pack("<i", value)
        if isinstance(t, (LongType, TimeType, *_MICRO_TS, *_NANO_TS)):
            return struct.pack("<q", value)
        if isinstance(t, FloatType):
            return struct.pack("<f", value)
        if isinstance(t, DoubleType):
            return struct.pack("<d", value)
        if isinstance(t, StringType):
            return bytes(value.encode("utf-8"))
        if isinstance(t, UUIDType):
            return _uuid(value).bytes
        if isinstance(t, FixedType | BinaryType):
            return bytes(value)
        if isinstance(t, DecimalType):
            return min_bytes_twos_complement(decimal_to_unscaled(Decimal(value), t.scale))
    except (struct.error, OverflowError, TypeError, AttributeError, UnicodeEncodeError) as e:
        raise ValidationError(f"cannot serialize {value!r} as a {t} value: {e}") from e
    raise ValidationError(f"type {t} has no single-value binary form")


def from_bytes(t: IcebergType, data: bytes | bytearray | memoryview) -> Any:
    """Inverse of :func:`to_bytes`; also reads bounds written before a type promotion."""
    raw = bytes(data)
    try:
        if isinstance(t, BooleanType):
            return raw != b"\x00"
        if isinstance(t, IntegerType | DateType):
            return struct.unpack("<i", raw)[0]
        if isinstance(t, (*_MICRO_TS, *_NANO_TS)) and len(raw) == 4:
            # A timestamp promoted from a date (format v3) keeps its files' 4-byte date bounds:
            # days, which the spec says to read as midnight of that day.
            days = struct.unpack("<i", raw)[0]
            return days * (NANOS_PER_DAY if isinstance(t, _NANO_TS) else MICROS_PER_DAY)
        if isinstance(t, (LongType, TimeType, *_MICRO_TS, *_NANO_TS)):
            # A long promoted from int keeps its old 4-byte bounds (Java reads them the same way).
            return struct.unpack("<i" if len(raw) == 4 else "<q", raw)[0]
        if isinstance(t, FloatType):
            return struct.unpack("<f", raw)[0]
        if isinstance(t, DoubleType):
            return struct.unpack("<f" if len(raw) == 4 else "<d", raw)[0]
        if isinstance(t, StringType):
            return raw.decode("utf-8")
        if isinstance(t, UUIDType):
            return uuid.UUID(bytes=raw)
        if isinstance(t, FixedType | BinaryType):
            return raw
        if isinstance(t, DecimalType):
            return unscaled_to_decimal(int.from_bytes(raw, "big", signed=True), t.scale)
    except (struct.error, ValueError) as e:
        raise ValidationError(f"cannot read a {t} value from bytes {raw.hex()}: {e}") from e
    raise ValidationError(f"type {t} has no single-value binary form")


# -- JSON single-value serialization (Appendix D) --------------------------------------------


def to_json_value(t: IcebergType, value: Any) -> Any:
    """The spec's JSON single-value form of an internal value (defaults, REST payloads)."""
    if value is None:
        return None
    if isinstance(t, BooleanType | IntegerType | LongType | StringType):
        return value
    if isinstance(t, FloatType | DoubleType):
        return float(value)
    if isinstance(t, DecimalType):
        # Plain notation with exactly `scale` fraction digits, as the spec (and Java) write it.
        return format(unscaled_to_decimal(decimal_to_unscaled(Decimal(value), t.scale), t.scale), "f")
    if isinstance(t, DateType):
        return format_date(value)
    if isinstance(t, TimeType):
        return format_time(value)
    if isinstance(t, _MICRO_TS):
        return format_timestamp(value, MICROS_PER_SECOND, isinstance(t, TimestamptzType))
    if isinstance(t, _NANO_TS):
        return format_timestamp(value, NANOS_PER_SECOND, isinstance(t, TimestamptzNanoType))
    if isinstance(t, UUIDType):
        return str(_uuid(value))
    if isinstance(t, FixedType | BinaryType):
        return bytes(value).hex()
    if isinstance(t, StructType):
        return {str(f.field_id): to_json_value(f.field_type, v) for f, v in _struct_items(t, value)}
    if isinstance(t, ListType):
        return [to_json_value(t.element_type, v) for v in value]
    if isinstance(t, MapType):
        items = list(value.items())
        return {
            "keys": [to_json_value(t.key_type, k) for k, _ in items],
            "values": [to_json_value(t.value_type, v) for _, v in items],
        }
    raise ValidationError(f"type {t} has no JSON single-value form")


def from_json_value(t: IcebergType, obj: Any) -> Any:
    """Inverse of :func:`to_json_value`. Structs come back as dicts keyed by field name."""
    if obj is None:
        return None

    def bad(expected: str) -> ValidationError:
        return ValidationError(f"cannot read {obj!r} as a {t} value: expected {expected}")

    if isinstance(t, BooleanType):
        if not isinstance(obj, bool):
            raise bad("true or false")
        return obj
    if isinstance(t, IntegerType | LongType):
        if isinstance(obj, bool) or not isinstance(obj, int):
            raise bad("a JSON integer")
        return _range_checked(t, obj)
    if isinstance(t, FloatType | DoubleType):
        if isinstance(obj, bool) or not isinstance(obj, int | float):
            raise bad("a JSON number")
        return float(obj)
    if isinstance(t, StructType):
        if not isinstance(obj, dict):
            raise bad("an object keyed by field id")
        return {
            f.name: from_json_value(f.field_type, obj.get(str(f.field_id)))
            for f in t.fields
        }
    if isinstance(t, ListType):
        if not isinstance(obj, list):
            raise bad("a JSON array")
        return [from_json_value(t.element_type, v) for v in obj]
    if isinstance(t, MapType):
        if not isinstance(obj, dict) or len(obj.get("keys") or []) != len(obj.get("values") or []):
            raise bad('{"keys": [...], "values": [...]} with as many keys as values')
        return {
            from_json_value(t.key_type, k): from_json_value(t.value_type, v)
            for k, v in zip(obj["keys"], obj["values"], strict=True)
        }
    if not isinstance(obj, str):
        raise bad("a JSON string")
    if isinstance(t, DecimalType):
        value = _parse_decimal(obj)
        if decimal_value_scale(value) != t.scale:
            raise bad(f"a decimal string with exactly {t.scale} digits after the point")
        return _decimal_in_type(t, value)
    if isinstance(t, FixedType | BinaryType):
        try:
            data = bytes.fromhex(obj)
        except ValueError:
            raise bad("a hexadecimal string") from None
        if isinstance(t, FixedType) and len(data) != t.length:
            raise bad(f"{t.length} bytes ({2 * t.length} hex digits)")
        return data
    return from_python(t, obj)


# -- Python values in and out ---------------------------------------------------------------


def from_python(t: IcebergType, value: Any) -> Any:
    """The internal value for a Python value given by a user, a SQL literal or Parquet statistics.

    Lenient the way a SQL user expects: ISO strings for dates, times and timestamps, ``datetime``
    objects, numpy and pandas scalars, strings for decimals and UUIDs. Conversions that would
    lose information (a float for an int column, too many decimal places) raise ValidationError.
    """
    if value is None or _is_missing(value):
        return None
    value = _unwrap_numpy(value)
    converter = _FROM_PYTHON.get(type(t))
    if converter is not None:
        return converter(t, value)
    if isinstance(t, StructType):
        return {f.name: from_python(f.field_type, v) for f, v in _struct_items(t, value)}
    if isinstance(t, ListType):
        if isinstance(value, str | bytes | dict) or not hasattr(value, "__iter__"):
            raise _not_convertible(t, value, "a list")
        return [from_python(t.element_type, v) for v in value]
    if isinstance(t, MapType):
        items = value.items() if isinstance(value, dict) else value
        try:
            return {from_python(t.key_type, k): from_python(t.value_type, v) for k, v in items}
        except (TypeError, ValueError) as e:
            if isinstance(e, ValidationError):
                raise
            raise _not_convertible(t, value, "a dict") from e
    if isinstance(t, UnknownType):
        raise _not_convertible(t, value, "null (a column of type unknown holds only nulls)")
    raise _not_convertible(t, value, "a supported value")


def to_python(t: IcebergType, value: Any) -> Any:
    """The Python value of an internal value: ``date``, ``time``, ``datetime``, ``Decimal``, ``UUID``.

    Nanosecond timestamps come back as ``pandas.Timestamp`` (a ``datetime`` that keeps nanos).
    """
    if value is None:
        return None
    try:
        if isinstance(t, DateType):
            return dt.date(*civil_from_days(value))
        if isinstance(t, TimeType):
            seconds, micros = divmod(value, MICROS_PER_SECOND)
            return dt.time(seconds // 3600, seconds // 60 % 60, seconds % 60, micros)
        if isinstance(t, _MICRO_TS):
            days, rest = divmod(value, MICROS_PER_DAY)
            naive = dt.datetime(*civil_from_days(days)) + dt.timedelta(microseconds=rest)
            return naive.replace(tzinfo=dt.UTC) if isinstance(t, TimestamptzType) else naive
        if isinstance(t, _NANO_TS):
            import pandas as pd

            return pd.Timestamp(value, unit="ns", tz="UTC" if isinstance(t, TimestamptzNanoType) else None)
    except (ValueError, OverflowError) as e:
        raise ValidationError(f"{t} value {value} is outside the range Python can represent: {e}") from e
    if isinstance(t, DecimalType | UUIDType | FixedType | BinaryType):
        return value
    if isinstance(t, StructType):
        source = value if isinstance(value, dict) else dict(
            zip((f.name for f in t.fields), value, strict=False)
        )
        return {f.name: to_python(f.field_type, source.get(f.name)) for f in t.fields}
    if isinstance(t, ListType):
        return [to_python(t.element_type, v) for v in value]
    if isinstance(t, MapType):
        return {to_python(t.key_type, k): to_python(t.value_type, v) for k, v in value.items()}
    return value


# -- truncated bounds (write.metadata.metrics.default=truncate(N)) ---------------------------


def truncate_lower_bound(t: IcebergType, value: Any, n: int) -> Any:
    """A lower bound of at most ``n`` code points (strings) or bytes (binary): the prefix."""
    if isinstance(t, StringType | BinaryType) and value is not None:
        return value[:n]
    return value


def truncate_upper_bound(t: IcebergType, value: Any, n: int) -> Any:
    """An upper bound of at most ``n`` code points / bytes, or None when none exists.

    The prefix is made larger than every value that starts with it by incrementing its last
    code point (or byte); trailing ones that cannot be incremented are dropped, as Iceberg's
    UnicodeUtil.truncateStringMax and BinaryUtil.truncateBinaryMax do.
    """
    if value is None or not isinstance(t, StringType | BinaryType) or len(value) <= n:
        return value
    if isinstance(t, StringType):
        prefix = value[:n]
        for i in range(len(prefix) - 1, -1, -1):
            code = ord(prefix[i]) + 1
            if 0xD800 <= code <= 0xDFFF:
                code = 0xE000  # surrogates are not characters; the next one is U+E000
            if code <= 0x10FFFF:
                return prefix[:i] + chr(code)
        return None
    data = bytes(value[:n])
    for i in range(len(data) - 1, -1, -1):
        if data[i] != 0xFF:
            return data[:i] + bytes([data[i] + 1])
    return None


# -- helpers of from_python ------------------------------------------------------------------


def _not_convertible(t: IcebergType, value: Any, expected: str) -> ValidationError:
    return ValidationError(
        f"cannot use {value!r} ({type(value).__name__}) as a {t} value; expected {expected}"
    )


def _is_missing(value: Any) -> bool:
    # pandas.NA / NaT and numpy NaT are nulls; NaN floats are values.
    if type(value).__name__ in ("NAType", "NaTType"):
        return True
    return isinstance(value, np.datetime64 | np.timedelta64) and bool(np.isnat(value))


def _unwrap_numpy(value: Any) -> Any:
    if isinstance(value, np.generic):
        if isinstance(value, np.datetime64 | np.timedelta64):
            unit = np.datetime_data(value.dtype)[0]
            if unit == "ns":
                ticks, per_second = int(value.astype(np.int64)), NANOS_PER_SECOND
            else:
                target = "datetime64[us]" if isinstance(value, np.datetime64) else "timedelta64[us]"
                try:
                    ticks, per_second = int(value.astype(target).astype(np.int64)), MICROS_PER_SECOND
                except (TypeError, ValueError) as e:
                    raise ValidationError(f"numpy value {value!r} cannot be converted: {e}") from e
            return _NumpyTicks(ticks, per_second, duration=isinstance(value, np.timedelta64))
        return value.item()
    return value


class _NumpyTicks:
    """A numpy datetime64/timedelta64 as integer ticks of a unit, without losing nanoseconds."""

    def __init__(self, ticks: int, per_second: int, duration: bool = False) -> None:
        self.ticks, self.per_second, self.duration = ticks, per_second, duration

    def to(self, per_second: int) -> int:
        if per_second >= self.per_second:
            return self.ticks * (per_second // self.per_second)
        return self.ticks // (self.per_second // per_second)

    def __repr__(self) -> str:
        return f"numpy {'timedelta' if self.duration else 'datetime'} of {self.ticks} ticks"


def _range_checked(t: IcebergType, value: int) -> int:
    low, high = (INT_MIN, INT_MAX) if isinstance(t, IntegerType | DateType) else (LONG_MIN, LONG_MAX)
    if not low <= value <= high:
        raise ValidationError(f"value {value} is out of range for {t} ({low} to {high})")
    return value


def _to_int(t: IcebergType, value: Any) -> int:
    if isinstance(value, bool):
        raise _not_convertible(t, value, "an integer (booleans are not numbers in SQL)")
    if isinstance(value, int):
        return _range_checked(t, value)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return _range_checked(t, int(value))
    if isinstance(value, float | Decimal):
        raise _not_convertible(t, value, "an integer; a fractional number is not converted implicitly")
    raise _not_convertible(t, value, "an integer")


def _to_float(t: IcebergType, value: Any) -> float:
    if isinstance(value, bool):
        raise _not_convertible(t, value, "a number")
    if isinstance(value, int | float | Decimal):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise _not_convertible(t, value, "a number")


def _to_bool(t: IcebergType, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _not_convertible(t, value, "true or false")


def _parse_decimal(text: str) -> Decimal:
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise ValidationError(f"{text!r} is not a decimal number") from None
    if not value.is_finite():
        raise ValidationError(f"{text!r} is not a finite decimal number")
    return value


def _decimal_in_type(t: DecimalType, value: Decimal) -> Decimal:
    unscaled = decimal_to_unscaled(value, t.scale)
    if len(str(abs(unscaled))) > t.precision:
        raise ValidationError(
            f"decimal value {value} does not fit {t}: it needs more than {t.precision} digits"
        )
    return unscaled_to_decimal(unscaled, t.scale)


def _to_decimal(t: IcebergType, value: Any) -> Decimal:
    assert isinstance(t, DecimalType)
    if isinstance(value, bool):
        raise _not_convertible(t, value, "a decimal number")
    if isinstance(value, Decimal):
        number = value
    elif isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise _not_convertible(t, value, "a finite number")
        number = Decimal(repr(value))  # the shortest decimal that reads back as this float
    elif isinstance(value, str):
        number = _parse_decimal(value)
    else:
        raise _not_convertible(t, value, "a Decimal, int, float or decimal string")
    return _decimal_in_type(t, number)


def _to_string(t: IcebergType, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise _not_convertible(t, value, "a str or UTF-8 bytes") from None
    raise _not_convertible(t, value, "a str")


def _uuid(value: Any) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, bytes | bytearray | memoryview) and len(value) == 16:
        return uuid.UUID(bytes=bytes(value))
    if isinstance(value, str):
        try:
            return uuid.UUID(value.strip())
        except ValueError:
            pass
    raise _not_convertible(UUIDType(), value, "a UUID, its string or its 16 bytes")


def _to_bytes_value(t: IcebergType, value: Any) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise _not_convertible(t, value, "bytes")
    data = bytes(value)
    if isinstance(t, FixedType) and len(data) != t.length:
        raise ValidationError(f"a {t} value must be exactly {t.length} bytes, got {len(data)}")
    return data


def _to_date(t: IcebergType, value: Any) -> int:
    if isinstance(value, dt.datetime):
        if value.timetz().replace(tzinfo=None) != dt.time(0):
            raise _not_convertible(t, value, "a date; this datetime has a time of day")
        return days_from_civil(value.year, value.month, value.day)
    if isinstance(value, dt.date):
        return days_from_civil(value.year, value.month, value.day)
    if isinstance(value, _NumpyTicks) and not value.duration:
        return value.to(1) // 86_400
    if isinstance(value, str):
        return _range_checked(t, parse_date(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return _range_checked(t, value)
    raise _not_convertible(t, value, "a date, an ISO date string or days since 1970-01-01")


def _to_time(t: IcebergType, value: Any) -> int:
    if isinstance(value, dt.time):
        if value.tzinfo is not None:
            raise _not_convertible(t, value, "a time without a time zone")
        return ((value.hour * 60 + value.minute) * 60 + value.second) * MICROS_PER_SECOND + value.microsecond
    if isinstance(value, dt.timedelta):
        ticks = (value.days * 86_400 + value.seconds) * MICROS_PER_SECOND + value.microseconds
    elif isinstance(value, _NumpyTicks) and value.duration:
        ticks = value.to(MICROS_PER_SECOND)
    elif isinstance(value, str):
        return parse_time(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        ticks = value
    else:
        raise _not_convertible(t, value, "a time, an ISO time string or microseconds since midnight")
    if not 0 <= ticks < MICROS_PER_DAY:
        raise ValidationError(f"{value!r} is not a time of day (must be in 00:00:00 .. 23:59:59.999999)")
    return ticks


def _to_timestamp(t: IcebergType, value: Any) -> int:
    per_second = NANOS_PER_SECOND if isinstance(t, _NANO_TS) else MICROS_PER_SECOND
    if isinstance(value, dt.datetime):
        if type(value).__module__.startswith("pandas") and hasattr(value, "value"):
            # pandas.Timestamp keeps nanoseconds; its .value is ns since the epoch in UTC.
            nanos = int(value.value)
            ticks = nanos if per_second == NANOS_PER_SECOND else nanos // 1000
            return _range_checked(LongType(), ticks)
        if value.tzinfo is not None and value.utcoffset() is not None:
            # Aware values are instants; a timestamp without zone stores their UTC wall time.
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        days = days_from_civil(value.year, value.month, value.day)
        seconds = days * 86_400 + value.hour * 3600 + value.minute * 60 + value.second
        ticks = seconds * per_second + value.microsecond * (per_second // MICROS_PER_SECOND)
        return _range_checked(LongType(), ticks)
    if isinstance(value, dt.date):
        days = days_from_civil(value.year, value.month, value.day)
        return _range_checked(LongType(), days * 86_400 * per_second)
    if isinstance(value, _NumpyTicks) and not value.duration:
        return _range_checked(LongType(), value.to(per_second))
    if isinstance(value, str):
        # Strings without a zone are taken as UTC for timestamptz (a UTC session time zone).
        return _range_checked(LongType(), parse_timestamp(value, per_second)[0])
    if isinstance(value, int) and not isinstance(value, bool):
        return _range_checked(LongType(), value)
    unit = "nanoseconds" if per_second == NANOS_PER_SECOND else "microseconds"
    raise _not_convertible(t, value, f"a datetime, an ISO timestamp string or {unit} since the epoch")


_FROM_PYTHON: dict[type, Callable[[Any, Any], Any]] = {
    BooleanType: _to_bool,
    IntegerType: _to_int,
    LongType: _to_int,
    FloatType: _to_float,
    DoubleType: _to_float,
    DecimalType: _to_decimal,
    StringType: _to_string,
    UUIDType: lambda t, v: _uuid(v),
    FixedType: _to_bytes_value,
    BinaryType: _to_bytes_value,
    DateType: _to_date,
    TimeType: _to_time,
    TimestampType: _to_timestamp,
    TimestamptzType: _to_timestamp,
    TimestampNanoType: _to_timestamp,
    TimestamptzNanoType: _to_timestamp,
}


def _struct_items(t: StructType, value: Any) -> list[tuple[Any, Any]]:
    """(field, value) pairs of a struct value given as a dict (by name or id) or a sequence."""
    if isinstance(value, dict):
        out = []
        for f in t.fields:
            if f.name in value:
                out.append((f, value[f.name]))
            else:
                out.append((f, value.get(f.field_id, value.get(str(f.field_id)))))
        return out
    if isinstance(value, list | tuple):
        if len(value) != len(t.fields):
            raise ValidationError(f"a {t} value needs {len(t.fields)} fields, got {len(value)}")
        return list(zip(t.fields, value, strict=True))
    raise _not_convertible(t, value, "a dict or a tuple of field values")
