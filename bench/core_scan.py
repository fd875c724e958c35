"""Scans of the table core_append writes (the same files for every contestant).

Cases:
- full: every row and column;
- user_id 1%: ``user_id < P1`` where P1 is the 1st percentile of user_id. user_id is spread
  over every file and row group, so nothing can be pruned: every reader decodes user_id
  everywhere and the other columns of the ~1% matching rows;
- one day: ``event_ts`` within one of the 30 days (~3.3% of rows), which tablestore and
  pyiceberg prune to one file by partition; pyarrow skips the other files by their Parquet
  row-group statistics.

Contestants:
- floor: ``pyarrow.dataset.dataset(paths, format="parquet").to_table(filter=...)`` on the data
  files of the table (the list of paths is given, not discovered);
- tablestore: ``catalog.load_table(...).scan(filter=...).to_arrow()``;
- pyiceberg: ``StaticTable.from_metadata(<tablestore's metadata>).scan(row_filter=...).to_arrow()``.
"""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from bench.common import (
    START,
    TABLE_NAME,
    Benchmark,
    Case,
    Contestant,
    Workspace,
    shared_table,
    tablestore_catalog,
)


def _local(path: str) -> str:
    return path.removeprefix("file://")


def build(ws: Workspace, rounds: int | None = None) -> Benchmark:
    from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, GreaterThanOrEqual, LessThan
    from pyiceberg.table import StaticTable

    table = shared_table(ws)
    metadata_location = table.metadata_location
    paths = [_local(task.file.file_path) for task in table.scan().plan_files()]
    user_ids = ws.data.column("user_id").to_numpy()
    p1 = int(np.percentile(user_ids, 1))
    day = START + datetime.timedelta(days=15)
    next_day = day + datetime.timedelta(days=1)
    lo, hi = pa.scalar(day, pa.timestamp("us")), pa.scalar(next_day, pa.timestamp("us"))

    filters: list[tuple[str, str | None, pc.Expression | None, BooleanExpression]] = [
        ("full", None, None, AlwaysTrue()),
        (
            "user_id 1%",
            f"user_id < {p1}",
            pc.field("user_id") < p1,
            LessThan("user_id", p1),
        ),
        (
            "one day",
            f"event_ts >= TIMESTAMP '{day:%Y-%m-%d %H:%M:%S}' "
            f"AND event_ts < TIMESTAMP '{next_day:%Y-%m-%d %H:%M:%S}'",
            (pc.field("event_ts") >= lo) & (pc.field("event_ts") < hi),
            And(GreaterThanOrEqual("event_ts", day.isoformat()), LessThan("event_ts", next_day.isoformat())),
        ),
    ]
    catalog = tablestore_catalog(ws.shared_table_dir)

    def floor(arrow_filter: pc.Expression | None) -> int:
        return int(ds.dataset(paths, format="parquet").to_table(filter=arrow_filter).num_rows)

    def ours(sql: str | None) -> int:
        return int(catalog.load_table(TABLE_NAME).scan(filter=sql).to_arrow().num_rows)

    def theirs(expression: BooleanExpression) -> int:
        scan = StaticTable.from_metadata(metadata_location).scan(row_filter=expression)
        return int(scan.to_arrow().num_rows)

    cases = []
    for name, sql, arrow_filter, expression in filters:
        def bind_floor(f: Any = arrow_filter) -> int:
            return floor(f)

        def bind_ours(f: str | None = sql) -> int:
            return ours(f)

        def bind_theirs(f: BooleanExpression = expression) -> int:
            return theirs(f)

        cases.append(Case(
            name,
            [
                Contestant("pyarrow", bind_floor, floor=True),
                Contestant("tablestore", bind_ours),
                Contestant("pyiceberg", bind_theirs),
            ],
            rounds=rounds or 5,
            targets={"pyarrow": 1.2, "pyiceberg": 2.0},
        ))
    return Benchmark(
        "core_scan",
        f"core_scan: {ws.rows:,} rows in {len(paths)} files (day(event_ts) partitions), to Arrow",
        cases,
        notes=[
            "floor: pyarrow.dataset over the table's data files; tablestore loads the table from its "
            "catalog, pyiceberg from tablestore's metadata file (StaticTable)",
            f"user_id 1%: user_id < {p1:,} (1st percentile; prunes nothing); one day: "
            f"event_ts in [{day:%Y-%m-%d}, {next_day:%Y-%m-%d}) (prunes 29 of 30 partitions)",
            "seconds: median of the rounds, contestants interleaved; rows/s: table rows scanned per second",
        ],
    )
