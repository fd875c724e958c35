"""Manifests as Avro: the schema and file metadata, the codec against fastavro, and interop with
Java's v1 manifest lists and pyiceberg."""

from __future__ import annotations

import copy
import datetime as dt
import json
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from tablestore.spec.manifests.manifest import (
    FieldSummary,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    read_manifest,
    read_manifest_list,
    read_manifest_metadata,
    write_manifest,
    write_manifest_list,
)
from tablestore.spec.manifests.manifest_codec import compile_decoder, compile_encoder
from tablestore.spec.partitioning.partition_spec import PartitionField, PartitionSpec
from tablestore.spec.partitioning.transforms import BucketTransform, DayTransform, IdentityTransform, TruncateTransform
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import (
    NestedField,
    UUIDType,
)
from tests.spec.manifests.manifest_fixtures import KEY, P1, SCHEMA, SPEC, LocalIO, avro_records, sample_file


def test_avro_schema_and_file_metadata(tmp_path: Path) -> None:
    io = LocalIO()
    path = str(tmp_path / "m.avro")
    write_manifest(
        io,
        path,
        SPEC,
        SCHEMA,
        5,
        [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, sample_file(0, P1))],
        content=ManifestContent.DATA,
    )
    with open(path, "rb") as f:
        reader = fastavro.reader(f)
        meta = reader.metadata
        schema = json.loads(meta["avro.schema"])
        records = avro_records(reader)  # fastavro can read what we write
    assert meta["avro.codec"] == "deflate"
    assert meta["format-version"] == "2" and meta["content"] == "data"
    assert meta["partition-spec-id"] == "3" and meta["schema-id"] == "0"
    assert json.loads(meta["partition-spec"]) == SPEC.to_json()["fields"]
    assert Schema.from_json(json.loads(meta["schema"])) == SCHEMA
    assert read_manifest_metadata(io, path)["content"] == "data"

    assert schema["name"] == "manifest_entry"
    assert [(f["name"], f["field-id"]) for f in schema["fields"]] == [
        ("status", 0),
        ("snapshot_id", 1),
        ("sequence_number", 3),
        ("file_sequence_number", 4),
        ("data_file", 2),
    ]
    data_file = schema["fields"][4]["type"]
    assert data_file["name"] == "r2"
    by_name = {f["name"]: f for f in data_file["fields"]}
    assert by_name["column_sizes"] == {
        "name": "column_sizes",
        "field-id": 108,
        "default": None,
        "doc": "Map of column id to total size on disk",
        "type": [
            "null",
            {
                "type": "array",
                "logicalType": "map",
                "items": {
                    "type": "record",
                    "name": "k117_v118",
                    "fields": [
                        {"name": "key", "type": "int", "field-id": 117},
                        {"name": "value", "type": "long", "field-id": 118},
                    ],
                },
            },
        ],
    }
    assert by_name["split_offsets"]["type"][1] == {"type": "array", "items": "long", "element-id": 133}
    assert by_name["equality_ids"]["type"][1] == {"type": "array", "items": "int", "element-id": 136}
    partition = by_name["partition"]["type"]
    assert partition["name"] == "r102"
    fields = {f["field-id"]: f for f in partition["fields"]}
    assert fields[1000]["type"] == ["null", {"type": "int", "logicalType": "date"}]
    assert fields[1001]["type"][1] == {
        "type": "fixed",
        "name": "decimal_10_2",
        "size": 5,
        "logicalType": "decimal",
        "precision": 10,
        "scale": 2,
    }
    assert fields[1003]["type"][1]["logicalType"] == "uuid" and fields[1003]["type"][1]["size"] == 16
    assert fields[1008]["type"][1] == {
        "type": "long",
        "logicalType": "timestamp-micros",
        "adjust-to-utc": True,
    }
    assert fields[1009]["name"] == "id_x2Dbucket" and fields[1009]["iceberg-field-name"] == "id-bucket"
    assert all("field-id" in f for f in data_file["fields"])
    # fastavro decodes logical types itself; the values agree with ours
    part = records[0]["data_file"]["partition"]
    assert part["ts_day"] == dt.date(2024, 1, 1) and part["price"] == Decimal("12.34")
    assert records[0]["data_file"]["column_sizes"] == [{"key": 1, "value": 100}, {"key": 4, "value": 2**40}]


