"""Maintenance: compaction of many small files, and a verified erasure end to end.

Cases:
- compaction: ``rows/10`` events (1M at the default 10M) written as 10,000 small files of a
  table partitioned by day(event_ts), then compacted with ``rewrite_data_files``
  (min-input-files=2). Floor: plain pyarrow reading the same files and writing one file per
  partition. Figures: files/s and rows/s.
- erasure: 100 subjects (user ids) erased from the ``rows``-row table over 30 partitions with
  ``tablestore.erase`` (delete, rewrite, expire, remove orphans, verify every Parquet file).
  Floor: plain pyarrow reading every data file, dropping the subjects' rows and writing the
  rest back. The parts' seconds are printed in the notes.

Each round starts from a freshly written table (untimed setup).
"""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import TABLE_NAME, Benchmark, Case, Contestant, Workspace, create_tablestore_table, tablestore_catalog

SMALL_FILES = 10_000
SUBJECTS = 100


def build(ws: Workspace, rounds: int | None = None) -> Benchmark:
    compaction_rows = max(SMALL_FILES, ws.rows // 10)
    small = ws.data.slice(0, compaction_rows)
    small = small.take(pc.sort_indices(small, sort_keys=[("event_ts", "ascending")]))
    chunk = max(1, compaction_rows // SMALL_FILES)
    state: dict[str, Any] = {}
    parts: dict[str, float] = {}

    def small_files_table() -> None:
        directory = ws.fresh("maint-compaction")
        table = create_tablestore_table(directory)
        files = []
        for start in range(0, small.num_rows, chunk):
            files.extend(table.write_files(small.slice(start, chunk)))
        table.append_files(files)
        state["table"] = table
        state["paths"] = [t.file.file_path for t in table.scan().plan_files()]
        state["dir"] = directory

    def compact() -> int:
        table = state["table"]
        result = table.maintenance().rewrite_data_files(options={"min-input-files": 2})
        state["files"] = result.rewritten_data_files_count
        return int(table.refresh().scan().count())

    def compact_floor() -> int:
        data = pq.ParquetDataset(state["paths"]).read()
        days = pc.floor_temporal(data.column("event_ts"), unit="day")
        out = state["dir"] / "floor"
        out.mkdir(exist_ok=True)
        total = 0
        for i, day in enumerate(pc.unique(days).to_pylist()):
            part = data.filter(pc.equal(days, pa.scalar(day, days.type)))
            pq.write_table(part, out / f"{i}.parquet")
            total += part.num_rows
        shutil.rmtree(out)
        return total

    user_ids = ws.data.column("user_id").to_numpy()
    subjects = [int(v) for v in np.random.default_rng(7).choice(np.unique(user_ids), SUBJECTS, replace=False)]

    def erasure_table() -> None:
        directory = ws.fresh("maint-erasure")
        table = create_tablestore_table(directory)
        table.append(ws.data)
        state["etable"], state["edir"] = table, directory
        state["epaths"] = [t.file.file_path for t in table.scan().plan_files()]

    def erase() -> int:
        import tablestore

        catalog = tablestore_catalog(state["edir"])
        report = tablestore.erase(catalog, TABLE_NAME, "user_id", "bench", values=subjects)
        assert report.verified
        for name, seconds in report.timings_s.items():
            parts[name] = seconds
        return int(catalog.load_table(TABLE_NAME).scan().count())

    def erase_floor() -> int:
        kept = 0
        probe = pa.array(subjects, pa.int64())
        for path in state["epaths"]:
            data = pq.read_table(path)
            rest = data.filter(pc.invert(pc.is_in(data.column("user_id"), value_set=probe)))
            pq.write_table(rest, path + ".floor.parquet")
            kept += rest.num_rows
        return kept

    def notes() -> list[str]:
        shown = ", ".join(f"{k} {v:.2f}s" for k, v in parts.items())
        return [f"compaction: {compaction_rows:,} rows in ~{SMALL_FILES:,} files; rows/s counts rows compacted",
                f"erasure: {SUBJECTS} subjects from {ws.rows:,} rows; parts of the last round: {shown}"]

    bench = Benchmark(
        "maintenance",
        f"maintenance: compaction of {SMALL_FILES:,} small files; erasure of {SUBJECTS} subjects",
        [
            Case("compaction", [
                Contestant("pyarrow", compact_floor, setup=small_files_table, floor=True),
                Contestant("tablestore", compact, setup=small_files_table),
            ], rounds=rounds or 1),
            Case("erasure", [
                Contestant("pyarrow", erase_floor, setup=erasure_table, floor=True),
                Contestant("tablestore", erase, setup=erasure_table),
            ], rounds=rounds or 1),
        ],
        cleanup=lambda: [shutil.rmtree(ws.root / n, ignore_errors=True) for n in ("maint-compaction",
                                                                                   "maint-erasure")] and None,
    )
    bench.notes = _LazyNotes(notes)
    return bench


class _LazyNotes(list[str]):
    """Notes filled in when the report prints them (the parts are known only after the runs)."""

    def __init__(self, make: Any) -> None:
        super().__init__()
        self._make = make

    def __iter__(self) -> Any:
        return iter(self._make())

    def __len__(self) -> int:
        return len(self._make())
