"""Interop: the Java reference implementation and pyiceberg read tables after compaction and
after an erasure, including a Java table with merge-on-read deletes in its history."""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.table import StaticTable

import tablestore
from tests import oracle
from tests.maintenance.helpers import SCHEMA, rows, subject_rows_in_files
from tests.values import oracle_rows

pytestmark = pytest.mark.oracle

SUBJECTS = [3, 17, 42]

JAVA_STATEMENTS = [
    "CREATE TABLE ref.db.j (user_id bigint, country string, payload string) USING iceberg "
    "PARTITIONED BY (country) TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
    "'write.update.mode'='merge-on-read')",
    "INSERT INTO ref.db.j SELECT id, CASE id % 3 WHEN 0 THEN 'de' WHEN 1 THEN 'fr' ELSE 'it' END, "
    "concat('secret-of-', id) FROM range(0, 60)",
    "INSERT INTO ref.db.j SELECT id, CASE id % 3 WHEN 0 THEN 'de' WHEN 1 THEN 'fr' ELSE 'it' END, "
    "concat('secret-of-', id) FROM range(60, 90)",
    # Merge-on-read: 42's row is only masked by a position delete; its bytes stay in the data file.
    "DELETE FROM ref.db.j WHERE user_id IN (42, 50)",
    "UPDATE ref.db.j SET payload = 'changed' WHERE user_id = 17",
    "SELECT count(*) FROM ref.db.j",
]


def _latest_metadata(table_dir: Path) -> str:
    return max(glob.glob(str(table_dir / "metadata" / "*.metadata.json")),
               key=lambda p: int(Path(p).name.split("-")[0].lstrip("v").split(".")[0]))


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("maint-interop")
    java_dir = root / "java"
    batch = oracle.OracleBatch(warehouse=str(java_dir))
    batch.sql(*JAVA_STATEMENTS)
    assert oracle.check(batch.run()[0])["rows"] == [[88]]
    catalog = tablestore.load_catalog("c", type="sql", uri=f"sqlite:///{root}/c.db", warehouse=str(root / "w"))
    catalog.create_namespace("db")
    java = catalog.register_table("db.java", _latest_metadata(java_dir / "db" / "j"))
    files = java.inspect.files().to_pylist()
    assert any(f["content"] == 1 for f in files)  # Java wrote position deletes
    field_id = java.schema().find_field("user_id").field_id
    assert subject_rows_in_files(java.location, field_id, [42])  # the masked row is on disk
    ours = catalog.create_table("db.ours", schema=SCHEMA, partition_by=["country"])
    for start in range(0, 80, 10):
        ours.append(rows(10, start))
    compacted = ours.maintenance().rewrite_data_files(options={"min-input-files": 2})
    assert compacted.rewritten_data_files_count == 24
    only_compacted = catalog.create_table("db.compacted", schema=SCHEMA, partition_by=["country"])
    for start in range(0, 60, 10):
        only_compacted.append(rows(10, start))
    only_compacted.maintenance().rewrite_data_files("sort", sort_order="user_id DESC",
                                                    options={"min-input-files": 2})
    report = tablestore.erase(catalog, ["db.java", "db.ours"], "user_id", "REQ-X", values=SUBJECTS)
    return {"catalog": catalog, "java": java.refresh(), "ours": ours.refresh(), "report": report,
            "field_id": field_id, "compacted": only_compacted.refresh()}


def test_erasure_of_a_java_merge_on_read_table_is_complete(tables: dict[str, Any]) -> None:
    report = tables["report"]
    assert report.verified
    assert [t.rows_removed for t in report.tables] == [2, 3]  # java: 3, 17 (42 was masked); ours: all three
    java = tables["java"]
    assert subject_rows_in_files(java.location, tables["field_id"], SUBJECTS) == {}
    assert all(f["content"] == 0 for f in java.inspect.files().to_pylist())
    ids = sorted(java.scan().to_arrow().column("user_id").to_pylist())
    assert ids == [i for i in range(90) if i not in (3, 17, 42, 50)]


def test_oracle_and_pyiceberg_read_tables_after_compaction_and_erasure(tables: dict[str, Any]) -> None:
    batch = oracle.OracleBatch()
    names = ("java", "ours", "compacted")
    jobs = {name: batch.read(tables[name].metadata_location) for name in names}
    results = batch.run()
    assert len(tables["compacted"].inspect.files()) == 3
    for name in names:
        table = tables[name]
        ours = oracle_rows(table.scan().to_arrow())
        theirs = oracle.check(results[jobs[name]])
        assert theirs["rows"] == ours, f"oracle differs on {name}"
        assert len(theirs["rows"]) == (60 if name == "compacted" else len(ours))
        assert name == "compacted" or not any(r[0] in SUBJECTS for r in theirs["rows"])
        py = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
        assert oracle_rows(py) == ours, f"pyiceberg differs on {name}"
