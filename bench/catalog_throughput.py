"""Commit throughput and load latency: the catalog service against Iceberg's reference REST server.

The contestants, side by side in one run, each on its own database of the same PostgreSQL:

* ``tablestore``: ``tablestore catalog serve`` (one process, its defaults: a static bearer
  token, the access log on);
* ``reference``: ``org.apache.iceberg.rest.RESTCatalogServer`` from the ``test-fixtures`` jar of
  ``iceberg-open-api`` 1.11.0 on Jetty 12.1 (``infra/iceberg_rck.py`` fetches the jars with
  Maven), backed by Iceberg's ``JdbcCatalog`` (no authentication).

Both reach PostgreSQL over its Unix socket, and both write metadata files to a local warehouse.
They are driven by the same light client: raw HTTP/1.1 (``http.client``, one kept-alive
connection per writer), writers as threads spread over ``CLIENT_PROCESSES`` processes, so that
the servers, not the client, are the bottleneck. A commit is a metadata-only change
(``set-properties`` with an ``assert-table-uuid`` requirement): the server checks the
requirement, writes the next metadata file and swaps the catalog row. A commit answered 409 (a
lost race with another writer on the same table) is sent again, and only landed commits count.

Measured, contestants interleaved round by round (A B, B A, ...):

* commits per second with 1, 4 and 16 concurrent writers on one table and on 16 tables, and
  64 writers on 16 tables (writer ``i``'s ``j``-th commit goes to table
  ``(i + j * writers) % tables``), each run ``--seconds`` long;
* each server's CPU (user + system, all threads, psutil on its pid) per landed commit, and the
  client's;
* ``loadTable`` latency, p50 and p99, one client loading each of 1,000 tables in turn;
* each server's resident memory (RSS, psutil), sampled every 0.2 s through the whole run: its
  peak and its last value.

``--profile DIR`` also samples our server with py-spy (it must be on PATH) through the first
measured round of each case and writes each case's top costs (own time by function, waits left
out) to ``DIR/<case>.txt``.

Ratios are tablestore / reference: above 1 is better for commits per second, below 1 is better
for CPU and latency. ``python -m bench.catalog_throughput`` or ``make bench BENCH_ARGS="--only
catalog_throughput"``.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import psutil

from bench.common import RESULTS_DIR, _git_commit

WRITERS = (1, 4, 16)
TABLE_COUNTS = (1, 16)
# (tables, writers): every table count with every writer count, and many writers on many tables.
CASES = [(t, w) for t in TABLE_COUNTS for w in WRITERS] + [(16, 64)]
LOAD_TABLES = 1000
CLIENT_PROCESSES = 4
DEFAULT_SECONDS = 6.0
DEFAULT_ROUNDS = 2
TOKEN = "bench-token-0123456789abcdef"
CATALOG = "bench"
NAMESPACE = "b"
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}]}
TARGET_COMMITS = 1.5  # at 16 writers, on one table and on 16, tablestore / reference
TARGET_COMMITS_OTHER = 1.0  # every other case
TARGET_CPU = 0.5  # at 16 writers on 16 tables
TARGET_CPU_ONE_TABLE = 1.0  # on one table
TARGET_LOAD = 1.0
TARGET_RSS = 1.0


def targets(tables: int, writers: int) -> tuple[float, float | None]:
    """The goal of a commit case: the least commits/s ratio, and the most CPU ratio (or None)."""
    commits = TARGET_COMMITS if writers == 16 else TARGET_COMMITS_OTHER
    cpu = TARGET_CPU if (tables, writers) == (16, 16) else TARGET_CPU_ONE_TABLE if tables == 1 else None
    return commits, cpu


class MemorySampler:
    """Each server's resident memory, sampled every 0.2 s in a thread: peak and last, in bytes."""

    def __init__(self, servers: list[Server]) -> None:
        self.servers = servers
        self.peak = {s.name: 0 for s in servers}
        self.last = {s.name: 0 for s in servers}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for server in self.servers:
                try:
                    rss = int(psutil.Process(server.process.pid).memory_info().rss)
                except psutil.Error:
                    continue
                self.last[server.name] = rss
                self.peak[server.name] = max(self.peak[server.name], rss)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class Profiler:
    """py-spy on our server through one round of a case; the case's top costs in a text file."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self.summaries: dict[str, list[tuple[float, str]]] = {}
        if directory is not None:
            if shutil.which("py-spy") is None:
                raise RuntimeError("--profile needs py-spy on PATH (pip install py-spy)")
            directory.mkdir(parents=True, exist_ok=True)

    def start(self, server: Server, case: str, seconds: float) -> subprocess.Popen[bytes] | None:
        if self.directory is None or server.name != "tablestore":
            return None
        # --nonblocking: py-spy otherwise stops the process for every sample, which made one slow
        # answer in a hundred of ours (the loads' p99) while the reference ran unsampled.
        return subprocess.Popen(["py-spy", "record", "--nonblocking", "-r", "200", "-f", "raw", "-p",
                                 str(server.process.pid),
                                 "-d", str(max(1, int(seconds))), "-o", str(self.directory / f"{case}.raw")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def finish(self, process: subprocess.Popen[bytes] | None, case: str) -> None:
        if process is None or self.directory is None:
            return
        process.wait()
        raw = self.directory / f"{case}.raw"
        if raw.exists():
            top = top_costs(raw.read_text())
            self.summaries[case] = top
            (self.directory / f"{case}.txt").write_text(
                "\n".join(f"{share:5.1f}%  {name}" for share, name in top) + "\n")


# Samples of threads waiting (for work, a lock, the GIL, the network) are no cost of a request.
_IDLE = ("wait (threading.py", "select (selectors.py", "_worker (thread.py", "get (queue.py",
         "dequeue (logging/handlers.py", "Runner.run (asyncio/runners.py", "_run_once (asyncio/base_events.py",
         # The access log's writer between its writes (time.sleep has no frame of its own).
         "BatchedLines._run (")


def top_costs(raw: str, count: int = 12) -> list[tuple[float, str]]:
    """From py-spy's raw (collapsed) stacks: the functions with the most own time, as shares of the
    samples that were not waiting, each named ``function (module)``."""
    import collections
    import re

    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        leaf = stack.split(";")[-1]
        if any(marker in leaf for marker in _IDLE):
            continue
        samples = int(count_text)
        total += samples
        own[re.sub(r" \((?:.*/)?(?:site-packages/|lib/python3\.\d+/)?([^()]*?):\d+\)$", r" (\1)", leaf)] += samples
    return [(100 * n / max(total, 1), name) for name, n in own.most_common(count)]


@dataclass
class Server:
    """A running contestant: its process, base URI and the path prefix of its catalog."""

    name: str
    process: subprocess.Popen[bytes]
    uri: str
    base: str  # /v1/<prefix> or /v1
    headers: dict[str, str]

    def cpu(self) -> float:
        try:
            times = psutil.Process(self.process.pid).cpu_times()
        except psutil.Error:
            return 0.0
        return float(times.user + times.system)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _request(conn: http.client.HTTPConnection, method: str, path: str, headers: dict[str, str],
             body: Any = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    all_headers = {**headers, **({"Content-Type": "application/json"} if data is not None else {})}
    conn.request(method, path, body=data, headers=all_headers)
    response = conn.getresponse()
    return response.status, response.read()


def _connection(uri: str) -> http.client.HTTPConnection:
    parts = urlsplit(uri)
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=120)


def _wait(uri: str, path: str, headers: dict[str, str], process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(urllib.request.Request(uri + path, headers=headers), timeout=2):
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"{uri} did not start:\n{log.read_text(errors='replace')[-3000:]}") from None
            time.sleep(0.3)


def _free_port() -> int:
    from infra.local.processes import free_port

    return free_port()


def start_tablestore(workdir: Path, catalog_uri: str, tree: Path | None = None, name: str = "tablestore") -> Server:
    """``tablestore catalog serve`` on ``catalog_uri``: this checkout's, or the code in ``tree``
    (a copy of another commit, put first on the path)."""
    config = workdir / "serve.yaml"
    config.write_text(json.dumps({
        "catalogs": [{"name": CATALOG, "type": "sql", "uri": catalog_uri, "warehouse": str(workdir / "warehouse")}],
        "server": {"tokens": [{"token": TOKEN, "role": "write"}]},
    }))
    port = _free_port()
    log = workdir / "server.log"
    with log.open("wb") as out:
        env = {**os.environ, "PYTHONPATH": str(tree)} if tree is not None else None
        process = subprocess.Popen([sys.executable, "-m", "tablestore.cli", "catalog", "serve", "--config",
                                    str(config), "--port", str(port)], stdout=out, stderr=subprocess.STDOUT,
                                   env=env, cwd=tree)
    uri = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    _wait(uri, "/v1/config", headers, process, log)
    return Server(name, process, uri, f"/v1/{CATALOG}", headers)


def start_reference(workdir: Path, socket_dir: str, socket_port: int, database: str, user: str) -> Server:
    """Iceberg's RESTCatalogServer on its JdbcCatalog; RuntimeError saying why if it cannot run."""
    from infra.iceberg_rck import install, install_server, server_command

    java = shutil.which("java")
    if java is None:
        raise RuntimeError("no java on PATH (the reference server runs on Java 17 or later)")
    lib, server_lib = install(), install_server()
    # The driver reaches PostgreSQL's Unix socket through junixsocket.
    socket = f"{socket_dir}/.s.PGSQL.{socket_port}"
    jdbc = (f"jdbc:postgresql://localhost/{database}?socketFactory=org.newsclub.net.unix.AFUNIXSocketFactory"
            f"$FactoryArg&socketFactoryArg={quote(socket)}")
    log = workdir / "reference.log"
    for attempt in range(3):
        port = _free_port()
        env = {**os.environ, "CATALOG_URI": jdbc, "CATALOG_JDBC_USER": user, "CATALOG_JDBC_PASSWORD": "",
               "CATALOG_WAREHOUSE": f"file://{workdir / 'warehouse'}", "CATALOG_REST_PORT": str(port)}
        with log.open("wb") as out:
            process = subprocess.Popen(server_command(java, lib, server_lib), stdout=out, stderr=subprocess.STDOUT,
                                       env=env, cwd=workdir)
        uri = f"http://127.0.0.1:{port}"
        try:
            _wait(uri, "/v1/config", {}, process, log)
            break
        except RuntimeError:
            # On a busy machine another process may take the free port before the JVM binds it.
            if attempt == 2 or "Failed to bind" not in log.read_text(errors="replace"):
                raise
    with urllib.request.urlopen(uri + "/v1/config", timeout=10) as response:
        prefix = (json.load(response).get("overrides") or {}).get("prefix")
    return Server("reference", process, uri, f"/v1/{prefix}" if prefix else "/v1", {})


