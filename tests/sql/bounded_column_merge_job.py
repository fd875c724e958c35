"""CALL system.merge_columns from a source larger than a capped Spark driver would hold, in a
process of its own.

    python -m tests.sql.bounded_column_merge_job ROOT ROWS PAD

Driver memory is fixed when the JVM starts, so the cap (``spark.driver.memory=1g``,
``spark.driver.maxResultSize=64m``: tests/sql/bounded_merge_job.py) needs a fresh process: this
one. It writes a ``ROWS``-row table and a source of the same keys whose feature column holds
``PAD`` bytes a row (Spark's own writer: no row through this process), merges the feature into
the table with the procedure, and prints one JSON line: the procedure's result, checks of the
merged values, the snapshot summary, the source's Arrow size, the seconds the merge took, and
this process's resident memory before it and at its peak while it ran.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import psutil

from tablestore.config import LakehouseConfig, SparkConfig, SqlCatalogConfig
from tablestore.spark import spark_session
from tablestore.spark.native.native_write import write_dataframe
from tablestore.sql.session import SqlSession
from tests.sql.bounded_merge_job import CAPPED_DRIVER, PeakRss


def main(root: Path, rows: int, pad: int, stop: bool = True) -> dict[str, object]:
    """The job; ``stop=False`` leaves the Spark session for the next job (tests/sql/bounded_jobs.py)."""
    catalog = SqlCatalogConfig(name="lake", properties={"uri": f"sqlite:///{root}/catalog.db", "warehouse": str(root / "wh")},
                            default_database="db")
    config = LakehouseConfig(default_catalog="lake", catalogs={"lake": catalog}, spark=SparkConfig(master="local[2]", conf=CAPPED_DRIVER))
    spark = spark_session(config, app_name="tablestore-bounded-column-merge")
    session = SqlSession(config, spark=spark)
    session.execute("CREATE DATABASE db")
    session.execute("CREATE TABLE db.t (id BIGINT, s STRING)")
    session.execute("CREATE TABLE db.src (id BIGINT, feature STRING)")
    feature = f"concat('f-', id, '-', repeat('x', {pad}))"
    for name, expr, parts in (("db.t", "concat('row-', id) AS s", 2), ("db.src", f"{feature} AS feature", 4)):
        outcome = write_dataframe(spark.range(0, rows, 1, parts).selectExpr("id", expr), name, config=config)
        assert outcome.path == "native", outcome
    source_bytes = rows * (len(f"f-{rows // 2}-") + pad)  # about the Arrow bytes of the feature column
    before = psutil.Process().memory_info().rss
    started = time.monotonic()
    with PeakRss() as peak:
        result = session.execute_one("CALL system.merge_columns(table => 'db.t', source => 'db.src', on => 'id')")
    seconds = time.monotonic() - started
    checks = session.execute_one(
        f"SELECT count(*), count_if(feature = {feature}), count_if(s = concat('row-', id)) FROM db.t").rows[0]
    snapshot = session.manager.catalog().load_table("db.t").current_snapshot()
    assert snapshot is not None
    if stop:
        spark.stop()
    return {"result": result.rows[0][0], "checks": checks, "summary": dict(snapshot.summary),
            "source_bytes": source_bytes, "seconds": round(seconds, 1), "rss_before": before, "rss_peak": peak.peak}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))))
