"""The hourly rollup of the events, recomputed only for the hours that changed.

``lakehouse.shop.events_hourly_rollup`` holds one row per hour and event type: the events, the
distinct users and the amount. A run reads the changelog of ``events`` since the snapshot it
consumed last (:mod:`pipelines.defs.changes`), takes the hours of the changed rows, recomputes
those hours from ``events`` (a scan pruned to their time range) and replaces them in the rollup in
one overwrite. A small change is recomputed in the run's process (:func:`rollup_in_process`,
tablestore's scan and pyarrow), a larger one in Spark (:func:`rollup_query`): the same rows
either way. An hour whose events were all deleted (an erasure) loses its rows. The first run, a
backfill (run config ``full: true``) and a consumed snapshot that was expired recompute every
hour, in Spark.
"""

import datetime
import time
from decimal import Decimal
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.defs.automation import FOLLOWS_UPSTREAM
from pipelines.defs.changes import (
    AUTO,
    Changes,
    RefreshConfig,
    SessionSource,
    changed_keys,
    choose_engine,
    last_consumed,
)
from pipelines.defs.ingest.assets import EVENTS_HOURLY_KEY, EVENTS_KEY
from pipelines.defs.metadata import snapshot_metadata
from pipelines.defs.resources import SparkResource, TableStoreResource
from pipelines.defs.retries import STEP_RETRY
from pipelines.settings import table_name
from tablestore.table import Table
from tablestore.table.read.scan import TableScan

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


def _time_range(hours: list[str]) -> tuple[datetime.datetime, datetime.datetime]:
    first = datetime.datetime.strptime(min(hours), HOUR_FORMAT)
    return first, datetime.datetime.strptime(max(hours), HOUR_FORMAT) + datetime.timedelta(hours=1)


def rollup_query(hours: list[str] | None) -> str:
    where = ""
    if hours:
        first, last = _time_range(hours)
        listed = ", ".join(f"'{h}'" for h in hours)
        # The time range prunes the scan to the files of those hours; the list keeps only them.
        where = (f"WHERE event_ts >= TIMESTAMP '{first:%Y-%m-%d %H:%M:%S}' AND event_ts < "
                 f"TIMESTAMP '{last:%Y-%m-%d %H:%M:%S}' AND date_format(event_ts, 'yyyy-MM-dd HH:00') IN ({listed})")
    return (f"SELECT date_format(event_ts, 'yyyy-MM-dd HH:00') AS hour, event_type, count(*) AS events, "
            f"count(DISTINCT user_id) AS users, CAST(coalesce(sum(amount), 0) AS DECIMAL(18,2)) AS amount "
            f"FROM {table_name('events')} {where} GROUP BY 1, 2")


def rollup_scan(events: Table, hours: list[str]) -> TableScan:
    """The events of the time range of ``hours``, in the columns the rollup reads."""
    first, last = _time_range(hours)
    return events.scan(filter=f"event_ts >= TIMESTAMP '{first:%Y-%m-%d %H:%M:%S}' AND event_ts < "
                              f"TIMESTAMP '{last:%Y-%m-%d %H:%M:%S}'",
                       columns=["event_ts", "event_type", "user_id", "amount"])


