"""Manifests and manifest lists: round trips, inheritance, summaries, v1, validation and speed."""

from __future__ import annotations

import json
import math
import time
import uuid
from decimal import Decimal
from pathlib import Path

import fastavro
import pytest

from tablestore.errors import CorruptMetadataError, ValidationError
from tablestore.spec.manifests.manifest import (
    UNASSIGNED_SEQUENCE_NUMBER,
    DataFile,
    DataFileContent,
    FieldSummary,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    read_manifest,
    read_manifest_list,
    read_manifest_metadata,
    write_manifest,
    write_manifest_list,
)
from tablestore.spec.manifests.manifest_avro import decimal_required_bytes, manifest_entry_schema
from tablestore.spec.partitioning.partition_spec import UNPARTITIONED_SPEC, PartitionField, PartitionSpec
from tablestore.spec.partitioning.transforms import DayTransform, IdentityTransform
from tablestore.spec.schemas.conversions import to_bytes
from tablestore.spec.schemas.types import (
    DoubleType,
    IntegerType,
    NestedField,
    StructType,
)
from tests.spec.manifests.manifest_fixtures import KEY, P1, P2, P3, SCHEMA, SPEC, LocalIO, avro_records, sample_file


def test_round_trip_with_inheritance(tmp_path: Path) -> None:
    io = LocalIO()
    entries = [
        ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, sample_file(1, P1)),
        ManifestEntry(ManifestEntryStatus.EXISTING, 11, 4, 5, sample_file(2, P2)),
        ManifestEntry(
            ManifestEntryStatus.DELETED, 12, 2, 3, sample_file(3, P3, lower_bounds=None, split_offsets=None)
        ),
    ]
    path = str(tmp_path / "m.avro")
    mf = write_manifest(io, path, SPEC, SCHEMA, 99, entries)

    assert mf.manifest_path == path
    assert mf.manifest_length == Path(path).stat().st_size
    assert mf.partition_spec_id == 3
    assert mf.content == ManifestContent.DATA
    assert mf.sequence_number == UNASSIGNED_SEQUENCE_NUMBER
    assert mf.min_sequence_number == 4  # from the EXISTING entry; DELETED ones do not count
    assert mf.added_snapshot_id == 99
    assert (mf.added_files_count, mf.existing_files_count, mf.deleted_files_count) == (1, 1, 1)
    assert (mf.added_rows_count, mf.existing_rows_count, mf.deleted_rows_count) == (11, 12, 13)

    # the manifest list assigns the snapshot's sequence number to the new manifest
    list_path = str(tmp_path / "snap.avro")
    written = write_manifest_list(io, list_path, 99, 42, 7, [mf])
    assert written[0].sequence_number == 7 and written[0].min_sequence_number == 4
    assert mf.sequence_number == UNASSIGNED_SEQUENCE_NUMBER  # the input is not mutated
    (listed,) = read_manifest_list(io, list_path)
    assert listed == written[0]

    added, existing, deleted = read_manifest(io, listed)
    assert (added.status, added.snapshot_id, added.sequence_number, added.file_sequence_number) == (
        ManifestEntryStatus.ADDED,
        99,
        7,
        7,
    )
    assert (existing.snapshot_id, existing.sequence_number, existing.file_sequence_number) == (11, 4, 5)
    # a DELETED entry records the deleting snapshot and keeps its sequence numbers
    assert (deleted.status, deleted.snapshot_id, deleted.sequence_number, deleted.file_sequence_number) == (
        ManifestEntryStatus.DELETED,
        99,
        2,
        3,
    )

    assert added.data_file == sample_file(1, P1, spec_id=3)
    assert existing.data_file.partition[:4] == P2[:4]
    assert math.isnan(existing.data_file.partition[4])
    assert existing.data_file.partition[5:] == P2[5:]
    assert deleted.data_file.partition == P3
    assert deleted.data_file.lower_bounds is None and deleted.data_file.split_offsets is None
    assert isinstance(added.data_file.partition[3], uuid.UUID)
    assert isinstance(added.data_file.partition[1], Decimal)
    assert added.data_file.spec_id == 3

    assert [e.data_file.file_path for e in read_manifest(io, listed, discard_deleted=True)] == [
        "s3://bucket/data/file-1.parquet",
        "s3://bucket/data/file-2.parquet",
    ]
    kept = read_manifest(io, listed, partition_filter=lambda p: p[2] == "zz")
    assert [e.data_file.file_path for e in kept] == ["s3://bucket/data/file-2.parquet"]


