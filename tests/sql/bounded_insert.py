"""One SQL INSERT ... SELECT of the issue's row shape in a fresh process, measured.

    python -m tests.sql.bounded_insert ROWS [--driver-memory 1g] [--max-result-size 64m]

Prints one JSON line: the rows inserted, the table's count and checksums, the seconds the
INSERT took, the client's RSS before and its peak, and the Spark driver's heap limit. A fresh
process because the driver's memory is fixed when its JVM starts. test_bounded_memory runs it
with a capped driver; run by hand it checks the 5M- and 20M-row INSERTs of issue 29 on the
default configuration (without the flags).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from tablestore.config import LakehouseConfig, SparkConfig, SqlCatalogConfig
from tablestore.sql.session import SqlSession

SHAPE = "SELECT id, concat('row-', id, '-padding-padding'), id * 1.5, id % 1000 FROM range({rows})"


def _status_mb(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def rss_mb() -> float:
    return _status_mb("VmRSS")


def peak_rss_mb() -> float:
    # VmHWM, the high-water mark of this process's own memory. Not getrusage's ru_maxrss: Linux
    # carries that across fork and exec, so a process started by a big one (pytest after half
    # an hour of tests: 2.3 GB) reports its parent's peak as its own.
    return _status_mb("VmHWM")


def run(rows: int, conf: dict[str, str], root: Path) -> dict[str, object]:
    catalog = SqlCatalogConfig(name="lake", properties={"uri": f"sqlite:///{root}/catalog.db", "warehouse": str(root / "wh")},
                            default_database="db")
    config = LakehouseConfig(default_catalog="lake", catalogs={"lake": catalog}, spark=SparkConfig(master="local[2]", conf=conf))
    session = SqlSession(config)
    session.execute("CREATE DATABASE db; CREATE TABLE db.t (id BIGINT, s STRING, x DOUBLE, g BIGINT)")
    spark = session.spark
    jvm = spark._jvm
    assert jvm is not None  # a local session: the driver's JVM is ours
    before = rss_mb()
    started = time.monotonic()
    result = session.execute_one(f"INSERT INTO db.t {SHAPE.format(rows=rows)}")
    seconds = time.monotonic() - started
    peak = peak_rss_mb()
    check = session.execute_one("SELECT count(*), sum(id), sum(g), sum(length(s)), sum(x) FROM db.t").rows[0]
    snapshot = session.manager.catalog().load_table("db.t").current_snapshot()
    return {
        "rows": rows,
        "affected": result.affected,
        "count": check[0], "sum_id": check[1], "sum_g": check[2], "sum_len_s": check[3], "sum_x": check[4],
        "seconds": round(seconds, 2),
        "rss_before_mb": round(before, 1),
        "rss_peak_mb": round(peak, 1),
        "driver_max_heap_mb": jvm.java.lang.Runtime.getRuntime().maxMemory() // (1024 * 1024),
        "driver_alive": not spark.sparkContext._jsc.sc().isStopped(),
        "write_tasks": int((snapshot.summary if snapshot else {}).get("tablestore.write.tasks", "0")),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("rows", type=int)
    parser.add_argument("--driver-memory")
    parser.add_argument("--max-result-size")
    parser.add_argument("--dir", help="where the lake goes (default: a temporary directory)")
    args = parser.parse_args(argv)
    conf = {"spark.ui.enabled": "false"}
    if args.driver_memory:
        conf["spark.driver.memory"] = args.driver_memory
    if args.max_result_size:
        conf["spark.driver.maxResultSize"] = args.max_result_size
    with tempfile.TemporaryDirectory(dir=args.dir) as root:
        print(json.dumps(run(args.rows, conf, Path(root))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
