"""Execution of branching and tagging DDL (``ALTER TABLE ... CREATE|REPLACE|DROP BRANCH|TAG``).

Each statement is one ``table.manage_snapshots()`` commit, with the semantics of Iceberg's
``CreateOrReplaceBranchExec``, ``CreateOrReplaceTagExec``, ``DropBranchExec`` and ``DropTagExec``:

- ``CREATE`` refuses a name that exists, unless ``IF NOT EXISTS`` (then nothing happens);
- ``REPLACE`` moves an existing ref (refused when there is none), ``CREATE OR REPLACE`` creates
  or moves it;
- without ``AS OF VERSION`` the ref points at main's current snapshot;
- the retention clauses set the ref's ``max-ref-age-ms``, ``min-snapshots-to-keep`` and
  ``max-snapshot-age-ms``; a replaced ref keeps those it is not given;
- ``DROP`` refuses a missing ref unless ``IF EXISTS``, and a ref of the other kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tablestore.errors import ValidationError
from tablestore.sql.parse.refs import BRANCH
from tablestore.sql.parse.statements import CreateRef, DropRef
from tablestore.sql.result import StatementResult

if TYPE_CHECKING:
    from tablestore.sql.context import SessionContext
    from tablestore.table import Table


def create_ref(context: SessionContext, s: CreateRef) -> StatementResult:
    apply_create_ref(context.table(s.name), s)
    return StatementResult()


def drop_ref(context: SessionContext, s: DropRef) -> StatementResult:
    apply_drop_ref(context.table(s.name), s)
    return StatementResult()


def apply_create_ref(table: Table, s: CreateRef) -> None:
    """Create or replace the ref ``s`` describes on ``table`` (the command line's too)."""
    table.refresh()
    exists = s.ref in table.metadata.refs
    if exists and s.create and not s.replace and s.if_not_exists:
        return
    snapshot_id = s.snapshot_id
    if snapshot_id is None:
        head = table.metadata.branch_head("main")
        snapshot_id = head.snapshot_id if head is not None else None
    ms = table.manage_snapshots()
    if s.create and not (s.replace and exists):
        if s.kind == BRANCH:
            ms.create_branch(snapshot_id, s.ref, s.max_ref_age_ms, s.max_snapshot_age_ms, s.min_snapshots_to_keep)
        else:
            ms.create_tag(snapshot_id, s.ref, s.max_ref_age_ms)
    else:
        if snapshot_id is None:
            raise ValidationError(f"cannot replace {s.kind} {s.ref!r} of {table.name}: main has no snapshot")
        if s.kind == BRANCH:
            ms.replace_branch(s.ref, snapshot_id)
            if s.min_snapshots_to_keep is not None:
                ms.set_min_snapshots_to_keep(s.ref, s.min_snapshots_to_keep)
            if s.max_snapshot_age_ms is not None:
                ms.set_max_snapshot_age_ms(s.ref, s.max_snapshot_age_ms)
        else:
            ms.replace_tag(s.ref, snapshot_id)
        if s.max_ref_age_ms is not None:
            ms.set_max_ref_age_ms(s.ref, s.max_ref_age_ms)
    ms.commit()


def apply_drop_ref(table: Table, s: DropRef) -> None:
    """Remove the ref ``s`` names from ``table`` (the command line's too)."""
    table.refresh()
    if s.ref not in table.metadata.refs and s.if_exists:
        return
    ms = table.manage_snapshots()
    if s.kind == BRANCH:
        ms.remove_branch(s.ref)
    else:
        ms.remove_tag(s.ref)
    ms.commit()
