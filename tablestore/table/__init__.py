"""The Table: what a user holds to read, write and evolve one table.

    >>> import pyarrow as pa, tablestore, tempfile
    >>> wh = tempfile.mkdtemp()
    >>> catalog = tablestore.load_catalog("local", type="sql", uri=f"sqlite:///{wh}/catalog.db", warehouse=wh)
    >>> catalog.create_namespace("db")
    >>> table = catalog.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("country", pa.string())]),
    ...                              partition_by=["country"])
    >>> snapshot = table.append(pa.table({"id": [1, 2, 3], "country": ["de", "fr", "de"]}))
    >>> table.scan(filter="country = 'de'", columns=["id"]).to_arrow().column("id").to_pylist()
    [1, 3]
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tablestore.errors import CommitConflictError, ValidationError
from tablestore.io import FileIO
from tablestore.spec.evaluators import InclusiveMetricsEvaluator, PartitionEvaluator
from tablestore.spec.expressions import AlwaysFalse, AlwaysTrue, BoundExpression, Expression, bind, to_expression
from tablestore.spec.manifest import DataFile
from tablestore.spec.metadata import Snapshot, TableMetadata
from tablestore.spec.partitioning import PartitionSpec
from tablestore.spec.schema import Schema
from tablestore.spec.updates import TableRequirement, TableUpdate
from tablestore.table.conform import conform_to_schema, to_arrow_table
from tablestore.table.scan import FileTask, TableScan, plan_files
from tablestore.table.snapshot import FastAppend, OverwriteFiles, added_data_files
from tablestore.table.write import WriteContext, write_data_files, write_data_stream

if TYPE_CHECKING:
    from tablestore.catalog import Catalog
    from tablestore.engine.protocols import Engine
    from tablestore.maintenance import Maintenance
    from tablestore.table.fragments import Fragment
    from tablestore.table.inspect import TableInspector
    from tablestore.table.merge import MergeBuilder
    from tablestore.table.schema_update import UpdateSchema
    from tablestore.table.spec_update import UpdateSpec

__all__ = ["FileTask", "Table", "TableScan"]


def parse_timestamp_ms(value: int | float | str | datetime.datetime | datetime.date) -> int:
    if isinstance(value, bool):
        raise ValidationError("as_of_timestamp must be a datetime, an ISO string or epoch milliseconds")
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str):
        try:
            value = datetime.datetime.fromisoformat(value)
        except ValueError:
            raise ValidationError(f"as_of_timestamp {value!r} is not an ISO-8601 timestamp") from None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return int(value.timestamp() * 1000)
    return int(datetime.datetime(value.year, value.month, value.day, tzinfo=datetime.UTC).timestamp() * 1000)


class Table:
    def __init__(
        self,
        catalog: Catalog,
        identifier: tuple[str, ...],
        metadata_location: str,
        metadata: TableMetadata,
        io: FileIO,
        engine: Engine | None = None,
    ) -> None:
        self.catalog = catalog
        self.identifier = tuple(identifier)
        self.metadata_location = metadata_location
        self.metadata = metadata
        self.io = io
        self._engine = engine

    # -- what the table is -----------------------------------------------------------------
    @property
    def name(self) -> str:
        return ".".join(self.identifier)

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            from tablestore.engine import default_engine

            self._engine = default_engine()
        return self._engine

    def with_engine(self, engine: Engine) -> Table:
        return Table(self.catalog, self.identifier, self.metadata_location, self.metadata, self.io, engine)

    @property
    def location(self) -> str:
        return self.metadata.location.rstrip("/")

    @property
    def metadata_dir(self) -> str:
        custom = self.metadata.properties.get("write.metadata.path")
        return (custom or f"{self.location}/metadata").rstrip("/")

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.metadata.properties)

    def schema(self) -> Schema:
        return self.metadata.schema()

    def spec(self) -> PartitionSpec:
        return self.metadata.spec()

    def specs(self) -> dict[int, PartitionSpec]:
        return {s.spec_id: s for s in self.metadata.partition_specs}

    def current_snapshot(self) -> Snapshot | None:
        return self.metadata.current_snapshot()

    def snapshots(self) -> list[Snapshot]:
        return list(self.metadata.snapshots)

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot | None:
        return self.metadata.snapshot_by_id(snapshot_id)

    @property
    def inspect(self) -> TableInspector:
        """Metadata tables (snapshots, files, manifests, partitions, ...) as pyarrow Tables."""
        from tablestore.table.inspect import TableInspector

        return TableInspector(self)

    def maintenance(self) -> Maintenance:
        """Expire snapshots, remove orphan files, compact (see tablestore.maintenance)."""
        from tablestore.maintenance import Maintenance

        return Maintenance(self)

    def refresh(self) -> Table:
        self.metadata_location, self.metadata = self.catalog.load_table_metadata(self.identifier)
        return self

    def __repr__(self) -> str:
        return f"Table({self.name!r}, {self.metadata_location!r})"

    def _commit(self, requirements: list[TableRequirement], updates: list[TableUpdate]) -> None:
        self.metadata_location, self.metadata = self.catalog.commit_table(self.identifier, requirements, updates)

    # -- reads -----------------------------------------------------------------------------
    def scan(
        self,
        filter: str | Expression | None = None,
        columns: list[str] | None = None,
        snapshot_id: int | None = None,
        as_of_timestamp: int | str | datetime.datetime | None = None,
        ref: str | None = None,
        case_sensitive: bool = True,
        limit: int | None = None,
    ) -> TableScan:
        """A scan of the table, optionally filtered, projected and at an older snapshot.

        ``as_of_timestamp`` takes epoch milliseconds, a datetime (naive means UTC) or an ISO string.
        """
        return TableScan(
            self.io, self.metadata, self.engine, filter=filter, columns=columns, snapshot_id=snapshot_id,
            as_of_timestamp_ms=parse_timestamp_ms(as_of_timestamp) if as_of_timestamp is not None else None,
            ref=ref, case_sensitive=case_sensitive, limit=limit,
        )

    # -- writes ----------------------------------------------------------------------------
    def _write_context(self) -> WriteContext:
        return WriteContext(self.io, self.location, self.schema(), self.spec(), self.properties)

    def write_files(self, data: Any) -> list[DataFile]:
        """Write data files for ``data`` without committing them (a task's half of a write).

        A RecordBatchReader is written as it streams in, in bounded memory.
        """
        if isinstance(data, pa.RecordBatchReader):
            schema = self.schema()
            batches = (conform_to_schema(pa.Table.from_batches([b]), schema) for b in data)
            return write_data_stream(self._write_context(), batches)
        rows = conform_to_schema(to_arrow_table(data), self.schema())
        return write_data_files(self._write_context(), rows, self.engine.map)

    def append(self, data: Any, snapshot_properties: dict[str, str] | None = None) -> Snapshot:
        """Append rows (pyarrow Table/RecordBatch/RecordBatchReader or pandas); returns the new snapshot."""
        files = self.write_files(data)
        return FastAppend(self, files, snapshot_properties).commit()

    def append_files(self, files: list[DataFile], snapshot_properties: dict[str, str] | None = None) -> Snapshot:
        """Commit data files written elsewhere (by :meth:`write_files` on other workers)."""
        return FastAppend(self, files, snapshot_properties).commit()

    def overwrite(
        self,
        data: Any,
        filter: str | Expression | None = None,
        snapshot_properties: dict[str, str] | None = None,
    ) -> Snapshot:
        """Replace the rows matching ``filter`` (every row when None) with ``data``, in one snapshot.

        Files whose rows all match are dropped; files where only some rows match are rewritten
        without them. The commit fails with CommitConflictError if a concurrent commit added
        rows that match the filter after this overwrite read the table.
        """
        expr = to_expression(filter)
        bound = bind(self.schema(), expr)
        rows = conform_to_schema(to_arrow_table(data), self.schema())
        deleted, rewritten, scan_snapshot = self._plan_delete(bound)
        added = write_data_files(self._write_context(), rows, self.engine.map) if rows.num_rows else []
        producer = OverwriteFiles(
            self, deleted, [*rewritten, *added], "overwrite",
            scan_snapshot.snapshot_id if scan_snapshot else None,
            conflict_check=self._conflicting_appends(bound),
            snapshot_properties=snapshot_properties,
        )
        return producer.commit()

    def replace_partitions(self, data: Any, snapshot_properties: dict[str, str] | None = None) -> Snapshot:
        """Dynamic partition overwrite: replace exactly the partitions ``data`` has rows in.

        Files of the current spec in those partitions are dropped; other partitions, and files
        of older specs, stay. A concurrent commit that adds files to a replaced partition makes
        this commit fail with CommitConflictError.
        """
        rows = conform_to_schema(to_arrow_table(data), self.schema())
        added = write_data_files(self._write_context(), rows, self.engine.map) if rows.num_rows else []
        spec_id = self.spec().spec_id
        targets = {tuple(f.partition) for f in added}
        snapshot = self.current_snapshot()
        tasks = plan_files(self.io, self.metadata, snapshot, self.schema(), AlwaysTrue(), self.engine)
        deleted = [t.file for t in tasks if t.file.spec_id == spec_id and tuple(t.file.partition) in targets]

        def conflicts(newer: list[Snapshot]) -> None:
            for f in added_data_files(self, newer):
                if f.spec_id == spec_id and tuple(f.partition) in targets:
                    raise CommitConflictError(
                        f"a concurrent commit added {f.file_path} to a partition this overwrite replaces; re-run it"
                    )

        return OverwriteFiles(
            self, deleted, added, "overwrite", snapshot.snapshot_id if snapshot else None,
            conflict_check=conflicts,
            snapshot_properties={"replace-partitions": "true", **(snapshot_properties or {})},
        ).commit()

    # -- column merges (tablestore.table.column_merge) --------------------------------------
    def fragments(self, filter: str | Expression | None = None) -> list[Fragment]:
        """The fragments (a data file with its deletes) of the current snapshot, for column merges."""
        from tablestore.table.fragments import list_fragments

        return list_fragments(self, filter)

    def merge_columns(self, source: Any, on: str | list[str], columns: list[str] | None = None,
                      duplicates: str = "error", filter: str | Expression | None = None) -> Snapshot | None:
        """Add ``source``'s columns, joined on ``on``, in one commit with the schema change."""
        from tablestore.table.column_merge import merge_table

        return merge_table(self, source, on, columns, "merge", duplicates=duplicates, filter=filter)

    def update_columns(self, source: Any, on: str | list[str], columns: list[str], null_policy: str = "keep",
                       duplicates: str = "error", filter: str | Expression | None = None) -> Snapshot | None:
        """Update ``columns`` from ``source`` joined on ``on``: NULL or absent new values keep the old."""
        from tablestore.table.column_merge import merge_table

        return merge_table(self, source, on, columns, "update", null_policy, duplicates, filter)

    def commit_fragments(self, fragments: list[Fragment]) -> Snapshot | None:
        """Commit fragments rewritten elsewhere (``Fragment.merge_columns``) in one snapshot."""
        from tablestore.table.fragments import commit_fragments

        return commit_fragments(self, fragments)

    def update_spec(self) -> UpdateSpec:
        """Partition evolution: ``with table.update_spec() as u: u.add_field("hours(ts)")``."""
        from tablestore.table.spec_update import UpdateSpec

        return UpdateSpec(self)

    def update_schema(self, case_sensitive: bool = True) -> UpdateSchema:
        """A builder of schema changes, committed together on exit: ``with t.update_schema() as u: ...``."""
        from tablestore.table.schema_update import UpdateSchema

        return UpdateSchema(self, case_sensitive)

    def update_properties(self, updates: dict[str, str] | None = None, removals: list[str] | None = None) -> None:
        """Set and remove table properties in one commit (retried: property changes commute).

        ``format-version`` is not a stored property: setting it upgrades the table's format (as
        Spark's ``ALTER TABLE ... SET TBLPROPERTIES ('format-version'='3')`` does); a downgrade
        or an unknown version is refused, and it cannot be removed.
        """
        from tablestore.spec.metadata import RESERVED_PROPERTIES
        from tablestore.spec.updates import (
            AssertTableUUID,
            RemovePropertiesUpdate,
            SetPropertiesUpdate,
            UpgradeFormatVersionUpdate,
        )

        changes: list[TableUpdate] = []
        updates = {str(k): str(v) for k, v in (updates or {}).items()}
        if "format-version" in updates:
            text = updates.pop("format-version")
            try:
                version = int(text)
            except ValueError:
                raise ValidationError(f"format-version must be 1, 2 or 3, got {text!r}") from None
            if version != self.metadata.format_version:
                changes.append(UpgradeFormatVersionUpdate(version))
        if any(k in RESERVED_PROPERTIES for k in removals or ()):
            raise ValidationError("format-version cannot be removed; a table always has a format version")
        if updates:
            changes.append(SetPropertiesUpdate(updates))
        if removals:
            changes.append(RemovePropertiesUpdate(tuple(removals)))
        if not changes:
            return
        for attempt in range(10):
            try:
                self._commit([AssertTableUUID(self.metadata.table_uuid)], changes)
                return
            except CommitConflictError:
                if attempt == 9:
                    raise
                self.refresh()

    def delete(self, filter: str | Expression, snapshot_properties: dict[str, str] | None = None) -> int:
        """Delete the rows matching ``filter``; returns how many rows were deleted.

        Files that match as a whole are dropped in metadata only; others are rewritten
        (``write.delete.mode=copy-on-write``, the default) or get position deletes
        (``merge-on-read``). See docs/row-level-operations.md.
        """
        from tablestore.table.row_level import delete_rows

        return delete_rows(self, filter, snapshot_properties)

    def update(
        self,
        assignments: dict[str, Any],
        filter: str | Expression | None = None,
        snapshot_properties: dict[str, str] | None = None,
    ) -> int:
        """Set columns to SQL expressions (``{"name": "upper(name)"}``) where ``filter`` holds; returns the count."""
        from tablestore.table.row_level import update_rows

        return update_rows(self, assignments, filter, snapshot_properties)

    def merge(self, source: Any, on: str, source_alias: str = "s", target_alias: str = "t") -> MergeBuilder:
        """MERGE INTO this table USING ``source`` ON ``on``: a builder, run by ``.execute()``."""
        from tablestore.table.merge import MergeBuilder

        return MergeBuilder(self, source, on, source_alias, target_alias)

    def _plan_delete(self, bound: BoundExpression) -> tuple[list[DataFile], list[DataFile], Snapshot | None]:
        """Files to drop and the rewritten remainders of partially matching files."""
        snapshot = self.current_snapshot()
        if snapshot is None or isinstance(bound, AlwaysFalse):
            return [], [], snapshot
        schema = self.schema()
        tasks = plan_files(self.io, self.metadata, snapshot, schema, bound, self.engine)
        if isinstance(bound, AlwaysTrue):
            return [t.file for t in tasks], [], snapshot
        ctx = self._write_context()

        def rewrite(task: FileTask) -> tuple[DataFile, list[DataFile]] | None:
            from tablestore.table.read import read_task_table

            spec = self.metadata.spec_for(task.spec_id)
            everything = read_task_table(self.io, task.file, task.delete_files, spec, schema, schema, AlwaysTrue(),
                                         self.properties.get("schema.name-mapping.default"))
            kept = _rows_not_matching(everything, bound, schema)
            if kept.num_rows == everything.num_rows and not task.delete_files:
                return None
            if kept.num_rows == 0:
                return task.file, []
            # Already on an engine thread: write this file's remainder inline.
            serial = lambda fn, items: [fn(i) for i in items]  # noqa: E731
            return task.file, write_data_files(ctx, conform_to_schema(kept, schema), serial)

        deleted: list[DataFile] = []
        rewritten: list[DataFile] = []
        for outcome in self.engine.map(rewrite, tasks):
            if outcome is not None:
                deleted.append(outcome[0])
                rewritten.extend(outcome[1])
        return deleted, rewritten, snapshot

    def _conflicting_appends(self, bound: BoundExpression) -> Callable[[list[Snapshot]], None]:
        """Fail a filter-based overwrite when a concurrent commit added rows it would match."""
        schema = self.schema()

        def check(newer: list[Snapshot]) -> None:
            metrics = InclusiveMetricsEvaluator(schema, bound)
            evaluators: dict[int, PartitionEvaluator] = {}
            for f in added_data_files(self, newer):
                spec = self.metadata.spec_for(f.spec_id)
                evaluator = evaluators.setdefault(f.spec_id, PartitionEvaluator(spec, schema, bound))
                if evaluator.eval(tuple(f.partition)) and metrics.eval(f):
                    raise CommitConflictError(
                        f"a concurrent commit added {f.file_path}, which may hold rows matching the "
                        "filter of this operation; re-run it on the new table state"
                    )

        return check


def _rows_not_matching(table: pa.Table, bound: BoundExpression, schema: Schema) -> pa.Table:
    """Rows for which the filter is not true (false or unknown), so NULL comparisons keep rows."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from tablestore.spec.evaluators import to_arrow_expression

    expr = to_arrow_expression(bound, schema)
    matches = ds.dataset(table).to_table(columns={"__m": expr}).column("__m")
    return table.filter(pc.invert(pc.fill_null(matches, False)))
