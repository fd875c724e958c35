"""What the benchmarks share: the deterministic event data, the workspace, timing and reporting.

Every benchmark runs its contestants side by side in one process, interleaved round by round,
and reports the median of the rounds as seconds, rows per second and the ratio to the floor
(plain pyarrow doing the same work). Ratios, not seconds, are what to compare across runs:
this machine is small and noisy.
"""

from __future__ import annotations

import datetime
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DEFAULT_ROWS = 10_000_000
SEED = 20240101
DAYS = 30
START = datetime.datetime(2024, 1, 1)
NAMESPACE = "bench"
TABLE_NAME = "bench.events"
MICROS_PER_DAY = 86_400_000_000

COUNTRIES = ["us", "de", "gb", "fr", "in", "br", "jp", "ca", "au", "es",
             "it", "nl", "mx", "kr", "se", "pl", "ch", "ar", "za", "ie"]
EVENT_TYPES = ["view", "click", "search", "add_to_cart", "remove_from_cart", "checkout", "purchase", "refund"]
DEVICES = ["ios", "android", "web", "desktop", "tv"]

SCHEMA = pa.schema([
    ("event_id", pa.int64()),
    ("event_ts", pa.timestamp("us")),
    ("user_id", pa.int64()),
    ("country", pa.string()),
    ("event_type", pa.string()),
    ("quantity", pa.int32()),
    ("price", pa.float32()),
    ("amount", pa.decimal128(10, 2)),
    ("device", pa.string()),
    ("flag", pa.bool_()),
])


def _skewed(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """Indices in [0, k) with a Zipf-like skew (a few frequent values, a long tail)."""
    weights = 1.0 / np.arange(1, k + 1)
    return rng.choice(k, size=n, p=weights / weights.sum()).astype(np.int32)


def _strings(indices: np.ndarray, values: list[str]) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(indices), pa.array(values)).dictionary_decode()


def generate_events(rows: int, seed: int = SEED) -> pa.Table:
    """``rows`` events over 30 days, in arrival order (not sorted by time), the same for a seed."""
    rng = np.random.default_rng(seed)
    start_us = int((START - datetime.datetime(1970, 1, 1)).total_seconds()) * 1_000_000
    ts = start_us + rng.integers(0, DAYS * MICROS_PER_DAY, size=rows, dtype=np.int64)
    quantity = rng.integers(1, 10, size=rows, dtype=np.int32)
    price_cents = rng.integers(50, 50_000, size=rows, dtype=np.int64)
    amount_cents = price_cents * quantity
    # decimal128 values are 16-byte little-endian two's complement; every amount is positive.
    dec = np.zeros((rows, 2), dtype=np.int64)
    dec[:, 0] = amount_cents
    amount = pa.Array.from_buffers(pa.decimal128(10, 2), rows, [None, pa.py_buffer(dec.tobytes())])
    return pa.Table.from_arrays(
        [
            pa.array(np.arange(1, rows + 1, dtype=np.int64)),
            pa.array(ts, pa.timestamp("us")),
            pa.array(rng.integers(1, 1_000_001, size=rows, dtype=np.int64)),
            _strings(_skewed(rng, rows, len(COUNTRIES)), COUNTRIES),
            _strings(_skewed(rng, rows, len(EVENT_TYPES)), EVENT_TYPES),
            pa.array(quantity),
            pa.array((price_cents / 100).astype(np.float32)),
            amount,
            _strings(_skewed(rng, rows, len(DEVICES)), DEVICES),
            pa.array(rng.random(rows) < 0.1),
        ],
        schema=SCHEMA,
    )


# -- workspace -----------------------------------------------------------------------------------


@dataclass
class Workspace:
    """A scratch directory shared by the benchmarks of one run (the append leaves its table)."""

    root: Path
    rows: int
    _data: pa.Table | None = None

    @property
    def data(self) -> pa.Table:
        if self._data is None:
            self._data = generate_events(self.rows)
        return self._data

    def fresh(self, name: str) -> Path:
        path = self.root / name
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path

    @property
    def shared_table_dir(self) -> Path:
        """Where the tablestore table that the scans read lives."""
        return self.root / "shared"


def parquet_bytes(directory: Path) -> int:
    """Bytes of the Parquet files under a directory (data only, not metadata)."""
    return sum(p.stat().st_size for p in directory.rglob("*.parquet"))


def tablestore_catalog(directory: Path) -> Any:
    import tablestore

    return tablestore.load_catalog("bench", type="sql", uri=f"sqlite:///{directory}/catalog.db",
                                   warehouse=str(directory / "wh"))