def test_repeated_named_types(tmp_path: Path) -> None:
    # the second decimal(10,2) and uuid fields refer to the first by Avro type name
    io = LocalIO()
    spec = PartitionSpec(
        0,
        (
            PartitionField(3, 1000, IdentityTransform(), "p1"),
            PartitionField(3, 1001, TruncateTransform(10), "p2"),
            PartitionField(5, 1002, IdentityTransform(), "k1"),
            PartitionField(5, 1003, BucketTransform(2), "k_bucket"),
        ),
    )
    schema = Schema((*SCHEMA.fields, NestedField(11, "key2", UUIDType())))
    spec = PartitionSpec(0, (*spec.fields, PartitionField(11, 1004, IdentityTransform(), "k2")))
    partition = (Decimal("1.25"), Decimal("1.20"), KEY, 1, uuid.UUID(int=7))
    mf = write_manifest(
        io,
        str(tmp_path / "m.avro"),
        spec,
        schema,
        1,
        [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, sample_file(0, partition))],
    )
    with open(tmp_path / "m.avro", "rb") as f:
        schema_json = json.loads(fastavro.reader(f).metadata["avro.schema"])
    fields = schema_json["fields"][4]["type"]["fields"][3]["type"]["fields"]
    assert fields[1]["type"] == ["null", "decimal_10_2"] and fields[4]["type"] == ["null", "uuid_fixed"]
    mf.sequence_number = mf.min_sequence_number = 1
    (entry,) = read_manifest(io, mf)
    assert entry.data_file.partition == partition


_CODEC_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "r",
    "fields": [
        {"name": "l", "type": "long"},
        {"name": "i", "type": "int"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": ["null", "string"]},
        {"name": "b", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "f3", "size": 3}},
        {"name": "again", "type": ["null", "f3"]},
        {"name": "arr", "type": {"type": "array", "items": "long"}},
        {
            "name": "m",
            "type": [
                "null",
                {
                    "type": "array",
                    "logicalType": "map",
                    "items": {
                        "type": "record",
                        "name": "kv",
                        "fields": [{"name": "key", "type": "int"}, {"name": "value", "type": "bytes"}],
                    },
                },
            ],
        },
        {"name": "sm", "type": {"type": "map", "values": "long"}},
        {"name": "flag", "type": "boolean"},
        {
            "name": "nested",
            "type": {"type": "record", "name": "n", "fields": [{"name": "x", "type": "long"}]},
        },
    ],
}

_longs = st.integers(-(2**63), 2**63 - 1)
_records = st.fixed_dictionaries(
    {
        "l": _longs,
        "i": st.integers(-(2**31), 2**31 - 1),
        "f": st.floats(width=32, allow_nan=False),
        "d": st.floats(allow_nan=False),
        "s": st.none() | st.text(),
        "b": st.binary(max_size=300),
        "fx": st.binary(min_size=3, max_size=3),
        "again": st.none() | st.binary(min_size=3, max_size=3),
        "arr": st.lists(_longs, max_size=5),
        "m": st.none()
        | st.dictionaries(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=20), max_size=5),
        "sm": st.dictionaries(st.text(max_size=5), _longs, max_size=3),
        "flag": st.booleans(),
        "nested": st.fixed_dictionaries({"x": _longs}),
    }
)


@settings(max_examples=60, deadline=None)
@given(records=st.lists(_records, max_size=8))
def test_codec_agrees_with_fastavro(records: list[dict[str, Any]]) -> None:
    import io as _io

    parsed = fastavro.parse_schema(copy.deepcopy(_CODEC_SCHEMA))
    as_fastavro = [
        {**r, "m": None if r["m"] is None else [{"key": k, "value": v} for k, v in r["m"].items()]}
        for r in records
    ]
    ours = bytearray()
    encode = compile_encoder(_CODEC_SCHEMA)
    for r in records:
        encode(ours, r)
    theirs = _io.BytesIO()
    for r in as_fastavro:
        fastavro.schemaless_writer(theirs, parsed, r)
    assert bytes(ours) == theirs.getvalue()  # Avro's binary encoding is canonical
    assert compile_decoder(_CODEC_SCHEMA)(bytes(ours), len(records)) == records
    stream = _io.BytesIO(bytes(ours))
    assert [fastavro.schemaless_reader(stream, parsed) for _ in records] == as_fastavro


