"""Two processes change the same table from the same snapshot: Iceberg's validation decides."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore


def _worker(uri: str, warehouse: str, operation: str, filter: str, barrier: Any, queue: Any) -> None:
    catalog = tablestore.load_catalog("c", type="sql", uri=uri, warehouse=warehouse)
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


def _run(tmp_path: Path, mode: str, jobs: list[tuple[str, str]]) -> tuple[Any, list[tuple[str, str, Any]]]:
    uri = f"sqlite:///{tmp_path}/catalog.db"
    warehouse = str(tmp_path / "wh")
    catalog = tablestore.load_catalog("c", type="sql", uri=uri, warehouse=warehouse)
    catalog.create_namespace("db")
    table = catalog.create_table(
        "db.t", schema=pa.schema([("id", pa.int64()), ("day", pa.string())]), partition_by=["day"],
        properties={"write.delete.mode": mode},
    )
    table.append(pa.table({"id": pa.array(range(100), pa.int64()), "day": ["d1"] * 100}))
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(jobs))
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(uri, warehouse, op, f, barrier, queue)) for op, f in jobs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0
    return catalog, sorted(queue.get(timeout=5) for _ in procs)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_two_processes_deleting_overlapping_rows_one_commits_one_conflicts(tmp_path: Path, mode: str) -> None:
    catalog, results = _run(tmp_path, mode, [("delete", "id < 60"), ("delete", "id >= 40 AND id < 80")])
    outcomes = sorted(r[1] for r in results)
    assert outcomes == ["conflict", "ok"], results
    winner = next(r for r in results if r[1] == "ok")
    assert winner[2] in (60, 40)
    ids = catalog.load_table("db.t").scan().to_arrow().column("id").to_pylist()
    assert len(ids) == 100 - winner[2]
    assert len(catalog.load_table("db.t").snapshots()) == 2


@pytest.mark.timeout(600)
def test_an_append_to_another_partition_while_a_delete_runs_does_not_conflict(tmp_path: Path) -> None:
    catalog, results = _run(tmp_path, "merge-on-read", [("delete", "day = 'd1' AND id < 50"), ("append", "")])
    assert [r[1] for r in results] == ["ok", "ok"], results
    ids = sorted(catalog.load_table("db.t").scan().to_arrow().column("id").to_pylist())
    assert ids == [*range(50, 100), 1000]
