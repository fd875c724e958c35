"""Reads of the ``tablestore`` data source: the table resolved and its files planned on the
driver, one file task (or some row groups of a file) per Spark partition on the executors.

Projection and filters: see :mod:`tablestore.spark.datasource.source`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import types as st
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition

from tablestore.catalog.base import read_metadata_file
from tablestore.engine.local import LocalEngine
from tablestore.errors import NoSuchSnapshotError, ValidationError
from tablestore.io import load_file_io
from tablestore.spark.convert import combine, filter_to_expression, spark_arrow_schema, to_spark_table
from tablestore.spark.options import as_of_timestamp_ms, bool_option, resolved_table
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.expression_parser import to_expression
from tablestore.spec.expressions.expression_tree import BooleanExpression
from tablestore.spec.metadata.table_metadata import TableMetadata
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.schemas.row_lineage import ROW_LINEAGE_FIELDS
from tablestore.spec.schemas.schema import Schema
from tablestore.table.read.data_files import RowGroupRange, read_task_table
from tablestore.table.read.scan import (
    FileTask,
    ancestors_between,
    plan_appended_files,
    plan_files,
    select_snapshot,
)

# Iceberg's read.split.target-size default: a larger file is read by several Spark partitions,
# split along its row groups.
DEFAULT_SPLIT_SIZE = 128 * 1024 * 1024
# Rows per batch handed to the JVM. A row group of a large file is hundreds of MB as Arrow; the
# JVM takes each batch in one direct-memory buffer, which is capped by the driver's memory in
# local mode (a 20M-row table's row group failed with OutOfDirectMemoryError at 1 GB).
READ_BATCH_ROWS = 100_000


def resolve_ref(
    metadata: TableMetadata, ref: str, table_name: str, named_ref: str | None, snapshot_id: int | None
) -> tuple[str | None, int | None]:
    """The ``ref`` option (SQL's ``VERSION AS OF 'x'``) as (branch or tag, snapshot id).

    As in Iceberg's Spark catalog: a branch or tag of that name, else a snapshot id given as
    text. It cannot be combined with ``branch``, ``tag`` or ``snapshot-id``.
    """
    if named_ref is not None or snapshot_id is not None:
        raise ValidationError("give only one of the options ref, branch, tag and snapshot-id")
    if ref in metadata.refs:
        return ref, None
    text = ref.strip()
    if text.lstrip("-").isdigit():
        return None, int(text)
    refs = ", ".join(sorted(metadata.refs)) or "none"
    raise NoSuchSnapshotError(
        f"table {table_name} has no branch or tag {ref!r} (its refs: {refs}); VERSION AS OF takes a "
        "branch or tag name or a snapshot id"
    )


@dataclass(frozen=True)
class ReadState:
    """Everything a scan needs, resolved on the driver; plain data, so it pickles anywhere."""

    table_name: str
    metadata_location: str
    io_properties: dict[str, str]
    schema_json: str  # the read schema: the current one, or the snapshot's for time travel
    specs_json: dict[int, str]
    snapshot_id: int | None
    columns: tuple[str, ...] | None
    row_filter: BooleanExpression  # the `filter` option (unbound)
    pushdown: bool
    name_mapping: str | None = None  # schema.name-mapping.default, for files without field ids
    split_size: int = DEFAULT_SPLIT_SIZE  # files larger than this are read by several partitions
    row_lineage: bool = False  # the `row-lineage` option: _row_id and _last_updated_sequence_number appended
    # An incremental append scan (start-snapshot-id): the appends after this snapshot up to snapshot_id.
    start_snapshot_id: int | None = None

    def schema(self) -> Schema:
        return Schema.from_json(json.loads(self.schema_json))

    def projected(self) -> Schema:
        schema = self.schema()
        if self.columns is not None:
            by_id = {f.field_id: f for f in schema.fields}
            schema = Schema(tuple(by_id[schema.find_field(c).field_id] for c in self.columns), schema.schema_id)
        if self.row_lineage:
            # A table column of the same name wins, as in a Python scan.
            extra = tuple(f for f in ROW_LINEAGE_FIELDS if self.schema().find_field_id(f.name) is None)
            schema = Schema((*schema.fields, *extra), schema.schema_id)
        return schema

    def spec(self, spec_id: int) -> PartitionSpec:
        return PartitionSpec.from_json(json.loads(self.specs_json[spec_id]))


def _snapshot_option(options: Mapping[str, str], key: str) -> int | None:
    raw = options.get(key)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        raise ValidationError(f"{key} {raw!r} is not an integer") from None


def resolve_read(options: Mapping[str, str], default_config: str | None,
                 row_filter: BooleanExpression | None = None) -> ReadState:
    """Resolve the table, the snapshot and the read schema for a ``spark.read`` of the options.
    ``row_filter``, given by a caller in this process, stands for the ``filter`` option, whose
    text would be parsed again (a row-level statement passes its WHERE's plain filter)."""
    timestamp_option = options.get("as-of-timestamp")
    ref_option = options.get("branch") or options.get("tag")
    snapshot_id = _snapshot_option(options, "snapshot-id")
    # Iceberg Spark's incremental append scan: start-snapshot-id (exclusive), end-snapshot-id
    # (inclusive, default the current snapshot); it reads with the current schema.
    start_id = _snapshot_option(options, "start-snapshot-id")
    end_id = _snapshot_option(options, "end-snapshot-id")
    if end_id is not None and start_id is None:
        raise ValidationError("option end-snapshot-id needs start-snapshot-id too (an incremental scan reads the "
                              "appends after start-snapshot-id up to end-snapshot-id)")
    if start_id is not None and (snapshot_id is not None or timestamp_option is not None
                                 or options.get("ref") is not None):
        raise ValidationError("give either start-snapshot-id/end-snapshot-id (an incremental scan) or one of "
                              "snapshot-id, as-of-timestamp and ref (time travel), not both")
    as_of = as_of_timestamp_ms(timestamp_option) if timestamp_option is not None else None
    with resolved_table(options, default_config) as (_, catalog, identifier):
        metadata_location, metadata = catalog.load_table_metadata(identifier)
        io = catalog.table_io(metadata)
    name = ".".join((catalog.name, *identifier))
    if options.get("ref") is not None:
        ref_option, snapshot_id = resolve_ref(metadata, str(options["ref"]), name, ref_option, snapshot_id)
    if start_id is not None:
        snapshot = select_snapshot(metadata, end_id, None, None if end_id is not None else ref_option)
        if snapshot is None:
            raise NoSuchSnapshotError(f"table {name} has no snapshot after start-snapshot-id {start_id}")
        ancestors_between(metadata, start_id, snapshot.snapshot_id)  # a bad range fails now, naming the ids
    else:
        snapshot = select_snapshot(metadata, snapshot_id, as_of, ref_option)
    explicit = (snapshot_id is not None or as_of is not None or ref_option is not None) and start_id is None
    if explicit and snapshot is None:
        # select_snapshot raises for an unknown id or ref; only a time before the first commit gets here.
        raise NoSuchSnapshotError(
            f"table {name} has no snapshot at or before as-of-timestamp {timestamp_option}; "
            f"its first snapshot is from {min((s.timestamp_ms for s in metadata.snapshots), default='never')} ms"
        )
    schema = metadata.schema()
    if explicit and snapshot is not None and snapshot.schema_id is not None:
        # Time travel reads with the schema the snapshot was written with, as Iceberg's Spark does.
        schema = metadata.schema_by_id(snapshot.schema_id) or schema
    columns = None
    if options.get("columns"):
        columns = tuple(c.strip() for c in str(options["columns"]).split(",") if c.strip())
        unknown = [c for c in columns if c not in schema.column_names]
        if unknown:
            raise ValidationError(
                f"option columns names {', '.join(map(repr, unknown))}, not top-level columns of {name}; "
                f"the columns are {', '.join(schema.column_names)}"
            )
    if row_filter is None:
        row_filter = to_expression(options.get("filter") or None)
    bind(schema, row_filter)  # a bad filter fails now, naming the columns
    return ReadState(
        table_name=name,
        metadata_location=metadata_location,
        io_properties=dict(io.properties),
        schema_json=json.dumps(schema.to_json()),
        specs_json={s.spec_id: json.dumps(s.to_json()) for s in metadata.partition_specs},
        snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
        columns=columns,
        row_filter=row_filter,
        pushdown=bool_option(options, "pushdown", False),
        name_mapping=metadata.properties.get("schema.name-mapping.default"),
        split_size=_split_size(options, metadata.properties),
        row_lineage=bool_option(options, "row-lineage", False),
        start_snapshot_id=start_id,
    )


def _split_size(options: Mapping[str, str], properties: Mapping[str, str]) -> int:
    """The ``split-size`` option, else the table's ``read.split.target-size``, as Iceberg's Spark."""
    raw = options.get("split-size") or properties.get("read.split.target-size")
    if raw is None:
        return DEFAULT_SPLIT_SIZE
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValidationError(f"split size {raw!r} (option split-size or read.split.target-size) must be a "
                              "positive number of bytes")
    return value


class FileTaskPartition(InputPartition):
    """One Spark partition: one data file with its delete files, or some row groups of a file."""

    def __init__(self, index: int, task: FileTask, row_groups: RowGroupRange | None = None, length: int = 0) -> None:
        super().__init__(index)
        self.task = task
        self.row_groups = row_groups
        self.length = length or task.length


def split_task(task: FileTask, split_size: int) -> list[tuple[RowGroupRange | None, int]]:
    """A file task as (row groups, bytes) splits of about ``split_size``, along its row groups.

    Only files without deletes are split (delete positions count from the file's start), and
    only by the row-group offsets the manifest records (``split_offsets``).
    """
    size = task.file.file_size_in_bytes
    offsets = list(task.file.split_offsets or [])
    if task.delete_files or size <= split_size or len(offsets) < 2 or offsets != sorted(offsets):
        return [(None, task.length)]
    ends = [*offsets[1:], size]
    splits: list[tuple[RowGroupRange | None, int]] = []
    start = 0
    for i in range(len(offsets)):
        if ends[i] - offsets[start] >= split_size or i == len(offsets) - 1:
            splits.append((RowGroupRange(start, i + 1, len(offsets)), ends[i] - offsets[start]))
            start = i + 1
    return splits


class TablestoreReader(DataSourceReader):
    """Plans file tasks on the driver; reads one task per Spark partition on the executors."""

    def __init__(self, state: ReadState, schema: st.StructType) -> None:
        self.state = state
        self.spark_schema_json = schema.json()
        self.pushed: list[BooleanExpression] = []
        self._cache: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = {}  # parsed schemas and FileIO are rebuilt where the reader lands
        return state

    def row_filter(self) -> BooleanExpression:
        return combine([self.state.row_filter, *self.pushed])

    def plan(self) -> list[FileTask]:
        """The file tasks of this scan: manifests, partitions and files pruned by the filter."""
        if self.state.snapshot_id is None:
            return []
        io = load_file_io(self.state.io_properties)
        metadata = read_metadata_file(io, self.state.metadata_location)
        snapshot = metadata.snapshot_by_id(self.state.snapshot_id)
        schema = self.state.schema()
        if self.state.start_snapshot_id is not None:
            return plan_appended_files(io, metadata, self.state.start_snapshot_id, self.state.snapshot_id, schema,
                                       bind(schema, self.row_filter()), LocalEngine())
        return plan_files(io, metadata, snapshot, schema, bind(schema, self.row_filter()), LocalEngine())

    def partitions(self) -> list[InputPartition]:
        # Spark starts partitions in order: the largest first leaves the small ones to fill the
        # gaps at the end, instead of one large file running alone on one core.
        pieces = [(task, rg, length) for task in self.plan() for rg, length in split_task(task, self.state.split_size)]
        pieces.sort(key=lambda p: p[2], reverse=True)
        return [FileTaskPartition(i, task, rg, length) for i, (task, rg, length) in enumerate(pieces)]

    def _context(self) -> dict[str, Any]:
        if not self._cache:
            schema = self.state.schema()
            self._cache.update(
                io=load_file_io(self.state.io_properties),
                schema=schema,
                projected=self.state.projected(),
                row_filter=bind(schema, self.row_filter()),
                target=spark_arrow_schema(st.StructType.fromJson(json.loads(self.spark_schema_json))),
                specs={},
            )
        return self._cache

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, FileTaskPartition):
            return  # Spark asks for one empty partition when a scan has no files
        ctx = self._context()
        task = partition.task
        specs: dict[int, PartitionSpec] = ctx["specs"]
        if task.spec_id not in specs:
            specs[task.spec_id] = self.state.spec(task.spec_id)
        table = read_task_table(
            ctx["io"], task.file, task.delete_files, specs[task.spec_id], ctx["schema"], ctx["projected"],
            ctx["row_filter"], self.state.name_mapping, partition.row_groups, task.data_sequence_number,
        )
        if table.num_rows == 0:
            return
        yield from to_spark_table(table, ctx["target"], self.state.table_name).to_batches(max_chunksize=READ_BATCH_ROWS)


class TablestorePushdownReader(TablestoreReader):
    """A reader that also takes Spark's filters (see the module docstring for when it is safe)."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        schema = self.state.schema()
        rejected = []
        for f in filters:
            expr = filter_to_expression(f, schema)
            if expr is None:
                rejected.append(f)
            else:
                self.pushed.append(expr)
        return rejected
