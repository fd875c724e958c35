"""Writing deletion vectors: merge-on-read DELETE, UPDATE and MERGE on format v3 tables.

Each data file gets at most one live DV: a later delete merges the file's DV (and the Parquet
position deletes of a table upgraded from v2) into a new one and the commit marks what it
replaced DELETED. Our Puffin files are parsed with the independent, spec-only parser of
``tests/spec/manifests/test_puffin.py``; pyiceberg reads every table alike. Rewrites (compaction,
copy-on-write) drop the DVs of the files they replace; expiry keeps a Puffin file while a DV
in it is live. A concurrent DV for the same data file is a conflict.

What is checked is what the files hold, so the module keeps one SQLite catalog of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.errors import CommitConflictError
from tablestore.maintenance.compaction import rewrite_data_files
from tablestore.maintenance.expire import expire_snapshots
from tablestore.spec.manifests.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    read_manifest,
    read_manifest_list,
)
from tablestore.table import Table
from tablestore.table.ops.row_level import RowLevelOperation, apply_positions
from tablestore.table.read.deletion_vectors import referenced_data_file
from tests.spec.manifests.test_puffin import parse_dv, parse_puffin

MOR = {f"write.{op}.mode": "merge-on-read" for op in ("delete", "update", "merge")}
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("part", pa.int32())])


def rows_of(ids: list[int], part: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids],
                     "part": pa.array([part] * len(ids), pa.int32())}, schema=SCHEMA)


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    catalog = SqlCatalog("dv", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    return catalog


def v3_table(catalog: SqlCatalog, name: str = "db.t", **properties: str) -> Table:
    """A v3 table partitioned by ``part``: ids 0-9 in part 1 and 10-19 in part 2, one file each."""
    table = catalog.create_table(name, SCHEMA, partition_by=["part"], format_version=3,
                                 properties={**MOR, **properties})
    table.append(pa.concat_tables([rows_of(list(range(10)), 1), rows_of(list(range(10, 20)), 2)]))
    return catalog.load_table(name)


def ids(table: Table) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def pyiceberg_ids(table: Table) -> list[int]:
    return sorted(StaticTable.from_metadata(table.metadata_location).scan().to_arrow().column("id").to_pylist())


def entries(table: Table, content: ManifestContent) -> list[ManifestEntry]:
    """The current snapshot's entries of one manifest content, DELETED ones included."""
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    return [e for m in read_manifest_list(table.io, snapshot.manifest_list) if m.content == content
            for e in read_manifest(table.io, m)]


def live_deletes(table: Table) -> list[DataFile]:
    return [e.data_file for e in entries(table, ManifestContent.DELETES) if e.status != ManifestEntryStatus.DELETED]


def data_file_of(table: Table, part: int) -> DataFile:
    (found,) = [e.data_file for e in entries(table, ManifestContent.DATA)
                if e.status != ManifestEntryStatus.DELETED and e.data_file.partition == (part,)]
    return found


def positions_of(table: Table, data_file: DataFile, wanted: set[int]) -> set[int]:
    """Positions, in the data file itself, of the rows with the ``wanted`` ids."""
    fs, path = table.io.filesystem_for(data_file.file_path)
    column = pq.read_table(fs.open_input_file(path), columns=["id"]).column("id").to_pylist()
    return {pos for pos, value in enumerate(column) if value in wanted}


def puffin_dvs(table: Table, dv: DataFile) -> dict[str, Any]:
    """The DV entry's blob, parsed independently: footer metadata and positions."""
    data = table.io.new_input(dv.file_path).read()
    footer, blobs = parse_puffin(data)
    (meta,) = [b for b in footer["blobs"] if b["offset"] == dv.content_offset]
    blob = blobs[footer["blobs"].index(meta)]
    return {"meta": meta, "positions": parse_dv(blob), "size": len(data), "footer": footer}


