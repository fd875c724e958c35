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
from typing import TYPE_CHECKING, Any, ClassVar

from tablestore.errors import TableStoreError, ValidationError
from tablestore.io.fileio import FileIO
from tablestore.names import metadata_directory
from tablestore.option_values import epoch_ms, flag
from tablestore.spec.expressions.expression_tree import Expression
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.metadata.table_metadata import MAIN_BRANCH, Snapshot, SnapshotRef, TableMetadata
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.schemas.schema import Schema
from tablestore.table.ops.data import TableTransaction, write_files
from tablestore.table.ops.overwrite import replace_partitions_producer
from tablestore.table.read.scan import FileTask, TableScan
from tablestore.table.update.identity import CommitIdentity
from tablestore.table.update.transaction import commit_snapshot
from tablestore.table.write.data_files import WriteContext

if TYPE_CHECKING:
    from sqlglot import exp

    from tablestore.catalog.base import Catalog
    from tablestore.engine.protocols import Engine
    from tablestore.maintenance import Maintenance
    from tablestore.table.ops.column_merge import Fragment
    from tablestore.table.ops.merge import MergeBuilder
    from tablestore.table.ops.refs import ManageSnapshots
    from tablestore.table.read.changelog import ChangelogScan
    from tablestore.table.read.inspect import TableInspector
    from tablestore.table.update.schema import UpdateSchema
    from tablestore.table.update.spec import UpdateSpec

# CommitIdentity is part of the Table API: callers name who makes a commit with it
# (``append_files(..., commit_id=CommitIdentity(...))``) without reaching into the commit path.
__all__ = ["CommitIdentity", "FileTask", "Table", "TableScan", "TableTransaction"]

#: The table property that lets writes be staged with a ``wap.id`` or go to ``spark.wap.branch``.
WAP_ENABLED = "write.wap.enabled"


