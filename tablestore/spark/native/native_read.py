"""Reading a table into a DataFrame with Spark's own Parquet reader, planned by tablestore.

    from tablestore.spark.native.native_read import read_dataframe, read_table
    df = read_dataframe(spark, "db.events", config=config, filter="country = 'DE'")
    outcome = read_table(spark, "db.events", config=config)   # the same, and how it reads:
    outcome.df, outcome.path, outcome.reason                   # path: "native" or "data-source"

Why. The ``tablestore`` data source yields Arrow batches from Python that the JVM converts to
rows; that conversion costs about as much again as Spark reading the Parquet itself. When the
planned files need nothing of tablestore's reader, Spark can read them directly: tablestore
plans the scan (snapshot, manifest, partition and column-metrics pruning, as the data source
does), and ``spark.read.schema(...).parquet(*files)`` reads the planned files with a schema
whose fields carry their Iceberg field ids (``parquet.field.id`` metadata). With
``spark.sql.parquet.fieldId.read.enabled`` Spark matches the files' columns by field id, so
renamed, reordered and dropped columns read right, and a column added after a file was written
reads as NULL, as Iceberg says. ``spark.sql.parquet.fieldId.read.ignoreMissing`` is off: it is
about a file with no field id at all, which it would read as all NULL; Spark then fails instead.
Spark 4's Parquet reader widens int to long, float to double and a decimal to a larger
precision, which are all the type promotions Iceberg allows.

Both settings are set on the session by ``spark_session`` and by every ``read_dataframe``.
Spark only matches by id when the requested schema carries ids, so other Parquet reads are
unchanged.

When the fast path does not apply, ``read_table`` reads through the data source (the same
rows, only slower): a planned file with delete files (merge-on-read deletes), a file without
Parquet field ids (imported files, files of an older write_dataframe), a table outside the local
file system (Spark would need its own S3 connector), a data file not in Parquet, or a column
type Spark's Parquet reader does not read as tablestore maps it (time, uuid, fixed, nanosecond
timestamps, lists and maps, whose element ids Spark cannot match) or with an initial default.

The ``filter`` (SQL text) prunes files in planning and is then applied by Spark to the rows
(``DataFrame.where``), so Spark SQL evaluates it; the data source evaluates it with tablestore.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import types as st

from tablestore.io import load_file_io
from tablestore.io.fileio import FileIO
from tablestore.spark.datasource.source_read import ReadState, TablestoreReader, resolve_read
from tablestore.spark.native.native_write import FIELD_ID_KEY, NATIVE_TYPES
from tablestore.spark.options import NATIVE_READ_CONF, SOURCE_NAME, table_options
from tablestore.spec.manifests.manifest import FileFormat
from tablestore.spec.schemas.schema import PARQUET_FIELD_ID
from tablestore.spec.schemas.types import (
    DecimalType,
    IcebergType,
    NestedField,
    StructType,
    TimestampType,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tablestore.config import LakehouseConfig
    from tablestore.table.read.scan import FileTask

# Iceberg type -> the Spark type Spark's Parquet reader yields from the Iceberg encoding.
_READ_TYPES: dict[type[IcebergType], st.DataType] = {t: spark_type() for t, spark_type in NATIVE_TYPES.items()}


@dataclass(frozen=True)
class ReadOutcome:
    """What ``read_table`` returns: the DataFrame, how it reads (``native`` or
    ``data-source``), why not natively, and the data files of a native read."""

    df: DataFrame
    path: str
    reason: str = ""
    files: tuple[str, ...] = ()


# -- when the fast path applies ---------------------------------------------------------------------


def _read_type(t: IcebergType) -> st.DataType | None:
    if isinstance(t, DecimalType):
        return st.DecimalType(t.precision, t.scale)
    if isinstance(t, StructType):
        fields = _read_fields(t.fields)
        return st.StructType(fields) if fields is not None else None
    return _READ_TYPES.get(type(t))


def _read_fields(fields: Sequence[NestedField]) -> list[st.StructField] | None:
    out = []
    for f in fields:
        if f.initial_default is not None:
            return None  # files without the column must read its default, not NULL
        data_type = _read_type(f.field_type)
        if data_type is None:
            return None
        out.append(st.StructField(f.name, data_type, not f.required, {FIELD_ID_KEY: f.field_id}))
    return out


def native_read_schema(fields: Sequence[NestedField]) -> st.StructType | None:
    """The table's columns as a Spark schema with field ids, or None if Spark cannot read them."""
    out = _read_fields(fields)
    return st.StructType(out) if out is not None else None


def _has_field_ids(field: pa.Field) -> bool:
    if not field.metadata or PARQUET_FIELD_ID not in field.metadata:
        return False
    if pa.types.is_struct(field.type):
        return all(_has_field_ids(field.type.field(i)) for i in range(field.type.num_fields))
    return True


def ineligible(state: ReadState, tasks: list[FileTask]) -> str:
    """Why Spark's Parquet reader cannot read these tasks as tablestore would ("" when it can)."""
    for task in tasks:
        path = task.file.file_path
        if task.delete_files:
            return f"data file {path} has delete files"
        if task.file.file_format != FileFormat.PARQUET:
            return f"data file {path} is not Parquet"
        if "://" in path and not path.startswith("file://"):
            return f"the table is not on the local file system ({path.split('://', 1)[0]}://)"
    promoted = _promoted_from_date(state)
    if promoted:
        return f"column {promoted!r} was promoted from date to a timestamp (format v3): old files hold dates"
    if tasks:
        # tablestore, pyiceberg, Java and DuckDB write field ids; imported files, and files of
        # write_dataframe before it kept them, have none, and Spark's reader, matching by id,
        # reads such a file as an error (it would otherwise read NULLs). A footer read per
        # file on the driver, once per process: data files never change.
        io = load_file_io(state.io_properties)
        for task in tasks:
            if not _file_has_field_ids(io, task.file.file_path):
                return f"data file {task.file.file_path} has no Parquet field ids"
    return ""


