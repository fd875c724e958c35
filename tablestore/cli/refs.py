"""`tablestore table refs|branch|tag|rollback|fast-forward NAME ...`: branches and tags.

    tablestore table refs db.t
    tablestore table branch db.t audit [--snapshot-id N] [--replace | --drop] [--max-ref-age-ms MS]
                                       [--min-snapshots-to-keep N] [--max-snapshot-age-ms MS]
    tablestore table tag db.t v1 [--snapshot-id N] [--replace | --drop] [--max-ref-age-ms MS]
    tablestore table rollback db.t (--snapshot-id N | --timestamp ISO) [--branch B]
    tablestore table fast-forward db.t main --to audit

Each change is one commit with the semantics of the SQL statements (``ALTER TABLE ... CREATE
BRANCH``, the ``rollback_to_snapshot`` and ``fast_forward`` procedures); ``branch`` and ``tag``
print the ref as the ``refs`` metadata table shows it.
"""

from __future__ import annotations

import argparse

from tablestore.catalog_manager import CatalogManager
from tablestore.cli.output import print_result
from tablestore.config import load_config
from tablestore.errors import ValidationError
from tablestore.sql.parse.refs import BRANCH, TAG
from tablestore.sql.parse.statements import CreateRef, DropRef
from tablestore.sql.result import StatementResult
from tablestore.sql.run.refs import apply_create_ref, apply_drop_ref
from tablestore.table import Table


def run_refs(args: argparse.Namespace) -> int:
    manager = CatalogManager(load_config(args.config))
    catalog, identifier = manager.resolve_table(tuple(args.name.split(".")))
    table = catalog.load_table(identifier)
    if args.action == "refs":
        result = StatementResult.from_arrow(table.inspect.refs())
    elif args.action in ("branch", "tag"):
        result = _branch_or_tag(table, args, BRANCH if args.action == "branch" else TAG)
    elif args.action == "rollback":
        result = _rollback(table, args)
    else:
        result = _fast_forward(table, args)
    print_result(result, args.format)
    return 0


def _ref_row(table: Table, name: str) -> StatementResult:
    refs = table.refresh().inspect.refs()
    return StatementResult.from_arrow(refs.filter([n == name for n in refs["name"].to_pylist()]))


def _branch_or_tag(table: Table, args: argparse.Namespace, kind: str) -> StatementResult:
    if not args.ref:
        raise ValidationError(f"name the {kind}: tablestore table {kind} {args.name} NAME")
    if args.drop:
        if args.replace or args.snapshot_id is not None:
            raise ValidationError("--drop takes no --replace or --snapshot-id")
        apply_drop_ref(table, DropRef("", tuple(table.identifier), kind, args.ref))
        return StatementResult(["name", "type", "dropped"], [[args.ref, kind.upper(), True]])
    if kind == TAG and (args.min_snapshots_to_keep is not None or args.max_snapshot_age_ms is not None):
        raise ValidationError("a tag keeps no snapshots of its own: --min-snapshots-to-keep and "
                              "--max-snapshot-age-ms are for branches")
    apply_create_ref(table, CreateRef(
        "", tuple(table.identifier), kind, args.ref, create=True, replace=args.replace,
        snapshot_id=args.snapshot_id, max_ref_age_ms=args.max_ref_age_ms,
        min_snapshots_to_keep=args.min_snapshots_to_keep, max_snapshot_age_ms=args.max_snapshot_age_ms,
    ))
    return _ref_row(table, args.ref)


def _head(table: Table, branch: str) -> int | None:
    ref = table.refresh().metadata.refs.get(branch)
    return ref.snapshot_id if ref is not None else None


def _rollback(table: Table, args: argparse.Namespace) -> StatementResult:
    if (args.snapshot_id is None) == (args.timestamp is None):
        raise ValidationError("rollback takes --snapshot-id or --timestamp, exactly one")
    previous = _head(table, args.branch)
    ms = table.manage_snapshots()
    if args.snapshot_id is not None:
        ms.rollback_to_snapshot(args.snapshot_id, args.branch)
    else:
        ms.rollback_to_timestamp(args.timestamp, args.branch)
    ms.commit()
    return StatementResult(["previous_snapshot_id", "current_snapshot_id"], [[previous, _head(table, args.branch)]])


def _fast_forward(table: Table, args: argparse.Namespace) -> StatementResult:
    if not args.ref or not args.to:
        raise ValidationError(f"fast-forward takes the branch and --to: tablestore table fast-forward {args.name} "
                              "main --to audit")
    previous = _head(table, args.ref)
    table.manage_snapshots().fast_forward(args.ref, args.to).commit()
    return StatementResult(["branch_updated", "previous_ref", "updated_ref"],
                           [[args.ref, previous, _head(table, args.ref)]])
