"""Streaming reads of the ``tablestore`` source: the appends of each new snapshot as micro-batches.

    (spark.readStream.format("tablestore")
       .option("stream-from-timestamp", "2026-11-29T00:00:00")     # optional
       .load("cat.db.events"))

Offsets are snapshot ids: ``{"version": 1, "snapshot_id": N}`` says that every snapshot up to
and including N (on the branch read, main unless the ``branch`` option says otherwise) has been
read. Spark keeps the offsets in its checkpoint and writes a batch's end offset there *before*
running it, so a query killed in the middle of a batch replays exactly that range, and a query
restarted from its checkpoint goes on after the last range it recorded: with an exactly-once
sink (the ``tablestore`` sink is one) every row arrives once. The first batch starts before the
oldest snapshot (``snapshot_id`` -1), or, with ``stream-from-timestamp`` (epoch ms or ISO
8601), at the first snapshot committed at or after that time.

What a range reads, as Iceberg's ``SparkMicroBatchStream``: the data files each ``append``
snapshot added (its own manifests, planned on the driver; one Spark partition per file, read on
the executors). A ``replace`` snapshot (compaction) changes no row and is passed over. A
``delete`` or ``overwrite`` snapshot cannot be expressed as appended rows, so by default it
fails the query with an error naming the option that passes over it:
``streaming-skip-delete-snapshots`` or ``streaming-skip-overwrite-snapshots``.

Rate limits, at snapshot granularity (a batch always takes at least one snapshot, and never
splits one): ``streaming-max-files-per-micro-batch`` and ``streaming-max-rows-per-micro-batch``,
counted from the snapshot summaries' ``added-data-files`` and ``added-records``.
``trigger(availableNow=True)`` reads what was committed when the query started, then stops.

Changelog mode (``streaming-changelog=true``), for tables that also delete and update: each
micro-batch is the changelog of its range (``Table.changes``): every row inserted or deleted,
with ``_change_type`` (INSERT, DELETE, UPDATE_BEFORE, UPDATE_AFTER, updates paired by the
table's identifier fields, or ``_row_id`` on format v3), ``_change_ordinal`` (the snapshot's
place in the micro-batch) and ``_commit_snapshot_id``. Delete and overwrite snapshots are part of
it, so the skip options do not apply. One Spark partition per snapshot of the range.

The rows come in the schema the table had when the query started (a streaming DataFrame's
schema is fixed); restart the query to see columns added since.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import types as st
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from tablestore.catalog.base import read_metadata_file
from tablestore.engine.local import LocalEngine
from tablestore.errors import ValidationError
from tablestore.io import load_file_io
from tablestore.spark.convert import spark_arrow_schema, to_spark_table
from tablestore.spark.datasource.source_read import READ_BATCH_ROWS, ReadState, split_task
from tablestore.spark.options import as_of_timestamp_ms, bool_option, resolved_table
from tablestore.spec.expressions.binding import bind
from tablestore.spec.metadata.table_metadata import Snapshot, TableMetadata
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.table.read.changelog import ChangelogScan, key_columns_for
from tablestore.table.read.changelog_range import resolve_range
from tablestore.table.read.changelog_rows import CHANGE_ORDINAL, CHANGE_TYPE, COMMIT_SNAPSHOT_ID
from tablestore.table.read.data_files import RowGroupRange, read_task_table
from tablestore.table.read.scan import FileTask, ancestors_between, plan_added_files

OFFSET_VERSION = 1
BEFORE_FIRST = -1  # the offset before the oldest snapshot: a new query reads the table from its start
SKIP_DELETES = "streaming-skip-delete-snapshots"
SKIP_OVERWRITES = "streaming-skip-overwrite-snapshots"
FROM_TIMESTAMP = "stream-from-timestamp"
MAX_FILES = "streaming-max-files-per-micro-batch"
MAX_ROWS = "streaming-max-rows-per-micro-batch"
CHANGELOG = "streaming-changelog"


def offset(snapshot_id: int) -> dict[str, int]:
    return {"version": OFFSET_VERSION, "snapshot_id": snapshot_id}


def offset_snapshot(value: Mapping[str, Any]) -> int:
    """The snapshot id of an offset Spark hands back (from this reader or its checkpoint)."""
    if value.get("version") != OFFSET_VERSION or not isinstance(value.get("snapshot_id"), int):
        raise ValidationError(f"the streaming offset {dict(value)} is not a tablestore offset of version "
                              f"{OFFSET_VERSION}; start the query with a new checkpoint location")
    return int(value["snapshot_id"])


@dataclass(frozen=True)
class StreamOptions:
    """The stream's own options, parsed once on the driver."""

    skip_deletes: bool = False
    skip_overwrites: bool = False
    from_timestamp_ms: int | None = None
    max_files: int | None = None
    max_rows: int | None = None
    branch: str = "main"
    changelog: bool = False

    @staticmethod
    def parse(options: Mapping[str, str]) -> StreamOptions:
        def positive(key: str) -> int | None:
            raw = options.get(key)
            if raw is None:
                return None
            if not str(raw).strip().isdigit() or int(raw) <= 0:
                raise ValidationError(f"option {key} must be a positive whole number, not {raw!r}")
            return int(raw)

        if options.get("tag") or options.get("snapshot-id") or options.get("as-of-timestamp") \
                or options.get("start-snapshot-id"):
            raise ValidationError("a streaming read follows a branch as it grows; give branch (default main), or "
                                  f"{FROM_TIMESTAMP} to start later, not tag, snapshot-id, as-of-timestamp or "
                                  "start-snapshot-id")
        raw_ts = options.get(FROM_TIMESTAMP)
        return StreamOptions(
            skip_deletes=bool_option(options, SKIP_DELETES, False),
            skip_overwrites=bool_option(options, SKIP_OVERWRITES, False),
            from_timestamp_ms=as_of_timestamp_ms(str(raw_ts)) if raw_ts is not None else None,
            max_files=positive(MAX_FILES),
            max_rows=positive(MAX_ROWS),
            branch=str(options.get("branch") or "main"),
            changelog=bool_option(options, CHANGELOG, False),
        )


