"""A Spark data source of a table's live rows with their file and position, for row-level SQL.

    spark.read.format("tablestore_rows").option("config", ...).option("snapshot-id", S).load("cat.db.t")

It is the ``tablestore`` source with two more columns, ``_file`` (the data file's path) and
``_pos`` (the row's position in that file), as Iceberg's Spark integration exposes them for
row-level commands. Spark evaluates a DELETE, UPDATE or MERGE condition over these rows (with
any subqueries); the driver then turns the selected (file, position) pairs into position
deletes or file rewrites. The ``filter`` option (SQL text) prunes files only: Spark applies the
whole condition itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import types as st
from pyspark.sql.datasource import DataSourceReader, InputPartition

from tablestore.engine.spark_convert import spark_arrow_schema, to_spark_table
from tablestore.engine.spark_source import TablestoreDataSource
from tablestore.engine.spark_source_read import FileTaskPartition, TablestoreReader
from tablestore.table.row_level import RowLevelContext, read_live_rows

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
        rows, positions = read_live_rows(row_ctx, task)
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
