"""Scan planning of a table with many files in many partitions (issue 5).

The table: ``(id bigint, ts timestamp, region string, value double)`` partitioned by
``day(ts), region``: 100 days x 100 regions = 10,000 partitions with 10 files each, 100,000
data files at 10M ``--rows`` (scaled down with ``--rows``: one file per 100 rows). Planning
opens no data file, so the files are synthetic: DataFile entries with partition values, row
counts and column bounds, committed with ``Table.append_files`` in 10 appends of 10 days each
(10 manifests, as a table loaded day by day has).

Cases:
- one day: ``ts`` within one day: 100 partitions, 1% of the files; the manifests' partition
  summaries rule out 9 of 10 manifests;
- one region: ``region = 'r042'``: 100 partitions, 1% of the files, in every manifest.

Contestants (each loads the table from scratch every round):
- floor: fastavro decodes every manifest of the snapshot and the entries are filtered on their
  partition values in Python (no pruning, no metrics);
- tablestore: ``catalog.load_table(...).scan(filter=...).plan_files()``;
- tablestore-served: the same through a ``rest`` catalog on ``tablestore catalog serve`` (a
  process of its own, over the same SQLite catalog), which plans on the service
  (``POST …/plan``): the client loads the table, sends the filter and parses the file scan tasks;
- pyiceberg: ``StaticTable.from_metadata(<our metadata>).scan(row_filter=...).plan_files()``;
- pyiceberg-served: pyiceberg's ``RestCatalog`` with ``scan-planning-mode=server`` on the same
  service (reported, no target).

Targets: tablestore at least 5x faster than pyiceberg; tablestore-served at least 2x (a served
plan in less than half the time pyiceberg takes to plan it itself).
"""

from __future__ import annotations

import datetime
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.common import DEFAULT_ROWS, Benchmark, Case, Contestant, Workspace, serve_catalog, tablestore_catalog

DAYS = 100
REGIONS = 100
FILES_PER_APPEND_DAYS = 10
START = datetime.date(2024, 1, 1)
EPOCH = datetime.date(1970, 1, 1)
MICROS_PER_DAY = 86_400_000_000
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us")), ("region", pa.string()), ("value", pa.float64())])
TABLE = "bench.planned"
DAY = 42
REGION = 42
SERVED = "bench"  # the name the SQLite catalog rows carry (tablestore_catalog names it so)
TOKEN = "bench-planning-token-0123456789"


