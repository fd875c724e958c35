"""The schema-change builder: several changes to a table's schema, committed as one.

    >>> import pyarrow as pa, tablestore, tempfile
    >>> wh = tempfile.mkdtemp()
    >>> catalog = tablestore.load_catalog("local", type="sql", uri=f"sqlite:///{wh}/c.db", warehouse=wh)
    >>> catalog.create_namespace("db")
    >>> table = catalog.create_table("db.t", schema=pa.schema([("a", pa.int32()), ("x", pa.string())]))
    >>> with table.update_schema() as u:  # each call returns the builder, so calls may chain
    ...     _ = u.add_column("c", "string", doc="a comment").rename_column("a", "b")
    ...     _ = u.widen("b", "bigint").drop_column("x").move_first("c")
    >>> [(f.name, str(f.field_type)) for f in table.schema().fields]
    [('c', 'string'), ('b', 'long')]

The builder commits when the ``with`` block ends without an exception, in one commit
(add-schema and set-current-schema, required: the current schema is still the one the
changes were made on). Commits by others that did not change the schema are retried over.
Type changes that Iceberg cannot do in metadata (int to double, anything to string, date to
timestamp, and explicit casts under ``tablestore.schema.cast-mode``) rewrite the data files that
still hold the old type, in the same commit (see :mod:`tablestore.table.update.schema_rewrite`).
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

from tablestore.errors import CommitConflictError, SchemaEvolutionError
from tablestore.spec.metadata.schema_evolution import CastMode, SchemaEvolution, check_partition_sources
from tablestore.spec.metadata.table_metadata import MAIN_BRANCH, TableMetadata
from tablestore.spec.metadata.update_models import (
    AddSchemaUpdate,
    AssertCurrentSchemaId,
    AssertLastAssignedFieldId,
    AssertRefSnapshotId,
    AssertTableUUID,
    SetCurrentSchemaUpdate,
    SetPropertiesUpdate,
    TableRequirement,
    TableUpdate,
)
from tablestore.spec.schemas.name_mapping import DEFAULT_NAME_MAPPING, NameMapping, update_mapping
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import IcebergType
from tablestore.table.update.retry import StagedCommit
from tablestore.table.update.schema_rewrite import plan_type_rewrite

if TYPE_CHECKING:
    from tablestore.table import Table
    from tablestore.table.update.transaction import Transaction

class UpdateSchema:
    """Changes to a table's schema, checked as they are made and committed together."""

    def __init__(self, table: Table, case_sensitive: bool = True, transaction: Transaction | None = None) -> None:
        self.table = table
        self._transaction = transaction
        md = transaction.metadata if transaction is not None else table.metadata
        self._base_metadata = md
        self._evolution = SchemaEvolution(
            md.schema(), md.last_column_id, md.spec(), CastMode.from_properties(md.properties), case_sensitive,
            tuple(md.sort_orders), tuple(md.partition_specs), md.format_version,
        )
        self._committed = False

    # -- context manager --------------------------------------------------------------------
    def __enter__(self) -> UpdateSchema:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None and not self._committed:
            self.commit()

    # -- changes (each returns the builder, so calls chain) -----------------------------------
    def add_column(self, name: str | tuple[str, ...], field_type: IcebergType | str, doc: str | None = None,
                   required: bool = False, first: bool = False, after: str | None = None,
                   default: Any = None) -> UpdateSchema:
        """Add a column; ``"s.x"`` (or ``("s", "x")``) adds field ``x`` to struct ``s``.

        Rows already in the table read NULL for it, or ``default`` (format v3 tables: it becomes
        the column's ``initial-default`` and ``write-default``; no data file is rewritten).
        ``required=True`` (NOT NULL) needs a default. ``first``/``after`` place it (default: last).
        """
        self._evolution.add_column(name, field_type, doc, required, first, after, default)
        return self

    def set_default(self, name: str, value: Any) -> UpdateSchema:
        """``ALTER COLUMN c SET DEFAULT value`` (format v3): what later writes store when they do
        not supply the column (its ``write-default``). Rows already written are unchanged."""
        self._evolution.set_default(name, value)
        return self

    def drop_default(self, name: str) -> UpdateSchema:
        """``ALTER COLUMN c DROP DEFAULT``: later writes must supply the column (or store NULL in
        a nullable one). What old rows read (the ``initial-default``) stays."""
        self._evolution.set_default(name, None)
        return self

    def drop_column(self, name: str) -> UpdateSchema:
        """Drop a column; old files keep the data, reads ignore it (its id is never reused)."""
        self._evolution.drop_column(name)
        return self

    def rename_column(self, name: str, new_name: str) -> UpdateSchema:
        """Rename a column (a nested one by its dotted name); old data reads under the new name."""
        self._evolution.rename_column(name, new_name)
        return self

    def update_column(self, name: str, field_type: IcebergType | str | None = None, doc: str | None = None,
                      required: bool | None = None) -> UpdateSchema:
        """Change a column's type, comment, or make it nullable (``required=False``)."""
        if field_type is not None:
            self._evolution.update_column_type(name, field_type)
        if doc is not None:
            self._evolution.update_doc(name, doc)
        if required is True:
            raise SchemaEvolutionError(
                f"cannot make column {name!r} NOT NULL: rows already in the table may hold NULL; only "
                "DROP NOT NULL is supported"
            )
        if required is False:
            self._evolution.make_optional(name)
        return self

    def widen(self, name: str, field_type: IcebergType | str) -> UpdateSchema:
        """Change a column's type: int to bigint, float to double and wider decimals in metadata;
        int/bigint to double, anything to string, date to timestamp by rewriting old files."""
        self._evolution.update_column_type(name, field_type)
        return self

    def update_doc(self, name: str, doc: str | None) -> UpdateSchema:
        self._evolution.update_doc(name, doc)
        return self

    def make_optional(self, name: str) -> UpdateSchema:
        """``ALTER COLUMN c DROP NOT NULL``."""
        self._evolution.make_optional(name)
        return self

    def move_first(self, name: str) -> UpdateSchema:
        self._evolution.move(name, first=True)
        return self

    def move_after(self, name: str, after: str) -> UpdateSchema:
        self._evolution.move(name, after=after)
        return self

    def move_before(self, name: str, before: str) -> UpdateSchema:
        self._evolution.move(name, before=before)
        return self

    def set_identifier_fields(self, *names: str) -> UpdateSchema:
        """Make these columns the table's identifier fields (primary key); they must be NOT NULL."""
        self._evolution.set_identifier_fields(list(names))
        return self

    def drop_identifier_fields(self, *names: str) -> UpdateSchema:
        self._evolution.drop_identifier_fields(list(names))
        return self

    # -- outcome ----------------------------------------------------------------------------
    def apply(self) -> Schema:
        """The schema these changes produce, without committing it."""
        return self._evolution.result()

    def commit(self) -> None:
        """Commit the changes (or add them to the transaction the builder belongs to)."""
        if self._committed:
            raise SchemaEvolutionError("this schema update was committed already; start a new one")
        new = self._evolution.result()
        base = self._base_metadata
        self._committed = True
        if new.fields == base.schema().fields and new.identifier_field_ids == base.schema().identifier_field_ids:
            return
        rewrites = self._evolution.rewrites()
        if rewrites and self._transaction is None:
            # The rewrite converts the files of the table as it is now, not as it was when the
            # builder started: files appended meanwhile get converted too.
            self.table.refresh()
            ensure_schema_unchanged(base, self.table.metadata)
            base = self.table.metadata
        transaction = self._transaction or self.table.transaction()
        rewrite = None
        if rewrites and base.current_snapshot() is not None:
            rewrite = plan_type_rewrite(self.table, base, new, rewrites, self._evolution.cast_mode)
        transaction.add_change(SchemaChange(base, new, self._evolution.last_column_id,
                                            pin_snapshot=bool(rewrites) and rewrite is None))
        if rewrite is not None:
            transaction.add_snapshot(rewrite)
        if self._transaction is None:
            transaction.commit_transaction()


