"""Changelogs of tables without delete files against Iceberg's Spark ``create_changelog_view``
(../shared/iceberg-oracle, one batch): a history we write (appends, copy-on-write update,
delete and merge, a partition overwrite, a compaction, an added column) read by Java's
procedure, and a history Java writes read by ours. Same rows, same change types, same
ordinals and snapshot ids.

Java's net changes may keep a carried-over copy of a row (a later ordinal) where we keep the
snapshot that made the change; for net changes the ordinals are therefore not compared.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from tablestore.table import Table
from tests import oracle

pytestmark = pytest.mark.oracle

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("data", pa.string()), ("p", pa.string())])


@dataclass
class Oracle:
    results: list[dict[str, Any]]
    jobs: dict[str, int]
    ours: Table
    start: int
    java_table: Path


def _hadoop_copy(table: Table, warehouse: Path, name: str) -> None:
    """The table's current metadata where Java's hadoop catalog ``ref`` finds ``db.<name>``."""
    folder = warehouse / "db" / name / "metadata"
    folder.mkdir(parents=True)
    with table.io.new_input(table.metadata_location).open() as f:
        (folder / "v1.metadata.json").write_bytes(f.read())
    (folder / "version-hint.text").write_text("1")


def _history(table: Table) -> int:
    table.append(pa.table({"id": [1, 2, 3, 4], "data": ["a", "b", "c", "d"], "p": ["x", "x", "y", "y"]},
                          schema=SCHEMA))
    start = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    table.append(pa.table({"id": [5, 6], "data": ["e", "f"], "p": ["x", "y"]}, schema=SCHEMA))
    table.update({"data": "'B'"}, "id = 2")
    table.delete("id = 3")
    table.overwrite(pa.table({"id": [7], "data": ["g"], "p": ["y"]}, schema=SCHEMA), "p = 'y'")
    table.maintenance().rewrite_data_files(options={"min-input-files": "2"})
    table.refresh()
    source = pa.table({"id": [1, 8], "data": ["A", "h"], "p": ["x", "x"]}, schema=SCHEMA)
    table.merge(source, "t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute()
    with table.update_schema() as u:
        u.add_column("n", "int")
    table.append(pa.table({"id": [9], "data": ["i"], "p": ["x"], "n": pa.array([3], pa.int32())}))
    return start


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Oracle:
    root = tmp_path_factory.mktemp("changelog-oracle")
    catalog = tablestore.load_catalog("c", type="sql", uri=f"sqlite:///{root}/c.db", warehouse=str(root / "wh"))
    catalog.create_namespace("db")
    ours = catalog.create_table("db.t", SCHEMA, partition_by=["p"])
    start = _history(ours)
    end = ours.current_snapshot().snapshot_id  # type: ignore[union-attr]
    _hadoop_copy(ours, root / "java", "t")
    batch = oracle.OracleBatch(warehouse=str(root / "java"))
    jobs = {
        "all": batch.sql("CALL ref.system.create_changelog_view(table => 'db.t', changelog_view => 'v_all')",
                         "SELECT * FROM v_all"),
        "updates": batch.sql(
            "CALL ref.system.create_changelog_view(table => 'db.t', options => map('start-snapshot-id', "
            f"'{start}', 'end-snapshot-id', '{end}'), compute_updates => true, identifier_columns => array('id'), "
            "changelog_view => 'v_upd')", "SELECT * FROM v_upd"),
        "net": batch.sql(
            "CALL ref.system.create_changelog_view(table => 'db.t', options => map('start-snapshot-id', "
            f"'{start}'), net_changes => true, changelog_view => 'v_net')", "SELECT * FROM v_net"),
        "java": batch.sql(
            "CREATE TABLE ref.db.j (id BIGINT, data STRING) USING iceberg TBLPROPERTIES ('format-version'='2')",
            "INSERT INTO ref.db.j VALUES (1, 'a'), (2, 'b'), (3, 'c')",
            "UPDATE ref.db.j SET data = 'B' WHERE id = 2",
            "DELETE FROM ref.db.j WHERE id = 3",
            "MERGE INTO ref.db.j t USING (SELECT 1 AS id, 'A' AS data UNION ALL SELECT 4, 'd') s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
            "CALL ref.system.create_changelog_view(table => 'db.j', identifier_columns => array('id'), "
            "changelog_view => 'v_j')",
            "SELECT * FROM v_j"),
    }
    results = batch.run()
    catalog.close()
    return Oracle(results, jobs, ours, start, root / "java" / "db" / "j")


def _ours(rows: pa.Table) -> list[list[Any]]:
    return sorted(([*r.values()] for r in rows.to_pylist()), key=repr)


def _theirs(result: dict[str, Any]) -> list[list[Any]]:
    return sorted(oracle.check(result)["rows"], key=repr)


def test_our_changelog_of_our_table_equals_javas_procedure(java: Oracle) -> None:
    table = java.ours
    whole = _theirs(java.results[java.jobs["all"]])
    assert _ours(table.changes(compute_updates=False).to_arrow()) == whole
    assert {r[4] for r in whole} == {"INSERT", "DELETE"} and len(whole) == 16
    updates = _theirs(java.results[java.jobs["updates"]])
    assert _ours(table.changes(from_snapshot=java.start, identifier_columns=["id"]).to_arrow()) == updates
    assert sorted(r[4] for r in updates).count("UPDATE_BEFORE") == 2
    net = [r[:5] for r in _theirs(java.results[java.jobs["net"]])]
    assert [r[:5] for r in _ours(table.changes(from_snapshot=java.start, net_changes=True,
                                               compute_updates=False).to_arrow())] == net


def test_our_changelog_of_javas_table_equals_javas_procedure(java: Oracle, tmp_path: Path) -> None:
    theirs = _theirs(java.results[java.jobs["java"]])
    metadata = sorted((java.java_table / "metadata").glob("v*.metadata.json"))[-1]
    catalog = tablestore.load_catalog("j", type="sql", uri=f"sqlite:///{tmp_path}/c.db", warehouse=str(tmp_path))
    catalog.create_namespace("db")
    table = catalog.register_table("db.j", str(metadata))
    assert _ours(table.changes(identifier_columns=["id"]).to_arrow()) == theirs
    assert [r[2] for r in theirs].count("UPDATE_AFTER") == 2
    catalog.close()
    shutil.rmtree(tmp_path / "db", ignore_errors=True)
