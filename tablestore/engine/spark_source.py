"""The ``tablestore`` data source for Spark (the PySpark 4 Python data source API).

    spark.read.format("tablestore").option("snapshot-id", 123).load("cat.db.t")
    df.write.format("tablestore").mode("append").save("cat.db.t")

Where each piece runs. Spark calls a Python data source in three kinds of processes: Python
workers that the *driver* JVM starts for planning (``schema()``, ``reader()``, ``pushFilters``,
``partitions()``, ``writer()``, ``commit()``, ``abort()``), and Python workers on the
*executors* (``read()``, ``write()``). Nothing is shared between them but what is pickled, so:

- the table is resolved once, on the driver, when the DataFrame is loaded (``schema()``): the
  catalog (from the ``config`` option, else the config given to ``spark_session``, else
  ``load_config()``) yields the metadata location, the snapshot to read and its schema. That
  pins the snapshot: a DataFrame keeps reading the snapshot that was current when it was
  loaded (load it again, or register the view again, to see newer commits);
- executors get plain data only: FileIO properties, schema and partition-spec JSON, table
  properties and location, and one :class:`~tablestore.table.scan.FileTask` per Spark
  partition. Never a catalog, a SQL connection or a live Table.

Types: see :mod:`tablestore.engine.spark_convert` (time as bigint microseconds, uuid and
fixed as binary, nanosecond timestamps truncated to microseconds).

Projection. Spark 4.3 does not tell a Python data source which columns a query needs (its
scan builder has no column pruning), so every column is read unless the ``columns`` option
(comma-separated top-level names) narrows the DataFrame.

Filters. Spark's pushed filters are converted to tablestore expressions and used for manifest,
partition and column-statistics pruning and as the exact row filter; filters that cannot be
converted are returned to Spark. This is off by default (option ``pushdown``): Spark 4.3 keeps
the reader planned for the *last* filtered scan of a relation and reuses it for later scans of
the same relation that push no filter, or for another scan of it in the same query (a self
join or union), which then silently loses rows. Turn it on only for a DataFrame (or view)
that is scanned once; the ``filter`` option (SQL text) is always safe, because it is part of
the relation itself.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
from pyspark.sql import types as st
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    Filter,
    InputPartition,
    WriterCommitMessage,
)

from tablestore.engine.spark_convert import (
    combine,
    filter_to_expression,
    from_spark_table,
    spark_arrow_schema,
    spark_schema,
    to_spark_table,
)
from tablestore.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    NoSuchSnapshotError,
    SchemaError,
    ValidationError,
)
from tablestore.spec import expressions as ex
from tablestore.spec.manifest import DataFile
from tablestore.spec.partitioning import PartitionSpec
from tablestore.spec.schema import Schema
from tablestore.table.scan import FileTask

if TYPE_CHECKING:
    from tablestore.catalog import Catalog
    from tablestore.config import LakehouseConfig
    from tablestore.spec.metadata import TableMetadata
    from tablestore.table import Table
    from tablestore.table.read import RowGroupRange

log = logging.getLogger(__name__)

SOURCE_NAME = "tablestore"
# Snapshot summary key naming the Spark write that produced a snapshot: abort() looks for it
# so that it never deletes the files of a commit that did land.
WRITE_ID_PROPERTY = "tablestore.write-id"
SNAPSHOT_PROPERTY_PREFIX = "snapshot-property."
# Iceberg's read.split.target-size default: a larger file is read by several Spark partitions,
# split along its row groups.
DEFAULT_SPLIT_SIZE = 128 * 1024 * 1024


# -- resolving tables on the driver ---------------------------------------------------------------


def parse_name(text: str) -> tuple[str, ...]:
    """``cat.db.t`` or ```my db`.`t.1``` as its parts (backticks quote, doubled backticks escape)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    i = 0
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "`" and text[i + 1:i + 2] == "`":
                current.append("`")
                i += 1
            elif c == "`":
                quoted = False
            else:
                current.append(c)
        elif c == "`":
            quoted = True
        elif c == ".":
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
        i += 1
    if quoted:
        raise ValidationError(f"unclosed backtick in table name {text!r}")
    parts.append("".join(current))
    if any(not p for p in parts):
        raise ValidationError(f"table name {text!r} has an empty part")
    return tuple(parts)


def quote_name(parts: Sequence[str]) -> str:
    return ".".join(p if p.isidentifier() else "`" + p.replace("`", "``") + "`" for p in parts)


def load_config_from(config_json: str | None) -> LakehouseConfig:
    from tablestore.config import LakehouseConfig, load_config

    if not config_json:
        return load_config()
    return LakehouseConfig.from_json(config_json)


