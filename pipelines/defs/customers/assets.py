"""The customers dimension and the features merged into it.

``customers`` is rebuilt from the events; ``customer_segments`` and ``customer_lifetime_value``
add their column with a merge_columns the first time, and afterwards refresh it with an
update_columns (a partial update: customers absent from the source keep their value). The
feature query is a Spark DataFrame and the merge runs in Spark tasks
(``tablestore.spark.tasks.column_merge_tasks.merge_in_tasks``, classic or Spark Connect): the run
process plans and commits; the feature rows never reach it.
"""

import time
from typing import TYPE_CHECKING

import dagster as dg

from pipelines.defs.automation import FOLLOWS_UPSTREAM, USER_TABLE_FRESHNESS
from pipelines.defs.ingest.assets import EVENTS_HOURLY_KEY, EVENTS_KEY
from pipelines.defs.metadata import snapshot_metadata
from pipelines.defs.resources import SparkResource, TableStoreResource
from pipelines.defs.retries import STEP_RETRY, step_commit_id
from pipelines.settings import table_name
from tablestore.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CUSTOMERS_KEY = dg.AssetKey(["lakehouse", "shop", "customers"])
SEGMENTS_KEY = dg.AssetKey(["lakehouse", "shop", "customer_segments"])
LTV_KEY = dg.AssetKey(["lakehouse", "shop", "customer_lifetime_value"])
CUSTOMERS = table_name("customers")
EVENTS = table_name("events")
BASE_COLUMNS = "user_id BIGINT NOT NULL, email STRING, country_code STRING, first_seen TIMESTAMP"

SEGMENT_SQL = f"""
SELECT user_id,
       CASE WHEN count_if(event_type = 'purchase') >= 8 THEN 'vip'
            WHEN count_if(event_type = 'purchase') >= 3 THEN 'regular'
            WHEN count_if(event_type = 'purchase') >= 1 THEN 'occasional'
            ELSE 'browser' END AS segment
FROM {EVENTS} GROUP BY user_id
"""
# Only customers who bought have a lifetime value; the others keep what they had (NULL).
LTV_SQL = f"""
SELECT user_id,
       CAST(sum(CASE WHEN event_type = 'purchase' THEN amount ELSE -amount END) AS DECIMAL(14,2)) AS lifetime_value
FROM {EVENTS} WHERE event_type IN ('purchase', 'refund') GROUP BY user_id
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


def _numbers(tablestore: TableStoreResource, merged: dict[str, str | int], started: float) -> dict[str, int | float]:
    # The merge's snapshot (none when nothing changed), as numbers the UI plots.
    return snapshot_metadata(tablestore.table("customers"), started, committed=merged["snapshot_id"] != "None")


def build_customer_assets() -> list[dg.AssetsDefinition]:
    @dg.asset(key=CUSTOMERS_KEY, deps=[EVENTS_KEY, EVENTS_HOURLY_KEY], group_name="customers",
              kinds={"iceberg", "spark"}, retry_policy=STEP_RETRY, automation_condition=FOLLOWS_UPSTREAM,
              freshness_policy=USER_TABLE_FRESHNESS)
    def customers(tablestore: TableStoreResource, spark: SparkResource) -> dg.MaterializeResult:
        """``lakehouse.shop.customers``: one row per user seen in the events (identifier user_id).
        Rebuilt with INSERT OVERWRITE; the feature columns are refilled by the assets after it."""
        started = time.monotonic()
        sql = tablestore.sql(spark.session())
        if not tablestore.exists("customers"):
            sql.execute_one(f"CREATE TABLE {CUSTOMERS} ({BASE_COLUMNS})")
            sql.execute_one(f"ALTER TABLE {CUSTOMERS} SET IDENTIFIER FIELDS user_id")
        table = tablestore.table("customers")
        extra = [f.name for f in table.schema().fields][4:]
        nulls = "".join(f", NULL AS {name}" for name in extra)
        sql.execute_one(
            f"INSERT OVERWRITE {CUSTOMERS} SELECT user_id, min_by(email, event_ts), min_by(country_code, event_ts), "
            f"min(event_ts){nulls} FROM {EVENTS} GROUP BY user_id"
        )
        numbers = snapshot_metadata(table, started)
        return dg.MaterializeResult(metadata={"rows": numbers["rows_total"], **numbers})

    @dg.asset(key=SEGMENTS_KEY, deps=[CUSTOMERS_KEY], group_name="customers", kinds={"iceberg", "spark"},
              retry_policy=STEP_RETRY, automation_condition=FOLLOWS_UPSTREAM)
    def customer_segments(context: dg.AssetExecutionContext, tablestore: TableStoreResource,
                          spark: SparkResource) -> dg.MaterializeResult:
        """``segment`` (vip, regular, occasional, browser) from purchase counts, merged into
        ``customers`` with merge_columns (update_columns once the column exists)."""
        started = time.monotonic()
        source = tablestore.sql(spark.session()).planner().dataframe(SEGMENT_SQL)
        metadata = merge_feature(tablestore.table("customers"), source, "segment",
                                 step_commit_id(context, "segment"))
        # One row per segment (four at most): the only rows of the feature this process sees.
        counts = {r["segment"]: r["count"] for r in source.groupBy("segment").count().collect()}
        return dg.MaterializeResult(metadata={
            **metadata, **_numbers(tablestore, metadata, started), "source_rows": sum(counts.values()),
            "segments": counts,
        })

    @dg.asset(key=LTV_KEY, deps=[SEGMENTS_KEY], group_name="customers", kinds={"iceberg", "spark"},
              retry_policy=STEP_RETRY, automation_condition=FOLLOWS_UPSTREAM)
    def customer_lifetime_value(context: dg.AssetExecutionContext, tablestore: TableStoreResource,
                                spark: SparkResource) -> dg.MaterializeResult:
        """``lifetime_value`` (purchases minus refunds) for customers who bought: a partial update,
        so customers without purchases keep NULL."""
        started = time.monotonic()
        source = tablestore.sql(spark.session()).planner().dataframe(LTV_SQL)
        metadata = merge_feature(tablestore.table("customers"), source, "lifetime_value",
                                 step_commit_id(context, "lifetime_value"))
        return dg.MaterializeResult(metadata={**metadata, **_numbers(tablestore, metadata, started),
                                              "source_rows": source.count()})

    return [customers, customer_segments, customer_lifetime_value]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(assets=build_customer_assets())
