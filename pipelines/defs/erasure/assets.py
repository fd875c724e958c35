"""GDPR erasure: requests land as a file, fill ``erasure_requests``, and an asset executes them.

The execution deletes the subjects' rows from events and customers, then runs tablestore's
verified erasure (rewrite every file that held them, expire older snapshots, remove orphan
files, read every Parquet file back to prove they are gone, append the audit record), and
finally marks the requests done. The requests table doubles as the suppression list of
ingestion, so re-running the pipeline never brings an erased subject back.

Between the logical DELETE and the physical erasure, the erasure flows down as deletes: the
derived tables (the hourly rollup, the customers and their features) are refreshed from the
changelog of ``events``, which holds the subjects' rows as DELETEs, so no derived table keeps
them. This must happen before the physical erasure, which expires every older snapshot and with
them the changelog's range. What each derived asset consumed is recorded in this asset's
metadata (``consumed:<asset>``), where the asset's next run finds it
(:func:`pipelines.defs.changes.last_consumed`).
"""


import datetime
import json
import time
from collections.abc import Callable
from typing import Any

import dagster as dg
import pyarrow as pa

from pipelines.defs.automation import FOLLOWS_UPSTREAM
from pipelines.defs.changes import ERASURE_CONSUMED_PREFIX, last_consumed
from pipelines.defs.customers.assets import (
    CUSTOMERS_KEY,
    LTV_KEY,
    REBUILD,
    SEGMENTS_KEY,
    refresh_customers,
    refresh_feature,
)
from pipelines.defs.ingest.assets import EVENTS_HOURLY_KEY, EVENTS_KEY, REQUESTS_LANDING_KEY
from pipelines.defs.ingest.landing_bucket import stage_requests
from pipelines.defs.metadata import snapshot_metadata
from pipelines.defs.resources import SparkResource, TableStoreResource
from pipelines.defs.retries import STEP_RETRY
from pipelines.defs.rollups.assets import ROLLUP_KEY, refresh_rollup
from pipelines.settings import PipelineSettings, selected_settings, table_name
from tablestore.maintenance.erasure import erase
from tablestore.sql.session import SqlSession

REQUESTS_KEY = dg.AssetKey(["lakehouse", "shop", "erasure_requests"])
ERASURE_KEY = dg.AssetKey(["lakehouse", "shop", "gdpr_erasure"])
REQUESTS = table_name("erasure_requests")
ERASED_TABLES = ("events", "customers")
REQUEST_SCHEMA = pa.schema([
    pa.field("request_id", pa.string(), nullable=False),
    ("user_id", pa.int64()),
    ("requested_at", pa.timestamp("us")),
    ("status", pa.string()),
    ("completed_at", pa.timestamp("us")),
])
PENDING = f"SELECT user_id FROM {REQUESTS} WHERE status = 'pending'"