def config_to_json(config: LakehouseConfig) -> str:
    text = config.to_json()
    return text if isinstance(text, str) else json.dumps(text)


def table_options(name: str, config: LakehouseConfig | None, catalog: str | None) -> dict[str, str]:
    """The data source options that name a table (``path``) and how to find it, for the Python
    helpers that read or write without ``spark.read``'s option chain."""
    options = {"path": name}
    if config is not None:
        options["config"] = config_to_json(config)
    if catalog:
        options["catalog"] = catalog
    return options


@contextlib.contextmanager
def _resolved(options: Mapping[str, str], default_config: str | None) -> Iterator[tuple[str, Catalog, tuple[str, ...]]]:
    """(config JSON, catalog, identifier) of the table the options name; closes the catalog after."""
    from tablestore.session import CatalogManager

    path = options.get("path")
    if not path:
        raise ValidationError("name the table: spark.read.format('tablestore').load('db.table')")
    config_json = options.get("config") or default_config
    config = load_config_from(config_json)
    with CatalogManager(config) as manager:
        catalog_name = options.get("catalog")
        if catalog_name:
            # The identifier is relative to the named catalog (any depth of namespace).
            catalog, identifier = manager.catalog(catalog_name), parse_name(path)
        else:
            catalog, identifier = manager.resolve_table(parse_name(path))
        yield config_json or config_to_json(config), catalog, tuple(identifier)