class Table:
    #: What ``table.maintenance()`` is made by: :class:`tablestore.maintenance.Maintenance`, which
    #: builds on this package (it sits above it in the layers) and so installs itself here when
    #: imported. ``import tablestore`` imports it: every program that holds a Table has it.
    maintenance_actions: ClassVar[Callable[[Table], Maintenance] | None] = None

    def __init__(
        self,
        catalog: Catalog,
        identifier: tuple[str, ...],
        metadata_location: str,
        metadata: TableMetadata,
        io: FileIO,
        engine: Engine | None = None,
        branch: str = MAIN_BRANCH,
        wap_id: str | None = None,
    ) -> None:
        #: The branch this Table object reads by default and writes to (``on_branch``).
        self.branch = branch
        #: Write-audit-publish: writes add snapshots tagged ``wap.id`` that move no branch.
        self.wap_id = wap_id
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
        return Table(self.catalog, self.identifier, self.metadata_location, self.metadata, self.io, engine,
                     self.branch, self.wap_id)

    def on_branch(self, branch: str | None) -> Table:
        """This table, reading and writing ``branch`` (None or "main": main).

        Every write of the returned object (append, overwrite, delete, update, MERGE, column
        merges, compaction) commits to the branch and validates against the branch's head; a
        branch that does not exist yet is created from main's head by the first write, as in
        Iceberg. Reads default to the branch's head (main's while it does not exist).
        """
        name = branch or MAIN_BRANCH
        ref = self.metadata.refs.get(name)
        if ref is not None and not ref.is_branch:
            raise ValidationError(
                f"cannot write to {name!r} of table {self.name}: it is a tag, and tags are read-only; "
                "write to a branch (create one from the tag to change its data)"
            )
        if not isinstance(name, str) or not name.strip():
            raise ValidationError("a branch needs a non-empty name")
        return Table(self.catalog, self.identifier, self.metadata_location, self.metadata, self.io,
                     self._engine, name, None)

    def staged(self, wap_id: str) -> Table:
        """This table, writing staged snapshots (write-audit-publish's ``wap.id``): each write adds
        a snapshot that carries ``wap.id`` in its summary and moves no branch, until
        ``manage_snapshots().cherrypick(id)`` or the ``publish_changes`` procedure publishes it.
        Needs the table property ``write.wap.enabled=true``, as in Iceberg."""
        if not flag(self.metadata.properties, WAP_ENABLED, kind="table property"):
            raise ValidationError(
                f"cannot stage writes with wap.id {wap_id!r} on table {self.name}: write-audit-publish is "
                f"off; set the table property {WAP_ENABLED}=true first"
            )
        if not wap_id or not wap_id.strip():
            raise ValidationError("a wap.id needs a non-empty value")
        return Table(self.catalog, self.identifier, self.metadata_location, self.metadata, self.io,
                     self._engine, MAIN_BRANCH, wap_id)

    def refs(self) -> dict[str, SnapshotRef]:
        """The table's branches and tags by name (``main`` among them once it has a snapshot)."""
        return dict(self.metadata.refs)

    def manage_snapshots(self) -> ManageSnapshots:
        """Branches, tags, rollback, fast-forward and cherry-pick, committed once:
        ``table.manage_snapshots().create_branch(id, "audit").create_tag(id, "v1").commit()``.

        The table is refreshed first: refs name snapshots that other writers (or other Table
        objects on a branch) may have just made."""
        from tablestore.table.ops.refs import ManageSnapshots

        return ManageSnapshots(self.refresh())

    @property
    def location(self) -> str:
        return self.metadata.location.rstrip("/")

    @property
    def metadata_dir(self) -> str:
        return metadata_directory(self.metadata)

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
        """The head of this object's branch (main's current snapshot unless ``on_branch``)."""
        return self.metadata.branch_head(self.branch)

    def snapshots(self) -> list[Snapshot]:
        return list(self.metadata.snapshots)

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot | None:
        return self.metadata.snapshot_by_id(snapshot_id)

    @property
    def inspect(self) -> TableInspector:
        """Metadata tables (snapshots, files, manifests, partitions, ...) as pyarrow Tables."""
        from tablestore.table.read.inspect import TableInspector

        return TableInspector(self)

    def maintenance(self) -> Maintenance:
        """Expire snapshots, remove orphan files, compact (see tablestore.maintenance)."""
        if Table.maintenance_actions is None:
            raise TableStoreError("table maintenance is not loaded: import tablestore.maintenance")
        return Table.maintenance_actions(self)

    def refresh(self) -> Table:
        """Load the table's current metadata (this object keeps its branch)."""
        self.metadata_location, self.metadata = self.catalog.load_table_metadata(self.identifier)
        return self

    def __repr__(self) -> str:
        return f"Table({self.name!r}, {self.metadata_location!r})"

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
        start_snapshot_id: int | None = None,
        end_snapshot_id: int | None = None,
    ) -> TableScan:
        """A scan of the table, optionally filtered, projected and at an older snapshot.

        ``as_of_timestamp`` takes epoch milliseconds, a datetime (naive means UTC) or an ISO string.
        ``columns`` may name the row lineage columns of format v3, ``_row_id`` and
        ``_last_updated_sequence_number``, which are never part of the default projection.

        ``start_snapshot_id``/``end_snapshot_id`` make it an incremental append scan (Iceberg's
        ``IncrementalAppendScan``): the rows that ``append`` snapshots after ``start``
        (exclusive) up to ``end`` (inclusive, default the current snapshot) added; deletes,
        overwrites and compactions in the range contribute nothing::

            new_rows = table.scan(start_snapshot_id=last_seen).to_arrow()
        """
        if (self.branch != MAIN_BRANCH and snapshot_id is None and as_of_timestamp is None and ref is None
                and self.branch in self.metadata.refs):
            ref = self.branch
        return TableScan(
            self.io, self.metadata, self.engine, filter=filter, columns=columns, snapshot_id=snapshot_id,
            as_of_timestamp_ms=epoch_ms(as_of_timestamp, "as_of_timestamp") if as_of_timestamp is not None else None,
            ref=ref, case_sensitive=case_sensitive, limit=limit,
            planner=self.catalog.scan_planner(self.identifier),
            start_snapshot_id=start_snapshot_id, end_snapshot_id=end_snapshot_id,
        )

    def changes(
        self,
        from_snapshot: int | None = None,
        to_snapshot: int | None = None,
        *,
        from_timestamp: int | str | datetime.datetime | None = None,
        to_timestamp: int | str | datetime.datetime | None = None,
        from_ref: str | None = None,
        to_ref: str | None = None,
        identifier_columns: list[str] | None = None,
        compute_updates: bool | None = None,
        net_changes: bool = False,
    ) -> ChangelogScan:
        """The rows that changed after ``from`` (exclusive) up to ``to`` (inclusive), as a lazy
        :class:`~tablestore.table.read.changelog.ChangelogScan` (``to_batches``, ``to_arrow``).

        Each end is a snapshot id, a point in time (epoch ms, ISO string or datetime) or a ref
        (branch or tag); ``to`` defaults to the head of this object's branch, ``from`` to the
        table's creation. Rows come in the ``to`` snapshot's schema with ``_change_type``
        (INSERT, DELETE, UPDATE_BEFORE, UPDATE_AFTER), ``_change_ordinal`` and
        ``_commit_snapshot_id``; rows a copy-on-write rewrite carried over unchanged, and
        compactions, yield nothing. Updates pair a DELETE and an INSERT of one key in one
        snapshot: the key is ``identifier_columns``, else the table's identifier fields, else on
        format v3 the row lineage ``_row_id``; ``compute_updates=False`` turns pairing off.
        ``net_changes`` collapses the changes of a row over the range into its net change.
        See docs/changes.md.
        """
        from tablestore.table.read.changelog import ChangelogScan, key_columns_for
        from tablestore.table.read.changelog_range import resolve_range

        snapshot_range = resolve_range(
            self.metadata, self.current_snapshot(), from_snapshot, to_snapshot,
            epoch_ms(from_timestamp, "from_timestamp") if from_timestamp is not None else None,
            epoch_ms(to_timestamp, "to_timestamp") if to_timestamp is not None else None, from_ref, to_ref)
        end = snapshot_range.end
        schema = self.metadata.schema_by_id(end.schema_id) if end is not None and end.schema_id is not None \
            else None
        keys = key_columns_for(schema or self.schema(), self.metadata.format_version, identifier_columns,
                               compute_updates)
        return ChangelogScan(self.io, self.metadata, self.engine, snapshot_range, keys, net_changes)

    # -- writes ----------------------------------------------------------------------------
    def write_context(self) -> WriteContext:
        """Where and how new data files of the current schema and spec are written."""
        return WriteContext(self.io, self.location, self.schema(), self.spec(), self.properties)

    def write_files(self, data: Any) -> list[DataFile]:
        """Write data files for ``data`` without committing them (a task's half of a write).

        A RecordBatchReader is written as it streams in, in bounded memory.
        """
        return write_files(self, self.metadata, data)

    def append(self, data: Any, snapshot_properties: dict[str, str] | None = None,
               commit_id: str | CommitIdentity | None = None, branch: str | None = None) -> Snapshot:
        """Append rows (pyarrow Table/RecordBatch/RecordBatchReader or pandas); returns the new snapshot.

        ``commit_id``: as in :meth:`append_files`, a retried job's rows land once. ``branch``
        (every write takes it): commit to that branch instead, see :meth:`on_branch`.
        """
        target = self._target(branch)
        try:
            return self._commit_alone(target.transaction(commit_id).append(data, snapshot_properties))
        finally:
            self._adopt(target)

    def append_files(self, files: list[DataFile], snapshot_properties: dict[str, str] | None = None,
                     commit_id: str | CommitIdentity | None = None, branch: str | None = None) -> Snapshot:
        """Commit data files written elsewhere (by :meth:`write_files` on other workers).

        With ``commit_id``, a job retried with the same identifier never appends twice: when
        the identifier is in the table's history already, the files are deleted and the snapshot
        that applied it is returned (see :mod:`tablestore.table.update.identity`).
        """
        target = self._target(branch)
        try:
            return self._commit_alone(target.transaction(commit_id).append_files(files, snapshot_properties))
        finally:
            self._adopt(target)

    def overwrite_files(self, files: list[DataFile], filter: str | Expression | None = None,
                        snapshot_properties: dict[str, str] | None = None,
                        commit_id: str | CommitIdentity | None = None) -> Snapshot:
        """Replace the rows matching ``filter`` (every row when None) with data files written
        elsewhere, as :meth:`overwrite` does with rows; ``commit_id`` as in :meth:`append_files`."""
        return self._commit_alone(self.transaction(commit_id).overwrite_files(files, filter, snapshot_properties))

    def replace_partitions_files(self, files: list[DataFile], snapshot_properties: dict[str, str] | None = None,
                                 commit_id: str | CommitIdentity | None = None) -> Snapshot:
        """:meth:`replace_partitions` with data files written elsewhere: the partitions they have
        rows in are replaced; ``commit_id`` as in :meth:`append_files`."""
        return self._commit_alone(self.transaction(commit_id).replace_partitions_files(files, snapshot_properties))

    def replace_files(self, files: list[DataFile], read_snapshot_id: int | None,
                      snapshot_properties: dict[str, str] | None = None,
                      commit_id: str | CommitIdentity | None = None) -> Snapshot:
        """Replace the whole table with data files written elsewhere, unless data arrived meanwhile:
        a commit that added data files since ``read_snapshot_id`` (the snapshot the write read;
        None when the table was empty) makes it fail with CommitConflictError."""
        return self._commit_alone(self.transaction(commit_id).replace_files(files, read_snapshot_id,
                                                                           snapshot_properties))

    def applied_commit(self, commit_id: str | CommitIdentity | None) -> Snapshot | None:
        """The snapshot on this table's branch that applied ``commit_id`` (None when none did, or
        no id is given): a job retried with the id after its first commit landed finds it here
        and can skip its work (see :mod:`tablestore.table.update.identity`)."""
        identity = CommitIdentity.of(commit_id)
        return identity.applied(self.metadata, self.branch) if identity is not None else None

    def transaction(self, commit_id: str | CommitIdentity | None = None) -> TableTransaction:
        """Several changes in one atomic commit: ``with table.transaction() as tx: tx.append(...)``.

        Schema, spec and property changes and one snapshot (appends, overwrites and deletes
        fold into it) commit together or not at all; see :mod:`tablestore.table.update.transaction`.
        """
        return TableTransaction(self, commit_id)

    def _target(self, branch: str | None) -> Table:
        """The Table a write with ``branch=`` goes through (this one when None)."""
        return self if branch is None or branch == self.branch else self.on_branch(branch)

    def _adopt(self, target: Table) -> None:
        """Take the metadata a write through ``target`` left (or saw), so this object is not stale."""
        if target is not self:
            self.metadata_location, self.metadata = target.metadata_location, target.metadata

    @staticmethod
    def _commit_alone(transaction: TableTransaction) -> Snapshot:
        """Commit a transaction of one snapshot change; its snapshot."""
        snapshot = transaction.commit_transaction()
        assert snapshot is not None  # a transaction with a snapshot change returns its snapshot
        return snapshot

    def overwrite(
        self,
        data: Any,
        filter: str | Expression | None = None,
        snapshot_properties: dict[str, str] | None = None,
        branch: str | None = None,
        commit_id: str | CommitIdentity | None = None,
    ) -> Snapshot:
        """Replace the rows matching ``filter`` (every row when None) with ``data``, in one snapshot.

        Files whose rows all match are dropped; files where only some rows match are rewritten
        without them. The commit fails with CommitConflictError if a concurrent commit added
        rows that match the filter after this overwrite read the table.
        """
        target = self._target(branch)
        try:
            return self._commit_alone(target.transaction(commit_id).overwrite(data, filter, snapshot_properties))
        finally:
            self._adopt(target)

    def replace_partitions(self, data: Any, snapshot_properties: dict[str, str] | None = None,
                           branch: str | None = None, commit_id: str | CommitIdentity | None = None) -> Snapshot:
        """Dynamic partition overwrite: replace exactly the partitions ``data`` has rows in.

        Files of the current spec in those partitions are dropped; other partitions, and files
        of older specs, stay. A concurrent commit that adds files to a replaced partition makes
        this commit fail with CommitConflictError.
        """
        target = self._target(branch)
        try:
            return commit_snapshot(replace_partitions_producer(target, data, snapshot_properties), commit_id)
        finally:
            self._adopt(target)

    # -- column merges (tablestore.table.ops.column_merge) --------------------------------------
    def fragments(self, filter: str | Expression | None = None) -> list[Fragment]:
        """The fragments (a data file with its deletes) of the current snapshot, for column merges."""
        from tablestore.table.ops.column_merge import list_fragments

        return list_fragments(self, filter)

    def merge_columns(self, source: Any, on: str | list[str], columns: list[str] | None = None,
                      duplicates: str = "error", filter: str | Expression | None = None,
                      branch: str | None = None, commit_id: str | CommitIdentity | None = None) -> Snapshot | None:
        """Add ``source``'s columns, joined on ``on``, in one commit with the schema change;
        ``commit_id`` as in :meth:`append_files`."""
        from tablestore.table.ops.column_merge import merge_table

        target = self._target(branch)
        try:
            return merge_table(target, source, on, columns, "merge", duplicates=duplicates, filter=filter,
                               commit_id=commit_id)
        finally:
            self._adopt(target)

    def update_columns(self, source: Any, on: str | list[str], columns: list[str], null_policy: str = "keep",
                       duplicates: str = "error", filter: str | Expression | None = None,
                       branch: str | None = None, commit_id: str | CommitIdentity | None = None) -> Snapshot | None:
        """Update ``columns`` from ``source`` joined on ``on``: NULL or absent new values keep the old;
        ``commit_id`` as in :meth:`append_files`."""
        from tablestore.table.ops.column_merge import merge_table

        target = self._target(branch)
        try:
            return merge_table(target, source, on, columns, "update", null_policy, duplicates, filter,
                               commit_id=commit_id)
        finally:
            self._adopt(target)

    def commit_fragments(self, fragments: list[Fragment]) -> Snapshot | None:
        """Commit fragments rewritten elsewhere (``Fragment.merge_columns``) in one snapshot."""
        from tablestore.table.ops.column_merge import commit_fragments

        return commit_fragments(self, fragments)

    def update_spec(self) -> UpdateSpec:
        """Partition evolution: ``with table.update_spec() as u: u.add_field("hours(ts)")``."""
        from tablestore.table.update.spec import UpdateSpec

        return UpdateSpec(self)

    def update_schema(self, case_sensitive: bool = True) -> UpdateSchema:
        """A builder of schema changes, committed together on exit: ``with t.update_schema() as u: ...``."""
        from tablestore.table.update.schema import UpdateSchema

        return UpdateSchema(self, case_sensitive)

    def update_properties(self, updates: dict[str, str] | None = None, removals: list[str] | None = None) -> None:
        """Set and remove table properties in one commit (retried: property changes commute).

        ``format-version`` is not a stored property: setting it upgrades the table's format (as
        Spark's ``ALTER TABLE ... SET TBLPROPERTIES ('format-version'='3')`` does); a downgrade
        or an unknown version is refused, and it cannot be removed.
        """
        self.transaction().set_properties(updates, removals).commit_transaction()

    def delete(self, filter: str | Expression, snapshot_properties: dict[str, str] | None = None,
               branch: str | None = None, commit_id: str | CommitIdentity | None = None) -> int:
        """Delete the rows matching ``filter``; returns how many rows were deleted.

        Files that match as a whole are dropped in metadata only; others are rewritten
        (``write.delete.mode=copy-on-write``, the default) or get position deletes
        (``merge-on-read``). See docs/row-level-operations.md.
        """
        from tablestore.table.ops.row_level import delete_rows

        target = self._target(branch)
        try:
            return delete_rows(target, filter, snapshot_properties, commit_id=commit_id)
        finally:
            self._adopt(target)

    def update(
        self,
        assignments: dict[str, Any],
        filter: str | Expression | None = None,
        snapshot_properties: dict[str, str] | None = None,
        branch: str | None = None,
        commit_id: str | CommitIdentity | None = None,
    ) -> int:
        """Set columns to SQL expressions (``{"name": "upper(name)"}``) where ``filter`` holds; returns the count.

        ``commit_id``: as in :meth:`append_files`: a retried UPDATE whose first commit landed
        (its answer lost) applies nothing twice."""
        from tablestore.table.ops.row_level import update_rows

        target = self._target(branch)
        try:
            return update_rows(target, assignments, filter, snapshot_properties, commit_id=commit_id)
        finally:
            self._adopt(target)

    def merge(self, source: Any, on: str | exp.Expr, source_alias: str = "s", target_alias: str = "t",
              branch: str | None = None) -> MergeBuilder:
        """MERGE INTO this table USING ``source`` ON ``on``: a builder, run by ``.execute()``.
        ``on`` is SQL text, or the tree of a statement already parsed (SQL's MERGE)."""
        from tablestore.table.ops.merge import MergeBuilder

        return MergeBuilder(self._target(branch), source, on, source_alias, target_alias)
