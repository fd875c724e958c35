"""A fanout write: N rows (10M by default) in arrival order into 1,000 partitions (issue 5).

Every batch of the input holds rows of nearly every partition, so a writer must keep many
partitions open at once. The input is generated batch by batch (100,000 rows each, from a
fixed seed) and streamed to the writer; nobody holds the whole input. Each contestant runs in
a process of its own so that its peak RSS (``resource.getrusage``) is its own.

Contestants:
- floor: ``pyarrow.dataset.write_dataset`` of the stream, hive-partitioned by ``p``;
- tablestore: ``Table.append(RecordBatchReader)`` on a table partitioned by ``p``: the fanout
  writer, with ``write.fanout.memory-budget-bytes`` at 128 MiB.

The notes report each contestant's peak RSS, its growth over its own RSS just before the write
(after imports, catalog setup and one discarded batch that initializes the generator: the
"pre-write baseline"), that growth against the budget, and the RSS of a process that only
generates the stream.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from bench.common import SEED, Benchmark, Case, Contestant, Workspace, parquet_bytes

PARTITIONS = 1_000
BATCH_ROWS = 100_000
BUDGET = 128 * 1024 * 1024
SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.int32()), ("ts", pa.timestamp("us")), ("value", pa.float64()),
                    ("label", pa.string())])


def stream(rows: int) -> Iterator[pa.RecordBatch]:
    rng = np.random.default_rng(SEED)
    labels = pa.array([f"label-{i:03d}" for i in range(64)])
    for start in range(0, rows, BATCH_ROWS):
        n = min(BATCH_ROWS, rows - start)
        yield pa.record_batch([
            pa.array(np.arange(start, start + n, dtype=np.int64)),
            pa.array(rng.integers(0, PARTITIONS, n, dtype=np.int32)),
            pa.array(1_700_000_000_000_000 + rng.integers(0, 86_400_000_000, n), pa.timestamp("us")),
            pa.array(rng.random(n)),
            labels.take(pa.array(rng.integers(0, 64, n))),
        ], schema=SCHEMA)


def _child(contestant: str, rows: int, directory: Path) -> dict[str, int]:
    """Run one contestant in this process; returns rows written and peak RSS."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    if contestant == "tablestore":
        import tablestore
    # The first batch initializes numpy's generator and Arrow's kernels (tens of MB, once per
    # process): generate one and drop it, so that the pre-write RSS below includes that.
    next(stream(BATCH_ROWS))
    reader = pa.RecordBatchReader.from_batches(SCHEMA, stream(rows))
    written = 0
    pre_write = _rss_kb()
    if contestant == "generate":
        written = sum(b.num_rows for b in reader)
    elif contestant == "pyarrow":
        import pyarrow.dataset as ds

        ds.write_dataset(reader, directory, format="parquet", partitioning=["p"], partitioning_flavor="hive",
                         max_open_files=PARTITIONS + 24, existing_data_behavior="overwrite_or_ignore")
        written = rows
    elif contestant == "tablestore":
        catalog = tablestore.load_catalog("bench", type="sql", uri=f"sqlite:///{directory}/catalog.db",
                                          warehouse=str(directory / "wh"))
        catalog.create_namespace("bench")
        table = catalog.create_table("bench.fanout", schema=SCHEMA, partition_by=["p"],
                                     properties={"write.fanout.memory-budget-bytes": str(BUDGET)})
        pre_write = _rss_kb()
        snapshot = table.append(reader)
        written = int(snapshot.summary["added-records"])
        catalog.close()
    else:
        raise SystemExit(f"unknown contestant {contestant}")
    files = sum(1 for _ in directory.rglob("*.parquet"))
    return {"rows": written, "max_rss_kb": _peak_rss_kb(),
            "pre_write_rss_kb": pre_write, "bytes": parquet_bytes(directory), "files": files}


def _peak_rss_kb() -> int:
    """This process's own peak RSS (VmHWM). getrusage's ru_maxrss would do on a fresh process, but
    Linux carries it across fork and exec, so a child of a big runner reports the runner's peak."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _rss_kb() -> int:
    """The RSS now (Linux), else the peak so far."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() // 1024
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _run_child(contestant: str, rows: int, directory: Path) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.fanout_write", contestant, str(rows), str(directory)],
        capture_output=True, text=True, check=False, cwd=Path(__file__).resolve().parent.parent,
    )
    if out.returncode != 0:
        raise RuntimeError(f"fanout_write {contestant} failed:\n{out.stderr[-3000:]}")
    result: dict[str, int] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def build(ws: Workspace, rounds: int | None = None) -> Benchmark:
    root = ws.root / "fanout_write"
    peaks: dict[str, list[int]] = {}
    over: dict[str, list[int]] = {}
    files: dict[str, int] = {}
    sizes: dict[str, int] = {}
    notes: list[str] = []

    def contestant(name: str, floor: bool = False) -> Contestant:
        def run() -> int:
            result = _run_child(name, ws.rows, root / name)
            peaks.setdefault(name, []).append(result["max_rss_kb"])
            over.setdefault(name, []).append(result["max_rss_kb"] - result["pre_write_rss_kb"])
            sizes[name] = result["bytes"]
            files[name] = result["files"]
            return result["rows"]

        return Contestant(name, run, floor=floor, written=lambda: sizes[name])

    baseline = _run_child("generate", ws.rows, root / "generate")["max_rss_kb"]

    def summarize() -> None:
        notes.append(f"peak RSS of a process that only generates the stream: {baseline / 1024:,.0f} MB")
        for name, values in peaks.items():
            peak, growth = max(values) / 1024, max(over[name]) / 1024
            notes.append(f"peak RSS {name}: {peak:,.0f} MB ({peak - baseline / 1024:,.0f} MB over generating; "
                         f"{growth:,.0f} MB over its own pre-write RSS"
                         + (f" = {growth / (BUDGET / 2**20):.2f}x the {BUDGET / 2**20:,.0f} MB budget"
                            if name == "tablestore" else "")
                         + f"); {files[name]:,} files")
        shutil.rmtree(root, ignore_errors=True)

    bench = Benchmark(
        "fanout_write",
        f"fanout_write: {ws.rows:,} rows in arrival order into {PARTITIONS:,} partitions, streamed in "
        f"{BATCH_ROWS:,}-row batches",
        [Case("fanout", [contestant("pyarrow", floor=True), contestant("tablestore")], rounds=rounds or 1)],
        notes=notes,
        cleanup=summarize,
    )
    notes.append("each contestant runs in its own process (seconds include its start; the cpu columns are the "
                 "parent's only); "
                 "write.fanout.memory-budget-bytes = 128 MiB")
    return bench


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]))))
