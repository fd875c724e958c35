"""Format v3 with Java Iceberg 1.10: we read its v3 tables (DVs applied, row ids inherited), and it
reads ours (created as v3, upgraded from v2 with position deletes, and written with our DVs).

One JVM builds every table of the module and reads each one back (its answer is the oracle):
- ``dv``: partitioned, merge-on-read; two DELETEs, the second replacing the first DV of one
  file (the old DV lives on, unreferenced, in a Puffin file holding two blobs);
- ``upgraded``: a v2 table with a Parquet position delete file, upgraded to v3 with
  ``ALTER TABLE ... SET TBLPROPERTIES ('format-version'='3')``, then deleted from again (the DV
  merges the old position deletes, which readers must then ignore), appended to and updated
  (merge-on-read UPDATE: a DV plus the new row versions).

Then we delete from Java's tables again (our DVs merge Java's DVs and its v2 position deletes)
and a second JVM reads the result: Java, pyiceberg and we agree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.spec.manifests.manifest import (
    DataFileContent,
    FileFormat,
    ManifestContent,
    inherit_first_row_ids,
    read_manifest,
    read_manifest_list,
)
from tablestore.table import Table
from tests.oracle import OracleBatch, check

pytestmark = pytest.mark.oracle

V3_MOR = "'format-version'='3', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read'"
MOR_PROPERTIES = {"write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read"}
OUR_DV_ROWS = [[i, "changed" if i == 7 else f"v{i}", i % 2] for i in range(12) if i not in (1, 2, 3, 5, 6)]


@pytest.fixture(scope="module")
def ours(catalog: SqlCatalog) -> dict[str, Table]:
    """tablestore's v3 tables: one created as v3, and a v2 table with position deletes upgraded."""
    catalog.create_namespace("ours")
    catalog.create_table("ours.created", pa.schema([("id", pa.int64())]), format_version=3)
    upgraded = catalog.create_table("ours.upgraded", pa.schema([("id", pa.int64()), ("v", pa.string())]),
                                    properties={"write.delete.mode": "merge-on-read"})
    upgraded.append(pa.table({"id": pa.array(range(6), pa.int64()), "v": [f"v{i}" for i in range(6)]}))
    upgraded.delete("id IN (1, 4)")
    upgraded.update_properties({"format-version": "3"})
    dv = catalog.create_table("ours.dv", pa.schema([("id", pa.int64()), ("v", pa.string()), ("part", pa.int32())]),
                              partition_by=["part"], format_version=3, properties=MOR_PROPERTIES)
    dv.append(pa.table({"id": pa.array(range(12), pa.int64()), "v": [f"v{i}" for i in range(12)],
                        "part": pa.array([i % 2 for i in range(12)], pa.int32())}))
    dv.delete("id IN (1, 2, 3)")  # a DV in each partition's file
    catalog.load_table("ours.dv").delete("id IN (5, 6)")  # merged into new DVs, the old ones retired
    catalog.load_table("ours.dv").update({"v": "'changed'"}, "id = 7")
    return {"created": catalog.load_table("ours.created"), "upgraded": catalog.load_table("ours.upgraded"),
            "dv": catalog.load_table("ours.dv")}


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory, ours: dict[str, Table]) -> dict[str, Any]:
    """Build Java's tables, read them and ours, all in one JVM; returns the warehouse and Java's rows."""
    warehouse = tmp_path_factory.mktemp("java-v3")
    batch = OracleBatch(warehouse=str(warehouse))
    reads_of_ours = {name: batch.read(t.metadata_location) for name, t in ours.items()}
    our_dv_files = batch.meta(ours["dv"].metadata_location, "delete_files")
    batch.sql(
        f"CREATE TABLE ref.db.dv (id bigint, name string, part int) USING iceberg PARTITIONED BY (part) "
        f"TBLPROPERTIES ({V3_MOR})",
        "INSERT INTO ref.db.dv VALUES (1, 'a', 1), (2, 'b', 1), (3, 'c', 2), (4, 'd', 2), (5, 'e', 2)",
        "DELETE FROM ref.db.dv WHERE id IN (2, 4)",
        "DELETE FROM ref.db.dv WHERE id = 5",
        # Partition-scoped position deletes for both of the insert's files: the DV that merges
        # one file's positions cannot remove the delete file (it still serves the other data
        # file), so it stays live beside the DV and readers must ignore it for that file.
        "CREATE TABLE ref.db.upgraded (id bigint, v string) USING iceberg TBLPROPERTIES ('format-version'='2', "
        "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
        "'write.delete.granularity'='partition')",
        "INSERT INTO ref.db.upgraded VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(20)),
        "DELETE FROM ref.db.upgraded WHERE id IN (1, 2, 15)",
        "ALTER TABLE ref.db.upgraded SET TBLPROPERTIES ('format-version'='3')",
        "DELETE FROM ref.db.upgraded WHERE id = 7",
        "INSERT INTO ref.db.upgraded VALUES (100, 'new')",
        "UPDATE ref.db.upgraded SET v = 'changed' WHERE id IN (3, 100)",
        # One data file with a DV, for us to delete from again.
        f"CREATE TABLE ref.db.more (id bigint, v string) USING iceberg TBLPROPERTIES ({V3_MOR})",
        "INSERT INTO ref.db.more SELECT /*+ REPARTITION(1) */ id, concat('v', id) FROM range(10)",
        "DELETE FROM ref.db.more WHERE id IN (2, 4)",
    )
    dv_rows = batch.sql("SELECT * FROM ref.db.dv")
    upgraded_rows = batch.sql("SELECT * FROM ref.db.upgraded")
    results = batch.run()
    for r in results:
        check(r)
    return {"warehouse": warehouse, "dv": results[dv_rows]["rows"], "upgraded": results[upgraded_rows]["rows"],
            "ours": {name: results[i]["rows"] for name, i in reads_of_ours.items()},
            "our_dv_files": results[our_dv_files]}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> SqlCatalog:
    root = tmp_path_factory.mktemp("v3-catalog")
    # Java's tables are registered twice (as read, then again to be written by us): two live
    # tables over one location, which the catalog allows when told.
    return SqlCatalog("v3", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=f"file://{root}/wh",
                      **{"allow-overlapping-locations": "true"})