def test_partition_summaries(tmp_path: Path) -> None:
    io = LocalIO()
    entries = [
        ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, sample_file(i, p))
        for i, p in enumerate([P1, P2, P3])
    ]
    mf = write_manifest(io, str(tmp_path / "m.avro"), SPEC, SCHEMA, 1, entries)
    assert mf.min_sequence_number == UNASSIGNED_SEQUENCE_NUMBER
    types = [f.field_type for f in SPEC.partition_type(SCHEMA).fields]
    summaries = mf.partitions
    assert summaries is not None and len(summaries) == 10
    assert summaries[0] == FieldSummary(True, False, to_bytes(types[0], -1), to_bytes(types[0], 19723))
    assert summaries[1] == FieldSummary(
        True, False, to_bytes(types[1], Decimal("-0.01")), to_bytes(types[1], Decimal("12.34"))
    )
    assert summaries[2].lower_bound == b"ab" and summaries[2].upper_bound == b"zz"
    assert summaries[3] == FieldSummary(True, False, KEY.bytes, KEY.bytes)
    # NaN is flagged and kept out of the bounds
    assert summaries[4] == FieldSummary(True, True, to_bytes(DoubleType(), 1.5), to_bytes(DoubleType(), 1.5))
    assert summaries[5] == FieldSummary(True, False, b"\x00", b"\x01")
    assert summaries[6].lower_bound == b"" and summaries[6].upper_bound == b"\x00\xff"

    written = write_manifest_list(io, str(tmp_path / "l.avro"), 1, None, 1, [mf])
    assert written[0].min_sequence_number == 1
    assert read_manifest_list(io, str(tmp_path / "l.avro"))[0].partitions == summaries


def test_signed_zero_bounds() -> None:
    from tablestore.spec.manifests.manifest import partition_summaries

    double = StructType(NestedField(1000, "x", DoubleType()))
    (s,) = partition_summaries(double, [(0.0,), (-0.0,)])
    assert (s.lower_bound, s.upper_bound) == (to_bytes(DoubleType(), -0.0), to_bytes(DoubleType(), 0.0))
    (s,) = partition_summaries(double, [(-0.0,), (0.0,), (None,)])
    assert (s.lower_bound, s.upper_bound, s.contains_null) == (
        to_bytes(DoubleType(), -0.0), to_bytes(DoubleType(), 0.0), True)


def test_decimal_sizes() -> None:
    assert [decimal_required_bytes(p) for p in (1, 2, 3, 9, 10, 18, 19, 38)] == [1, 1, 2, 4, 5, 8, 9, 16]


def test_v1_manifest_and_list(tmp_path: Path) -> None:
    io = LocalIO()
    spec = PartitionSpec(0, (PartitionField(1, 1000, IdentityTransform(), "id"),))
    entries = [
        ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, sample_file(0, (5,))),
        ManifestEntry(ManifestEntryStatus.EXISTING, 3, 0, 0, sample_file(1, (6,))),
    ]
    mf = write_manifest(io, str(tmp_path / "m.avro"), spec, SCHEMA, 8, entries, format_version=1)
    write_manifest_list(io, str(tmp_path / "l.avro"), 8, 3, 0, [mf], format_version=1)
    with open(tmp_path / "m.avro", "rb") as f:
        reader = fastavro.reader(f)
        schema = json.loads(reader.metadata["avro.schema"])
        assert "content" not in reader.metadata
        raw = avro_records(reader)
    assert [f["name"] for f in schema["fields"]] == ["status", "snapshot_id", "data_file"]
    assert raw[0]["snapshot_id"] == 8 and raw[0]["data_file"]["block_size_in_bytes"] == 64 * 1024 * 1024
    (listed,) = read_manifest_list(io, str(tmp_path / "l.avro"))
    assert (listed.sequence_number, listed.min_sequence_number, listed.content) == (
        0,
        0,
        ManifestContent.DATA,
    )
    a, e = read_manifest(io, listed)
    assert (a.snapshot_id, a.sequence_number, a.file_sequence_number) == (8, 0, 0)
    assert (e.snapshot_id, e.sequence_number) == (3, 0)
    assert a.data_file.content == DataFileContent.DATA and a.data_file.partition == (5,)
    with pytest.raises(ValidationError):
        write_manifest(io, str(tmp_path / "d.avro"), spec, SCHEMA, 8, entries, ManifestContent.DELETES, 1)


