"""Run the benchmarks: ``python -m bench.run [--only NAME] [--rows N] [--rounds N]``.

``BENCH_CONTESTANTS=pyarrow,tablestore-spark`` runs only those contestants (and each case's
floor), e.g. one engine's at full scale; a name no case of a chosen benchmark has is refused.

Each benchmark prints one table (its contestants side by side, as ratios to the plain-pyarrow
floor) and appends its figures as JSON lines to ``bench/results/<name>.jsonl``.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from bench.common import DEFAULT_ROWS, Workspace, check_chosen, measure, report

# In running order: the scans read the table the append benchmark leaves behind.
BENCHMARKS = [
    "core_append",
    "core_scan",
    "spark_io",
    "sql_insert",
    "schema_evolution",
    "rest_catalog",
    "catalog_throughput",
    "row_level",
    "deletion_vectors",
    "partition_plan",
    "fanout_write",
    "column_merge",
    "maintenance",
    "changelog",
    "changelog_stream",
    "pipeline_changes",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--only", action="append", choices=BENCHMARKS, metavar="NAME",
                        help=f"run only this benchmark (repeatable): {', '.join(BENCHMARKS)}")
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS,
                        help=f"rows of data (default {DEFAULT_ROWS:,})")
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds per contestant (default: 3 for appends, 5 for scans)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="scratch directory (default: a fresh temporary one, removed afterwards)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    if args.rows <= 0:
        parser.error("--rows must be positive")

    console = Console()
    if not console.is_terminal and console.width < 140:
        console.width = 140  # a log file or a pipe: do not squeeze the tables into 80 columns
    names = [n for n in BENCHMARKS if not args.only or n in args.only]
    root = args.workdir or Path(tempfile.mkdtemp(prefix="tablestore-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    ws = Workspace(root, args.rows)
    started = time.perf_counter()

    def log(message: str) -> None:
        console.log(message, highlight=False)

    try:
        for name in names:
            module = importlib.import_module(f"bench.{name}")
            if hasattr(module, "run"):  # reports its own table (latency percentiles, not rows/s)
                module.run(root, args.rounds, console, log)
                continue
            log(f"{name}: preparing {args.rows:,} rows in {root}")
            bench = module.build(ws, args.rounds)
            try:
                check_chosen(bench)
                outcomes = [(case, measure(case, log)) for case in bench.cases]
            finally:
                if bench.cleanup is not None:
                    bench.cleanup()
            report(bench, outcomes, args.rows, console)
    finally:
        if args.keep or args.workdir is not None:
            log(f"scratch kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    log(f"done in {time.perf_counter() - started:.0f}s; figures appended to bench/results/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