def register(catalog: SqlCatalog, java: dict[str, Any], name: str) -> Table:
    metadata_dir = Path(java["warehouse"]) / "db" / name / "metadata"
    version = (metadata_dir / "version-hint.text").read_text().strip()
    if not catalog.namespace_exists(("java",)):
        catalog.create_namespace("java")
    return catalog.register_table(("java", name), str(metadata_dir / f"v{version}.metadata.json"))


def rows(table: Table) -> list[list[Any]]:
    return sorted([list(r.values()) for r in table.scan().to_arrow().to_pylist()], key=lambda r: r[0])


def test_deletion_vectors_written_by_java_are_applied_as_java_applies_them(
        catalog: SqlCatalog, java: dict[str, Any]) -> None:
    table = register(catalog, java, "dv")
    assert table.metadata.format_version == 3
    assert rows(table) == [[1, "a", 1], [3, "c", 2]]
    assert rows(table) == sorted(java["dv"])
    tasks = table.scan().plan_files()
    dvs = {t.file.record_count: t.delete_files for t in tasks}
    # One live DV per data file: the 3-row file's second DV replaced its first.
    assert sorted(dvs) == [2, 3]
    for count, deletes in dvs.items():
        assert len(deletes) == 1
        dv = deletes[0]
        assert (dv.content, dv.file_format) == (DataFileContent.POSITION_DELETES, FileFormat.PUFFIN)
        assert dv.record_count == {2: 1, 3: 2}[count]
        assert dv.content_offset is not None and dv.content_size_in_bytes is not None
    assert table.scan().count() == 2
    assert rows_where(table, "part = 2") == [[3, "c", 2]]


