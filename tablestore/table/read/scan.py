"""Scan planning and scan results.

catalog → metadata → snapshot → manifest list → manifests pruned by partition summaries →
entries pruned by partition values and column bounds → file tasks carrying their delete files.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

from tablestore.errors import CorruptMetadataError, NoSuchSnapshotError, UnsupportedError, ValidationError
from tablestore.io.fileio import FileIO
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.evaluators import InclusiveMetricsEvaluator, ManifestEvaluator, PartitionEvaluator
from tablestore.spec.expressions.expression_parser import to_expression
from tablestore.spec.expressions.expression_tree import AlwaysTrue, BoundExpression, Expression
from tablestore.spec.manifests.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    inherit_first_row_ids,
    read_manifest,
    read_manifest_list,
)
from tablestore.spec.metadata.table_metadata import Snapshot, TableMetadata
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.name_mapping import DEFAULT_NAME_MAPPING
from tablestore.spec.schemas.row_lineage import ROW_LINEAGE_BY_NAME, ROW_LINEAGE_IDS
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import StringType
from tablestore.table.read.data_files import DELETE_FILE_PATH_ID, read_task_table
from tablestore.table.read.deletion_vectors import is_deletion_vector

if TYPE_CHECKING:
    import pandas as pd

    from tablestore.engine.protocols import Engine


@dataclass(frozen=True)
class FileTask:
    """One data file to read, with the delete files that apply to it."""

    file: DataFile
    data_sequence_number: int
    delete_files: tuple[DataFile, ...] = ()
    # What is left of the scan's filter for this file's partition, when a planner worked it out
    # (server-side planning sends it); None reads with the scan's whole filter.
    residual: BoundExpression | None = None

    @property
    def spec_id(self) -> int:
        return self.file.spec_id

    @property
    def length(self) -> int:
        return self.file.file_size_in_bytes


@dataclass(frozen=True)
class _IndexedDelete:
    sequence_number: int
    file: DataFile


@dataclass
class DeleteFileIndex:
    """Delete files by partition, matched to data files by the spec's sequence-number rules.

    A position delete applies to data files with a data sequence number less than or equal to
    its own; an equality delete only to strictly older ones. Deletes in an unpartitioned spec
    apply to every partition.
    """

    by_partition: dict[tuple[int, tuple[Any, ...]], list[_IndexedDelete]] = field(default_factory=dict)
    global_deletes: list[_IndexedDelete] = field(default_factory=list)
    specs: dict[int, PartitionSpec] = field(default_factory=dict)

    def add(self, entry: ManifestEntry) -> None:
        df = entry.data_file
        item = _IndexedDelete(entry.sequence_number or 0, df)
        spec = self.specs.get(df.spec_id)
        if spec is None or spec.is_unpartitioned():
            self.global_deletes.append(item)
        else:
            self.by_partition.setdefault((df.spec_id, tuple(df.partition)), []).append(item)

    def __bool__(self) -> bool:
        return bool(self.by_partition or self.global_deletes)

    def for_data_file(self, sequence_number: int, data_file: DataFile) -> tuple[DataFile, ...]:
        candidates = self.by_partition.get((data_file.spec_id, tuple(data_file.partition)), [])
        out = []
        dv: DataFile | None = None
        for item in (*candidates, *self.global_deletes):
            df = item.file
            if df.content == DataFileContent.POSITION_DELETES:
                if item.sequence_number < sequence_number:
                    continue
                if df.referenced_data_file and df.referenced_data_file != data_file.file_path:
                    continue
                if not path_in_bounds(df, data_file.file_path):
                    continue
                if is_deletion_vector(df):
                    if dv is not None:
                        raise CorruptMetadataError(
                            f"data file {data_file.file_path} has two live deletion vectors ({dv.file_path} and "
                            f"{df.file_path}); a snapshot may hold at most one DV per data file"
                        )
                    dv = df
            elif item.sequence_number <= sequence_number:
                continue
            out.append(df)
        if dv is not None:
            # A DV writer merges the file's older position deletes into the DV, so with a DV the
            # position delete files are ignored, as Java's DeleteFileIndex does.
            out = [df for df in out if df is dv or df.content != DataFileContent.POSITION_DELETES]
        return tuple(out)


def path_in_bounds(delete_file: DataFile, path: str) -> bool:
    lower = (delete_file.lower_bounds or {}).get(DELETE_FILE_PATH_ID)
    upper = (delete_file.upper_bounds or {}).get(DELETE_FILE_PATH_ID)
    if lower is not None and conversions.from_bytes(StringType(), lower) > path:
        return False
    return not (upper is not None and conversions.from_bytes(StringType(), upper) < path)


def select_snapshot(
    metadata: TableMetadata, snapshot_id: int | None = None, as_of_timestamp_ms: int | None = None,
    ref: str | None = None,
) -> Snapshot | None:
    if sum(x is not None for x in (snapshot_id, as_of_timestamp_ms, ref)) > 1:
        raise ValidationError("give only one of snapshot_id, as_of_timestamp and ref")
    if snapshot_id is not None:
        snapshot = metadata.snapshot_by_id(snapshot_id)
        if snapshot is None:
            ids = ", ".join(str(s.snapshot_id) for s in metadata.snapshots[-5:]) or "none"
            raise NoSuchSnapshotError(
                f"the table has no snapshot {snapshot_id} (it may have been expired); "
                f"recent snapshots: {ids}"
            )
        return snapshot
    if as_of_timestamp_ms is not None:
        return metadata.snapshot_as_of(as_of_timestamp_ms)
    if ref is not None:
        snapshot = metadata.snapshot_by_ref(ref)
        if snapshot is None:
            raise NoSuchSnapshotError(f"the table has no branch or tag {ref!r}")
        return snapshot
    return metadata.current_snapshot()


def read_pruned_manifest(io: FileIO, m: ManifestFile, evaluator: PartitionEvaluator | None,
                         specs: dict[int, PartitionSpec]) -> list[ManifestEntry]:
    """A manifest's entries in the partitions ``evaluator`` accepts, data files with their
    inherited ``first_row_id``: row ids are inherited in file order over the whole manifest, so
    in a v3 manifest the partition filter applies after inheritance."""
    if m.first_row_id is not None and m.content == ManifestContent.DATA:
        entries = inherit_first_row_ids(m, read_manifest(io, m, specs=specs))
        return [e for e in entries if evaluator.eval(e.data_file.partition)] if evaluator is not None else entries
    return read_manifest(io, m, partition_filter=evaluator.eval if evaluator else None, specs=specs)


def plan_files(
    io: FileIO,
    metadata: TableMetadata,
    snapshot: Snapshot | None,
    schema: Schema,
    row_filter: BoundExpression,
    engine: Engine,
) -> list[FileTask]:
    """The file tasks of a scan, with manifest, partition and column-bound pruning."""
    if snapshot is None:
        return []
    if snapshot.manifest_list is None:
        raise UnsupportedError(
            f"snapshot {snapshot.snapshot_id} lists its manifests inline (an Iceberg v1 table written "
            "before manifest lists); rewrite the table's metadata with a newer writer to read it"
        )
    manifests = read_manifest_list(io, snapshot.manifest_list)
    specs = {spec.spec_id: spec for spec in metadata.partition_specs}
    filtering = not isinstance(row_filter, AlwaysTrue)
    manifest_evaluators: dict[int, ManifestEvaluator] = {}
    partition_evaluators: dict[int, PartitionEvaluator] = {}
    if filtering:
        for spec_id, spec in specs.items():
            manifest_evaluators[spec_id] = ManifestEvaluator(spec, schema, row_filter)
            partition_evaluators[spec_id] = PartitionEvaluator(spec, schema, row_filter)
    metrics = InclusiveMetricsEvaluator(schema, row_filter) if filtering else None

    def keep_manifest(m: ManifestFile) -> bool:
        if not (m.added_files_count or m.existing_files_count or m.added_files_count is None
                or m.existing_files_count is None):
            return False
        evaluator = manifest_evaluators.get(m.partition_spec_id)
        return evaluator is None or evaluator.eval(m)

    data_manifests = [m for m in manifests if m.content == ManifestContent.DATA and keep_manifest(m)]
    delete_manifests = [m for m in manifests if m.content == ManifestContent.DELETES and keep_manifest(m)]

    def live_entries(m: ManifestFile) -> list[ManifestEntry]:
        entries = read_pruned_manifest(io, m, partition_evaluators.get(m.partition_spec_id), specs)
        return [e for e in entries if e.status != ManifestEntryStatus.DELETED]

    deletes = DeleteFileIndex(specs=specs)
    for entries in engine.map(live_entries, delete_manifests):
        for entry in entries:
            deletes.add(entry)
    tasks = []
    for entries in engine.map(live_entries, data_manifests):
        for entry in entries:
            df = entry.data_file
            if metrics is not None and not metrics.eval(df):
                continue
            seq = entry.sequence_number or 0
            tasks.append(FileTask(df, seq, deletes.for_data_file(seq, df) if deletes else ()))
    return tasks


def projected_schema(schema: Schema, columns: list[str] | None, case_sensitive: bool = True) -> Schema:
    """The columns of a scan, in the caller's order. Besides the table's columns, the names of
    the row lineage metadata columns (``_row_id``, ``_last_updated_sequence_number``) select
    them, as in Spark; a table column of that name wins."""
    if columns is None:
        return schema

    def lineage(name: str) -> bool:
        key = name if case_sensitive else name.lower()
        return key in ROW_LINEAGE_BY_NAME and schema.find_field_id(name, case_sensitive) is None

    projected = schema.select([c for c in columns if not lineage(c)], case_sensitive)
    by_id = {f.field_id: f for f in projected.fields}
    order = []
    for c in columns:
        if lineage(c):
            f = ROW_LINEAGE_BY_NAME[c if case_sensitive else c.lower()]
        else:
            f = schema.find_field(c, case_sensitive)
        by_id.setdefault(f.field_id, f)
        if f.field_id not in order:
            order.append(f.field_id)
    return Schema(tuple(by_id[i] for i in order if i in by_id), schema.schema_id)


def ancestors_between(metadata: TableMetadata, start_snapshot_id: int | None, end_snapshot_id: int) -> list[Snapshot]:
    """The snapshots after ``start`` (exclusive) up to ``end`` (inclusive), newest first; with no
    ``start``, every ancestor of ``end`` the metadata still holds, ``end`` included."""
    end = metadata.snapshot_by_id(end_snapshot_id)
    if end is None:
        raise NoSuchSnapshotError(f"the table has no snapshot {end_snapshot_id} (end-snapshot-id)")
    if start_snapshot_id is not None and metadata.snapshot_by_id(start_snapshot_id) is None:
        raise NoSuchSnapshotError(f"the table has no snapshot {start_snapshot_id} (start-snapshot-id)")
    out: list[Snapshot] = []
    snapshot: Snapshot | None = end
    while snapshot is not None and snapshot.snapshot_id != start_snapshot_id:
        out.append(snapshot)
        parent = snapshot.parent_snapshot_id
        snapshot = metadata.snapshot_by_id(parent) if parent is not None else None
    if snapshot is None and start_snapshot_id is not None:
        raise ValidationError(f"start snapshot {start_snapshot_id} is not an ancestor of end snapshot "
                              f"{end_snapshot_id}; an incremental scan reads the appends between the two")
    return out


def plan_appended_files(
    io: FileIO,
    metadata: TableMetadata,
    start_snapshot_id: int | None,
    end_snapshot_id: int,
    schema: Schema,
    row_filter: BoundExpression,
    engine: Engine,
) -> list[FileTask]:
    """An incremental append scan, as Java's ``IncrementalAppendScan``: the data files added by
    the ``append`` snapshots after ``start`` (exclusive; None: from the oldest ancestor on) up to
    ``end`` (inclusive), pruned like a scan; delete files do not apply (the rows were appended,
    not yet deleted, in that range)."""
    appends = [s for s in ancestors_between(metadata, start_snapshot_id, end_snapshot_id)
               if s.operation == "append"]
    return plan_added_files(io, metadata, appends, schema, row_filter, engine)


def plan_added_files(
    io: FileIO,
    metadata: TableMetadata,
    snapshots: list[Snapshot],
    schema: Schema,
    row_filter: BoundExpression,
    engine: Engine,
) -> list[FileTask]:
    """The data files each of ``snapshots`` added (in that snapshot's own manifests), pruned by
    ``row_filter``, without delete files: the rows as they were when added."""
    specs = {spec.spec_id: spec for spec in metadata.partition_specs}
    filtering = not isinstance(row_filter, AlwaysTrue)
    evaluators = {i: PartitionEvaluator(spec, schema, row_filter) for i, spec in specs.items()} if filtering else {}
    manifest_evaluators = {i: ManifestEvaluator(spec, schema, row_filter) for i, spec in specs.items()} \
        if filtering else {}
    metrics = InclusiveMetricsEvaluator(schema, row_filter) if filtering else None
    wanted: list[tuple[int, ManifestFile]] = []
    for snapshot in snapshots:
        if snapshot.manifest_list is None:
            raise UnsupportedError(f"snapshot {snapshot.snapshot_id} lists its manifests inline; "
                                   "rewrite the table's metadata with a newer writer to scan it incrementally")
        for m in read_manifest_list(io, snapshot.manifest_list):
            evaluator = manifest_evaluators.get(m.partition_spec_id)
            if m.content == ManifestContent.DATA and m.added_snapshot_id == snapshot.snapshot_id \
                    and m.has_added_files() and (evaluator is None or evaluator.eval(m)):
                wanted.append((snapshot.snapshot_id, m))

    def added(item: tuple[int, ManifestFile]) -> list[ManifestEntry]:
        snapshot_id, m = item
        entries = read_pruned_manifest(io, m, evaluators.get(m.partition_spec_id), specs)
        return [e for e in entries if e.status == ManifestEntryStatus.ADDED and e.snapshot_id == snapshot_id]

    tasks = []
    for entries in engine.map(added, wanted):
        for entry in entries:
            if metrics is None or metrics.eval(entry.data_file):
                tasks.append(FileTask(entry.data_file, entry.sequence_number or 0))
    return tasks


class ScanPlanner(Protocol):
    """Plans a scan somewhere else (a REST catalog service that plans scans for its clients)."""

    def plan(self, scan: TableScan) -> list[FileTask]: ...


class TableScan:
    """A lazy scan: plan with :meth:`plan_files`, read with :meth:`to_arrow` and friends.

    ``columns`` may name the row lineage columns ``_row_id`` and
    ``_last_updated_sequence_number`` (see :func:`projected_schema`).

    With ``start_snapshot_id`` or ``end_snapshot_id`` it is an incremental append scan (see
    :func:`plan_appended_files`): the rows appended after ``start`` (exclusive; None: from the
    oldest snapshot on) up to ``end`` (inclusive; None: the head of ``ref``, else the current
    snapshot), in the table's current schema.
    """

    def __init__(
        self,
        io: FileIO,
        metadata: TableMetadata,
        engine: Engine,
        filter: str | Expression | None = None,
        columns: list[str] | None = None,
        snapshot_id: int | None = None,
        as_of_timestamp_ms: int | None = None,
        ref: str | None = None,
        case_sensitive: bool = True,
        limit: int | None = None,
        planner: ScanPlanner | None = None,
        start_snapshot_id: int | None = None,
        end_snapshot_id: int | None = None,
    ) -> None:
        self.io = io
        self.planner = planner
        self.metadata = metadata
        self.engine = engine
        self.incremental = start_snapshot_id is not None or end_snapshot_id is not None
        self.start_snapshot_id = start_snapshot_id
        if self.incremental:
            if snapshot_id is not None or as_of_timestamp_ms is not None:
                raise ValidationError("an incremental scan (start/end snapshot id) reads the appends between two "
                                      "snapshots; do not also give snapshot_id or as_of_timestamp")
            snapshot_id, ref = (end_snapshot_id, None) if end_snapshot_id is not None else (None, ref)
        self.snapshot = select_snapshot(metadata, snapshot_id, as_of_timestamp_ms, ref)
        if self.incremental and self.snapshot is None:
            raise NoSuchSnapshotError(f"the table has no snapshot, so there is no snapshot after "
                                      f"{start_snapshot_id} to read incrementally; append to it first")
        # Time travel reads with the schema the snapshot was written with, as Spark does; an
        # incremental scan reads with the current schema, as Iceberg's does.
        explicit = (snapshot_id is not None or as_of_timestamp_ms is not None or ref is not None) \
            and not self.incremental
        self.uses_snapshot_schema = explicit
        self.case_sensitive = case_sensitive
        self.columns = columns
        schema = metadata.schema()
        if explicit and self.snapshot is not None and self.snapshot.schema_id is not None:
            schema = metadata.schema_by_id(self.snapshot.schema_id) or schema
        self.table_schema = schema
        self.row_filter = bind(schema, to_expression(filter), case_sensitive)
        self.projected = projected_schema(schema, columns, case_sensitive)
        self.limit = limit
        self._tasks: list[FileTask] | None = None

    def plan_files(self) -> list[FileTask]:
        # The REST protocol's file scan tasks carry no data sequence number, which row lineage
        # inherits: a scan that reads the lineage columns plans here.
        lineage = any(f.field_id in ROW_LINEAGE_IDS for f in self.projected.fields)
        # The REST protocol's incremental plan needs both ends; one from the table's start plans here.
        open_start = self.incremental and self.start_snapshot_id is None
        if self._tasks is None and self.planner is not None and not lineage and not open_start:
            self._tasks = self.planner.plan(self)
        if self._tasks is None and self.incremental:
            assert self.snapshot is not None  # checked in __init__
            self._tasks = plan_appended_files(self.io, self.metadata, self.start_snapshot_id,
                                              self.snapshot.snapshot_id, self.table_schema, self.row_filter,
                                              self.engine)
        if self._tasks is None:
            self._tasks = plan_files(self.io, self.metadata, self.snapshot, self.table_schema,
                                     self.row_filter, self.engine)
        return self._tasks

    @property
    def arrow_schema(self) -> pa.Schema:
        return self.projected.as_arrow()

    def _read(self, task: FileTask) -> pa.Table:
        spec = self.metadata.spec_by_id(task.spec_id)
        if spec is None:
            raise CorruptMetadataError(f"data file {task.file.file_path} has partition spec id {task.spec_id}, "
                                       "which the table metadata does not define")
        return read_task_table(
            self.io, task.file, task.delete_files, spec, self.table_schema, self.projected,
            self.row_filter if task.residual is None else task.residual,
            self.metadata.properties.get(DEFAULT_NAME_MAPPING), data_sequence_number=task.data_sequence_number,
        )

    def to_arrow(self) -> pa.Table:
        tasks = self.plan_files()
        schema = self.arrow_schema
        tables = [t.cast(schema) if not t.schema.equals(schema) else t for t in self.engine.map(self._read, tasks)]
        if not tables:
            return schema.empty_table()
        result = pa.concat_tables(tables)
        if self.limit is not None:
            result = result.slice(0, self.limit)
        return result

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        schema = self.arrow_schema
        remaining = self.limit
        for table in self.engine.imap(self._read, self.plan_files()):
            if not table.schema.equals(schema):
                table = table.cast(schema)
            for batch in table.to_batches():
                if remaining is not None:
                    if remaining <= 0:
                        return
                    batch = batch.slice(0, remaining)
                    remaining -= batch.num_rows
                yield batch

    def to_arrow_batch_reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.arrow_schema, self.to_batches())

    def to_pandas(self) -> pd.DataFrame:
        return self.to_arrow().to_pandas()

    def count(self) -> int:
        """Rows the scan returns; files without deletes or residual filter count from metadata."""
        tasks = self.plan_files()
        if all(not t.delete_files and isinstance(self.row_filter if t.residual is None else t.residual, AlwaysTrue)
               for t in tasks):
            return sum(t.file.record_count for t in tasks)
        return self.to_arrow().num_rows
