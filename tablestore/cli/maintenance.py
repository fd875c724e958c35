"""`tablestore table expire-snapshots|remove-orphans|compact NAME` and `tablestore erase ...`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from tablestore.catalog_manager import CatalogManager
from tablestore.cli.output import print_result
from tablestore.config import load_config
from tablestore.errors import ValidationError
from tablestore.maintenance.erasure import erase
from tablestore.maintenance.expire import Progress as ProgressCallback
from tablestore.maintenance.expire import result_row
from tablestore.sql.result import StatementResult


@contextmanager
def _progress(enabled: bool) -> Iterator[ProgressCallback | None]:
    if not enabled:
        yield None
        return
    bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(file=sys.stderr), transient=False)
    tasks: dict[str, TaskID] = {}

    def update(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = bars.add_task(stage, total=total)
        bars.update(tasks[stage], completed=done, total=total)

    with bars:
        yield update


def _options(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValidationError(f"--option takes KEY=VALUE, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def run_maintenance(args: argparse.Namespace) -> int:
    manager = CatalogManager(load_config(args.config))
    catalog, identifier = manager.resolve_table(tuple(args.name.split(".")))
    table = catalog.load_table(identifier)
    m = table.maintenance()
    with _progress(sys.stderr.isatty() or getattr(args, "progress", False)) as progress:
        if args.action == "expire-snapshots":
            row = result_row(m.expire_snapshots(args.older_than, args.retain_last, progress=progress))
            result = StatementResult(list(row), [list(row.values())])
        elif args.action == "remove-orphans":
            orphans = m.remove_orphan_files(args.older_than, dry_run=args.dry_run, progress=progress)
            result = StatementResult(["orphan_file_location"], [[p] for p in orphans.orphan_file_locations])
        else:
            strategy = args.strategy or ("sort" if args.sort_order else "binpack")
            r = m.rewrite_data_files(strategy, args.sort_order, args.where, _options(args.option), progress)
            columns = ["rewritten_data_files_count", "added_data_files_count", "rewritten_bytes_count",
                       "failed_data_files_count", "removed_delete_files_count"]
            result = StatementResult(columns, [[getattr(r, c) for c in columns]])
    print_result(result, args.format)
    return 0


def run_erase(args: argparse.Namespace) -> int:
    manager = CatalogManager(load_config(args.config))
    catalog, _ = manager.resolve_table(tuple(args.table[0].split(".")))
    names = []
    for name in args.table:
        other, identifier = manager.resolve_table(tuple(name.split(".")))
        if other is not catalog and other.name != catalog.name:
            raise ValidationError("all --table arguments must be in one catalog")
        names.append(".".join(identifier))
    values = [v.strip() for v in args.values.split(",") if v.strip()] if args.values is not None else None
    values_from = None
    if args.values_from is not None:
        _, ident = manager.resolve_table(tuple(args.values_from.split(".")))
        values_from = ".".join(ident)
    with _progress(sys.stderr.isatty()) as progress:
        report = erase(catalog, names, args.column, args.request_id, values=values, values_from=values_from,
                       audit_table=args.audit_table, remove_refs=args.remove_refs, raise_on_residue=False,
                       progress=progress)
    columns = ["request_id", "tables", "rows_removed", "files_rewritten", "files_removed", "verified", "residue"]
    print_result(StatementResult(columns, [[
        report.request_id, ",".join(t.table for t in report.tables), report.rows_removed, report.files_rewritten,
        report.files_removed, report.verified, "; ".join(report.residue) or None,
    ]]), "table")
    if not report.verified:
        print(f"error: erasure {report.request_id} failed verification; residue: " + "; ".join(report.residue),
              file=sys.stderr)
        return 2
    return 0