def rows_where(table: Table, where: str) -> list[list[Any]]:
    return sorted([list(r.values()) for r in table.scan(filter=where).to_arrow().to_pylist()], key=lambda r: r[0])


def test_upgraded_table_applies_the_dv_and_ignores_the_position_deletes_it_merged(
        catalog: SqlCatalog, java: dict[str, Any]) -> None:
    table = register(catalog, java, "upgraded")
    assert table.metadata.format_version == 3
    expected = sorted([i, "changed" if i in (3, 100) else f"v{i}"] for i in [*range(20), 100] if i not in (1, 2, 7, 15))
    assert rows(table) == expected
    assert rows(table) == sorted(java["upgraded"])
    # The original file still has its v2 Parquet position delete file live, and a DV that
    # merged it: only the DV applies.
    tasks = table.scan().plan_files()
    # Spark wrote the 20 rows as two files of 10: ids 1, 2 (merged), 7 and 3's old version are
    # in the first, 15 in the second, which has no DV and so keeps the position delete file.
    deletes = sorted([(d.file_format, d.record_count) for d in t.delete_files] for t in tasks if t.file.record_count == 10)
    assert deletes == [[(FileFormat.PARQUET, 3)], [(FileFormat.PUFFIN, 4)]]
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    live = [e.data_file for m in read_manifest_list(table.io, snapshot.manifest_list)
            if m.content == ManifestContent.DELETES for e in read_manifest(table.io, m, discard_deleted=True)]
    assert sorted((f.file_format, f.record_count) for f in live) == [
        (FileFormat.PARQUET, 3), (FileFormat.PUFFIN, 1), (FileFormat.PUFFIN, 4)]


def test_v3_metadata_fields_are_read_and_first_row_ids_inherited(catalog: SqlCatalog, java: dict[str, Any]) -> None:
    table = catalog.load_table("java.dv") if catalog.table_exists("java.dv") else register(catalog, java, "dv")
    md = table.metadata
    assert md.next_row_id == 5
    first = md.snapshots[0]
    assert (first.first_row_id, first.added_rows) == (0, 5)
    assert all(s.first_row_id is not None for s in md.snapshots)
    current = md.current_snapshot()
    assert current is not None and current.manifest_list is not None
    manifests = read_manifest_list(table.io, current.manifest_list)
    data = [m for m in manifests if m.content == ManifestContent.DATA]
    assert [m.first_row_id for m in data] == [0]
    entries = inherit_first_row_ids(data[0], read_manifest(table.io, data[0]))
    spans = sorted((e.data_file.first_row_id, e.data_file.record_count) for e in entries)
    # Two files of the one insert: contiguous row id ranges from 0, covering the 5 rows.
    assert spans in ([(0, 2), (2, 3)], [(0, 3), (3, 2)])
    deletes = [m for m in manifests if m.content == ManifestContent.DELETES]
    dv_entries = [e for m in deletes for e in read_manifest(table.io, m)]
    assert all(e.data_file.first_row_id is None for e in dv_entries)
    assert {e.data_file.referenced_data_file for e in dv_entries} <= {e.data_file.file_path for e in entries}


def test_java_reads_our_v3_tables_created_and_upgraded(ours: dict[str, Table], java: dict[str, Any]) -> None:
    assert ours["created"].metadata.format_version == 3 and java["ours"]["created"] == []
    upgraded = ours["upgraded"]
    assert (upgraded.metadata.format_version, upgraded.metadata.next_row_id) == (3, 0)
    expected = [[i, f"v{i}"] for i in (0, 2, 3, 5)]
    assert rows(upgraded) == expected
    assert java["ours"]["upgraded"] == expected


