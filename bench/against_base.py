"""A change against its base commit, in one run: ``python -m bench.against_base [--base REV]``.

Runs benchmarks of ``bench.run`` (by default ``core_append`` and ``core_scan``) for the base
commit (where this checkout's branch left ``main``, unless ``--base`` names another) and for
this checkout, alternating whole runs (before, after, after, before, ...), each in a process of
its own that imports the code of its checkout. The base is a detached git worktree in a
temporary directory, removed at the end; both sides use this interpreter, so the same packages.
Each run appends its JSON lines to its own checkout's ``bench/results/``; this script reads the
lines each run added and prints, per case, tablestore's ratio to the floor (seconds and CPU) for
every run, their medians per side and after/before. Ratios to a floor that runs interleaved in
the same process cancel most of what other work on the machine does; compare those, not seconds.

    python -m bench.against_base --rows 1000000 --runs 4 -- --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # this checkout


@contextmanager
def base_checkout(rev: str, given: Path | None = None) -> Iterator[Path]:
    """A checkout of ``rev``: ``given`` when set, else a detached worktree removed afterwards."""
    if given is not None:
        yield given
        return
    root = Path(tempfile.mkdtemp(prefix="tablestore-base-"))
    path = root / "base"
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(path), rev], cwd=HERE, check=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=HERE, check=False)
        shutil.rmtree(root, ignore_errors=True)


def merge_base() -> str:
    """Where this checkout's branch left ``main``: the base its change is measured against."""
    out = subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=HERE, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def short_commit(checkout: Path) -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True,
                         check=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=checkout,
                           capture_output=True, text=True, check=True).stdout.strip()
    return out.stdout.strip() + ("+changes" if dirty else "")


def checkout_env(checkout: Path) -> dict[str, str]:
    """The environment of a process that imports ``tablestore`` (and ``bench``) from ``checkout``."""
    return {**os.environ, "PYTHONPATH": str(checkout)}


def alternating(runs: int) -> list[str]:
    """before, after, after, before, before, after, ...: each side first as often as the other."""
    pattern = ["before", "after", "after", "before"]
    return [pattern[i % 4] for i in range(runs)]


def _results(checkout: Path, names: list[str]) -> dict[str, int]:
    out = {}
    for name in names:
        path = checkout / "bench" / "results" / f"{name}.jsonl"
        out[name] = len(path.read_text().splitlines()) if path.exists() else 0
    return out


def _new_lines(checkout: Path, names: list[str], seen: dict[str, int]) -> list[dict[str, object]]:
    lines: list[dict[str, object]] = []
    for name in names:
        path = checkout / "bench" / "results" / f"{name}.jsonl"
        if path.exists():
            lines.extend(json.loads(line) for line in path.read_text().splitlines()[seen[name]:])
    return lines


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console
    from rich.table import Table

    parser = argparse.ArgumentParser(prog="python -m bench.against_base", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default=None,
                        help="the base revision (default: where this checkout's branch left main)")
    parser.add_argument("--base-dir", type=Path, default=None, help="an existing checkout of the base instead")
    parser.add_argument("--only", action="append", default=None, metavar="NAME",
                        help="a benchmark of bench.run (repeatable; default core_append and core_scan)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of data (default 1,000,000)")
    parser.add_argument("--runs", type=int, default=4, help="whole runs, alternating sides (default 4)")
    parser.add_argument("rest", nargs="*", help="after --: more arguments of bench.run (e.g. --rounds 3)")
    args = parser.parse_args(argv)
    names = args.only or ["core_append", "core_scan"]
    console = Console()
    if not console.is_terminal and console.width < 140:
        console.width = 140

    figures: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    with base_checkout(args.base or merge_base(), args.base_dir) as base:
        sides = {"before": base, "after": HERE}
        commits = {side: short_commit(path) for side, path in sides.items()}
        for number, side in enumerate(alternating(args.runs), 1):
            checkout = sides[side]
            seen = _results(checkout, names)
            workdir = Path(tempfile.mkdtemp(prefix="tablestore-bench-"))
            command = [sys.executable, "-m", "bench.run", "--rows", str(args.rows), "--workdir", str(workdir),
                       *(a for n in names for a in ("--only", n)), *args.rest]
            console.log(f"run {number} ({side}, {commits[side]}): {' '.join(command[1:])}", highlight=False)
            try:
                subprocess.run(command, cwd=checkout, env=checkout_env(checkout), check=True)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            for line in _new_lines(checkout, names, seen):
                if line["contestant"] == "tablestore":
                    key = (str(line["benchmark"]), str(line["case"]), side)
                    figures.setdefault(key, []).append((float(line["ratio_to_floor"]),  # type: ignore[arg-type]
                                                        float(line["cpu_ratio_to_floor"])))  # type: ignore[arg-type]

    table = Table(title=f"tablestore x floor: before {commits['before']}, after {commits['after']}, "
                        f"{args.rows:,} rows, runs in the order {', '.join(alternating(args.runs))}",
                  title_justify="left")
    for column in ("benchmark", "case", "before, per run", "after, per run", "before (median)", "after (median)",
                   "after / before", "cpu: before", "cpu: after", "cpu: after / before"):
        table.add_column(column, justify="left" if column in ("benchmark", "case") else "right")
    cases = sorted({(b, c) for b, c, _ in figures}, key=lambda k: (names.index(k[0]), k[1]))
    for bench_name, case in cases:
        before = figures.get((bench_name, case, "before"), [])
        after = figures.get((bench_name, case, "after"), [])
        if not before or not after:
            continue
        wall_b, wall_a = statistics.median(r for r, _ in before), statistics.median(r for r, _ in after)
        cpu_b, cpu_a = statistics.median(c for _, c in before), statistics.median(c for _, c in after)
        table.add_row(bench_name, case, " ".join(f"{r:.2f}" for r, _ in before),
                      " ".join(f"{r:.2f}" for r, _ in after), f"{wall_b:.2f}", f"{wall_a:.2f}",
                      f"{wall_a / wall_b:.2f}", f"{cpu_b:.2f}", f"{cpu_a:.2f}", f"{cpu_a / cpu_b:.2f}")
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
