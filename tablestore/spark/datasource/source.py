"""The ``tablestore`` data source for Spark (the PySpark 4 Python data source API): the class
Spark registers. Its reads are in :mod:`tablestore.spark.datasource.source_read`, its writes in
:mod:`tablestore.spark.datasource.source_write`, its streaming sink in
:mod:`tablestore.spark.datasource.stream`, its streaming reads in
:mod:`tablestore.spark.datasource.stream_read` and its options in :mod:`tablestore.spark.options`.

    spark.read.format("tablestore").option("snapshot-id", 123).load("cat.db.t")
    df.write.format("tablestore").mode("append").save("cat.db.t")

Where each piece runs. Spark calls a Python data source in three kinds of processes: Python
workers that the *driver* JVM starts for planning (``schema()``, ``reader()``, ``pushFilters``,
``partitions()``, ``writer()``, ``commit()``, ``abort()``), and Python workers on the
*executors* (``read()``, ``write()``). Nothing is shared between them but what is pickled, so:

- the table is resolved once, on the driver, when the DataFrame is loaded (``schema()``): the
  catalog (from the ``config`` option, else the config given to ``spark_session``, else
  ``load_config()``) yields the metadata location, the snapshot to read and its schema. That
  pins the snapshot: a DataFrame keeps reading the snapshot that was current when it was
  loaded (load it again, or register the view again, to see newer commits);
- executors get plain data only: FileIO properties, schema and partition-spec JSON, table
  properties and location, and one :class:`~tablestore.table.read.scan.FileTask` per Spark
  partition. Never a catalog, a SQL connection or a live Table.

Types: see :mod:`tablestore.spark.convert` (time as bigint microseconds, uuid and
fixed as binary, nanosecond timestamps truncated to microseconds).

Projection. Spark 4.3 does not tell a Python data source which columns a query needs (its
scan builder has no column pruning), so every column is read unless the ``columns`` option
(comma-separated top-level names) narrows the DataFrame.

Filters. Spark's pushed filters are converted to tablestore expressions and used for manifest,
partition and column-statistics pruning and as the exact row filter; filters that cannot be
converted are returned to Spark. This is off by default (option ``pushdown``): Spark 4.3 keeps
the reader planned for the *last* filtered scan of a relation and reuses it for later scans of
the same relation that push no filter, or for another scan of it in the same query (a self
join or union), which then silently loses rows. Turn it on only for a DataFrame (or view)
that is scanned once; the ``filter`` option (SQL text) is always safe, because it is part of
the relation itself.
"""

from __future__ import annotations

from typing import ClassVar

from pyspark.sql import types as st
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)

from tablestore.config import LakehouseConfig
from tablestore.errors import SchemaError
from tablestore.spark.commit import WRITE_ID_PROPERTY
from tablestore.spark.convert import spark_schema
from tablestore.spark.datasource.source_read import (
    FileTaskPartition,
    ReadState,
    TablestorePushdownReader,
    TablestoreReader,
    resolve_read,
)
from tablestore.spark.datasource.source_write import TablestoreWriter, resolve_write
from tablestore.spark.datasource.stream import stream_writer
from tablestore.spark.datasource.stream_read import CHANGELOG, changelog_spark_schema, stream_reader
from tablestore.spark.options import (
    SNAPSHOT_PROPERTY_PREFIX,
    SOURCE_NAME,
    bool_option,
    config_to_json,
    parse_name,
    quote_name,
    table_options,
)
from tablestore.spark.write_task import TablestoreCommitMessage, WriteTarget, check_write_schema