def create_tablestore_table(directory: Path) -> Any:
    directory.mkdir(parents=True, exist_ok=True)
    catalog = tablestore_catalog(directory)
    catalog.create_namespace(NAMESPACE)
    return catalog.create_table(TABLE_NAME, schema=SCHEMA, partition_by=["day(event_ts)"])


def shared_table(ws: Workspace) -> Any:
    """The tablestore table holding the workspace's events, written once per run if missing."""
    directory = ws.shared_table_dir
    if (directory / "catalog.db").exists():
        return tablestore_catalog(directory).load_table(TABLE_NAME)
    if directory.exists():
        shutil.rmtree(directory)
    table = create_tablestore_table(directory)
    table.append(ws.data)
    return table


# -- timing and reporting ------------------------------------------------------------------------


@dataclass
class Contestant:
    name: str
    run: Callable[[], int]  # does the work once; returns the rows it wrote or read
    setup: Callable[[], None] | None = None  # untimed, before every round (e.g. a fresh directory)
    floor: bool = False
    written: Callable[[], int] | None = None  # untimed, after a round: the bytes of data it wrote
    targets: dict[str, float] | None = None  # this contestant's own targets, instead of the case's
    # Stop a round after this many seconds (SIGALRM); the round then counts as at least the cap.
    cap_seconds: float | None = None


class CapReached(Exception):
    """A capped contestant ran out of time."""


@dataclass
class Measurement:
    contestant: Contestant
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)
    rows: int = 0
    bytes_written: int | None = None
    rss_growth: list[int] = field(default_factory=list)  # peak RSS of the process tree minus its start
    capped: bool = False  # a round reached the cap: the seconds are lower bounds

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu_seconds)

    @property
    def peak_rss_growth(self) -> int:
        return max(self.rss_growth, default=0)

    def seconds_text(self, value: float) -> str:
        return f">={value:.2f}" if self.capped else f"{value:.2f}"


@dataclass
class Case:
    """One side-by-side comparison: the same work done by every contestant."""

    name: str
    contestants: list[Contestant]
    rounds: int = 3
    # contestant -> target: for the floor, the most tablestore may take as a ratio of it; for
    # the others, how many times faster than them tablestore must be.
    targets: dict[str, float] = field(default_factory=dict)
    # (a, b, limit): contestant a may take at most ``limit`` times contestant b's median
    # (two tablestore variants against each other, e.g. deletion vectors against position deletes).
    relative: list[tuple[str, str, float]] = field(default_factory=list)


@dataclass
class Benchmark:
    """What a bench module builds: its cases, printed together as one table."""

    name: str
    title: str
    cases: list[Case]
    notes: list[str] = field(default_factory=list)
    cleanup: Callable[[], None] | None = None  # frees the benchmark's scratch files afterwards


class ProcessTreeCPU:
    """CPU seconds of this process and every descendant (Spark's JVM and its Python workers, a
    catalog service started as a child) over a span: the work a contestant costs, whoever does
    it. ``process_time`` alone misses everything outside the driver. Descendants can exit
    mid-span (Spark's Python workers do), taking their CPU with them, so a sampler thread notes
    every process's CPU while it lives and the span counts each process's last figure. Reaped
    children's ``children_*`` times are left out: they would count a sampled child twice; a
    process living less than one interval is missed."""

    def __init__(self, interval: float = 0.1) -> None:
        import psutil

        self._psutil = psutil
        self._interval = interval
        self._rss = 0
        self._start = self._snapshot()
        self.rss_start = self._rss
        self.rss_peak = self._rss
        self._last = dict(self._start)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _snapshot(self) -> dict[tuple[int, float], float]:
        me = self._psutil.Process()
        seen: dict[tuple[int, float], float] = {}
        rss = 0
        for process in (me, *me.children(recursive=True)):
            try:
                # (pid, start time) names a process even if its pid is reused.
                times, created = process.cpu_times(), process.create_time()
                rss += process.memory_info().rss
            except (self._psutil.NoSuchProcess, self._psutil.ZombieProcess, self._psutil.AccessDenied):
                continue
            seen[(process.pid, created)] = times.user + times.system
        self._rss = rss
        if hasattr(self, "rss_peak"):
            self.rss_peak = max(self.rss_peak, rss)
        return seen

    def _sample(self) -> None:
        while not self._stop.wait(self._interval):
            self._last.update(self._snapshot())

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        self._last.update(self._snapshot())
        return sum(cpu - self._start.get(key, 0.0) for key, cpu in self._last.items())


CONTESTANTS_VARIABLE = "BENCH_CONTESTANTS"


