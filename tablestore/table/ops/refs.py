"""Snapshot references: branches and tags made, moved and removed, committed once.

    >>> import pyarrow as pa, tablestore, tempfile
    >>> wh = tempfile.mkdtemp()
    >>> catalog = tablestore.load_catalog("local", type="sql", uri=f"sqlite:///{wh}/c.db", warehouse=wh)
    >>> catalog.create_namespace("db")
    >>> table = catalog.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
    >>> first = table.append(pa.table({"id": [1]}))
    >>> _ = table.append(pa.table({"id": [2]}))
    >>> with table.manage_snapshots() as ms:
    ...     _ = ms.create_tag(first.snapshot_id, "v1").create_branch(first.snapshot_id, "audit")
    >>> sorted(table.refs()), table.scan(ref="v1").to_arrow().num_rows
    (['audit', 'main', 'v1'], 1)

:class:`ManageSnapshots` follows Java's ``ManageSnapshots`` (and pyiceberg's method names): every
operation is checked when it is called, against the table as the operations before it leave
it, and refuses what Iceberg refuses with nothing committed. ``commit()`` makes one catalog
commit of ``set-snapshot-ref`` and ``remove-snapshot-ref`` updates, each touched ref guarded by
an ``assert-ref-snapshot-id`` requirement; on a lost race the operations are replayed on the
refreshed table and checked again.

A cherry-pick adds a snapshot, so it goes through :mod:`tablestore.table.update.cherrypick`
and is committed on its own (``table.manage_snapshots().cherrypick(id).commit()``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Self

from tablestore.errors import NoSuchSnapshotError, ValidationError
from tablestore.option_values import PointInTime, epoch_ms
from tablestore.spec.metadata.table_metadata import MAIN_BRANCH, SnapshotRef, TableMetadata
from tablestore.spec.metadata.update_models import (
    AssertRefSnapshotId,
    AssertTableUUID,
    RemoveSnapshotRefUpdate,
    SetSnapshotRefUpdate,
    TableRequirement,
    TableUpdate,
)
from tablestore.table.update.retry import StagedCommit

if TYPE_CHECKING:
    from tablestore.table import Table
    from tablestore.table.ops.cherrypick import CherryPick
    from tablestore.table.update.transaction import Transaction

BRANCH = "branch"
TAG = "tag"


@dataclass
class RefState:
    """The refs as the operations so far leave them, over one table state."""

    metadata: TableMetadata
    refs: dict[str, SnapshotRef]
    #: Refs whose position an operation depended on without changing them (the source of a
    #: fast-forward): the commit requires them unmoved, so a stale read is retried, not applied.
    read: set[str] = field(default_factory=set)

    def ref(self, name: str) -> SnapshotRef | None:
        self.read.add(name)
        return self.refs.get(name)

    def require_snapshot(self, snapshot_id: int, what: str) -> None:
        if self.metadata.snapshot_by_id(snapshot_id) is None:
            raise NoSuchSnapshotError(
                f"cannot {what}: the table has no snapshot {snapshot_id} (it may have been expired)"
            )

    def require_ref(self, name: str, kind: str, what: str) -> SnapshotRef:
        ref = self.refs.get(name)
        if ref is None:
            raise ValidationError(f"cannot {what}: the table has no {kind} {name!r}")
        if ref.type != kind:
            raise ValidationError(f"cannot {what}: {name!r} is a {ref.type}, not a {kind}")
        return ref

    def require_free(self, name: str, what: str) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValidationError(f"cannot {what}: a branch or tag needs a non-empty name")
        existing = self.refs.get(name)
        if existing is not None:
            raise ValidationError(
                f"cannot {what}: a {existing.type} named {name!r} already exists; "
                f"replace it or choose another name"
            )

    def is_ancestor(self, ancestor_id: int, of_id: int | None) -> bool:
        return any(s.snapshot_id == ancestor_id for s in self.metadata.ancestors_of(of_id))

    def head(self, branch: str) -> int | None:
        ref = self.ref(branch)
        return ref.snapshot_id if ref is not None else None


Operation = Callable[[RefState], None]


def _positive(value: int | None, what: str) -> int | None:
    if value is not None and (not isinstance(value, int) or value <= 0):
        raise ValidationError(f"{what} must be a positive whole number, not {value!r}")
    return value


class ManageSnapshots:
    """Create, replace and remove branches and tags; roll back; fast-forward; cherry-pick."""

    def __init__(self, table: Table, transaction: Transaction | None = None) -> None:
        self.table = table
        self._transaction = transaction
        self._operations: list[Operation] = []
        base = transaction.metadata if transaction is not None else table.metadata
        self._state = RefState(base, dict(base.refs))
        self._cherrypick: CherryPick | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.commit()

    def _add(self, operation: Operation) -> Self:
        if self._cherrypick is not None:
            raise ValidationError("a cherry-pick is committed on its own; commit it, then change refs")
        operation(self._state)  # refuses now, with nothing committed
        self._operations.append(operation)
        return self

    # -- branches and tags ---------------------------------------------------------------------
    def create_branch(self, snapshot_id: int | None, branch_name: str, max_ref_age_ms: int | None = None,
                      max_snapshot_age_ms: int | None = None, min_snapshots_to_keep: int | None = None) -> Self:
        """A new branch at ``snapshot_id`` (None: an empty branch is not supported; main's
        current snapshot is used)."""
        ref = SnapshotRef(0, BRANCH, _positive(min_snapshots_to_keep, "min-snapshots-to-keep"),
                          _positive(max_snapshot_age_ms, "max-snapshot-age-ms"),
                          _positive(max_ref_age_ms, "max-ref-age-ms"))

        def create(state: RefState) -> None:
            what = f"create branch {branch_name!r}"
            state.require_free(branch_name, what)
            target = snapshot_id if snapshot_id is not None else state.head(MAIN_BRANCH)
            if target is None:
                raise ValidationError(f"cannot {what}: the table has no snapshot yet; write to it first")
            state.require_snapshot(target, what)
            state.refs[branch_name] = replace(ref, snapshot_id=target)

        return self._add(create)

    def create_tag(self, snapshot_id: int | None, tag_name: str, max_ref_age_ms: int | None = None) -> Self:
        """A new tag at ``snapshot_id`` (None: main's current snapshot)."""
        age = _positive(max_ref_age_ms, "max-ref-age-ms")

        def create(state: RefState) -> None:
            what = f"create tag {tag_name!r}"
            state.require_free(tag_name, what)
            target = snapshot_id if snapshot_id is not None else state.head(MAIN_BRANCH)
            if target is None:
                raise ValidationError(f"cannot {what}: the table has no snapshot yet; write to it first")
            state.require_snapshot(target, what)
            state.refs[tag_name] = SnapshotRef(target, TAG, max_ref_age_ms=age)

        return self._add(create)

    def replace_branch(self, branch_name: str, snapshot_id: int) -> Self:
        """Point an existing branch at any snapshot (not necessarily a descendant), keeping its retention."""
        def move(state: RefState) -> None:
            what = f"replace branch {branch_name!r}"
            ref = state.require_ref(branch_name, BRANCH, what)
            state.require_snapshot(snapshot_id, what)
            state.refs[branch_name] = replace(ref, snapshot_id=snapshot_id)

        return self._add(move)

    def replace_tag(self, tag_name: str, snapshot_id: int) -> Self:
        def move(state: RefState) -> None:
            what = f"replace tag {tag_name!r}"
            ref = state.require_ref(tag_name, TAG, what)
            state.require_snapshot(snapshot_id, what)
            state.refs[tag_name] = replace(ref, snapshot_id=snapshot_id)

        return self._add(move)

    def remove_branch(self, branch_name: str) -> Self:
        def remove(state: RefState) -> None:
            what = f"remove branch {branch_name!r}"
            if branch_name == MAIN_BRANCH:
                raise ValidationError(f"cannot {what}: main is the table's current state and cannot be removed")
            state.require_ref(branch_name, BRANCH, what)
            del state.refs[branch_name]

        return self._add(remove)

    def remove_tag(self, tag_name: str) -> Self:
        def remove(state: RefState) -> None:
            state.require_ref(tag_name, TAG, f"remove tag {tag_name!r}")
            del state.refs[tag_name]

        return self._add(remove)

    def rename_branch(self, name: str, new_name: str) -> Self:
        def rename(state: RefState) -> None:
            what = f"rename branch {name!r} to {new_name!r}"
            if name == MAIN_BRANCH:
                raise ValidationError(f"cannot {what}: main cannot be renamed")
            ref = state.require_ref(name, BRANCH, what)
            state.require_free(new_name, what)
            del state.refs[name]
            state.refs[new_name] = ref

        return self._add(rename)

    # -- retention -------------------------------------------------------------------------------
    def set_min_snapshots_to_keep(self, branch_name: str, count: int) -> Self:
        value = _positive(count, "min-snapshots-to-keep")

        def set_(state: RefState) -> None:
            ref = state.require_ref(branch_name, BRANCH, f"set min-snapshots-to-keep of {branch_name!r}")
            state.refs[branch_name] = replace(ref, min_snapshots_to_keep=value)

        return self._add(set_)

    def set_max_snapshot_age_ms(self, branch_name: str, age_ms: int) -> Self:
        value = _positive(age_ms, "max-snapshot-age-ms")

        def set_(state: RefState) -> None:
            ref = state.require_ref(branch_name, BRANCH, f"set max-snapshot-age-ms of {branch_name!r}")
            state.refs[branch_name] = replace(ref, max_snapshot_age_ms=value)

        return self._add(set_)

    def set_max_ref_age_ms(self, ref_name: str, age_ms: int) -> Self:
        value = _positive(age_ms, "max-ref-age-ms")

        def set_(state: RefState) -> None:
            ref = state.refs.get(ref_name)
            if ref is None:
                raise ValidationError(f"cannot set max-ref-age-ms of {ref_name!r}: no such branch or tag")
            state.refs[ref_name] = replace(ref, max_ref_age_ms=value)

        return self._add(set_)

    # -- moving a branch through history --------------------------------------------------------
    def set_current_snapshot(self, snapshot_id: int | None = None, ref_name: str | None = None,
                             branch: str = MAIN_BRANCH) -> Self:
        """Make any existing snapshot (or the head of ``ref_name``) the head of ``branch``."""
        if (snapshot_id is None) == (ref_name is None):
            raise ValidationError("set_current_snapshot takes a snapshot_id or a ref_name, exactly one")

        def set_(state: RefState) -> None:
            what = f"set the current snapshot of {branch!r}"
            target = snapshot_id
            if ref_name is not None:
                source = state.ref(ref_name)
                if source is None:
                    raise ValidationError(f"cannot {what}: the table has no branch or tag {ref_name!r}")
                target = source.snapshot_id
            assert target is not None
            state.require_snapshot(target, what)
            self._move_branch(state, branch, target, what)

        return self._add(set_)

    def rollback_to_snapshot(self, snapshot_id: int, branch: str = MAIN_BRANCH) -> Self:
        """Move ``branch`` back to ``snapshot_id``, which must be one of its ancestors."""
        def rollback(state: RefState) -> None:
            what = f"roll {branch!r} back to snapshot {snapshot_id}"
            state.require_snapshot(snapshot_id, what)
            head = state.head(branch)
            if not state.is_ancestor(snapshot_id, head):
                raise ValidationError(
                    f"cannot {what}: it is not an ancestor of the branch's head {head}; "
                    "use set_current_snapshot to move to a snapshot of another lineage"
                )
            self._move_branch(state, branch, snapshot_id, what)

        return self._add(rollback)

    def rollback_to_timestamp(self, timestamp: PointInTime, branch: str = MAIN_BRANCH) -> Self:
        """Move ``branch`` back to its newest ancestor older than ``timestamp`` (epoch ms, ISO
        string or datetime), as Java's ``rollbackToTime`` does."""
        timestamp_ms = epoch_ms(timestamp)

        def rollback(state: RefState) -> None:
            what = f"roll {branch!r} back to {timestamp_ms} ms"
            found = next((s for s in state.metadata.ancestors_of(state.head(branch))
                          if s.timestamp_ms < timestamp_ms), None)
            if found is None:
                raise ValidationError(f"cannot {what}: the branch has no snapshot older than that")
            self._move_branch(state, branch, found.snapshot_id, what)

        return self._add(rollback)

    def fast_forward(self, branch: str, to: str) -> Self:
        """Move ``branch`` to the head of ``to``, which must descend from it (a missing
        ``branch`` is created at ``to``'s head, as in Java)."""
        def forward(state: RefState) -> None:
            what = f"fast-forward {branch!r} to {to!r}"
            target_ref = state.ref(to)
            if target_ref is None:
                raise ValidationError(f"cannot {what}: the table has no branch or tag {to!r}")
            head = state.head(branch)
            if head is None and branch not in state.refs:
                state.refs[branch] = SnapshotRef(target_ref.snapshot_id, BRANCH)
                return
            if branch in state.refs and state.refs[branch].type != BRANCH:
                raise ValidationError(f"cannot {what}: {branch!r} is a tag, and tags do not move")
            if head is not None and not state.is_ancestor(head, target_ref.snapshot_id):
                raise ValidationError(
                    f"cannot {what}: {branch!r}'s head {head} is not an ancestor of {to!r}'s head "
                    f"{target_ref.snapshot_id}; the branches diverged (cherry-pick instead)"
                )
            self._move_branch(state, branch, target_ref.snapshot_id, what)

        return self._add(forward)

    @staticmethod
    def _move_branch(state: RefState, branch: str, snapshot_id: int, what: str) -> None:
        ref = state.refs.get(branch)
        if ref is None:
            if branch != MAIN_BRANCH:
                raise ValidationError(f"cannot {what}: the table has no branch {branch!r}")
            state.refs[branch] = SnapshotRef(snapshot_id, BRANCH)
            return
        if ref.type != BRANCH:
            raise ValidationError(f"cannot {what}: {branch!r} is a tag, and tags do not move")
        state.refs[branch] = replace(ref, snapshot_id=snapshot_id)

    # -- cherry-pick -----------------------------------------------------------------------------
    def cherrypick(self, snapshot_id: int, branch: str = MAIN_BRANCH) -> Self:
        """Apply the changes of ``snapshot_id`` (an append, a dynamic partition overwrite, or a
        staged WAP snapshot) to ``branch``: a fast-forward when the snapshot's parent is the
        branch's head, else a new snapshot with the same files."""
        from tablestore.table.ops.cherrypick import CherryPick

        if self._operations or self._cherrypick is not None:
            raise ValidationError("a cherry-pick is committed on its own; commit the ref changes first")
        self._cherrypick = CherryPick(self.table, snapshot_id, branch)
        return self

    # -- the commit ------------------------------------------------------------------------------
    def stage(self, base: TableMetadata) -> StagedCommit:
        """The updates and requirements that make the operations on ``base``."""
        state = RefState(base, dict(base.refs))
        for operation in self._operations:
            operation(state)
        requirements: list[TableRequirement] = [AssertTableUUID(uuid=base.table_uuid)]
        updates: list[TableUpdate] = []
        for name in sorted(set(base.refs) | set(state.refs) | state.read):
            before, after = base.refs.get(name), state.refs.get(name)
            if before == after:
                if name in state.read:
                    requirements.append(
                        AssertRefSnapshotId(ref=name, snapshot_id=before.snapshot_id if before else None))
                continue
            requirements.append(AssertRefSnapshotId(ref=name, snapshot_id=before.snapshot_id if before else None))
            if after is None:
                updates.append(RemoveSnapshotRefUpdate(ref_name=name))
            else:
                updates.append(SetSnapshotRefUpdate(
                    ref_name=name, snapshot_id=after.snapshot_id, type=after.type, max_ref_age_ms=after.max_ref_age_ms,
                    max_snapshot_age_ms=after.max_snapshot_age_ms, min_snapshots_to_keep=after.min_snapshots_to_keep,
                ))
        return StagedCommit(requirements, updates)

    def commit(self) -> None:
        """Commit every operation at once (into the transaction, when made from one)."""
        from tablestore.table.update.transaction import ComputedChange, Transaction

        if self._cherrypick is not None:
            pick = self._cherrypick
            if self._transaction is not None:
                raise ValidationError("a cherry-pick commits on its own, not inside a transaction")
            if pick.is_fast_forward(self.table.metadata):
                Transaction(self.table).add_change(ComputedChange(pick.stage_fast_forward)).commit_transaction()
            else:
                Transaction(pick.table).add_snapshot(pick.producer()).commit_transaction()
            return
        if not self._operations:
            return
        change = ComputedChange(self.stage)
        if self._transaction is not None:
            self._transaction.add_change(change)
            return
        Transaction(self.table).add_change(change).commit_transaction()