def load_requests(store: TableStoreResource, settings: PipelineSettings) -> tuple[int, int]:
    """Add the requests of the landing file that the table does not hold yet; (new, total)."""
    stage_requests(settings)  # in the stack, from the landing bucket into the landing folder
    catalog = store.catalog()
    if not store.exists("erasure_requests"):
        catalog.create_table(("shop", "erasure_requests"), schema=REQUEST_SCHEMA)
        with store.table("erasure_requests").update_schema() as update:
            update.set_identifier_fields("request_id")
    table = store.table("erasure_requests")
    known = set(table.scan(columns=["request_id"]).to_arrow().column("request_id").to_pylist())
    new = []
    for path in sorted(settings.requests_landing.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            request = json.loads(line)
            if request["request_id"] in known:
                continue
            known.add(request["request_id"])
            new.append({
                "request_id": request["request_id"], "user_id": int(request["user_id"]),
                "requested_at": datetime.datetime.fromisoformat(request["requested_at"]),
                "status": "pending", "completed_at": None,
            })
    if new:
        table.append(pa.Table.from_pylist(new, schema=REQUEST_SCHEMA))
    return len(new), len(known)


def delete_subjects(sql: SqlSession, store: TableStoreResource) -> dict[str, int]:
    """``DELETE FROM t WHERE user_id IN (SELECT user_id FROM erasure_requests WHERE status = 'pending')``
    on events and customers, through tablestore's SQL layer (Spark evaluates the subquery);
    returns the rows deleted per table."""
    deleted = {}
    for name in ERASED_TABLES:
        if store.exists(name):
            result = sql.execute_one(f"DELETE FROM {table_name(name)} WHERE user_id IN ({PENDING})")
            deleted[name] = int(result.affected or 0)
    return deleted


def mark_done(store: TableStoreResource, request_ids: list[str]) -> None:
    table = store.table("erasure_requests")
    rows = table.scan(filter="status = 'pending'").to_arrow().to_pylist()
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    done = [{**r, "status": "done", "completed_at": now} for r in rows if r["request_id"] in request_ids]
    # One overwrite replaces exactly these requests' rows, atomically.
    ids = ", ".join(f"'{i}'" for i in request_ids)
    table.overwrite(pa.Table.from_pylist(done, schema=REQUEST_SCHEMA), filter=f"request_id IN ({ids})")


AUDIT = "erasure_audit"


def verified_audit(store: TableStoreResource, request_id: str) -> dict[str, Any] | None:
    """The verified audit record of ``request_id``, if an earlier attempt wrote it (a few rows)."""
    if not store.exists(AUDIT):
        return None
    rows = store.table(AUDIT).scan(filter=f"request_id = '{request_id}'").to_arrow().to_pylist()
    return next((r for r in rows if r["verified"]), None)


def refresh_downstream(instance: dg.DagsterInstance, store: TableStoreResource,
                       spark: SparkResource) -> dict[str, Any]:
    """Refresh every table derived from ``events`` from its changes since what it consumed; the
    consumed snapshots (``consumed:<asset>``) and what each refresh recomputed."""
    session = spark.session
    out: dict[str, Any] = {}

    def record(key: dg.AssetKey, until: int | None, what: dict[str, Any]) -> None:
        out[ERASURE_CONSUMED_PREFIX + key.to_user_string()] = until or 0
        out[f"refreshed:{key.to_user_string()}"] = what

    changes, numbers = refresh_rollup(store, session, last_consumed(instance, ROLLUP_KEY, ERASURE_KEY))
    record(ROLLUP_KEY, changes.until, {"mode": "full" if changes.full else "incremental",
                                       "hours_recomputed": numbers["hours_recomputed"]})
    if store.exists("customers"):
        changes, numbers = refresh_customers(store, session, last_consumed(instance, CUSTOMERS_KEY, ERASURE_KEY))
        record(CUSTOMERS_KEY, changes.until, {"mode": "full" if changes.full else "incremental",
                                              "users_recomputed": numbers["users_recomputed"]})
        until = changes.until
        for key, column in ((SEGMENTS_KEY, "segment"), (LTV_KEY, "lifetime_value")):
            if column in [f.name for f in store.table("customers").schema().fields]:
                feature, _ = refresh_feature(store, session, column, last_consumed(instance, key, ERASURE_KEY),
                                             until, changes.full)
                record(key, feature.until, {"mode": "full" if feature.full else "incremental",
                                            "users_recomputed": feature.keys.num_rows})
        out[REBUILD] = numbers[REBUILD]
    return out


def run_erasure(store: TableStoreResource, spark: SparkResource,
                before_erase: Callable[[], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Execute the pending requests; returns the erasure report as plain data. ``before_erase``
    runs between the logical DELETE and the physical erasure (the derived tables' refresh)."""
    requests = store.table("erasure_requests").scan(filter="status = 'pending'").to_arrow().to_pylist()
    if not requests:
        return {"pending": 0, "message": "no pending erasure requests"}
    users = sorted({int(r["user_id"]) for r in requests})
    request_ids = sorted(r["request_id"] for r in requests)
    request_id = ",".join(request_ids)
    audited = verified_audit(store, request_id)
    if audited is not None:
        # A retried step whose first attempt erased and audited, then died before marking the
        # requests done: the erasure happened once, and is recorded once.
        mark_done(store, request_ids)
        return {"pending": len(requests), "request_ids": request_ids, "users": users,
                "rows_removed": audited["rows_removed"], "files_rewritten": audited["files_rewritten"],
                "files_removed": audited["files_removed"], "verified": True,
                "audit_table": "lakehouse.shop.erasure_audit", "resumed": "audited by an earlier attempt"}
    sql = store.sql(spark.session())
    deleted = delete_subjects(sql, store)
    downstream = before_erase() if before_erase is not None else {}
    tables = [f"shop.{t}" for t in ERASED_TABLES if store.exists(t)]
    report = erase(
        store.catalog(), tables, column="user_id", request_id=request_id, values=users,
        audit_table=f"shop.{AUDIT}",
        rows_deleted_before={f"shop.{name}": rows for name, rows in deleted.items()},
    )
    mark_done(store, request_ids)
    return {
        "pending": len(requests),
        "request_ids": request_ids,
        "users": users,
        "rows_deleted": deleted,
        "rows_removed": report.rows_removed,  # the SQL DELETE's rows and any erase() still found
        "files_rewritten": report.files_rewritten,
        "files_removed": report.files_removed,
        "verified": report.verified,
        "audit_table": "lakehouse.shop.erasure_audit",
        **downstream,
    }


def build_erasure_assets(settings: PipelineSettings) -> list[dg.AssetsDefinition]:
    # After the events: the requests table is also ingestion's suppression list, so requests
    # loaded before the events landed would keep their subjects out of events, and the erasure
    # would find nothing to delete. As a dependency, this order holds inside a run too (the
    # automation may request the hours and the requests together).
    @dg.asset(key=REQUESTS_KEY, deps=[REQUESTS_LANDING_KEY, EVENTS_KEY, EVENTS_HOURLY_KEY], group_name="erasure",
              kinds={"iceberg"}, retry_policy=STEP_RETRY)
    def erasure_requests(tablestore: TableStoreResource) -> dg.MaterializeResult:
        """``lakehouse.shop.erasure_requests``: the landed requests, status ``pending`` until executed."""
        started = time.monotonic()
        new, total = load_requests(tablestore, settings)
        return dg.MaterializeResult(metadata={
            "new_requests": new, "requests": total,
            **snapshot_metadata(tablestore.table("erasure_requests"), started, committed=new > 0),
        })

    # After the rollup too: the erasure refreshes it, and the two must not write it at once.
    @dg.asset(key=ERASURE_KEY, deps=[REQUESTS_KEY, EVENTS_KEY, EVENTS_HOURLY_KEY, LTV_KEY, ROLLUP_KEY],
              group_name="erasure",
              kinds={"iceberg", "spark"}, retry_policy=STEP_RETRY, automation_condition=FOLLOWS_UPSTREAM)
    def gdpr_erasure(context: dg.AssetExecutionContext, tablestore: TableStoreResource,
                     spark: SparkResource) -> dg.MaterializeResult:
        """Delete the pending subjects from events and customers, refresh the derived tables from
        the changes (the deletes flow down), erase them physically (rewrite, expire, remove
        orphans, verify), write the audit record and mark the requests done."""
        report = run_erasure(tablestore, spark, lambda: refresh_downstream(context.instance, tablestore, spark))
        return dg.MaterializeResult(metadata={k: dg.MetadataValue.json(v) if isinstance(v, (list, dict)) else v
                                              for k, v in report.items()})

    return [erasure_requests, gdpr_erasure]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(assets=build_erasure_assets(selected_settings()))
