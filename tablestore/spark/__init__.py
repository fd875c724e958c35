"""The Spark engine: a SparkSession set up for tablestore, file tasks on executors, table views.

    from tablestore.spark import spark_session, SparkEngine
    spark = spark_session(config)          # master from config.spark, `tablestore` source registered
    spark.read.format("tablestore").load("db.events").groupBy("country").count().show()
    table.with_engine(SparkEngine(spark))  # the table's file tasks run on the executors

    from tablestore.spark.native.native_write import write_dataframe   # Spark's own Parquet writer,
    write_dataframe(df, "db.events")                                   # one tablestore commit
    from tablestore.spark.native.native_read import read_dataframe     # Spark's own Parquet reader,
    read_dataframe(spark, "db.events")                                 # planned by tablestore

pyspark is imported only by this package and the SQL layer; the core (spec, io, engine, catalog,
table, maintenance) never imports it (the import-linter contract in pyproject.toml). Importing
this module imports no pyspark: its functions import the engine's parts when called, so the
worker daemon (``daemon.py``) can live in the package and still order ``sys.path`` first.
Its parts: ``datasource/`` (the ``tablestore`` data source and its streaming sink), ``native/``
(Spark's own Parquet reader and writer), ``tasks/`` (the jobs of SQL writes, row-level
statements and column merges), and below them the write path every write shares
(``write_task.py``, ``commit.py``) and the conversions (``convert.py``, ``table_types.py``).
"""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar

from tablestore.config import load_config
from tablestore.engine.local import LocalEngine
from tablestore.option_values import epoch_ms
from tablestore.spark.options import NATIVE_READ_CONF, SOURCE_NAME, config_to_json, quote_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tablestore.catalog_manager import CatalogManager
    from tablestore.config import LakehouseConfig
    from tablestore.table.ops.column_merge import Fragment, MergePlan

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["SparkEngine", "register_data_source", "register_table_view", "spark_session"]

# Settings every tablestore session needs; a key in the config's spark.conf wins over them.
REQUIRED_CONF = {
    # Iceberg timestamps are UTC; Spark would otherwise show and parse them in the JVM's zone.
    "spark.sql.session.timeZone": "UTC",
    # The Python data source API refuses readers with pushFilters unless this is on.
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # read_dataframe: Parquet columns matched by field id when the read schema carries ids
    # (only then; other reads are unchanged), a column a file lacks read as NULL.
    **NATIVE_READ_CONF,
}
# Defaults a config may change. Spark hands a Python writer Arrow batches of this many rows;
# 10,000 (Spark's default) makes the JVM-to-Python transfer of a write about a quarter slower.
DEFAULT_CONF = {
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    # Spark checks the byte size of the Arrow batch it builds for Python after every row unless
    # this is INT_MAX: half the JVM's time in a data source write (batches stay bounded by the
    # row count above; Spark 3 had no byte limit at all).
    "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
    # Python workers forked with pyspark, pyarrow, pandas and tablestore already imported
    # (see spark/daemon.py): without it every fresh worker spends 2-3 CPU seconds importing.
    "spark.python.daemon.module": "tablestore.spark.daemon",
}
# Arrow's bounds and reference-count checks on every value the JVM reads or writes are a fifth
# of a data source read's JVM time; the buffers are Arrow's own, built by Spark or by pyarrow in
# our workers. Added to the JVM options unless they already set the property either way.
UNSAFE_ARROW_PROPERTY = "arrow.enable_unsafe_memory_access"
JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
# Sensible on one machine (tests, `make demo`); a cluster's config sets its own.
# A master URL of this scheme is a Spark Connect server (``sc://spark-connect:15002``).
CONNECT_SCHEME = "sc://"
LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.showConsoleProgress": "false",
}


def spark_session(config: LakehouseConfig | None = None, app_name: str = "tablestore") -> SparkSession:
    """A SparkSession (created, or the active one) that reads and writes tablestore tables.

    The master and extra settings come from ``config.spark`` (``load_config()`` when None).
    Executors run this very Python (``PYSPARK_PYTHON`` = ``sys.executable``), so they import
    the same tablestore. ``config`` is handed to the ``tablestore`` data source, which uses it
    when a read or write gives no ``config`` option.
    """
    from pyspark.sql import SparkSession

    effective = config if config is not None else load_config()
    # Read by the SparkContext when it starts its Python workers; must be set before that.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = effective.spark.master
    user_conf = dict(effective.spark.conf)
    if master.startswith(CONNECT_SCHEME):
        return _connect_session(master, app_name, user_conf, config)
    conf = with_java_options({**DEFAULT_CONF, **(LOCAL_CONF if master.startswith("local") else {}), **REQUIRED_CONF,
                              **user_conf})
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    # getOrCreate returns an existing session unchanged; SQL settings can still be applied.
    for key, value in {**REQUIRED_CONF, **user_conf}.items():
        if key.startswith("spark.sql."):
            spark.conf.set(key, value)
    register_data_source(spark, config)
    return spark


def _connect_session(url: str, app_name: str, user_conf: dict[str, str],
                     config: LakehouseConfig | None) -> SparkSession:
    """A Spark Connect session on the long-lived server at ``url`` (``sc://host:port``).

    The server's own settings (its JVMs, the Python daemon, Arrow) are its configuration's;
    only the session's SQL settings can be set from here. The ``tablestore`` data source is
    registered in the session and runs in the server's Python (the same image, so the same
    tablestore)."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).appName(app_name).getOrCreate()
    for key, value in {**REQUIRED_CONF, **user_conf}.items():
        if key.startswith("spark.sql."):
            spark.conf.set(key, value)
    register_data_source(spark, config)
    return spark


def with_java_options(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with Arrow's unchecked memory access added to the driver's and executors' JVM options.

    Takes effect where a JVM starts with these settings: a new local session's driver, a
    cluster's executors. A config that names the property itself (``=false``) keeps its choice.
    """
    out = dict(conf)
    for key in JAVA_OPTION_KEYS:
        current = out.get(key, "")
        if UNSAFE_ARROW_PROPERTY not in current:
            out[key] = f"{current} -D{UNSAFE_ARROW_PROPERTY}=true".strip()
    return out


