"""Maintenance: compaction of many small files, and a verified erasure end to end.

Cases:
- compaction: ``rows/10`` events (1M at the default 10M) written as ~10,000 small files (about
  333 per day partition of a table partitioned by day(event_ts)), then compacted with
  ``rewrite_data_files`` (min-input-files=2). Floor: plain pyarrow reading the same files and
  writing one file per partition. Figures: files/s and rows/s of the compaction (in the notes;
  the table's rows/s column divides the benchmark's ``--rows``).
- erasure: 100 subjects (user ids, ~10 rows each at 10M rows, in every partition) erased from
  the ``rows``-row table over 30 partitions with ``tablestore.erase`` (delete, rewrite, expire
  and remove orphans, verify every Parquet file). Floor: plain pyarrow reading every data file,
  dropping the subjects' rows and writing the rest to another directory. The parts' seconds
  are in the notes.

Both tables are written once (untimed) and kept as templates: every tablestore round starts
from a fresh copy of its template (the same absolute paths, so the catalog and metadata stay
valid), and the floors read the template's files. The 10,000 small files are written by
pyarrow (one ``write_dataset`` per partition, with the table's field ids) and registered from
their footers (``import_files``' metrics), which is much cheaper than 10,000 table writes.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import (
    DAYS,
    MICROS_PER_DAY,
    TABLE_NAME,
    Benchmark,
    Case,
    Contestant,
    Workspace,
    create_tablestore_table,
    tablestore_catalog,
)

SMALL_FILES = 10_000
SUBJECTS = 100


class _Template:
    """A table written once at ``live`` and copied aside; ``fresh()`` puts a pristine copy back."""

    def __init__(self, live: Path, write: Any) -> None:
        self.live, self.saved, self._write = live, live.with_name(live.name + "-template"), write
        self.paths: list[str] = []

    def ensure(self) -> None:
        if self.saved.exists() and self.paths:
            return
        for path in (self.live, self.saved):
            if path.exists():
                shutil.rmtree(path)
        table = self._write(create_tablestore_table(self.live))
        live_paths = [t.file.file_path for t in table.scan().plan_files()]
        shutil.copytree(self.live, self.saved)
        prefix = str(self.live)
        self.paths = [str(self.saved) + p.removeprefix("file://").removeprefix(prefix) for p in live_paths]

    def fresh(self) -> None:
        self.ensure()
        if self.live.exists():
            shutil.rmtree(self.live)
        shutil.copytree(self.saved, self.live)

    def cleanup(self) -> None:
        for path in (self.live, self.saved):
            shutil.rmtree(path, ignore_errors=True)


def build(ws: Workspace, rounds: int | None = None) -> Benchmark:
    compaction_rows = max(SMALL_FILES, ws.rows // 10)
    small = ws.data.slice(0, compaction_rows)
    measured: dict[str, Any] = {}
    parts: dict[str, float] = {}

    def write_small(table: Any) -> Any:
        """SMALL_FILES files written by pyarrow (with the table's field ids), registered by footer."""
        import pyarrow.dataset as ds

        from tablestore.table.ops.import_files import FileToRegister, data_files_for

        rows = small.take(pc.sort_indices(small, sort_keys=[("event_ts", "ascending")]))
        day_of_row = (rows.column("event_ts").cast(pa.int64()).to_numpy() // MICROS_PER_DAY).astype(np.int64)
        days, starts = np.unique(day_of_row, return_index=True)
        bounds = [*starts.tolist(), rows.num_rows]
        arrow_schema = table.schema().as_arrow()
        spec, schema, data_dir = table.spec(), table.schema(), table.write_context().data_location
        todo = []
        for i, day in enumerate(days.tolist()):
            part = rows.slice(bounds[i], bounds[i + 1] - bounds[i]).cast(arrow_schema)
            count = SMALL_FILES // len(days) + (1 if i < SMALL_FILES % len(days) else 0)
            per_file = -(-part.num_rows // count)
            directory = f"{data_dir}/{spec.partition_path((day,), schema)}".removeprefix("file://")
            # One C++ call per partition writes its files (max_rows_per_file), threads and all.
            ds.write_dataset(part, directory, format="parquet", basename_template="small-{i}.parquet",
                             max_rows_per_file=per_file, max_rows_per_group=per_file,
                             existing_data_behavior="overwrite_or_ignore")
            for entry in Path(directory).iterdir():
                todo.append(FileToRegister(str(entry), entry.stat().st_size, (day,)))
        files = data_files_for(table, todo)
        table.append_files(files)
        measured["small_files"] = len(files)
        return table

    compaction = _Template(ws.root / "maint-compaction", write_small)

    def compact() -> int:
        table = tablestore_catalog(compaction.live).load_table(TABLE_NAME)
        started, cpu = time.perf_counter(), time.process_time()
        result = table.maintenance().rewrite_data_files(options={"min-input-files": 2})
        measured["compact_s"] = time.perf_counter() - started
        measured["compact_cpu_s"] = time.process_time() - cpu
        measured["compacted_files"] = result.rewritten_data_files_count
        measured["added_files"] = result.added_data_files_count
        return int(table.refresh().scan().count())

    def compact_floor() -> int:
        data = pq.ParquetDataset(compaction.paths).read()
        days = pc.floor_temporal(data.column("event_ts"), unit="day")
        out = ws.root / "maint-compaction-floor"
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
    probe = pa.array(subjects, pa.int64())

    def write_all(table: Any) -> Any:
        table.append(ws.data)
        return table

    erasure = _Template(ws.root / "maint-erasure", write_all)

    def erase() -> int:
        from tablestore.maintenance.erasure import erase as erase_subjects

        catalog = tablestore_catalog(erasure.live)
        report = erase_subjects(catalog, TABLE_NAME, "user_id", "bench", values=subjects)
        assert report.verified
        parts.clear()
        parts.update(report.timings_s)
        measured["erased_rows"] = report.rows_removed
        measured["erased_files_rewritten"] = report.files_rewritten
        measured["erased_files_removed"] = report.files_removed
        return int(catalog.load_table(TABLE_NAME).scan().count())

    def erase_floor() -> int:
        out = ws.root / "maint-erasure-floor"
        out.mkdir(exist_ok=True)
        kept = 0
        for i, path in enumerate(erasure.paths):
            data = pq.read_table(path)
            rest = data.filter(pc.invert(pc.is_in(data.column("user_id"), value_set=probe)))
            pq.write_table(rest, out / f"{i}.parquet")
            kept += rest.num_rows
        shutil.rmtree(out)
        return kept

    def notes() -> list[str]:
        out = []
        if "compact_s" in measured:
            s = measured["compact_s"]
            out.append(
                f"compaction: {compaction_rows:,} rows in {measured.get('small_files', 0):,} files -> "
                f"{measured['added_files']} files; rewrite_data_files {s:.2f}s (cpu {measured['compact_cpu_s']:.2f}s): "
                f"{measured['compacted_files'] / s:,.0f} files/s, {compaction_rows / s:,.0f} rows/s "
                "(the table's seconds add reopening the table and counting the rows)")
        if parts:
            shown = ", ".join(f"{k} {v:.2f}s" for k, v in parts.items())
            out.append(f"erasure: {SUBJECTS} subjects ({measured['erased_rows']:,} rows) from {ws.rows:,} rows in "
                       f"{DAYS} partitions; {measured['erased_files_rewritten']} files rewritten, "
                       f"{measured['erased_files_removed']} removed; parts of the last round: {shown}")
        return out

    def cleanup() -> None:
        compaction.cleanup()
        erasure.cleanup()

    bench = Benchmark(
        "maintenance",
        f"maintenance: compaction of {SMALL_FILES:,} small files; erasure of {SUBJECTS} subjects",
        [
            Case("compaction", [
                Contestant("pyarrow", compact_floor, setup=compaction.ensure, floor=True),
                Contestant("tablestore", compact, setup=compaction.fresh),
            ], rounds=rounds or 1),
            Case("erasure", [
                Contestant("pyarrow", erase_floor, setup=erasure.ensure, floor=True),
                Contestant("tablestore", erase, setup=erasure.fresh),
            ], rounds=rounds or 1),
        ],
        cleanup=cleanup,
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
