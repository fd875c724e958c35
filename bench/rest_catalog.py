"""Commit and load latency through the REST catalog service, as ratios to the in-process SQL catalog.

The service (``tablestore catalog serve``) runs on PostgreSQL in its own process. 1, 4 and 16
clients (threads, each with its own ``rest`` catalog client, so its own kept-alive HTTP session,
and its own table, so that latency is not retries) commit metadata-only changes
(``set-properties`` with an ``assert-table-uuid`` requirement): the server checks the
requirement, writes the next metadata file and compare-and-swaps the catalog row. The
in-process contestant does the same commits with ``SqlCatalog.commit_table`` on the same
database and tables, at the same concurrency: both contestants make the same call and get the
same parsed metadata back. Load latency is ``load_table_metadata`` on both (``GET
.../tables/{t}`` for REST). Figures are p50 and p99 of every request's latency; the ratio is
REST / in-process. Target: at 4 clients, p50 within 1.5x.

The contestants alternate in up to ``ROUNDS`` rounds, so that load from other processes on
this shared machine hits both alike. Both commit to the same tables, so the service's first
commit to a table in each round finds the table moved by the in-process contestant and makes
its swap twice (as with any other writer); rounds keep at least ``MIN_PER_ROUND`` requests per
client so that this stays a minor part of the figures, not the whole of them.

CPU time per request is reported too (it is what latency is made of on a busy machine, and it
does not depend on the neighbours): the bench process, plus for REST the service process, plus
PostgreSQL's processes, during each contestant's rounds.

``python -m bench.rest_catalog [--commits N]`` or ``python -m bench.run --only rest_catalog``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.common import RESULTS_DIR, _git_commit, serve_catalog

CONCURRENCY = (1, 4, 16)
TOKEN = "bench-token-0123456789abcdef"
CATALOG = "bench"
TARGET_P50_AT_4 = 1.5
DEFAULT_COMMITS = 240  # per concurrency level, split over the clients
ROUNDS = 6  # alternations of the two contestants per concurrency level, at most
MIN_PER_ROUND = 8  # requests per client in a round, at least (fewer rounds then)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _run_clients(clients: int, per_client: int, work: Callable[[int], Callable[[int], None]]) -> list[float]:
    """Latencies (seconds) of ``per_client`` calls in each of ``clients`` threads, started together."""
    latencies: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)
    errors: list[BaseException] = []

    def client(index: int) -> None:
        try:
            call = work(index)
            barrier.wait()
            mine = []
            for i in range(per_client):
                started = time.perf_counter()
                call(i)
                mine.append(time.perf_counter() - started)
            with lock:
                latencies.extend(mine)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return latencies


def _cpu_seconds(pid: int) -> float:
    """User and system CPU of a process, with its children that have been waited for."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return found


class CpuMeter:
    """CPU seconds used by this process, the service and PostgreSQL (postmaster and backends)."""

    def __init__(self, service_pid: int, postmaster_pid: int | None) -> None:
        self.service_pid = service_pid
        self.postmaster_pid = postmaster_pid

    def read(self) -> dict[str, float]:
        pg = 0.0
        if self.postmaster_pid is not None:
            pg = sum(_cpu_seconds(p) for p in [self.postmaster_pid, *_children(self.postmaster_pid)])
        return {"client": time.process_time(), "service": _cpu_seconds(self.service_pid), "postgres": pg}


def _postmaster_pid(pg_dir: Path) -> int | None:
    for pidfile in pg_dir.glob("*/postmaster.pid"):
        try:
            return int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
    return None


def _start_service(workdir: Path, catalog_uri: str, warehouse: str) -> tuple[subprocess.Popen[bytes], str]:
    return serve_catalog(workdir, {"name": CATALOG, "type": "sql", "uri": catalog_uri, "warehouse": warehouse},
                         TOKEN, "write")


