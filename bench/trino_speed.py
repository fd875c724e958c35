"""Trino 476 reading our ``events`` table, against a Trino-written copy of the same rows.

tablestore writes N events (``bench.common.generate_events``, partitioned by ``day(event_ts)``)
into S3 through its catalog, served by ``tablestore catalog serve``; Trino (on loopback, as
``tests/trino.py`` starts it, with OAuth2 client credentials and vended credentials) copies
them with ``CREATE TABLE ... AS SELECT``. Then four queries run on both tables, alternating
(ours, Trino's, Trino's, ours, ...): a full count, a count filtered on the partition column, a
filter on a non-partition column, and a GROUP BY. Figures are the medians of Trino's own
elapsed and CPU times per query (from the query stats, so the client's polling is left out);
the ratio is ours / Trino's copy. Target: at most 1.1 each, that is our files, row groups and
statistics serve Trino as well as its own.

``python -m bench.trino_speed [--rows N] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.common import RESULTS_DIR, SCHEMA, _git_commit, generate_events

TARGET = 1.1
QUERIES = {
    "full count": "SELECT count(*) FROM {t}",
    "partition filter": "SELECT count(*) FROM {t} WHERE event_ts >= TIMESTAMP '2024-01-10 00:00:00' "
                        "AND event_ts < TIMESTAMP '2024-01-13 00:00:00'",
    "non-partition filter": "SELECT count(*), sum(amount) FROM {t} WHERE user_id = 4242",
    "group by": "SELECT country, count(*), sum(amount), avg(quantity) FROM {t} GROUP BY country",
}


def _timed(trino: Any, sql: str) -> tuple[float, float, list[Any]]:
    connection = trino.connect()
    try:
        cursor = connection.cursor()
        cursor.execute(sql)
        rows = cursor.fetchall()
        stats = cursor.stats
        return float(stats["elapsedTimeMillis"]) / 1000, float(stats["cpuTimeMillis"]) / 1000, rows
    finally:
        connection.close()


def run(rows: int, rounds: int, workdir: Path) -> list[dict[str, Any]]:
    from tablestore.catalog.sql_catalog import SqlCatalog
    from tests.services import CATALOG, CLIENT_ID, CLIENT_SECRET, RestService, start_s3_server, write_config
    from tests.trino import rest_catalog_properties, start_trino, wait_for_catalog

    s3 = start_s3_server(workdir)
    service = trino = direct = None
    try:
        uri = f"sqlite:///{workdir / 'catalog.db'}"
        warehouse = f"s3://{s3.create_bucket()}/warehouse"
        write_config(workdir / "tablestore.yaml", uri, warehouse, s3.properties)
        service = RestService(workdir / "tablestore.yaml", uri, warehouse, workdir, s3_properties=s3.properties)
        service.start()
        direct = SqlCatalog(CATALOG, **service.direct_properties())
        direct.create_namespace("bench")
        direct.create_table("bench.events", schema=SCHEMA, partition_by=["day(event_ts)"]).append(
            generate_events(rows))
        trino = start_trino(workdir / "trino", {"lakehouse": rest_catalog_properties(
            service.uri, CATALOG, f"{CLIENT_ID}:{CLIENT_SECRET}", s3.endpoint, s3.region)})
        wait_for_catalog(trino)
        trino.query("CREATE TABLE lakehouse.bench.events_trino WITH (partitioning = ARRAY['day(event_ts)']) "
                    "AS SELECT * FROM lakehouse.bench.events")
        tables = {"tablestore": "lakehouse.bench.events", "trino": "lakehouse.bench.events_trino"}
        results = []
        for name, template in QUERIES.items():
            times: dict[str, list[tuple[float, float]]] = {k: [] for k in tables}
            answers: dict[str, list[Any]] = {}
            for r in range(rounds):
                order = list(tables) if r % 2 == 0 else list(reversed(tables))
                for who in order:
                    elapsed, cpu, answer = _timed(trino, template.format(t=tables[who]))
                    times[who].append((elapsed, cpu))
                    answers[who] = sorted(map(str, answer))
            assert answers["tablestore"] == answers["trino"], f"{name}: the two tables answer differently"
            medians = {who: (statistics.median(e for e, _ in t), statistics.median(c for _, c in t))
                       for who, t in times.items()}
            results.append({"query": name, "rows": rows, "rounds": rounds,
                            "tablestore_s": medians["tablestore"][0], "trino_s": medians["trino"][0],
                            "tablestore_cpu_s": medians["tablestore"][1], "trino_cpu_s": medians["trino"][1],
                            "ratio": medians["tablestore"][0] / max(medians["trino"][0], 1e-9),
                            "cpu_ratio": medians["tablestore"][1] / max(medians["trino"][1], 1e-9)})
        files = {who: trino.query(f'SELECT count(*), sum(file_size_in_bytes) FROM {t[:t.rindex(".")]}."'
                                  f'{t[t.rindex(".") + 1:]}$files"')[0] for who, t in tables.items()}
        manifests = {who: trino.query(f'SELECT count(*), sum(length) FROM {t[:t.rindex(".")]}."'
                                      f'{t[t.rindex(".") + 1:]}$manifests"')[0] for who, t in tables.items()}
        for result in results:
            result["files"] = {who: [int(n), int(size)] for who, (n, size) in files.items()}
            result["manifests"] = {who: [int(n), int(size)] for who, (n, size) in manifests.items()}
        return results
    finally:
        if trino is not None:
            trino.stop()
        if direct is not None:
            direct.close()
        if service is not None:
            service.stop()
        s3.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-trino-") as tmp:
        results = run(args.rows, args.rounds, Path(tmp))
    print(f"Trino 476 on {args.rows:,} events, median of {args.rounds} rounds (target: ratio <= {TARGET})")
    print(f"{'query':<22}{'ours s':>9}{'Trino s':>9}{'ratio':>7}{'ours cpu':>10}{'Trino cpu':>10}{'cpu ratio':>10}")
    for r in results:
        print(f"{r['query']:<22}{r['tablestore_s']:>9.3f}{r['trino_s']:>9.3f}{r['ratio']:>7.2f}"
              f"{r['tablestore_cpu_s']:>10.3f}{r['trino_cpu_s']:>10.3f}{r['cpu_ratio']:>10.2f}")
    print(f"data files (count, bytes): {results[0]['files']}; manifests (count, bytes): {results[0]['manifests']}")
    RESULTS_DIR.mkdir(exist_ok=True)
    with (RESULTS_DIR / "trino_speed.jsonl").open("a") as out:
        stamp = datetime.datetime.now(datetime.UTC).isoformat()
        for r in results:
            out.write(json.dumps({"at": stamp, "commit": _git_commit(), **r}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
