"""The customers dimension and the features merged into it.

``customers`` follows the changes of the events (:mod:`pipelines.defs.changes`): a run reads the
changelog of ``events`` since the snapshot it consumed last, recomputes the users whose events
changed, and replaces their rows in one overwrite (a user left without events, an erased one,
loses the row); the first run, a backfill (run config ``full: true``) and an expired consumed
snapshot rebuild it with INSERT OVERWRITE. The replaced rows' features are NULL until the
feature assets refill them. ``customer_segments`` and ``customer_lifetime_value`` add their
column with a merge_columns the first time, and afterwards refresh it with an update_columns (a
partial update: customers absent from the source keep their value) for the users whose events
changed up to the snapshot ``customers`` consumed, or for every user after a rebuild. The
feature query is a Spark DataFrame and the merge runs in Spark tasks
(``tablestore.spark.tasks.column_merge_tasks.merge_in_tasks``, classic or Spark Connect): the run
process plans and commits; the feature rows never reach it.
"""

import time
from typing import TYPE_CHECKING, Any

import dagster as dg
import pyarrow as pa

from pipelines.defs.automation import FOLLOWS_UPSTREAM, USER_TABLE_FRESHNESS
from pipelines.defs.changes import Changes, RefreshConfig, changed_keys, last_consumed
from pipelines.defs.ingest.assets import EVENTS_HOURLY_KEY, EVENTS_KEY
from pipelines.defs.metadata import snapshot_metadata
from pipelines.defs.resources import SparkResource, TableStoreResource
from pipelines.defs.retries import STEP_RETRY, step_commit_id
from pipelines.settings import table_name
from tablestore.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CUSTOMERS_KEY = dg.AssetKey(["lakehouse", "shop", "customers"])
SEGMENTS_KEY = dg.AssetKey(["lakehouse", "shop", "customer_segments"])
LTV_KEY = dg.AssetKey(["lakehouse", "shop", "customer_lifetime_value"])
CUSTOMERS = table_name("customers")
EVENTS = table_name("events")
BASE_COLUMNS = "user_id BIGINT NOT NULL, email STRING, country_code STRING, first_seen TIMESTAMP"

ERASURE_KEY = dg.AssetKey(["lakehouse", "shop", "gdpr_erasure"])  # it refreshes these assets too
# The customers table snapshot of the last full rebuild: the features follow a rebuild in full.
REBUILD = "rebuild_snapshot_id"
BASE_SQL = (f"SELECT user_id, min_by(email, event_ts), min_by(country_code, event_ts), min(event_ts) "
            f"FROM {EVENTS} {{where}} GROUP BY user_id")

SEGMENT_SQL = f"""
SELECT user_id,
       CASE WHEN count_if(event_type = 'purchase') >= 8 THEN 'vip'
            WHEN count_if(event_type = 'purchase') >= 3 THEN 'regular'
            WHEN count_if(event_type = 'purchase') >= 1 THEN 'occasional'
            ELSE 'browser' END AS segment
FROM {EVENTS} {{where}} GROUP BY user_id
"""
# Only customers who bought have a lifetime value; the others keep what they had (NULL).
LTV_SQL = f"""
SELECT user_id,
       CAST(sum(CASE WHEN event_type = 'purchase' THEN amount ELSE -amount END) AS DECIMAL(14,2)) AS lifetime_value
FROM {EVENTS} WHERE event_type IN ('purchase', 'refund') {{and_where}} GROUP BY user_id
HAVING count_if(event_type = 'purchase') > 0
"""


def merge_feature(table: Table, source: "DataFrame", column: str, commit_id: str | None = None) -> dict[str, str | int]:
    """Add ``column`` from ``source`` (joined on user_id), or refresh it if the table has it;
    the materialization's metadata: the action, the snapshot and the Spark tasks that wrote.
    ``commit_id`` (:func:`~pipelines.defs.retries.step_commit_id`): a retried step applies once."""
    from tablestore.spark.tasks.column_merge_tasks import merge_in_tasks  # pyspark: loaded when a run merges

    exists = column in [f.name for f in table.schema().fields]
    action = "update_columns" if exists else "merge_columns"
    outcome = merge_in_tasks(table, source, "user_id", [column], "update" if exists else "merge", commit_id=commit_id)
    summary = outcome.snapshot.summary if outcome.snapshot is not None else {}
    return {
        "action": action,
        "snapshot_id": str(outcome.snapshot.snapshot_id if outcome.snapshot is not None else None),
        "rewritten_fragments": outcome.rewritten,
        "write_tasks": int(summary.get("tablestore.write.tasks", "0")),
        "write_hosts": summary.get("tablestore.write.hosts", ""),
    }


