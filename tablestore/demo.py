"""`make demo`: the table store on embedded defaults, no Docker and no network.

Creates a partitioned table in a SQLite catalog with a local warehouse, appends, overwrites a
partition, time-travels to the first snapshot and prints what it did. Exits non-zero if any
result differs from what it should be.
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import sys
from pathlib import Path

import pyarrow as pa
from rich.console import Console
from rich.table import Table as RichTable

import tablestore

console = Console()


def _events(start_id: int, day: datetime.date, countries: list[str], n: int) -> pa.Table:
    base = datetime.datetime(day.year, day.month, day.day, 8, 0)
    return pa.table({
        "event_id": pa.array(range(start_id, start_id + n), pa.int64()),
        "event_ts": pa.array([base + datetime.timedelta(minutes=7 * i) for i in range(n)], pa.timestamp("us")),
        "country": pa.array([countries[i % len(countries)] for i in range(n)]),
        "amount": pa.array([round(1.5 * i, 2) for i in range(n)], pa.float64()),
    })


def _show(title: str, table: pa.Table) -> None:
    view = RichTable(title=title)
    for name in table.column_names:
        view.add_column(name)
    for row in table.to_pylist()[:8]:
        view.add_row(*(str(v) for v in row.values()))
    console.print(view)


def run(workdir: Path) -> int:
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    catalog = tablestore.load_catalog(
        "local", type="sql", uri=f"sqlite:///{workdir.resolve()}/catalog.db",
        warehouse=str(workdir.resolve() / "warehouse"),
    )
    catalog.create_namespace("shop")
    schema = pa.schema([("event_id", pa.int64()), ("event_ts", pa.timestamp("us")),
                        ("country", pa.string()), ("amount", pa.float64())])
    table = catalog.create_table("shop.events", schema=schema, partition_by=["day(event_ts)", "country"])
    console.print(f"created [bold]shop.events[/] partitioned by {table.spec()}")

    day1, day2 = datetime.date(2026, 11, 1), datetime.date(2026, 11, 2)
    first = table.append(_events(1, day1, ["de", "fr"], 40))
    second = table.append(_events(41, day2, ["de", "fr", "nl"], 30))
    console.print(f"appended 40 rows (snapshot {first.snapshot_id}) and 30 rows (snapshot {second.snapshot_id})")

    replacement = _events(1000, day2, ["de"], 5)
    third = table.overwrite(replacement, filter="country = 'de' AND event_ts >= TIMESTAMP '2026-11-02 00:00:00'")
    console.print(f"overwrote day 2 / de with 5 rows (snapshot {third.snapshot_id}, "
                  f"{third.summary.get('deleted-records', '0')} rows replaced)")

    now = table.scan().to_arrow()
    then = table.scan(snapshot_id=first.snapshot_id).to_arrow()
    de_day2 = table.scan(filter="country = 'de' AND event_ts >= '2026-11-02'", columns=["event_id"]).to_arrow()
    _show("current: rows per country", now.group_by("country").aggregate([("event_id", "count")]).sort_by("country"))
    _show("time travel to the first snapshot",
          then.group_by("country").aggregate([("event_id", "count")]).sort_by("country"))

    history = RichTable(title="snapshots")
    for column in ("snapshot id", "operation", "added records", "total records"):
        history.add_column(column)
    for s in table.snapshots():
        history.add_row(str(s.snapshot_id), s.summary.get("operation", ""), s.summary.get("added-records", "0"),
                        s.summary.get("total-records", "?"))
    console.print(history)
    console.print(f"metadata: {table.metadata_location}")

    expected_total = 40 + 30 - 10 + 5  # day 2 had 10 rows for de
    checks = {
        "current row count": (now.num_rows, expected_total),
        "first snapshot row count": (then.num_rows, 40),
        "day-2 de rows are the replacement": (sorted(de_day2.column("event_id").to_pylist()), list(range(1000, 1005))),
        "snapshots": (len(table.snapshots()), 3),
    }
    failed = [name for name, (got, want) in checks.items() if got != want]
    for name, (got, want) in checks.items():
        mark = "[green]ok[/]" if got == want else f"[red]FAILED[/] (expected {want})"
        console.print(f"  {name}: {got} {mark}")
    if failed:
        console.print(f"[red]demo failed: {', '.join(failed)}[/]")
        return 1
    console.print("[green]demo passed[/]")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tablestore.demo", description=__doc__)
    parser.add_argument("--workdir", default="warehouse/demo", help="where the demo keeps its catalog and data")
    args = parser.parse_args(argv)
    try:
        return run(Path(args.workdir))
    except tablestore.TableStoreError as e:
        console.print(f"[red]error:[/] {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