def test_java_reads_our_deletion_vectors_as_dvs_and_applies_them(ours: dict[str, Table], java: dict[str, Any]) -> None:
    assert rows(ours["dv"]) == OUR_DV_ROWS
    assert sorted(java["ours"]["dv"]) == OUR_DV_ROWS
    # Java's delete_files table: one live DV per original data file (the 2nd DELETE's merged
    # DVs; UPDATE's merged part 1's again), in Puffin, with the blob's offset and size.
    files = java["our_dv_files"]
    names = [c["name"] for c in files["columns"]]
    got = sorted((r[names.index("file_format")], r[names.index("record_count")], r[names.index("content_offset")])
                 for r in files["rows"])
    assert got == [("PUFFIN", 2, 4), ("PUFFIN", 4, 4)]  # part 0: ids 2, 6; part 1: 1, 3, 5 and 7 (UPDATE)
    assert all(r[names.index("referenced_data_file")] for r in files["rows"])


@pytest.fixture(scope="module")
def java_again(catalog: SqlCatalog, java: dict[str, Any]) -> dict[str, Any]:
    """Java's tables, registered anew and deleted from / updated by us; then Java reads them."""
    register_as(catalog, java, "more", "more_again").delete("id IN (4, 6)")  # merges Java's DV (2 and 4)
    register_as(catalog, java, "upgraded", "upgraded_again").delete("id IN (8, 16)")
    tables = {"more": catalog.load_table("java.more_again"), "upgraded": catalog.load_table("java.upgraded_again")}
    batch = OracleBatch(warehouse=str(java["warehouse"]))
    reads = {name: batch.read(t.metadata_location) for name, t in tables.items()}
    results = batch.run()
    for r in results:
        check(r)
    return {"tables": tables, "rows": {name: results[i]["rows"] for name, i in reads.items()}}


def register_as(catalog: SqlCatalog, java: dict[str, Any], name: str, as_name: str) -> Table:
    metadata_dir = Path(java["warehouse"]) / "db" / name / "metadata"
    version = (metadata_dir / "version-hint.text").read_text().strip()
    if not catalog.namespace_exists(("java",)):
        catalog.create_namespace("java")
    return catalog.register_table(("java", as_name), str(metadata_dir / f"v{version}.metadata.json"))


def test_our_dvs_merge_the_dvs_java_wrote_and_java_reads_the_result(java_again: dict[str, Any]) -> None:
    from pyiceberg.table import StaticTable

    more = java_again["tables"]["more"]
    expected_more = [[i, f"v{i}"] for i in range(10) if i not in (2, 4, 6)]
    assert rows(more) == expected_more
    assert sorted(java_again["rows"]["more"]) == expected_more
    py = StaticTable.from_metadata(more.metadata_location).scan().to_arrow()
    assert sorted(py.column("id").to_pylist()) == [r[0] for r in expected_more]
    (task,) = more.scan().plan_files()
    (ours,) = task.delete_files
    assert ours.file_format == FileFormat.PUFFIN and ours.record_count == 3 and "-deletes.puffin" in ours.file_path
    summary = more.current_snapshot().summary
    assert (summary["added-dvs"], summary["removed-dvs"]) == ("1", "1")
    upgraded = java_again["tables"]["upgraded"]
    expected = sorted([i, "changed" if i in (3, 100) else f"v{i}"]
                      for i in [*range(20), 100] if i not in (1, 2, 7, 8, 15, 16))
    assert rows(upgraded) == expected
    assert sorted(java_again["rows"]["upgraded"]) == expected
    py_up = StaticTable.from_metadata(upgraded.metadata_location).scan().to_arrow()
    assert sorted(py_up.column("id").to_pylist()) == [r[0] for r in expected]
    # The file without a DV had only the partition-scoped Parquet file (id 15): our DV merged it,
    # and it stays live for the other data file, where Java's DV already ignores it.
    deletes = sorted([(d.file_format, d.record_count) for d in t.delete_files]
                     for t in upgraded.scan().plan_files() if t.file.record_count == 10)
    assert deletes == [[(FileFormat.PUFFIN, 2)], [(FileFormat.PUFFIN, 5)]]
