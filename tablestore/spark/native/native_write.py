"""Writing a DataFrame into a table with Spark's own Parquet writer, then one tablestore commit.

    from tablestore.spark import write_dataframe
    write_dataframe(df, "db.events", mode="append", config=config)

Why. The ``tablestore`` data source hands a Python writer Arrow batches that Spark converts
from its rows in the JVM; that conversion alone costs about as much as Spark writing Parquet
itself, so the data source path cannot come close to ``df.write.parquet``. When the DataFrame's
columns map exactly onto the table's Iceberg types, Spark can write the data files directly:
Spark 4 writes Parquet field ids from the ``parquet.field.id`` metadata of a StructField
(``spark.sql.parquet.fieldId.write.enabled``), which is all an Iceberg reader needs. The files
go to a directory of their own under the table's data location; the driver then reads their
footers, folds them into Iceberg metrics (plus NaN counts, which Parquet does not keep) and
makes one commit, exactly as the data source's ``commit()`` does.

When the fast path does not apply, ``write_dataframe`` writes through the data source instead
(the same semantics, only slower): a partitioned table (Spark's partitioned output leaves the
partition columns out of the files), a table outside the local file system (Spark would need
its own S3 connector and credentials), a column type Spark cannot write as the table stores it
(time, uuid, fixed, nanosecond timestamps, lists and maps, whose element ids Spark cannot
carry), a column missing, extra or nullable where the table requires a value, or a format or
codec other than Parquet with zstd, snappy, gzip or none.

Semantics. One commit in the driver; a failed Spark job leaves the table unchanged and its
directory is removed; a failed commit deletes the files (unless its outcome is unknown, as in
the data source). ``append`` and ``overwrite`` (the whole table, refusing when other writers
added data meanwhile) behave as in the data source.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import types as st

from tablestore.errors import ValidationError
from tablestore.io import load_file_io
from tablestore.io.cleanup import deleted_unless_sent
from tablestore.spark.datasource.source_write import commit_write, resolve_write
from tablestore.spark.options import SNAPSHOT_PROPERTY_PREFIX, SOURCE_NAME, table_options
from tablestore.spark.write_task import WriteTarget
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)
from tablestore.table.read.data_files import parquet_field_id
from tablestore.table.write.data_files import WriteContext
from tablestore.table.write.metrics import collect_metrics, float_nan_counts, metrics_modes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from tablestore.config import LakehouseConfig

log = logging.getLogger(__name__)

FIELD_ID_KEY = "parquet.field.id"
# Spark's session settings that decide how its Parquet writer stores what the table needs:
# field ids, and timestamps as INT64 microseconds (Spark's default INT96 is not Iceberg's).
NATIVE_WRITE_CONF = {
    "spark.sql.parquet.fieldId.write.enabled": "true",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # Decimals as INT32/INT64 by precision, as the Iceberg spec maps them.
    "spark.sql.parquet.writeLegacyFormat": "false",
}
_SPARK_CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "none": "none"}
# Iceberg type -> the Spark type whose Parquet encoding is exactly the Iceberg one.
# Primitive Iceberg types Spark's Parquet reader and writer handle as Iceberg stores them (the
# native read builds its schema from this table too).
NATIVE_TYPES: dict[type[IcebergType], type[st.DataType]] = {
    BooleanType: st.BooleanType,
    IntegerType: st.IntegerType,
    LongType: st.LongType,
    FloatType: st.FloatType,
    DoubleType: st.DoubleType,
    DateType: st.DateType,
    TimestampType: st.TimestampNTZType,
    TimestamptzType: st.TimestampType,
    StringType: st.StringType,
    BinaryType: st.BinaryType,
}


@dataclass(frozen=True)
class WriteOutcome:
    """How ``write_dataframe`` wrote: ``native`` (Spark's Parquet) or ``data-source``, and why."""

    path: str
    reason: str = ""


# -- when the fast path applies ---------------------------------------------------------------------


def _with_ids(data_type: st.DataType, t: IcebergType) -> st.DataType | None:
    """``data_type`` with field ids on its struct fields, or None if Spark would not write ``t``."""
    if isinstance(t, DecimalType):
        ok = isinstance(data_type, st.DecimalType) and (data_type.precision, data_type.scale) == (t.precision, t.scale)
        return data_type if ok else None
    if isinstance(t, StructType):
        if not isinstance(data_type, st.StructType):
            return None
        fields = _fields_with_ids(data_type, t.fields)
        return st.StructType(fields) if fields is not None else None
    same = NATIVE_TYPES.get(type(t))
    return data_type if same is not None and type(data_type) is same else None


def _fields_with_ids(struct: st.StructType, fields: tuple[NestedField, ...]) -> list[st.StructField] | None:
    if [f.name for f in struct.fields] != [f.name for f in fields]:
        return None  # a missing, extra, renamed or reordered column: the data source sorts it out
    out = []
    for sf, f in zip(struct.fields, fields, strict=True):
        if f.required and sf.nullable:
            return None  # the data source checks for nulls and names the column
        data_type = _with_ids(sf.dataType, f.field_type)
        if data_type is None:
            return None
        out.append(st.StructField(f.name, data_type, sf.nullable, {FIELD_ID_KEY: f.field_id}))
    return out


def native_schema(schema: st.StructType, target: WriteTarget) -> tuple[st.StructType | None, str]:
    """The DataFrame schema with field ids for Spark's Parquet writer, or None and the reason."""
    if target.spec().fields:
        return None, "the table is partitioned"
    location = target.location
    if "://" in location and not location.startswith("file://"):
        return None, f"the table is not on the local file system ({location.split('://', 1)[0]}://)"
    file_format = target.properties.get("write.format.default", "parquet").lower()
    if file_format != "parquet":
        return None, f"write.format.default is {file_format}"
    codec = target.properties.get("write.parquet.compression-codec", "zstd").lower()
    if _SPARK_CODECS.get("none" if codec == "uncompressed" else codec) is None:
        return None, f"Spark does not write the codec {codec} as tablestore does"
    fields = _fields_with_ids(schema, target.schema().fields)
    if fields is None:
        return None, "the DataFrame's columns do not map exactly onto the table's types"
    return st.StructType(fields), ""


# -- writing ------------------------------------------------------------------------------------


def write_dataframe(
    df: DataFrame,
    name: str,
    mode: str = "append",
    *,
    config: LakehouseConfig | None = None,
    catalog: str | None = None,
    snapshot_properties: Mapping[str, str] | None = None,
) -> WriteOutcome:
    """Append ``df`` to the table ``name`` (or overwrite it), in one commit.

    Spark's own Parquet writer writes the files when the DataFrame maps exactly onto the table
    (see the module docstring); otherwise this is ``df.write.format("tablestore")``.
    """
    if mode not in ("append", "overwrite"):
        raise ValidationError(f"write mode {mode!r} is not supported; use append or overwrite")
    options = table_options(name, config, catalog)
    for key, value in (snapshot_properties or {}).items():
        options[SNAPSHOT_PROPERTY_PREFIX + key] = value
    target = resolve_write(options, None)
    schema, reason = native_schema(df.schema, target)
    if schema is None:
        writer = df.write.format(SOURCE_NAME).mode(mode)
        for key, value in options.items():
            if key != "path":
                writer = writer.option(key, value)
        writer.save(name)
        return WriteOutcome("data-source", reason)
    _write_native(with_field_ids(df, schema), target, overwrite=mode == "overwrite")
    return WriteOutcome("native")


def with_field_ids(df: DataFrame, schema: st.StructType) -> DataFrame:
    """``df`` as ``schema``, each column carrying its field ids through to Spark's writer.

    Neither ``df.to(schema)`` nor a plain alias is enough: ``to`` puts the ids on attribute
    references, which the optimizer drops when it collapses the projection into the one below
    (Spark then wrote files without any field id, which its own id-matching reader reads as all
    NULL: every row-level statement missed every row of such a file). An alias with explicit
    metadata survives the optimizer for a top-level column, and a cast to the struct type with
    ids carries a struct's nested ids (the cast is not simplified away, because the types differ
    in their metadata)."""
    from pyspark.sql import functions as F

    columns = []
    for field in schema.fields:
        column = F.col(f"`{field.name}`")
        if isinstance(field.dataType, st.StructType):
            column = column.cast(field.dataType)
        columns.append(column.alias(field.name, metadata=field.metadata))
    return df.select(*columns)


@contextmanager
def _session_conf(df: DataFrame, settings: Mapping[str, str]) -> Iterator[None]:
    conf = df.sparkSession.conf
    previous: dict[str, str | None] = {key: conf.get(key, None) for key in settings}
    for key, value in settings.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                conf.unset(key)
            else:
                conf.set(key, old)


def _local(path: str) -> str:
    # file:///x, Hadoop's file:/x (kept as a client asked for it) and /x are the same local path.
    if path.startswith("file://"):
        return path[len("file://"):]
    return path.removeprefix("file:")


def _write_native(df: DataFrame, target: WriteTarget, overwrite: bool) -> None:
    io = load_file_io(target.io_properties)
    ctx = WriteContext(io, target.location, target.schema(), target.spec(), dict(target.properties),
                       write_uuid=target.write_id)
    # A directory per write: nothing else is in it, so a failed job is removed whole.
    directory = f"{ctx.data_location}/spark-{target.write_id}"
    local_directory = _local(directory)
    codec = target.properties.get("write.parquet.compression-codec", "zstd").lower()
    writer = (
        df.write.mode("errorifexists")
        .option("compression", _SPARK_CODECS["none" if codec == "uncompressed" else codec])
        .option("parquet.block.size", str(ctx.row_group_bytes))
        # Local checksums and the success marker would be files in the table's data directory.
        .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
    )
    if ctx.compression_level is not None and codec == "zstd":
        writer = writer.option("parquet.compression.codec.zstd.level", str(ctx.compression_level))
    with deleted_unless_sent(lambda: shutil.rmtree(local_directory, ignore_errors=True)):
        with _session_conf(df, NATIVE_WRITE_CONF):
            writer.parquet(local_directory)
        files = [_data_file(ctx, f"{directory}/{n}", os.path.join(local_directory, n))
                 for n in sorted(os.listdir(local_directory)) if n.endswith(".parquet") and not n.startswith(".")]
    _remove_checksums(local_directory)
    # Spark writes a file with no rows for an empty DataFrame; a table has no use for it.
    for empty in [f for f in files if f.record_count == 0]:
        os.remove(_local(empty.file_path))
    files = [f for f in files if f.record_count > 0]
    # The data source's commit: one snapshot, the write id in its summary, files deleted when
    # the commit is refused.
    commit_write(target, files, overwrite)


def _remove_checksums(directory: str) -> None:
    for name in os.listdir(directory):
        if name.endswith(".crc") or name.startswith("_"):
            path = os.path.join(directory, name)
            if os.path.isfile(path):
                os.remove(path)


def _data_file(ctx: WriteContext, path: str, local_path: str) -> DataFile:
    """The DataFile of one file Spark wrote: metrics from its footer, NaN counts from its floats."""
    schema = ctx.schema
    parquet = pq.ParquetFile(local_path)
    _check_field_ids(parquet.schema_arrow, schema.fields, path)
    metadata = parquet.metadata
    floats = [f for f in schema.fields if isinstance(f.field_type, FloatType | DoubleType)]
    columns = parquet.read(columns=[f.name for f in floats]) if floats and metadata.num_rows else None
    nan_counts = float_nan_counts(columns, schema) if columns is not None else {}
    modes = metrics_modes(schema, ctx.properties)
    metrics = collect_metrics(metadata, schema, modes, nan_counts)
    if columns is not None:
        _float_bounds_without_nan(metrics.lower_bounds, metrics.upper_bounds, columns, floats, nan_counts)
    return metrics.data_file(path, (), os.path.getsize(local_path), ctx.spec.spec_id)


def _check_field_ids(file_schema: pa.Schema | pa.StructType, fields: tuple[NestedField, ...], path: str) -> None:
    """Refuse a file whose columns do not carry the table's field ids: readers that match
    columns by id (Spark's, with ``fieldId.read.enabled``) would read it as NULL. The write
    then fails and its directory is removed, rather than a table that reads wrong."""
    for f, column in zip(fields, file_schema, strict=True):
        if parquet_field_id(column) != f.field_id:
            raise ValidationError(
                f"Spark wrote {path} with field id {parquet_field_id(column)} for column {f.name!r}, not the "
                f"table's {f.field_id}; nothing was committed (write through format(\"tablestore\") instead)"
            )
        if isinstance(f.field_type, StructType):
            _check_field_ids(column.type, f.field_type.fields, path)


def _float_bounds_without_nan(
    lower: dict[int, bytes],
    upper: dict[int, bytes],
    columns: pa.Table,
    floats: list[NestedField],
    nan_counts: dict[int, int],
) -> None:
    """Recompute the bounds of float columns that hold NaN: Spark's Parquet writer counts NaN
    as the largest value in its statistics, Iceberg bounds leave NaN out. A zero bound is
    signed as Parquet's rule for float statistics says (-0.0 below, +0.0 above), as
    tablestore's own writer does, since -0.0 = +0.0 may hold either."""
    for f in floats:
        if f.field_id not in lower and f.field_id not in upper:
            continue
        if nan_counts.get(f.field_id):
            column = columns.column(f.name)
            bounds = pc.min_max(column.filter(pc.invert(pc.is_nan(column))))
            lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
            if lo is None or hi is None:
                lower.pop(f.field_id, None)
                upper.pop(f.field_id, None)
                continue
        else:
            lo = conversions.from_bytes(f.field_type, lower[f.field_id]) if f.field_id in lower else None
            hi = conversions.from_bytes(f.field_type, upper[f.field_id]) if f.field_id in upper else None
        if lo is not None:
            lower[f.field_id] = conversions.to_bytes(f.field_type, -0.0 if lo == 0 else lo)
        if hi is not None:
            upper[f.field_id] = conversions.to_bytes(f.field_type, 0.0 if hi == 0 else hi)
