"""The Spark contestants of bench/row_level.py: one Spark session for the whole benchmark.

Two ways a data engineer runs an upsert on Spark with tablestore, both measured:

- ``tablestore-spark`` / ``tablestore-spark-cow``: SQL ``MERGE INTO t USING staging s ON
  t.event_id = s.event_id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *``
  through a :class:`~tablestore.sql.session.SqlSession` on this Spark session. This is what
  one writes on Spark (as with Iceberg's Spark runtime): Spark reads the target with its
  ``_file``/``_pos`` columns and the staging table, joins them, and the driver writes the
  changed rows and commits once.
- ``tablestore-spark-api`` / ``tablestore-spark-api-cow``:
  ``table.with_engine(SparkEngine(spark)).merge(df, ...)`` with the source as a cached Spark
  DataFrame: the source's rows come to the driver, the per-file matching and rewriting runs as
  Spark tasks on the executors, the driver writes the new rows and commits.

The GDPR delete on Spark is ``table.with_engine(SparkEngine(spark)).delete(...)`` in both modes:
SQL ``DELETE ... WHERE user_id IN (...)`` is a plain filter, which runs in the table core
without Spark (the local contestants already measure it).

The session (``local[2]``, ``PYSPARK_PYTHON`` = this Python, as the tests run it) starts at the
first Spark round's untimed setup, never when only other contestants are chosen
(``BENCH_CONTESTANTS``), and is warmed up untimed: a JVM job, a Python-worker job, a read
through the ``tablestore`` data source and a MERGE of a 10-row query into a 10-row table (on
Spark's path), so no round pays the JVM's or the workers' start or the first code generation.
The JVM still compiles the hot paths at full size during the first rounds (thousands of
methods, seconds of compiler CPU on two cores): take the median of three rounds or more.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.common import NAMESPACE

CATALOG = "rl"  # the benchmark's catalog name; the SQL session reaches it under this name
MERGE_SQL = ("MERGE INTO {target} t USING {source} s ON t.event_id = s.event_id "
             "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")


class SparkSide:
    """The Spark session, the SQL session on it and the staging tables, made on first use."""

    def __init__(self, base_dir: Path, catalog: Any) -> None:
        from tablestore.config import LakehouseConfig, SparkConfig, SqlCatalogConfig

        self.catalog = catalog
        catalog_config = SqlCatalogConfig(name=CATALOG, properties={"uri": f"sqlite:///{base_dir}/rounds.db",
                                                                    "warehouse": str(base_dir / "wh")})
        spark = SparkConfig(master="local[2]", conf={
            # A MERGE collects its changed rows (1M at full scale) through the driver's JVM.
            "spark.driver.memory": "4g",
        })
        self.config = LakehouseConfig(default_catalog=CATALOG, catalogs={CATALOG: catalog_config}, spark=spark)
        self._spark: Any = None
        self._sql: Any = None
        self._frames: dict[str, Any] = {}

    @property
    def spark(self) -> Any:
        if self._spark is None:
            from tablestore.spark import spark_session
            from tablestore.sql.session import SqlSession

            self._spark = spark_session(self.config, app_name="bench-row-level")
            self._sql = SqlSession(self.config, spark=self._spark)
            # Warm-up, untimed: a JVM job, a job in Python workers (starts the worker daemon)
            # and a read through the tablestore data source ...
            self._spark.range(1000).selectExpr("sum(id)").collect()
            self._spark.sparkContext.parallelize(range(4), 2).map(lambda x: x + 1).collect()
            warmup = f"{CATALOG}.{NAMESPACE}.warmup"
            self._spark.read.format("tablestore").load(warmup).collect()
            # ... and a MERGE on Spark's path, so the first round does not pay for the first
            # Parquet scan, join, shuffle and mapInArrow write. A table name as the source would
            # not do: a same-typed source table of up to 250,000 rows merges in the table core
            # (``Table.merge``) without a Spark job, while a query source always takes Spark's.
            self._sql.execute_one(MERGE_SQL.format(target=warmup, source=f"(SELECT * FROM {warmup})"))
        return self._spark

    def prepare(self, warmup: pa.Table) -> None:
        """A tiny table for the warm-up read (untimed, before any round)."""
        table = self.catalog.create_table(f"{NAMESPACE}.warmup", schema=warmup.schema)
        table.append(warmup)

    def staging(self, name: str, source: pa.Table) -> str:
        """The upsert source as a table of the catalog (written once, untimed): what SQL's MERGE
        reads as ``USING``. Returns its SQL name."""
        table = self.catalog.create_table(f"{NAMESPACE}.{name}", schema=source.schema)
        table.append(source)
        return f"{CATALOG}.{NAMESPACE}.{name}"

    def source_frame(self, staging: str) -> Any:
        """The staging table as a Spark DataFrame cached in Spark's memory (built and counted
        untimed at the first round's setup; the source never changes, so every round reuses it)."""
        if staging not in self._frames:
            frame = self.spark.read.format("tablestore").load(staging).cache()
            frame.count()
            self._frames[staging] = frame
        return self._frames[staging]

    def merge_sql(self, target: Any, staging: str) -> int:
        """SQL MERGE INTO on Spark; returns the rows updated plus inserted."""
        self.spark  # noqa: B018 - started by the round's setup; this only makes sure
        name = f"{CATALOG}.{'.'.join(target.identifier)}"
        result = self._sql.execute_one(MERGE_SQL.format(target=name, source=staging))
        row = dict(zip(result.columns, result.rows[0], strict=True))
        if row["num_deleted_rows"]:
            raise AssertionError(f"an upsert deleted {row['num_deleted_rows']} rows")
        return int(row["num_updated_rows"]) + int(row["num_inserted_rows"])

    def merge_api(self, target: Any, staging: str) -> int:
        """``merge`` on the Spark engine with the cached DataFrame as the source."""
        from tablestore.spark import SparkEngine

        result = (target.with_engine(SparkEngine(self.spark))
                  .merge(self.source_frame(staging), on="t.event_id = s.event_id")
                  .when_matched_update_all().when_not_matched_insert_all().execute())
        return int(result.updated) + int(result.inserted)

    def delete(self, target: Any, condition: str) -> int:
        from tablestore.spark import SparkEngine

        return int(target.with_engine(SparkEngine(self.spark)).delete(condition))

    def stop(self) -> None:
        for frame in self._frames.values():
            frame.unpersist()
        if self._spark is not None:
            self._spark.stop()
