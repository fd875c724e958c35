"""Two builds of the catalog service side by side: a change's effect on commits and loads.

``bench.catalog_throughput`` measures the service against Iceberg's reference server; this
measures it against itself, before and after a change, in one run: each build's
``tablestore catalog serve`` (its defaults: a bearer token, the access log on) on its own database
of one PostgreSQL, driven by that benchmark's light client, in interleaved rounds (A B, B A, ...).
A build is a directory holding a copy of the code (``git archive <commit> | tar -x -C DIR``), put
first on the server's path; ``.`` is this checkout. Reported per case: commits per second, the
server's CPU per commit (user and system, psutil), 409s; for loads (``load``: one client loading
``--tables`` tables in turn), p50, p99 and CPU per load; and each server's resident memory at the
end. The machine's load average is printed before and after: compare ratios within one run.

``python -m bench.catalog_ab --build before=/tmp/main --build after=. --cases 16x16,1x16,load``
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import psutil

from bench.catalog_throughput import (
    CLIENT_PROCESSES,
    Outcome,
    Server,
    create_tables,
    percentile,
    run_commits,
    run_loads,
    start_tablestore,
    warm_client_process,
)


def measure(builds: list[tuple[str, Path | None]], cases: list[str], rounds: int, seconds: float,
            tables: int) -> list[str]:
    """The report's lines, for ``cases`` (``<tables>x<writers>`` or ``load``)."""
    from tests.services import start_postgres

    lines = [f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}"]
    workdir = Path(tempfile.mkdtemp(prefix="tablestore-bench-ab-"))
    pg_dir = workdir / "pg"
    pg_dir.mkdir()
    pg_dir.chmod(0o755)
    pg = start_postgres(pg_dir)
    servers: list[Server] = []
    pool = ProcessPoolExecutor(CLIENT_PROCESSES, mp_context=multiprocessing.get_context("spawn"))
    try:
        list(pool.map(warm_client_process, range(CLIENT_PROCESSES)))
        for name, tree in builds:
            (workdir / name).mkdir()
            servers.append(start_tablestore(workdir / name, pg.create_database(f"ab_{name}"), tree, name))
        commit_names = [f"t{i}" for i in range(16)]
        load_names = [f"l{i}" for i in range(tables)] if "load" in cases else []
        uuids = {s.name: create_tables(s, commit_names + load_names) for s in servers}
        for case in cases:
            if case == "load":
                latencies: dict[str, list[float]] = {s.name: [] for s in servers}
                cpu = dict.fromkeys(latencies, 0.0)
                for server in servers:
                    run_loads(server, load_names[:100])  # warm up
                for r in range(rounds):
                    for server in servers if r % 2 == 0 else servers[::-1]:
                        measured, spent = run_loads(server, load_names)
                        latencies[server.name] += measured
                        cpu[server.name] += spent
                for name, values in latencies.items():
                    lines.append(f"load {name}: p50 {1000 * statistics.median(values):.3f} ms, p99 "
                                 f"{1000 * percentile(values, 0.99):.3f} ms, cpu {1000 * cpu[name] / len(values):.3f}"
                                 f" ms/load")
                continue
            table_count, writers = (int(part) for part in case.split("x"))
            outcomes: dict[str, list[Outcome]] = {s.name: [] for s in servers}
            chosen = {s.name: [(n, uuids[s.name][n]) for n in commit_names[:table_count]] for s in servers}
            for server in servers:
                run_commits(pool, server, chosen[server.name], writers, 1.0)  # warm up
            for r in range(rounds):
                for server in servers if r % 2 == 0 else servers[::-1]:
                    outcomes[server.name].append(run_commits(pool, server, chosen[server.name], writers, seconds))
            for name, runs in outcomes.items():
                commits = sum(o.commits for o in runs)
                lines.append(f"{case} {name}: {commits / sum(o.seconds for o in runs):.1f} commits/s, cpu "
                             f"{1000 * sum(o.server_cpu for o in runs) / max(commits, 1):.3f} ms/commit, "
                             f"409s {sum(o.conflicts for o in runs)}")
        for server in servers:
            rss = psutil.Process(server.process.pid).memory_info().rss / 2**20
            lines.append(f"{server.name}: resident memory {rss:.0f} MiB")
    finally:
        pool.shutdown()
        for server in servers:
            server.stop()
        pg.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    lines.append(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.catalog_ab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", action="append", required=True,
                        help="NAME=DIR: a build of the service (DIR a copy of the code, '.' this checkout)")
    parser.add_argument("--cases", default="16x16,load", help="comma-separated: <tables>x<writers> or load")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each commit run")
    parser.add_argument("--tables", type=int, default=1000, help="tables loaded in turn by the load case")
    args = parser.parse_args(argv)
    builds: list[tuple[str, Path | None]] = []
    for spec in args.build:
        name, _, directory = spec.partition("=")
        builds.append((name, None if directory in ("", ".") else Path(directory).resolve()))
    for line in measure(builds, args.cases.split(","), args.rounds, args.seconds, args.tables):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