def files_for(rows: int) -> int:
    """100,000 files at the default 10M rows; fewer for smaller runs (at least one per partition)."""
    return max(DAYS * REGIONS, 100_000 * rows // DEFAULT_ROWS)


def build_table(ws: Workspace) -> tuple[Any, int]:
    """The table of synthetic files; returns it and its file count."""
    from tablestore.spec.manifests.manifest import DataFile, DataFileContent, FileFormat
    from tablestore.spec.schemas import conversions
    from tablestore.spec.schemas.types import DoubleType, LongType, StringType, TimestampType

    directory = ws.fresh("partition_plan")
    catalog = tablestore_catalog(directory)
    catalog.create_namespace("bench")
    table = catalog.create_table(TABLE, schema=SCHEMA, partition_by=["day(ts)", "region"])
    per_partition = files_for(ws.rows) // (DAYS * REGIONS)
    start_day = (START - EPOCH).days
    long_t, ts_t, str_t, dbl_t = LongType(), TimestampType(), StringType(), DoubleType()
    next_id = 0
    total = 0
    for first in range(0, DAYS, FILES_PER_APPEND_DAYS):
        files = []
        for day in range(first, first + FILES_PER_APPEND_DAYS):
            day_us = (start_day + day) * MICROS_PER_DAY
            for region in range(REGIONS):
                name = f"r{region:03d}"
                for n in range(per_partition):
                    rows = 1_000
                    files.append(DataFile(
                        content=DataFileContent.DATA,
                        file_path=f"{table.location}/data/ts_day={START + datetime.timedelta(days=day)}/"
                                  f"region={name}/{n:05d}-synthetic.parquet",
                        file_format=FileFormat.PARQUET,
                        partition=(start_day + day, name),
                        record_count=rows,
                        file_size_in_bytes=64_000,
                        column_sizes={1: 8_000, 2: 8_000, 3: 2_000, 4: 8_000},
                        value_counts={1: rows, 2: rows, 3: rows, 4: rows},
                        null_value_counts={1: 0, 2: 0, 3: 0, 4: 0},
                        nan_value_counts={4: 0},
                        lower_bounds={1: conversions.to_bytes(long_t, next_id),
                                      2: conversions.to_bytes(ts_t, day_us),
                                      3: conversions.to_bytes(str_t, name),
                                      4: conversions.to_bytes(dbl_t, 0.0)},
                        upper_bounds={1: conversions.to_bytes(long_t, next_id + rows - 1),
                                      2: conversions.to_bytes(ts_t, day_us + MICROS_PER_DAY - 1),
                                      3: conversions.to_bytes(str_t, name),
                                      4: conversions.to_bytes(dbl_t, 1.0)},
                        split_offsets=[4],
                    ))
                    next_id += rows
        table.append_files(files)
        total += len(files)
    return catalog.load_table(TABLE), total


def start_service(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``tablestore catalog serve`` over the benchmark's SQLite catalog, in its own process."""
    return serve_catalog(directory, {"name": SERVED, "type": "sql", "uri": f"sqlite:///{directory}/catalog.db",
                                     "warehouse": str(directory / "wh")}, TOKEN, "read")


def build(ws: Workspace, rounds: int | None = None) -> Benchmark:
    import fastavro
    from pyiceberg.expressions import And, BooleanExpression, EqualTo, GreaterThanOrEqual, LessThan
    from pyiceberg.table import StaticTable

    table, total = build_table(ws)
    catalog = tablestore_catalog(ws.root / "partition_plan")
    metadata_location = table.metadata_location
    manifest_list = table.current_snapshot().manifest_list
    day = START + datetime.timedelta(days=DAY)
    next_day = day + datetime.timedelta(days=1)
    region = f"r{REGION:03d}"
    start_day = (START - EPOCH).days

    def floor(keep: Callable[[dict[str, Any]], bool]) -> int:
        with open(_local(manifest_list), "rb") as f:
            listed: list[Any] = list(fastavro.reader(f))
        count = 0
        for path in [m["manifest_path"] for m in listed]:
            with open(_local(path), "rb") as f:
                entries: list[Any] = list(fastavro.reader(f))
            count += sum(1 for e in entries if e["status"] != 2 and keep(e["data_file"]["partition"]))
        return count

    def ours(sql: str) -> int:
        return len(catalog.load_table(TABLE).scan(filter=sql).plan_files())

    from pyiceberg.catalog.rest import RestCatalog as PyRestCatalog

    import tablestore

    service, uri = start_service(ws.root / "partition_plan")
    served = tablestore.load_catalog("served", type="rest", uri=uri, token=TOKEN)
    py_served = PyRestCatalog("served", uri=uri, token=TOKEN, **{"scan-planning-mode": "server"})
    if served.scan_planner(tuple(TABLE.split("."))) is None or not py_served.supports_server_side_planning():
        service.kill()
        raise RuntimeError("the catalog service does not advertise scan planning")

    def ours_served(sql: str) -> int:
        return len(served.load_table(TABLE).scan(filter=sql).plan_files())

    def theirs_served(expression: BooleanExpression) -> int:
        return len(list(py_served.load_table(TABLE).scan(row_filter=expression).plan_files()))

    def stop_service() -> None:
        served.close()
        service.terminate()
        service.wait(timeout=30)

    def theirs(expression: BooleanExpression) -> int:
        return len(list(StaticTable.from_metadata(metadata_location).scan(row_filter=expression).plan_files()))

    cases_spec: list[tuple[str, str, BooleanExpression, Callable[[dict[str, Any]], bool]]] = [
        (
            "one day",
            f"ts >= TIMESTAMP '{day} 00:00:00' AND ts < TIMESTAMP '{next_day} 00:00:00'",
            And(GreaterThanOrEqual("ts", f"{day}T00:00:00"), LessThan("ts", f"{next_day}T00:00:00")),
            lambda p: _days(p["ts_day"]) == start_day + DAY,
        ),
        (
            "one region",
            f"region = '{region}'",
            EqualTo("region", region),
            lambda p: p["region"] == region,
        ),
    ]
    cases = []
    for name, sql, expression, keep in cases_spec:
        def bind_floor(k: Callable[[dict[str, Any]], bool] = keep) -> int:
            return floor(k)

        def bind_ours(s: str = sql) -> int:
            return ours(s)

        def bind_theirs(e: BooleanExpression = expression) -> int:
            return theirs(e)

        def bind_ours_served(s: str = sql) -> int:
            return ours_served(s)

        def bind_theirs_served(e: BooleanExpression = expression) -> int:
            return theirs_served(e)

        cases.append(Case(
            name,
            [
                Contestant("fastavro", bind_floor, floor=True),
                Contestant("tablestore", bind_ours),
                Contestant("tablestore-served", bind_ours_served, targets={"pyiceberg": 2.0}),
                Contestant("pyiceberg", bind_theirs),
                Contestant("pyiceberg-served", bind_theirs_served),
            ],
            rounds=rounds or 3,
            targets={"pyiceberg": 5.0},
        ))
    return Benchmark(
        "partition_plan",
        f"partition_plan: planning a filtered scan of {total:,} files in {DAYS * REGIONS:,} partitions "
        f"(10 manifests); 'rows' are planned files",
        cases,
        notes=[
            "floor: fastavro decodes every manifest and filters the entries on their partition in Python",
            "tablestore: catalog.load_table + scan(filter).plan_files(); pyiceberg: StaticTable.from_metadata + "
            "scan(row_filter).plan_files(); both load the table every round",
            "-served: a rest catalog on `tablestore catalog serve` (its own process, counted in cpu s) plans "
            "on the service (POST .../plan); the client loads the table and parses the file scan tasks",
            "rows/s divides the --rows figure, not the files: compare the seconds and ratios",
        ],
        cleanup=stop_service,
    )


def _local(location: str) -> str:
    """A local path of a location; tablestore records local files as file:// URIs."""
    return location.removeprefix("file://")


def _days(value: Any) -> int:
    """fastavro decodes a date partition value as datetime.date."""
    return (value - EPOCH).days if isinstance(value, datetime.date) else int(value)
