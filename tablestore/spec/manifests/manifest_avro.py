"""Avro schemas of manifests and manifest lists, and the raw Avro plumbing around them.

The schemas follow format/spec.md ("Manifests", "Manifest Lists") and the exact shape the Java
reference implementation writes: every field carries its ``field-id``; int-keyed maps are
arrays of ``k<key id>_v<value id>`` records with ``logicalType: map``; record names are
``r<field id>``. Readers elsewhere resolve by field id, so names only need to be valid Avro.

The codec (``manifest_codec``) reads and writes raw Avro values; the helpers at the end convert
partition values between those and Iceberg's internal values (Decimal and UUID; dates,
times and timestamps are plain ints in both).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from tablestore.errors import CorruptMetadataError, ValidationError
from tablestore.spec.schemas.conversions import decimal_to_unscaled, unscaled_to_decimal
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
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

AvroSchema = Any  # a JSON-like Avro schema: str, list or dict

FIELD_ID = "field-id"
ICEBERG_FIELD_NAME = "iceberg-field-name"
# Java's default for the v1-only, required ``block_size_in_bytes``.
V1_BLOCK_SIZE = 64 * 1024 * 1024


# -- schema helpers ----------------------------------------------------------------------------


def _required(name: str, field_id: int, avro_type: AvroSchema, doc: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, FIELD_ID: field_id, "type": avro_type}
    if doc:
        out["doc"] = doc
    return out


def _optional(name: str, field_id: int, avro_type: AvroSchema, doc: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, FIELD_ID: field_id, "type": ["null", avro_type], "default": None}
    if doc:
        out["doc"] = doc
    return out


def _int_map(key_id: int, value_id: int, value_type: str) -> dict[str, Any]:
    # Avro maps only have string keys, so Iceberg writes int-keyed maps as arrays of pairs.
    return {
        "type": "array",
        "items": {
            "type": "record",
            "name": f"k{key_id}_v{value_id}",
            "fields": [
                {"name": "key", "type": "int", FIELD_ID: key_id},
                {"name": "value", "type": value_type, FIELD_ID: value_id},
            ],
        },
        "logicalType": "map",
    }


def _list(element_id: int, element_type: str) -> dict[str, Any]:
    return {"type": "array", "items": element_type, "element-id": element_id}


def decimal_required_bytes(precision: int) -> int:
    """The smallest fixed size whose two's complement range holds every ``precision``-digit value."""
    size = 1
    while 2 ** (8 * size - 1) - 1 < 10**precision - 1:
        size += 1
    return size


def avro_name(name: str) -> str:
    """An Avro-valid field name, escaped the way Java's ``AvroSchemaUtil.makeCompatibleName`` does."""
    if not name:
        return "_"
    out = []
    for i, ch in enumerate(name):
        if ch == "_" or (ch.isascii() and (ch.isalpha() or (i > 0 and ch.isdigit()))):
            out.append(ch)
        elif ch.isascii() and ch.isdigit():
            out.append("_" + ch)
        else:
            out.append("_x" + format(ord(ch), "X"))
    return "".join(out)


