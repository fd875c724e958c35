"""Iceberg's snapshot management procedures: ``CALL cat.system.rollback_to_snapshot('db.t', 42)``.

Parameter names and result columns follow Iceberg's Spark procedures:

==========================  ====================================  =============================================
procedure                   parameters                            result columns
==========================  ====================================  =============================================
``rollback_to_snapshot``    table, snapshot_id                    previous_snapshot_id, current_snapshot_id
``rollback_to_timestamp``   table, timestamp                      previous_snapshot_id, current_snapshot_id
``set_current_snapshot``    table, snapshot_id | ref              previous_snapshot_id, current_snapshot_id
``cherrypick_snapshot``     table, snapshot_id                    source_snapshot_id, current_snapshot_id
``publish_changes``         table, wap_id                         source_snapshot_id, current_snapshot_id
``fast_forward``            table, branch, to                     branch_updated, previous_ref, updated_ref
``ancestors_of``            table[, snapshot_id]                  snapshot_id, timestamp
==========================  ====================================  =============================================

Each change is one ``table.manage_snapshots()`` commit of main (``fast_forward`` of the branch
it names); what the table core refuses is refused with its message and nothing committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tablestore.errors import NoSuchSnapshotError, ValidationError
from tablestore.spec.metadata.table_metadata import MAIN_BRANCH, WAP_ID_PROPERTY
from tablestore.sql.procedures.arguments import int_argument, table_argument, time_argument
from tablestore.sql.procedures.registry import Parameter, procedure
from tablestore.sql.result import StatementResult

if TYPE_CHECKING:
    from tablestore.catalog.base import Catalog
    from tablestore.table import Table
    from tablestore.table.ops.refs import ManageSnapshots


def _head(table: Table, branch: str = MAIN_BRANCH) -> int | None:
    ref = table.refresh().metadata.refs.get(branch)
    return ref.snapshot_id if ref is not None else None


def _required_int(args: dict[str, Any], name: str) -> int:
    value = int_argument(args.get(name), name)
    if value is None:
        raise ValidationError(f"{name} is required")
    return value


def _moved(table: Table, change: ManageSnapshots) -> StatementResult:
    """Commit ``change`` (which moves main); main's head before and after."""
    previous = _head(table)
    change.commit()
    return StatementResult(["previous_snapshot_id", "current_snapshot_id"], [[previous, _head(table)]])


@procedure("rollback_to_snapshot", Parameter("table", required=True), Parameter("snapshot_id", required=True),
           doc="Roll main back to snapshot_id, which must be one of its ancestors.")
def _rollback_to_snapshot(session: Any, catalog: Catalog, args: dict[str, Any]) -> StatementResult:
    table = table_argument(catalog, args)
    return _moved(table, table.manage_snapshots().rollback_to_snapshot(_required_int(args, "snapshot_id")))


@procedure("rollback_to_timestamp", Parameter("table", required=True), Parameter("timestamp", required=True),
           doc="Roll main back to its newest ancestor older than timestamp.")
def _rollback_to_timestamp(session: Any, catalog: Catalog, args: dict[str, Any]) -> StatementResult:
    table, timestamp = table_argument(catalog, args), time_argument(args.get("timestamp"), "timestamp")
    if timestamp is None:
        raise ValidationError("timestamp is required")
    return _moved(table, table.manage_snapshots().rollback_to_timestamp(timestamp))


@procedure("set_current_snapshot", Parameter("table", required=True), Parameter("snapshot_id"), Parameter("ref"),
           doc="Make any snapshot (or the head of ref) main's current snapshot; not only an ancestor.")
def _set_current_snapshot(session: Any, catalog: Catalog, args: dict[str, Any]) -> StatementResult:
    snapshot_id, ref = int_argument(args.get("snapshot_id"), "snapshot_id"), args.get("ref")
    if (snapshot_id is None) == (ref is None):
        raise ValidationError("set_current_snapshot: give either snapshot_id or ref, not both and not neither")
    if ref is not None and not isinstance(ref, str):
        raise ValidationError(f"ref must be a branch or tag name, got {ref!r}")
    table = table_argument(catalog, args)
    return _moved(table, table.manage_snapshots().set_current_snapshot(snapshot_id=snapshot_id, ref_name=ref))


def _picked(table: Table, snapshot_id: int) -> StatementResult:
    table.manage_snapshots().cherrypick(snapshot_id).commit()
    return StatementResult(["source_snapshot_id", "current_snapshot_id"], [[snapshot_id, _head(table)]])


@procedure("cherrypick_snapshot", Parameter("table", required=True), Parameter("snapshot_id", required=True),
           doc="Apply the changes of snapshot_id (an append or dynamic overwrite, or any fast-forward) to main.")
def _cherrypick_snapshot(session: Any, catalog: Catalog, args: dict[str, Any]) -> StatementResult:
    return _picked(table_argument(catalog, args), _required_int(args, "snapshot_id"))


@procedure("publish_changes", Parameter("table", required=True), Parameter("wap_id", required=True),
           doc="Cherry-pick the staged snapshot whose summary has wap.id = wap_id onto main.")
def _publish_changes(session: Any, catalog: Catalog, args: dict[str, Any]) -> StatementResult:
    wap_id = str(args["wap_id"])
    table = table_argument(catalog, args)
    staged = [s for s in table.snapshots() if s.summary.get(WAP_ID_PROPERTY) == wap_id]
    if not staged:
        raise ValidationError(f"cannot publish wap.id {wap_id!r}: table {table.name} has no snapshot staged with it")
    if len(staged) > 1:
        ids = ", ".join(str(s.snapshot_id) for s in staged)
        raise ValidationError(f"cannot publish wap.id {wap_id!r}: snapshots {ids} of {table.name} carry it; "
                              "cherry-pick them one by one (cherrypick_snapshot)")
    return _picked(table, staged[0].snapshot_id)


@procedure("fast_forward", Parameter("table", required=True), Parameter("branch", required=True),
           Parameter("to", required=True),
           doc="Move branch to the head of to, which must descend from it.")
def _fast_forward(session: Any, catalog: Catalog, args: dict[str, Any]) -> StatementResult:
    branch, to = args["branch"], args["to"]
    if not isinstance(branch, str) or not isinstance(to, str):
        raise ValidationError(f"branch and to must be branch or tag names, got {branch!r} and {to!r}")
    table = table_argument(catalog, args)
    previous = _head(table, branch)
    table.manage_snapshots().fast_forward(branch, to).commit()
    return StatementResult(["branch_updated", "previous_ref", "updated_ref"],
                           [[branch, previous, _head(table, branch)]])


@procedure("ancestors_of", Parameter("table", required=True), Parameter("snapshot_id"),
           doc="The snapshot (main's current one by default) and its ancestors, newest first.")
def _ancestors_of(session: Any, catalog: Catalog, args: dict[str, Any]) -> StatementResult:
    table = table_argument(catalog, args)
    snapshot_id = int_argument(args.get("snapshot_id"), "snapshot_id")
    if snapshot_id is None:
        current = table.current_snapshot()
        snapshot_id = current.snapshot_id if current is not None else None
    elif table.snapshot_by_id(snapshot_id) is None:
        raise NoSuchSnapshotError(f"table {table.name} has no snapshot {snapshot_id}")
    chain = list(table.metadata.ancestors_of(snapshot_id)) if snapshot_id is not None else []
    return StatementResult(["snapshot_id", "timestamp"], [[s.snapshot_id, s.timestamp_ms] for s in chain])