def chosen_contestants() -> set[str] | None:
    """The contestants named in ``BENCH_CONTESTANTS`` (comma-separated, e.g.
    ``pyarrow,tablestore-spark``), or None (all) when it is unset or empty. A case's floor
    always runs: every ratio is to it."""
    names = {n.strip() for n in os.environ.get(CONTESTANTS_VARIABLE, "").split(",") if n.strip()}
    return names or None


def check_chosen(bench: Benchmark) -> None:
    """Refuse a ``BENCH_CONTESTANTS`` name that no case of ``bench`` has (a typo would
    otherwise run nothing but the floors)."""
    chosen = chosen_contestants()
    known = {c.name for case in bench.cases for c in case.contestants}
    unknown = sorted((chosen or set()) - known)
    if unknown:
        raise SystemExit(f"{CONTESTANTS_VARIABLE} names {', '.join(unknown)}, which {bench.name} does not have; "
                         f"its contestants are {', '.join(sorted(known))}")


def measure(case: Case, log: Callable[[str], None]) -> list[Measurement]:
    """Run every contestant ``rounds`` times, interleaved (A B C, C B A, ...) so drift hits all.
    Only the floor and the contestants ``BENCH_CONTESTANTS`` names, when it is set."""
    chosen = chosen_contestants()
    results = [Measurement(c) for c in case.contestants if chosen is None or c.floor or c.name in chosen]
    for round_no in range(case.rounds):
        order = results if round_no % 2 == 0 else list(reversed(results))
        for m in order:
            if m.capped:
                continue  # one round at the cap bounds the contestant; more would only repeat it
            if m.contestant.setup is not None:
                m.contestant.setup()
            gc.collect()
            # Freed memory back to the system first, so a round's RSS growth is its own, not
            # hidden by pages an earlier contestant left in the allocators.
            release_memory()
            started, cpu_span = time.perf_counter(), ProcessTreeCPU()
            rows = _run_capped(m.contestant)
            elapsed, cpu = time.perf_counter() - started, cpu_span.stop()
            if rows is None:
                m.capped = True
            elif m.seconds and not m.capped and rows != m.rows:
                raise AssertionError(f"{case.name}/{m.contestant.name}: {rows} rows, earlier {m.rows}")
            else:
                m.rows = rows
            m.seconds.append(elapsed)
            m.cpu_seconds.append(cpu)
            m.rss_growth.append(cpu_span.rss_peak - cpu_span.rss_start)
            if m.contestant.written is not None:
                m.bytes_written = m.contestant.written()
            log(f"{case.name} round {round_no + 1}/{case.rounds}: {m.contestant.name} "
                f"{'stopped at the cap after ' if rows is None else ''}{elapsed:.2f}s "
                f"(cpu {cpu:.2f}s, peak RSS +{m.rss_growth[-1] / 2**20:,.0f} MB, load {os.getloadavg()[0]:.1f})")
    counts = {m.contestant.name: m.rows for m in results if not m.capped}
    if len(set(counts.values())) != 1:
        raise AssertionError(f"{case.name}: the contestants disagree on the row count: {counts}")
    return results


def release_memory() -> None:
    from tablestore.table.write.writers import release_memory as release

    release()


def _run_capped(contestant: Contestant) -> int | None:
    """The contestant's rows, or None when it reached its cap (the timer interrupts it)."""
    if contestant.cap_seconds is None:
        return contestant.run()
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise CapReached()

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, contestant.cap_seconds)
    try:
        return contestant.run()
    except CapReached:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parent, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _verdicts(case: Case, results: list[Measurement]) -> list[str]:
    out = []
    # Every tablestore contestant ("tablestore", "tablestore-<variant>") is held to the targets.
    for ours in (m for m in results if m.contestant.name.split("-", 1)[0] == "tablestore"):
        name = ours.contestant.name
        limits = ours.contestant.targets if ours.contestant.targets is not None else case.targets
        for other, limit in limits.items():
            theirs = next((m for m in results if m.contestant.name == other), None)
            if theirs is None:
                continue  # not run (BENCH_CONTESTANTS)
            if theirs.contestant.floor:
                ratio = ours.median / theirs.median
                verdict = "met" if ratio <= limit else "MISSED"
                out.append(f"{case.name}: {name} / {other} = {ratio:.2f} (target <= {limit}): {verdict}")
            else:
                speedup = theirs.median / ours.median
                verdict = "met" if speedup >= limit else ("not shown: stopped at the cap" if theirs.capped
                                                          else "MISSED")
                bound = ">=" if theirs.capped else ""
                out.append(f"{case.name}: {other} / {name} = {bound}{speedup:.2f}x (target >= {limit}x): {verdict}")
    by_name = {m.contestant.name: m for m in results}
    for a, b, limit in case.relative:
        if a not in by_name or b not in by_name:
            continue
        ratio = by_name[a].median / by_name[b].median
        cpu = by_name[a].cpu_median / by_name[b].cpu_median
        verdict = "met" if ratio <= limit else "MISSED"
        out.append(f"{case.name}: {a} / {b} = {ratio:.2f} (cpu {cpu:.2f}; target <= {limit}): {verdict}")
    return out


