"""Partition and sort transforms (format/spec.md, "Partition Transforms", Appendix B).

Each transform works on one internal value (:meth:`Transform.apply`) and, vectorized, on Arrow
arrays (:meth:`Transform.apply_arrow`), which is what the writer runs on every batch. The two
must agree bit for bit, so both follow the spec's integer arithmetic: floor division for times
before 1970 and for negative truncation, Murmur3 x86-32 (seed 0) of the spec's hash encoding.

Integer internal values do not say what they count (days? micros? nanos?), so the time
transforms and the bucket of ``timestamp_ns`` need the source type: pass ``source_type`` to
:meth:`apply` (Arrow arrays carry their own type, except plain integer arrays).
"""

from __future__ import annotations

import base64
import datetime as dt
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar

import mmh3
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablestore.errors import UnsupportedError, ValidationError
from tablestore.spec.schemas import conversions as conv
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
    LongType,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

_TIMESTAMPS = (TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)
_NANOS = (TimestampNanoType, TimestamptzNanoType)
_BUCKET_SOURCES = (
    IntegerType, LongType, DecimalType, DateType, TimeType, *_TIMESTAMPS,
    StringType, UUIDType, FixedType, BinaryType,
)
_TRUNCATE_SOURCES = (IntegerType, LongType, DecimalType, StringType, BinaryType)
_INT_MAX = 0x7FFFFFFF


# -- Murmur3 x86 32-bit, vectorized -----------------------------------------------------------

_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix_k(k: np.ndarray) -> np.ndarray:
    return _rotl(k * _C1, 15) * _C2


def _murmur3_rows(words: np.ndarray, tail: np.ndarray, length: int) -> np.ndarray:
    """Murmur3_x86_32 (seed 0) of n byte strings of one length, as int32.

    ``words`` holds each row's whole 4-byte little-endian blocks (n x length//4 uint32) and
    ``tail`` its remaining bytes (n x length%4 uint8). numpy uint32 arithmetic wraps like C's.
    """
    h = np.zeros(words.shape[0], dtype=np.uint32)
    for j in range(words.shape[1]):
        h ^= _mix_k(words[:, j])
        h = _rotl(h, 13) * np.uint32(5) + np.uint32(0xE6546B64)
    if tail.shape[1]:
        k = np.zeros(words.shape[0], dtype=np.uint32)
        for i in range(tail.shape[1]):
            k |= tail[:, i].astype(np.uint32) << np.uint32(8 * i)
        h ^= _mix_k(k)
    h ^= np.uint32(length)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h.view(np.int32)


def murmur3_longs(values: np.ndarray) -> np.ndarray:
    """The spec's hashLong: Murmur3 of each int64 as 8 little-endian bytes."""
    words = np.ascontiguousarray(values, dtype="<i8").view("<u4").reshape(-1, 2)
    return _murmur3_rows(words, np.empty((len(words), 0), np.uint8), 8)


