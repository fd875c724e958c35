"""The hourly rollup of the events, recomputed only for the hours that changed.

``lakehouse.shop.events_hourly_rollup`` holds one row per hour and event type: the events, the
distinct users and the amount. A run reads the changelog of ``events`` since the snapshot it
consumed last (:mod:`pipelines.defs.changes`), takes the hours of the changed rows, recomputes
those hours from ``events`` in Spark (a query pruned to their time range) and replaces them in the
rollup in one overwrite. An hour whose events were all deleted (an erasure) loses its rows. The
first run, a backfill (run config ``full: true``) and a consumed snapshot that was expired
recompute every hour.
"""

import datetime
import time
from typing import TYPE_CHECKING, Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.defs.automation import FOLLOWS_UPSTREAM
from pipelines.defs.changes import Changes, RefreshConfig, changed_keys, last_consumed
from pipelines.defs.ingest.assets import EVENTS_HOURLY_KEY, EVENTS_KEY
from pipelines.defs.metadata import snapshot_metadata
from pipelines.defs.resources import SparkResource, TableStoreResource
from pipelines.defs.retries import STEP_RETRY
from pipelines.settings import table_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROLLUP_KEY = dg.AssetKey(["lakehouse", "shop", "events_hourly_rollup"])
ERASURE_KEY = dg.AssetKey(["lakehouse", "shop", "gdpr_erasure"])  # the erasure refreshes it too
ROLLUP = "events_hourly_rollup"
ROLLUP_SCHEMA = pa.schema([
    ("hour", pa.string()),  # 'YYYY-MM-DD HH:00' (UTC): a plain key the overwrite filter can name
    ("event_type", pa.string()),
    ("events", pa.int64()),
    ("users", pa.int64()),
    ("amount", pa.decimal128(18, 2)),
])
HOUR_FORMAT = "%Y-%m-%d %H:00"


def hours_of(rows: pa.Table) -> pa.Table:
    """The hour keys of changed event rows (the changelog's ``key`` function)."""
    ts = rows.column("event_ts")
    if pa.types.is_timestamp(ts.type) and ts.type.tz is not None:
        ts = pc.cast(ts, pa.timestamp(ts.type.unit))  # tablestore reads timestamptz as UTC
    hours = pc.strftime(pc.floor_temporal(ts, unit="hour"), format=HOUR_FORMAT)
    return pa.table({"hour": hours})


def rollup_query(hours: list[str] | None) -> str:
    where = ""
    if hours:
        first = datetime.datetime.strptime(min(hours), HOUR_FORMAT)
        last = datetime.datetime.strptime(max(hours), HOUR_FORMAT) + datetime.timedelta(hours=1)
        listed = ", ".join(f"'{h}'" for h in hours)
        # The time range prunes the scan to the files of those hours; the list keeps only them.
        where = (f"WHERE event_ts >= TIMESTAMP '{first:%Y-%m-%d %H:%M:%S}' AND event_ts < "
                 f"TIMESTAMP '{last:%Y-%m-%d %H:%M:%S}' AND date_format(event_ts, 'yyyy-MM-dd HH:00') IN ({listed})")
    return (f"SELECT date_format(event_ts, 'yyyy-MM-dd HH:00') AS hour, event_type, count(*) AS events, "
            f"count(DISTINCT user_id) AS users, CAST(coalesce(sum(amount), 0) AS DECIMAL(18,2)) AS amount "
            f"FROM {table_name('events')} {where} GROUP BY 1, 2")


def refresh_rollup(store: TableStoreResource, spark: "SparkSession", since: int | None, full: bool = False,
                   until: int | None = None) -> tuple[Changes, dict[str, Any]]:
    """Recompute the hours that changed in ``events`` after ``since`` (all hours when ``full``)."""
    started = time.monotonic()
    events = store.table("events")
    changes = changed_keys(events, since, ["hour"], hours_of, full, until)
    if not store.exists(ROLLUP):
        store.catalog().create_table(("shop", ROLLUP), schema=ROLLUP_SCHEMA)
    rollup = store.table(ROLLUP)
    hours = sorted(str(h) for h in changes.keys.column("hour").to_pylist()) if changes.keys.num_rows else []
    if not changes.full and not hours:
        return changes, {"hours_recomputed": 0, **snapshot_metadata(rollup, started, committed=False)}
    result = store.sql(spark).execute_one(rollup_query(None if changes.full else hours))
    rows = pa.Table.from_pylist([dict(zip(result.columns or [], r, strict=True)) for r in result.rows],
                                schema=ROLLUP_SCHEMA)
    where = None if changes.full else f"hour IN ({', '.join(repr(h) for h in hours)})"
    rollup.overwrite(rows, where, snapshot_properties={"pipelines.consumed.events": str(changes.until)})
    recomputed = len(set(rows.column("hour").to_pylist())) if changes.full else len(hours)
    return changes, {"hours_recomputed": recomputed, "rollup_rows_written": rows.num_rows,
                     **snapshot_metadata(rollup, started)}


def build_rollup_assets() -> list[dg.AssetsDefinition]:
    @dg.asset(key=ROLLUP_KEY, deps=[EVENTS_KEY, EVENTS_HOURLY_KEY], group_name="rollups", kinds={"iceberg", "spark"},
              retry_policy=STEP_RETRY, automation_condition=FOLLOWS_UPSTREAM)
    def events_hourly_rollup(context: dg.AssetExecutionContext, config: RefreshConfig, tablestore: TableStoreResource,
                             spark: SparkResource) -> dg.MaterializeResult:
        """Events, users and amount per hour and event type; only the changed hours recomputed."""
        since = last_consumed(context.instance, ROLLUP_KEY, ERASURE_KEY)
        changes, numbers = refresh_rollup(tablestore, spark.session(), since, config.full)
        return dg.MaterializeResult(metadata={**changes.metadata(), **numbers},
                                    data_version=dg.DataVersion(str(changes.until)))

    return [events_hourly_rollup]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(assets=build_rollup_assets())
