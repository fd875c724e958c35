"""Spark reads and writes through the ``tablestore`` data source against Spark's own Parquet.

Cases (the same Spark session, ``local[2]``, for every contestant):

- write: the 10M events, cached in Spark's memory, written into an unpartitioned table
  (Parquet with field ids, metrics, manifests, one commit) against ``df.write.parquet`` of the
  same DataFrame, all zstd. Two tablestore contestants: ``tablestore`` is
  ``write_dataframe(df, table)``, which lets Spark's Parquet writer write the files when the
  DataFrame maps exactly onto the table (it does here); ``tablestore-source`` is
  ``df.write.format("tablestore").mode("append")``, the Python data source, which pays the
  JVM's row-to-Arrow transfer on top (see docs/spark.md for what the session does about it).
- read: count rows and aggregate every column (so every value is decoded and reaches Spark)
  of the table the write left, against ``spark.read.parquet`` of the very same data files.
  Two tablestore contestants: ``tablestore`` is ``spark.read.format("tablestore")``, the
  Python data source, which pays the Arrow-to-row transfer into the JVM; ``tablestore-native`` is
  ``read_dataframe(spark, table)``, which plans the scan with tablestore and lets Spark's
  Parquet reader read the planned files by field id (it does here).

The floor is Spark's built-in Parquet source; the target is at most 1.5x its time.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from bench.common import (
    NAMESPACE,
    SCHEMA,
    Benchmark,
    Case,
    Contestant,
    Workspace,
)

CODEC = "zstd"
TABLE = f"{NAMESPACE}.spark_events"
SOURCE_FILES = 8  # the cached source DataFrame has about this many partitions


def _aggregates() -> list[Any]:
    """One aggregate per column, so no reader can skip a column (Spark prunes Parquet columns)."""
    from pyspark.sql import functions as F

    return [
        F.count("*").alias("rows"),
        F.sum("event_id"), F.max("event_ts"), F.sum("user_id"), F.max("country"), F.max("event_type"),
        # Summed as decimals: a float sum depends on the order of the rows, which differs by reader.
        F.sum("quantity"), F.sum(F.col("price").cast("decimal(20,2)")), F.sum("amount"),
        F.max("device"), F.sum(F.col("flag").cast("int")),
    ]


def build(ws: Workspace, rounds: int | None = None) -> Benchmark:
    from pyspark.sql import DataFrame

    from tablestore.config import LakehouseConfig, SparkConfig, SqlCatalogConfig
    from tablestore.spark import spark_session
    from tablestore.spark.native.native_read import read_table
    from tablestore.spark.native.native_write import write_dataframe

    root = ws.fresh("spark-io")
    source_dir = root / "source"
    source_dir.mkdir()
    data = ws.data
    step = -(-data.num_rows // SOURCE_FILES)
    for i in range(SOURCE_FILES):  # untimed: the input both writers read from Spark's cache
        pq.write_table(data.slice(i * step, step), source_dir / f"part-{i}.parquet", compression=CODEC)

    catalog_config = SqlCatalogConfig(
        name="bench", properties={"uri": f"sqlite:///{root}/catalog.db", "warehouse": str(root / "wh")})
    config = LakehouseConfig(default_catalog="bench", catalogs={"bench": catalog_config}, spark=SparkConfig(conf={
        "spark.driver.memory": "6g",  # the cached 10M rows and both writers' buffers
        "spark.sql.parquet.compression.codec": CODEC,
        "spark.sql.shuffle.partitions": "4",
    }))
    spark = spark_session(config, app_name="bench-spark-io")
    catalog = catalog_config.load()
    catalog.create_namespace(NAMESPACE)
    source = spark.read.parquet(str(source_dir)).cache()
    rows = source.count()
    state: dict[str, Any] = {}

    def fresh_table() -> None:
        if catalog.table_exists(TABLE):
            catalog.drop_table(TABLE, purge=True)
        catalog.create_table(TABLE, schema=SCHEMA)

    def fresh_parquet() -> None:
        state["parquet_dir"] = root / "parquet"
        shutil.rmtree(state["parquet_dir"], ignore_errors=True)

    def added_records() -> int:
        snapshot = catalog.load_table(TABLE).current_snapshot()
        assert snapshot is not None
        return int(snapshot.summary["added-records"])

    def write_ours() -> int:
        outcome = write_dataframe(source, TABLE, "append", config=config)
        assert outcome.path == "native", outcome
        return added_records()

    def write_source() -> int:
        source.write.format("tablestore").mode("append").save(TABLE)
        return added_records()

    def write_parquet() -> int:
        source.write.parquet(str(state["parquet_dir"]))
        return sum(pq.ParquetFile(p).metadata.num_rows for p in Path(state["parquet_dir"]).glob("*.parquet"))

    def aggregate(df: DataFrame, who: str) -> int:
        row = df.agg(*_aggregates()).collect()[0]
        state[who] = tuple(row)
        for other in ("floor", "ours", "native"):
            if other != who and state.get(other) is not None and state[other] != state[who]:
                raise AssertionError(f"the readers disagree: {other} {state[other]} != {who} {state[who]}")
        return int(row["rows"])

    def table_files() -> list[str]:
        tasks = catalog.load_table(TABLE).scan().plan_files()
        return [t.file.file_path for t in tasks]

    def read_ours() -> int:
        return aggregate(spark.read.format("tablestore").load(TABLE), "ours")

    def read_native() -> int:
        outcome = read_table(spark, TABLE, config=config)
        assert outcome.path == "native", outcome
        return aggregate(outcome.df, "native")

    def read_parquet() -> int:
        return aggregate(spark.read.parquet(*table_files()), "floor")

    def cleanup() -> None:
        source.unpersist()
        spark.stop()
        catalog.close()
        shutil.rmtree(root, ignore_errors=True)

    write = Case(
        "write",
        [
            Contestant("spark-parquet", write_parquet, fresh_parquet, floor=True),
            Contestant("tablestore", write_ours, fresh_table),
            Contestant("tablestore-source", write_source, fresh_table),
        ],
        rounds=rounds or 3,
        targets={"spark-parquet": 1.5},
    )
    read = Case(
        "read",
        [
            Contestant("spark-parquet", read_parquet, floor=True),
            Contestant("tablestore", read_ours),
            Contestant("tablestore-native", read_native),
        ],
        rounds=rounds or 5,
        targets={"spark-parquet": 1.5},
    )
    return Benchmark(
        "spark_io",
        f"spark_io: {rows:,} rows x 10 columns through Spark local[2], unpartitioned, {CODEC}",
        [write, read],
        notes=[
            "write: a cached DataFrame; floor df.write.parquet; tablestore write_dataframe (Spark's Parquet "
            "writer with field ids, then footers, metrics, manifests and one commit); tablestore-source "
            "df.write.format('tablestore') (the Python data source)",
            "read: count + an aggregate of every column; floor spark.read.parquet of the table's own "
            "data files, tablestore spark.read.format('tablestore'), tablestore-native read_dataframe "
            "(tablestore plans, Spark's Parquet reader reads by field id); planning included",
            "seconds: median of the rounds, contestants interleaved",
        ],
        cleanup=cleanup,
    )
