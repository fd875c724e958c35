"""Runs iceberg-oracle jobs in one JVM (started by tests/oracle.py, in the oracle's venv).

With a file argument: reads one batch from it and prints one JSON line per job. With
``--serve``: stays up for the test session, reading one batch per line of stdin and answering
each with its jobs' lines and then ``{"batch-done": true}``; each batch gets a new Spark session
of the one JVM (its own catalogs, temporary views and settings, so nothing leaks from one batch
into the next), which saves the JVM's start (about 10 s) on every batch after the first.

A batch is {"warehouse": PATH?, "jobs": [...]}; its jobs, one JSON line each, in order:
{"op": "read", "metadata": PATH, "snapshot_id": N?, "branch": NAME?, "tag": NAME?, "columns": [..]?, "where": SQL?}
{"op": "meta", "metadata": PATH, "name": "files"}
{"op": "sql", "statements": [SQL, ...]}  (uses the batch's warehouse; prints the last result)
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

sys.path.insert(0, os.environ["ICEBERG_ORACLE_DIR"])
import oracle


def location(metadata: str) -> str:
    """A metadata file's location as Spark loads it: URIs as they are, local paths made absolute."""
    return metadata if "://" in metadata else os.path.abspath(metadata)


BATCH_DONE = {"batch-done": True}


def run_batch(spark: Any, batch: dict[str, Any]) -> None:
    for job in batch["jobs"]:
        try:
            if job["op"] == "read":
                reader = spark.read.format("iceberg")
                if job.get("snapshot_id") is not None:
                    reader = reader.option("snapshot-id", job["snapshot_id"])
                for ref in ("branch", "tag"):
                    if job.get(ref):
                        reader = reader.option(ref, job[ref])
                df = reader.load(location(job["metadata"]))
                if job.get("where"):
                    df = df.where(job["where"])
                if job.get("columns"):
                    df = df.select(*job["columns"])
                oracle.emit(df, sort=True)
            elif job["op"] == "meta":
                oracle.emit(spark.read.format("iceberg").load(location(job["metadata"]) + "#" + job["name"]))
            elif job["op"] == "sql":
                last = None
                for statement in job["statements"]:
                    last = spark.sql(statement)
                if last is not None and last.schema.fields:
                    oracle.emit(last, sort=True)
                else:
                    print(json.dumps({"columns": [], "rows": []}), flush=True)
            else:
                raise ValueError(f"unknown op {job['op']}")
        except Exception as e:  # report per job, keep the JVM for the rest
            print(json.dumps({"error": f"{type(e).__name__}: {e}"[:4000]}), flush=True)


def batch_session(base: Any, warehouse: str | None) -> Any:
    """A new session of the JVM's one SparkContext, with the batch's hadoop catalog ``ref``
    (as ``oracle.session(warehouse)`` configures it; a session's catalogs are its own)."""
    spark = base.newSession()
    if warehouse:
        spark.conf.set("spark.sql.catalog.ref", "org.apache.iceberg.spark.SparkCatalog")
        spark.conf.set("spark.sql.catalog.ref.type", "hadoop")
        spark.conf.set("spark.sql.catalog.ref.warehouse", os.path.abspath(warehouse))
    return spark


def serve() -> int:
    base = oracle.session()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        batch = json.loads(line)
        run_batch(batch_session(base, batch.get("warehouse")), batch)
        print(json.dumps(BATCH_DONE), flush=True)
    return 0


def main() -> int:
    if sys.argv[1:] == ["--serve"]:
        return serve()
    with open(sys.argv[1]) as f:
        batch = json.load(f)
    run_batch(oracle.session(batch.get("warehouse")), batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