def rollup_in_process(scan: TableScan, hours: list[str]) -> pa.Table:
    """:func:`rollup_query` of ``hours`` over ``scan`` (:func:`rollup_scan`) in this process.

    One file's rows at a time are reduced to (hour, event type, user) with their count and
    amount; the distinct users of an hour need no more than that. Spark's semantics kept:
    ``count(*)`` counts every row, ``count(DISTINCT user_id)`` no NULL user, a NULL event type is
    a group, and an hour with only NULL amounts sums to 0."""
    wanted = pa.array(hours, pa.string())
    parts = []
    for batch in scan.to_batches():
        rows = pa.Table.from_batches([batch])
        hour = hours_of(rows).column("hour")
        rows = rows.append_column("hour", hour).filter(pc.fill_null(pc.is_in(hour, value_set=wanted), False))
        parts.append(rows.group_by(["hour", "event_type", "user_id"]).aggregate([([], "count_all"),
                                                                                 ("amount", "sum")]))
    if not parts:
        return ROLLUP_SCHEMA.empty_table()
    groups = pa.concat_tables(parts).group_by(["hour", "event_type"]).aggregate(
        [("count_all", "sum"), ("user_id", "count_distinct"), ("amount_sum", "sum")])
    amount = groups.column("amount_sum_sum")
    amount = pc.coalesce(amount, pa.scalar(Decimal(0), amount.type))
    columns = ["hour", "event_type", "count_all_sum", "user_id_count_distinct"]
    return pa.Table.from_arrays([*(groups.column(c) for c in columns), amount],
                                names=ROLLUP_SCHEMA.names).cast(ROLLUP_SCHEMA)


def refresh_rollup(store: TableStoreResource, session: SessionSource, since: int | None, full: bool = False,
                   until: int | None = None, engine: str = AUTO) -> tuple[Changes, dict[str, Any]]:
    """Recompute the hours that changed in ``events`` after ``since`` (all hours when ``full``);
    ``engine`` forces where (:func:`~pipelines.defs.changes.choose_engine`)."""
    started = time.monotonic()
    events = store.table("events")
    changes = changed_keys(events, since, ["hour"], hours_of, full, until)
    if not store.exists(ROLLUP):
        store.catalog().create_table(("shop", ROLLUP), schema=ROLLUP_SCHEMA)
    rollup = store.table(ROLLUP)
    hours = sorted(str(h) for h in changes.keys.column("hour").to_pylist()) if changes.keys.num_rows else []
    if not changes.full and not hours:
        return changes, {"hours_recomputed": 0, **snapshot_metadata(rollup, started, committed=False)}
    choice = choose_engine(changes, store.settings.changes.in_process, lambda: rollup_scan(events, hours), engine)
    if choice.scan is not None and choice.in_process:
        rows = rollup_in_process(choice.scan, hours)
    else:
        result = store.sql(session()).execute_one(rollup_query(None if changes.full else hours))
        rows = pa.Table.from_pylist([dict(zip(result.columns or [], r, strict=True)) for r in result.rows],
                                    schema=ROLLUP_SCHEMA)
    where = None if changes.full else f"hour IN ({', '.join(repr(h) for h in hours)})"
    rollup.overwrite(rows, where, snapshot_properties={"pipelines.consumed.events": str(changes.until)})
    recomputed = len(set(rows.column("hour").to_pylist())) if changes.full else len(hours)
    return changes, {"hours_recomputed": recomputed, "rollup_rows_written": rows.num_rows, **choice.metadata(),
                     **snapshot_metadata(rollup, started)}


def build_rollup_assets() -> list[dg.AssetsDefinition]:
    @dg.asset(key=ROLLUP_KEY, deps=[EVENTS_KEY, EVENTS_HOURLY_KEY], group_name="rollups", kinds={"iceberg", "spark"},
              retry_policy=STEP_RETRY, automation_condition=FOLLOWS_UPSTREAM)
    def events_hourly_rollup(context: dg.AssetExecutionContext, config: RefreshConfig, tablestore: TableStoreResource,
                             spark: SparkResource) -> dg.MaterializeResult:
        """Events, users and amount per hour and event type; only the changed hours recomputed."""
        since = last_consumed(context.instance, ROLLUP_KEY, ERASURE_KEY)
        changes, numbers = refresh_rollup(tablestore, spark.session, since, config.full)
        return dg.MaterializeResult(metadata={**changes.metadata(), **numbers},
                                    data_version=dg.DataVersion(str(changes.until)))

    return [events_hourly_rollup]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(assets=build_rollup_assets())