def test_a_merge_on_read_delete_on_v3_writes_one_dv_per_data_file(catalog: SqlCatalog) -> None:
    table = v3_table(catalog)
    files = {part: data_file_of(table, part) for part in (1, 2)}
    assert table.delete("id IN (2, 3, 7, 15)") == 4
    table = catalog.load_table("db.t")
    assert ids(table) == [i for i in range(20) if i not in (2, 3, 7, 15)]
    assert pyiceberg_ids(table) == ids(table)
    dvs = {d.referenced_data_file: d for d in live_deletes(table)}
    assert set(dvs) == {files[1].file_path, files[2].file_path}
    expected = {1: {2, 3, 7}, 2: {15}}
    for part, data_file in files.items():
        dv = dvs[data_file.file_path]
        assert (dv.content, dv.file_format, dv.spec_id, dv.partition) == (
            DataFileContent.POSITION_DELETES, FileFormat.PUFFIN, data_file.spec_id, (part,))
        assert dv.file_path.endswith("-deletes.puffin") and f"part={part}" in dv.file_path
        parsed = puffin_dvs(table, dv)
        positions = positions_of(table, data_file, expected[part])
        assert parsed["positions"] == positions and dv.record_count == len(positions)
        assert parsed["meta"] == {
            "type": "deletion-vector-v1", "fields": [2147483645], "snapshot-id": -1, "sequence-number": -1,
            "offset": 4, "length": dv.content_size_in_bytes,
            "properties": {"referenced-data-file": data_file.file_path, "cardinality": str(len(positions))},
        }
        assert dv.content_offset == 4 and parsed["size"] == dv.file_size_in_bytes
        assert parsed["footer"]["properties"]["created-by"].startswith("tablestore ")
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert (summary["operation"], summary["added-dvs"], summary["added-delete-files"]) == ("delete", "2", "2")
    assert summary["added-position-deletes"] == "4" and "added-position-delete-files" not in summary
    assert summary["total-position-deletes"] == "4" and summary["total-delete-files"] == "2"


def test_a_second_delete_merges_the_files_dv_into_a_new_one_and_retires_the_old(catalog: SqlCatalog) -> None:
    table = v3_table(catalog)
    data_file = data_file_of(table, 1)
    table.delete("id IN (1, 4)")
    (first,) = live_deletes(catalog.load_table("db.t"))
    assert catalog.load_table("db.t").delete("id IN (4, 8)") == 1  # 4 is gone already
    table = catalog.load_table("db.t")
    assert ids(table) == [i for i in range(20) if i not in (1, 4, 8)]
    assert pyiceberg_ids(table) == ids(table)
    (dv,) = live_deletes(table)
    assert dv.file_path != first.file_path and dv.referenced_data_file == data_file.file_path
    assert puffin_dvs(table, dv)["positions"] == positions_of(table, data_file, {1, 4, 8}) and dv.record_count == 3
    retired = [e for e in entries(table, ManifestContent.DELETES) if e.status == ManifestEntryStatus.DELETED]
    assert [(e.data_file.file_path, e.snapshot_id) for e in retired] == [
        (first.file_path, table.current_snapshot().snapshot_id)]  # type: ignore[union-attr]
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert (summary["added-dvs"], summary["removed-dvs"], summary["removed-delete-files"]) == ("1", "1", "1")
    assert summary["total-position-deletes"] == "3" and summary["total-delete-files"] == "1"
    # Deleting every remaining row of the file drops it, and its DV with it.
    assert table.delete("id < 10") == 7
    table = catalog.load_table("db.t")
    assert ids(table) == list(range(10, 20)) and live_deletes(table) == []
    assert pyiceberg_ids(table) == list(range(10, 20))


def test_a_dv_merges_the_position_delete_files_of_a_table_upgraded_from_v2(catalog: SqlCatalog) -> None:
    table = catalog.create_table("db.up", SCHEMA, partition_by=["part"], properties=MOR)
    table.append(pa.concat_tables([rows_of(list(range(10)), 1), rows_of(list(range(10, 20)), 2)]))
    table.delete("id IN (0, 5, 12)")
    # Our v2 position delete files are file-scoped: their file_path bounds name the one data file.
    parquet = {referenced_data_file(d): d for d in live_deletes(catalog.load_table("db.up"))}
    assert all(d.file_format == FileFormat.PARQUET for d in parquet.values()) and len(parquet) == 2
    catalog.load_table("db.up").update_properties({"format-version": "3"})
    table = catalog.load_table("db.up")
    data_file = data_file_of(table, 1)
    assert table.delete("id = 6") == 1
    table = catalog.load_table("db.up")
    assert ids(table) == [i for i in range(20) if i not in (0, 5, 6, 12)]
    assert pyiceberg_ids(table) == ids(table)
    live = live_deletes(table)
    (dv,) = [d for d in live if d.file_format == FileFormat.PUFFIN]
    assert puffin_dvs(table, dv)["positions"] == positions_of(table, data_file, {0, 5, 6})
    # The file-scoped Parquet file of part 1 is merged and retired; part 2's stays.
    assert [d.file_path for d in live if d.file_format == FileFormat.PARQUET] == [
        parquet[data_file_of(table, 2).file_path].file_path]
    retired = [e.data_file.file_path for e in entries(table, ManifestContent.DELETES)
               if e.status == ManifestEntryStatus.DELETED]
    assert retired == [parquet[data_file.file_path].file_path]


