"""Scheduled table maintenance, one asset per table: compaction, snapshot expiry, orphan-file
removal and manifest rewrites, in that order.

Each materialization records the table's data files, delete files and bytes before and after,
the snapshots expired, the files compacted and the orphans removed, as numbers that the Dagster
UI plots over time. The schedule (``schedules.py``) runs them nightly, after ingestion: it skips
a tick while any other run of the code location is queued or running, and the assets share the
concurrency pool ``table_maintenance``.

Compaction keeps each file group in its own partition spec (``keep_spec``): a compaction of
``events`` in the current (hour) spec would move the day files under the hour spec before the
cut-over, which the ``partition_specs_by_cutover`` check forbids.
"""

# No ``from __future__ import annotations``: Dagster reads the config class from the asset's
# signature at definition time.
import datetime
import time
from dataclasses import dataclass

import dagster as dg

from pipelines.defs.customers.assets import LTV_KEY
from pipelines.defs.erasure.assets import AUDIT, ERASURE_KEY, REQUESTS_KEY
from pipelines.defs.ingest.assets import EVENTS_HOURLY_KEY, EVENTS_KEY
from pipelines.defs.resources import TableStoreResource
from pipelines.defs.retries import STEP_RETRY, step_commit_id
from tablestore.maintenance.compaction import rewrite_data_files, rewrite_manifests
from tablestore.maintenance.expire import expire_snapshots
from tablestore.maintenance.orphans import remove_orphan_files
from tablestore.table import Table

MAINTENANCE_GROUP = "maintenance"
MAINTENANCE_POOL = "table_maintenance"
# Each table of the shop database and the assets that write it.
MAINTAINED_TABLES: dict[str, list[dg.AssetKey]] = {
    "events": [EVENTS_KEY, EVENTS_HOURLY_KEY],
    "customers": [LTV_KEY],
    "erasure_requests": [REQUESTS_KEY],
    AUDIT: [ERASURE_KEY],
}


def maintenance_key(table: str) -> dg.AssetKey:
    return dg.AssetKey(["lakehouse", "shop", "maintenance", table])


class MaintenanceConfig(dg.Config):
    """How much history to keep and when a partition's files are worth compacting."""

    # Snapshots older than this are expired, except the last ``retain_last``.
    expire_older_than_hours: float = 24.0
    retain_last: int = 5
    # Unreferenced files younger than this may belong to a write in flight: they stay.
    orphan_older_than_hours: float = 72.0
    # A partition is compacted when it has at least this many small files.
    min_input_files: int = 2


@dataclass(frozen=True)
class TableFiles:
    data_files: int
    delete_files: int
    bytes: int
    snapshots: int
    snapshot_id: int | None

    @classmethod
    def of(cls, table: Table) -> "TableFiles":
        table.refresh()
        snapshot = table.current_snapshot()
        summary = snapshot.summary if snapshot is not None else {}
        return cls(int(summary.get("total-data-files", "0")), int(summary.get("total-delete-files", "0")),
                   int(summary.get("total-files-size", "0")), len(table.snapshots()),
                   snapshot.snapshot_id if snapshot is not None else None)


def maintain(table: Table, config: MaintenanceConfig, commit_id: str | None = None) -> dict[str, int | float]:
    """Compact, expire, remove orphans and rewrite manifests; the numbers before and after.
    ``commit_id`` names the compaction's commit: a retried step does not compact twice."""
    started = time.monotonic()
    before = TableFiles.of(table)
    compacted = rewrite_data_files(table, options={"min-input-files": config.min_input_files}, keep_spec=True,
                                   commit_id=commit_id)
    now = datetime.datetime.now(datetime.UTC)
    expired = expire_snapshots(table, older_than=now - datetime.timedelta(hours=config.expire_older_than_hours),
                               retain_last=config.retain_last)
    orphans = remove_orphan_files(table, older_than=now - datetime.timedelta(hours=config.orphan_older_than_hours))
    manifests = rewrite_manifests(table)
    after = TableFiles.of(table)
    return {
        "data_files_before": before.data_files, "data_files_after": after.data_files,
        "delete_files_before": before.delete_files, "delete_files_after": after.delete_files,
        "bytes_before": before.bytes, "bytes_after": after.bytes,
        "snapshots_before": before.snapshots, "snapshots_after": after.snapshots,
        "snapshots_expired": len(expired.expired_snapshot_ids),
        "files_compacted": compacted.rewritten_data_files_count, "files_added": compacted.added_data_files_count,
        "files_deleted_by_expiry": expired.deleted_data_files_count + expired.deleted_position_delete_files_count,
        "orphans_removed": len(orphans.orphan_file_locations),
        "manifests_rewritten": manifests.rewritten_manifests_count,
        "manifests_added": manifests.added_manifests_count,
        "snapshot_id": after.snapshot_id or 0,
        "duration_s": round(time.monotonic() - started, 3),
    }


def build_maintenance_asset(name: str, writers: list[dg.AssetKey]) -> dg.AssetsDefinition:
    @dg.asset(key=maintenance_key(name), deps=writers, group_name=MAINTENANCE_GROUP, kinds={"iceberg"},
              pool=MAINTENANCE_POOL, retry_policy=STEP_RETRY,
              description=f"Compaction, snapshot expiry, orphan removal and manifest rewrite of lakehouse.shop.{name}.")
    def _maintain(context: dg.AssetExecutionContext, config: MaintenanceConfig,
                  tablestore: TableStoreResource) -> dg.MaterializeResult:
        if not tablestore.exists(name):
            return dg.MaterializeResult(metadata={"skipped": f"lakehouse.shop.{name} does not exist yet"})
        return dg.MaterializeResult(metadata=maintain(tablestore.table(name), config,
                                                      step_commit_id(context, f"compact-{name}")))

    return _maintain


def build_maintenance_assets() -> list[dg.AssetsDefinition]:
    return [build_maintenance_asset(name, writers) for name, writers in MAINTAINED_TABLES.items()]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(assets=build_maintenance_assets())
