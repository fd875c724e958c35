"""Branches, tags, rollback, fast-forward, cherry-pick and write-audit-publish in the table core,
on SQLite and over REST (the REST leg proves the service applies ``set-snapshot-ref`` and
``remove-snapshot-ref`` and checks ``assert-ref-snapshot-id``); the race on a branch on every
catalog of the matrix."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from tablestore.catalog.base import Catalog
from tablestore.errors import CommitConflictError, NoSuchSnapshotError, TableStoreError, ValidationError
from tablestore.table import Table
from tests.conftest import ON_THE_CATALOG_MATRIX, OVER_REST

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("part", pa.string())])


def batch(*ids: int, part: str = "a") -> pa.Table:
    return pa.table({"id": list(ids), "part": [part] * len(ids)}, schema=SCHEMA)


def ids(table: Table, ref: str | None = None) -> list[int]:
    return sorted(table.refresh().scan(ref=ref).to_arrow()["id"].to_pylist())


@pytest.fixture
def table(catalog: Catalog) -> Table:
    catalog.create_namespace("db")
    created = catalog.create_table("db.t", SCHEMA, partition_by=["part"])
    created.append(batch(1, 2))
    return created


def refused(table: Table, match: str, action: object) -> None:
    """``action`` (a callable) raises a TableStoreError matching ``match`` and commits nothing."""
    before = table.refresh().metadata_location
    with pytest.raises(TableStoreError, match=match):
        action()  # type: ignore[operator]
    assert table.refresh().metadata_location == before


@OVER_REST
def test_branches_and_tags_are_created_with_their_retention_in_one_commit(table: Table) -> None:
    first = table.current_snapshot()
    assert first is not None
    before = table.metadata_location
    with table.manage_snapshots() as ms:
        ms.create_branch(first.snapshot_id, "audit", max_ref_age_ms=86_400_000, max_snapshot_age_ms=3_600_000,
                         min_snapshots_to_keep=3)
        ms.create_tag(first.snapshot_id, "v1", max_ref_age_ms=7_200_000)
    table.refresh()
    assert table.metadata_location != before
    assert len(table.metadata.metadata_log) == 2  # create, append, refs: one commit for both refs
    refs = table.refs()
    assert sorted(refs) == ["audit", "main", "v1"]
    audit, tag = refs["audit"], refs["v1"]
    assert (audit.snapshot_id, audit.type, audit.max_ref_age_ms, audit.max_snapshot_age_ms,
            audit.min_snapshots_to_keep) == (first.snapshot_id, "branch", 86_400_000, 3_600_000, 3)
    assert (tag.snapshot_id, tag.type, tag.max_ref_age_ms) == (first.snapshot_id, "tag", 7_200_000)
    # Retention is changed on its own and kept when the branch moves.
    table.manage_snapshots().set_min_snapshots_to_keep("audit", 5).set_max_ref_age_ms("v1", 1000).commit()
    table.on_branch("audit").append(batch(3))
    refs = table.refresh().refs()
    assert (refs["audit"].min_snapshots_to_keep, refs["audit"].max_snapshot_age_ms) == (5, 3_600_000)
    assert refs["v1"].max_ref_age_ms == 1000


@OVER_REST
def test_writes_to_a_branch_leave_main_and_validate_against_the_branch_head(table: Table) -> None:
    main_head = table.current_snapshot()
    assert main_head is not None
    audit = table.on_branch("audit")  # does not exist yet: the first write creates it from main
    appended = audit.append(batch(3))
    assert appended.parent_snapshot_id == main_head.snapshot_id
    assert ids(table) == [1, 2] and ids(table, "audit") == [1, 2, 3]
    assert table.refs()["main"].snapshot_id == main_head.snapshot_id

    audit.refresh().delete("id = 1")
    audit.refresh().update({"part": "'b'"}, "id = 2")
    assert ids(table, "audit") == [2, 3]
    parts = table.scan(ref="audit").to_arrow().sort_by("id")["part"].to_pylist()
    assert parts == ["b", "a"]
    audit.refresh().overwrite(batch(7, part="c"), "part = 'c'")
    audit.refresh().replace_partitions(batch(8, part="a"))
    assert ids(table, "audit") == [2, 7, 8]
    audit.refresh().merge(batch(8, 9, part="a"), on="t.id = s.id").when_matched_update_all() \
        .when_not_matched_insert_all().execute()
    assert ids(table, "audit") == [2, 7, 8, 9]
    # Main never moved, and every branch snapshot descends from main's head.
    assert ids(table) == [1, 2]
    assert table.refs()["main"].snapshot_id == main_head.snapshot_id
    lineage = [s.snapshot_id for s in table.metadata.ancestors_of(table.refs()["audit"].snapshot_id)]
    assert lineage[-1] == main_head.snapshot_id
    # Sequence numbers are the table's: each commit, whatever its branch, takes the next one.
    sequence_numbers = [s.sequence_number for s in table.metadata.snapshots]
    assert sequence_numbers == sorted(sequence_numbers) and len(set(sequence_numbers)) == len(sequence_numbers)

    # A write to main meanwhile does not conflict with a branch write that read the branch.
    stale_audit = table.on_branch("audit")
    table.append(batch(100))
    stale_audit.append(batch(10))
    assert ids(table, "audit") == [2, 7, 8, 9, 10] and ids(table) == [1, 2, 100]


@ON_THE_CATALOG_MATRIX
def test_a_branch_write_conflicts_with_a_concurrent_write_to_the_same_branch(table: Table) -> None:
    table.manage_snapshots().create_branch(None, "audit").commit()
    reader = table.on_branch("audit")
    other = table.catalog.load_table("db.t").on_branch("audit")
    other.append(batch(5))  # lands on the branch after `reader` read it
    with pytest.raises(CommitConflictError):
        reader.overwrite(batch(6), "id >= 0")  # serializable: rows added on the branch conflict
    assert ids(table, "audit") == [1, 2, 5]


@OVER_REST
def test_tags_are_read_only_and_names_are_unique(table: Table) -> None:
    head = table.current_snapshot()
    assert head is not None
    table.manage_snapshots().create_tag(head.snapshot_id, "v1").commit()
    with pytest.raises(ValidationError, match="'v1' .* is a tag, and tags are read-only"):
        table.on_branch("v1")
    refused(table, r"a tag named 'v1' already exists", lambda: table.manage_snapshots().create_branch(
        head.snapshot_id, "v1"))
    refused(table, r"a branch named 'main' already exists", lambda: table.manage_snapshots().create_tag(
        head.snapshot_id, "main"))
    refused(table, r"no snapshot 42", lambda: table.manage_snapshots().create_tag(42, "t42"))
    refused(table, r"main .* cannot be removed", lambda: table.manage_snapshots().remove_branch("main"))
    refused(table, r"no branch 'nope'", lambda: table.manage_snapshots().remove_branch("nope"))
    refused(table, r"'v1' is a tag, not a branch", lambda: table.manage_snapshots().remove_branch("v1"))
    refused(table, r"'v1' is a tag, not a branch", lambda: table.manage_snapshots().set_min_snapshots_to_keep(
        "v1", 2))
    # A failing operation anywhere in a builder commits none of the others.
    with pytest.raises(ValidationError):
        table.manage_snapshots().create_branch(head.snapshot_id, "b1").create_tag(head.snapshot_id, "v1").commit()
    assert "b1" not in table.refresh().refs()
    table.manage_snapshots().replace_tag("v1", head.snapshot_id).remove_tag("v1").commit()
    assert sorted(table.refresh().refs()) == ["main"]


@OVER_REST
def test_rollback_and_set_current_snapshot(table: Table) -> None:
    first = table.current_snapshot()
    assert first is not None
    second = table.append(batch(3))
    time.sleep(0.01)
    between = int(time.time() * 1000)
    time.sleep(0.01)
    third = table.append(batch(4))
    table.manage_snapshots().rollback_to_timestamp(between).commit()
    assert table.refresh().current_snapshot().snapshot_id == second.snapshot_id  # type: ignore[union-attr]
    assert ids(table) == [1, 2, 3]
    table.manage_snapshots().rollback_to_snapshot(first.snapshot_id).commit()
    assert ids(table) == [1, 2]
    # third is no ancestor of main now: a rollback refuses it, set_current_snapshot does not.
    refused(table, rf"not an ancestor of the branch's head {first.snapshot_id}",
            lambda: table.manage_snapshots().rollback_to_snapshot(third.snapshot_id))
    refused(table, r"no snapshot older than that", lambda: table.manage_snapshots().rollback_to_timestamp(1))
    table.manage_snapshots().set_current_snapshot(third.snapshot_id).commit()
    assert ids(table) == [1, 2, 3, 4]
    # The snapshot log records each move of main, as Java's history table shows it.
    moves = [e.snapshot_id for e in table.metadata.snapshot_log][-3:]
    assert moves == [second.snapshot_id, first.snapshot_id, third.snapshot_id]
    with pytest.raises(NoSuchSnapshotError):
        table.manage_snapshots().set_current_snapshot(123)


@OVER_REST
def test_fast_forward_moves_only_along_a_lineage(table: Table) -> None:
    table.manage_snapshots().create_branch(None, "audit").commit()
    audit_head = table.on_branch("audit").append(batch(3))
    table.manage_snapshots().fast_forward("main", "audit").commit()
    assert table.refresh().current_snapshot().snapshot_id == audit_head.snapshot_id  # type: ignore[union-attr]
    assert ids(table) == [1, 2, 3]
    # Diverged: main and audit each have a snapshot the other lacks.
    table.append(batch(4))
    table.on_branch("audit").append(batch(5))
    refused(table, r"is not an ancestor of 'audit''s head .* diverged",
            lambda: table.manage_snapshots().fast_forward("main", "audit"))
    # A missing branch is created at the target's head.
    table.manage_snapshots().fast_forward("copy", "audit").commit()
    assert ids(table, "copy") == [1, 2, 3, 5]


@OVER_REST
def test_cherrypick_appends_and_replaced_partitions_and_refuses_the_rest(table: Table) -> None:
    table.manage_snapshots().create_branch(None, "dev").commit()
    dev = table.on_branch("dev")
    picked = dev.append(batch(3, part="b"))
    table.append(batch(4))  # main moved: the pick makes a new snapshot
    table.manage_snapshots().cherrypick(picked.snapshot_id).commit()
    head = table.refresh().current_snapshot()
    assert head is not None and head.snapshot_id != picked.snapshot_id
    assert head.summary["source-snapshot-id"] == str(picked.snapshot_id)
    assert ids(table) == [1, 2, 3, 4]
    # The files are shared, not copied: the pick deleted nothing on dev.
    assert ids(table, "dev") == [1, 2, 3]
    refused(table, rf"picked already, as snapshot {head.snapshot_id}",
            lambda: table.manage_snapshots().cherrypick(picked.snapshot_id).commit())

    replaced = dev.refresh().replace_partitions(batch(30, part="b"))
    table.manage_snapshots().cherrypick(replaced.snapshot_id).commit()
    assert ids(table) == [1, 2, 4, 30]  # partition b replaced on main too

    deleted = dev.refresh().delete("id = 1")
    assert deleted == 1
    delete_snapshot = table.refresh().refs()["dev"].snapshot_id
    refused(table, r"only appends and dynamic partition overwrites",
            lambda: table.manage_snapshots().cherrypick(delete_snapshot).commit())
    refused(table, r"already an ancestor", lambda: table.manage_snapshots().cherrypick(
        table.metadata.snapshots[0].snapshot_id).commit())


@OVER_REST
def test_write_audit_publish_with_a_wap_id(table: Table) -> None:
    with pytest.raises(ValidationError, match=r"write-audit-publish is off; set the table property write.wap.enabled"):
        table.staged("job-1")
    table.update_properties({"write.wap.enabled": "true"})
    main_before = table.refresh().current_snapshot()
    assert main_before is not None
    staged = table.staged("job-1").append(batch(3))
    assert staged.summary["wap.id"] == "job-1"
    assert table.refresh().current_snapshot().snapshot_id == main_before.snapshot_id  # type: ignore[union-attr]
    assert ids(table) == [1, 2]
    assert sorted(table.scan(snapshot_id=staged.snapshot_id).to_arrow()["id"].to_pylist()) == [1, 2, 3]
    # Its parent is main's head, so publishing fast-forwards main to the audited snapshot.
    table.manage_snapshots().cherrypick(staged.snapshot_id).commit()
    assert table.refresh().current_snapshot().snapshot_id == staged.snapshot_id  # type: ignore[union-attr]
    second = table.staged("job-2").append(batch(4))
    table.append(batch(5))  # main moved: publishing job-2 makes a new snapshot
    table.manage_snapshots().cherrypick(second.snapshot_id).commit()
    head = table.refresh().current_snapshot()
    assert head is not None and head.summary["published-wap-id"] == "job-2"
    assert ids(table) == [1, 2, 3, 4, 5]
    again = table.staged("job-2").append(batch(6))
    refused(table, r"wap.id 'job-2' was published already",
            lambda: table.manage_snapshots().cherrypick(again.snapshot_id).commit())


@OVER_REST
def test_compaction_on_a_branch_rewrites_the_branch_and_leaves_main(table: Table) -> None:
    for i in range(3, 7):
        table.append(batch(i), branch="audit")  # four small files on the branch only
    main_head = table.refresh().current_snapshot()
    assert main_head is not None
    before = len(list(table.scan(ref="audit").plan_files()))
    result = table.maintenance().rewrite_data_files(branch="audit")
    assert result.rewritten_data_files_count >= 4
    table.refresh()
    assert len(list(table.scan(ref="audit").plan_files())) < before
    assert ids(table, "audit") == [1, 2, 3, 4, 5, 6]
    assert table.current_snapshot().snapshot_id == main_head.snapshot_id  # type: ignore[union-attr]
    assert ids(table) == [1, 2]
    head = table.snapshot_by_id(table.refs()["audit"].snapshot_id)
    assert head is not None and head.summary["operation"] == "replace"