def create_tables(server: Server, names: list[str]) -> dict[str, str]:
    """Create ``names`` in the namespace; their table uuids."""
    conn = _connection(server.uri)
    try:
        status, body = _request(conn, "POST", f"{server.base}/namespaces", server.headers,
                                {"namespace": [NAMESPACE], "properties": {}})
        if status not in (200, 409):
            raise RuntimeError(f"{server.name}: create namespace answered {status}: {body[:300]!r}")
        uuids = {}
        for name in names:
            status, body = _request(conn, "POST", f"{server.base}/namespaces/{NAMESPACE}/tables", server.headers,
                                    {"name": name, "schema": SCHEMA})
            if status != 200:
                raise RuntimeError(f"{server.name}: create table {name} answered {status}: {body[:300]!r}")
            uuids[name] = json.loads(body)["metadata"]["table-uuid"]
        return uuids
    finally:
        conn.close()


# -- the client (runs in the client processes) -------------------------------------------------


def _writers(uri: str, base: str, headers: dict[str, str], writers: list[tuple[int, int]],
             tables: list[tuple[str, str]], start_at: float, seconds: float) -> tuple[int, int, float]:
    """Writer threads (index, count of writers) committing until ``start_at + seconds``: landed
    commits, 409s, and this process's CPU seconds meanwhile."""
    landed = [0] * len(writers)
    conflicts = [0] * len(writers)
    errors: list[str] = []

    def run(slot: int, index: int, count: int) -> None:
        conn = _connection(uri)
        try:
            j = 0
            time.sleep(max(0.0, start_at - time.time()))
            end = start_at + seconds
            while time.time() < end:
                name, table_uuid = tables[(index + j * count) % len(tables)]
                body = {"requirements": [{"type": "assert-table-uuid", "uuid": table_uuid}],
                        "updates": [{"action": "set-properties", "updates": {f"w{index}": str(j)}}]}
                status, text = _request(conn, "POST", f"{base}/namespaces/{NAMESPACE}/tables/{name}", headers, body)
                if status == 200:
                    landed[slot] += 1
                    j += 1
                elif status == 409:
                    conflicts[slot] += 1
                else:
                    errors.append(f"{status}: {text[:300]!r}")
                    return
        finally:
            conn.close()

    cpu = time.process_time()
    threads = [threading.Thread(target=run, args=(slot, i, n)) for slot, (i, n) in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(errors[0])
    return sum(landed), sum(conflicts), time.process_time() - cpu


def warm_client_process(_: int) -> int:
    return os.getpid()


@dataclass
class Outcome:
    commits: int
    conflicts: int
    seconds: float
    server_cpu: float
    client_cpu: float


def run_commits(pool: ProcessPoolExecutor, server: Server, tables: list[tuple[str, str]], writers: int,
                seconds: float) -> Outcome:
    processes = min(writers, CLIENT_PROCESSES)
    groups: list[list[tuple[int, int]]] = [[] for _ in range(processes)]
    for i in range(writers):
        groups[i % processes].append((i, writers))
    start_at = time.time() + 0.5
    before = server.cpu()
    futures = [pool.submit(_writers, server.uri, server.base, server.headers, group, tables, start_at, seconds)
               for group in groups]
    results = [f.result() for f in futures]
    after = server.cpu()
    return Outcome(sum(r[0] for r in results), sum(r[1] for r in results), seconds, after - before,
                   sum(r[2] for r in results))


def run_loads(server: Server, names: list[str]) -> tuple[list[float], float]:
    conn = _connection(server.uri)
    latencies = []
    before = server.cpu()
    try:
        for name in names:
            started = time.perf_counter()
            status, body = _request(conn, "GET", f"{server.base}/namespaces/{NAMESPACE}/tables/{name}", server.headers)
            latencies.append(time.perf_counter() - started)
            if status != 200:
                raise RuntimeError(f"{server.name}: load {name} answered {status}: {body[:300]!r}")
    finally:
        conn.close()
    return latencies, server.cpu() - before


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# -- the run -----------------------------------------------------------------------------------


def measure_all(workdir: Path, rounds: int, seconds: float, log: Callable[[str], None],
                profile: Path | None = None) -> dict[str, Any]:
    from tests.services import start_postgres

    pg_dir = Path(tempfile.mkdtemp(prefix="tablestore-bench-pg-"))
    pg_dir.chmod(0o755)
    pg = start_postgres(pg_dir)
    servers: list[Server] = []
    reference_error: str | None = None
    profiler = Profiler(profile)
    memory: MemorySampler | None = None
    pool = ProcessPoolExecutor(CLIENT_PROCESSES, mp_context=multiprocessing.get_context("spawn"))
    try:
        list(pool.map(warm_client_process, range(CLIENT_PROCESSES)))
        ours_dir, ref_dir = workdir / "tablestore", workdir / "reference"
        ours_dir.mkdir(parents=True, exist_ok=True)
        ref_dir.mkdir(parents=True, exist_ok=True)
        servers.append(start_tablestore(ours_dir, pg.create_database("bench_tablestore")))
        try:
            pg.create_database("bench_reference")
            servers.append(start_reference(ref_dir, pg.socket_dir, pg.port or 5432, "bench_reference", pg.user))
        except Exception as e:  # reported: our figures alone then
            reference_error = f"{type(e).__name__}: {e}"
            log(f"catalog_throughput: the reference server cannot run, so tablestore's figures alone: "
                f"{reference_error}")
        log(f"catalog_throughput: {', '.join(f'{s.name} on {s.uri}' for s in servers)}")
        memory = MemorySampler(servers)
        memory.start()
        commit_names = [f"t{i}" for i in range(max(TABLE_COUNTS))]
        load_names = [f"l{i}" for i in range(LOAD_TABLES)]
        tables: dict[str, list[tuple[str, str]]] = {}
        for server in servers:
            started = time.perf_counter()
            uuids = create_tables(server, commit_names + load_names)
            tables[server.name] = [(n, uuids[n]) for n in commit_names]
            log(f"catalog_throughput: {server.name}: {len(uuids)} tables created in "
                f"{time.perf_counter() - started:.1f}s")
        rows: list[dict[str, Any]] = []
        for table_count, writers in CASES:
            case = f"commit-{table_count}t-{writers}w"
            outcomes: dict[str, list[Outcome]] = {s.name: [] for s in servers}
            for server in servers:  # warm up: connections, pools, JIT
                run_commits(pool, server, tables[server.name][:table_count], writers, 1.0)
            for r in range(rounds):
                order = servers if r % 2 == 0 else list(reversed(servers))
                for server in order:
                    sampling = profiler.start(server, case, seconds) if r == 0 else None
                    outcomes[server.name].append(
                        run_commits(pool, server, tables[server.name][:table_count], writers, seconds))
                    profiler.finish(sampling, case)
            row: dict[str, Any] = {"case": "commit", "tables": table_count, "writers": writers}
            for name, runs in outcomes.items():
                commits = sum(o.commits for o in runs)
                row[f"{name}_commits_s"] = commits / sum(o.seconds for o in runs)
                row[f"{name}_conflicts"] = sum(o.conflicts for o in runs)
                row[f"{name}_cpu_ms"] = 1000 * sum(o.server_cpu for o in runs) / max(commits, 1)
                row[f"{name}_client_cpu_ms"] = 1000 * sum(o.client_cpu for o in runs) / max(commits, 1)
            if "reference" in outcomes:
                row["ratio_commits"] = row["tablestore_commits_s"] / max(row["reference_commits_s"], 1e-9)
                row["ratio_cpu"] = row["tablestore_cpu_ms"] / max(row["reference_cpu_ms"], 1e-9)
            rows.append(row)
            log("catalog_throughput: " + ", ".join(
                f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()))
        load: dict[str, Any] = {"case": "load", "tables": LOAD_TABLES}
        latencies: dict[str, list[float]] = {s.name: [] for s in servers}
        load_cpu: dict[str, float] = {s.name: 0.0 for s in servers}
        for server in servers:
            run_loads(server, load_names[:100])  # warm up
        for r in range(rounds):
            for server in servers if r % 2 == 0 else list(reversed(servers)):
                sampling = profiler.start(server, "load", 4.0) if r == 0 else None
                measured, cpu = run_loads(server, load_names)
                profiler.finish(sampling, "load")
                latencies[server.name] += measured
                load_cpu[server.name] += cpu
        for name, values in latencies.items():
            load[f"{name}_p50_ms"] = 1000 * statistics.median(values)
            load[f"{name}_p99_ms"] = 1000 * percentile(values, 0.99)
            load[f"{name}_cpu_ms"] = 1000 * load_cpu[name] / len(values)
        if "reference" in latencies:
            load["ratio_p50"] = load["tablestore_p50_ms"] / load["reference_p50_ms"]
            load["ratio_p99"] = load["tablestore_p99_ms"] / load["reference_p99_ms"]
            load["ratio_cpu"] = load["tablestore_cpu_ms"] / load["reference_cpu_ms"]
        log("catalog_throughput: " + ", ".join(
            f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in load.items()))
        memory.stop()
        rss: dict[str, Any] = {"case": "memory"}
        for server in servers:
            rss[f"{server.name}_rss_peak_mib"] = memory.peak[server.name] / 2**20
            rss[f"{server.name}_rss_last_mib"] = memory.last[server.name] / 2**20
        if "reference" in memory.peak:
            rss["ratio_rss_peak"] = memory.peak["tablestore"] / max(memory.peak["reference"], 1)
        log("catalog_throughput: " + ", ".join(
            f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in rss.items()))
        return {"rows": rows, "load": load, "memory": rss, "reference_error": reference_error, "rounds": rounds,
                "seconds": seconds, "profile": profiler.summaries}
    finally:
        if memory is not None and memory._thread.is_alive():
            memory.stop()
        pool.shutdown()
        for server in servers:
            server.stop()
        pg.stop()
        shutil.rmtree(pg_dir, ignore_errors=True)


def report(result: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    rows, load = result["rows"], result["load"]
    both = result["reference_error"] is None
    table = Table(title=f"Commits per second: tablestore vs Iceberg's RESTCatalogServer (JdbcCatalog), same "
                        f"PostgreSQL; {result['rounds']} rounds of {result['seconds']:.0f}s each",
                  title_justify="left")
    columns = ["tables", "writers", "ours commits/s", "ref commits/s", "x ref", "ours cpu ms/commit",
               "ref cpu ms/commit", "cpu x ref", "ours 409s", "ref 409s", "client cpu ms (ours/ref)"]
    for column in columns if both else columns[:3] + columns[5:6] + columns[8:9]:
        table.add_column(column, justify="right")
    for r in rows:
        if both:
            table.add_row(str(r["tables"]), str(r["writers"]), f"{r['tablestore_commits_s']:.1f}",
                          f"{r['reference_commits_s']:.1f}", f"{r['ratio_commits']:.2f}",
                          f"{r['tablestore_cpu_ms']:.2f}", f"{r['reference_cpu_ms']:.2f}", f"{r['ratio_cpu']:.2f}",
                          str(r["tablestore_conflicts"]), str(r["reference_conflicts"]),
                          f"{r['tablestore_client_cpu_ms']:.2f}/{r['reference_client_cpu_ms']:.2f}")
        else:
            table.add_row(str(r["tables"]), str(r["writers"]), f"{r['tablestore_commits_s']:.1f}",
                          f"{r['tablestore_cpu_ms']:.2f}", str(r["tablestore_conflicts"]))
    if both:
        verdicts = []
        for r in rows:
            least, most = targets(r["tables"], r["writers"])
            verdict = (f"{r['tables']} table(s), {r['writers']} writers: commits x{r['ratio_commits']:.2f} (target >= "
                       f"{least}: {'met' if r['ratio_commits'] >= least else 'MISSED'})")
            if most is not None:
                verdict += (f", cpu x{r['ratio_cpu']:.2f} (target <= {most}: "
                            f"{'met' if r['ratio_cpu'] <= most else 'MISSED'})")
            verdicts.append(verdict)
        table.caption = "\n".join(verdicts)
    else:
        table.caption = f"reference server not run: {result['reference_error']}"
    table.caption_justify = "left"
    console.print(table)
    lt = Table(title=f"loadTable over {load['tables']} tables (one client, each table in turn)", title_justify="left")
    names = ["tablestore", "reference"] if both else ["tablestore"]
    for column in ["server", "p50 ms", "p99 ms", "server cpu ms/load"]:
        lt.add_column(column, justify="right")
    for name in names:
        lt.add_row(name, f"{load[f'{name}_p50_ms']:.2f}", f"{load[f'{name}_p99_ms']:.2f}",
                   f"{load[f'{name}_cpu_ms']:.2f}")
    if both:
        lt.add_row("x ref", f"{load['ratio_p50']:.2f}", f"{load['ratio_p99']:.2f}", f"{load['ratio_cpu']:.2f}")
        lt.caption = (f"targets p50 and p99 <= {TARGET_LOAD}x: p50 "
                      f"{'met' if load['ratio_p50'] <= TARGET_LOAD else 'MISSED'}, p99 "
                      f"{'met' if load['ratio_p99'] <= TARGET_LOAD else 'MISSED'}")
        lt.caption_justify = "left"
    console.print(lt)
    memory = result["memory"]
    mt = Table(title="Resident memory (RSS, sampled every 0.2 s through the run)", title_justify="left")
    for column in ["server", "peak MiB", "last MiB"]:
        mt.add_column(column, justify="right")
    for name in names:
        mt.add_row(name, f"{memory[f'{name}_rss_peak_mib']:.1f}", f"{memory[f'{name}_rss_last_mib']:.1f}")
    if both:
        mt.add_row("x ref", f"{memory['ratio_rss_peak']:.2f}", "")
        mt.caption = (f"target peak <= {TARGET_RSS}x: "
                      f"{'met' if memory['ratio_rss_peak'] <= TARGET_RSS else 'MISSED'}")
        mt.caption_justify = "left"
    console.print(mt)
    for case, top in result.get("profile", {}).items():
        console.print(f"[bold]profile of ours, {case}[/bold] (own time, waits left out): " + "; ".join(
            f"{name} {share:.1f}%" for share, name in top[:5]))
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    common = {"benchmark": "catalog_throughput",
              "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "commit": _git_commit(), "cpus": os.cpu_count(), "reference_error": result["reference_error"]}
    with (RESULTS_DIR / "catalog_throughput.jsonl").open("a", encoding="utf-8") as out:
        for r in [*rows, load, memory]:
            out.write(json.dumps({**common, **{k: round(v, 4) if isinstance(v, float) else v
                                               for k, v in r.items()}}) + "\n")


def run(workdir: Path, rounds: int | None, console: Any, log: Callable[[str], None]) -> None:
    """The hook ``bench.run`` calls (``--rounds`` rounds per case, default 2)."""
    directory = workdir / "catalog_throughput"
    directory.mkdir(parents=True, exist_ok=True)
    report(measure_all(directory, rounds or DEFAULT_ROUNDS, DEFAULT_SECONDS, log), console)


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    parser = argparse.ArgumentParser(prog="python -m bench.catalog_throughput", description=__doc__)
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="rounds per case and contestant")
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS, help="length of each commit run")
    parser.add_argument("--profile", type=Path, default=None,
                        help="sample our server with py-spy in each case's first round; top costs to this folder")
    args = parser.parse_args(argv)
    console = Console(width=160)
    workdir = Path(tempfile.mkdtemp(prefix="tablestore-bench-throughput-"))
    try:
        report(measure_all(workdir, args.rounds, args.seconds, lambda m: console.log(m, highlight=False),
                           args.profile), console)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
