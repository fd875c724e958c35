"""A Spark data source of a table's live rows with their file and position, for row-level SQL.

    spark.read.format("tablestore_rows").option("config", ...).option("snapshot-id", S).load("cat.db.t")

It is the ``tablestore`` source with two more columns, ``_file`` (the data file's path) and
``_pos`` (the row's position in that file), as Iceberg's Spark integration exposes them for
row-level commands. Spark evaluates a DELETE, UPDATE or MERGE condition over these rows (with
any subqueries); the driver then turns the selected (file, position) pairs into position
deletes or file rewrites. The ``filter`` option (SQL text) prunes files only: Spark applies the
whole condition itself. The ``columns`` option narrows the read to the columns the statement
uses (Spark does not prune a Python data source's columns): an upsert reads only the keys.

:func:`native_row_positions` gives the same rows without Python: when the planned files need
nothing of tablestore's reader (no delete files, field ids; see spark_native_read), Spark's
Parquet reader reads them, with ``_metadata.file_path`` mapped back to the data file's path and
``_metadata.row_index`` as ``_pos`` (a file without deletes has every row live, so its row
index is the position). The data source's per-row Arrow-to-JVM transfer, a Python worker per
task and the path string built for every row were most of a large MERGE's time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyspark.sql import types as st
from pyspark.sql.datasource import DataSourceReader, InputPartition

from tablestore.spark.convert import spark_arrow_schema, to_spark_table
from tablestore.spark.datasource.source import TablestoreDataSource
from tablestore.spark.datasource.source_read import FileTaskPartition, TablestoreReader, resolve_read
from tablestore.spark.native.native_read import ineligible, native_read_schema
from tablestore.spark.options import NATIVE_READ_CONF
from tablestore.table.ops.row_level import RowLevelContext, read_live_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tablestore.spec.expressions.expression_tree import BooleanExpression

SOURCE_NAME = "tablestore_rows"
FILE_COLUMN = "_file"
POS_COLUMN = "_pos"


class RowPositionsReader(TablestoreReader):
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, FileTaskPartition):
            return
        ctx = self._context()
        task = partition.task
        specs = ctx["specs"]
        if task.spec_id not in specs:
            specs[task.spec_id] = self.state.spec(task.spec_id)
        schema = ctx["schema"]
        row_ctx = RowLevelContext(ctx["io"], "", schema, specs[task.spec_id], specs, {}, "")
        columns = {f.field_id for f in self.state.projected().fields} if self.state.columns is not None else None
        rows, positions = read_live_rows(row_ctx, task, columns)
        if rows.num_rows == 0:
            return
        rows = rows.append_column(FILE_COLUMN, pa.array(np.full(rows.num_rows, task.file.file_path, dtype=object),
                                                        pa.string()))
        rows = rows.append_column(POS_COLUMN, pa.array(positions, pa.int64()))
        target = spark_arrow_schema(st.StructType.fromJson(json.loads(self.spark_schema_json)))
        yield from to_spark_table(rows, target, self.state.table_name).to_batches()


class RowPositionsDataSource(TablestoreDataSource):
    """``tablestore`` plus ``_file`` and ``_pos``; reads only (row-level commands commit themselves)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> st.StructType:
        base = super().schema()
        return st.StructType([*base.fields, st.StructField(FILE_COLUMN, st.StringType(), False),
                              st.StructField(POS_COLUMN, st.LongType(), False)])

    def reader(self, schema: st.StructType) -> DataSourceReader:
        return RowPositionsReader(self._state(), schema)


def register(spark: object) -> None:
    spark.dataSource.register(RowPositionsDataSource)  # type: ignore[attr-defined]


def _spark_paths(spark: SparkSession, files: list[str]) -> list[str] | None:
    """Each file as Spark's ``_metadata.file_path`` names it: qualified by its Hadoop file
    system and URI-quoted (``/a b/x`` is ``file:/a%20b/x``), asked of the JVM's own Path so
    the two can never differ. None without a JVM here (Spark Connect)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return None
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    out = []
    for path in files:
        hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
        uri = str(hadoop_path.getFileSystem(conf).makeQualified(hadoop_path).toUri().toString())
        # A listed local file has no authority: Spark says file:/a, not file:///a.
        out.append("file:/" + uri[len("file:///"):] if uri.startswith("file:///") else uri)
    return out


def native_row_positions(spark: SparkSession, name: str, options: dict[str, str],
                         row_filter: BooleanExpression | None = None) -> DataFrame | None:
    """The ``tablestore_rows`` read of ``name`` with these options (``config``, ``snapshot-id``,
    ``filter``, ``columns``) through Spark's Parquet reader, or None when that does not apply
    (then read the source). The ``filter`` prunes files only, as in the source; ``row_filter``,
    when given, is that filter already made (its text is not parsed again)."""
    from pyspark.sql import functions as F

    state = resolve_read({**options, "path": name}, None, row_filter)
    spark_schema = native_read_schema(state.projected().fields)
    if spark_schema is None or state.row_lineage:
        return None
    tasks = TablestoreReader(state, spark_schema).plan()
    if not tasks or ineligible(state, tasks):
        return None
    files = list(dict.fromkeys(t.file.file_path for t in tasks))
    uris = _spark_paths(spark, files)
    if uris is None:
        return None
    for key, value in NATIVE_READ_CONF.items():
        spark.conf.set(key, value)
    df = spark.read.schema(spark_schema).option("recursiveFileLookup", "true").parquet(*files)
    # Rows name their file by the table's own path, as the source's rows do.
    paths = F.create_map(*[F.lit(v) for uri, path in zip(uris, files, strict=True) for v in (uri, path)])
    spark_path = F.col("_metadata.file_path")
    path = F.element_at(paths, spark_path)
    # A row whose file is not found would look unmatched to a MERGE (and be inserted twice):
    # fail loudly instead, naming the path Spark gave.
    path = F.when(path.isNull(), F.raise_error(F.concat(F.lit("tablestore: no table path for Spark's file "),
                                                         spark_path))).otherwise(path)
    return df.select(*[F.col(f"`{f.name}`") for f in spark_schema.fields], path.alias(FILE_COLUMN),
                     F.col("_metadata.row_index").alias(POS_COLUMN))