# Whether each data file (by path) carries field ids on all its columns.
_FIELD_IDS: dict[str, bool] = {}
_FIELD_IDS_MAX = 100_000


def _file_has_field_ids(io: FileIO, path: str) -> bool:
    known = _FIELD_IDS.get(path)
    if known is None:
        with io.new_input(path).open() as f:
            schema = pq.ParquetFile(f).schema_arrow
        known = all(_has_field_ids(field) for field in schema)
        if len(_FIELD_IDS) >= _FIELD_IDS_MAX:
            _FIELD_IDS.clear()
        _FIELD_IDS[path] = known
    return known


def _promoted_from_date(state: ReadState) -> str:
    """A current timestamp column that an earlier schema of the table had as a date ("" if none)."""
    schema = state.schema()
    timestamps = {f.field_id: f.name for f in schema.fields if isinstance(f.field_type, TimestampType)}
    if not timestamps:
        return ""
    io = load_file_io(state.io_properties)
    metadata = json.loads(io.new_input(state.metadata_location).read())
    for old in metadata.get("schemas", []):
        for f in old.get("fields", []):
            if f.get("id") in timestamps and f.get("type") == "date":
                return timestamps[f["id"]]
    return ""


# -- reading ------------------------------------------------------------------------------------


def read_table(
    spark: SparkSession,
    name: str,
    *,
    config: LakehouseConfig | None = None,
    catalog: str | None = None,
    snapshot_id: int | None = None,
    as_of_timestamp: int | str | None = None,
    filter: str | None = None,
    start_snapshot_id: int | None = None,
    end_snapshot_id: int | None = None,
) -> ReadOutcome:
    """The table ``name`` (its current snapshot, or the one chosen) as a DataFrame.

    Spark's own Parquet reader reads the planned files when they need nothing of tablestore's
    reader (see the module docstring); otherwise this is ``spark.read.format("tablestore")``.
    ``as_of_timestamp`` is epoch milliseconds or ISO-8601 text; ``filter`` is SQL text.
    ``start_snapshot_id`` (exclusive) and ``end_snapshot_id`` (inclusive, default the current
    snapshot) read only the rows appended in between (the source's options of those names).
    """
    options = table_options(name, config, catalog)
    if snapshot_id is not None:
        options["snapshot-id"] = str(snapshot_id)
    if as_of_timestamp is not None:
        options["as-of-timestamp"] = str(as_of_timestamp)
    if filter:
        options["filter"] = filter
    if start_snapshot_id is not None:
        options["start-snapshot-id"] = str(start_snapshot_id)
    if end_snapshot_id is not None:
        options["end-snapshot-id"] = str(end_snapshot_id)
    return read_with_options(spark, name, options)


def read_with_options(spark: SparkSession, name: str, options: dict[str, str]) -> ReadOutcome:
    """``read_table`` given the ``tablestore`` source's options (``config``, ``snapshot-id``,
    ``filter``, ...), for callers that already hold them, as the SQL session does."""
    options = {**options, "path": name}
    filter = options.get("filter")
    state = resolve_read(options, None)  # a bad name, snapshot or filter fails here, as in the source
    schema = state.schema()
    spark_schema = native_read_schema(schema.fields)
    if spark_schema is None:
        return _data_source(spark, name, options, "a column type Spark's Parquet reader cannot read as "
                                                   "tablestore maps it, or a column with an initial default")
    # The data source's own planning: the same snapshot, pruning and file tasks.
    tasks = TablestoreReader(state, spark_schema).plan()
    reason = ineligible(state, tasks)
    if reason:
        return _data_source(spark, name, options, reason)
    for key, value in NATIVE_READ_CONF.items():
        spark.conf.set(key, value)
    files = tuple(dict.fromkeys(t.file.file_path for t in tasks))
    if not files:
        df = spark.createDataFrame([], spark_schema)
    else:
        # recursiveFileLookup turns off partition discovery: a data directory named
        # `country=DE` must not add a column.
        df = spark.read.schema(spark_schema).option("recursiveFileLookup", "true").parquet(*files)
    if filter:
        df = df.where(filter)
    return ReadOutcome(df, "native", "", files)


def _data_source(spark: SparkSession, name: str, options: dict[str, str], reason: str) -> ReadOutcome:
    reader = spark.read.format(SOURCE_NAME)
    for key, value in options.items():
        if key != "path":
            reader = reader.option(key, value)
    return ReadOutcome(reader.load(name), "data-source", reason)


def read_dataframe(
    spark: SparkSession,
    name: str,
    *,
    config: LakehouseConfig | None = None,
    catalog: str | None = None,
    snapshot_id: int | None = None,
    as_of_timestamp: int | str | None = None,
    filter: str | None = None,
    start_snapshot_id: int | None = None,
    end_snapshot_id: int | None = None,
) -> DataFrame:
    """The table ``name`` as a DataFrame: ``read_table(...).df`` (which also says how it reads)."""
    return read_table(spark, name, config=config, catalog=catalog, snapshot_id=snapshot_id,
                      as_of_timestamp=as_of_timestamp, filter=filter, start_snapshot_id=start_snapshot_id,
                      end_snapshot_id=end_snapshot_id).df