def _murmur3_fixed(raw: np.ndarray) -> np.ndarray:
    """Murmur3 of each row of an (n x L) uint8 matrix."""
    whole = raw.shape[1] // 4 * 4
    words = np.ascontiguousarray(raw[:, :whole]).view("<u4").reshape(raw.shape[0], whole // 4)
    return _murmur3_rows(words, raw[:, whole:], raw.shape[1])


def hash_value(value: Any, source_type: IcebergType | None = None) -> int:
    """The spec's 32-bit hash (Appendix B) of one internal value."""
    value = _coerce(value, source_type)
    if isinstance(value, bool) or isinstance(source_type, BooleanType | FloatType | DoubleType):
        raise ValidationError(f"bucket cannot hash {value!r}: booleans and floats are not bucketable")
    if isinstance(value, int):
        if isinstance(source_type, _NANOS):
            value //= 1000  # nanos hash as micros, so timestamp and timestamp_ns agree
        return int(mmh3.hash(value.to_bytes(8, "little", signed=True)))
    if isinstance(value, Decimal):
        scale = source_type.scale if isinstance(source_type, DecimalType) else conv.decimal_value_scale(value)
        return int(mmh3.hash(conv.min_bytes_twos_complement(conv.decimal_to_unscaled(value, scale))))
    if isinstance(value, str):
        return int(mmh3.hash(value.encode("utf-8")))
    if isinstance(value, uuid.UUID):
        return int(mmh3.hash(value.bytes))
    if isinstance(value, bytes | bytearray | memoryview):
        return int(mmh3.hash(bytes(value)))
    raise ValidationError(f"bucket cannot hash {value!r} of type {type(value).__name__}")


# -- Arrow helpers ----------------------------------------------------------------------------


def _prepare(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous array at offset 0, so its validity buffer can be reused for results."""
    if isinstance(array, pa.ChunkedArray):
        array = array.chunk(0) if array.num_chunks == 1 else array.combine_chunks()
    if isinstance(array.type, pa.BaseExtensionType):
        array = array.storage
    if array.offset:
        array = pa.concat_arrays([array])
    return array


def _result(values: np.ndarray, like: pa.Array, arrow_type: pa.DataType) -> pa.Array:
    """An Arrow array of ``values`` with the nulls of ``like`` (same length, offset 0)."""
    data = pa.py_buffer(np.ascontiguousarray(values))
    validity = like.buffers()[0] if like.null_count else None
    return pa.Array.from_buffers(arrow_type, len(like), [validity, data], null_count=like.null_count)


def _fixed_width_values(array: pa.Array, dtype: str) -> np.ndarray:
    """Zero-copy view of a fixed-width array's values; slots under nulls hold garbage."""
    buf = array.buffers()[1]
    if buf is None or len(array) == 0:
        return np.zeros(len(array), dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=len(array))


_UNITS_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


def _ticks(array: pa.Array, source_type: IcebergType | None, what: str) -> tuple[np.ndarray, int]:
    """Int64 values of a date/time/timestamp array and how many of them make a day."""
    t = array.type
    if pa.types.is_date32(t):
        return _fixed_width_values(array, "<i4").astype(np.int64), 1
    if pa.types.is_date64(t):
        return _fixed_width_values(array, "<i8"), 86_400_000
    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return _fixed_width_values(array, "<i8"), 86_400 * _UNITS_PER_SECOND[t.unit]
    if pa.types.is_time32(t):
        return _fixed_width_values(array, "<i4").astype(np.int64), 86_400 * _UNITS_PER_SECOND[t.unit]
    if pa.types.is_integer(t):
        if isinstance(source_type, DateType):
            per_day = 1
        elif isinstance(source_type, _NANOS):
            per_day = conv.NANOS_PER_DAY
        elif isinstance(source_type, TimestampType | TimestamptzType | TimeType):
            per_day = conv.MICROS_PER_DAY
        else:
            raise ValidationError(
                f"{what} of an integer array needs the column's Iceberg type: pass source_type="
            )
        return _fixed_width_values(array.cast(pa.int64()), "<i8"), per_day
    raise ValidationError(f"{what} cannot be applied to Arrow type {t}")


def _map_uniques(array: pa.Array, fn: Callable[[Any], Any], arrow_type: pa.DataType) -> pa.Array:
    """Apply a per-value Python function once per distinct value (cheap for repetitive data)."""
    encoded = pc.dictionary_encode(array)
    mapped = pa.array([fn(v) for v in encoded.dictionary.to_pylist()], type=arrow_type)
    return mapped.take(encoded.indices)


# -- human strings (Transform.toHumanString) --------------------------------------------------


def _java_float_string(value: float, single: bool) -> str:
    """Java's Float/Double.toString: shortest digits, scientific outside [1e-3, 1e7)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    shortest = Decimal(str(np.float32(value)) if single else repr(value))
    sign = "-" if shortest < 0 else ""
    shortest = abs(shortest)
    if Decimal("0.001") <= shortest < Decimal(10_000_000):
        whole, _, frac = format(shortest, "f").partition(".")
        return f"{sign}{whole}.{frac.rstrip('0') or '0'}"
    digits = "".join(map(str, shortest.as_tuple().digits)).rstrip("0") or "0"
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mantissa}E{shortest.adjusted()}"


def human_string(result_type: IcebergType, value: Any) -> str:
    """A value as Java's Transform.toHumanString prints it in partition paths."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(result_type, DateType) and isinstance(value, int):
        return conv.format_date(value)
    if isinstance(result_type, TimeType) and isinstance(value, int):
        return conv.format_time(value)
    if isinstance(result_type, TimestampType | TimestamptzType) and isinstance(value, int):
        return conv.format_timestamp(value, conv.MICROS_PER_SECOND, isinstance(result_type, TimestamptzType))
    if isinstance(result_type, _NANOS) and isinstance(value, int):
        return conv.format_timestamp(
            value, conv.NANOS_PER_SECOND, isinstance(result_type, TimestamptzNanoType)
        )
    if isinstance(value, bytes | bytearray | memoryview) and not isinstance(result_type, UUIDType):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(result_type, UUIDType):
        return str(conv.from_python(UUIDType(), value))
    if isinstance(value, float):
        return _java_float_string(value, isinstance(result_type, FloatType))
    return str(value)


# -- transforms -------------------------------------------------------------------------------


def _coerce(value: Any, source_type: IcebergType | None) -> Any:
    """Internal value of external date/time objects, so ``apply`` also takes ``datetime``s."""
    if isinstance(value, dt.date | dt.time | np.generic) and not isinstance(value, np.bool_):
        if source_type is None:
            if isinstance(value, dt.datetime):
                source_type = TimestamptzType() if value.tzinfo else TimestampType()
            elif isinstance(value, dt.date):
                source_type = DateType()
            elif isinstance(value, dt.time):
                source_type = TimeType()
            else:
                return value.item()
        return conv.from_python(source_type, value)
    return value


@dataclass(frozen=True)
class Transform:
    """Base of the transforms; subclasses are immutable values compared by their fields."""

    accepts: ClassVar[str] = "any primitive column"

    def __str__(self) -> str:
        raise NotImplementedError

    def can_transform(self, source: IcebergType) -> bool:
        raise NotImplementedError

    def result_type(self, source: IcebergType) -> IcebergType:
        raise NotImplementedError

    def apply(self, value: Any, source_type: IcebergType | None = None) -> Any:
        raise NotImplementedError

    def apply_arrow(
        self, array: pa.Array | pa.ChunkedArray, source_type: IcebergType | None = None
    ) -> pa.Array:
        """The transform of every value of an array (nulls stay null), vectorized."""
        arr = _prepare(array)
        if pa.types.is_dictionary(arr.type):
            # Transform each distinct value once, then expand by the indices.
            return self.apply_arrow(arr.dictionary, source_type).take(arr.indices)
        if pa.types.is_null(arr.type):
            return pa.nulls(len(arr), self._arrow_result_type(arr.type))
        return self._apply_arrow(arr, source_type)

    def _apply_arrow(self, arr: pa.Array, source_type: IcebergType | None) -> pa.Array:
        raise NotImplementedError

    def _arrow_result_type(self, source: pa.DataType) -> pa.DataType:
        return pa.int32()

    @property
    def preserves_order(self) -> bool:
        return False

    @property
    def dedup_name(self) -> str:
        """Transforms with equal dedup names on one column are redundant in a spec."""
        return str(self)

    def default_partition_name(self, source_name: str) -> str:
        raise NotImplementedError

    def to_human_string(self, result_type: IcebergType, value: Any) -> str:
        return human_string(result_type, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


@dataclass(frozen=True, repr=False)
class IdentityTransform(Transform):
    accepts: ClassVar[str] = "any primitive column"

    def __str__(self) -> str:
        return "identity"

    def can_transform(self, source: IcebergType) -> bool:
        return source.is_primitive and not isinstance(source, UnknownType)

    def result_type(self, source: IcebergType) -> IcebergType:
        return source

    def apply(self, value: Any, source_type: IcebergType | None = None) -> Any:
        return value

    def apply_arrow(
        self, array: pa.Array | pa.ChunkedArray, source_type: IcebergType | None = None
    ) -> pa.Array:
        if isinstance(array, pa.ChunkedArray):
            return array.chunk(0) if array.num_chunks == 1 else array.combine_chunks()
        return array

    @property
    def preserves_order(self) -> bool:
        return True

    def default_partition_name(self, source_name: str) -> str:
        return source_name


@dataclass(frozen=True, repr=False)
class VoidTransform(Transform):
    accepts: ClassVar[str] = "any column"

    def __str__(self) -> str:
        return "void"

    def can_transform(self, source: IcebergType) -> bool:
        return True

    def result_type(self, source: IcebergType) -> IcebergType:
        return source

    def apply(self, value: Any, source_type: IcebergType | None = None) -> Any:
        return None

    def apply_arrow(
        self, array: pa.Array | pa.ChunkedArray, source_type: IcebergType | None = None
    ) -> pa.Array:
        return pa.nulls(len(array), array.type)

    def default_partition_name(self, source_name: str) -> str:
        return f"{source_name}_null"


@dataclass(frozen=True, repr=False)
class BucketTransform(Transform):
    num_buckets: int
    accepts: ClassVar[str] = (
        "int, long, decimal, date, time, timestamp, timestamptz, timestamp_ns, timestamptz_ns, "
        "string, uuid, fixed and binary columns"
    )

    def __post_init__(self) -> None:
        if isinstance(self.num_buckets, bool) or not isinstance(self.num_buckets, int) \
                or not 0 < self.num_buckets <= _INT_MAX:
            raise ValidationError(
                f"the number of buckets must be a positive integer, got {self.num_buckets!r}"
            )

    def __str__(self) -> str:
        return f"bucket[{self.num_buckets}]"

    def __repr__(self) -> str:
        return f"BucketTransform({self.num_buckets})"

    def default_partition_name(self, source_name: str) -> str:
        return f"{source_name}_bucket"

    def can_transform(self, source: IcebergType) -> bool:
        return isinstance(source, _BUCKET_SOURCES)

    def result_type(self, source: IcebergType) -> IcebergType:
        return IntegerType()

    def apply(self, value: Any, source_type: IcebergType | None = None) -> Any:
        if value is None:
            return None
        return (hash_value(value, source_type) & _INT_MAX) % self.num_buckets

    def _apply_arrow(self, arr: pa.Array, source_type: IcebergType | None) -> pa.Array:
        hashes = self._hashes(arr, source_type)
        buckets = (hashes.astype(np.int64) & _INT_MAX) % self.num_buckets
        return _result(buckets.astype(np.int32), arr, pa.int32())

    def _hashes(self, arr: pa.Array, source_type: IcebergType | None) -> np.ndarray:
        t = arr.type
        if pa.types.is_integer(t):
            # int, long, date, time and timestamp all hash their integer (hashLong), so int
            # columns promoted to long keep their buckets; nanos hash as micros.
            values = _fixed_width_values(arr.cast(pa.int64()), "<i8")
            return murmur3_longs(np.floor_divide(values, 1000) if isinstance(source_type, _NANOS) else values)
        if pa.types.is_date(t):
            values, per_day = _ticks(arr, source_type, str(self))
            return murmur3_longs(_days_np(values, per_day))
        if pa.types.is_temporal(t):
            # time, timestamp and timestamp_ns all hash microseconds.
            values, per_day = _ticks(arr, source_type, str(self))
            if per_day >= conv.MICROS_PER_DAY:
                values = np.floor_divide(values, per_day // conv.MICROS_PER_DAY)
            else:
                values = values * (conv.MICROS_PER_DAY // per_day)
            return murmur3_longs(values)
        if pa.types.is_fixed_size_binary(t):
            width, buf = t.byte_width, arr.buffers()[1]
            if buf is None or width * len(arr) == 0:
                raw = np.zeros((len(arr), width), np.uint8)
            else:
                raw = np.frombuffer(buf, np.uint8, count=width * len(arr)).reshape(len(arr), width)
            return _murmur3_fixed(raw)
        if pa.types.is_decimal(t):
            scale = t.scale
            hash_one: Callable[[Any], int] = lambda v: mmh3.hash(  # noqa: E731
                conv.min_bytes_twos_complement(conv.decimal_to_unscaled(v, scale))
            )
        elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t) \
                or pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
            # mmh3.hash takes str (hashed as UTF-8) and bytes alike.
            hash_one = mmh3.hash
        else:
            raise ValidationError(f"{self} cannot be applied to Arrow type {t}")
        hashed = _map_uniques(arr, lambda v: hash_one(v) if v is not None else None, pa.int32())
        return _fixed_width_values(_prepare(hashed), "<i4")


@dataclass(frozen=True, repr=False)
class TruncateTransform(Transform):
    width: int
    accepts: ClassVar[str] = "int, long, decimal, string and binary columns"

    def __post_init__(self) -> None:
        if isinstance(self.width, bool) or not isinstance(self.width, int) or not 0 < self.width <= _INT_MAX:
            raise ValidationError(f"the truncate width must be a positive integer, got {self.width!r}")

    def __str__(self) -> str:
        return f"truncate[{self.width}]"

    def __repr__(self) -> str:
        return f"TruncateTransform({self.width})"

    def can_transform(self, source: IcebergType) -> bool:
        return isinstance(source, _TRUNCATE_SOURCES)

    def result_type(self, source: IcebergType) -> IcebergType:
        return source

    @property
    def preserves_order(self) -> bool:
        return True

    def default_partition_name(self, source_name: str) -> str:
        return f"{source_name}_trunc"

    def apply(self, value: Any, source_type: IcebergType | None = None) -> Any:
        if value is None:
            return None
        if isinstance(value, bool):
            raise ValidationError(f"{self} cannot truncate a boolean")
        if isinstance(value, int):
            result = value - value % self.width  # Python's % already floors (remainder >= 0)
            bits_by_type: dict[type, int] = {IntegerType: 32, LongType: 64}
            bits = bits_by_type.get(type(source_type), 0)
            if bits and not -(2 ** (bits - 1)) <= result < 2 ** (bits - 1):
                # Java's int/long arithmetic wraps just above MIN_VALUE; so does the Arrow path.
                result = (result + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)
            return result
        if isinstance(value, str | bytes):
            return value[: self.width]  # str slices by code points, bytes by bytes
        if isinstance(value, bytearray | memoryview):
            return bytes(value[: self.width])
        if isinstance(value, Decimal):
            scale = source_type.scale if isinstance(source_type, DecimalType) \
                else conv.decimal_value_scale(value)
            unscaled = conv.decimal_to_unscaled(value, scale)
            return conv.unscaled_to_decimal(unscaled - unscaled % self.width, scale)
        raise ValidationError(f"{self} cannot truncate {value!r} of type {type(value).__name__}")

    def _arrow_result_type(self, source: pa.DataType) -> pa.DataType:
        return source

    def _apply_arrow(self, arr: pa.Array, source_type: IcebergType | None) -> pa.Array:
        t = arr.type
        if pa.types.is_integer(t):
            values = _fixed_width_values(arr, t.to_pandas_dtype().__name__).astype(np.int64)
            return _result((values - np.mod(values, self.width)).astype(t.to_pandas_dtype()), arr, t)
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
            return pc.utf8_slice_codeunits(arr, 0, self.width)  # slices by code points
        if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
            return pc.binary_slice(arr, 0, self.width)
        if pa.types.is_decimal(t):
            if t.bit_width == 128 and t.precision <= 18 and self.width < 2**62:
                # Unscaled values of up to 18 digits fit the low int64 word of decimal128.
                low = np.frombuffer(arr.buffers()[1], dtype="<i8", count=2 * len(arr))[0::2]
                out = np.empty((len(arr), 2), dtype="<i8")
                out[:, 0] = low - np.mod(low, self.width)
                out[:, 1] = out[:, 0] >> 63  # sign-extend into the high word
                return _result(out, arr, t)
            return _map_uniques(arr, lambda v: self.apply(v, DecimalType(t.precision, t.scale)), t)
        raise ValidationError(f"{self} cannot be applied to Arrow type {t}")


@dataclass(frozen=True, repr=False)
class _TimeTransform(Transform):
    """year, month, day, hour: whole units since 1970-01-01 00:00, floored for earlier times."""

    accepts: ClassVar[str] = "date, timestamp, timestamptz, timestamp_ns and timestamptz_ns columns"

    @property
    def preserves_order(self) -> bool:
        return True

    @property
    def dedup_name(self) -> str:
        # Java: two time transforms of one column are redundant (day(ts) with hour(ts)).
        return "time"

    def can_transform(self, source: IcebergType) -> bool:
        return isinstance(source, DateType | TimestampType | TimestamptzType | TimestampNanoType
                          | TimestamptzNanoType)

    def result_type(self, source: IcebergType) -> IcebergType:
        return IntegerType()

    def default_partition_name(self, source_name: str) -> str:
        return f"{source_name}_{self}"

    def apply(self, value: Any, source_type: IcebergType | None = None) -> Any:
        if value is None:
            return None
        if source_type is None:
            if isinstance(value, dt.datetime):
                source_type = TimestamptzType() if value.tzinfo else TimestampType()
            elif isinstance(value, dt.date):
                source_type = DateType()
            elif isinstance(value, np.datetime64):
                source_type = TimestampNanoType()
            else:
                raise ValidationError(
                    f"{self} of {value!r} needs the column's type (are these days, micros or "
                    "nanos?): pass source_type="
                )
        value = _coerce(value, source_type)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(f"{self} cannot be applied to {value!r}")
        if isinstance(source_type, DateType):
            per_day = 1
        elif isinstance(source_type, _NANOS):
            per_day = conv.NANOS_PER_DAY
        elif isinstance(source_type, TimestampType | TimestamptzType):
            per_day = conv.MICROS_PER_DAY
        else:
            raise ValidationError(f"{self} cannot be applied to a {source_type} value; it accepts "
                                  f"{self.accepts}")
        return self._from_ticks(value, per_day)

    def _from_ticks(self, ticks: int, per_day: int) -> int:
        raise NotImplementedError

    def _apply_arrow(self, arr: pa.Array, source_type: IcebergType | None) -> pa.Array:
        values, per_day = _ticks(arr, source_type, str(self))
        return _result(self._from_ticks_np(values, per_day).astype(np.int32), arr, pa.int32())

    def _from_ticks_np(self, ticks: np.ndarray, per_day: int) -> np.ndarray:
        raise NotImplementedError


def _days_np(ticks: np.ndarray, per_day: int) -> np.ndarray:
    return ticks if per_day == 1 else np.floor_divide(ticks, per_day)


@dataclass(frozen=True, repr=False)
class YearTransform(_TimeTransform):
    def __str__(self) -> str:
        return "year"

    def _from_ticks(self, ticks: int, per_day: int) -> int:
        return conv.civil_from_days(ticks // per_day)[0] - 1970

    def _from_ticks_np(self, ticks: np.ndarray, per_day: int) -> np.ndarray:
        # numpy's calendar units count whole years/months since 1970 with floor semantics.
        return _days_np(ticks, per_day).astype("datetime64[D]").astype("datetime64[Y]").astype(np.int64)

    def to_human_string(self, result_type: IcebergType, value: Any) -> str:
        return "null" if value is None else f"{1970 + value:04d}"


@dataclass(frozen=True, repr=False)
class MonthTransform(_TimeTransform):
    def __str__(self) -> str:
        return "month"

    def _from_ticks(self, ticks: int, per_day: int) -> int:
        year, month, _ = conv.civil_from_days(ticks // per_day)
        return (year - 1970) * 12 + month - 1

    def _from_ticks_np(self, ticks: np.ndarray, per_day: int) -> np.ndarray:
        return _days_np(ticks, per_day).astype("datetime64[D]").astype("datetime64[M]").astype(np.int64)

    def to_human_string(self, result_type: IcebergType, value: Any) -> str:
        return "null" if value is None else f"{1970 + value // 12:04d}-{value % 12 + 1:02d}"


@dataclass(frozen=True, repr=False)
class DayTransform(_TimeTransform):
    def __str__(self) -> str:
        return "day"

    def result_type(self, source: IcebergType) -> IcebergType:
        return DateType()  # as Java and pyiceberg type it; the value is days since 1970-01-01

    def _from_ticks(self, ticks: int, per_day: int) -> int:
        return ticks // per_day

    def _from_ticks_np(self, ticks: np.ndarray, per_day: int) -> np.ndarray:
        return _days_np(ticks, per_day)

    def to_human_string(self, result_type: IcebergType, value: Any) -> str:
        return "null" if value is None else conv.format_date(value)


@dataclass(frozen=True, repr=False)
class HourTransform(_TimeTransform):
    accepts: ClassVar[str] = "timestamp, timestamptz, timestamp_ns and timestamptz_ns columns"

    def __str__(self) -> str:
        return "hour"

    def can_transform(self, source: IcebergType) -> bool:
        return isinstance(source, _TIMESTAMPS)

    def _from_ticks(self, ticks: int, per_day: int) -> int:
        if per_day == 1:
            raise ValidationError("hour cannot be applied to a date; it accepts " + self.accepts)
        return ticks // (per_day // 24)

    def _from_ticks_np(self, ticks: np.ndarray, per_day: int) -> np.ndarray:
        if per_day == 1:
            raise ValidationError("hour cannot be applied to a date; it accepts " + self.accepts)
        return np.floor_divide(ticks, per_day // 24)

    def to_human_string(self, result_type: IcebergType, value: Any) -> str:
        if value is None:
            return "null"
        days, hour = divmod(value, 24)
        return f"{conv.format_date(days)}-{hour:02d}"


@dataclass(frozen=True, repr=False)
class UnknownTransform(Transform):
    """A transform this library does not know (from newer metadata): readable, not applicable."""

    name: str
    accepts: ClassVar[str] = "no columns (the transform is unknown)"

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"UnknownTransform({self.name!r})"

    def can_transform(self, source: IcebergType) -> bool:
        return False

    def result_type(self, source: IcebergType) -> IcebergType:
        return StringType()  # as Java types unknown transforms

    def apply(self, value: Any, source_type: IcebergType | None = None) -> Any:
        raise UnsupportedError(f"the partition transform {self.name!r} is not supported")

    def apply_arrow(
        self, array: pa.Array | pa.ChunkedArray, source_type: IcebergType | None = None
    ) -> pa.Array:
        raise UnsupportedError(f"the partition transform {self.name!r} is not supported")

    def default_partition_name(self, source_name: str) -> str:
        return f"{source_name}_{re.sub(r'[^0-9A-Za-z_]', '_', self.name)}"


_SIMPLE: dict[str, Transform] = {
    "identity": IdentityTransform(),
    "void": VoidTransform(),
    "year": YearTransform(),
    "month": MonthTransform(),
    "day": DayTransform(),
    "hour": HourTransform(),
}
_PARAMETERIZED = re.compile(r"^\s*(bucket|truncate)\s*\[\s*(\d+)\s*\]\s*$", re.IGNORECASE)


def parse_transform(text: str, allow_unknown: bool = False) -> Transform:
    """The transform of its spec string: ``identity``, ``bucket[16]``, ``truncate[4]``, ``day``...

    Unknown names raise ValidationError, or give an :class:`UnknownTransform` with
    ``allow_unknown`` (readers must tolerate transforms they do not know).
    """
    name = text.strip().lower()
    if name in _SIMPLE:
        return _SIMPLE[name]
    if m := _PARAMETERIZED.match(text):
        n = int(m.group(2))
        return BucketTransform(n) if m.group(1).lower() == "bucket" else TruncateTransform(n)
    if allow_unknown:
        return UnknownTransform(text)
    raise ValidationError(
        f"unknown transform {text!r}; use identity, bucket[N], truncate[W], year, month, day, "
        "hour or void"
    )