class TablestoreDataSource(DataSource):
    """``spark.read.format("tablestore")`` and ``df.write.format("tablestore")``.

    Options: ``path`` (the table: ``t``, ``db.t`` or ``catalog.db.t``, resolved by a
    CatalogManager), ``catalog`` (then ``path`` is the identifier inside that catalog),
    ``config`` (LakehouseConfig JSON), ``snapshot-id``, ``as-of-timestamp`` (epoch ms or ISO),
    ``ref`` (a branch or tag name, or a snapshot id: what SQL's ``VERSION AS OF`` passes),
    ``branch``/``tag``, ``columns``, ``filter`` (SQL), ``pushdown`` (true/false), ``split-size``
    (bytes; default the table's ``read.split.target-size``, else 128 MB), ``row-lineage``
    (true: the columns ``_row_id`` and ``_last_updated_sequence_number`` appended),
    ``start-snapshot-id``/``end-snapshot-id`` (an incremental append scan: the rows appended
    after the start snapshot up to the end one, default the current) for reads;
    ``snapshot-property.<key>`` for writes. ``df.writeStream.format("tablestore")`` is an
    exactly-once streaming sink (see :mod:`tablestore.spark.datasource.stream`), and
    ``spark.readStream.format("tablestore")`` reads the appends of each new snapshot as
    micro-batches (see :mod:`tablestore.spark.datasource.stream_read`).
    """

    # Set on the subclass that spark_session registers, so that the config given there reaches
    # the Python workers (they run in other processes and only see what is pickled).
    default_config_json: ClassVar[str | None] = None

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def _state(self) -> ReadState:
        state = self.__dict__.get("_read_state")
        if state is None:
            state = resolve_read(self.options, self.default_config_json)
            # Kept on the instance: Spark pickles the data source after schema(), so reader()
            # sees the very snapshot that schema() described.
            self._read_state = state
        return state

    def schema(self) -> st.StructType:
        schema = spark_schema(self._state().projected())
        return changelog_spark_schema(schema) if bool_option(self.options, CHANGELOG, False) else schema

    def reader(self, schema: st.StructType) -> DataSourceReader:
        state = self._state()
        expected = spark_schema(state.projected())
        if schema.fieldNames() != expected.fieldNames():
            raise SchemaError(
                f"table {state.table_name} has the columns {', '.join(expected.fieldNames())}; do not pass "
                "a schema to spark.read for the tablestore source (use the columns option to select)"
            )
        cls = TablestorePushdownReader if state.pushdown else TablestoreReader
        return cls(state, schema)

    def writer(self, schema: st.StructType, overwrite: bool) -> DataSourceWriter:
        target = resolve_write(self.options, self.default_config_json)
        check_write_schema(schema, target)
        return TablestoreWriter(target, overwrite)

    def streamReader(self, schema: st.StructType) -> DataSourceStreamReader:
        """Streaming reads: the appends of each new snapshot as micro-batches (stream_read)."""
        return stream_reader(self.options, self.default_config_json, self._state(), schema)

    def streamWriter(self, schema: st.StructType, overwrite: bool) -> DataSourceStreamWriter:
        """The Structured Streaming sink: one exactly-once commit per micro-batch (spark_stream)."""
        return stream_writer(self.options, self.default_config_json, schema, overwrite)


def configured_source(config: LakehouseConfig | None) -> type[TablestoreDataSource]:
    """The data source class to register, carrying ``config`` for every worker."""
    if config is None:
        return TablestoreDataSource
    # A class made here is not importable by name, so cloudpickle sends it by value, with the
    # config JSON inside it.
    return type(
        "TablestoreDataSource",
        (TablestoreDataSource,),
        {"default_config_json": config_to_json(config), "__qualname__": "TablestoreDataSource.configured"},
    )


# The names this module has always offered; their code lives in the modules named above.
__all__ = [
    "SNAPSHOT_PROPERTY_PREFIX",
    "SOURCE_NAME",
    "WRITE_ID_PROPERTY",
    "FileTaskPartition",
    "ReadState",
    "TablestoreCommitMessage",
    "TablestoreDataSource",
    "TablestoreReader",
    "TablestoreWriter",
    "WriteTarget",
    "config_to_json",
    "configured_source",
    "parse_name",
    "quote_name",
    "resolve_read",
    "table_options",
]
