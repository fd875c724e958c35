"""A streaming query run as its own process by tests/spark/test_spark_stream.py, so that the
test can SIGKILL it (driver and JVM) in the middle of a run.

    python -m tests.spark.stream_job CONFIG_JSON TABLE INPUT_DIR CHECKPOINT

It reads the Parquet files of INPUT_DIR one file per micro-batch and appends them to TABLE
with the tablestore sink, until it is killed.
"""

from __future__ import annotations

import sys

from tablestore.config import LakehouseConfig
from tablestore.spark import spark_session
from tests.spark.stream_schema import INPUT_SCHEMA


def main(config_json: str, table: str, input_dir: str, checkpoint: str) -> None:
    spark = spark_session(LakehouseConfig.from_json(config_json), app_name="tablestore-stream-job")
    source = spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).parquet(input_dir)
    query = (source.writeStream.format("tablestore").outputMode("append")
             .option("checkpointLocation", checkpoint).trigger(processingTime="1 second").start(table))
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:5])
