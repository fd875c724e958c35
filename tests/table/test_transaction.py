"""``table.transaction()``: several changes, one snapshot, one metadata commit, all or nothing.

Concurrent writers here are real: a second catalog instance on the same SQLite database (or a
catalog that loses a race to one, tests/table/contended.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from tablestore.errors import CommitConflictError, ValidationError
from tests.table.contended import RIVAL_PROPERTY, ContendedCatalog

SCHEMA = pa.schema([("id", pa.int64()), ("country", pa.string())])


def batch(ids: range, country: str = "de") -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "country": [country] * len(ids)})


@pytest.fixture
def catalogs(tmp_path: Path) -> tuple[tablestore.Catalog, tablestore.Catalog]:
    """Two catalog instances on one SQLite database: the writer's and another process's."""
    uri, warehouse = f"sqlite:///{tmp_path}/c.db", str(tmp_path / "wh")
    ours = tablestore.load_catalog("c", type="sql", uri=uri, warehouse=warehouse)
    other = tablestore.load_catalog("c", type="sql", uri=uri, warehouse=warehouse)
    ours.create_namespace("db")
    table = ours.create_table("db.t", schema=SCHEMA, partition_by=["country"])
    table.append(batch(range(0, 5), "de"))
    table.append(batch(range(5, 10), "fr"))
    return ours, other


def ids(table: tablestore.Table) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def no_orphans(table: tablestore.Table) -> list[str]:
    result = table.maintenance().remove_orphan_files(older_than=int(time.time() * 1000) + 60_000, dry_run=True)
    return result.orphan_file_locations


def test_two_appends_make_one_snapshot_in_one_metadata_commit(catalogs: tuple[tablestore.Catalog, ...]) -> None:
    table = catalogs[0].load_table("db.t")
    snapshots, log = len(table.snapshots()), len(table.metadata.metadata_log)

    with table.transaction() as tx:
        tx.append(batch(range(10, 13), "de"))
        tx.append(batch(range(13, 15), "it"))

    assert len(table.snapshots()) == snapshots + 1
    assert len(table.metadata.metadata_log) == log + 1
    snapshot = table.current_snapshot()
    assert snapshot is not None
    assert snapshot.summary["operation"] == "append"
    assert snapshot.summary["added-records"] == "5"
    assert snapshot.summary["total-records"] == "15"
    assert ids(catalogs[1].load_table("db.t")) == list(range(15))


def test_a_schema_change_and_an_append_land_as_one_snapshot_with_the_new_schema(
    catalogs: tuple[tablestore.Catalog, ...],
) -> None:
    table = catalogs[0].load_table("db.t")
    log = len(table.metadata.metadata_log)

    with table.transaction() as tx:
        tx.update_schema().add_column("score", "double").commit()
        tx.append(pa.table({"id": [20], "country": ["de"], "score": [0.5]}))

    assert len(table.metadata.metadata_log) == log + 1  # schema and snapshot in one commit
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.schema_id == table.schema().schema_id
    rows = catalogs[1].load_table("db.t").scan(filter="id >= 9").to_arrow().sort_by("id")
    assert rows.column("score").to_pylist() == [None, 0.5]


def test_a_delete_and_an_append_make_one_overwrite_snapshot(catalogs: tuple[tablestore.Catalog, ...]) -> None:
    table = catalogs[0].load_table("db.t")
    snapshots = len(table.snapshots())

    with table.transaction() as tx:
        tx.delete("id < 3")
        tx.append(batch(range(100, 102), "de"))

    assert len(table.snapshots()) == snapshots + 1
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary["operation"] == "overwrite"
    assert ids(table) == [*range(3, 10), 100, 101]


def test_a_transaction_that_loses_a_race_is_staged_again_and_lands_whole(tmp_path: Path) -> None:
    uri, warehouse = f"sqlite:///{tmp_path}/c.db", str(tmp_path / "wh")
    rival = tablestore.load_catalog("c", type="sql", uri=uri, warehouse=warehouse)
    rival.create_namespace("db")
    rival.create_table("db.t", schema=SCHEMA).append(batch(range(0, 3)))
    catalog = ContendedCatalog("c", rival, races=2, uri=uri, warehouse=warehouse)
    table = catalog.load_table("db.t")

    tx = table.transaction()
    tx.set_properties({"owner": "ops"})
    tx.update_schema().add_column("note", "string").commit()
    tx.append(pa.table({"id": [3], "country": ["de"], "note": ["n"]}))
    tx.append(pa.table({"id": [4], "country": ["de"], "note": ["m"]}))
    tx.commit_transaction()

    assert tx.attempts == 3 and catalog.attempts == 3
    fresh = rival.load_table("db.t")
    assert fresh.properties["owner"] == "ops" and fresh.properties[RIVAL_PROPERTY] == "2"
    assert [f.name for f in fresh.schema().fields] == ["id", "country", "note"]
    assert len(fresh.snapshots()) == 2
    assert fresh.scan().to_arrow().sort_by("id").column("note").to_pylist() == [None, None, None, "n", "m"]
    assert no_orphans(fresh) == []


def test_a_conflicting_concurrent_writer_fails_the_transaction_with_nothing_applied(
    catalogs: tuple[tablestore.Catalog, ...],
) -> None:
    ours, other = catalogs
    table = ours.load_table("db.t")
    before = [s.snapshot_id for s in table.snapshots()]

    tx = table.transaction()
    tx.delete("id < 3")  # rewrites the 'de' file
    tx.append(batch(range(50, 52), "fr"))
    tx.set_properties({"owner": "ops"})
    # Another process deletes from the same file before the transaction commits.
    other.load_table("db.t").delete("id = 4")

    with pytest.raises(CommitConflictError, match="removed the data file"):
        tx.commit_transaction()

    fresh = other.load_table("db.t")
    assert "owner" not in fresh.properties
    assert [s.snapshot_id for s in fresh.snapshots()][:-1] == before  # only the other writer's snapshot
    assert ids(fresh) == [0, 1, 2, 3, *range(5, 10)]
    assert no_orphans(fresh) == []


def test_a_concurrent_schema_change_fails_a_transaction_that_changes_the_schema(
    catalogs: tuple[tablestore.Catalog, ...],
) -> None:
    ours, other = catalogs
    table = ours.load_table("db.t")
    tx = table.transaction()
    tx.update_schema().add_column("a", "string").commit()
    tx.append(pa.table({"id": [7], "country": ["it"], "a": ["x"]}))
    other.load_table("db.t").update_schema().add_column("b", "string").commit()

    with pytest.raises(CommitConflictError, match="schema was changed by a concurrent commit"):
        tx.commit_transaction()

    fresh = other.load_table("db.t")
    assert [f.name for f in fresh.schema().fields] == ["id", "country", "b"]
    assert ids(fresh) == list(range(10))
    assert no_orphans(fresh) == []


def test_an_exception_in_the_block_commits_nothing_and_deletes_the_written_files(
    catalogs: tuple[tablestore.Catalog, ...],
) -> None:
    table = catalogs[0].load_table("db.t")
    before = table.metadata_location
    with pytest.raises(RuntimeError), table.transaction() as tx:
        tx.append(batch(range(10, 12)))
        raise RuntimeError("the job failed")
    assert catalogs[1].load_table("db.t").metadata_location == before
    assert no_orphans(table) == []


def test_a_committed_transaction_cannot_be_used_again(catalogs: tuple[tablestore.Catalog, ...]) -> None:
    table = catalogs[0].load_table("db.t")
    tx = table.transaction()
    tx.append(batch(range(10, 11)))
    tx.commit_transaction()
    with pytest.raises(ValidationError, match="committed or aborted already"):
        tx.append(batch(range(11, 12)))


# -- commit identifiers: a retried job never applies twice -------------------------------------


def test_an_append_retried_with_its_commit_id_applies_once(catalogs: tuple[tablestore.Catalog, ...]) -> None:
    table = catalogs[0].load_table("db.t")
    first = table.append(batch(range(10, 12)), commit_id="ingest-2024-01-02")
    again = table.append(batch(range(10, 12)), commit_id="ingest-2024-01-02")

    assert again.snapshot_id == first.snapshot_id
    assert first.summary["tablestore.commit-id"] == "ingest-2024-01-02"
    assert ids(table.refresh()) == list(range(12))
    assert no_orphans(table) == []  # the rerun's files were deleted


def test_a_rerun_racing_its_original_lands_once(catalogs: tuple[tablestore.Catalog, ...]) -> None:
    ours, other = catalogs
    stale = ours.load_table("db.t")  # the rerun started before the original committed
    original = other.load_table("db.t").append(batch(range(10, 13)), commit_id="run-7")

    rerun = stale.transaction(commit_id="run-7")
    rerun.append(batch(range(10, 13)))
    result = rerun.commit_transaction()

    assert result is not None and result.snapshot_id == original.snapshot_id
    assert rerun.applied_before is not None
    assert rerun.attempts == 1  # lost to the original, then found it in the history
    assert ids(other.load_table("db.t")) == list(range(13))
    assert no_orphans(stale) == []


def test_a_commit_id_needs_a_snapshot_to_be_recorded_in(catalogs: tuple[tablestore.Catalog, ...]) -> None:
    tx = catalogs[0].load_table("db.t").transaction(commit_id="x")
    tx.set_properties({"owner": "ops"})
    with pytest.raises(ValidationError, match="recorded in a snapshot"):
        tx.commit_transaction()