def test_update_and_merge_on_v3_write_dvs_and_new_rows(catalog: SqlCatalog) -> None:
    table = v3_table(catalog)
    originals = {part: data_file_of(table, part) for part in (1, 2)}
    assert table.update({"v": "'changed'"}, "id IN (3, 13)") == 2
    source = pa.table({"id": pa.array([4, 14, 30], pa.int64()), "v": ["m4", "m14", "m30"],
                       "part": pa.array([1, 2, 2], pa.int32())})
    result = (catalog.load_table("db.t").merge(source, on="t.id = s.id")
              .when_matched_update_all().when_not_matched_insert_all().execute())
    assert (result.updated, result.inserted) == (2, 1)
    table = catalog.load_table("db.t")
    got = {r["id"]: r["v"] for r in table.scan().to_arrow().to_pylist()}
    assert got == {**{i: f"v{i}" for i in range(20)}, 3: "changed", 13: "changed", 4: "m4", 14: "m14", 30: "m30"}
    py = StaticTable.from_metadata(table.metadata_location).scan().to_arrow().to_pylist()
    assert {r["id"]: r["v"] for r in py} == got
    dvs = live_deletes(table)
    assert all(d.file_format == FileFormat.PUFFIN for d in dvs)
    by_file = {d.referenced_data_file: d for d in dvs}
    assert len(by_file) == len(dvs) == 2  # one DV per original file, holding UPDATE's and MERGE's deletes
    for part, wanted in ((1, {3, 4}), (2, {13, 14})):
        data_file = originals[part]
        assert puffin_dvs(table, by_file[data_file.file_path])["positions"] == positions_of(table, data_file, wanted)


def test_positions_selected_by_an_engine_are_applied_as_one_merged_dv(catalog: SqlCatalog) -> None:
    """The path of SQL DELETE/UPDATE/MERGE on Spark: deletes by (file, position)."""
    table = v3_table(catalog)
    data_file = data_file_of(table, 2)
    table.delete("id = 11")
    table = catalog.load_table("db.t")
    chosen = positions_of(table, data_file, {12, 19})
    replacement = rows_of([12], 2).set_column(1, "v", pa.array(["new12"]))
    affected = apply_positions(table, table.current_snapshot(), RowLevelOperation.UPDATE,  # type: ignore[arg-type]
                               {data_file.file_path: np.array(sorted(chosen))},
                               replacements={data_file.file_path: replacement},
                               replaced_positions={data_file.file_path: np.array(sorted(positions_of(
                                   table, data_file, {12})))})
    assert affected == 2
    table = catalog.load_table("db.t")
    got = {r["id"]: r["v"] for r in table.scan().to_arrow().to_pylist()}
    assert got == {**{i: f"v{i}" for i in range(20) if i not in (11, 19)}, 12: "new12"}
    (dv,) = live_deletes(table)
    assert puffin_dvs(table, dv)["positions"] == positions_of(table, data_file, {11, 12, 19})


def test_compaction_and_copy_on_write_drop_the_dvs_of_the_files_they_replace(catalog: SqlCatalog) -> None:
    table = v3_table(catalog)
    table.delete("id IN (1, 12)")
    table = catalog.load_table("db.t")
    table.update_properties({"write.delete.mode": "copy-on-write"})
    table = catalog.load_table("db.t")
    assert table.delete("id = 2") == 1  # rewrites part 1's file: its DV goes with it
    table = catalog.load_table("db.t")
    (left,) = live_deletes(table)
    assert left.referenced_data_file == data_file_of(table, 2).file_path
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert (summary["removed-dvs"], summary["total-delete-files"]) == ("1", "1")
    result = rewrite_data_files(table, options={"rewrite-all": "true"})
    assert result.rewritten_data_files_count == 2
    table = catalog.load_table("db.t")
    assert live_deletes(table) == []
    assert ids(table) == [i for i in range(20) if i not in (1, 2, 12)] == pyiceberg_ids(table)
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert (summary["removed-dvs"], summary["total-delete-files"], summary["total-position-deletes"]) == ("1", "0", "0")