class SchemaChange:
    """A new current schema (a :class:`MetadataChange` of a transaction), made on ``started``.

    Retried over concurrent commits that left the schema alone. ``pin_snapshot``: the change
    converts column types and no file needed converting, which holds only while nobody appends.
    """

    def __init__(self, started: TableMetadata, new: Schema, last_column_id: int, pin_snapshot: bool = False) -> None:
        self.started, self.new, self.last_column_id, self.pin_snapshot = started, new, last_column_id, pin_snapshot

    def stage(self, base: TableMetadata) -> StagedCommit:
        ensure_schema_unchanged(self.started, base)
        check_partition_sources(self.started.schema(), self.new, base.spec())
        requirements, updates = schema_change(base, self.new, self.last_column_id)
        if self.pin_snapshot:
            started, now = self.started.current_snapshot(), base.current_snapshot()
            started_id = started.snapshot_id if started else None
            if (now.snapshot_id if now else None) != started_id:
                raise CommitConflictError(
                    "a concurrent commit added data files (possibly of the old type) while the column type was "
                    "being changed; run the ALTER TABLE again"
                )
            requirements.append(AssertRefSnapshotId(ref=MAIN_BRANCH, snapshot_id=started_id))
        return StagedCommit(requirements, updates)


def schema_change(base: TableMetadata, new: Schema, last_column_id: int
                  ) -> tuple[list[TableRequirement], list[TableUpdate]]:
    """The requirements and updates that make ``new`` the current schema of ``base``'s table."""
    requirements: list[TableRequirement] = [
        AssertTableUUID(uuid=base.table_uuid),
        AssertCurrentSchemaId(current_schema_id=base.current_schema_id),
        AssertLastAssignedFieldId(last_assigned_field_id=base.last_column_id),
    ]
    updates: list[TableUpdate] = [
        AddSchemaUpdate(schema_=new, last_column_id=max(last_column_id, base.last_column_id)),
        SetCurrentSchemaUpdate(schema_id=-1),
    ]
    mapping_json = base.properties.get(DEFAULT_NAME_MAPPING)
    if mapping_json:
        # As Java Iceberg and pyiceberg: the mapping follows renames and adds in the same commit.
        mapping = NameMapping.from_json(mapping_json)
        updated = update_mapping(mapping, base.schema(), new)
        if updated != mapping:
            updates.append(SetPropertiesUpdate(updates={DEFAULT_NAME_MAPPING: updated.to_json()}))
    return requirements, updates


def ensure_schema_unchanged(base: TableMetadata, now: TableMetadata) -> None:
    if now.current_schema_id != base.current_schema_id or now.last_column_id != base.last_column_id:
        raise CommitConflictError(
            "the table's schema was changed by a concurrent commit after this schema update started; "
            "reload the table and make the change again"
        )


