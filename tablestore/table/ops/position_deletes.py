"""Writing position deletes: Parquet position delete files (v2) and deletion vectors (v3).

On a v2 table a row-level operation writes Parquet position delete files (spec: "Position
Delete Files"); on a v3 table it writes deletion vectors (spec: "Deletion Vectors"), which
replace position delete files: at most one per data file, merged with what it replaces
(:func:`merged_previous_deletes`).

A position delete file has the columns ``file_path`` (string, field id 2147483546) and ``pos``
(long, field id 2147483545), sorted by file path then position. We write one file per data
file ("file-scoped", Iceberg's ``write.delete.granularity=file``): it lives in the data file's
partition and spec, and its ``file_path`` lower and upper bounds are that one path, so readers
(Java, pyiceberg, us) match it to its data file without opening it.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap64

from tablestore.io.fileio import FileIO
from tablestore.spec.manifests.manifest import DataFile, DataFileContent, FileFormat
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.schema import PARQUET_FIELD_ID, Schema
from tablestore.spec.schemas.types import LongType, StringType
from tablestore.table.read.data_files import DELETE_FILE_PATH_ID, DELETE_POS_ID, read_position_deletes
from tablestore.table.read.deletion_vectors import (
    is_deletion_vector,
    read_deletion_vector_bitmap,
    referenced_data_file,
    write_deletion_vectors,
)

POSITION_DELETE_SCHEMA = pa.schema([
    pa.field("file_path", pa.string(), nullable=False, metadata={PARQUET_FIELD_ID: str(DELETE_FILE_PATH_ID).encode()}),
    pa.field("pos", pa.int64(), nullable=False, metadata={PARQUET_FIELD_ID: str(DELETE_POS_ID).encode()}),
])


def delete_file_path(data_location: str, spec: PartitionSpec, schema: Schema, data_file: DataFile,
                     extension: str = "parquet", write_id: str | None = None) -> str:
    partition_path = spec.partition_path(tuple(data_file.partition), schema) if spec.fields else ""
    # The write id, when given, names the operation's files so a failed job can find them.
    name = f"{write_id + '-' if write_id else ''}{uuid.uuid4()}-deletes.{extension}"
    return f"{data_location}/{partition_path}/{name}" if partition_path else f"{data_location}/{name}"


def write_position_deletes(
    io: FileIO, path: str, rows: pa.Table, spec_id: int, partition: tuple[Any, ...], codec: str = "zstd",
    record_referenced_file: bool = True,
) -> DataFile:
    """Write ``rows`` (``file_path``, ``pos``, sorted by both) as a position delete file of the
    partition ``partition`` of spec ``spec_id`` at ``path``; returns its DataFile. When every row
    names one data file and ``record_referenced_file``, that file is its ``referenced_data_file``."""
    rows = pa.table([rows.column(0).cast(pa.string()), rows.column(1).cast(pa.int64())], schema=POSITION_DELETE_SCHEMA)
    stream = io.new_output(path).create(overwrite=False)
    try:
        with pq.ParquetWriter(stream, POSITION_DELETE_SCHEMA, compression=codec, write_statistics=True) as writer:
            writer.write_table(rows)
        size = stream.tell()
    finally:
        stream.close()
    paths, positions = rows.column("file_path"), rows.column("pos")
    first, last = pc.min(paths).as_py(), pc.max(paths).as_py()
    count = rows.num_rows
    return DataFile(
        content=DataFileContent.POSITION_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=tuple(partition),
        record_count=count,
        file_size_in_bytes=size,
        value_counts={DELETE_FILE_PATH_ID: count, DELETE_POS_ID: count},
        null_value_counts={DELETE_FILE_PATH_ID: 0, DELETE_POS_ID: 0},
        lower_bounds={DELETE_FILE_PATH_ID: conversions.to_bytes(StringType(), first),
                      DELETE_POS_ID: conversions.to_bytes(LongType(), pc.min(positions).as_py())},
        upper_bounds={DELETE_FILE_PATH_ID: conversions.to_bytes(StringType(), last),
                      DELETE_POS_ID: conversions.to_bytes(LongType(), pc.max(positions).as_py())},
        spec_id=spec_id,
        referenced_data_file=first if record_referenced_file and first == last else None,
    )


def write_file_position_deletes(
    io: FileIO, path: str, data_file: DataFile, positions: np.ndarray, codec: str = "zstd"
) -> DataFile:
    """Write the deleted ``positions`` of ``data_file`` to ``path`` (a file-scoped delete file);
    returns the delete file's DataFile. Its ``referenced_data_file`` is left unset, as row-level
    operations always wrote it: readers match it to ``data_file`` by its path bounds."""
    ordered = np.unique(np.asarray(positions, dtype=np.int64))  # sorted, as the spec requires
    rows = pa.Table.from_arrays(
        [pa.array([data_file.file_path] * len(ordered), pa.string()), pa.array(ordered, pa.int64())],
        schema=POSITION_DELETE_SCHEMA,
    )
    return write_position_deletes(io, path, rows, data_file.spec_id, tuple(data_file.partition), codec,
                                  record_referenced_file=False)


def merged_previous_deletes(io: FileIO, data_file: DataFile,
                            delete_files: tuple[DataFile, ...]) -> tuple[BitMap64, list[DataFile]]:
    """The positions of ``data_file`` its position deletes already delete (``delete_files`` are
    the ones a scan attached to it: its live DV, or else its position delete files), and the
    files a new DV of it replaces: its previous DV and the file-scoped position delete files.

    A partition-scoped position delete file also holds deletes of other data files, so it
    stays live; readers ignore it for a data file that has a DV, which merged its positions.
    """
    previous = BitMap64()
    replaced = []
    for delete in delete_files:
        if delete.content != DataFileContent.POSITION_DELETES:
            continue
        if is_deletion_vector(delete):
            previous |= read_deletion_vector_bitmap(io, delete, data_file.file_path)
        else:
            positions = read_position_deletes(io, delete, data_file.file_path)
            previous.update(positions.astype(np.uint64))
        if referenced_data_file(delete) == data_file.file_path:
            replaced.append(delete)
    return previous, replaced


def write_deletion_vector(io: FileIO, path: str, data_file: DataFile, positions: BitMap64) -> DataFile:
    """Write the DV of ``data_file`` (its deleted ``positions``) as a Puffin file at ``path``."""
    return write_deletion_vectors(io, path, [(data_file, positions)])[0]
