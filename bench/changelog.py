"""Changelog scans: the rows a commit changed, against diffing the two snapshots' full scans.

The events table (``--rows``, partitioned by ``day(event_ts)``) is copied, upgraded to format v3
with merge-on-read, and gets three corrections in a row: updates of 0.1%, 1% and 10% of its rows
(``quantity = quantity + 1`` for the events of a time window at the end of the 30 days: late
corrections of the most recent hours, as a pipeline's restatement makes them). Each commit adds
deletion vectors on the files it touched and the new versions of the rows. For each change:

- floor ``diff-scans``: what a user without a changelog does: ``scan(snapshot_id=before)`` and
  ``scan(snapshot_id=after)`` in full, then the rows that differ between the two (each row hashed
  from its columns' dictionary codes over both scans, +1/-1 per side, the hashes that do not cancel);
- ``tablestore``: ``table.changes(from_snapshot=before, to_snapshot=after, compute_updates=False)``
  consumed batch by batch (``to_batches``), its rows counted.

Both count the same rows: the DELETE and INSERT of every updated row. Target: the changelog of
the 1% change takes at most 5% of the floor's time. Peak RSS growth shows the stream.
"""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.common import DAYS, MICROS_PER_DAY, NAMESPACE, START, Benchmark, Case, Contestant, Workspace, shared_table

FRACTIONS = (0.001, 0.01, 0.1)


def _diff_rows(before: pa.Table, after: pa.Table) -> int:
    """Rows in one scan and not the other (as a multiset), by every column: each row hashed from
    its columns' codes (dictionary-encoded over both scans, so equal values get equal codes), the
    hashes of ``before`` counted -1 and of ``after`` +1, the hashes whose counts do not cancel."""
    both = pa.concat_tables([before, after])
    hashes = np.zeros(both.num_rows, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in both.columns:
            codes = pc.dictionary_encode(column.combine_chunks(), null_encoding="encode").indices
            hashes = (hashes ^ codes.to_numpy(zero_copy_only=False).astype(np.uint64)) * np.uint64(0x9E3779B97F4A7C15)
    tags = np.r_[np.full(before.num_rows, -1, np.int8), np.full(after.num_rows, 1, np.int8)]
    sums = pa.table({"h": hashes, "t": tags}).group_by("h").aggregate([("t", "sum")]).column("t_sum")
    return int(pc.sum(pc.abs(sums)).as_py() or 0)


def build(ws: Workspace, rounds: int | None = None) -> Benchmark:
    import datetime

    import tablestore

    base = shared_table(ws)
    directory = ws.fresh("changelog")
    catalog = tablestore.load_catalog("cl", type="sql", uri=f"sqlite:///{directory}/catalog.db",
                                      warehouse=str(directory / "wh"))
    catalog.create_namespace(NAMESPACE)
    table = catalog.register_table(f"{NAMESPACE}.changes", base.metadata_location)
    table.update_properties({"format-version": "3", "write.update.mode": "merge-on-read"})
    table = catalog.load_table(table.identifier)
    end = START + datetime.timedelta(days=DAYS)
    heads = [table.metadata.current_snapshot_id]
    windows = []
    # Nested windows would re-correct rows; each change takes its own window, newest first.
    upper = end
    for fraction in FRACTIONS:
        span = datetime.timedelta(microseconds=int(fraction * DAYS * MICROS_PER_DAY))
        lower = upper - span
        changed = table.update({"quantity": "quantity + 1"},
                               f"event_ts >= '{lower.isoformat()}' and event_ts < '{upper.isoformat()}'")
        windows.append(changed)
        table = catalog.load_table(table.identifier)
        heads.append(table.metadata.current_snapshot_id)
        upper = lower

    def diff(before: int, after: int) -> int:
        t = catalog.load_table(table.identifier)
        return _diff_rows(t.scan(snapshot_id=before).to_arrow(), t.scan(snapshot_id=after).to_arrow())

    def changelog(before: int, after: int) -> int:
        t = catalog.load_table(table.identifier)
        return sum(b.num_rows for b in t.changes(from_snapshot=before, to_snapshot=after,
                                                 compute_updates=False).to_batches())

    cases = []
    for i, fraction in enumerate(FRACTIONS):
        before, after = heads[i], heads[i + 1]
        targets = {"diff-scans": 0.05} if fraction == 0.01 else {}
        cases.append(Case(
            f"{fraction:.1%} updated ({windows[i]:,} rows)",
            [Contestant("diff-scans", (lambda b=before, a=after: diff(b, a)), floor=True),  # type: ignore[misc]
             Contestant("tablestore", (lambda b=before, a=after: changelog(b, a)))],  # type: ignore[misc]
            rounds=rounds or 3,
            targets=targets,
        ))

    def cleanup() -> None:
        shutil.rmtree(directory, ignore_errors=True)

    rows: Any = base.metadata.current_snapshot().summary.get("total-records")
    return Benchmark(
        "changelog",
        f"changelog: the rows of one merge-on-read update of a {int(rows):,}-row v3 table, against diffing "
        "the two snapshots' full scans",
        cases,
        notes=[
            "floor diff-scans: both snapshots scanned whole, each row hashed from every column, +1/-1 counts per hash",
            "tablestore: table.changes(from, to, compute_updates=False).to_batches(), rows counted as they stream",
            "each update sets quantity = quantity + 1 on the events of a time window at the end of the 30 days "
            "(merge-on-read: deletion vectors on the touched files, the new rows appended)",
        ],
        cleanup=cleanup,
    )
