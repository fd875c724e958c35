"""The ``tablestore`` Structured Streaming sink: one table commit per micro-batch, exactly once.

    (df.writeStream.format("tablestore")
       .option("checkpointLocation", "/chk/events")
       .outputMode("append")            # or "complete": every batch replaces the table
       .start("cat.db.events"))

Spark's micro-batch engine is at-least-once towards a sink: after a crash it replays the
batches whose end it had not yet recorded in the checkpoint, including a batch the sink had
already committed. So each commit records who made it, under the keys Iceberg's Spark sink
uses, in the snapshot summary:

- ``spark.sql.streaming.queryId``: the query's id, which Spark keeps in the checkpoint, so it
  is the same after every restart from that checkpoint;
- ``spark.sql.streaming.epochId``: the micro-batch id.

That pair is the batch's commit identity, the engine-neutral one of the commit path
(:mod:`tablestore.table.update.identity`): before committing batch N, the transaction walks
the table's history from the current snapshot back to the newest snapshot of the same query; if
that snapshot's batch id is N or more, batch N was committed before and this one is a replay:
its files are deleted and nothing is committed. The same check runs again on every commit
retry, so a replay racing its original cannot land twice either.

Where the query id comes from: Spark sets the local property ``sql.streaming.queryId`` on every
task of a streaming query, so each write task puts it in its commit message; for a batch
without tasks the driver reads it from the checkpoint's ``metadata`` file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import types as st
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from tablestore.errors import CommitConflictError, CommitStateUnknownError, TableStoreError
from tablestore.io.cleanup import deleted_unless_sent
from tablestore.spark.commit import APPEND, REPLACE_TABLE, FilesCommit, commit_files
from tablestore.spark.datasource.source_write import resolve_write
from tablestore.spark.write_task import (
    TablestoreCommitMessage,
    WriteTarget,
    check_write_schema,
    delete_quietly,
    write_task,
)
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.metadata.table_metadata import Snapshot, TableMetadata
from tablestore.table import CommitIdentity

if TYPE_CHECKING:
    from tablestore.table import Table

log = logging.getLogger(__name__)

# The snapshot summary keys of Iceberg's Spark streaming sink (SparkWrite.BaseStreamingWrite).
QUERY_ID_PROPERTY = "spark.sql.streaming.queryId"
EPOCH_ID_PROPERTY = "spark.sql.streaming.epochId"
# Spark's StreamExecution.QUERY_ID_KEY: a local property on every task of a streaming query.
QUERY_ID_LOCAL_PROPERTY = "sql.streaming.queryId"
CHECKPOINT_OPTION = "checkpointLocation"


@dataclass
class StreamCommitMessage(TablestoreCommitMessage):
    """A write task's files, with the id of the streaming query that wrote them."""

    query_id: str | None = None


def batch_identity(query_id: str, batch_id: int | None = None) -> CommitIdentity:
    """The commit identity of a streaming query's batch, under the keys of Iceberg's sink."""
    return CommitIdentity(query_id, QUERY_ID_PROPERTY, batch_id, EPOCH_ID_PROPERTY)


def last_committed_batch(metadata: TableMetadata, query_id: str) -> int | None:
    """The batch id of the newest snapshot on main that the query committed, as Iceberg's sink
    finds it: walk back from the current snapshot to the first one carrying the query id."""
    return batch_identity(query_id).latest_sequence(metadata)


def commit_batch(
    table: Table,
    files: list[DataFile],
    query_id: str | None,
    batch_id: int,
    complete: bool = False,
    snapshot_properties: dict[str, str] | None = None,
) -> Snapshot | None:
    """Commit one micro-batch; None when it is a replay of a committed batch (its files are
    deleted) or an empty append. In complete mode the batch replaces the whole table, unless a
    commit added data since the table was loaded for this commit."""
    properties = {**(snapshot_properties or {}), EPOCH_ID_PROPERTY: str(batch_id)}
    identity = None
    if query_id is not None:
        identity = batch_identity(query_id, batch_id)
    else:
        log.warning("streaming batch %d has no query id: a replay of it could not be recognised", batch_id)
    if complete:
        # The replaced files are those of the current snapshot; a commit since may have added more.
        current = table.current_snapshot()
        how = FilesCommit(REPLACE_TABLE, read_snapshot_id=current.snapshot_id if current is not None else None)
    elif not files:
        return None  # an empty batch: nothing to add, nothing a replay could duplicate
    else:
        how = FilesCommit(APPEND)
    committed = commit_files(table, files, identity, how, properties, writer=f"streaming batch {batch_id}")
    if committed.applied_before:
        # The transaction deleted the replay's files.
        log.info("skipping streaming batch %d of query %s: it was committed before", batch_id, query_id)
        return None
    return committed.snapshot


