"""One retry loop: ``commit.retry.num-retries`` is honoured by every kind of commit alike.

Each operation runs on a real SQLite catalog whose pointer a second catalog instance moves in
the middle of the operation's commits (tests/table/contended.py). With ``num-retries`` = 3, an
operation that loses 3 races lands on its 4th attempt; one that loses 4 gives up after its 4th
attempt with CommitConflictError and leaves the table as it was.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from tablestore.errors import CommitConflictError
from tablestore.table.update.retry import RetryPolicy
from tests.table.contended import RIVAL_PROPERTY, ContendedCatalog

RETRIES = 3
SCHEMA = pa.schema([("id", pa.int64()), ("country", pa.string())])


def batch(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "country": ["de" if i % 2 else "fr" for i in ids]})


def contended(tmp_path: Path, races: int) -> tuple[ContendedCatalog, tablestore.Table]:
    """A table of 3 appends (6 small files) with commit.retry.num-retries = 3, loaded through a
    catalog that loses its next ``races`` commits to a rival writer."""
    uri, warehouse = f"sqlite:///{tmp_path}/c.db", str(tmp_path / "wh")
    rival = tablestore.load_catalog("c", type="sql", uri=uri, warehouse=warehouse)
    rival.create_namespace("db")
    setup = rival.create_table("db.t", schema=SCHEMA, partition_by=["country"])
    for start in (0, 10, 20):
        setup.append(batch(range(start, start + 10)))
    setup.update_properties({"commit.retry.num-retries": str(RETRIES), "commit.retry.min-wait-ms": "1",
                             "commit.retry.max-wait-ms": "2", "write.delete.mode": "merge-on-read"})
    catalog = ContendedCatalog("c", rival, races, uri=uri, warehouse=warehouse)
    return catalog, catalog.load_table("db.t")


def ids(table: tablestore.Table) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


@dataclass(frozen=True)
class Operation:
    run: Callable[[tablestore.Table], object]
    applied: Callable[[tablestore.Table], bool]


OPERATIONS = {
    "append": Operation(lambda t: t.append(batch(range(100, 103))), lambda t: 100 in ids(t)),
    "property update": Operation(lambda t: t.update_properties({"owner": "ops"}),
                                 lambda t: t.properties.get("owner") == "ops"),
    "schema update": Operation(lambda t: t.update_schema().add_column("note", "string").commit(),
                               lambda t: "note" in [f.name for f in t.schema().fields]),
    "spec update": Operation(lambda t: t.update_spec().add_field("bucket(4, id)").commit(),
                             lambda t: len(t.spec().fields) == 2),
    "row-level delete": Operation(lambda t: t.delete("id < 5"), lambda t: ids(t) == list(range(5, 30))),
    "row-level update": Operation(lambda t: t.update({"country": "'it'"}, "id = 7"),
                                  lambda t: t.scan(filter="country = 'it'").to_arrow().num_rows == 1),
    "compaction": Operation(lambda t: t.maintenance().rewrite_data_files(options={"min-input-files": 2}),
                            lambda t: len(t.inspect.data_files()) == 2),
    "expire snapshots": Operation(lambda t: t.maintenance().expire_snapshots(
        older_than=int(time.time() * 1000) + 1000, retain_last=1),
                                  lambda t: len(t.snapshots()) == 1),
}


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_an_operation_that_loses_num_retries_races_lands_on_its_last_attempt(tmp_path: Path, name: str) -> None:
    catalog, table = contended(tmp_path, races=RETRIES)
    operation = OPERATIONS[name]
    assert not operation.applied(table)

    operation.run(table)

    assert catalog.attempts == RETRIES + 1
    fresh = catalog.rival.load_table("db.t")
    assert operation.applied(fresh)
    assert fresh.properties[RIVAL_PROPERTY] == str(RETRIES)  # every rival commit stayed


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_an_operation_that_loses_one_race_more_fails_and_changes_nothing(tmp_path: Path, name: str) -> None:
    catalog, table = contended(tmp_path, races=RETRIES + 1)
    operation = OPERATIONS[name]
    before = catalog.rival.load_table("db.t")

    with pytest.raises(CommitConflictError):
        operation.run(table)

    assert catalog.attempts == RETRIES + 1
    after = catalog.rival.load_table("db.t")
    assert not operation.applied(after)
    assert after.properties[RIVAL_PROPERTY] == str(RETRIES + 1)
    assert [s.snapshot_id for s in after.snapshots()] == [s.snapshot_id for s in before.snapshots()]
    assert after.schema() == before.schema() and after.spec() == before.spec()
    # Nothing the failed attempts wrote is left behind.
    orphans = after.maintenance().remove_orphan_files(older_than=int(time.time() * 1000) + 60_000, dry_run=True)
    assert orphans.orphan_file_locations == []


def test_without_the_properties_the_policy_is_the_one_the_readme_promises() -> None:
    assert RetryPolicy.from_properties({}) == RetryPolicy(100, 10, 1000, 1_800_000)
    assert RetryPolicy.from_properties({"commit.retry.num-retries": "2", "commit.retry.min-wait-ms": "oops"}) \
        == RetryPolicy(2, 10, 1000, 1_800_000)


def test_a_zero_retry_table_fails_on_its_first_lost_race(tmp_path: Path) -> None:
    catalog, table = contended(tmp_path, races=0)
    table.update_properties({"commit.retry.num-retries": "0"})
    catalog.races, catalog.attempts = 1, 0
    with pytest.raises(CommitConflictError):
        table.append(batch(range(100, 101)))
    assert catalog.attempts == 1
