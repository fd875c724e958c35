"""Reading the rows of one data file for a rewrite (compaction, DELETE/UPDATE, partition
overwrite, schema rewrites, column merges), with the table's name mapping and, on format v3,
the rows' lineage.

Files registered from other tools (MSCK REPAIR, ADD PARTITION, ``import_files``) carry no
Parquet field ids; their columns are found through the table's ``schema.name-mapping.default``.
Without it a reader falls back to the current column names, which loses a renamed column's
data. The scan path passes the mapping; every path that reads a file to write it again goes
through ``read_file_rows`` so none of them can forget it.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from tablestore.io.fileio import FileIO
from tablestore.spec.expressions.expression_tree import AlwaysTrue
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.schemas.name_mapping import DEFAULT_NAME_MAPPING
from tablestore.spec.schemas.row_lineage import with_row_lineage
from tablestore.spec.schemas.schema import Schema
from tablestore.table.read.data_files import read_task_table


def read_file_rows(
    io: FileIO,
    properties: Mapping[str, str],
    data_file: DataFile,
    delete_files: tuple[DataFile, ...],
    spec: PartitionSpec,
    table_schema: Schema,
    projected: Schema | None = None,
    data_sequence_number: int | None = None,
) -> pa.Table:
    """Every live row of ``data_file`` (its ``delete_files`` applied) in ``projected`` (default:
    the whole ``table_schema``), columns matched through the name mapping in ``properties``
    when the file has no field ids. When ``projected`` holds the row lineage fields (a rewrite
    of a v3 table, :func:`~tablestore.spec.schemas.row_lineage.with_row_lineage`), they are read as
    inherited, from the file's ``first_row_id`` and ``data_sequence_number``."""
    return read_task_table(io, data_file, tuple(delete_files), spec, table_schema,
                           projected if projected is not None else table_schema, AlwaysTrue(),
                           properties.get(DEFAULT_NAME_MAPPING), data_sequence_number=data_sequence_number)


def rewrite_schema(schema: Schema, format_version: int) -> Schema:
    """The schema a rewrite reads whole files in and writes their rows with: the table's, and
    on format v3 the row lineage fields too, so moved rows keep their ``_row_id`` and
    ``_last_updated_sequence_number`` (spec, "Row Lineage": a moved row's values are copied)."""
    return with_row_lineage(schema) if format_version >= 3 else schema
