"""Verified erasure: no Parquet file under the location holds an erased subject afterwards. On
SQLite; the main case on S3 too, and the erasure of every branch's head over REST too (the
service applies the expiry of each branch's old snapshots)."""

from __future__ import annotations

import datetime
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tablestore
from tablestore.cli import main
from tablestore.errors import NoSuchSnapshotError, ValidationError
from tablestore.maintenance.erasure import ErasureVerificationError
from tablestore.spec.expressions.expression_tree import AlwaysTrue
from tablestore.table.read.scan import plan_files
from tablestore.table.update.transaction import FixedChange
from tests.conftest import ON_EVERY_STORAGE, OVER_REST, CatalogTarget
from tests.lakehouse_config import sqlite_catalog, write_lakehouse_config
from tests.maintenance.helpers import SCHEMA, add_position_deletes, rows, subject_rows_in_files

SUBJECTS = [3, 17, 42, 99]


def _history(catalog: tablestore.Catalog) -> tablestore.Table:
    table = catalog.create_table("db.users", schema=SCHEMA, partition_by=["country"])
    for start in range(0, 120, 30):
        table.append(rows(30, start))
    table.delete("user_id >= 90 AND user_id < 95")  # copy-on-write history
    table.append(rows(10, 200))
    return table


def _expected(table: tablestore.Table, subjects: list[int]) -> list[int]:
    return sorted(v for v in table.scan().to_arrow().column("user_id").to_pylist() if v not in subjects)


@ON_EVERY_STORAGE
def test_erasure_leaves_no_row_of_a_subject_in_any_parquet_file(catalog_target: CatalogTarget,
                                                                db_catalog: tablestore.Catalog) -> None:
    catalog, warehouse = db_catalog, catalog_target.warehouse
    table = _history(catalog)
    field_id = table.schema().find_field("user_id").field_id
    before = subject_rows_in_files(table.location, field_id, SUBJECTS, warehouse.properties)
    assert sum(before.values()) >= 4  # the subjects are there, in several files
    old_snapshots = [s.snapshot_id for s in table.snapshots()]
    expected = _expected(table, SUBJECTS)

    report = tablestore.erase(catalog, "db.users", "user_id", "REQ-1", values=SUBJECTS)

    assert report.verified and report.residue == []
    assert report.rows_removed == 4
    assert report.files_rewritten >= 3 and report.files_removed > 0
    assert subject_rows_in_files(table.location, field_id, SUBJECTS, warehouse.properties) == {}
    table.refresh()
    assert sorted(table.scan().to_arrow().column("user_id").to_pylist()) == expected
    assert len(table.snapshots()) == 1
    audit = catalog.load_table("db.erasure_audit").scan().to_arrow().to_pylist()
    assert len(audit) == 1
    record = audit[0]
    assert record["request_id"] == "REQ-1" and record["tables"] == ["db.users"]
    assert record["rows_removed"] == 4 and record["verified"] is True and record["residue"] == []
    assert record["files_removed"] == report.files_removed and record["erased_at"] is not None

    # No way back: time travel to a pre-erasure snapshot fails and says why.
    with pytest.raises(NoSuchSnapshotError, match="expired"):
        table.scan(snapshot_id=old_snapshots[0]).to_arrow()
    with pytest.raises(NoSuchSnapshotError, match="expired"):
        table.scan(as_of_timestamp=table.snapshots()[0].timestamp_ms - 1).to_arrow()