def test_delete_manifest_and_unpartitioned(tmp_path: Path) -> None:
    io = LocalIO()
    delete = DataFile(
        DataFileContent.EQUALITY_DELETES,
        "s3://b/d.parquet",
        FileFormat.PARQUET,
        (),
        3,
        100,
        equality_ids=[1, 4],
        referenced_data_file=None,
    )
    pos = DataFile(
        DataFileContent.POSITION_DELETES,
        "s3://b/p.parquet",
        FileFormat.PARQUET,
        (),
        2,
        50,
        referenced_data_file="s3://b/data.parquet",
    )
    mf = write_manifest(
        io,
        str(tmp_path / "d.avro"),
        UNPARTITIONED_SPEC,
        SCHEMA,
        4,
        [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f) for f in (delete, pos)],
        content=ManifestContent.DELETES,
    )
    assert mf.content == ManifestContent.DELETES and mf.partitions == []
    assert read_manifest_metadata(io, mf.manifest_path)["content"] == "deletes"
    mf.sequence_number = mf.min_sequence_number = 9
    got = [e.data_file for e in read_manifest(io, mf)]
    assert got[0].equality_ids == [1, 4] and got[0].content == DataFileContent.EQUALITY_DELETES
    assert got[1].referenced_data_file == "s3://b/data.parquet" and got[1].partition == ()


def test_invalid_entries(tmp_path: Path) -> None:
    io = LocalIO()
    with pytest.raises(ValidationError, match="sequence numbers"):
        write_manifest(
            io,
            str(tmp_path / "m.avro"),
            UNPARTITIONED_SPEC,
            SCHEMA,
            1,
            [ManifestEntry(ManifestEntryStatus.EXISTING, 1, None, None, sample_file(0, ()))],
        )
    with pytest.raises(ValidationError, match="partition"):
        write_manifest(
            io,
            str(tmp_path / "m.avro"),
            UNPARTITIONED_SPEC,
            SCHEMA,
            1,
            [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, sample_file(0, (1,)))],
        )
    mf = ManifestFile(
        "m",
        1,
        0,
        ManifestContent.DATA,
        UNASSIGNED_SEQUENCE_NUMBER,
        UNASSIGNED_SEQUENCE_NUMBER,
        123,
        1,
        0,
        0,
        1,
        0,
        0,
    )
    with pytest.raises(ValidationError, match="only manifests added by snapshot 5"):
        write_manifest_list(io, str(tmp_path / "l.avro"), 5, None, 1, [mf])


def test_corrupt_files(tmp_path: Path) -> None:
    io = LocalIO()
    (tmp_path / "junk.avro").write_bytes(b"not avro at all")
    with pytest.raises(CorruptMetadataError, match="not an Avro file"):
        read_manifest_list(io, str(tmp_path / "junk.avro"))
    mf = write_manifest(
        io,
        str(tmp_path / "m.avro"),
        SPEC,
        SCHEMA,
        1,
        [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, sample_file(0, P1))],
    )
    data = (tmp_path / "m.avro").read_bytes()
    (tmp_path / "m.avro").write_bytes(data[:-30])
    with pytest.raises(CorruptMetadataError):
        read_manifest(io, mf)


def test_read_speed(tmp_path: Path) -> None:
    """Entries of a ten-column table with full metrics. The bound is loose (shared CI machines:
    about 15 µs per entry on a quiet laptop) but catches a fall back to generic decoding."""
    io = LocalIO()
    spec = PartitionSpec(0, (PartitionField(2, 1000, DayTransform(), "ts_day"),))
    stats = {c: 1000 for c in range(1, 11)}
    bounds = {c: b"\x01\x00\x00\x00\x00\x00\x00\x00" for c in range(1, 11)}
    n = 30_000
    entries = [
        ManifestEntry(
            ManifestEntryStatus.ADDED,
            None,
            None,
            None,
            DataFile(
                DataFileContent.DATA,
                f"s3://bucket/data/{i:08d}.parquet",
                FileFormat.PARQUET,
                (19000 + i % 365,),
                1000,
                123456,
                stats,
                stats,
                stats,
                None,
                bounds,
                bounds,
                None,
                [4],
                None,
                0,
            ),
        )
        for i in range(n)
    ]
    mf = write_manifest(io, str(tmp_path / "big.avro"), spec, SCHEMA, 1, entries)
    mf.sequence_number = mf.min_sequence_number = 1
    start = time.process_time()
    got = read_manifest(io, mf)
    elapsed = time.process_time() - start
    assert len(got) == n and got[-1].data_file.lower_bounds == bounds
    assert elapsed < n * 300e-6, f"reading {n} manifest entries took {elapsed:.1f}s"


def test_struct_partition_type_helper() -> None:
    # the partition record is derived from the spec's partition type
    schema = manifest_entry_schema(StructType(NestedField(1000, "x", IntegerType())), 2)
    partition = schema["fields"][4]["type"]["fields"][3]["type"]
    assert partition == {
        "type": "record",
        "name": "r102",
        "fields": [{"name": "x", "field-id": 1000, "type": ["null", "int"], "default": None}],
    }