class StreamFilePartition(InputPartition):
    """One data file (or some row groups of it) that a snapshot of the range appended, with its
    partition spec: the spec may be newer than the query, whose reader was pickled at its start."""

    def __init__(self, index: int, task: FileTask, spec_json: str, row_groups: RowGroupRange | None) -> None:
        super().__init__(index)
        self.task = task
        self.spec_json = spec_json
        self.row_groups = row_groups


class StreamChangesPartition(InputPartition):
    """The changelog of one snapshot (after ``start``, exclusive, up to ``snapshot_id``), read on
    an executor from the table metadata file the driver planned with."""

    def __init__(self, index: int, metadata_location: str, start: int | None, snapshot_id: int,
                 ordinal: int) -> None:
        super().__init__(index)
        self.metadata_location = metadata_location
        self.start = start
        self.snapshot_id = snapshot_id
        self.ordinal = ordinal


def changelog_spark_schema(schema: st.StructType) -> st.StructType:
    """A stream's columns in changelog mode: the table's, then Iceberg's changelog columns."""
    return st.StructType([*schema.fields, st.StructField(CHANGE_TYPE, st.StringType(), False),
                          st.StructField(CHANGE_ORDINAL, st.IntegerType(), False),
                          st.StructField(COMMIT_SNAPSHOT_ID, st.LongType(), False)])


class TablestoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans each micro-batch's appended files on the driver; reads them on the executors."""

    def __init__(self, options: Mapping[str, str], default_config: str | None, state: ReadState,
                 schema: st.StructType) -> None:
        self.options = dict(options)
        self.default_config = default_config
        self.state = state
        self.stream = StreamOptions.parse(options)
        self.spark_schema_json = schema.json()
        self.available_now: int | None = None  # the head when trigger(availableNow=True) started
        self._cache: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state

    # -- on the driver -----------------------------------------------------------------------
    def _metadata(self) -> TableMetadata:
        with resolved_table(self.options, self.default_config) as (_, catalog, identifier):
            return catalog.load_table_metadata(identifier)[1]

    def _head(self, metadata: TableMetadata) -> Snapshot | None:
        return metadata.snapshot_by_ref(self.stream.branch)

    def initialOffset(self) -> dict[str, int]:
        metadata = self._metadata()
        if self.stream.from_timestamp_ms is None:
            return offset(BEFORE_FIRST)
        head = self._head(metadata)
        lineage = list(metadata.ancestors_of(head.snapshot_id)) if head is not None else []
        later = [s for s in lineage if s.timestamp_ms >= self.stream.from_timestamp_ms]
        if not later:
            return offset(head.snapshot_id if head is not None else BEFORE_FIRST)
        first = later[-1]  # the oldest snapshot at or after the time: read from it on
        parent = first.parent_snapshot_id
        return offset(parent if parent is not None and metadata.snapshot_by_id(parent) is not None else BEFORE_FIRST)

    def prepareForTriggerAvailableNow(self) -> None:
        head = self._head(self._metadata())
        self.available_now = head.snapshot_id if head is not None else BEFORE_FIRST

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.stream.max_files is not None:
            return ReadMaxFiles(self.stream.max_files)
        if self.stream.max_rows is not None:
            return ReadMaxRows(self.stream.max_rows)
        return ReadAllAvailable()

    def _pending(self, metadata: TableMetadata, start: int, end: int) -> list[Snapshot]:
        """The snapshots after ``start`` up to ``end``, oldest first, each checked: a delete or
        overwrite that is not to be passed over fails the query here, before Spark records it."""
        if start == end:
            return []
        snapshots = ancestors_between(metadata, None if start == BEFORE_FIRST else start, end)[::-1]
        if self.stream.changelog:
            return snapshots  # deletes and overwrites are changes like the others
        for s in snapshots:
            if s.operation == "delete" and not self.stream.skip_deletes:
                raise ValidationError(
                    f"table {self.state.table_name}: snapshot {s.snapshot_id} deletes rows, which a stream of "
                    f"appends cannot carry; set the option {SKIP_DELETES}=true to pass over delete snapshots")
            if s.operation == "overwrite" and not self.stream.skip_overwrites:
                raise ValidationError(
                    f"table {self.state.table_name}: snapshot {s.snapshot_id} overwrites rows, which a stream of "
                    f"appends cannot carry; set the option {SKIP_OVERWRITES}=true to pass over overwrite snapshots")
        return snapshots

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:
        metadata = self._metadata()
        head = self._head(metadata)
        first = offset_snapshot(start)
        if head is None:
            return offset(first)
        end = head.snapshot_id if self.available_now is None else self.available_now
        if end == BEFORE_FIRST:
            return offset(first)
        pending = self._pending(metadata, first, end)
        if not pending or isinstance(limit, ReadAllAvailable):
            return offset(end)
        # Take whole snapshots while under the limit; always at least one, or the stream stalls.
        taken, files, rows = pending[0], 0, 0
        for s in pending:
            if s.operation == "append":
                files += int(s.summary.get("added-data-files", "0"))
                rows += int(s.summary.get("added-records", "0"))
            over = (isinstance(limit, ReadMaxFiles) and files > limit.max_files) or \
                (isinstance(limit, ReadMaxRows) and rows > limit.max_rows)
            if over and s is not pending[0]:
                break
            taken = s
        return offset(taken.snapshot_id)

    def reportLatestOffset(self) -> dict[str, int] | None:
        head = self._head(self._metadata())
        return offset(head.snapshot_id) if head is not None else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        first, last = offset_snapshot(start), offset_snapshot(end)
        if first == last:
            return []
        with resolved_table(self.options, self.default_config) as (_, catalog, identifier):
            location, metadata = catalog.load_table_metadata(identifier)
            io = catalog.table_io(metadata)
        if self.stream.changelog:
            return self._change_partitions(location, metadata, first, last)
        appends = [s for s in self._pending(metadata, first, last) if s.operation == "append"]
        schema = self.state.schema()
        tasks = plan_added_files(io, metadata, appends, schema, bind(schema, self.state.row_filter), LocalEngine())
        specs = {s.spec_id: json.dumps(s.to_json()) for s in metadata.partition_specs}
        out: list[InputPartition] = []
        for task in tasks:
            for row_groups, _ in split_task(task, self.state.split_size):
                out.append(StreamFilePartition(len(out), task, specs[task.spec_id], row_groups))
        return out

    def _change_partitions(self, location: str, metadata: TableMetadata, first: int,
                           last: int) -> list[InputPartition]:
        # The range's snapshots that may change rows, oldest first: their index is the ordinal.
        head = metadata.snapshot_by_id(last)
        changing = resolve_range(metadata, head, None if first == BEFORE_FIRST else first, last).snapshots
        out: list[InputPartition] = []
        start = None if first == BEFORE_FIRST else first
        for ordinal, snapshot in enumerate(changing):
            out.append(StreamChangesPartition(ordinal, location, start, snapshot.snapshot_id, ordinal))
            start = snapshot.snapshot_id
        return out

    # -- on the executors ----------------------------------------------------------------------
    def _context(self) -> dict[str, Any]:
        ctx = self._cache
        if not ctx:
            schema = self.state.schema()
            ctx.update(io=load_file_io(self.state.io_properties), schema=schema, projected=self.state.projected(),
                       row_filter=bind(schema, self.state.row_filter),
                       target=spark_arrow_schema(st.StructType.fromJson(json.loads(self.spark_schema_json))))
        return ctx

    def _read_changes(self, partition: StreamChangesPartition) -> Iterator[pa.RecordBatch]:
        ctx = self._context()
        metadata = read_metadata_file(ctx["io"], partition.metadata_location)
        snapshot_range = resolve_range(metadata, metadata.snapshot_by_id(partition.snapshot_id), partition.start,
                                       partition.snapshot_id)
        end = snapshot_range.end
        schema = (metadata.schema_by_id(end.schema_id) if end is not None and end.schema_id is not None
                  else None) or metadata.schema()
        keys = key_columns_for(schema, metadata.format_version, None, None)
        scan = ChangelogScan(ctx["io"], metadata, LocalEngine(), snapshot_range, keys, False)
        target: pa.Schema = ctx["target"]
        for batch in scan.to_batches():
            if batch.num_rows == 0:
                continue
            # The stream's columns (the schema at its start) by name; a column dropped since reads NULL.
            columns = [batch.column(f.name) if f.name in batch.schema.names else pa.nulls(batch.num_rows, f.type)
                       for f in target]
            columns[target.get_field_index(CHANGE_ORDINAL)] = pa.array([partition.ordinal] * batch.num_rows,
                                                                       pa.int32())
            table = pa.Table.from_arrays(columns, schema=target)
            yield from to_spark_table(table, target, self.state.table_name).to_batches(max_chunksize=READ_BATCH_ROWS)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, StreamChangesPartition):
            yield from self._read_changes(partition)
            return
        if not isinstance(partition, StreamFilePartition):
            return
        ctx = self._context()
        task = partition.task
        spec = PartitionSpec.from_json(json.loads(partition.spec_json))
        table = read_task_table(ctx["io"], task.file, (), spec, ctx["schema"], ctx["projected"], ctx["row_filter"],
                                self.state.name_mapping, partition.row_groups, task.data_sequence_number)
        if table.num_rows:
            yield from to_spark_table(table, ctx["target"], self.state.table_name).to_batches(
                max_chunksize=READ_BATCH_ROWS)


def stream_reader(options: Mapping[str, str], default_config: str | None, state: ReadState,
                  schema: st.StructType) -> TablestoreStreamReader:
    """What ``TablestoreDataSource.streamReader`` returns."""
    return TablestoreStreamReader(options, default_config, state, schema)
