"""Writes of the ``tablestore`` data source: each Spark task writes Parquet data files
(:func:`~tablestore.spark.write_task.write_task`), the driver makes exactly one table
commit (:func:`~tablestore.spark.commit.commit_files`) or deletes the files when the job
fails.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from tablestore.errors import CommitStateUnknownError
from tablestore.io import load_file_io
from tablestore.spark.commit import (
    APPEND,
    REPLACE_TABLE,
    WRITE_ID_PROPERTY,
    FilesCommit,
    commit_files,
    writer_identity,
)
from tablestore.spark.options import SNAPSHOT_PROPERTY_PREFIX, resolved_table
from tablestore.spark.write_task import TablestoreCommitMessage, WriteTarget, delete_quietly, write_task
from tablestore.spec.manifests.manifest import DataFile

log = logging.getLogger(__name__)


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


def commit_write(target: WriteTarget, files: list[DataFile], overwrite: bool) -> None:
    """The one commit of a data source write (its tasks', or Spark's native Parquet writer's
    files): an append, or with ``overwrite`` the whole table replaced."""
    # The overwrite replaces what the job could have read when it started; rows that another
    # writer added since then would be lost without anyone deciding so.
    how = FilesCommit(REPLACE_TABLE, read_snapshot_id=target.base_snapshot_id) if overwrite else FilesCommit(APPEND)
    with target.open_table() as table:
        # The write id marks the snapshot, so abort() (and a retry) can tell whether it landed.
        commit_files(table, files, writer_identity(target.write_id), how, target.snapshot_properties,
                     writer="the Spark job")


class TablestoreWriter(DataSourceArrowWriter):
    """Tasks write Parquet data files; the driver's ``commit()`` makes exactly one table commit."""

    def __init__(self, target: WriteTarget, overwrite: bool) -> None:
        self.target = target
        self.overwrite = overwrite
        #: commit() ended with an unknown outcome: abort() must keep every file (it may have landed).
        self.outcome_unknown = False

    # -- on the executors ------------------------------------------------------------------
    def write(self, iterator: Iterator[pa.RecordBatch]) -> TablestoreCommitMessage:
        return write_task(self.target, iterator)

    # -- on the driver -----------------------------------------------------------------------
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        try:
            commit_write(self.target, [f for m in messages if isinstance(m, TablestoreCommitMessage)
                                       for f in m.files], self.overwrite)
        except CommitStateUnknownError:
            self.outcome_unknown = True
            raise

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        files = [f.file_path for m in messages if isinstance(m, TablestoreCommitMessage) for f in m.files]
        if not files or self.outcome_unknown:  # a commit whose outcome is unknown keeps its files
            return
        try:
            with self.target.open_table() as table:
                landed = any(s.summary.get(WRITE_ID_PROPERTY) == self.target.write_id for s in table.snapshots())
        except Exception as e:  # cannot tell whether the commit landed: orphans are the safe side
            log.warning("not deleting %d file(s) of aborted write %s: %s", len(files), self.target.write_id, e)
            return
        if not landed:  # Spark also aborts after a commit() that failed late, when it may have landed
            delete_quietly(load_file_io(self.target.io_properties), files)