def report(bench: Benchmark, outcomes: list[tuple[Case, list[Measurement]]], rows: int, console: Any) -> None:
    """Print one table for the benchmark and append one JSON line per contestant and case."""
    from rich.table import Table

    table = Table(title=bench.title, title_justify="left")
    table.add_column("case")
    table.add_column("contestant")
    table.add_column("seconds", justify="right")
    table.add_column("rows/s", justify="right")
    table.add_column("x floor", justify="right")
    table.add_column("rounds (s)", justify="right")
    table.add_column("cpu s", justify="right")
    table.add_column("cpu x floor", justify="right")
    table.add_column("rows out", justify="right")
    table.add_column("peak RSS +MB", justify="right")
    sizes = any(m.bytes_written is not None for _, results in outcomes for m in results)
    if sizes:
        table.add_column("MB written", justify="right")
    verdicts: list[str] = []
    for index, (case, results) in enumerate(outcomes):
        floor = next(m for m in results if m.contestant.floor)
        for position, m in enumerate(results):
            cells = [
                case.name if position == 0 else "",
                m.contestant.name + (" (floor)" if m.contestant.floor else ""),
                m.seconds_text(m.median),
                f"{rows / m.median:,.0f}",
                m.seconds_text(m.median / floor.median),
                " ".join(m.seconds_text(s) for s in m.seconds),
                f"{m.cpu_median:.2f}",
                f"{m.cpu_median / floor.cpu_median:.2f}",
                "(stopped)" if m.capped else f"{m.rows:,}",
                f"{m.peak_rss_growth / 2**20:,.0f}",
            ]
            if sizes:
                cells.append(f"{m.bytes_written / 1e6:,.1f}" if m.bytes_written is not None else "")
            table.add_row(*cells, end_section=position == len(results) - 1 and index < len(outcomes) - 1)
        verdicts.extend(_verdicts(case, results))
    notes = [*bench.notes, *verdicts]
    if notes:
        table.caption = "\n".join(notes)
        table.caption_justify = "left"
    console.print(table)
    console.print()

    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    common = {
        "benchmark": bench.name,
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": _git_commit(),
        "rows": rows,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
    }
    with (RESULTS_DIR / f"{bench.name}.jsonl").open("a", encoding="utf-8") as out:
        for case, results in outcomes:
            floor = next(m for m in results if m.contestant.floor)
            for m in results:
                line = {
                    **common,
                    "case": case.name,
                    "contestant": m.contestant.name,
                    "floor": m.contestant.floor,
                    "seconds": round(m.median, 4),
                    "rounds": [round(s, 4) for s in m.seconds],
                    "cpu_seconds": round(m.cpu_median, 4),
                    "cpu_rounds": [round(s, 4) for s in m.cpu_seconds],
                    "cpu_ratio_to_floor": round(m.cpu_median / floor.cpu_median, 4),
                    "rows_per_second": round(rows / m.median),
                    "ratio_to_floor": round(m.median / floor.median, 4),
                    "result_rows": None if m.capped else m.rows,
                    "bytes_written": m.bytes_written,
                    "capped_at_seconds": m.contestant.cap_seconds if m.capped else None,
                    "peak_rss_growth_bytes": m.rss_growth,
                }
                out.write(json.dumps(line) + "\n")


def serve_catalog(directory: Path, catalog: dict[str, Any], token: str,
                  role: str) -> tuple[subprocess.Popen[bytes], str]:
    """``tablestore catalog serve`` over ``catalog`` (a catalog entry of the YAML config) in its
    own process, with one bearer token; returns the process and its URI once it answers."""
    from tests.services import free_port

    config = directory / "serve.yaml"
    config.write_text(json.dumps({"catalogs": [catalog], "server": {"tokens": [{"token": token, "role": role}]}}))
    port = free_port()
    log = open(directory / "server.log", "wb")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen([sys.executable, "-m", "tablestore.cli", "catalog", "serve", "--config", str(config),
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    request = urllib.request.Request(f"{uri}/v1/config", headers={"Authorization": f"Bearer {token}"})
    while True:
        try:
            with urllib.request.urlopen(request, timeout=2):
                return proc, uri
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError((directory / "server.log").read_text()) from None
            time.sleep(0.3)