def users_filter(users: list[int]) -> str:
    return f"user_id IN ({', '.join(str(u) for u in users)})"


def refresh_customers(store: TableStoreResource, spark: "SparkSession", since: int | None, full: bool = False,
                      until: int | None = None, rebuilt: int | None = None) -> tuple[Changes, dict[str, Any]]:
    """Recompute the customers whose events changed after ``since`` (everyone when ``full``);
    ``rebuilt`` is the customers snapshot of the last full rebuild, carried forward."""
    started = time.monotonic()
    changes = changed_keys(store.table("events"), since, ["user_id"], None, full, until)
    sql = store.sql(spark)
    if not store.exists("customers"):
        sql.execute_one(f"CREATE TABLE {CUSTOMERS} ({BASE_COLUMNS})")
        sql.execute_one(f"ALTER TABLE {CUSTOMERS} SET IDENTIFIER FIELDS user_id")
    table = store.table("customers")
    users = sorted(int(u) for u in changes.keys.column("user_id").to_pylist()) if changes.keys.num_rows else []
    if changes.full:
        extra = [f.name for f in table.schema().fields][4:]
        nulls = "".join(f", NULL AS {name}" for name in extra)
        sql.execute_one(
            f"INSERT OVERWRITE {CUSTOMERS} SELECT user_id, min_by(email, event_ts), min_by(country_code, event_ts), "
            f"min(event_ts){nulls} FROM {EVENTS} GROUP BY user_id"
        )
        rebuilt = table.refresh().current_snapshot().snapshot_id  # type: ignore[union-attr]
    elif users:
        # A few rows per touched user: the recomputed rows come back to this process.
        result = sql.execute_one(BASE_SQL.format(where=f"WHERE {users_filter(users)}"))
        schema = table.schema().as_arrow()
        names = schema.names
        rows = [dict(zip(names, [*r, *([None] * (len(names) - len(r)))], strict=True)) for r in result.rows]
        table.overwrite(pa.Table.from_pylist(rows, schema=schema), users_filter(users))
    committed = changes.full or bool(users)
    numbers = snapshot_metadata(table, started, committed=committed)
    return changes, {"rows": numbers["rows_total"], "users_recomputed": len(users), REBUILD: rebuilt or 0, **numbers}


def _latest(instance: dg.DagsterInstance, key: dg.AssetKey, name: str) -> int | None:
    event = instance.get_latest_materialization_event(key)
    materialization = event.asset_materialization if event is not None else None
    if materialization is None or name not in materialization.metadata:
        return None
    return int(materialization.metadata[name].value) or None  # type: ignore[arg-type]


def refresh_feature(store: TableStoreResource, spark: "SparkSession", column: str, since: int | None,
                    until: int | None, full: bool, commit_id: str | None = None) -> tuple[Changes, dict[str, Any]]:
    """Refresh ``column`` for the users whose events changed after ``since`` up to ``until``
    (the snapshot ``customers`` consumed), or for every user when ``full``."""
    table = store.table("customers")
    full = full or column not in [f.name for f in table.schema().fields]  # merge_columns adds it for all
    changes = changed_keys(store.table("events"), since, ["user_id"], None, full, until)
    users = sorted(int(u) for u in changes.keys.column("user_id").to_pylist()) if changes.keys.num_rows else []
    if not changes.full and not users:
        return changes, {"action": "unchanged", "snapshot_id": "None", "source_rows": 0}
    where = "" if changes.full else users_filter(users)
    text = SEGMENT_SQL.format(where=f"WHERE {where}" if where else "") if column == "segment" else \
        LTV_SQL.format(and_where=f"AND {where}" if where else "")
    source = store.sql(spark).planner().dataframe(text)
    metadata: dict[str, Any] = {**merge_feature(table, source, column, commit_id), "users_recomputed": len(users)}
    if column == "segment":
        # One row per segment (four at most): the only rows of the feature this process sees.
        counts = {r["segment"]: r["count"] for r in source.groupBy("segment").count().collect()}
        metadata.update(source_rows=sum(counts.values()), segments=counts)
    else:
        metadata["source_rows"] = source.count()
    return changes, metadata


