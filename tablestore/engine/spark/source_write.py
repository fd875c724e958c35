"""Writes of the ``tablestore`` data source: each Spark task writes Parquet data files, the
driver makes exactly one table commit (or deletes the files when the job fails).
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import types as st
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from tablestore.engine.local import LocalEngine
from tablestore.engine.spark.convert import from_spark_table, spark_arrow_schema
from tablestore.engine.spark.source_options import SNAPSHOT_PROPERTY_PREFIX, load_config_from, resolved_table
from tablestore.errors import CommitConflictError, CommitStateUnknownError
from tablestore.io import FileIO, load_file_io
from tablestore.session import CatalogManager
from tablestore.spec import expressions as ex
from tablestore.spec.manifest import DataFile
from tablestore.spec.partitioning import PartitionSpec
from tablestore.spec.schema import Schema
from tablestore.table import Table
from tablestore.table.read.scan import plan_files
from tablestore.table.update.identity import CommitIdentity
from tablestore.table.update.snapshot import FastAppend, OverwriteFiles
from tablestore.table.update.transaction import commit_snapshot
from tablestore.table.update.validation import no_data_added
from tablestore.table.write.conform import conform_to_schema
from tablestore.table.write.data_files import WriteContext
from tablestore.table.write.writers import write_data_stream

log = logging.getLogger(__name__)

# Snapshot summary key naming the Spark write that produced a snapshot: abort() looks for it
# so that it never deletes the files of a commit that did land.
WRITE_ID_PROPERTY = "tablestore.write-id"


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

    @contextlib.contextmanager
    def open_table(self) -> Iterator[Table]:
        """The table, loaded fresh through its catalog, which is closed afterwards."""
        with CatalogManager(load_config_from(self.config_json)) as manager:
            yield manager.catalog(self.catalog_name).load_table(self.identifier)


def resolve_write(options: Mapping[str, str], default_config: str | None) -> WriteTarget:
    with resolved_table(options, default_config) as (config_json, catalog, identifier):
        _, metadata = catalog.load_table_metadata(identifier)
        io = catalog.table_io(metadata)
    snapshot = metadata.current_snapshot()
    return WriteTarget(
        config_json=config_json,
        catalog_name=catalog.name,
        identifier=identifier,
        location=metadata.location.rstrip("/"),
        io_properties=dict(io.properties),
        schema_json=json.dumps(metadata.schema().to_json()),
        spec_json=json.dumps(metadata.spec().to_json()),
        properties=dict(metadata.properties),
        base_snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
        snapshot_properties={
            k[len(SNAPSHOT_PROPERTY_PREFIX):]: v for k, v in options.items() if k.startswith(SNAPSHOT_PROPERTY_PREFIX)
        },
    )


def delete_quietly(io: FileIO, paths: Iterable[str]) -> None:
    """Delete files no commit references; what cannot be deleted is left to remove_orphan_files."""
    for path in paths:
        try:
            io.delete(path)
        except FileNotFoundError:
            pass
        except OSError as e:  # remove_orphan_files catches whatever is left
            log.warning("could not delete uncommitted file %s: %s", path, e)


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
    # spark_write_files.remove_write); the attempt id keeps a retried attempt from colliding
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


class TablestoreWriter(DataSourceArrowWriter):
    """Tasks write Parquet data files; the driver's ``commit()`` makes exactly one table commit."""

    def __init__(self, target: WriteTarget, overwrite: bool) -> None:
        self.target = target
        self.overwrite = overwrite

    # -- on the executors ------------------------------------------------------------------
    def write(self, iterator: Iterator[pa.RecordBatch]) -> TablestoreCommitMessage:
        return write_task(self.target, iterator)

    # -- on the driver -----------------------------------------------------------------------
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        files = [f for m in messages if isinstance(m, TablestoreCommitMessage) for f in m.files]
        with self.target.open_table() as table:
            try:
                self._commit(table, files)
            except CommitStateUnknownError:
                raise  # the commit may have landed: keep every file (abort() checks, too)
            except BaseException:
                # A failing snapshot producer removes what it wrote; this also covers a
                # commit refused before any producer ran.
                delete_quietly(table.io, [f.file_path for f in files])
                raise

    def _commit(self, table: Table, files: list[DataFile]) -> None:
        # The write id marks the snapshot, so abort() (and a retry) can tell whether it landed.
        identity = CommitIdentity(self.target.write_id, WRITE_ID_PROPERTY)
        properties = dict(self.target.snapshot_properties)
        if files and table.spec().spec_id != self.target.spec().spec_id:
            # The files' partition tuples follow the old spec; the new manifest would not.
            raise CommitConflictError(
                f"the partition spec of {self.target.table_name} changed while the Spark job wrote "
                "its files; run the write again"
            )
        if not self.overwrite:
            commit_snapshot(FastAppend(table, files, properties), identity)
            return
        snapshot = table.current_snapshot()
        replaced = []
        if snapshot is not None:
            tasks = plan_files(table.io, table.metadata, snapshot, table.schema(), ex.AlwaysTrue(), LocalEngine())
            replaced = [t.file for t in tasks]
        # The overwrite replaces what the job could have read when it started; rows that
        # another writer added since then would be lost without anyone deciding so.
        no_new_data = no_data_added(
            lambda added: f"{len(added)} data file(s) were added to {self.target.table_name} while the Spark "
                          "overwrite ran; run it again on the new table state"
        )
        commit_snapshot(OverwriteFiles(table, replaced, files, "overwrite", self.target.base_snapshot_id,
                                       checks=[no_new_data], snapshot_properties=properties), identity)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        files = [f.file_path for m in messages if isinstance(m, TablestoreCommitMessage) for f in m.files]
        if not files:
            return
        try:
            with self.target.open_table() as table:
                landed = any(s.summary.get(WRITE_ID_PROPERTY) == self.target.write_id for s in table.snapshots())
        except Exception as e:  # cannot tell whether the commit landed: orphans are the safe side
            log.warning("not deleting %d file(s) of aborted write %s: %s", len(files), self.target.write_id, e)
            return
        if not landed:  # Spark also aborts after a commit() that failed late, when it may have landed
            delete_quietly(load_file_io(self.target.io_properties), files)


def check_write_schema(schema: st.StructType, target: WriteTarget) -> None:
    """Fail before any task runs when the DataFrame's columns cannot go into the table."""
    empty = spark_arrow_schema(schema).empty_table()
    conform_to_schema(from_spark_table(empty, target.schema()), target.schema())