def test_erasure_rewrites_files_whose_subject_rows_are_only_masked_by_position_deletes(db_catalog: tablestore.Catalog) -> None:
    catalog = db_catalog
    table = catalog.create_table("db.users", schema=SCHEMA, partition_by=["country"])
    table.append(rows(60))
    table.append(rows(30, 60))
    # Merge-on-read history: subject 42's row is masked by a position delete, not removed.
    task = next(t for t in plan_files(table.io, table.metadata, table.current_snapshot(), table.schema(),
                                       AlwaysTrue(), table.engine)
                if 42 in pq.read_table(table.io.filesystem_for(t.file.file_path)[1]).column("user_id").to_pylist())
    ids = pq.read_table(table.io.filesystem_for(task.file.file_path)[1]).column("user_id").to_pylist()
    add_position_deletes(table, task.file, [ids.index(42), ids.index(45)])
    assert 42 not in table.scan().to_arrow().column("user_id").to_pylist()
    field_id = table.schema().find_field("user_id").field_id
    assert subject_rows_in_files(table.location, field_id, [42]) != {}  # bytes still there
    expected = _expected(table, SUBJECTS)

    report = tablestore.erase(catalog, ["db.users"], "user_id", "REQ-2", values=SUBJECTS,
                              rows_deleted_before={"db.users": 5})

    assert report.verified
    # 3 and 17 were live; 42 was already masked; 99 never existed; 5 the caller deleted before.
    assert report.rows_removed == 2 + 5
    audit = catalog.load_table("db.erasure_audit").scan().to_arrow().to_pylist()
    assert [(r["request_id"], r["rows_removed"]) for r in audit] == [("REQ-2", 7)]
    assert subject_rows_in_files(table.location, field_id, SUBJECTS) == {}
    table.refresh()
    assert sorted(table.scan().to_arrow().column("user_id").to_pylist()) == expected
    files = table.inspect.files().to_pylist()
    assert all(f["content"] == 0 for f in files)  # no delete file is left either


def test_erasure_reports_residue_and_exits_non_zero(tmp_path: Path) -> None:
    cat = sqlite_catalog(tmp_path, "cat")
    config = write_lakehouse_config(tmp_path, cat)
    catalog = tablestore.load_catalog("cat", type="sql", uri=cat.uri, warehouse=cat.warehouse)
    catalog.create_namespace("db")
    table = catalog.create_table("db.users", schema=SCHEMA)
    table.append(rows(20))
    requests = catalog.create_table("db.erasure_requests", schema=pa.schema([("request_id", pa.string()),
                                                                               ("user_id", pa.int64())]))
    requests.append(pa.table({"request_id": ["R1", "R1", "R2"], "user_id": [3, 5, 7]}))
    # A stray copy of a subject's row under the table location, written "after" the erasure
    # started (so it is not the erasure's garbage to delete): verification must catch it.
    stray = Path(table.location.removeprefix("file://")) / "data" / "stray-copy.parquet"
    pq.write_table(table.scan().to_arrow().slice(3, 1).cast(table.scan().arrow_schema), stray)
    future = time.time() + 3600
    os.utime(stray, (future, future))
    field_id = table.schema().find_field("user_id").field_id
    pq.write_table(pa.table({"user_id": pa.array([3], pa.int64())}).cast(pa.schema([
        pa.field("user_id", pa.int64(), metadata={b"PARQUET:field_id": str(field_id).encode()})])), stray)
    os.utime(stray, (future, future))

    code = main(["erase", "--table", "db.users", "--column", "user_id", "--values-from", "db.erasure_requests",
                 "--request-id", "R1", "--config", str(config)])
    assert code == 2
    audit = catalog.load_table("db.erasure_audit").scan().to_arrow().to_pylist()
    assert audit[0]["verified"] is False and audit[0]["rows_removed"] == 2  # only R1's subjects: 3 and 5
    assert audit[0]["residue"] == [f"file://{stray}: 1 row(s)"]  # as the table records locations
    assert sorted(catalog.load_table("db.users").scan().to_arrow().column("user_id").to_pylist()) == [
        i for i in range(20) if i not in (3, 5)]
    with pytest.raises(ErasureVerificationError, match="stray-copy.parquet"):
        tablestore.erase(catalog, "db.users", "user_id", "R3", values=[3])
    stray.unlink()
    report = tablestore.erase(catalog, "db.users", "user_id", "R4", values=[3])
    assert report.verified and report.rows_removed == 0


def test_erasure_refuses_tables_with_tags_unless_told(db_catalog: tablestore.Catalog) -> None:
    catalog = db_catalog
    table = catalog.create_table("db.users", schema=SCHEMA)
    tagged = table.append(rows(10))
    from tablestore.spec.metadata.update_models import AssertTableUUID, SetSnapshotRefUpdate

    table.transaction().add_change(FixedChange([AssertTableUUID(uuid=table.metadata.table_uuid)],
                                               [SetSnapshotRefUpdate(ref_name="audit-2024", snapshot_id=tagged.snapshot_id, type="tag")]),
                                   ).commit_transaction()
    table.append(rows(10, 10))
    with pytest.raises(ValidationError, match="audit-2024"):
        tablestore.erase(catalog, "db.users", "user_id", "R1", values=[3])
    assert 3 in catalog.load_table("db.users").scan().to_arrow().column("user_id").to_pylist()  # nothing changed
    with pytest.raises(ValidationError, match="user_id"):
        tablestore.erase(catalog, "db.users", "user_id", "R1", values=["not-a-number"])
    report = tablestore.erase(catalog, "db.users", "user_id", "R1", values=[3], remove_refs=True)
    assert report.verified
    table.refresh()
    assert list(table.metadata.refs) == ["main"]
    field_id = table.schema().find_field("user_id").field_id
    assert subject_rows_in_files(table.location, field_id, [3]) == {}


