"""A SQL MERGE of many keys into a large table, under a capped Spark driver, in a process of its own.

    python -m tests.sql.bounded_merge_job ROOT ROWS KEYS [PAD]

Driver memory is fixed when the JVM starts, so the cap (``spark.driver.memory=1g``,
``spark.driver.maxResultSize=64m``) needs a fresh process: this one. It writes a ``ROWS``-row
table with Spark's own writer (``write_dataframe``, no row through this process), then runs

    MERGE INTO db.t USING (KEYS keys spread over twice the table's id range) ...
      WHEN MATCHED THEN UPDATE SET ... WHEN NOT MATCHED THEN INSERT ...

so half the keys update a row in every file and half insert (each source row's string padded
by ``PAD`` bytes, so the statement's changed rows can outgrow the driver's result cap), and prints one JSON line: the
statement's counts, the table's count and distinct ids after it, the seconds it took, and this
process's resident memory before it and at its peak while it ran (sampled every 20 ms).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import psutil

from tablestore.config import LakehouseConfig, SparkConfig, SqlCatalogConfig
from tablestore.spark import spark_session
from tablestore.spark.native.native_write import write_dataframe
from tablestore.sql.session import SqlSession

CAPPED_DRIVER = {"spark.driver.memory": "1g", "spark.driver.maxResultSize": "64m",
                 "spark.sql.shuffle.partitions": "8"}


class PeakRss:
    """The largest resident set size of this process while the block runs."""

    def __init__(self) -> None:
        self.process = psutil.Process()
        self.peak = self.process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)


def main(root: Path, rows: int, keys: int, pad: int = 0, stop: bool = True) -> dict[str, object]:
    """The job; ``stop=False`` leaves the Spark session for the next job (tests/sql/bounded_jobs.py)."""
    catalog = SqlCatalogConfig(name="lake", properties={"uri": f"sqlite:///{root}/catalog.db", "warehouse": str(root / "wh")},
                            default_database="db")
    config = LakehouseConfig(default_catalog="lake", catalogs={"lake": catalog}, spark=SparkConfig(master="local[2]", conf=CAPPED_DRIVER))
    spark = spark_session(config, app_name="tablestore-bounded-merge")
    session = SqlSession(config, spark=spark)
    session.execute("CREATE DATABASE db")
    session.execute("CREATE TABLE db.t (id BIGINT, s STRING, v DOUBLE, g BIGINT)")
    df = spark.range(0, rows, 1, max(2, rows // 1_000_000)).selectExpr(
        "id", "concat('row-', id, '-padding-padding') AS s", "CAST(id AS DOUBLE) * 1.5 AS v", "id % 1000 AS g")
    outcome = write_dataframe(df, "db.t", config=config)
    assert outcome.path == "native", outcome
    step = max(1, 2 * rows // keys)
    statement = (
        f"MERGE INTO db.t t USING (SELECT id * {step} AS id, concat('merged-', id, repeat('x', {pad})) AS s, "
        "CAST(id AS DOUBLE) AS v, "
        f"-1 AS g FROM range({keys})) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET s = s.s, g = s.g WHEN NOT MATCHED THEN INSERT *")
    before = psutil.Process().memory_info().rss
    started = time.monotonic()
    with PeakRss() as peak:
        result = session.execute_one(statement)
    seconds = time.monotonic() - started
    total, distinct, merged = session.execute_one(
        "SELECT count(*), count(DISTINCT id), count_if(g = -1) FROM db.t").rows[0]
    if stop:
        spark.stop()
    return {"rows": rows, "keys": keys, "result": result.rows[0], "count": total, "distinct": distinct,
            "merged": merged, "seconds": round(seconds, 1), "rss_before": before, "rss_peak": peak.peak,
            "expected_matched": min(keys, len(range(0, rows, step)))}


if __name__ == "__main__":
    rows, keys, *pad = (int(a) for a in sys.argv[2:])
    print(json.dumps(main(Path(sys.argv[1]), rows, keys, pad[0] if pad else 0)))
