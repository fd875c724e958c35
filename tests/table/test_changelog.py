"""Changelog scans (``table.changes``): the rows each kind of commit changes, paired updates,
net changes, the ways to name the range, and the errors of a range that cannot be read."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from tablestore.catalog.base import Catalog
from tablestore.errors import SnapshotRangeError, ValidationError
from tablestore.table import Table
from tests.table.changelog_model import assert_matches_model

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _rows(table: Table, **options: object) -> list[tuple[object, ...]]:
    out = table.changes(**options).to_arrow()  # type: ignore[arg-type]
    return [(r["id"], r["v"], r["_change_type"], r["_change_ordinal"]) for r in out.to_pylist()]


def _table(catalog: Catalog, mode: str = "copy-on-write", version: int = 2, **props: str) -> Table:
    catalog.create_namespace("db")
    return catalog.create_table("db.t", SCHEMA, properties={
        "format-version": str(version), "write.delete.mode": mode, "write.update.mode": mode,
        "write.merge.mode": mode, **props})


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_inserts_updates_and_deletes_of_each_snapshot_with_carry_overs_removed(catalog: Catalog, mode: str) -> None:
    table = _table(catalog, mode)
    first = table.append(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}))
    table.update({"v": "'B'"}, "id = 2")
    table.delete("id = 3")
    table.append(pa.table({"id": [4], "v": ["d"]}))

    assert _rows(table, from_snapshot=first.snapshot_id, identifier_columns=["id"]) == [
        (2, "b", "UPDATE_BEFORE", 0), (2, "B", "UPDATE_AFTER", 0), (3, "c", "DELETE", 1), (4, "d", "INSERT", 2)]
    # Without a key the update is a DELETE and an INSERT; the unchanged rows never appear.
    assert _rows(table, from_snapshot=first.snapshot_id) == [
        (2, "b", "DELETE", 0), (2, "B", "INSERT", 0), (3, "c", "DELETE", 1), (4, "d", "INSERT", 2)]
    # From the creation: the first append's rows are INSERTs of ordinal 0.
    assert _rows(table, compute_updates=False)[:3] == [(1, "a", "INSERT", 0), (2, "b", "INSERT", 0),
                                                       (3, "c", "INSERT", 0)]
    assert_matches_model(table, first.snapshot_id, table.current_snapshot().snapshot_id)  # type: ignore[union-attr]


def test_the_changelog_columns_and_the_snapshot_ids(catalog: Catalog) -> None:
    table = _table(catalog)
    first = table.append(pa.table({"id": [1], "v": ["a"]}))
    second = table.append(pa.table({"id": [2], "v": ["b"]}))
    scan = table.changes()
    out = scan.to_arrow()
    assert out.schema.names == ["id", "v", "_change_type", "_change_ordinal", "_commit_snapshot_id"]
    assert out.schema.field("_change_ordinal").type == pa.int32()
    assert out.column("_commit_snapshot_id").to_pylist() == [first.snapshot_id, second.snapshot_id]
    reader = scan.to_arrow_batch_reader()
    assert isinstance(reader, pa.RecordBatchReader) and reader.read_all().num_rows == 2
    assert [t.kind for t in scan.plan_tasks()] == ["added", "added"]


def test_merge_on_read_deletes_and_deletion_vectors_read_only_the_deleted_rows(catalog: Catalog) -> None:
    table = _table(catalog, "merge-on-read", version=3)
    table.append(pa.table({"id": list(range(10)), "v": [str(i) for i in range(10)]}))
    start = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    table.delete("id in (1, 2)")
    table.delete("id = 5")  # a second DV for the same file replaces the first
    scan = table.changes(from_snapshot=start, compute_updates=False)
    assert [t.kind for t in scan.plan_tasks()] == ["deletes", "deletes"]
    assert [(r["id"], r["_change_type"], r["_change_ordinal"]) for r in scan.to_arrow().to_pylist()] == [
        (1, "DELETE", 0), (2, "DELETE", 0), (5, "DELETE", 1)]


def test_v3_pairs_updates_by_row_id_without_a_key(catalog: Catalog) -> None:
    table = _table(catalog, "merge-on-read", version=3)
    first = table.append(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    table.update({"v": "'x'", "id": "20"}, "id = 2")  # even the would-be key changes
    assert _rows(table, from_snapshot=first.snapshot_id) == [(2, "b", "UPDATE_BEFORE", 0),
                                                             (20, "x", "UPDATE_AFTER", 0)]


def test_a_compaction_yields_no_change(catalog: Catalog) -> None:
    table = _table(catalog)
    for i in range(3):
        table.append(pa.table({"id": [i], "v": [str(i)]}))
    before = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    table.maintenance().rewrite_data_files(options={"min-input-files": "2"})
    table.refresh()
    assert table.current_snapshot().snapshot_id != before  # type: ignore[union-attr]
    scan = table.changes(from_snapshot=before)
    assert scan.plan_tasks() == [] and scan.to_arrow().num_rows == 0


def test_rows_come_in_the_to_snapshots_schema(catalog: Catalog) -> None:
    table = _table(catalog)
    first = table.append(pa.table({"id": [1], "v": ["a"]}))
    with table.update_schema() as u:
        u.add_column("extra", "int")
        u.rename_column("v", "value")
    table.append(pa.table({"id": [2], "value": ["b"], "extra": [7]}))
    out = table.changes(from_ref=None, to_snapshot=table.current_snapshot().snapshot_id).to_arrow()  # type: ignore[union-attr]
    assert out.select(["id", "value", "extra"]).to_pylist() == [
        {"id": 1, "value": "a", "extra": None}, {"id": 2, "value": "b", "extra": 7}]
    # Ending at the first snapshot: its own schema.
    assert table.changes(to_snapshot=first.snapshot_id).to_arrow().column_names[:2] == ["id", "v"]


def test_net_changes_collapse_a_row_changed_several_times(catalog: Catalog) -> None:
    table = _table(catalog, "merge-on-read")
    first = table.append(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    table.update({"v": "'b2'"}, "id = 2")
    table.update({"v": "'b3'"}, "id = 2")
    table.append(pa.table({"id": [3], "v": ["c"]}))
    table.delete("id = 3")  # inserted and deleted inside the range: no net change
    assert _rows(table, from_snapshot=first.snapshot_id, net_changes=True, identifier_columns=["id"]) == [
        (2, "b", "UPDATE_BEFORE", 0), (2, "b3", "UPDATE_AFTER", 1)]
    assert _rows(table, from_snapshot=first.snapshot_id, net_changes=True) == [
        (2, "b", "DELETE", 0), (2, "b3", "INSERT", 1)]


def test_the_range_by_timestamp_branch_and_tag(catalog: Catalog) -> None:
    table = _table(catalog)
    first = table.append(pa.table({"id": [1], "v": ["a"]}))
    time.sleep(0.01)
    second = table.append(pa.table({"id": [2], "v": ["b"]}))
    table.manage_snapshots().create_tag(first.snapshot_id, "v1").create_branch(second.snapshot_id, "dev").commit()
    table.refresh()
    table.append(pa.table({"id": [3], "v": ["c"]}), branch="dev")
    table.append(pa.table({"id": [4], "v": ["d"]}))
    assert [r[0] for r in _rows(table, from_ref="v1")] == [2, 4]
    assert [r[0] for r in _rows(table, from_ref="v1", to_ref="dev")] == [2, 3]
    assert [r[0] for r in _rows(table.on_branch("dev"), from_snapshot=first.snapshot_id)] == [2, 3]
    assert [r[0] for r in _rows(table, from_timestamp=first.timestamp_ms, to_timestamp=second.timestamp_ms)] == [2]
    assert [r[0] for r in _rows(table, to_timestamp=first.timestamp_ms)] == [1]


def test_bad_ranges_and_keys_are_refused_naming_the_fix(catalog: Catalog) -> None:
    table = _table(catalog)
    first = table.append(pa.table({"id": [1], "v": ["a"]}))
    second = table.append(pa.table({"id": [2], "v": ["b"]}))
    table.manage_snapshots().create_branch(second.snapshot_id, "dev").commit()
    table.refresh()
    on_dev = table.append(pa.table({"id": [3], "v": ["c"]}), branch="dev")
    table.manage_snapshots().create_tag(on_dev.snapshot_id, "dev_tag").commit()
    table.refresh()
    third = table.append(pa.table({"id": [4], "v": ["d"]}))

    with pytest.raises(SnapshotRangeError, match=r"not an ancestor of to snapshot .*start at an ancestor"):
        table.changes(from_snapshot=third.snapshot_id, to_snapshot=first.snapshot_id)
    with pytest.raises(SnapshotRangeError, match=r"from_ref 'dev_tag' .* is not an ancestor .*on branch dev"):
        table.changes(from_ref="dev_tag")
    with pytest.raises(ValidationError, match=r"identifier column\(s\) nope are not columns .*its columns: id, v"):
        table.changes(identifier_columns=["nope"])
    with pytest.raises(SnapshotRangeError, match="not a branch or tag"):
        table.changes(from_ref="missing")
    table.maintenance().expire_snapshots(snapshot_ids=[first.snapshot_id])
    table.refresh()
    with pytest.raises(SnapshotRangeError, match=f"from_snapshot {first.snapshot_id} is not a snapshot .*expired"):
        table.changes(from_snapshot=first.snapshot_id)
    with pytest.raises(SnapshotRangeError, match=f"reaches into expired snapshots.*from_snapshot={second.snapshot_id}"):
        table.changes()
    assert [r[0] for r in _rows(table, from_snapshot=second.snapshot_id)] == [4]


def test_rows_written_before_a_v3_upgrade_have_no_row_id_and_stay_unpaired(catalog: Catalog) -> None:
    table = _table(catalog, "merge-on-read", version=2)
    table.append(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}))
    table.update_properties({"format-version": "3"})
    start = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    table.update({"v": "'x'"}, "id in (1, 2)")  # two pre-upgrade rows: no _row_id to pair them by
    rows = _rows(table, from_snapshot=start)
    assert sorted(rows) == [(1, "a", "DELETE", 0), (1, "x", "INSERT", 0), (2, "b", "DELETE", 0), (2, "x", "INSERT", 0)]
    assert_matches_model(table, start, table.current_snapshot().snapshot_id)  # type: ignore[union-attr]
