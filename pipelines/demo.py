"""`make demo`: the whole pipeline on embedded defaults (local Spark, SQLite catalog, local
warehouse), then a summary. It lands the files and lets the code location's sensors and
automation conditions run everything (``pipelines.drive``), in-process. Exits non-zero if a run
or a Great Expectations check fails.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table as RichTable

from pipelines.defs.erasure.assets import ERASURE_KEY
from pipelines.drive import PipelineRun, drive
from pipelines.settings import CATALOG, DATABASE
from tablestore.catalog_manager import CatalogManager

console = Console()
SUMMARY_TABLES = ("events", "customers", "erasure_requests", "erasure_audit", "landing_events")


def summary(run: PipelineRun) -> None:
    manager = CatalogManager(run.settings.tablestore)
    catalog = manager.catalog(CATALOG)

    tables = RichTable(title="tables in lakehouse.shop")
    for column in ("table", "rows", "snapshots", "schema versions", "current schema"):
        tables.add_column(column)
    for name in SUMMARY_TABLES:
        if not catalog.table_exists((DATABASE, name)):
            continue
        table = catalog.load_table((DATABASE, name))
        rows = table.scan().to_arrow().num_rows
        columns = ", ".join(f"{f.name} {f.field_type}" for f in table.schema().fields)
        tables.add_row(name, str(rows), str(len(table.snapshots())), str(len(table.metadata.schemas)), columns)
    console.print(tables)

    events = catalog.load_table((DATABASE, "events"))
    specs = RichTable(title="lakehouse.shop.events: partitions per spec")
    for column in ("spec", "fields", "partitions", "data files", "rows"):
        specs.add_column(column)
    files = events.inspect.data_files().to_pylist()
    for spec_id, spec in sorted(events.specs().items()):
        mine = [f for f in files if f["spec_id"] == spec_id]
        partitions = {tuple(sorted((f["partition"] or {}).items(), key=lambda kv: kv[0])) for f in mine}
        specs.add_row(str(spec_id), ", ".join(f"{f.name}={f.transform}" for f in spec.fields), str(len(partitions)),
                      str(len(mine)), str(sum(f["record_count"] for f in mine)))
    console.print(specs)

    schemas = RichTable(title="lakehouse.shop.events: schema versions")
    schemas.add_column("schema id")
    schemas.add_column("columns")
    for schema in events.metadata.schemas:
        schemas.add_row(str(schema.schema_id), ", ".join(f"{f.name} {f.field_type}" for f in schema.fields))
    console.print(schemas)

    checks = RichTable(title="Great Expectations checks")
    for column in ("asset", "check", "result", "detail"):
        checks.add_column(column)
    for c in run.checks:
        failed = c.metadata.get("failed") or []
        checks.add_row(c.asset, c.name, "[green]passed[/]" if c.passed else "[red]FAILED[/]",
                       c.description + (f"; failed: {failed}" if failed else ""))
    console.print(checks)

    erasure = run.metadata(ERASURE_KEY)
    report = RichTable(title="erasure report")
    report.add_column("item")
    report.add_column("value")
    for key, value in erasure.items():
        report.add_row(key, str(value))
    if catalog.table_exists((DATABASE, "erasure_audit")):
        for row in catalog.load_table((DATABASE, "erasure_audit")).scan().to_arrow().to_pylist():
            report.add_row("audit record", f"{row['request_id']}: rows removed {row['rows_removed']}, files "
                           f"rewritten {row['files_rewritten']}, files removed {row['files_removed']}, "
                           f"verified {row['verified']}")
    console.print(report)
    manager.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.demo", description=__doc__)
    parser.add_argument("--root", default="warehouse/demo", help="where the demo keeps its catalog, data and landing")
    parser.add_argument("--keep", action="store_true", help="keep what an earlier demo left in --root")
    args = parser.parse_args(argv)
    root = Path(args.root).absolute()
    if root.exists() and not args.keep:
        shutil.rmtree(root)
    # GX logs each data source and suite it adds; the summary below is what to read.
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    started = time.monotonic()
    run = drive(root=str(root), log=lambda line: console.print(line), log_level="WARNING")
    elapsed = time.monotonic() - started
    summary(run)
    failed_steps = [s for s in run.steps if not s.success]
    failed_checks = [c for c in run.checks if not c.passed]
    if failed_steps or failed_checks:
        for s in failed_steps:
            console.print(f"[red]step failed:[/] {s.label}: {s.error}")
        for c in failed_checks:
            console.print(f"[red]check failed:[/] {c.asset} {c.name}")
        return 1
    console.print(f"[green]demo passed[/]: {len(run.steps)} runs, {len(run.checks)} checks, {elapsed:.0f} s; "
                  f"data in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