def measure_all(workdir: Path, commits: int, log: Callable[[str], None]) -> list[dict[str, Any]]:
    from tablestore.catalog.rest import RestCatalog
    from tablestore.catalog.sql_catalog import SqlCatalog
    from tablestore.spec.metadata.update_models import AssertTableUUID, SetPropertiesUpdate
    from tests.services import start_postgres

    pg_dir = Path(tempfile.mkdtemp(prefix="tablestore-bench-pg-"))
    pg_dir.chmod(0o755)
    pg = start_postgres(pg_dir)
    proc = None
    try:
        catalog_uri = pg.create_database()
        warehouse = str(workdir / "warehouse")
        direct = SqlCatalog(CATALOG, uri=catalog_uri, warehouse=warehouse)
        direct.create_namespace("b")
        schema = pa.schema([pa.field("id", pa.int64())])
        uuids = [direct.create_table(("b", f"t{i}"), schema).metadata.table_uuid for i in range(max(CONCURRENCY))]
        proc, uri = _start_service(workdir, catalog_uri, warehouse)
        log(f"rest_catalog: service on {uri}, PostgreSQL database ready")
        clients_made: list[RestCatalog] = []

        def rest_commit(index: int) -> Callable[[int], None]:
            # tablestore's REST client, one per thread (its own HTTP session, kept alive):
            # the same call, arguments and parsed result as the in-process contestant's.
            client = RestCatalog(CATALOG, uri=uri, token=TOKEN, warehouse=CATALOG)
            clients_made.append(client)

            def call(i: int) -> None:
                client.commit_table(("b", f"t{index}"), [AssertTableUUID(uuid=uuids[index])],
                                    [SetPropertiesUpdate(updates={"rest": str(i)})])
            return call

        def direct_commit(index: int) -> Callable[[int], None]:
            def call(i: int) -> None:
                direct.commit_table(("b", f"t{index}"), [AssertTableUUID(uuid=uuids[index])],
                                    [SetPropertiesUpdate(updates={"direct": str(i)})])
            return call

        def rest_load(index: int) -> Callable[[int], None]:
            client = RestCatalog(CATALOG, uri=uri, token=TOKEN, warehouse=CATALOG)
            clients_made.append(client)
            return lambda _: client.load_table_metadata(("b", f"t{index}")) and None

        def direct_load(index: int) -> Callable[[int], None]:
            return lambda _: direct.load_table_metadata(("b", f"t{index}")) and None

        meter = CpuMeter(proc.pid, _postmaster_pid(pg_dir))
        rows = []
        for operation, rest_work, direct_work in (("commit", rest_commit, direct_commit),
                                                  ("load", rest_load, direct_load)):
            for clients in CONCURRENCY:
                per_client = max(MIN_PER_ROUND, commits // clients)
                rounds = max(1, min(ROUNDS, per_client // MIN_PER_ROUND))
                per_round = per_client // rounds
                _run_clients(clients, 3, rest_work)  # warm up connections and pools
                _run_clients(clients, 3, direct_work)
                latencies: dict[str, list[float]] = {"rest": [], "sql": []}
                cpu: dict[str, float] = {"rest": 0.0, "sql": 0.0}
                for _ in range(rounds):
                    for side, work in (("rest", rest_work), ("sql", direct_work)):
                        before = meter.read()
                        latencies[side] += _run_clients(clients, per_round, work)
                        after = meter.read()
                        # The service idles during the in-process rounds; counted for both alike.
                        cpu[side] += sum(after[k] - before[k] for k in after)
                rest, local = latencies["rest"], latencies["sql"]
                row: dict[str, Any] = {
                    "operation": operation, "clients": clients, "requests": len(rest),
                    "rest_p50_ms": 1000 * statistics.median(rest), "rest_p99_ms": 1000 * _percentile(rest, 0.99),
                    "sql_p50_ms": 1000 * statistics.median(local), "sql_p99_ms": 1000 * _percentile(local, 0.99),
                    "rest_cpu_ms": 1000 * cpu["rest"] / len(rest), "sql_cpu_ms": 1000 * cpu["sql"] / len(local),
                }
                row["ratio_p50"] = row["rest_p50_ms"] / row["sql_p50_ms"]
                row["ratio_p99"] = row["rest_p99_ms"] / row["sql_p99_ms"]
                row["ratio_cpu"] = row["rest_cpu_ms"] / row["sql_cpu_ms"]
                rows.append(row)
                log(f"rest_catalog: {operation} x{clients}: rest p50 {row['rest_p50_ms']:.1f} ms, "
                    f"sql p50 {row['sql_p50_ms']:.1f} ms; cpu per request {row['rest_cpu_ms']:.1f} "
                    f"vs {row['sql_cpu_ms']:.1f} ms")
        direct.close()
        for client in clients_made:
            client.close()
        return rows
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        pg.stop()
        shutil.rmtree(pg_dir, ignore_errors=True)


def report(rows: list[dict[str, Any]], console: Any) -> None:
    from rich.table import Table

    table = Table(title="REST catalog service on PostgreSQL vs in-process SQL catalog (latency per request)",
                  title_justify="left")
    for column in ("operation", "clients", "requests", "rest p50 ms", "rest p99 ms", "sql p50 ms", "sql p99 ms",
                   "p50 x sql", "p99 x sql", "cpu ms rest", "cpu ms sql", "cpu x sql"):
        table.add_column(column, justify="left" if column == "operation" else "right")
    for r in rows:
        table.add_row(r["operation"], str(r["clients"]), str(r["requests"]), f"{r['rest_p50_ms']:.1f}",
                      f"{r['rest_p99_ms']:.1f}", f"{r['sql_p50_ms']:.1f}", f"{r['sql_p99_ms']:.1f}",
                      f"{r['ratio_p50']:.2f}", f"{r['ratio_p99']:.2f}", f"{r['rest_cpu_ms']:.1f}",
                      f"{r['sql_cpu_ms']:.1f}", f"{r['ratio_cpu']:.2f}")
    at4 = next(r for r in rows if r["operation"] == "commit" and r["clients"] == 4)
    verdict = "met" if at4["ratio_p50"] <= TARGET_P50_AT_4 else "MISSED"
    table.caption = (f"commit at 4 clients: p50 REST / in-process = {at4['ratio_p50']:.2f} "
                     f"(target <= {TARGET_P50_AT_4}): {verdict}")
    table.caption_justify = "left"
    console.print(table)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    common = {"benchmark": "rest_catalog", "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "commit": _git_commit(), "cpus": os.cpu_count()}
    with (RESULTS_DIR / "rest_catalog.jsonl").open("a", encoding="utf-8") as out:
        for r in rows:
            out.write(json.dumps({**common, **{k: round(v, 4) if isinstance(v, float) else v
                                               for k, v in r.items()}}) + "\n")


def run(workdir: Path, rounds: int | None, console: Any, log: Callable[[str], None]) -> None:
    """The hook ``bench.run`` calls: ``rounds`` scales the number of requests (default 1)."""
    directory = workdir / "rest_catalog"
    directory.mkdir(parents=True, exist_ok=True)
    report(measure_all(directory, DEFAULT_COMMITS * (rounds or 1), log), console)


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    parser = argparse.ArgumentParser(prog="python -m bench.rest_catalog", description=__doc__)
    parser.add_argument("--commits", type=int, default=DEFAULT_COMMITS, help="requests per concurrency level")
    args = parser.parse_args(argv)
    console = Console()
    workdir = Path(tempfile.mkdtemp(prefix="tablestore-bench-rest-"))
    try:
        report(measure_all(workdir, args.commits, lambda m: console.log(m, highlight=False)), console)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
