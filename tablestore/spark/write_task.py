"""The executor half of every Spark write: one task's Arrow batches into the table's data files.

The ``tablestore`` data source (:mod:`~tablestore.spark.datasource.source_write`), its streaming sink
(:mod:`~tablestore.spark.datasource.stream`) and SQL's writes (:mod:`~tablestore.spark.tasks.write_files`)
all run :func:`write_task` on the executors; SQL runs it inside ``mapInArrow`` through
:func:`described_write_task`, which sends the files' descriptions back as one small row. A task
never commits: the driver makes one commit of every task's files
(:func:`tablestore.spark.commit.commit_files`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import types as st
from pyspark.sql.datasource import WriterCommitMessage

from tablestore.catalog_manager import CatalogManager
from tablestore.io import load_file_io
from tablestore.io.fileio import FileIO
from tablestore.spark.convert import from_spark_table, spark_arrow_schema
from tablestore.spark.options import load_config_from
from tablestore.spec.manifests.content_file_json import content_file_to_json
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import IcebergType, StructType
from tablestore.table import Table
from tablestore.table.write.conform import conform_to_schema
from tablestore.table.write.data_files import WriteContext
from tablestore.table.write.writers import write_data_stream

log = logging.getLogger(__name__)

# Spark sets this local property in the task's context; in local mode it is "driver".
_EXECUTOR_PROPERTY = "spark.executor.id"


@dataclass
class TablestoreCommitMessage(WriterCommitMessage):
    """What one write task sends the driver: the data files it wrote (not yet committed)."""

    files: list[DataFile]
    task_id: int
    rows: int


@dataclass(frozen=True)
class WriteTarget:
    """The table a Spark write goes to, as plain data for the tasks and the commit."""

    config_json: str
    catalog_name: str
    identifier: tuple[str, ...]
    location: str
    io_properties: dict[str, str]
    schema_json: str
    spec_json: str
    properties: dict[str, str]
    base_snapshot_id: int | None
    write_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    snapshot_properties: dict[str, str] = field(default_factory=dict)

    @property
    def table_name(self) -> str:
        return ".".join((self.catalog_name, *self.identifier))

    def schema(self) -> Schema:
        return Schema.from_json(json.loads(self.schema_json))

    def spec(self) -> PartitionSpec:
        return PartitionSpec.from_json(json.loads(self.spec_json))

    def types(self) -> tuple[StructType, dict[int, IcebergType]]:
        """The partition type and the type of every field id: what a file's description needs."""
        schema = self.schema()
        return self.spec().partition_type(schema), {f.field_id: f.field_type for _, f in schema.all_fields()}

    @contextlib.contextmanager
    def open_table(self) -> Iterator[Table]:
        """The table, loaded fresh through its catalog, which is closed afterwards."""
        with CatalogManager(load_config_from(self.config_json)) as manager:
            yield manager.catalog(self.catalog_name).load_table(self.identifier)


def delete_quietly(io: FileIO, paths: Iterable[str]) -> None:
    """Delete files no commit references; what cannot be deleted is left to remove_orphan_files."""
    for path in paths:
        try:
            io.delete(path)
        except FileNotFoundError:
            pass
        except OSError as e:  # remove_orphan_files catches whatever is left
            log.warning("could not delete uncommitted file %s: %s", path, e)


def task_executor(context: TaskContext | None) -> str:
    """The executor a task runs on ("driver" in local mode), from the task's local properties."""
    return (context.getLocalProperty(_EXECUTOR_PROPERTY) if context else None) or "unknown"


def write_task(target: WriteTarget, iterator: Iterator[pa.RecordBatch]) -> TablestoreCommitMessage:
    """One Spark write task: the task's batches into data files, streamed through the writer
    the input calls for (single partition, clustered or fanout; see tablestore.table.write.writers).
    On failure the task's files are deleted: they are in no commit message, so nobody else could.
    """
    task = TaskContext.get()
    task_id = task.partitionId() if task is not None else 0
    schema = target.schema()
    io = load_file_io(target.io_properties)
    # The write id names every file of the write (a failed job's files are found by it, see
    # write_files.remove_write); the attempt id keeps a retried attempt from colliding
    # with the files of the failed one.
    attempt = task.taskAttemptId() if task is not None else uuid.uuid4().hex[:12]
    ctx = WriteContext(io, target.location, schema, target.spec(), dict(target.properties),
                       write_uuid=f"{target.write_id}-{attempt}")
    rows = 0

    def conformed() -> Iterator[pa.Table]:
        nonlocal rows
        for batch in iterator:
            if batch.num_rows:
                rows += batch.num_rows
                yield conform_to_schema(from_spark_table(pa.Table.from_batches([batch]), schema), schema)

    files = write_data_stream(ctx, conformed(), task_id)
    return TablestoreCommitMessage(files, task_id, rows)


def described_write_task(target: WriteTarget) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """:func:`write_task` as a ``mapInArrow`` function: one row per task, the JSON descriptions
    of its files (:mod:`tablestore.spec.manifests.content_file_json`) and where it ran."""

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        message = write_task(target, batches)
        partition_type, column_types = target.types()
        described = {
            "files": [content_file_to_json(f, partition_type, column_types, column_types) for f in message.files],
            "rows": message.rows,
            "stage": context.stageId() if context else -1,
            "partition": message.task_id,
            "attempt": context.attemptNumber() if context else 0,
            "executor": task_executor(context),
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
        yield pa.record_batch([pa.array([json.dumps(described)], pa.string())], names=["written"])

    return task


def check_write_schema(schema: st.StructType, target: WriteTarget) -> None:
    """Fail before any task runs when the DataFrame's columns cannot go into the table."""
    empty = spark_arrow_schema(schema).empty_table()
    conform_to_schema(from_spark_table(empty, target.schema()), target.schema())
