"""What changed upstream since an asset last consumed it: the pipeline's cost follows the change.

Each downstream asset records in its materialization metadata the upstream snapshot it consumed
(``consumed_snapshot_id``; the same id is its Dagster data version). The next run reads only the
changelog of the upstream table since that snapshot (``Table.changes``, planned from the
manifests the range added and removed) and takes from it the keys the change touched: the hours
for the rollups, the users for the customers and their features. It then recomputes those keys
alone, from the upstream table, and replaces them downstream. A recomputation of a key is
idempotent, so a step retried after its write landed (before Dagster recorded the snapshot)
does the same work again and changes nothing.

A deleted row is a change like any other: the erased subject's events come out of the changelog
as DELETEs, their keys are recomputed without them, and a key left with no upstream row is
removed downstream. The GDPR erasure runs the downstream refreshes itself between its logical
DELETE and its physical erasure (which expires every older snapshot, and with them the range a
later changelog would need), and records what each consumed in its own metadata
(``consumed:<asset>``); :func:`last_consumed` takes the newer of the two records.

A full recomputation stays: on the first run, for a backfill (the asset's ``full`` run config),
or when the consumed snapshot has been expired and the changes since cannot be told.

Where the recomputation runs (:func:`choose_engine`): a small change is recomputed in the run's
process, by tablestore's own scan pruned to the touched keys and pyarrow's grouped aggregation,
and committed through the table API; Spark's fixed cost per statement (tens of seconds on a
loaded machine, whatever it reads) would otherwise be the whole cost of a one-hour landing.
"Small" is decided from manifests before any row is read, under the bounds of the settings
(:class:`~pipelines.settings.InProcessLimits`): the changelog's planned files and rows, and the
rows the recompute's pruned scan plans. A change over any bound, and every full recomputation,
runs in Spark, where the rows never reach this process. Both give the same rows
(``tests/pipelines/test_changes.py`` compares them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.settings import InProcessLimits
from tablestore.errors import TableStoreError
from tablestore.spec.metadata.table_metadata import TableMetadata
from tablestore.table import Table
from tablestore.table.read.scan import TableScan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The run's SparkSession, asked for only when a refresh runs in Spark: a run whose changes are
# all small starts no Spark application.
SessionSource = Callable[[], "SparkSession"]
# Where a refresh runs: ``auto`` decides by the settings' bounds; the others force one path
# (the differential test runs both on the same changes).
AUTO, IN_PROCESS, SPARK = "auto", "in-process", "spark"

CONSUMED = "consumed_snapshot_id"
ERASURE_CONSUMED_PREFIX = "consumed:"


class RefreshConfig(dg.Config):
    """Run config of an incremental asset: ``full: true`` recomputes everything (backfills)."""

    full: bool = False


@dataclass
class Changes:
    """The keys an upstream change touched, and how they were found."""

    since: int | None  # the upstream snapshot consumed before (None: never)
    until: int | None  # the upstream snapshot this run consumes
    full: bool  # recompute everything (then ``keys`` is empty)
    reason: str
    keys: pa.Table = field(default_factory=lambda: pa.table({}))  # distinct key values of the changed rows
    changed_rows: int = 0  # changelog rows read
    changed_files: int = 0  # data files the changelog read
    planned_rows: int = 0  # the record counts of those files (from manifests: at least changed_rows)

    def metadata(self) -> dict[str, Any]:
        """What the materialization records: the consumed snapshot and what was read for it."""
        return {
            CONSUMED: self.until if self.until is not None else 0,
            "previous_consumed_snapshot_id": self.since if self.since is not None else 0,
            "mode": "full" if self.full else "incremental",
            "mode_reason": self.reason,
            "changed_rows_read": self.changed_rows,
            "changed_files_read": self.changed_files,
            "changed_rows_planned": self.planned_rows,
            "keys_touched": self.keys.num_rows,
        }


def _metadata_value(event: dg.EventLogEntry | None, key: str) -> tuple[float, int | None]:
    materialization = event.asset_materialization if event is not None else None
    if event is None or materialization is None or key not in materialization.metadata:
        return -1.0, None
    value = materialization.metadata[key].value
    return event.timestamp, int(value) if isinstance(value, (int, float, str)) and int(value) else None


def last_consumed(instance: dg.DagsterInstance, asset: dg.AssetKey, erasure: dg.AssetKey | None) -> int | None:
    """The upstream snapshot ``asset`` consumed last: its own record, or the erasure's, if newer."""
    own = _metadata_value(instance.get_latest_materialization_event(asset), CONSUMED)
    if erasure is None:
        return own[1]
    by_erasure = _metadata_value(instance.get_latest_materialization_event(erasure),
                                 ERASURE_CONSUMED_PREFIX + asset.to_user_string())
    return max(own, by_erasure, key=lambda pair: pair[0])[1]


