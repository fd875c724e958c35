"""Row lineage across readers: Java Iceberg 1.10 and DuckDB 1.5 read the ``_row_id`` and
``_last_updated_sequence_number`` of tablestore's v3 tables as tablestore does, pyiceberg reads
their rows, and tablestore reads the row lineage of the v3 tables Java writes as Java does.

One JVM call serves the module: it reads our tables and builds and reads Java's. DuckDB's own
v3 writes go through a catalog service; they are in ``test_duckdb_rest.py``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.table import Table
from tests.interop.readers import duckdb_connect
from tests.oracle import OracleBatch, check

pytestmark = pytest.mark.oracle

LINEAGE = ["_row_id", "_last_updated_sequence_number"]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> SqlCatalog:
    root = tmp_path_factory.mktemp("lineage-interop")
    catalog = SqlCatalog("lineage", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=f"file://{root}/wh")
    catalog.create_namespace("ours")
    return catalog


@pytest.fixture(scope="module")
def ours(catalog: SqlCatalog) -> dict[str, Table]:
    """Our v3 tables: ``moved`` went through every kind of rewrite that keeps lineage (its files
    store _row_id and _last_updated_sequence_number explicitly, and inherit for new rows);
    ``upgraded`` is a v2 table whose rows got ids from the first snapshot after the upgrade."""
    moved = catalog.create_table("ours.moved", pa.schema([("id", pa.int64()), ("v", pa.string()), ("p", pa.string())]),
                                 partition_by=["p"], format_version=3)
    moved.append(pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "v": ["a", "b", "c", "d"],
                           "p": ["x", "y", "x", "y"]}))
    moved.append(pa.table({"id": pa.array([5, 6], pa.int64()), "v": ["e", "f"], "p": ["x", "x"]}))
    moved.delete("id = 1")                               # copy-on-write: 3 moves
    moved.update({"v": "'B'"}, "id = 2")                 # 2 updated, 4 moves
    moved.maintenance().rewrite_data_files(options={"rewrite-all": "true"})
    moved.merge_columns(pa.table({"id": pa.array([5], pa.int64()), "score": pa.array([1.5])}), on="id")
    moved.append(pa.table({"id": pa.array([7], pa.int64()), "v": ["g"], "p": ["y"], "score": pa.array([None],
                                                                                                     pa.float64())}))
    upgraded = catalog.create_table("ours.upgraded", pa.schema([("id", pa.int64())]))
    upgraded.append(pa.table({"id": pa.array([10, 11, 12], pa.int64())}))
    upgraded.update_properties({"format-version": "3"})
    upgraded.append(pa.table({"id": pa.array([13], pa.int64())}))
    upgraded.delete("id = 11")
    return {"moved": catalog.load_table("ours.moved"), "upgraded": catalog.load_table("ours.upgraded")}


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory, ours: dict[str, Table]) -> dict[str, Any]:
    warehouse = tmp_path_factory.mktemp("java-lineage")
    batch = OracleBatch(warehouse=str(warehouse))
    reads = {name: batch.read(t.metadata_location, columns=["id", *LINEAGE]) for name, t in ours.items()}
    built = batch.sql(
        "CREATE TABLE ref.db.j (id bigint, v string) USING iceberg TBLPROPERTIES ('format-version'='3', "
        "'write.delete.mode'='merge-on-read')",
        "INSERT INTO ref.db.j VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "INSERT INTO ref.db.j VALUES (4, 'd'), (5, 'e')",
        "UPDATE ref.db.j SET v = 'B' WHERE id = 2",           # copy-on-write: the file keeps 1 and 3's ids
        "DELETE FROM ref.db.j WHERE id = 4",                  # a deletion vector
        "CALL ref.system.rewrite_data_files(table => 'db.j', options => map('rewrite-all', 'true'))",
        "INSERT INTO ref.db.j VALUES (6, 'f')",
        "SELECT id, _row_id, _last_updated_sequence_number FROM ref.db.j",
    )
    results = batch.run()
    for r in results:
        check(r)
    return {"warehouse": warehouse, "ours": {name: results[i]["rows"] for name, i in reads.items()},
            "j": results[built]["rows"]}


def lineage_rows(table: Table) -> list[list[Any]]:
    data = table.refresh().scan(columns=["id", *LINEAGE]).to_arrow()
    return sorted([[r["id"], r["_row_id"], r["_last_updated_sequence_number"]] for r in data.to_pylist()])


def test_java_duckdb_and_pyiceberg_read_our_row_lineage_as_we_do(ours: dict[str, Table], java: dict[str, Any]) -> None:
    moved = ours["moved"]
    # Rows 2-4 kept the ids of the first append (0-3 by partition file order), 5 and 6 of the
    # second (4, 5); 2 and 5 were updated (UPDATE, merge_columns), 7 is new.
    ours_moved = lineage_rows(moved)
    by_id = {r[0]: r[1:] for r in ours_moved}
    first_ids = sorted(by_id[i][0] for i in (2, 3, 4))
    assert len(set(first_ids)) == 3 and max(first_ids) <= 3 and sorted(by_id[i][0] for i in (5, 6)) == [4, 5]
    assert by_id[3][1] == by_id[4][1] == 1 and by_id[6][1] == 2
    assert by_id[2][1] > 2 and by_id[5][1] > by_id[2][1] and by_id[7][1] > by_id[5][1]
    assert java["ours"]["moved"] == ours_moved
    assert java["ours"]["upgraded"] == lineage_rows(ours["upgraded"])
    # The upgraded table: the new manifest took id 0, the old one 1-3 (11 deleted since).
    assert lineage_rows(ours["upgraded"]) == [[10, 1, 1], [12, 3, 1], [13, 0, 2]]

    con = duckdb_connect(Path(tempfile.mkdtemp(prefix="duckdb-ext-")))
    try:
        for table in ours.values():
            duck = con.execute(f"SELECT id, {', '.join(LINEAGE)} FROM iceberg_scan(?)",
                               [table.metadata_location]).fetchall()
            assert sorted(list(r) for r in duck) == lineage_rows(table), table.name
    finally:
        con.close()
    for table in ours.values():
        py = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
        assert sorted(py.column("id").to_pylist()) == [r[0] for r in lineage_rows(table)]
    # Every live row id is distinct, in every table.
    for table in ours.values():
        ids = [r[1] for r in lineage_rows(table)]
        assert len(set(ids)) == len(ids)


def test_we_read_the_row_lineage_of_javas_v3_table_as_java_does(catalog: SqlCatalog, java: dict[str, Any]) -> None:
    metadata_dir = Path(java["warehouse"]) / "db" / "j" / "metadata"
    version = (metadata_dir / "version-hint.text").read_text().strip()
    catalog.create_namespace("java")
    table = catalog.register_table(("java", "j"), str(metadata_dir / f"v{version}.metadata.json"))
    assert table.metadata.format_version == 3
    ours = lineage_rows(table)
    assert ours == sorted(java["j"])
    by_id = {r[0]: r[1:] for r in ours}
    assert sorted(by_id) == [1, 2, 3, 5, 6]
    # Java's compaction wrote the ids into the new file; 2 kept its id through the update.
    assert [by_id[i][0] for i in (1, 2, 3, 5)] == [0, 1, 2, 4]
    assert by_id[1][1] == by_id[3][1] == 1 and by_id[5][1] == 2 and by_id[2][1] == 3