def test_java_v1_manifest_list_names(tmp_path: Path) -> None:
    """Java's v1 manifest lists name field 504 ``added_data_files_count``; fields are matched by id."""
    import io as _io

    schema = {
        "type": "record",
        "name": "manifest_file",
        "fields": [
            {"name": "manifest_path", "type": "string", "field-id": 500},
            {"name": "manifest_length", "type": "long", "field-id": 501},
            {"name": "partition_spec_id", "type": "int", "field-id": 502},
            {"name": "added_snapshot_id", "type": ["null", "long"], "default": None, "field-id": 503},
            {"name": "added_data_files_count", "type": ["null", "int"], "default": None, "field-id": 504},
            {"name": "existing_data_files_count", "type": ["null", "int"], "default": None, "field-id": 505},
            {"name": "deleted_data_files_count", "type": ["null", "int"], "default": None, "field-id": 506},
            {
                "name": "partitions",
                "type": [
                    "null",
                    {
                        "type": "array",
                        "element-id": 508,
                        "items": {
                            "type": "record",
                            "name": "r508",
                            "fields": [
                                {"name": "contains_null", "type": "boolean", "field-id": 509},
                                {
                                    "name": "lower_bound",
                                    "type": ["null", "bytes"],
                                    "default": None,
                                    "field-id": 510,
                                },
                                {
                                    "name": "upper_bound",
                                    "type": ["null", "bytes"],
                                    "default": None,
                                    "field-id": 511,
                                },
                            ],
                        },
                    },
                ],
                "default": None,
                "field-id": 507,
            },
        ],
    }
    buf = _io.BytesIO()
    fastavro.writer(
        buf,
        fastavro.parse_schema(schema),
        [
            {
                "manifest_path": "s3://b/m.avro",
                "manifest_length": 10,
                "partition_spec_id": 0,
                "added_snapshot_id": 3,
                "added_data_files_count": 2,
                "existing_data_files_count": None,
                "deleted_data_files_count": 0,
                "partitions": [{"contains_null": False, "lower_bound": b"a", "upper_bound": b"b"}],
            }
        ],
        codec="null",
    )
    (tmp_path / "l.avro").write_bytes(buf.getvalue())
    (m,) = read_manifest_list(LocalIO(), str(tmp_path / "l.avro"))
    assert (m.added_snapshot_id, m.added_files_count, m.existing_files_count, m.deleted_files_count) == (
        3,
        2,
        None,
        0,
    )
    assert (m.content, m.sequence_number, m.min_sequence_number) == (ManifestContent.DATA, 0, 0)
    assert m.partitions == [FieldSummary(False, None, b"a", b"b")]
    assert m.has_existing_files() and m.has_added_files() and not m.has_deleted_files()


# -- interop with pyiceberg ----------------------------------------------------------------------


