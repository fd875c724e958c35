"""Two processes change the same table from the same snapshot: Iceberg's validation decides, on
every catalog of the matrix."""

from __future__ import annotations

import multiprocessing
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from tests.conftest import ON_THE_CATALOG_MATRIX, CatalogTarget

pytestmark = ON_THE_CATALOG_MATRIX  # each catalog decides the race its own way


def _worker(target: CatalogTarget, operation: str, filter: str, barrier: Any, queue: Any) -> None:
    catalog = target.open()
    table = catalog.load_table("db.t")  # both workers hold the same snapshot from here on
    barrier.wait(timeout=120)
    try:
        if operation == "delete":
            count = table.delete(filter)
        else:
            table.append(pa.table({"id": pa.array([1000], pa.int64()), "day": ["d2"]}))
            count = 1
        queue.put((operation, "ok", count))
    except tablestore.errors.CommitConflictError as e:
        queue.put((operation, "conflict", str(e)))


def _run(target: CatalogTarget, catalog: tablestore.Catalog, mode: str,
         jobs: list[tuple[str, str]]) -> list[tuple[str, str, Any]]:
    catalog.create_namespace("db")
    table = catalog.create_table(
        "db.t", schema=pa.schema([("id", pa.int64()), ("day", pa.string())]), partition_by=["day"],
        properties={"write.delete.mode": mode},
    )
    table.append(pa.table({"id": pa.array(range(100), pa.int64()), "day": ["d1"] * 100}))
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(jobs))
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(target, op, f, barrier, queue)) for op, f in jobs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0
    return sorted(queue.get(timeout=5) for _ in procs)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_two_processes_deleting_overlapping_rows_one_commits_one_conflicts(
    catalog_target: CatalogTarget, catalog: tablestore.Catalog, mode: str
) -> None:
    results = _run(catalog_target, catalog, mode, [("delete", "id < 60"), ("delete", "id >= 40 AND id < 80")])
    outcomes = sorted(r[1] for r in results)
    assert outcomes == ["conflict", "ok"], results
    winner = next(r for r in results if r[1] == "ok")
    assert winner[2] in (60, 40)
    ids = catalog.load_table("db.t").scan().to_arrow().column("id").to_pylist()
    assert len(ids) == 100 - winner[2]
    assert len(catalog.load_table("db.t").snapshots()) == 2


@pytest.mark.timeout(600)
def test_an_append_to_another_partition_while_a_delete_runs_does_not_conflict(
    catalog_target: CatalogTarget, catalog: tablestore.Catalog
) -> None:
    results = _run(catalog_target, catalog, "merge-on-read", [("delete", "day = 'd1' AND id < 50"), ("append", "")])
    assert [r[1] for r in results] == ["ok", "ok"], results
    ids = sorted(catalog.load_table("db.t").scan().to_arrow().column("id").to_pylist())
    assert ids == [*range(50, 100), 1000]