class _NamedTypes:
    """Avro needs each named type (record, fixed) defined once; later uses refer to it by name."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def named(self, schema: dict[str, Any]) -> AvroSchema:
        name = schema["name"]
        if name in self.seen:
            return name
        self.seen.add(name)
        return schema


def primitive_to_avro(t: IcebergType, names: _NamedTypes) -> AvroSchema:
    """The Avro schema for a value of an Iceberg primitive type (as Java writes it)."""
    if isinstance(t, BooleanType):
        return "boolean"
    if isinstance(t, IntegerType):
        return "int"
    if isinstance(t, LongType):
        return "long"
    if isinstance(t, FloatType):
        return "float"
    if isinstance(t, DoubleType):
        return "double"
    if isinstance(t, DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(t, TimeType):
        return {"type": "long", "logicalType": "time-micros"}
    if isinstance(t, TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": False}
    if isinstance(t, TimestamptzType):
        return {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": True}
    if isinstance(t, TimestampNanoType):
        return {"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": False}
    if isinstance(t, TimestamptzNanoType):
        return {"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": True}
    if isinstance(t, StringType):
        return "string"
    if isinstance(t, UUIDType):
        return names.named({"type": "fixed", "name": "uuid_fixed", "size": 16, "logicalType": "uuid"})
    if isinstance(t, FixedType):
        return names.named({"type": "fixed", "name": f"fixed_{t.length}", "size": t.length})
    if isinstance(t, BinaryType):
        return "bytes"
    if isinstance(t, DecimalType):
        return names.named({
            "type": "fixed",
            "name": f"decimal_{t.precision}_{t.scale}",
            "size": decimal_required_bytes(t.precision),
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        })
    if isinstance(t, UnknownType):
        return "null"
    raise CorruptMetadataError(f"partition fields of type {t} cannot be written to a manifest")


def partition_record(partition_type: StructType) -> dict[str, Any]:
    """The ``r102`` record for a partition tuple; its field ids are the partition field ids."""
    names = _NamedTypes()
    fields = []
    for f in partition_type.fields:
        avro_type = primitive_to_avro(f.field_type, names)
        name = avro_name(f.name)
        field = _optional(name, f.field_id, avro_type) if not isinstance(f.field_type, UnknownType) \
            else {"name": name, FIELD_ID: f.field_id, "type": "null", "default": None}
        if name != f.name:
            field[ICEBERG_FIELD_NAME] = f.name
        fields.append(field)
    return {"type": "record", "name": "r102", "fields": fields}


def data_file_record(partition: dict[str, Any], format_version: int) -> dict[str, Any]:
    """The ``r2`` data_file record of a manifest entry for format version 1, 2 or 3."""
    fields: list[dict[str, Any]] = []
    if format_version >= 2:
        fields.append(_required("content", 134, "int",
                                "Contents of the file: 0=data, 1=position deletes, 2=equality deletes"))
    fields += [
        _required("file_path", 100, "string", "Location URI with FS scheme"),
        _required("file_format", 101, "string", "File format name: avro, orc, or parquet"),
        _required("partition", 102, partition, "Partition data tuple, schema based on the partition spec"),
        _required("record_count", 103, "long", "Number of records in the file"),
        _required("file_size_in_bytes", 104, "long", "Total file size in bytes"),
    ]
    if format_version == 1:
        fields.append(_required("block_size_in_bytes", 105, "long", "Deprecated; always written in v1"))
    fields += [
        _optional("column_sizes", 108, _int_map(117, 118, "long"), "Map of column id to total size on disk"),
        _optional("value_counts", 109, _int_map(119, 120, "long"),
                  "Map of column id to total count, including null and NaN"),
        _optional("null_value_counts", 110, _int_map(121, 122, "long"), "Map of column id to null count"),
        _optional("nan_value_counts", 137, _int_map(138, 139, "long"), "Map of column id to NaN count"),
        _optional("lower_bounds", 125, _int_map(126, 127, "bytes"), "Map of column id to lower bound"),
        _optional("upper_bounds", 128, _int_map(129, 130, "bytes"), "Map of column id to upper bound"),
        _optional("key_metadata", 131, "bytes", "Encryption key metadata blob"),
        _optional("split_offsets", 132, _list(133, "long"), "Splittable offsets"),
    ]
    if format_version >= 2:
        fields.append(_optional("equality_ids", 135, _list(136, "int"), "Equality comparison field IDs"))
    fields.append(_optional("sort_order_id", 140, "int", "Sort order ID"))
    if format_version >= 3:
        fields.append(_optional("first_row_id", 142, "long",
                                "The first row ID assigned to the first row in the data file"))
    if format_version >= 2:
        fields.append(_optional("referenced_data_file", 143, "string",
                                "Fully qualified location of a data file that all deletes reference"))
    if format_version >= 3:
        fields.append(_optional("content_offset", 144, "long", "The offset in the file where the content starts"))
        fields.append(_optional("content_size_in_bytes", 145, "long",
                                "The length of referenced content stored in the file"))
    return {"type": "record", "name": "r2", "fields": fields}


def manifest_entry_schema(partition_type: StructType, format_version: int) -> dict[str, Any]:
    """The ``manifest_entry`` schema of a manifest file for the given partition type."""
    data_file = data_file_record(partition_record(partition_type), format_version)
    if format_version == 1:
        fields = [
            _required("status", 0, "int"),
            _required("snapshot_id", 1, "long"),
            _required("data_file", 2, data_file),
        ]
    else:
        fields = [
            _required("status", 0, "int"),
            _optional("snapshot_id", 1, "long"),
            _optional("sequence_number", 3, "long"),
            _optional("file_sequence_number", 4, "long"),
            _required("data_file", 2, data_file),
        ]
    return {"type": "record", "name": "manifest_entry", "fields": fields}


_FIELD_SUMMARY = {
    "type": "record",
    "name": "r508",
    "fields": [
        _required("contains_null", 509, "boolean", "True if any file has a null partition value"),
        _optional("contains_nan", 518, "boolean", "True if any file has a nan partition value"),
        _optional("lower_bound", 510, "bytes", "Partition lower bound for all files"),
        _optional("upper_bound", 511, "bytes", "Partition upper bound for all files"),
    ],
}


def manifest_file_schema(format_version: int) -> dict[str, Any]:
    """The ``manifest_file`` schema of a manifest list."""
    partitions = _optional("partitions", 507, {"type": "array", "items": _FIELD_SUMMARY, "element-id": 508},
                           "Summary for each partition")
    head = [
        _required("manifest_path", 500, "string", "Location URI with FS scheme"),
        _required("manifest_length", 501, "long", "Total file size in bytes"),
        _required("partition_spec_id", 502, "int", "Spec ID used to write"),
    ]
    if format_version == 1:
        fields = [
            *head,
            _required("added_snapshot_id", 503, "long", "Snapshot ID that added the manifest"),
            _optional("added_files_count", 504, "int", "Added entry count"),
            _optional("existing_files_count", 505, "int", "Existing entry count"),
            _optional("deleted_files_count", 506, "int", "Deleted entry count"),
            partitions,
            _optional("added_rows_count", 512, "long", "Added rows count"),
            _optional("existing_rows_count", 513, "long", "Existing rows count"),
            _optional("deleted_rows_count", 514, "long", "Deleted rows count"),
            _optional("key_metadata", 519, "bytes", "Encryption key metadata blob"),
        ]
    else:
        fields = [
            *head,
            _required("content", 517, "int", "Contents of the manifest: 0=data, 1=deletes"),
            _required("sequence_number", 515, "long", "Sequence number when the manifest was added"),
            _required("min_sequence_number", 516, "long", "Lowest sequence number in the manifest"),
            _required("added_snapshot_id", 503, "long", "Snapshot ID that added the manifest"),
            _required("added_files_count", 504, "int", "Added entry count"),
            _required("existing_files_count", 505, "int", "Existing entry count"),
            _required("deleted_files_count", 506, "int", "Deleted entry count"),
            _required("added_rows_count", 512, "long", "Added rows count"),
            _required("existing_rows_count", 513, "long", "Existing rows count"),
            _required("deleted_rows_count", 514, "long", "Deleted rows count"),
            partitions,
            _optional("key_metadata", 519, "bytes", "Encryption key metadata blob"),
        ]
        if format_version >= 3:
            fields.append(_optional("first_row_id", 520, "long",
                                    "Starting row ID to assign to new rows in ADDED data files"))
    return {"type": "record", "name": "manifest_file", "fields": fields}


# -- canonical names by field id -----------------------------------------------------------------

# Readers look fields up by these names. Files from other writers may spell some differently
# (v1 manifest lists by Java call 504 ``added_data_files_count``), so the reader renames every
# field with a known id to its canonical name before decoding; the binary layout is unaffected.
_ENTRY_NAMES = {
    0: "status", 1: "snapshot_id", 3: "sequence_number", 4: "file_sequence_number", 2: "data_file",
}
_DATA_FILE_NAMES = {
    134: "content", 100: "file_path", 101: "file_format", 102: "partition", 103: "record_count",
    104: "file_size_in_bytes", 105: "block_size_in_bytes", 108: "column_sizes", 109: "value_counts",
    110: "null_value_counts", 137: "nan_value_counts", 125: "lower_bounds", 128: "upper_bounds",
    131: "key_metadata", 132: "split_offsets", 135: "equality_ids", 140: "sort_order_id",
    142: "first_row_id", 143: "referenced_data_file", 144: "content_offset", 145: "content_size_in_bytes",
}
_MANIFEST_FILE_NAMES = {
    500: "manifest_path", 501: "manifest_length", 502: "partition_spec_id", 517: "content",
    515: "sequence_number", 516: "min_sequence_number", 503: "added_snapshot_id", 504: "added_files_count",
    505: "existing_files_count", 506: "deleted_files_count", 512: "added_rows_count",
    513: "existing_rows_count", 514: "deleted_rows_count", 507: "partitions", 519: "key_metadata",
    520: "first_row_id",
}
_SUMMARY_NAMES = {509: "contains_null", 518: "contains_nan", 510: "lower_bound", 511: "upper_bound"}


def _rename_fields(record: dict[str, Any], names: dict[int, str]) -> None:
    for f in record.get("fields", []):
        fid = f.get(FIELD_ID)
        if isinstance(fid, int) and fid in names:
            f["name"] = names[fid]


def _record_of(field_type: AvroSchema) -> dict[str, Any] | None:
    """The record (or array-of-record items) inside a possibly optional field type."""
    branches = field_type if isinstance(field_type, list) else [field_type]
    for b in branches:
        if isinstance(b, dict):
            if b.get("type") == "record":
                return b
            if b.get("type") == "array" and isinstance(b.get("items"), dict):
                return _record_of(b["items"])
    return None


def normalize_entry_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """Rename manifest-entry fields to canonical names; returns the partition record, if any."""
    _rename_fields(schema, _ENTRY_NAMES)
    for f in schema.get("fields", []):
        if f["name"] == "data_file":
            data_file = _record_of(f["type"])
            if data_file is None:
                break
            _rename_fields(data_file, _DATA_FILE_NAMES)
            for g in data_file["fields"]:
                if g["name"] == "partition":
                    return _record_of(g["type"])
    return None


def normalize_manifest_file_schema(schema: dict[str, Any]) -> None:
    _rename_fields(schema, _MANIFEST_FILE_NAMES)
    for f in schema.get("fields", []):
        if f["name"] == "partitions":
            summary = _record_of(f["type"])
            if summary is not None:
                _rename_fields(summary, _SUMMARY_NAMES)


# -- logical types -------------------------------------------------------------------------------


def partition_converters(record: dict[str, Any] | None) -> list[Callable[[Any], Any] | None]:
    """Per partition field, a function from the raw Avro value to the internal value (or None
    when the raw value already is the internal value)."""
    if record is None:
        return []
    # A named type (decimal_10_2, uuid_fixed) used twice is referenced by name the second time.
    named: dict[str, dict[str, Any]] = {}
    return [_converter(f["type"], named) for f in record.get("fields", [])]


def _converter(field_type: AvroSchema, named: dict[str, dict[str, Any]]) -> Callable[[Any], Any] | None:
    branches = field_type if isinstance(field_type, list) else [field_type]
    for b in branches:
        if isinstance(b, str):
            b = named.get(b, named.get(b.rsplit(".", 1)[-1]))
        if isinstance(b, dict) and isinstance(b.get("type"), dict):
            b = b["type"]
        if not isinstance(b, dict):
            continue
        if "name" in b:
            named[b["name"]] = b
        logical = b.get("logicalType")
        if logical == "decimal":
            return _decimal_reader(int(b.get("scale", 0)))
        if logical == "uuid":
            if b.get("type") == "string":
                return uuid.UUID
            return _uuid_from_bytes
    return None


def _decimal_reader(scale: int) -> Callable[[Any], Decimal]:
    def read(raw: Any) -> Decimal:
        return unscaled_to_decimal(int.from_bytes(raw, "big", signed=True), scale)

    return read


def _uuid_from_bytes(raw: Any) -> uuid.UUID:
    return uuid.UUID(bytes=bytes(raw))


def _decimal_writer(size: int, scale: int) -> Callable[[Any], bytes]:
    def write(value: Any) -> bytes:
        try:
            unscaled = decimal_to_unscaled(Decimal(value), scale)
        except ValidationError as e:
            raise CorruptMetadataError(f"cannot store {value} as a decimal partition value: {e}") from e
        return unscaled.to_bytes(size, "big", signed=True)

    return write


def partition_value_writers(partition_type: StructType) -> list[Callable[[Any], Any] | None]:
    """Per partition field, a function from the internal value to the raw Avro value."""
    out: list[Callable[[Any], Any] | None] = []
    for f in partition_type.fields:
        t = f.field_type
        if isinstance(t, DecimalType):
            out.append(_decimal_writer(decimal_required_bytes(t.precision), t.scale))
        elif isinstance(t, UUIDType):
            out.append(lambda v: v.bytes if isinstance(v, uuid.UUID) else uuid.UUID(str(v)).bytes)
        else:
            out.append(None)
    return out
