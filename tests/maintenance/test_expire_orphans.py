"""expire_snapshots and remove_orphan_files: what they keep, what they delete, and when. On SQLite;
the two main tests on S3 too, and expiry with branch retention over REST too (the service applies
the removal of snapshots and refs)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import tablestore
from tablestore.errors import NoSuchSnapshotError, ValidationError
from tablestore.maintenance.orphans import referenced_files
from tablestore.maintenance.reachable import normalize_path
from tablestore.spec.metadata.update_models import AssertTableUUID, SetSnapshotRefUpdate
from tablestore.table.update.transaction import FixedChange
from tests.conftest import ON_EVERY_STORAGE, OVER_REST
from tests.maintenance.helpers import SCHEMA, rows


def _history(catalog: tablestore.Catalog) -> tablestore.Table:
    table = catalog.create_table("db.t", schema=SCHEMA, partition_by=["country"])
    table.append(rows(30))
    table.append(rows(30, 30))
    table.delete("user_id < 10")
    table.append(rows(30, 60))
    return table


def _listed(table: tablestore.Table) -> set[str]:
    return {normalize_path(f.path) for f in table.io.list_prefix(table.location)}


def _ids(table: tablestore.Table, snapshot_id: int | None = None) -> list[int]:
    return sorted(table.scan(snapshot_id=snapshot_id).to_arrow().column("user_id").to_pylist())


@ON_EVERY_STORAGE
def test_expire_keeps_the_last_snapshots_and_deletes_only_unreferenced_files(db_catalog: tablestore.Catalog) -> None:
    table = _history(db_catalog)
    snaps = table.snapshots()
    assert len(snaps) == 4
    current = _ids(table)
    files_before = _listed(table)

    result = table.maintenance().expire_snapshots(older_than=int(time.time() * 1000) + 1, retain_last=2)

    assert result.expired_snapshot_ids == [snaps[0].snapshot_id, snaps[1].snapshot_id]
    table.refresh()
    assert [s.snapshot_id for s in table.snapshots()] == [snaps[2].snapshot_id, snaps[3].snapshot_id]
    assert _ids(table) == current
    assert _ids(table, snaps[2].snapshot_id) == [i for i in range(10, 60)]
    # Deleted: the 3 data files the delete rewrote away, 2 manifest lists and their manifests.
    assert result.deleted_data_files_count == 3
    assert result.deleted_manifest_lists_count == 2
    assert result.deleted_manifest_files_count >= 1
    gone = files_before - _listed(table)
    assert gone == {normalize_path(p) for p in result.deleted_paths}
    assert not (gone & referenced_files(table, include_deleted_entries=False))
    with pytest.raises(NoSuchSnapshotError, match="expired"):
        table.scan(snapshot_id=snaps[0].snapshot_id).to_arrow()


def test_default_age_keeps_recent_snapshots_and_properties_set_a_floor(db_catalog: tablestore.Catalog) -> None:
    table = _history(db_catalog)
    assert table.maintenance().expire_snapshots().expired_snapshot_ids == []  # all younger than 5 days
    table.update_properties({"history.expire.min-snapshots-to-keep": "3"})
    result = table.maintenance().expire_snapshots(older_than=int(time.time() * 1000) + 1, retain_last=1)
    assert len(result.expired_snapshot_ids) == 1 and len(table.refresh().snapshots()) == 3
    # Only an explicit override (what an erasure does) goes below the table's minimum.
    result = table.maintenance().expire_snapshots(older_than=int(time.time() * 1000) + 1, retain_last=1,
                                                  override_retention=True)
    assert len(result.expired_snapshot_ids) == 2 and len(table.refresh().snapshots()) == 1


def test_tags_and_branches_keep_their_snapshots(db_catalog: tablestore.Catalog) -> None:
    table = _history(db_catalog)
    first = table.snapshots()[0].snapshot_id
    table.transaction().add_change(FixedChange([AssertTableUUID(uuid=table.metadata.table_uuid)], [SetSnapshotRefUpdate(ref_name="v1", snapshot_id=first, type="tag")])).commit_transaction()
    result = table.maintenance().expire_snapshots(older_than=int(time.time() * 1000) + 1, retain_last=1)
    assert first not in result.expired_snapshot_ids and len(result.expired_snapshot_ids) == 2
    assert _ids(table.refresh(), first) == list(range(30))
    with pytest.raises(ValidationError, match="head of v1"):
        table.maintenance().expire_snapshots(snapshot_ids=[first])


@OVER_REST
def test_expire_applies_each_branch_retention_and_keeps_files_a_ref_still_reaches(
    db_catalog: tablestore.Catalog,
) -> None:
    table = _history(db_catalog)  # main: 4 snapshots
    base = table.snapshots()[1].snapshot_id
    # audit keeps 3 snapshots of its own lineage; stale is a branch whose max-ref-age has passed.
    with table.manage_snapshots() as ms:
        ms.create_branch(base, "audit", min_snapshots_to_keep=3)
        ms.create_branch(base, "stale", max_ref_age_ms=1)
    audit = table.on_branch("audit")
    audit_first = audit.append(rows(5, 500))
    audit.append(rows(5, 600))
    time.sleep(0.01)
    listed = _listed(table)
    audit_rows = _ids(table.refresh(), audit_first.snapshot_id)

    result = table.maintenance().expire_snapshots(older_than=int(time.time() * 1000) + 1, retain_last=1)

    table.refresh()
    assert result.removed_refs == ["stale"] and sorted(table.refs()) == ["audit", "main"]
    kept = {s.snapshot_id for s in table.snapshots()}
    # main keeps its head; audit keeps its head and 2 ancestors (min-snapshots-to-keep 3): the
    # second append, the first append and the branch point.
    assert kept == {table.refs()["main"].snapshot_id, table.refs()["audit"].snapshot_id,
                    audit_first.snapshot_id, base}
    assert _ids(table, audit_first.snapshot_id) == audit_rows
    # Every file a retained snapshot reaches is still there; what went is what nothing reaches.
    gone = listed - _listed(table)
    assert gone and not (gone & referenced_files(table, include_deleted_entries=False))
    assert _ids(table) == list(range(10, 90))
    assert sorted(table.scan(ref="audit").to_arrow().column("user_id").to_pylist()) == sorted(
        [*range(60), *range(500, 505), *range(600, 605)])


def test_remove_orphan_files_keeps_every_file_of_every_branch(db_catalog: tablestore.Catalog) -> None:
    table = _history(db_catalog)
    audit = table.on_branch("audit")
    written = audit.append(rows(5, 500))
    audit.delete("user_id = 500")
    junk = f"{table.location}/data/junk-from-a-failed-writer.parquet"
    table.io.new_output(junk).write(b"not committed")
    listed = _listed(table)

    done = table.maintenance().remove_orphan_files(older_than=int(time.time() * 1000) + 5000)

    assert [normalize_path(p) for p in done.orphan_file_locations] == [normalize_path(junk)]
    assert _listed(table) == listed - {normalize_path(junk)}
    assert sorted(table.refresh().scan(ref="audit").to_arrow().column("user_id").to_pylist()) == sorted(
        [*range(10, 90), *range(501, 505)])
    assert _ids(table, written.snapshot_id) == sorted([*range(10, 90), *range(500, 505)])


def test_expire_by_id_and_dry_run(db_catalog: tablestore.Catalog) -> None:
    table = _history(db_catalog)
    snaps = table.snapshots()
    listed = _listed(table)
    dry = table.maintenance().expire_snapshots(snapshot_ids=[snaps[1].snapshot_id], dry_run=True)
    assert dry.expired_snapshot_ids == [snaps[1].snapshot_id] and dry.deleted_manifest_lists_count == 1
    assert _listed(table) == listed and len(table.refresh().snapshots()) == 4
    table.maintenance().expire_snapshots(snapshot_ids=[snaps[1].snapshot_id])
    assert [s.snapshot_id for s in table.refresh().snapshots()] == [snaps[i].snapshot_id for i in (0, 2, 3)]
    with pytest.raises(ValidationError, match="retain_last"):
        table.maintenance().expire_snapshots(retain_last=0)


@ON_EVERY_STORAGE
def test_remove_orphan_files_only_deletes_old_unreferenced_files(db_catalog: tablestore.Catalog) -> None:
    table = _history(db_catalog)
    table.maintenance().expire_snapshots(older_than=int(time.time() * 1000) + 1, retain_last=1)
    junk = f"{table.location}/data/country=de/junk-from-a-failed-writer.parquet"
    table.io.new_output(junk).write(b"not committed")
    referenced = referenced_files(table.refresh(), include_deleted_entries=False)

    # Default threshold: 3 days. The junk is new, so it stays (a writer may still commit it).
    assert table.maintenance().remove_orphan_files().orphan_file_locations == []
    future = int(time.time() * 1000) + 5000
    dry = table.maintenance().remove_orphan_files(older_than=future, dry_run=True)
    assert [normalize_path(p) for p in dry.orphan_file_locations] == [normalize_path(junk)]
    assert table.io.new_input(junk).exists()
    done = table.maintenance().remove_orphan_files(older_than=future)
    assert done.orphan_file_locations == dry.orphan_file_locations
    assert not table.io.new_input(junk).exists()
    # Every referenced file is still there (a version hint is protected but SQL catalogs write none).
    assert {p for p in referenced if not p.endswith("version-hint.text")} <= _listed(table)
    assert _ids(table) == list(range(10, 90))


def test_orphans_by_file_age(db_catalog: tablestore.Catalog, tmp_path: Path) -> None:
    table = _history(db_catalog)
    data = Path(table.location.removeprefix("file://")) / "data"  # a local warehouse: file:///...
    old = data / "old-junk.parquet"
    new = data / "new-junk.parquet"
    old.write_bytes(b"x")
    new.write_bytes(b"x")
    four_days_ago = time.time() - 4 * 24 * 3600
    os.utime(old, (four_days_ago, four_days_ago))
    assert table.maintenance().remove_orphan_files().orphan_file_locations == [f"file://{old}"]
    assert new.exists() and not old.exists()
    with pytest.raises(ValidationError, match="not under the table location"):
        table.maintenance().remove_orphan_files(location=str(tmp_path))
