"""Writing position delete files (spec: "Position Delete Files").

A position delete file has the columns ``file_path`` (string, field id 2147483546) and ``pos``
(long, field id 2147483545), sorted by file path then position. We write one file per data
file ("file-scoped", Iceberg's ``write.delete.granularity=file``): it lives in the data file's
partition and spec, and its ``file_path`` lower and upper bounds are that one path, so readers
(Java, pyiceberg, us) match it to its data file without opening it.
"""

from __future__ import annotations

import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tablestore.io import FileIO
from tablestore.spec import conversions
from tablestore.spec.manifest import DataFile, DataFileContent, FileFormat
from tablestore.spec.partitioning import PartitionSpec
from tablestore.spec.schema import PARQUET_FIELD_ID, Schema
from tablestore.spec.types import LongType, StringType
from tablestore.table.read import DELETE_FILE_PATH_ID, DELETE_POS_ID

POSITION_DELETE_SCHEMA = pa.schema([
    pa.field("file_path", pa.string(), nullable=False, metadata={PARQUET_FIELD_ID: str(DELETE_FILE_PATH_ID).encode()}),
    pa.field("pos", pa.int64(), nullable=False, metadata={PARQUET_FIELD_ID: str(DELETE_POS_ID).encode()}),
])


def delete_file_path(data_location: str, spec: PartitionSpec, schema: Schema, data_file: DataFile) -> str:
    partition_path = spec.partition_path(tuple(data_file.partition), schema) if spec.fields else ""
    name = f"{uuid.uuid4()}-deletes.parquet"
    return f"{data_location}/{partition_path}/{name}" if partition_path else f"{data_location}/{name}"


def write_position_deletes(
    io: FileIO, path: str, data_file: DataFile, positions: np.ndarray, codec: str = "zstd"
) -> DataFile:
    """Write the deleted ``positions`` of ``data_file`` to ``path``; returns the delete file's DataFile."""
    ordered = np.unique(np.asarray(positions, dtype=np.int64))  # sorted, as the spec requires
    table = pa.Table.from_arrays(
        [pa.array([data_file.file_path] * len(ordered), pa.string()), pa.array(ordered, pa.int64())],
        schema=POSITION_DELETE_SCHEMA,
    )
    stream = io.new_output(path).create(overwrite=False)
    try:
        with pq.ParquetWriter(stream, POSITION_DELETE_SCHEMA, compression=codec, write_statistics=True) as writer:
            writer.write_table(table)
        size = stream.tell()
    finally:
        stream.close()
    path_bound = conversions.to_bytes(StringType(), data_file.file_path)
    count = len(ordered)
    return DataFile(
        content=DataFileContent.POSITION_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=tuple(data_file.partition),
        record_count=count,
        file_size_in_bytes=size,
        value_counts={DELETE_FILE_PATH_ID: count, DELETE_POS_ID: count},
        null_value_counts={DELETE_FILE_PATH_ID: 0, DELETE_POS_ID: 0},
        lower_bounds={DELETE_FILE_PATH_ID: path_bound,
                      DELETE_POS_ID: conversions.to_bytes(LongType(), int(ordered[0]))},
        upper_bounds={DELETE_FILE_PATH_ID: path_bound,
                      DELETE_POS_ID: conversions.to_bytes(LongType(), int(ordered[-1]))},
        spec_id=data_file.spec_id,
    )
