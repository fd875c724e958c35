"""The numeric materialization metadata every table-writing asset records.

Dagster plots numeric metadata over time per asset (the asset's Plots tab): rows added, data
files and bytes of the table, the files and bytes the commit added, the partitions it changed,
the step's duration, and the snapshot id (0 when the step committed nothing).
"""

from __future__ import annotations

import time

from tablestore.table import Table


def snapshot_metadata(table: Table, started: float, committed: bool = True) -> dict[str, int | float]:
    """The numbers of ``table``'s current snapshot; ``started`` is the step's ``time.monotonic()``.

    ``committed=False`` (the step left the table as it was) records nothing added."""
    table.refresh()
    snapshot = table.current_snapshot()
    summary = snapshot.summary if snapshot is not None else {}
    added = committed and snapshot is not None

    def number(key: str, only_if_added: bool = False) -> int:
        return int(summary.get(key, "0")) if added or not only_if_added else 0

    return {
        "rows_added": number("added-records", True),
        "rows_total": number("total-records"),
        "data_files": number("total-data-files"),
        "data_files_added": number("added-data-files", True),
        "bytes_total": number("total-files-size"),
        "bytes_added": number("added-files-size", True),
        "partitions_changed": number("changed-partition-count", True),
        "duration_s": round(time.monotonic() - started, 3),
        "snapshot_id": snapshot.snapshot_id if added and snapshot is not None else 0,
    }