def test_a_concurrent_dv_for_the_same_data_file_is_a_conflict(catalog: SqlCatalog) -> None:
    table = v3_table(catalog, **{"write.delete.isolation-level": "snapshot"})
    stale = catalog.load_table("db.t")
    table.delete("id = 1")
    with pytest.raises(CommitConflictError, match="delete file .*puffin"):
        stale.delete("id = 2")
    # A DV for another data file is no conflict under snapshot isolation.
    stale = catalog.load_table("db.t")
    catalog.load_table("db.t").delete("id = 3")
    assert stale.delete("id = 15") == 1
    table = catalog.load_table("db.t")
    assert ids(table) == [i for i in range(20) if i not in (1, 3, 15)]
    assert len(live_deletes(table)) == 2


def test_expiry_keeps_a_puffin_file_while_a_dv_in_it_is_live(catalog: SqlCatalog, tmp_path: Path) -> None:
    """Our Puffin files hold one DV each, so the shared file is built here: one Puffin file with
    the DVs of both data files, committed as two entries, then one of them replaced."""
    from tablestore.table.read.deletion_vectors import write_deletion_vectors
    from tablestore.table.update.snapshot import RowDelta
    from tablestore.table.update.transaction import commit_snapshot

    table = v3_table(catalog)
    one, two = data_file_of(table, 1), data_file_of(table, 2)
    from pyroaring import BitMap64

    shared = f"{table.location}/data/shared-deletes.puffin"
    dvs = write_deletion_vectors(table.io, shared, [(one, BitMap64([0])), (two, BitMap64([1]))])
    commit_snapshot(RowDelta(table, [], [], dvs, table.current_snapshot().snapshot_id, []))  # type: ignore[union-attr]
    table = catalog.load_table("db.t")
    assert ids(table) == [i for i in range(1, 20) if i != 11] == pyiceberg_ids(table)
    table.delete("id = 5")  # replaces part 1's DV only
    table = catalog.load_table("db.t")
    assert sorted((d.file_path == shared, d.record_count) for d in live_deletes(table)) == [(False, 2), (True, 1)]
    first = expire_snapshots(table, older_than=2**62, retain_last=1)
    assert first.expired_snapshot_ids and not any(p.endswith("shared-deletes.puffin") for p in first.deleted_paths)
    assert table.io.new_input(shared).exists()
    table = catalog.load_table("db.t")
    assert ids(table) == [i for i in range(1, 20) if i not in (5, 11)]
    table.delete("id = 12")  # replaces the last DV in the shared file
    table = catalog.load_table("db.t")
    expired = expire_snapshots(table, older_than=2**62, retain_last=1)
    assert not table.io.new_input(shared).exists()
    assert expired.deleted_position_delete_files_count == 1
    assert [p for p in expired.deleted_paths if p.endswith(".puffin")] == [shared.removeprefix("file://")]
    assert ids(catalog.load_table("db.t")) == [i for i in range(1, 20) if i not in (5, 11, 12)]


def test_erasure_on_v3_counts_dv_masked_rows_as_residue_until_the_rewrite(catalog: SqlCatalog) -> None:
    import tablestore
    from tablestore.maintenance.erasure import verify_table

    table = v3_table(catalog)
    table.delete("id IN (5, 6)")  # masked by a DV: the bytes are still in the data file
    table = catalog.load_table("db.t")
    field_id = table.schema().find_field("id").field_id
    files_read, residue = verify_table(table, field_id, "id", [5, 12])
    assert files_read == 2 and sorted(r.split(": ")[1] for r in residue) == ["1 row(s)", "1 row(s)"]

    report = tablestore.erase(catalog, "db.t", "id", "REQ-V3", values=[5, 12, 13])
    assert report.verified and report.residue == [] and report.rows_removed == 2
    table = catalog.load_table("db.t")
    assert ids(table) == [i for i in range(20) if i not in (5, 6, 12, 13)] == pyiceberg_ids(table)
    assert live_deletes(table) == []
    location = Path(table.location.removeprefix("file://"))
    assert sorted(location.rglob("*.puffin")) == []  # the DVs went with the rewritten files
