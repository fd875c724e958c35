"""The metadata tables over every snapshot (``all_files``, ``all_data_files``, ``all_delete_files``,
``all_entries``, ``all_manifests``) and ``position_deletes``, with Java Iceberg's columns.

A SQLite catalog of the module's own: what is proved is what the inspector reads from the
table's files, which the catalog takes no part in."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from tablestore.table import Table

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("part", pa.string())])


def make_table(tmp_path: Path, format_version: int) -> Table:
    """Three snapshots: append ids 1-3 (part a), append 4 (part b), then delete id 2 by position."""
    catalog = tablestore.load_catalog("local", type="sql", uri=f"sqlite:///{tmp_path}/c.db",
                                      warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA, partition_by=["part"], format_version=format_version,
                                 properties={"write.delete.mode": "merge-on-read"})
    table.append(pa.table({"id": [1, 2, 3], "part": ["a"] * 3}, schema=SCHEMA))
    table.append(pa.table({"id": [4], "part": ["b"]}, schema=SCHEMA))
    assert table.delete("id = 2") == 1
    return table


@pytest.mark.parametrize("format_version", [2, 3])
def test_all_files_read_every_snapshot(tmp_path: Path, format_version: int) -> None:
    table = make_table(tmp_path, format_version)
    inspect = table.inspect
    data_paths = sorted(inspect.data_files()["file_path"].to_pylist())
    assert len(data_paths) == 2
    # Every manifest of every snapshot once: the first file is listed by the first snapshot's
    # manifest (it is carried over by reference later), the second by the second's.
    all_data = inspect.all_data_files()
    assert sorted(set(all_data["file_path"].to_pylist())) == data_paths
    assert all_data.schema == inspect.data_files().schema
    delete_paths = inspect.delete_files()["file_path"].to_pylist()
    assert len(delete_paths) == 1
    assert inspect.all_delete_files()["file_path"].to_pylist() == delete_paths
    assert sorted(set(inspect.all_files()["file_path"].to_pylist())) == sorted(data_paths + delete_paths)
    assert inspect.all_files()["content"].to_pylist().count(1) == 1
    entries = inspect.all_entries()
    assert entries.schema == inspect.entries().schema
    assert {e["file_path"] for e in entries["data_file"].to_pylist()} == set(data_paths + delete_paths)


@pytest.mark.parametrize("format_version", [2, 3])
def test_all_manifests_has_a_row_per_snapshot_and_manifest(tmp_path: Path, format_version: int) -> None:
    table = make_table(tmp_path, format_version)
    snapshots = table.snapshots()
    found = table.inspect.all_manifests()
    assert found.column_names == [*table.inspect.manifests().column_names, "reference_snapshot_id"]
    by_snapshot: dict[int, list[str]] = {}
    for row in found.to_pylist():
        by_snapshot.setdefault(row["reference_snapshot_id"], []).append(row["path"])
    assert sorted(by_snapshot) == sorted(s.snapshot_id for s in snapshots)
    for s in snapshots:
        assert sorted(by_snapshot[s.snapshot_id]) == sorted(table.inspect.manifests(s.snapshot_id)["path"].to_pylist())


@pytest.mark.parametrize("format_version", [2, 3])
def test_position_deletes_lists_each_deleted_position(tmp_path: Path, format_version: int) -> None:
    table = make_table(tmp_path, format_version)
    found = table.inspect.position_deletes()
    assert found.column_names == ["file_path", "pos", "row", "partition", "spec_id", "delete_file_path",
                                  "content_offset", "content_size_in_bytes"]
    data_file = next(f for f in table.inspect.data_files().to_pylist() if f["partition"] == {"part": "a"})
    delete_file = table.inspect.delete_files().to_pylist()[0]
    assert found.to_pylist() == [{
        "file_path": data_file["file_path"], "pos": 1, "row": None, "partition": {"part": "a"}, "spec_id": 0,
        "delete_file_path": delete_file["file_path"], "content_offset": delete_file["content_offset"],
        "content_size_in_bytes": delete_file["content_size_in_bytes"],
    }]
    assert (delete_file["content_offset"] is not None) == (format_version == 3)
    # At the snapshot before the delete there is none.
    assert table.inspect.position_deletes(table.snapshots()[1].snapshot_id).num_rows == 0
