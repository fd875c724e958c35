"""Retention of ``events``: drop the partitions older than N days, in metadata only.

Off unless the settings have ``retention: {days: N}``. The age is counted back from the end of
the landed data (the day after the last landing day), not the wall clock, so a run is
reproducible. Only whole partitions whose time range ends at or before the cut-off are dropped;
a day or hour partition's files lie inside it, so ``drop_partitions`` removes them from metadata
without reading or rewriting any file (the snapshot has deleted files and no added ones).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

import dagster as dg

from pipelines.defs.ingest import events as ev
from pipelines.defs.ingest.assets import EVENTS_HOURLY_KEY, EVENTS_KEY
from pipelines.defs.resources import TableStoreResource
from pipelines.defs.retries import STEP_RETRY
from pipelines.settings import PipelineSettings, selected_settings
from tablestore.table import Table
from tablestore.table.ops.partitions import drop_partitions, partition_names

RETENTION_KEY = dg.AssetKey(["lakehouse", "shop", "events_retention"])
# The partition fields of events and the length of one partition of each.
GRAINS = {ev.DAY_FIELD: datetime.timedelta(days=1), ev.HOUR_FIELD: datetime.timedelta(hours=1)}


@dataclass
class RetentionResult:
    cutoff: datetime.datetime
    dropped: list[str] = field(default_factory=list)
    deleted_rows: int = 0
    files_removed: int = 0
    files_rewritten: int = 0


def _partition_start(field_name: str, value: str) -> datetime.datetime:
    if field_name == ev.HOUR_FIELD:
        return datetime.datetime.strptime(value, "%Y-%m-%d-%H")
    return datetime.datetime.strptime(value, "%Y-%m-%d")


def expired_partitions(table: Table, cutoff: datetime.datetime) -> list[tuple[str, str]]:
    """(field, value) of every live day or hour partition that ends at or before ``cutoff``."""
    out = []
    for name in partition_names(table):
        field_name, _, value = name.partition("=")
        if field_name in GRAINS and _partition_start(field_name, value) + GRAINS[field_name] <= cutoff:
            out.append((field_name, value))
    return out


def apply_retention(table: Table, cutoff: datetime.datetime) -> RetentionResult:
    """Drop the partitions of ``table`` that end at or before ``cutoff``, in one commit."""
    result = RetentionResult(cutoff)
    expired = expired_partitions(table, cutoff)
    if not expired:
        return result
    dropped = drop_partitions(table, [[p] for p in expired], snapshot_properties={"retention": "true"})
    result.dropped = [f"{f}={v}" for f, v in expired]
    result.deleted_rows, result.files_removed = dropped.deleted_rows, dropped.files_removed
    result.files_rewritten = dropped.files_rewritten
    return result


def build_retention_assets(settings: PipelineSettings) -> list[dg.AssetsDefinition]:
    @dg.asset(key=RETENTION_KEY, deps=[EVENTS_KEY, EVENTS_HOURLY_KEY], group_name="ingest", kinds={"iceberg"},
              retry_policy=STEP_RETRY)
    def events_retention(tablestore: TableStoreResource) -> dg.MaterializeResult:
        """Drop the ``events`` partitions older than ``retention.days`` (off by default), in
        metadata only."""
        if settings.retention.days is None or not tablestore.exists("events"):
            return dg.MaterializeResult(metadata={"retention": "off (set retention.days to enable)"})
        end = datetime.datetime.combine(settings.data.end, datetime.time())
        result = apply_retention(tablestore.table("events"), end - datetime.timedelta(days=settings.retention.days))
        return dg.MaterializeResult(metadata={
            "cutoff": result.cutoff.isoformat(sep=" "),
            "dropped": dg.MetadataValue.json(result.dropped),
            "deleted_rows": result.deleted_rows,
            "files_removed": result.files_removed,
            "files_rewritten": result.files_rewritten,
        })

    return [events_retention]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(assets=build_retention_assets(selected_settings()))
