"""The Transaction: several changes to one table, committed together, all or nothing.

    >>> import pyarrow as pa, tablestore, tempfile
    >>> wh = tempfile.mkdtemp()
    >>> catalog = tablestore.load_catalog("local", type="sql", uri=f"sqlite:///{wh}/c.db", warehouse=wh)
    >>> catalog.create_namespace("db")
    >>> table = catalog.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
    >>> with table.transaction() as tx:
    ...     _ = tx.update_schema().add_column("name", "string").commit()
    ...     _ = tx.append(pa.table({"id": [1], "name": ["a"]}))
    ...     _ = tx.append(pa.table({"id": [2], "name": ["b"]}))
    >>> len(table.snapshots()), sorted(table.scan().to_arrow().column("name").to_pylist())
    (1, ['a', 'b'])

Every commit of the table store goes through a Transaction, whether a user opened one or a
single operation did (``table.append`` is a transaction of one change), and
:meth:`Transaction.commit_transaction` is the only caller of the retry loop. A Transaction takes
metadata changes and snapshot producers only: what turns rows into a producer (append,
overwrite, delete) is an operation, and ``table.transaction()`` returns the
:class:`~tablestore.table.ops.data.TableTransaction` that adds them. It holds:

- metadata changes (schema, partition spec, properties), staged in order: each builder sees
  the table as the changes before it left it (``tx.metadata``), so an append after adding a
  column writes that column;
- at most one snapshot: file changes (appends, overwrites, deletes, row deltas) fold into
  one producer, so two appends in a transaction make one snapshot. The snapshot is staged last,
  on the schema and spec the metadata changes leave.

:meth:`Transaction.commit_transaction` makes one catalog commit with the requirements of every
change (the first of each kind: they all describe the table the transaction started from) and
their updates in order, under the one retry loop (:mod:`tablestore.table.update.retry`). On a
lost race each change is staged again on the refreshed table: a metadata change checks that
what it was based on did not change, the snapshot re-runs its conflict validation and rebuilds
its manifest list. When a change no longer applies, nothing is committed and the files the
transaction wrote are deleted.

When the catalog's answer is lost (the outcome is unknown) no file is deleted: the commit looks
for its snapshot in the reloaded table and sends it again when it is not there; see
:mod:`tablestore.table.update.commit_outcome`, the rule of who may delete a written file.

A transaction given a commit identifier (:mod:`tablestore.table.update.identity`) is applied at
most once: when the identifier is already in the history, it commits nothing and returns the
snapshot that applied it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, Self

from tablestore.errors import CommitStateUnknownError, TableStoreError, ValidationError
from tablestore.spec.metadata.metadata_builder import apply_updates
from tablestore.spec.metadata.table_metadata import RESERVED_PROPERTIES, Snapshot, TableMetadata
from tablestore.spec.metadata.update_models import (
    AssertRefSnapshotId,
    AssertTableUUID,
    RemovePropertiesUpdate,
    SetPropertiesUpdate,
    TableRequirement,
    TableUpdate,
    UpgradeFormatVersionUpdate,
)
from tablestore.table.update.commit_outcome import Landed, Outcome, OutcomeResolver
from tablestore.table.update.identity import CommitIdentity, as_identity
from tablestore.table.update.retry import StagedCommit, commit_with_retries
from tablestore.table.update.snapshot import SnapshotProducer

if TYPE_CHECKING:
    from tablestore.table import Table
    from tablestore.table.update.schema import UpdateSchema
    from tablestore.table.update.spec import UpdateSpec


class MetadataChange(Protocol):
    """A change of table metadata, staged anew on every attempt of the commit."""

    def stage(self, base: TableMetadata) -> StagedCommit:
        """Requirements and updates on ``base`` (the table as the catalog has it now, with the
        transaction's earlier changes applied). Raise CommitConflictError when the change no
        longer applies: a concurrent commit changed what it was made on."""
        ...


class PropertiesChange:
    """Set and remove table properties. Property changes commute: always re-applied.

    ``format-version`` is not a stored property: setting it upgrades the table's format version
    (as Spark's ``SET TBLPROPERTIES ('format-version'='3')`` does); it cannot be removed.
    """

    def __init__(self, updates: dict[str, str] | None, removals: Iterable[str] | None) -> None:
        self.updates = {str(k): str(v) for k, v in (updates or {}).items()}
        self.removals = tuple(removals or ())
        self.format_version: int | None = None
        if RESERVED_PROPERTIES[0] in self.updates:
            text = self.updates.pop(RESERVED_PROPERTIES[0])
            try:
                self.format_version = int(text)
            except ValueError:
                raise ValidationError(f"format-version must be 1, 2 or 3, got {text!r}") from None
        if any(k in RESERVED_PROPERTIES for k in self.removals):
            raise ValidationError("format-version cannot be removed; a table always has a format version")

    def stage(self, base: TableMetadata) -> StagedCommit:
        changes: list[TableUpdate] = []
        if self.format_version is not None and self.format_version != base.format_version:
            changes.append(UpgradeFormatVersionUpdate(format_version=self.format_version))  # a downgrade is refused
        if self.updates:
            changes.append(SetPropertiesUpdate(updates=self.updates))
        if self.removals:
            changes.append(RemovePropertiesUpdate(removals=self.removals))
        return StagedCommit([AssertTableUUID(uuid=base.table_uuid)], changes)


class FixedChange:
    """Updates made under requirements that must still hold: retried only while they do."""

    def __init__(self, requirements: list[TableRequirement], updates: list[TableUpdate]) -> None:
        self.requirements, self.updates = requirements, updates

    def stage(self, base: TableMetadata) -> StagedCommit:
        for requirement in self.requirements:
            requirement.validate(base)  # CommitConflictError when a concurrent commit broke it
        return StagedCommit(list(self.requirements), list(self.updates))


class ComputedChange:
    """Updates computed afresh from the table at every attempt, by ``stage``: what to expire,
    which refs to drop. ``stage`` raises when the change no longer applies."""

    def __init__(self, stage: Callable[[TableMetadata], StagedCommit]) -> None:
        self._stage = stage

    def stage(self, base: TableMetadata) -> StagedCommit:
        return self._stage(base)


class AlreadyApplied(TableStoreError):
    """The transaction's commit identifier is in the table's history: it was applied before."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__(f"this commit was applied before, in snapshot {snapshot.snapshot_id}")
        self.snapshot = snapshot


def _requirement_key(r: TableRequirement) -> tuple[str, str | None]:
    return type(r).__name__, r.ref if isinstance(r, AssertRefSnapshotId) else None


class Transaction:
    """Changes to one table made together: ``with table.transaction() as tx: ...`` commits on a
    clean exit, in one metadata commit; an exception discards them."""

    def __init__(self, table: Table, commit_id: str | CommitIdentity | None = None) -> None:
        self.table = table
        #: The table as the changes so far leave it (what the next builder is made on).
        self.metadata: TableMetadata = table.metadata
        self.identity = as_identity(commit_id)
        self._changes: list[MetadataChange] = []
        self._snapshot: SnapshotProducer | None = None
        self._done = False
        #: Catalog commits tried (1 when the first attempt won); set by commit_transaction.
        self.attempts = 0
        #: The earlier snapshot, when the commit identifier showed the work was applied before.
        self.applied_before: Snapshot | None = None
        #: What became of the commit (None until it was tried).
        self.outcome: Outcome | None = None
        #: Attempts whose answer was lost and that were resolved by reloading the table.
        self.lost_answers = 0

    # -- context manager ---------------------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.commit_transaction()
        else:
            self.abort()

    # -- metadata changes --------------------------------------------------------------------
    def add_change(self, change: MetadataChange) -> Self:
        """Stage ``change`` now (its errors surface here) and keep it for the commit."""
        self._check_open()
        staged = change.stage(self.metadata)
        self.metadata = apply_updates(self.metadata, staged.updates)
        self._changes.append(change)
        return self

    def update_schema(self, case_sensitive: bool = True) -> UpdateSchema:
        """A schema builder whose ``commit()`` adds its change to this transaction."""
        from tablestore.table.update.schema import UpdateSchema

        return UpdateSchema(self.table, case_sensitive, transaction=self)

    def update_spec(self) -> UpdateSpec:
        """A partition spec builder whose ``commit()`` adds its change to this transaction."""
        from tablestore.table.update.spec import UpdateSpec

        return UpdateSpec(self.table, transaction=self)

    def set_properties(self, updates: dict[str, str] | None = None,
                       removals: Iterable[str] | None = None) -> Self:
        change = PropertiesChange(updates, removals)
        if change.stage(self.metadata).updates:  # setting the current format version changes nothing
            self.add_change(change)
        return self

    # -- snapshot changes --------------------------------------------------------------------
    def add_snapshot(self, producer: SnapshotProducer) -> Self:
        """Add a file change; a second one folds into the first (one snapshot)."""
        self._check_open()
        if producer.table is not self.table:
            raise ValidationError("a transaction commits to one table; the change was made for another")
        if self._snapshot is None:
            self._snapshot = producer
        else:
            self._snapshot.merge(producer)
        return self

    # -- the commit ----------------------------------------------------------------------------
    def commit_transaction(self) -> Snapshot | None:
        """Commit every change in one metadata commit; returns the new snapshot (the earlier one
        when the commit identifier was applied before; None when no change adds a snapshot)."""
        self._check_open()
        self._done = True
        producer = self._snapshot
        if producer is None and not self._changes:
            return None
        if self.identity is not None:
            if producer is None:
                raise ValidationError("a commit identifier is recorded in a snapshot; this transaction makes none")
            producer.snapshot_properties.update(self.identity.summary())
        staged_snapshot: list[Snapshot] = []
        staging_needed = producer is not None or len(self._changes) > 1
        resolver = OutcomeResolver(self.table, producer.snapshot_id, producer.branch) if producer else None

        def stage(base: TableMetadata) -> StagedCommit:
            if resolver is not None:
                resolver.check_landed(base)  # an attempt whose answer was lost landed
            if self.identity is not None:
                earlier = self.identity.applied(base, self.table.branch)
                if earlier is not None:
                    raise AlreadyApplied(earlier)
            requirements: list[TableRequirement] = []
            updates: list[TableUpdate] = []
            staged = base
            for change in self._changes:
                one = change.stage(staged)
                requirements.extend(one.requirements)
                updates.extend(one.updates)
                if staging_needed:
                    staged = apply_updates(staged, one.updates)
            if producer is not None and resolver is not None:
                one, snapshot = producer.stage(base, staged)
                requirements.extend(one.requirements)
                updates.extend(one.updates)
                staged_snapshot[:] = [snapshot]
                resolver.last_parent = snapshot.parent_snapshot_id
            unique: dict[tuple[str, str | None], TableRequirement] = {}
            for r in requirements:
                unique.setdefault(_requirement_key(r), r)
            self.attempts += 1  # a staged attempt goes to the catalog
            return StagedCommit(list(unique.values()), updates)

        def on_unknown(error: CommitStateUnknownError) -> None:
            assert resolver is not None and producer is not None
            self.lost_answers += 1
            resolver.after_unknown(error, producer.forget_attempt)

        interrupted_in_flight: list[bool] = []

        try:
            commit_with_retries(self.table, stage, producer.on_conflict if producer else None,
                                on_unknown if producer else None, lambda: interrupted_in_flight.append(True))
        except Landed as e:
            self.outcome = Outcome.LANDED
            return e.snapshot
        except AlreadyApplied as e:
            self.outcome = Outcome.LANDED
            if producer is not None:
                producer.cleanup()
            self.applied_before = e.snapshot
            return e.snapshot
        except CommitStateUnknownError:
            self.outcome = Outcome.UNKNOWN
            raise  # the commit may have landed: keep every file
        except BaseException as e:
            if interrupted_in_flight:
                self.outcome = Outcome.UNKNOWN
                raise  # interrupted with a request in flight: it may land, so keep every file
            # Known not to have landed, unless an attempt whose answer was lost still may.
            if resolver is not None and resolver.may_still_land():
                self.outcome = Outcome.UNKNOWN
                raise resolver.unknown(f"sending it again failed ({type(e).__name__}: {e})") from e
            self.outcome = Outcome.NOT_LANDED
            if producer is not None:
                producer.cleanup()
            raise
        self.outcome = Outcome.LANDED
        return staged_snapshot[0] if staged_snapshot else None

    def abort(self) -> None:
        """Discard the changes and delete the files written for them."""
        if self._done:
            return
        self._done = True
        if self._snapshot is not None:
            self._snapshot.cleanup()

    def _check_open(self) -> None:
        if self._done:
            raise ValidationError("this transaction was committed or aborted already; start a new one")

    def require_no_metadata_changes(self, what: str) -> None:
        """Refuse ``what`` (an operation that reads the table's current rows and schema, not the
        staged ones) once the transaction holds a schema, spec or property change."""
        if self._changes:
            raise ValidationError(f"{what} must come before the schema, spec or property changes of a transaction")


def commit_snapshot(producer: SnapshotProducer, commit_id: str | CommitIdentity | None = None) -> Snapshot:
    """Commit one snapshot producer alone (a transaction of one change)."""
    snapshot = Transaction(producer.table, commit_id).add_snapshot(producer).commit_transaction()
    assert snapshot is not None
    return snapshot
