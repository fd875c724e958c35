"""Shared fixtures of the manifest tests: a local FileIO, a ten-column schema with a spec that
partitions by every kind of value, and data files with full metrics."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

from tablestore.spec.manifests.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
)
from tablestore.spec.partitioning.partition_spec import PartitionField, PartitionSpec
from tablestore.spec.partitioning.transforms import BucketTransform, DayTransform, IdentityTransform, TruncateTransform
from tablestore.spec.schemas.conversions import to_bytes
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import (
    BinaryType,
    BooleanType,
    DecimalType,
    DoubleType,
    FixedType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)


class _Input:
    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> bytes:
        return self.path.read_bytes()


class _Output:
    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, data: bytes, overwrite: bool = False) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_bytes(data)


class LocalIO:
    """A stand-in for tablestore.io.FileIO over local paths (``file://`` URIs too)."""

    @staticmethod
    def _path(location: str) -> Path:
        return Path(location.removeprefix("file://"))

    def new_input(self, location: str) -> _Input:
        return _Input(self._path(location))

    def new_output(self, location: str) -> _Output:
        return _Output(self._path(location))


SCHEMA = Schema(
    (
        NestedField(1, "id", LongType(), True),
        NestedField(2, "ts", TimestampType()),
        NestedField(3, "price", DecimalType(10, 2)),
        NestedField(4, "name", StringType()),
        NestedField(5, "key", UUIDType()),
        NestedField(6, "score", DoubleType()),
        NestedField(7, "flag", BooleanType()),
        NestedField(8, "blob", BinaryType()),
        NestedField(9, "code", FixedType(3)),
        NestedField(10, "tstz", TimestamptzType()),
    )
)

SPEC = PartitionSpec(
    3,
    (
        PartitionField(2, 1000, DayTransform(), "ts_day"),
        PartitionField(3, 1001, IdentityTransform(), "price"),
        PartitionField(4, 1002, TruncateTransform(2), "name_trunc"),
        PartitionField(5, 1003, IdentityTransform(), "key"),
        PartitionField(6, 1004, IdentityTransform(), "score"),
        PartitionField(7, 1005, IdentityTransform(), "flag"),
        PartitionField(8, 1006, IdentityTransform(), "blob"),
        PartitionField(9, 1007, IdentityTransform(), "code"),
        PartitionField(10, 1008, IdentityTransform(), "tstz"),
        PartitionField(1, 1009, BucketTransform(8), "id-bucket"),  # not a valid Avro name
    ),
)

KEY = uuid.UUID("12345678-1234-5678-1234-567812345678")


def sample_file(i: int, partition: tuple[Any, ...], **kw: Any) -> DataFile:
    defaults: dict[str, Any] = {
        "column_sizes": {1: 100 + i, 4: 2**40},
        "value_counts": {1: 10, 4: 10},
        "null_value_counts": {1: 0, 4: 3},
        "nan_value_counts": {6: 1},
        "lower_bounds": {1: to_bytes(LongType(), -5), 4: b"a"},
        "upper_bounds": {1: to_bytes(LongType(), 2**62), 4: "\u00e9\U0001f600".encode()},
        "split_offsets": [4, 1000],
        "sort_order_id": 0,
    }
    defaults.update(kw)
    return DataFile(
        DataFileContent.DATA,
        f"s3://bucket/data/file-{i}.parquet",
        FileFormat.PARQUET,
        partition,
        10 + i,
        1000 + i,
        **defaults,
    )


P1 = (19723, Decimal("12.34"), "ab", KEY, 1.5, True, b"\x00\xff", b"abc", 1_700_000_000_000_000, 3)
P2 = (-1, Decimal("-0.01"), "zz", None, float("nan"), False, b"", b"xyz", -1, 7)
P3 = (None, None, None, None, None, None, None, None, None, None)


def avro_records(reader: Iterable[object]) -> list[dict[str, Any]]:
    """The records fastavro read: it yields any Avro datum, and a manifest's are Avro records."""
    records = []
    for record in reader:
        assert isinstance(record, dict)
        records.append(record)
    return records