def _pyiceberg_table(tmp_path: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField as PyField
    from pyiceberg.partitioning import PartitionSpec as PySpec
    from pyiceberg.schema import Schema as PySchema
    from pyiceberg.transforms import IdentityTransform as PyIdentity
    from pyiceberg.types import DateType as PyDate
    from pyiceberg.types import DecimalType as PyDecimal
    from pyiceberg.types import LongType as PyLong
    from pyiceberg.types import NestedField as PyNested
    from pyiceberg.types import StringType as PyString

    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    catalog = SqlCatalog("py", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
    catalog.create_namespace("db")
    schema = PySchema(
        PyNested(1, "id", PyLong()),
        PyNested(2, "d", PyDate()),
        PyNested(3, "price", PyDecimal(10, 2)),
        PyNested(4, "s", PyString()),
    )
    spec = PySpec(PyField(2, 1000, PyIdentity(), "d"), PyField(3, 1001, PyIdentity(), "price"))
    table = catalog.create_table("db.t", schema, partition_spec=spec)
    data = pa.table(
        {
            "id": pa.array([1, 2, None], pa.int64()),
            "d": pa.array([dt.date(2024, 1, 2), dt.date(2024, 1, 3), None], pa.date32()),
            "price": pa.array([Decimal("1.23"), None, Decimal("-5.00")], pa.decimal128(10, 2)),
            "s": pa.array(["a", "b", None], pa.string()),
        }
    )
    table.append(data)
    table.append(data)
    return table


def test_read_pyiceberg_manifests(tmp_path: Path) -> None:
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import read_manifest_list as py_read_list

    table = _pyiceberg_table(tmp_path)
    io = LocalIO()
    snapshot = table.current_snapshot()
    ours = read_manifest_list(io, snapshot.manifest_list)
    theirs = list(py_read_list(PyArrowFileIO().new_input(snapshot.manifest_list)))
    assert len(ours) == len(theirs) == 2
    for a, b in zip(ours, theirs, strict=True):
        assert (a.manifest_path, a.manifest_length, a.partition_spec_id, int(a.content)) == (
            b.manifest_path,
            b.manifest_length,
            b.partition_spec_id,
            int(b.content),
        )
        assert (a.sequence_number, a.min_sequence_number, a.added_snapshot_id) == (
            b.sequence_number,
            b.min_sequence_number,
            b.added_snapshot_id,
        )
        assert (a.added_files_count, a.added_rows_count, a.existing_files_count) == (
            b.added_files_count,
            b.added_rows_count,
            b.existing_files_count,
        )
        assert b.partitions is not None
        assert a.partitions == [
            FieldSummary(p.contains_null, p.contains_nan, p.lower_bound, p.upper_bound) for p in b.partitions
        ]
        entries = read_manifest(io, a)
        py_entries = b.fetch_manifest_entry(PyArrowFileIO(), discard_deleted=False)
        assert len(entries) == len(py_entries) == 3
        for e, p in zip(entries, py_entries, strict=True):
            assert (int(e.status), e.snapshot_id, e.sequence_number, e.file_sequence_number) == (
                int(p.status),
                p.snapshot_id,
                p.sequence_number,
                p.file_sequence_number,
            )
            f, g = e.data_file, p.data_file
            assert (f.file_path, f.file_format.value, f.record_count, f.file_size_in_bytes) == (
                g.file_path,
                g.file_format.value,
                g.record_count,
                g.file_size_in_bytes,
            )
            assert f.partition == tuple(g.partition[i] for i in range(len(g.partition)))
            assert (f.column_sizes, f.value_counts, f.null_value_counts, f.lower_bounds, f.upper_bounds) == (
                g.column_sizes,
                g.value_counts,
                g.null_value_counts,
                g.lower_bounds,
                g.upper_bounds,
            )
            assert f.split_offsets == g.split_offsets and f.spec_id == g.spec_id == 0
    partitions = {e.data_file.partition for e in read_manifest(io, ours[0])}
    assert partitions == {(19724, Decimal("1.23")), (19725, None), (None, Decimal("-5.00"))}


def test_pyiceberg_reads_our_manifests(tmp_path: Path) -> None:
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import read_manifest_list as py_read_list

    io = LocalIO()
    spec = PartitionSpec(
        0,
        (
            PartitionField(2, 1000, DayTransform(), "ts_day"),
            PartitionField(3, 1001, IdentityTransform(), "price"),
            PartitionField(5, 1002, IdentityTransform(), "key"),
            PartitionField(4, 1003, IdentityTransform(), "name"),
        ),
    )
    parts = [(19723, Decimal("12.34"), KEY, "x"), (None, Decimal("-0.50"), None, None)]
    entries = [
        ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, sample_file(i, p)) for i, p in enumerate(parts)
    ]
    entries.append(
        ManifestEntry(ManifestEntryStatus.EXISTING, 3, 1, 1, sample_file(9, (1, Decimal("0.00"), KEY, "y")))
    )
    mf = write_manifest(io, f"file://{tmp_path}/m.avro", spec, SCHEMA, 77, entries)
    write_manifest_list(io, f"file://{tmp_path}/l.avro", 77, 3, 2, [mf])

    (theirs,) = list(py_read_list(PyArrowFileIO().new_input(f"file://{tmp_path}/l.avro")))
    assert (theirs.sequence_number, theirs.min_sequence_number, theirs.added_snapshot_id) == (2, 1, 77)
    assert (theirs.added_files_count, theirs.existing_files_count, theirs.added_rows_count) == (2, 1, 21)
    assert theirs.partitions is not None
    assert [(p.contains_null, p.lower_bound, p.upper_bound) for p in theirs.partitions] == [
        (s.contains_null, s.lower_bound, s.upper_bound) for s in mf.partitions or []
    ]
    py_entries = theirs.fetch_manifest_entry(PyArrowFileIO(), discard_deleted=False)
    assert [
        (int(p.status), p.snapshot_id, p.sequence_number, p.file_sequence_number) for p in py_entries
    ] == [(1, 77, 2, 2), (1, 77, 2, 2), (0, 3, 1, 1)]
    for entry, p in zip(entries, py_entries, strict=True):
        f, g = entry.data_file, p.data_file
        assert g.file_path == f.file_path and g.record_count == f.record_count
        assert tuple(g.partition[i] for i in range(4)) == f.partition
        assert (g.column_sizes, g.value_counts, g.null_value_counts, g.nan_value_counts) == (
            f.column_sizes,
            f.value_counts,
            f.null_value_counts,
            f.nan_value_counts,
        )
        assert (g.lower_bounds, g.upper_bounds, g.split_offsets, g.sort_order_id) == (
            f.lower_bounds,
            f.upper_bounds,
            f.split_offsets,
            f.sort_order_id,
        )
