"""Where an append's time goes: run ``core_append``'s append under a sampling profiler, then
fold the samples into the append's phases (docs/benchmarks.md, issue 32).

    py-spy record --threads --format raw -r 250 -o append.raw -- \\
        .venv/bin/python -m bench.profile_append run --rows 2000000 --appends 8
    .venv/bin/python -m bench.profile_append phases append.raw

``run`` appends the benchmark's events ``--appends`` times, each into a fresh table (after one
small untimed append that loads the code paths). ``phases`` reads py-spy's raw (collapsed
stack) output and prints each phase's share of the samples of the append's threads, leaving
out the main thread's waits for its write tasks.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import tempfile
import time
from pathlib import Path

from bench.common import create_tablestore_table, generate_events

# (phase, a frame that marks it): the first phase whose frame is on a sample's stack takes it.
PHASES = [
    ("dictionary check (dictionary_columns)", "dictionary_columns"),
    ("metrics from the Parquet footer", "collect_metrics"),
    ("metrics from the Parquet footer", "float_nan_counts"),
    ("Parquet encoding (ParquetWriter)", "ParquetWriter"),
    ("gather a partition's rows (take)", "PartitionSlice.rows"),
    ("split by partition", "split_by_partition"),
    ("conform", "conform_to_schema"),
    ("manifests and manifest list", "write_manifest"),
    ("catalog commit", "commit_table"),
    ("other commit work", "commit_snapshot"),
    ("other write-task work", "write_partition"),
]


def run(rows: int, appends: int) -> None:
    data = generate_events(rows)
    root = Path(tempfile.mkdtemp(prefix="profile-append-"))
    try:
        create_tablestore_table(root / "warm-up").append(data.slice(0, 100_000))
        for i in range(appends):
            table = create_tablestore_table(root / f"t{i}")
            started = time.perf_counter()
            table.append(data)
            print(f"append {i + 1}: {time.perf_counter() - started:.3f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def phases(raw: Path) -> dict[str, int]:
    """Samples per phase from py-spy's raw output (one ``frame;frame;... count`` per line)."""
    counts: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if "Table.append" not in stack and "write_partition" not in stack:
            continue  # not the append's (data generation, imports)
        if "Condition.wait" in stack and "result_iterator" in stack:
            continue  # the main thread waiting for its write tasks
        label = next((label for label, frame in PHASES if frame in stack), "other")
        counts[label] += int(n)
    return dict(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="append the events, to be sampled by a profiler")
    run_parser.add_argument("--rows", type=int, default=2_000_000)
    run_parser.add_argument("--appends", type=int, default=8)
    phases_parser = commands.add_parser("phases", help="fold py-spy's raw samples into the append's phases")
    phases_parser.add_argument("raw", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        run(args.rows, args.appends)
        return
    counts = phases(args.raw)
    total = sum(counts.values()) or 1
    for label, n in sorted(counts.items(), key=lambda item: -item[1]):
        print(f"| {label} | {100 * n / total:.1f}% |")
    print(f"samples: {total}")


if __name__ == "__main__":
    main()