def checkpoint_query_id(checkpoint: str | None, io_properties: Mapping[str, str]) -> str | None:
    """The query id Spark keeps in ``<checkpoint>/metadata`` (``{"id": "..."}``), if readable."""
    if not checkpoint:
        return None
    from tablestore.io import load_file_io

    path = checkpoint.rstrip("/") + "/metadata"
    try:
        with load_file_io(dict(io_properties)).new_input(path).open() as stream:
            text = stream.read().decode("utf-8")
        return str(json.loads(text.splitlines()[0])["id"])
    except (OSError, ValueError, KeyError, IndexError, TableStoreError) as e:
        log.warning("could not read the streaming query id from %s: %s", path, e)
        return None


class TablestoreStreamWriter(DataSourceStreamArrowWriter):
    """Tasks write data files as in a batch write; the driver commits each micro-batch once."""

    def __init__(self, target: WriteTarget, complete: bool, checkpoint: str | None) -> None:
        self.target = target
        self.complete = complete
        self.checkpoint = checkpoint
        #: Batches whose commit ended with an unknown outcome: abort() keeps their files.
        self.outcome_unknown: set[int] = set()

    # -- on the executors ------------------------------------------------------------------
    def write(self, iterator: Iterator[pa.RecordBatch]) -> StreamCommitMessage:
        from pyspark import TaskContext

        message = write_task(self.target, iterator)
        task = TaskContext.get()
        query_id = task.getLocalProperty(QUERY_ID_LOCAL_PROPERTY) if task is not None else None
        return StreamCommitMessage(message.files, message.task_id, message.rows, query_id)

    # -- on the driver -----------------------------------------------------------------------
    def query_id(self, messages: list[WriterCommitMessage | None]) -> str | None:
        ids = {m.query_id for m in messages if isinstance(m, StreamCommitMessage) and m.query_id}
        if len(ids) > 1:
            raise CommitConflictError(f"write tasks of one micro-batch report different query ids: {sorted(ids)}")
        return ids.pop() if ids else checkpoint_query_id(self.checkpoint, self.target.io_properties)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        files = [f for m in messages if isinstance(m, TablestoreCommitMessage) for f in m.files]
        with self.target.open_table() as table:
            # No commit will reference the files if the batch cannot be named.
            with deleted_unless_sent(lambda: delete_quietly(table.io, [f.file_path for f in files])):
                query_id = self.query_id(messages)
            try:
                commit_batch(table, files, query_id, batchId, self.complete, self.target.snapshot_properties)
            except CommitStateUnknownError:
                self.outcome_unknown.add(batchId)
                raise

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        from tablestore.io import load_file_io

        files = [f.file_path for m in messages if isinstance(m, TablestoreCommitMessage) for f in m.files]
        if not files or batchId in self.outcome_unknown:  # it may have landed: keep its files
            return
        query_id = self.query_id(messages)
        try:
            with self.target.open_table() as table:
                last = last_committed_batch(table.metadata, query_id) if query_id else None
        except Exception as e:  # cannot tell whether the batch landed: orphans are the safe side
            log.warning("not deleting %d file(s) of aborted streaming batch %d: %s", len(files), batchId, e)
            return
        if last is None or last < batchId:
            delete_quietly(load_file_io(self.target.io_properties), files)


def stream_writer(options: Mapping[str, str], default_config: str | None, schema: st.StructType,
                  overwrite: bool) -> TablestoreStreamWriter:
    """What ``TablestoreDataSource.streamWriter`` returns. Spark passes ``overwrite`` for the
    complete output mode, where every batch holds the whole result."""
    target = resolve_write(options, default_config)
    check_write_schema(schema, target)
    checkpoint = _option(options, CHECKPOINT_OPTION)
    return TablestoreStreamWriter(target, overwrite, checkpoint)


def _option(options: Mapping[str, Any], key: str) -> str | None:
    value = options.get(key)
    if value is None:  # Spark's options are case-insensitive, a plain dict is not
        lowered = key.lower()
        value = next((v for k, v in options.items() if k.lower() == lowered), None)
    return str(value) if value is not None else None
