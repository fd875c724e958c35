"""Runs many iceberg-oracle jobs in one JVM (started by tests/oracle.py, in the oracle's venv).

Reads a JSON list of jobs from argv[1] and prints one JSON line per job, in order:
{"op": "read", "metadata": PATH, "snapshot_id": N?, "branch": NAME?, "tag": NAME?, "columns": [..]?, "where": SQL?}
{"op": "meta", "metadata": PATH, "name": "files"}
{"op": "sql", "statements": [SQL, ...]}  (uses the batch's warehouse; prints the last result)
"""

import json
import os
import sys

sys.path.insert(0, os.environ["ICEBERG_ORACLE_DIR"])
import oracle


def location(metadata: str) -> str:
    """A metadata file's location as Spark loads it: URIs as they are, local paths made absolute."""
    return metadata if "://" in metadata else os.path.abspath(metadata)


def main() -> int:
    with open(sys.argv[1]) as f:
        batch = json.load(f)
    spark = oracle.session(batch.get("warehouse"))
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