@OVER_REST
def test_erasure_erases_the_head_of_every_branch_so_an_audit_branch_cannot_publish_a_subject_back(
    db_catalog: tablestore.Catalog,
) -> None:
    catalog = db_catalog
    table = catalog.create_table("db.users", schema=SCHEMA)
    table.append(rows(10))  # user ids 0-9 on main
    # An ingest in flight: its audit branch holds main's rows plus new ones, subjects among them.
    audit = table.on_branch("audit")
    audit.append(rows(10, 10))  # 10-19
    field_id = table.schema().find_field("user_id").field_id

    report = tablestore.erase(catalog, "db.users", "user_id", "R-branch", values=[3, 13])

    table.refresh()
    main_ids = sorted(table.scan().to_arrow().column("user_id").to_pylist())
    audit_ids = sorted(table.scan(ref="audit").to_arrow().column("user_id").to_pylist())
    assert main_ids == [i for i in range(10) if i != 3]
    assert audit_ids == [i for i in range(20) if i not in (3, 13)]
    assert report.verified and report.tables[0].refs_touched == ["branch:main", "branch:audit"]
    assert report.rows_removed == 3  # 3 on main; 3 and 13 on the branch
    # No file under the location holds a subject: the pre-erasure snapshots of both branches expired.
    assert subject_rows_in_files(table.location, field_id, [3, 13]) == {}
    # No snapshot left can publish a subject back: every retained one reads without them.
    for snapshot in table.snapshots():
        read = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow().column("user_id").to_pylist()
        assert not {3, 13} & set(read), snapshot.snapshot_id


def test_erasure_keeps_each_rewritten_file_in_its_partition_spec(db_catalog: tablestore.Catalog) -> None:
    # A table whose layout evolved (days, then hours): the erasure removes rows from files of
    # both specs, and a file written under the day spec must stay under it (a copy-on-write
    # delete or a plain compaction would move it to the current spec).
    catalog = db_catalog
    schema = pa.schema([("user_id", pa.int64()), ("ts", pa.timestamp("us"))])
    table = catalog.create_table("db.events", schema=schema, partition_by=["days(ts)"])
    day = pa.array([datetime.datetime(2026, 11, 1, h) for h in range(10)], pa.timestamp("us"))
    table.append(pa.table({"user_id": list(range(10)), "ts": day}, schema=schema))
    with table.update_spec() as update:
        update.replace_field("days(ts)", "hours(ts)")
    hour = pa.array([datetime.datetime(2026, 11, 2, h) for h in range(10)], pa.timestamp("us"))
    table.append(pa.table({"user_id": list(range(10, 20)), "ts": hour}, schema=schema))
    assert table.properties.get("write.delete.mode") is None  # copy-on-write, Iceberg's default

    report = tablestore.erase(catalog, "db.events", "user_id", "REQ-SPEC", values=[3, 4, 13])

    assert report.verified and report.rows_removed == 3
    table.refresh()
    files = table.inspect.data_files().to_pylist()
    # The day file (3 and 4 removed) is rewritten under spec 0; the hour file of user 13 was
    # dropped whole (one row per hour), the other hour files are untouched under spec 1.
    by_spec: dict[int, int] = {}
    for f in files:
        by_spec[f["spec_id"]] = by_spec.get(f["spec_id"], 0) + f["record_count"]
    assert by_spec == {0: 8, 1: 9}
    assert [f["content"] for f in table.inspect.delete_files().to_pylist()] == []
    assert sorted(table.scan().to_arrow().column("user_id").to_pylist()) == \
        [i for i in range(20) if i not in (3, 4, 13)]