def register_data_source(spark: SparkSession, config: LakehouseConfig | None = None) -> None:
    """Register the ``tablestore`` data source in ``spark``, with ``config`` as its default."""
    # Imported here, as every part of the engine is: importing this package loads no pyspark,
    # so the worker daemon (spark/daemon.py) can order sys.path before pyspark is imported.
    from tablestore.spark.datasource.source import configured_source

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(configured_source(config))


def register_table_view(
    spark: SparkSession,
    manager: CatalogManager,
    name_parts: str | tuple[str, ...],
    view_name: str,
    snapshot_id: int | None = None,
    as_of_timestamp: int | str | datetime.datetime | None = None,
    *,
    columns: list[str] | None = None,
    filter: str | None = None,
    pushdown: bool = False,
) -> DataFrame:
    """Create (or replace) the temporary view ``view_name`` over a table; returns its DataFrame.

    The name is resolved by ``manager`` (its current catalog and database) here, so the view
    reads the same table whatever the manager's state later. The view reads the snapshot that
    is current now (or the one chosen): register it again to see later commits. ``columns``
    and ``filter`` narrow what is read (always safe); ``pushdown`` also hands Spark's filters
    to the scan, which is only safe when the view is scanned once (see datasource/source.py).
    """
    catalog, identifier = manager.resolve_table(name_parts)
    reader = (
        spark.read.format(SOURCE_NAME)
        .option("catalog", catalog.name)
        .option("pushdown", str(pushdown).lower())
    )
    config = getattr(manager, "config", None)
    if config is not None:
        reader = reader.option("config", config_to_json(config))
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(snapshot_id))
    if as_of_timestamp is not None:
        reader = reader.option("as-of-timestamp", str(epoch_ms(as_of_timestamp, "as_of_timestamp")))
    if columns is not None:
        reader = reader.option("columns", ",".join(columns))
    if filter:
        reader = reader.option("filter", filter)
    df = reader.load(quote_name(identifier))
    df.createOrReplaceTempView(view_name)
    return df


# A function whose pickle is larger than this (Spark's default broadcast threshold for a Python
# command) ships data with it, like a MERGE's source rows.
LARGE_FUNCTION_BYTES = 1 << 20


def _tasks_per_core(fn: Callable[..., object]) -> int:
    """Four tasks per core balance uneven file tasks; a large function reaches every task anew
    (Spark broadcasts it, and each task reads and unpickles it), so it gets one task per core. An
    upsert of 1M keys into 10M rows ships an 89 MB source: its matching took 4.1 s on 8 tasks and
    2.6-3.0 s on 2 (local[2]; 2.4 s on the local engine). Unpickling alone is about 0.04 s a task,
    so most of the cost per task is Spark's delivery of the broadcast."""
    from pyspark import cloudpickle

    try:
        size = len(cloudpickle.dumps(fn))
    except Exception:  # Spark pickles it again and says what cannot be shipped
        return 4
    return 1 if size > LARGE_FUNCTION_BYTES else 4


class SparkEngine:
    """Runs file tasks on Spark executors: the Spark implementation of ``Engine``.

    ``fn`` and the items are pickled (cloudpickle) to the executors, so they must carry plain
    data: FileIO, schemas, specs, file tasks. A closure over a Table or a catalog (with its
    database connection) cannot be shipped.
    """

    def __init__(self, spark: SparkSession, max_partitions: int | None = None) -> None:
        self.spark = spark
        self.max_partitions = max_partitions

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``fn`` on every item, one Spark task per item (up to ``max_partitions``), in order."""
        work = list(items)
        if not work:
            return []
        sc = self.spark.sparkContext
        limit = self.max_partitions or max(1, sc.defaultParallelism) * _tasks_per_core(fn)
        rdd = sc.parallelize(work, min(len(work), limit))
        # collect() returns partitions in order and each keeps its items' order. What comes back
        # is what the task functions return (file descriptions, row counts), never a table's rows.
        return rdd.map(fn).collect()

    def imap(self, fn: Callable[[T], R], items: Iterable[T], prefetch: int | None = None) -> Iterator[R]:
        """``fn`` on each item in turn, here on the driver, as the consumer asks: a streamed scan
        (``to_batches``) reads one task at a time, so nothing is collected ahead of it."""
        return (fn(item) for item in items)

    def rewrite_fragments(self, source: object, fragments: list[Fragment], plan: MergePlan) -> list[Fragment] | None:
        """A column merge from a Spark DataFrame runs as Spark tasks (see tasks/column_merge_tasks.py);
        None for any other source, which the table layer merges with :meth:`map`."""
        from pyspark.sql import DataFrame

        from tablestore.spark.tasks.column_merge_tasks import spark_rewrite

        if not isinstance(source, DataFrame):
            return None
        return spark_rewrite(source, fragments, plan)

    def __reduce__(self) -> tuple[Callable[[], LocalEngine], tuple[()]]:
        # Task functions are often methods of objects that hold their engine (a TableScan's
        # read), so the engine travels with them. A SparkSession cannot leave the driver, and
        # on an executor work runs locally anyway: it arrives as a LocalEngine.
        return (LocalEngine, ())

    def __repr__(self) -> str:
        return f"SparkEngine(master={self.spark.sparkContext.master!r})"

