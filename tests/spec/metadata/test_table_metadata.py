"""Table metadata: JSON in and out (v1, v2, v3), new tables, time travel, and pyiceberg interop."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tablestore.errors import CorruptMetadataError, NoSuchSnapshotError, ValidationError
from tablestore.spec.metadata.table_metadata import (
    Operation,
    Snapshot,
    SnapshotLogEntry,
    SnapshotRef,
    TableMetadata,
    json_bytes,
    new_snapshot_id,
    new_table_metadata,
    parse_metadata,
    serialize_metadata,
)
from tablestore.spec.partitioning.partition_spec import UNPARTITIONED_SPEC, PartitionField, PartitionSpec
from tablestore.spec.partitioning.sort_order import UNSORTED_ORDER, NullOrder, SortDirection, SortField, SortOrder
from tablestore.spec.partitioning.transforms import BucketTransform, DayTransform, IdentityTransform
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import (
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

# Ids deliberately not fresh: new_table_metadata must reassign them.
SCHEMA = Schema(
    (
        NestedField(10, "id", LongType(), True),
        NestedField(20, "ts", TimestamptzType()),
        NestedField(
            30, "point", StructType(NestedField(31, "x", IntegerType()), NestedField(32, "y", IntegerType()))
        ),
        NestedField(40, "tags", ListType(41, StringType())),
        NestedField(50, "attrs", MapType(51, StringType(), 52, StringType())),
    ),
    schema_id=7,
    identifier_field_ids=(10,),
)
SPEC = PartitionSpec(
    5,
    (
        PartitionField(20, 2000, DayTransform(), "ts_day"),
        PartitionField(10, 2001, BucketTransform(16), "id_bucket"),
        PartitionField(31, 2002, IdentityTransform(), "point_x"),
    ),
)
ORDER = SortOrder(3, (SortField(32, IdentityTransform(), SortDirection.DESC, NullOrder.NULLS_LAST),))


def _snapshot(snapshot_id: int, parent: int | None, seq: int, ts: int) -> Snapshot:
    return Snapshot(
        snapshot_id,
        parent,
        seq,
        ts,
        f"s3://b/t/metadata/snap-{snapshot_id}.avro",
        {"operation": "append", "added-records": "3"},
        schema_id=0,
    )


def _with_history() -> TableMetadata:
    md = new_table_metadata(SCHEMA, SPEC, ORDER, "s3://b/t/", {"owner": "me"})
    snaps = (_snapshot(1, None, 1, 1_000), _snapshot(2, 1, 2, 2_000), _snapshot(3, 2, 3, 3_000))
    return TableMetadata(
        **{
            **md.__dict__,
            "snapshots": snaps,
            "current_snapshot_id": 3,
            "last_sequence_number": 3,
            "refs": {"main": SnapshotRef(3), "tag1": SnapshotRef(1, "tag", max_ref_age_ms=10)},
            "snapshot_log": (
                SnapshotLogEntry(1_000, 1),
                SnapshotLogEntry(2_000, 2),
                SnapshotLogEntry(2_500, 1),
                SnapshotLogEntry(3_000, 3),
            ),
        }
    )


def test_new_table_metadata_assigns_fresh_ids() -> None:
    md = new_table_metadata(SCHEMA, SPEC, ORDER, "s3://bucket/db/t/", {"a": "1", "format-version": "2"})
    schema = md.schema()
    assert md.format_version == 2 and md.location == "s3://bucket/db/t"
    assert schema.schema_id == 0 and md.current_schema_id == 0
    # Java's order: a struct's own fields first, then nested ones
    assert [(n, f.field_id) for n, f in schema.all_fields()] == [
        ("id", 1),
        ("ts", 2),
        ("point", 3),
        ("point.x", 6),
        ("point.y", 7),
        ("tags", 4),
        ("tags.element", 8),
        ("attrs", 5),
        ("attrs.key", 9),
        ("attrs.value", 10),
    ]
    assert schema.identifier_field_ids == (1,)
    assert md.last_column_id == 10
    assert md.spec() == PartitionSpec(
        0,
        (
            PartitionField(2, 1000, DayTransform(), "ts_day"),
            PartitionField(1, 1001, BucketTransform(16), "id_bucket"),
            PartitionField(6, 1002, IdentityTransform(), "point_x"),
        ),
    )
    assert md.last_partition_id == 1002
    assert md.sort_order() == SortOrder(
        1, (SortField(7, IdentityTransform(), SortDirection.DESC, NullOrder.NULLS_LAST),)
    )
    assert md.default_sort_order_id == 1
    assert md.properties == {"a": "1"}  # format-version is not a stored property
    assert md.current_snapshot_id is None and md.current_snapshot() is None
    assert md.snapshots == () and md.refs == {} and md.last_sequence_number == 0
    assert len(md.table_uuid) == 36


def test_new_unpartitioned_unsorted_v1() -> None:
    md = new_table_metadata(SCHEMA, UNPARTITIONED_SPEC, UNSORTED_ORDER, "/tmp/t", format_version=1)
    assert md.format_version == 1
    assert md.last_partition_id == 999 and md.spec().fields == ()
    assert md.default_sort_order_id == 0 and md.sort_order().fields == ()
    out = md.to_json()
    # v1 writers also write the single current schema and spec for old readers
    assert out["schema"] == md.schema().to_json() and out["partition-spec"] == []
    assert "last-sequence-number" not in out
    assert parse_metadata(serialize_metadata(md)) == md
    with pytest.raises(ValidationError, match="format version 1, 2 or 3, not 4"):
        new_table_metadata(SCHEMA, UNPARTITIONED_SPEC, UNSORTED_ORDER, "/tmp/t", {"format-version": "4"})


def test_new_table_unknown_source_column() -> None:
    bad = PartitionSpec(0, (PartitionField(99, 1000, IdentityTransform(), "nope"),))
    with pytest.raises(ValidationError, match="column id 99"):
        new_table_metadata(SCHEMA, bad, UNSORTED_ORDER, "/tmp/t")


def test_v2_json_shape_and_round_trip() -> None:
    md = _with_history()
    out = md.to_json()
    assert list(out) == [
        "format-version",
        "table-uuid",
        "location",
        "last-sequence-number",
        "last-updated-ms",
        "last-column-id",
        "current-schema-id",
        "schemas",
        "default-spec-id",
        "partition-specs",
        "last-partition-id",
        "default-sort-order-id",
        "sort-orders",
        "properties",
        "current-snapshot-id",
        "refs",
        "snapshots",
        "statistics",
        "partition-statistics",
        "snapshot-log",
        "metadata-log",
    ]
    assert out["current-snapshot-id"] == 3
    assert out["refs"] == {
        "main": {"snapshot-id": 3, "type": "branch"},
        "tag1": {"snapshot-id": 1, "type": "tag", "max-ref-age-ms": 10},
    }
    assert out["snapshots"][1] == {
        "snapshot-id": 2,
        "parent-snapshot-id": 1,
        "sequence-number": 2,
        "timestamp-ms": 2000,
        "manifest-list": "s3://b/t/metadata/snap-2.avro",
        "summary": {"operation": "append", "added-records": "3"},
        "schema-id": 0,
    }
    assert "parent-snapshot-id" not in out["snapshots"][0]
    back = parse_metadata(json.dumps(out).encode())
    assert back == md
    assert back.to_json() == out
    empty = new_table_metadata(SCHEMA, SPEC, ORDER, "/t")
    assert empty.to_json()["current-snapshot-id"] == -1  # as Java writes it
    assert parse_metadata(serialize_metadata(empty)).current_snapshot_id is None


def test_lookups() -> None:
    md = _with_history()
    assert md.current_snapshot() == md.snapshot_by_id(3)
    assert md.snapshot_by_ref("tag1") == md.snapshot_by_id(1)
    assert md.snapshot_by_ref("nope") is None and md.snapshot_by_id(42) is None
    assert md.spec_by_id(0) == md.spec() and md.specs() == {0: md.spec()}
    assert md.schema_by_id(0) == md.schema() and md.schema_by_id(1) is None
    assert [s.snapshot_id for s in md.ancestors_of(3)] == [3, 2, 1]
    assert md.next_sequence_number() == 4
    assert md.snapshot_by_id(1) is not None and md.snapshot_by_id(1).operation == Operation.APPEND  # type: ignore[union-attr]


def test_snapshot_as_of_uses_the_log() -> None:
    md = _with_history()
    assert md.snapshot_as_of(1_000).snapshot_id == 1
    assert md.snapshot_as_of(2_499).snapshot_id == 2
    assert md.snapshot_as_of(2_500).snapshot_id == 1  # rolled back to 1 at 2500
    assert md.snapshot_as_of(10**13).snapshot_id == 3
    with pytest.raises(
        NoSuchSnapshotError, match=r"earliest snapshot is from 1970-01-01T00:00:01.000Z \(1000 ms\)"
    ):
        md.snapshot_as_of(999)
    empty = new_table_metadata(SCHEMA, SPEC, ORDER, "/t")
    with pytest.raises(NoSuchSnapshotError, match="no snapshots"):
        empty.snapshot_as_of(10**13)


def test_v1_metadata_is_read() -> None:
    v1 = {
        "format-version": 1,
        "table-uuid": "d20125c8-7284-442c-9aea-15fee620737c",
        "location": "s3://bucket/test/location",
        "last-updated-ms": 1602638573874,
        "last-column-id": 3,
        "schema": {
            "type": "struct",
            "fields": [
                {"id": 1, "name": "x", "required": True, "type": "long"},
                {"id": 2, "name": "y", "required": True, "type": "long", "doc": "comment"},
                {"id": 3, "name": "z", "required": True, "type": "long"},
            ],
        },
        "partition-spec": [{"name": "x", "transform": "identity", "source-id": 1}],
        "properties": {},
        "current-snapshot-id": -1,
        "snapshots": [
            {
                "snapshot-id": 1,
                "timestamp-ms": 1515100955770,
                "summary": {"operation": "append"},
                "manifests": ["s3://a/b/1.avro"],
            }
        ],
    }
    md = parse_metadata(json.dumps(v1).encode())
    assert md.format_version == 1 and md.last_sequence_number == 0
    assert [f.name for f in md.schema().fields] == ["x", "y", "z"] and md.current_schema_id == 0
    assert md.spec() == PartitionSpec(0, (PartitionField(1, 1000, IdentityTransform(), "x"),))
    assert md.last_partition_id == 1000
    assert md.sort_order().fields == () and md.default_sort_order_id == 0
    assert md.current_snapshot_id is None and md.refs == {}
    (snap,) = md.snapshots
    assert snap.manifests == ("s3://a/b/1.avro",) and snap.manifest_list is None and snap.sequence_number == 0
    out = md.to_json()
    assert out["schema"]["fields"][1]["doc"] == "comment"
    assert out["snapshots"][0]["manifests"] == ["s3://a/b/1.avro"]
    assert parse_metadata(serialize_metadata(md)) == md


def test_metadata_json_is_pydantic_cores_bytes_whichever_encoder_writes_it() -> None:
    from pydantic_core import to_json

    md = _with_history()
    document = {**md.to_json(), "properties": {"text": "é\u2028\"\\", "n": "1"}, "extra-float": [1.5, 1e20, 1e-7, -0.0]}
    for indent in (True, False):
        assert json_bytes(document, indent) == to_json(document, indent=2 if indent else None)
    # What orjson writes otherwise, or refuses, is pydantic-core's: non-finite floats, big integers.
    for odd in ({"x": float("nan"), "y": float("inf")}, {"x": 2**70}, {"x": None}):
        assert json_bytes(odd, indent=True) == to_json(odd, indent=2, inf_nan_mode="constants")
    assert json_bytes({"x": float("nan")}) == b'{"x":NaN}'
    assert serialize_metadata(md) == to_json(md.to_json(), indent=2)


def test_refs_are_synthesized_for_old_metadata() -> None:
    obj = _with_history().to_json()
    del obj["refs"]
    md = TableMetadata.from_json(obj)
    assert md.refs == {"main": SnapshotRef(3, "branch")}


def test_v3_fields_and_unknown_fields_round_trip() -> None:
    obj = _with_history().to_json()
    obj["format-version"] = 3
    obj["next-row-id"] = 1234
    obj["encryption-keys"] = [{"key-id": "k1", "encrypted-key-metadata": "AA=="}]
    obj["snapshots"][2].update({"first-row-id": 1000, "added-rows": 234, "key-id": "k1"})
    obj["schemas"][0]["fields"].append(
        {"id": 11, "name": "v", "required": False, "type": "long", "initial-default": 5, "write-default": 6}
    )
    obj["last-column-id"] = 11
    md = TableMetadata.from_json(copy.deepcopy(obj))
    assert md.format_version == 3 and md.next_row_id == 1234
    snap = md.snapshot_by_id(3)
    assert snap is not None and (snap.first_row_id, snap.added_rows) == (1000, 234)
    assert snap.extra == {"key-id": "k1"}
    assert md.extra == {"encryption-keys": [{"key-id": "k1", "encrypted-key-metadata": "AA=="}]}
    assert md.to_json() == obj


def test_statistics_round_trip() -> None:
    obj = _with_history().to_json()
    obj["statistics"] = [
        {
            "snapshot-id": 3,
            "statistics-path": "s3://b/stats.puffin",
            "file-size-in-bytes": 413,
            "file-footer-size-in-bytes": 42,
            "blob-metadata": [
                {
                    "type": "apache-datasketches-theta-v1",
                    "snapshot-id": 3,
                    "sequence-number": 3,
                    "fields": [1],
                    "properties": {"ndv": "3"},
                }
            ],
        }
    ]
    obj["partition-statistics"] = [
        {"snapshot-id": 3, "statistics-path": "s3://b/p.parquet", "file-size-in-bytes": 43}
    ]
    md = TableMetadata.from_json(obj)
    assert md.statistics[0]["file-footer-size-in-bytes"] == 42
    assert md.to_json() == obj


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"format-version": 4}', "unsupported table format version 4"),
        (b'{"format-version": "2"}', "format-version"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_parse_errors(data: bytes, message: str) -> None:
    with pytest.raises(CorruptMetadataError, match=message):
        parse_metadata(data)


@pytest.mark.parametrize(
    "field",
    [
        "table-uuid",
        "location",
        "last-sequence-number",
        "last-updated-ms",
        "last-column-id",
        "schemas",
        "current-schema-id",
        "partition-specs",
        "default-spec-id",
        "last-partition-id",
        "sort-orders",
        "default-sort-order-id",
    ],
)
def test_missing_required_v2_fields(field: str) -> None:
    obj = _with_history().to_json()
    del obj[field]
    with pytest.raises(CorruptMetadataError, match=field):
        TableMetadata.from_json(obj)


def test_dangling_ids_are_corrupt() -> None:
    obj = _with_history().to_json()
    with pytest.raises(CorruptMetadataError, match="current-snapshot-id 99"):
        TableMetadata.from_json({**obj, "current-snapshot-id": 99})
    with pytest.raises(CorruptMetadataError, match="current-schema-id 5"):
        TableMetadata.from_json({**obj, "current-schema-id": 5})
    with pytest.raises(CorruptMetadataError, match=r"snapshot 3 .*timestamp-ms"):
        broken = copy.deepcopy(obj)
        del broken["snapshots"][2]["timestamp-ms"]
        TableMetadata.from_json(broken)
    with pytest.raises(CorruptMetadataError, match="ref 'main'"):
        TableMetadata.from_json({**obj, "refs": {"main": {"snapshot-id": 3, "type": "twig"}}})


def test_gzip_metadata() -> None:
    md = _with_history()
    assert parse_metadata(gzip.compress(serialize_metadata(md))) == md


def test_snapshot_ids_are_positive_longs() -> None:
    ids = {new_snapshot_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(0 <= i < 2**63 for i in ids)


# -- interop with pyiceberg ----------------------------------------------------------------------


def _pyiceberg_table(tmp_path: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField as PyField
    from pyiceberg.partitioning import PartitionSpec as PySpec
    from pyiceberg.schema import Schema as PySchema
    from pyiceberg.table.sorting import SortField as PySortField
    from pyiceberg.table.sorting import SortOrder as PySortOrder
    from pyiceberg.transforms import IdentityTransform as PyIdentity
    from pyiceberg.types import LongType as PyLong
    from pyiceberg.types import NestedField as PyNested
    from pyiceberg.types import StringType as PyString

    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    catalog = SqlCatalog("py", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
    catalog.create_namespace("db")
    schema = PySchema(
        PyNested(1, "id", PyLong(), required=True), PyNested(2, "s", PyString()), identifier_field_ids=[1]
    )
    table = catalog.create_table(
        "db.t",
        schema,
        partition_spec=PySpec(PyField(2, 1000, PyIdentity(), "s")),
        sort_order=PySortOrder(PySortField(1, PyIdentity())),
        properties={"k": "v"},
    )
    data = pa.table(
        {"id": pa.array([1, 2], pa.int64()), "s": pa.array(["a", None])},
        schema=pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("s", pa.string())]),
    )
    table.append(data)
    table.append(data)
    with table.update_schema() as update:
        update.add_column("extra", PyLong())
    return table


def test_parse_pyiceberg_metadata(tmp_path: Path) -> None:
    table = _pyiceberg_table(tmp_path)
    path = Path(table.metadata_location.removeprefix("file://"))
    md = parse_metadata(path.read_bytes())
    py = table.metadata
    assert md.format_version == 2 and md.table_uuid == str(py.table_uuid)
    assert md.location == py.location and md.last_sequence_number == py.last_sequence_number == 2
    assert md.last_column_id == 3 and md.current_schema_id == 1
    assert [f.name for f in md.schema().fields] == ["id", "s", "extra"]
    assert md.schema().identifier_field_ids == (1,)
    assert md.spec() == PartitionSpec(0, (PartitionField(2, 1000, IdentityTransform(), "s"),))
    assert md.sort_order() == SortOrder(1, (SortField(1, IdentityTransform()),))
    assert md.properties == dict(py.properties)
    assert md.current_snapshot_id == py.current_snapshot_id
    assert [
        (s.snapshot_id, s.parent_snapshot_id, s.sequence_number, s.timestamp_ms, s.manifest_list)
        for s in md.snapshots
    ] == [
        (s.snapshot_id, s.parent_snapshot_id, s.sequence_number, s.timestamp_ms, s.manifest_list)
        for s in py.snapshots
    ]
    assert (
        md.snapshots[1].summary["operation"] == "append" and md.snapshots[1].summary["total-records"] == "4"
    )
    assert [(e.snapshot_id, e.timestamp_ms) for e in md.snapshot_log] == [
        (e.snapshot_id, e.timestamp_ms) for e in py.snapshot_log
    ]
    assert [e.metadata_file for e in md.metadata_log] == [e.metadata_file for e in py.metadata_log]
    assert md.refs == {"main": SnapshotRef(py.current_snapshot_id, "branch")}


def test_pyiceberg_parses_our_metadata(tmp_path: Path) -> None:
    from pyiceberg.table.metadata import TableMetadataUtil

    md = _with_history()
    py = TableMetadataUtil.parse_raw(serialize_metadata(md).decode())
    assert py.format_version == 2 and str(py.table_uuid) == md.table_uuid
    assert py.current_snapshot_id == 3 and py.last_sequence_number == 3
    assert [s.snapshot_id for s in py.snapshots] == [1, 2, 3]
    assert py.snapshot_by_id(2).parent_snapshot_id == 1  # type: ignore[union-attr]
    assert py.schema().find_field("point.x").field_id == 6
    assert [(f.source_id, f.field_id, str(f.transform), f.name) for f in py.spec().fields] == [
        (2, 1000, "day", "ts_day"),
        (1, 1001, "bucket[16]", "id_bucket"),
        (6, 1002, "identity", "point_x"),
    ]
    assert py.sort_order().order_id == 1 and py.last_partition_id == 1002
    assert {name: (ref.snapshot_id, str(ref.snapshot_ref_type)) for name, ref in py.refs.items()} == {
        "main": (3, "branch"),
        "tag1": (1, "tag"),
    }
    assert py.properties == {"owner": "me"}
    empty = TableMetadataUtil.parse_raw(serialize_metadata(new_table_metadata(SCHEMA, SPEC, ORDER, "/t")).decode())
    assert empty.current_snapshot_id is None
