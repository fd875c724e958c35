"""Format v3 manifests and manifest lists: the v3 fields, first-row-id assignment and inheritance.

The figures are the spec's own "Row lineage example" (format/spec.md): a snapshot with
first-row-id 1000 whose new manifests hold 100+25, 0+100 and 125+25 added+existing rows.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import fastavro
import pytest

from tablestore.errors import ValidationError
from tablestore.spec.manifests.manifest import (
    UNASSIGNED_SEQUENCE_NUMBER,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    assign_first_row_ids,
    inherit_first_row_ids,
    read_manifest,
    read_manifest_list,
    write_manifest,
    write_manifest_list,
)
from tablestore.spec.partitioning.partition_spec import UNPARTITIONED_SPEC
from tests.spec.manifests.manifest_fixtures import SCHEMA, LocalIO


def manifest(name: str, added: int, existing: int, first_row_id: int | None = None) -> ManifestFile:
    return ManifestFile(name, 100, 0, ManifestContent.DATA, UNASSIGNED_SEQUENCE_NUMBER, UNASSIGNED_SEQUENCE_NUMBER,
                        7, 1, 1, 0, added, existing, 0, first_row_id=first_row_id)


def test_first_row_ids_are_assigned_as_in_the_spec_example() -> None:
    existing = dataclasses.replace(manifest("existing", 75, 0, 925), sequence_number=3, min_sequence_number=3)
    deletes = dataclasses.replace(manifest("deletes", 5, 0), content=ManifestContent.DELETES)
    given = [existing, manifest("added1", 100, 25), manifest("added2", 0, 100), deletes, manifest("added3", 125, 25)]
    assigned, added_rows = assign_first_row_ids(given, 1000)
    assert [m.first_row_id for m in assigned] == [925, 1000, 1125, None, 1225]
    assert added_rows == 375  # next-row-id becomes 1375
    assert given[1].first_row_id is None  # the input is not mutated


def test_v3_manifest_round_trips_row_ids_and_dv_fields_and_files_inherit_ids(tmp_path: Path) -> None:
    io = LocalIO()

    def data(path: str, rows: int, first_row_id: int | None = None) -> DataFile:
        return DataFile(DataFileContent.DATA, path, FileFormat.PARQUET, (), rows, 10, first_row_id=first_row_id)

    entries = [
        ManifestEntry(ManifestEntryStatus.EXISTING, 5, 1, 1, data("s3://b/data1", 25, 800)),
        ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, data("s3://b/data2", 50)),
        ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, data("s3://b/data3", 50)),
    ]
    mf = write_manifest(io, str(tmp_path / "m.avro"), UNPARTITIONED_SPEC, SCHEMA, 7, entries, format_version=3)
    (mf,), added_rows = assign_first_row_ids([mf], 1000)
    written = write_manifest_list(io, str(tmp_path / "l.avro"), 7, None, 2, [mf], format_version=3, first_row_id=1000)
    assert added_rows == 125 and written[0].first_row_id == 1000
    with open(tmp_path / "l.avro", "rb") as f:
        reader = fastavro.reader(f)
        assert reader.metadata["first-row-id"] == "1000" and reader.metadata["format-version"] == "3"
        assert [r["first_row_id"] for r in reader] == [1000]  # type: ignore[index,call-overload]
    (listed,) = read_manifest_list(io, str(tmp_path / "l.avro"))
    assert listed.first_row_id == 1000
    read = inherit_first_row_ids(listed, read_manifest(io, listed))
    # The spec's example: data1 keeps 800, data2 and data3 inherit 1000 + 0 and 1000 + 50.
    assert [(e.data_file.file_path, e.data_file.first_row_id) for e in read] == [
        ("s3://b/data1", 800), ("s3://b/data2", 1000), ("s3://b/data3", 1050)]

    dv = DataFile(DataFileContent.POSITION_DELETES, "s3://b/dv.puffin", FileFormat.PUFFIN, (), 3, 90,
                  referenced_data_file="s3://b/data2", content_offset=4, content_size_in_bytes=44)
    dm = write_manifest(io, str(tmp_path / "d.avro"), UNPARTITIONED_SPEC, SCHEMA, 7,
                        [ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, dv)],
                        content=ManifestContent.DELETES, format_version=3)
    with open(tmp_path / "d.avro", "rb") as f:
        (record,) = list(fastavro.reader(f))
    assert isinstance(record, dict)
    data_file: Any = record["data_file"]
    assert {k: data_file[k] for k in ("referenced_data_file", "content_offset", "content_size_in_bytes",
                                                  "first_row_id", "file_format")} == {
        "referenced_data_file": "s3://b/data2", "content_offset": 4, "content_size_in_bytes": 44,
        "first_row_id": None, "file_format": "PUFFIN"}
    (back,) = read_manifest(io, dataclasses.replace(dm, sequence_number=2, min_sequence_number=2))
    assert (back.data_file.content_offset, back.data_file.content_size_in_bytes) == (4, 44)


def test_v3_manifest_list_without_row_ids_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="needs its first-row-id"):
        write_manifest_list(LocalIO(), str(tmp_path / "l.avro"), 7, None, 2, [manifest("m", 1, 0)], format_version=3)
    assert not (tmp_path / "l.avro").exists()