def _timestamp_ms(text: str) -> int:
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        value = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(
            f"as-of-timestamp {text!r} is neither epoch milliseconds nor an ISO-8601 timestamp"
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return int(value.timestamp() * 1000)


def _bool_option(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    lowered = str(raw).strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValidationError(f"option {key}={raw!r} must be true or false")


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
    row_filter: ex.BooleanExpression  # the `filter` option (unbound)
    pushdown: bool
    name_mapping: str | None = None  # schema.name-mapping.default, for files without field ids
    split_size: int = DEFAULT_SPLIT_SIZE  # files larger than this are read by several partitions

    def schema(self) -> Schema:
        return Schema.from_json(json.loads(self.schema_json))

    def projected(self) -> Schema:
        schema = self.schema()
        if self.columns is None:
            return schema
        by_id = {f.field_id: f for f in schema.fields}
        return Schema(tuple(by_id[schema.find_field(c).field_id] for c in self.columns), schema.schema_id)

    def spec(self, spec_id: int) -> PartitionSpec:
        return PartitionSpec.from_json(json.loads(self.specs_json[spec_id]))


def resolve_read(options: Mapping[str, str], default_config: str | None) -> ReadState:
    """Resolve the table, the snapshot and the read schema for a ``spark.read`` of the options."""
    from tablestore.table.scan import select_snapshot

    snapshot_option = options.get("snapshot-id")
    timestamp_option = options.get("as-of-timestamp")
    ref_option = options.get("branch") or options.get("tag")
    try:
        snapshot_id = int(snapshot_option) if snapshot_option is not None else None
    except ValueError:
        raise ValidationError(f"snapshot-id {snapshot_option!r} is not an integer") from None
    as_of = _timestamp_ms(timestamp_option) if timestamp_option is not None else None
    with _resolved(options, default_config) as (_, catalog, identifier):
        metadata_location, metadata = catalog.load_table_metadata(identifier)
        io = catalog.table_io(metadata)
    name = ".".join((catalog.name, *identifier))
    if options.get("ref") is not None:
        ref_option, snapshot_id = resolve_ref(metadata, str(options["ref"]), name, ref_option, snapshot_id)
    snapshot = select_snapshot(metadata, snapshot_id, as_of, ref_option)
    explicit = snapshot_id is not None or as_of is not None or ref_option is not None
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
    row_filter = ex.to_expression(options.get("filter") or None)
    ex.bind(schema, row_filter)  # a bad filter fails now, naming the columns
    return ReadState(
        table_name=name,
        metadata_location=metadata_location,
        io_properties=dict(io.properties),
        schema_json=json.dumps(schema.to_json()),
        specs_json={s.spec_id: json.dumps(s.to_json()) for s in metadata.partition_specs},
        snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
        columns=columns,
        row_filter=row_filter,
        pushdown=_bool_option(options, "pushdown", False),
        name_mapping=metadata.properties.get("schema.name-mapping.default"),
        split_size=_split_size(options, metadata.properties),
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


# -- reading --------------------------------------------------------------------------------------


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
    from tablestore.table.read import RowGroupRange

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
        self.pushed: list[ex.BooleanExpression] = []
        self._cache: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = {}  # parsed schemas and FileIO are rebuilt where the reader lands
        return state

    def row_filter(self) -> ex.BooleanExpression:
        return combine([self.state.row_filter, *self.pushed])

    def plan(self) -> list[FileTask]:
        """The file tasks of this scan: manifests, partitions and files pruned by the filter."""
        from tablestore.catalog import read_metadata_file
        from tablestore.engine.local import LocalEngine
        from tablestore.io import load_file_io
        from tablestore.table.scan import plan_files

        if self.state.snapshot_id is None:
            return []
        io = load_file_io(self.state.io_properties)
        metadata = read_metadata_file(io, self.state.metadata_location)
        snapshot = metadata.snapshot_by_id(self.state.snapshot_id)
        schema = self.state.schema()
        return plan_files(io, metadata, snapshot, schema, ex.bind(schema, self.row_filter()), LocalEngine())

    def partitions(self) -> list[InputPartition]:
        # Spark starts partitions in order: the largest first leaves the small ones to fill the
        # gaps at the end, instead of one large file running alone on one core.
        pieces = [(task, rg, length) for task in self.plan() for rg, length in split_task(task, self.state.split_size)]
        pieces.sort(key=lambda p: p[2], reverse=True)
        return [FileTaskPartition(i, task, rg, length) for i, (task, rg, length) in enumerate(pieces)]

    def _context(self) -> dict[str, Any]:
        if not self._cache:
            from tablestore.io import load_file_io

            schema = self.state.schema()
            self._cache.update(
                io=load_file_io(self.state.io_properties),
                schema=schema,
                projected=self.state.projected(),
                row_filter=ex.bind(schema, self.row_filter()),
                target=spark_arrow_schema(st.StructType.fromJson(json.loads(self.spark_schema_json))),
                specs={},
            )
        return self._cache

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from tablestore.table.read import read_task_table

        if not isinstance(partition, FileTaskPartition):
            return  # Spark asks for one empty partition when a scan has no files
        ctx = self._context()
        task = partition.task
        specs: dict[int, PartitionSpec] = ctx["specs"]
        if task.spec_id not in specs:
            specs[task.spec_id] = self.state.spec(task.spec_id)
        table = read_task_table(
            ctx["io"], task.file, task.delete_files, specs[task.spec_id], ctx["schema"], ctx["projected"],
            ctx["row_filter"], self.state.name_mapping, partition.row_groups,
        )
        if table.num_rows == 0:
            return
        yield from to_spark_table(table, ctx["target"]).to_batches()


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


# -- writing --------------------------------------------------------------------------------------


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
        from tablestore.session import CatalogManager

        with CatalogManager(load_config_from(self.config_json)) as manager:
            yield manager.catalog(self.catalog_name).load_table(self.identifier)


def resolve_write(options: Mapping[str, str], default_config: str | None) -> WriteTarget:
    with _resolved(options, default_config) as (config_json, catalog, identifier):
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


def delete_quietly(io: Any, paths: Iterable[str]) -> None:
    for path in paths:
        try:
            io.delete(path)
        except FileNotFoundError:
            pass
        except OSError as e:  # remove_orphan_files catches whatever is left
            log.warning("could not delete uncommitted file %s: %s", path, e)


def write_task(target: WriteTarget, iterator: Iterator[pa.RecordBatch]) -> TablestoreCommitMessage:
    """One Spark write task: the task's batches into data files, streamed through the writer
    the input calls for (single partition, clustered or fanout; see tablestore.table.writers).
    On failure the task's files are deleted: they are in no commit message, so nobody else could.
    """
    from pyspark import TaskContext

    from tablestore.io import load_file_io
    from tablestore.table.conform import conform_to_schema
    from tablestore.table.write import WriteContext, write_data_stream

    task = TaskContext.get()
    task_id = task.partitionId() if task is not None else 0
    schema = target.schema()
    io = load_file_io(target.io_properties)
    # A fresh uuid per task attempt keeps a retried attempt from colliding with the files of
    # the failed one.
    ctx = WriteContext(io, target.location, schema, target.spec(), dict(target.properties),
                       write_uuid=str(uuid.uuid4()))
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
        from tablestore.engine.local import LocalEngine
        from tablestore.table.scan import plan_files
        from tablestore.table.snapshot import FastAppend, OverwriteFiles, added_data_files

        properties = {**self.target.snapshot_properties, WRITE_ID_PROPERTY: self.target.write_id}
        if files and table.spec().spec_id != self.target.spec().spec_id:
            # The files' partition tuples follow the old spec; the new manifest would not.
            raise CommitConflictError(
                f"the partition spec of {self.target.table_name} changed while the Spark job wrote "
                "its files; run the write again"
            )
        if not self.overwrite:
            FastAppend(table, files, properties).commit()
            return
        snapshot = table.current_snapshot()
        replaced = []
        if snapshot is not None:
            tasks = plan_files(table.io, table.metadata, snapshot, table.schema(), ex.AlwaysTrue(), LocalEngine())
            replaced = [t.file for t in tasks]

        def no_new_data(newer: list[Any]) -> None:
            # The overwrite replaces what the job could have read when it started; rows that
            # another writer added since then would be lost without anyone deciding so.
            added = added_data_files(table, newer)
            if added:
                raise CommitConflictError(
                    f"{len(added)} data file(s) were added to {self.target.table_name} while the Spark "
                    "overwrite ran; run it again on the new table state"
                )

        OverwriteFiles(table, replaced, files, "overwrite", self.target.base_snapshot_id,
                       conflict_check=no_new_data, snapshot_properties=properties).commit()

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        from tablestore.io import load_file_io

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


# -- the data source ------------------------------------------------------------------------------


def check_write_schema(schema: st.StructType, target: WriteTarget) -> None:
    """Fail before any task runs when the DataFrame's columns cannot go into the table."""
    from tablestore.table.conform import conform_to_schema

    empty = spark_arrow_schema(schema).empty_table()
    conform_to_schema(from_spark_table(empty, target.schema()), target.schema())


class TablestoreDataSource(DataSource):
    """``spark.read.format("tablestore")`` and ``df.write.format("tablestore")``.

    Options: ``path`` (the table: ``t``, ``db.t`` or ``catalog.db.t``, resolved by a
    CatalogManager), ``catalog`` (then ``path`` is the identifier inside that catalog),
    ``config`` (LakehouseConfig JSON), ``snapshot-id``, ``as-of-timestamp`` (epoch ms or ISO),
    ``ref`` (a branch or tag name, or a snapshot id: what SQL's ``VERSION AS OF`` passes),
    ``branch``/``tag``, ``columns``, ``filter`` (SQL), ``pushdown`` (true/false), ``split-size``
    (bytes; default the table's ``read.split.target-size``, else 128 MB) for reads;
    ``snapshot-property.<key>`` for writes. ``df.writeStream.format("tablestore")`` is an
    exactly-once streaming sink (see :mod:`tablestore.engine.spark_stream`).
    """

    # Set on the subclass that spark_session registers, so that the config given there reaches
    # the Python workers (they run in other processes and only see what is pickled).
    default_config_json: ClassVar[str | None] = None

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def _state(self) -> ReadState:
        state = self.__dict__.get("_read_state")
        if state is None:
            state = resolve_read(self.options, self.default_config_json)
            # Kept on the instance: Spark pickles the data source after schema(), so reader()
            # sees the very snapshot that schema() described.
            self._read_state = state
        return state

    def schema(self) -> st.StructType:
        return spark_schema(self._state().projected())

    def reader(self, schema: st.StructType) -> DataSourceReader:
        state = self._state()
        expected = spark_schema(state.projected())
        if schema.fieldNames() != expected.fieldNames():
            raise SchemaError(
                f"table {state.table_name} has the columns {', '.join(expected.fieldNames())}; do not pass "
                "a schema to spark.read for the tablestore source (use the columns option to select)"
            )
        cls = TablestorePushdownReader if state.pushdown else TablestoreReader
        return cls(state, schema)

    def writer(self, schema: st.StructType, overwrite: bool) -> DataSourceWriter:
        target = resolve_write(self.options, self.default_config_json)
        check_write_schema(schema, target)
        return TablestoreWriter(target, overwrite)

    def streamWriter(self, schema: st.StructType, overwrite: bool) -> DataSourceStreamWriter:
        """The Structured Streaming sink: one exactly-once commit per micro-batch (spark_stream)."""
        from tablestore.engine.spark_stream import stream_writer

        return stream_writer(self.options, self.default_config_json, schema, overwrite)


def configured_source(config: LakehouseConfig | None) -> type[TablestoreDataSource]:
    """The data source class to register, carrying ``config`` for every worker."""
    if config is None:
        return TablestoreDataSource
    # A class made here is not importable by name, so cloudpickle sends it by value, with the
    # config JSON inside it.
    return type(
        "TablestoreDataSource",
        (TablestoreDataSource,),
        {"default_config_json": config_to_json(config), "__qualname__": "TablestoreDataSource.configured"},
    )