def _unchanged_since_expired(metadata: TableMetadata, since: int, until: int) -> bool:
    """Whether only row-preserving snapshots (compactions, the erasure's rewrite) separate an
    expired ``since`` from ``until``: walking back from ``until`` through kept ``replace``
    snapshots must reach ``since`` as a parent."""
    snapshot = metadata.snapshot_by_id(until)
    while snapshot is not None and snapshot.operation == "replace":
        if snapshot.parent_snapshot_id == since:
            return True
        parent = snapshot.parent_snapshot_id
        snapshot = metadata.snapshot_by_id(parent) if parent is not None else None
    return False


def changed_keys(table: Table, since: int | None, columns: list[str], key: Any = None, full: bool = False,
                 until: int | None = None) -> Changes:
    """The distinct values of ``columns`` (after ``key``, a function of the changed rows, when
    given) over the rows that changed in ``table`` after ``since`` up to ``until`` (default the
    current snapshot); a full recomputation when asked, or when they cannot be told."""
    current = table.current_snapshot()
    until = until if until is not None else (current.snapshot_id if current is not None else None)
    if full:
        return Changes(since, until, True, "full recomputation asked (backfill)")
    if since is None:
        return Changes(since, until, True, "first run: nothing consumed before")
    if until is None or since == until:
        return Changes(since, until, False, "no new upstream snapshot")
    if table.snapshot_by_id(since) is None:
        if _unchanged_since_expired(table.metadata, since, until):
            return Changes(since, until, False, "only rewrites since the consumed snapshot (expired)")
        return Changes(since, until, True, f"the consumed snapshot {since} was expired: the changes since "
                                           "cannot be read")
    try:
        scan = table.changes(from_snapshot=since, to_snapshot=until, compute_updates=False)
        tasks = scan.plan_tasks()
        files, planned = len(tasks), sum(t.data_file.record_count for t in tasks)
        parts, rows = [], 0
        for batch in scan.to_batches():
            rows += batch.num_rows
            chunk = pa.Table.from_batches([batch])
            values = key(chunk) if key is not None else chunk.select(columns)
            parts.append(values.group_by(columns).aggregate([]))
    except TableStoreError as e:  # e.g. the upstream was rolled back past the consumed snapshot
        return Changes(since, until, True, f"the changelog since {since} cannot be read: {e}")
    keys = pa.concat_tables(parts).group_by(columns).aggregate([]) if parts else pa.table(
        {c: pa.array([], pa.null()) for c in columns})
    keys = keys.filter(pc.is_valid(keys.column(columns[0]))) if keys.num_rows else keys
    return Changes(since, until, False, f"changelog since snapshot {since}", keys, rows, files, planned)


def planned_scan_rows(scan: TableScan) -> int:
    """The rows a scan reads at most: its planned files' record counts (manifests only)."""
    return sum(task.file.record_count for task in scan.plan_files())


@dataclass(frozen=True)
class EngineChoice:
    """Where a refresh runs, and why (the materialization's ``engine`` and ``engine_reason``)."""

    in_process: bool
    reason: str
    scan: TableScan | None = None  # the planned recompute scan, when it was planned (read it, don't re-plan)

    def metadata(self) -> dict[str, str]:
        return {"engine": IN_PROCESS if self.in_process else SPARK, "engine_reason": self.reason}


def choose_engine(changes: Changes, limits: InProcessLimits, scan: Callable[[], TableScan],
                  forced: str = AUTO) -> EngineChoice:
    """In this process when the change and the recompute's scan (``scan``, planned only if the
    change is small) are within ``limits``; else Spark. ``forced`` overrides the decision."""
    if forced != AUTO:
        if forced not in (IN_PROCESS, SPARK):
            raise ValueError(f"engine must be {AUTO!r}, {IN_PROCESS!r} or {SPARK!r}, got {forced!r}")
        if forced == IN_PROCESS and changes.full:
            raise ValueError("a full recomputation runs in Spark only; in-process refreshes recompute keys")
        return EngineChoice(forced == IN_PROCESS, f"{forced} asked", scan() if forced == IN_PROCESS else None)
    if changes.full:
        return EngineChoice(False, "full recomputation")
    if changes.changed_files > limits.max_files:
        return EngineChoice(False, f"the changelog planned {changes.changed_files} data files "
                                   f"(in process up to {limits.max_files})")
    if changes.planned_rows > limits.max_rows:
        return EngineChoice(False, f"the changelog planned {changes.planned_rows} rows "
                                   f"(in process up to {limits.max_rows})")
    planned = scan()
    rows = planned_scan_rows(planned)
    if rows > limits.max_scan_rows:
        return EngineChoice(False, f"the recompute's scan planned {rows} rows (in process up to "
                                   f"{limits.max_scan_rows})")
    return EngineChoice(True, f"{changes.changed_files} changelog files of {changes.planned_rows} rows, "
                              f"a recompute scan of {rows} rows: within the in-process bounds", planned)


__all__ = [
    "AUTO",
    "CONSUMED",
    "ERASURE_CONSUMED_PREFIX",
    "IN_PROCESS",
    "SPARK",
    "Changes",
    "EngineChoice",
    "RefreshConfig",
    "SessionSource",
    "changed_keys",
    "choose_engine",
    "last_consumed",
    "planned_scan_rows",
]
