"""Data and delete files as the REST spec's ContentFile JSON: what the service writes for a served
scan plan, and what tablestore's rest catalog reads back."""

from __future__ import annotations

import pytest

from tablestore.errors import ValidationError
from tablestore.spec.manifests.content_file_json import content_file_from_json, content_file_to_json
from tablestore.spec.manifests.manifest import DataFile, DataFileContent, FileFormat
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import BinaryType, LongType, NestedField, StringType, TimestampType

SCHEMA = Schema((
    NestedField(1, "id", LongType(), False),
    NestedField(2, "ts", TimestampType(), False),
    NestedField(3, "tag", BinaryType(), False),
    NestedField(4, "name", StringType(), False),
))
SPEC = PartitionSpec.from_json({"spec-id": 1, "fields": [
    {"source-id": 2, "field-id": 1000, "name": "ts_day", "transform": "day"},
    {"source-id": 3, "field-id": 1001, "name": "tag", "transform": "identity"},
    {"source-id": 1, "field-id": 1002, "name": "id_bucket", "transform": "bucket[4]"},
]})
PTYPE = SPEC.partition_type(SCHEMA)
TYPES = {f.field_id: f.field_type for f in SCHEMA.fields}
DAY = 19724  # 2024-01-02


def data_file() -> DataFile:
    return DataFile(
        content=DataFileContent.DATA, file_path="s3://b/t/data/f.parquet", file_format=FileFormat.PARQUET,
        partition=(DAY, b"\x01\xff", 3), record_count=10, file_size_in_bytes=1234,
        column_sizes={1: 80, 4: 40}, value_counts={1: 10, 4: 10}, null_value_counts={1: 0, 4: 2},
        lower_bounds={1: conversions.to_bytes(LongType(), 5), 4: conversions.to_bytes(StringType(), "a")},
        upper_bounds={1: conversions.to_bytes(LongType(), 99), 4: conversions.to_bytes(StringType(), "q")},
        split_offsets=[4], sort_order_id=0, spec_id=1,
    )


def test_a_data_file_is_written_with_json_partition_values_and_only_the_asked_stats() -> None:
    obj = content_file_to_json(data_file(), PTYPE, TYPES, stats_fields=[1])
    assert obj == {
        "content": "data", "file-path": "s3://b/t/data/f.parquet", "file-format": "parquet", "spec-id": 1,
        "partition": ["2024-01-02", "01FF", 3], "file-size-in-bytes": 1234, "record-count": 10,
        "split-offsets": [4], "sort-order-id": 0,
        "column-sizes": {"keys": [1], "values": [80]}, "value-counts": {"keys": [1], "values": [10]},
        "null-value-counts": {"keys": [1], "values": [0]},
        "lower-bounds": {"keys": [1], "values": [5]}, "upper-bounds": {"keys": [1], "values": [99]},
    }
    assert "lower-bounds" not in content_file_to_json(data_file(), PTYPE, TYPES)


def test_a_file_read_back_is_the_file_written() -> None:
    written = content_file_to_json(data_file(), PTYPE, TYPES, stats_fields=[1, 4])
    assert content_file_from_json(written, {1: PTYPE}, TYPES) == data_file()


def test_delete_files_keep_what_readers_need_to_apply_them() -> None:
    dv = DataFile(content=DataFileContent.POSITION_DELETES, file_path="s3://b/t/data/dv.puffin",
                  file_format=FileFormat.PUFFIN, partition=(DAY, b"", 0), record_count=2, file_size_in_bytes=90,
                  spec_id=1, referenced_data_file="s3://b/t/data/f.parquet", content_offset=4,
                  content_size_in_bytes=40)
    eq = DataFile(content=DataFileContent.EQUALITY_DELETES, file_path="s3://b/t/data/eq.parquet",
                  file_format=FileFormat.PARQUET, partition=(DAY, b"", 0), record_count=1, file_size_in_bytes=50,
                  spec_id=1, equality_ids=[1])
    for delete in (dv, eq):
        obj = content_file_to_json(delete, PTYPE)
        assert content_file_from_json(obj, {1: PTYPE}) == delete
    assert content_file_to_json(dv, PTYPE)["content"] == "position-deletes"
    assert content_file_to_json(eq, PTYPE)["equality-ids"] == [1]


def test_a_file_of_an_unknown_spec_or_malformed_is_a_validation_error() -> None:
    obj = content_file_to_json(data_file(), PTYPE)
    with pytest.raises(ValidationError, match="partition spec 1"):
        content_file_from_json(obj, {0: PTYPE})
    with pytest.raises(ValidationError, match="malformed content file"):
        content_file_from_json({**obj, "record-count": None}, {1: PTYPE})
