"""A streaming query from one tablestore table to another, run as its own process by
tests/spark/test_spark_stream_read.py so that the test can SIGKILL it between micro-batches.

    python -m tests.spark.stream_read_job CONFIG_JSON SOURCE TARGET CHECKPOINT

Each micro-batch takes one snapshot of SOURCE (streaming-max-files-per-micro-batch 1, one file
per snapshot) and appends its rows to TARGET with the tablestore sink, until it is killed.
"""

from __future__ import annotations

import sys

from tablestore.config import LakehouseConfig
from tablestore.spark import spark_session


def main(config_json: str, source: str, target: str, checkpoint: str) -> None:
    spark = spark_session(LakehouseConfig.from_json(config_json), app_name="tablestore-stream-read-job")
    stream = spark.readStream.format("tablestore").option("streaming-max-files-per-micro-batch", 1).load(source)
    query = (stream.writeStream.format("tablestore").outputMode("append")
             .option("checkpointLocation", checkpoint).trigger(processingTime="1 second").start(target))
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:5])
