"""The stack's Spark Connect server: one long-lived Spark application that every Dagster run uses.

    python -m infra.spark_connect --master spark://spark-master:7077 --port 15002

A Dagster run is a new process. With a Spark driver of its own, each run started a JVM, an
application on the master and an executor JVM on the worker, whose Python workers imported
pyspark, pyarrow, pandas and tablestore again: 30 to 50 s per run before its first task, most
of the stack's time (docs/stack.md, Speed). This server keeps the driver, the executors and
their Python workers warm; a run's ``SparkSession.builder.remote("sc://spark-connect:15002")``
is a gRPC client session (``tablestore.spark.spark_session`` makes one for an ``sc://``
master), and the ``tablestore`` data source it registers runs in this server's Python, the
same image's.

The server's settings are the JVM-wide ones that ``spark_session`` gives a session it starts
itself (the Python daemon with tablestore preloaded, Arrow batch sizes and unchecked Arrow
memory, UTC); a Connect client can set only SQL settings. The rest (executor cores and memory,
the executors' Python) come from ``$SPARK_CONF_DIR/spark-defaults.conf``. The process becomes
``spark-submit`` (exec), so the container's init reaps and signals it directly.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

APP_NAME = "lakehouse-spark-connect"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def server_conf(port: int) -> dict[str, str]:
    """What a session started by ``spark_session`` would set JVM-wide, and the gRPC port."""
    from tablestore.spark import DEFAULT_CONF, REQUIRED_CONF, with_java_options

    return {**with_java_options({**DEFAULT_CONF, **REQUIRED_CONF}), "spark.connect.grpc.binding.port": str(port)}


def command(master: str, port: int) -> list[str]:
    import pyspark

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    args = [str(submit), "--class", SERVER_CLASS, "--name", APP_NAME, "--master", master]
    for key, value in server_conf(port).items():
        args += ["--conf", f"{key}={value}"]
    # "spark-internal": the server's classes are in pyspark's own jars, there is no user jar.
    return [*args, "spark-internal"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m infra.spark_connect", description=__doc__.splitlines()[0])
    parser.add_argument("--master", required=True, help="the standalone master, e.g. spark://spark-master:7077")
    parser.add_argument("--port", type=int, default=15002, help="the gRPC port clients connect to (sc://host:PORT)")
    args = parser.parse_args(argv)
    argv_out = command(args.master, args.port)
    os.execv(argv_out[0], argv_out)


if __name__ == "__main__":
    main()
