"""Optimistic concurrency: two processes append to one table; no commit is lost, on every catalog of
the matrix (over REST, the service decides each race and the client retries on its 409)."""

from __future__ import annotations

import multiprocessing
import sys
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from tests.conftest import ON_THE_CATALOG_MATRIX, CatalogTarget

# Appends per writer: enough for dozens of lost races per run (each retried), which is the
# behaviour under test; 200 (1,200 commits over the three catalogs) proved nothing more.
APPENDS = 40


def _appender(target: CatalogTarget, writer: int, count: int, queue: multiprocessing.Queue,
              start: Any) -> None:
    catalog = target.open()
    table = catalog.load_table("db.t")
    start.wait(timeout=300)  # both writers loaded: their appends overlap from the first
    retried = 0
    for n in range(count):
        rows = pa.table({"writer": pa.array([writer] * 2, pa.int32()), "n": pa.array([n, n], pa.int32()),
                         "k": pa.array([0, 1], pa.int32())})
        before = table.metadata.last_sequence_number
        snapshot = table.append(rows)
        # A commit that lost a race was rebuilt on a newer parent than the table it started from.
        if snapshot.sequence_number > before + 1:
            retried += 1
    queue.put((writer, retried))


def _run_two_appenders(target: CatalogTarget) -> list[tuple[int, int]]:
    ctx = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue = ctx.Queue()
    start = ctx.Barrier(2)
    procs = [ctx.Process(target=_appender, args=(target, w, APPENDS, queue, start)) for w in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
        assert p.exitcode == 0, "an appender failed"
    return [queue.get(timeout=5) for _ in procs]


def _check(catalog: tablestore.Catalog) -> None:
    table = catalog.load_table("db.t")
    rows = table.scan().to_arrow()
    assert rows.num_rows == 2 * APPENDS * 2
    got = sorted(zip(rows.column("writer").to_pylist(), rows.column("n").to_pylist(), rows.column("k").to_pylist(), strict=True))
    assert got == sorted((w, n, k) for w in (1, 2) for n in range(APPENDS) for k in (0, 1))
    snapshots = table.snapshots()
    assert len(snapshots) == 2 * APPENDS
    # Every snapshot chains to its parent: none was lost or overwritten.
    seqs = sorted(s.sequence_number for s in snapshots)
    assert seqs == list(range(1, 2 * APPENDS + 1))


@pytest.mark.timeout(900)
@ON_THE_CATALOG_MATRIX
def test_two_processes_append_40_times_each(catalog_target: CatalogTarget, catalog: tablestore.Catalog) -> None:
    catalog.create_namespace("db")
    catalog.create_table("db.t", schema=pa.schema([("writer", pa.int32()), ("n", pa.int32()), ("k", pa.int32())]),
                         partition_by=["writer"])
    results = _run_two_appenders(catalog_target)
    _check(catalog)
    assert sum(r for _, r in results) > 0, "the writers never raced; the test proves nothing"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
