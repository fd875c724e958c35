"""SQL ``INSERT ... SELECT`` on Spark against Spark's own ``df.write.parquet`` of the same rows.

The rows are issue 29's shape, computed by Spark (nothing is cached or read from disk):
``SELECT id, concat('row-', id, '-padding-padding'), id * 1.5, id % 1000 FROM range(N)``, at
1M, 10M and 50M rows (the sizes up to ``--rows``: the default 10M runs the first two;
``--rows 50000000`` all three). Every size is one case, with its contestants interleaved:

- ``spark-parquet`` (the floor): ``spark.sql(select).write.parquet(dir)``, zstd;
- ``tablestore-sql``: ``INSERT INTO bench.t <select>`` through ``SqlSession`` on the same
  Spark session: Spark tasks write the table's Parquet files (zstd), the client commits once.

Target: at most 1.2x the floor at every size. The harness's RSS column is the whole process
tree (the JVM's heap included); the client's own peak RSS growth per round (the Python process
that runs the statement, which must stay flat across sizes) is printed under the table.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq

from bench.common import NAMESPACE, Benchmark, Case, Contestant, Workspace

SIZES = (1_000_000, 10_000_000, 50_000_000)
TABLE = f"{NAMESPACE}.sql_insert"
SELECT = "SELECT id, concat('row-', id, '-padding-padding') AS s, id * 1.5 AS x, id % 1000 AS g FROM range({rows})"


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def client_rss(run: Callable[[], int], record: list[int]) -> Callable[[], int]:
    """``run``, sampling this process's RSS every 50 ms; its peak growth is appended to ``record``."""

    def sampled() -> int:
        start = peak = _rss()
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.05):
                peak = max(peak, _rss())

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            return run()
        finally:
            done.set()
            thread.join()
            record.append(max(peak, _rss()) - start)

    return sampled


def _label(rows: int) -> str:
    return f"{rows // 1_000_000}M" if rows % 1_000_000 == 0 else f"{rows:,}"


def build(ws: Workspace, rounds: int | None = None) -> Benchmark:
    from tablestore.config import LakehouseConfig, SparkConfig, SqlCatalogConfig
    from tablestore.spark import spark_session
    from tablestore.sql.session import SqlSession

    root = ws.fresh("sql-insert")
    catalog_config = SqlCatalogConfig(
        name="bench", properties={"uri": f"sqlite:///{root}/catalog.db", "warehouse": str(root / "wh")})
    # Spark's defaults otherwise (driver memory included): what a new user gets.
    config = LakehouseConfig(default_catalog="bench", catalogs={"bench": catalog_config}, spark=SparkConfig(conf={
        "spark.sql.parquet.compression.codec": "zstd",
    }))
    spark = spark_session(config, app_name="bench-sql-insert")
    session = SqlSession(config, spark=spark)
    session.execute(f"CREATE DATABASE {NAMESPACE}")
    catalog = session.manager.catalog()
    parquet_dir = root / "parquet"
    rss: dict[tuple[str, str], list[int]] = {}

    def fresh_table() -> None:
        session.execute(f"DROP TABLE IF EXISTS {TABLE} PURGE; "
                        f"CREATE TABLE {TABLE} (id BIGINT, s STRING, x DOUBLE, g BIGINT)")

    def fresh_parquet() -> None:
        shutil.rmtree(parquet_dir, ignore_errors=True)

    def insert(rows: int) -> Callable[[], int]:
        def run() -> int:
            result = session.execute_one(f"INSERT INTO {TABLE} {SELECT.format(rows=rows)}")
            snapshot = catalog.load_table(TABLE).current_snapshot()
            assert snapshot is not None and int(snapshot.summary["added-records"]) == result.affected
            return int(result.affected or 0)
        return run

    def write_parquet(rows: int) -> Callable[[], int]:
        def run() -> int:
            spark.sql(SELECT.format(rows=rows)).write.parquet(str(parquet_dir))
            return sum(pq.ParquetFile(p).metadata.num_rows for p in parquet_dir.glob("*.parquet"))
        return run

    # Untimed: the first statement starts the Python workers and compiles Spark's code paths.
    fresh_table()
    insert(100_000)()
    fresh_parquet()
    write_parquet(100_000)()

    cases = []
    for rows in [s for s in SIZES if s <= ws.rows] or [ws.rows]:
        label = _label(rows)
        floor_rss = rss.setdefault((label, "spark-parquet"), [])
        ours_rss = rss.setdefault((label, "tablestore-sql"), [])
        cases.append(Case(
            label,
            [
                Contestant("spark-parquet", client_rss(write_parquet(rows), floor_rss), fresh_parquet, floor=True),
                Contestant("tablestore-sql", client_rss(insert(rows), ours_rss), fresh_table),
            ],
            rounds=rounds or 3,
            targets={"spark-parquet": 1.2},
        ))
    notes = [
        "floor: spark.sql(select).write.parquet (zstd); tablestore-sql: INSERT INTO ... SELECT through SqlSession "
        "(Spark tasks write the files, one commit); rows/s is rows of the largest size over seconds: read the "
        "x floor column",
    ]
    bench = Benchmark("sql_insert", "sql_insert: SQL INSERT ... SELECT on Spark local[2] against df.write.parquet",
                      cases, notes=notes)

    def cleanup() -> None:
        for (label, who), growth in rss.items():
            if growth:
                rounds_mb = " ".join(f"{g / 2**20:,.0f}" for g in growth)
                notes.append(f"client (Python) peak RSS growth, MB per round: {label} {who}: {rounds_mb}")
        spark.stop()
        session.manager.close()
        shutil.rmtree(root, ignore_errors=True)

    bench.cleanup = cleanup
    return bench


__all__: list[Any] = ["build"]