def _numbers(tablestore: TableStoreResource, merged: dict[str, str | int], started: float) -> dict[str, int | float]:
    # The merge's snapshot (none when nothing changed), as numbers the UI plots.
    return snapshot_metadata(tablestore.table("customers"), started, committed=merged["snapshot_id"] != "None")


def _json(metadata: dict[str, Any]) -> dict[str, Any]:
    return {k: dg.MetadataValue.json(v) if isinstance(v, dict) else v for k, v in metadata.items()}


def _refresh(context: dg.AssetExecutionContext, store: TableStoreResource, spark: SparkResource, key: dg.AssetKey,
             column: str, full: bool) -> tuple[Changes, dict[str, Any]]:
    """A feature's refresh: the events it consumed last up to what ``customers`` consumed; in
    full after a rebuild of ``customers`` it has not followed yet."""
    since = last_consumed(context.instance, key, ERASURE_KEY)
    until = last_consumed(context.instance, CUSTOMERS_KEY, ERASURE_KEY)
    rebuilt = _latest(context.instance, CUSTOMERS_KEY, REBUILD)
    followed = _latest(context.instance, key, REBUILD)
    changes, metadata = refresh_feature(store, spark.session(), column, since, until, full or rebuilt != followed,
                                        step_commit_id(context, column))
    return changes, {**metadata, REBUILD: rebuilt or 0}


def build_customer_assets() -> list[dg.AssetsDefinition]:
    @dg.asset(key=CUSTOMERS_KEY, deps=[EVENTS_KEY, EVENTS_HOURLY_KEY], group_name="customers",
              kinds={"iceberg", "spark"}, retry_policy=STEP_RETRY, automation_condition=FOLLOWS_UPSTREAM,
              freshness_policy=USER_TABLE_FRESHNESS)
    def customers(context: dg.AssetExecutionContext, config: RefreshConfig, tablestore: TableStoreResource,
                  spark: SparkResource) -> dg.MaterializeResult:
        """``lakehouse.shop.customers``: one row per user seen in the events (identifier user_id),
        recomputed for the users whose events changed; the features are refilled after it."""
        since = last_consumed(context.instance, CUSTOMERS_KEY, ERASURE_KEY)
        rebuilt = _latest(context.instance, CUSTOMERS_KEY, REBUILD)
        changes, numbers = refresh_customers(tablestore, spark.session(), since, config.full, rebuilt=rebuilt)
        return dg.MaterializeResult(metadata={**changes.metadata(), **numbers},
                                    data_version=dg.DataVersion(str(changes.until)))

    @dg.asset(key=SEGMENTS_KEY, deps=[CUSTOMERS_KEY], group_name="customers", kinds={"iceberg", "spark"},
              retry_policy=STEP_RETRY, automation_condition=FOLLOWS_UPSTREAM)
    def customer_segments(context: dg.AssetExecutionContext, config: RefreshConfig, tablestore: TableStoreResource,
                          spark: SparkResource) -> dg.MaterializeResult:
        """``segment`` (vip, regular, occasional, browser) from purchase counts, merged into
        ``customers`` with merge_columns (update_columns once the column exists)."""
        started = time.monotonic()
        changes, metadata = _refresh(context, tablestore, spark, SEGMENTS_KEY, "segment", config.full)
        return dg.MaterializeResult(metadata={**changes.metadata(), **_json(metadata),
                                              **_numbers(tablestore, metadata, started)})

    @dg.asset(key=LTV_KEY, deps=[SEGMENTS_KEY], group_name="customers", kinds={"iceberg", "spark"},
              retry_policy=STEP_RETRY, automation_condition=FOLLOWS_UPSTREAM)
    def customer_lifetime_value(context: dg.AssetExecutionContext, config: RefreshConfig,
                                tablestore: TableStoreResource, spark: SparkResource) -> dg.MaterializeResult:
        """``lifetime_value`` (purchases minus refunds) for customers who bought: a partial update,
        so customers without purchases keep NULL."""
        started = time.monotonic()
        changes, metadata = _refresh(context, tablestore, spark, LTV_KEY, "lifetime_value", config.full)
        return dg.MaterializeResult(metadata={**changes.metadata(), **_json(metadata),
                                              **_numbers(tablestore, metadata, started)})

    return [customers, customer_segments, customer_lifetime_value]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(assets=build_customer_assets())
