"""Ingestion assets: landing files, daily then hourly events, schema evolution, rollover.

The order the dates impose (config ``evolution.at`` and ``rollover.cutover``)::

    landing ─▶ events (daily, up to the cut-over) ─▶ schema evolution (after the days before
    ``evolution.at``) ─▶ rollover (after every daily partition) ─▶ events_hourly (from the cut-over)
"""


import datetime
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import dagster as dg
from dagster import AssetExecutionContext

from pipelines.defs.automation import FOLLOWS_UPSTREAM, USER_TABLE_FRESHNESS
from pipelines.defs.ingest import events as ev
from pipelines.defs.ingest.landing import write_erasure_requests, write_landing_day
from pipelines.defs.ingest.landing_bucket import stage_events
from pipelines.defs.metadata import snapshot_metadata
from pipelines.defs.publish import audit_branch, drop_finished_audit_branches, publish
from pipelines.defs.quality_checks import check_result, lakehouse
from pipelines.defs.resources import SparkResource, TableStoreResource
from pipelines.defs.retries import STEP_RETRY
from pipelines.settings import PipelineSettings, selected_settings
from quality.suites import events_batch_valid

LANDING_KEY = dg.AssetKey(["landing", "events"])
EVENTS_KEY = dg.AssetKey(["lakehouse", "shop", "events"])
EVENTS_HOURLY_KEY = dg.AssetKey(["lakehouse", "shop", "events_hourly"])
EVOLUTION_KEY = dg.AssetKey(["lakehouse", "shop", "events_schema_evolution"])
ROLLOVER_KEY = dg.AssetKey(["lakehouse", "shop", "events_rollover"])
REQUESTS_LANDING_KEY = dg.AssetKey(["landing", "erasure_requests"])


def daily_partitions(settings: PipelineSettings) -> dg.DailyPartitionsDefinition:
    return dg.DailyPartitionsDefinition(
        start_date=settings.data.start.isoformat(), end_date=settings.rollover.cutover.isoformat()
    )


def hourly_partitions(settings: PipelineSettings) -> dg.HourlyPartitionsDefinition:
    return dg.HourlyPartitionsDefinition(
        start_date=f"{settings.rollover.cutover.isoformat()}-00:00", end_date=f"{settings.data.end.isoformat()}-00:00"
    )


def _naive(value: datetime.datetime) -> datetime.datetime:
    return value.astimezone(datetime.UTC).replace(tzinfo=None)


def _ingest_result(result: ev.IngestResult, store: TableStoreResource, started: float,
                   audit: dict[str, Any]) -> dg.MaterializeResult:
    table = store.table("events")
    return dg.MaterializeResult(metadata={
        **audit,
        "window": f"{result.start:%Y-%m-%d %H:%M} .. {result.end:%Y-%m-%d %H:%M}",
        "rows": result.rows,
        "action": result.action,
        # A re-run writes only the partitions whose landing rows differ from main's.
        "partitions_written": len(result.partitions),
        "partitions_unchanged": len(result.unchanged),
        "commit_id": result.commit_id,
        # Numbers Dagster plots per asset; snapshot_id 0: unchanged, nothing committed.
        **snapshot_metadata(table, started, committed=result.snapshot_id is not None),
        "partition_spec": str(table.spec()),
        "schema_id": table.schema().schema_id,
        # Which Spark tasks wrote the files (none when unchanged): the run process writes none.
        "write_tasks": int(result.written_by.get("tasks", "0")),
        "write_executors": result.written_by.get("executors", ""),
        "write_hosts": result.written_by.get("hosts", ""),
    })


BATCH_CHECK = "events_batch_valid"


def _batch_check(key: dg.AssetKey) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(BATCH_CHECK, asset=key, blocking=True,
                             description="GX suite events_batch_valid on the run's audit branch: only a batch "
                                         "that passes it is published to main")


def audited_ingest(context: AssetExecutionContext, tablestore: TableStoreResource, spark: SparkResource,
                   settings: PipelineSettings, grain: str) -> Iterator[dg.AssetCheckResult | dg.MaterializeResult]:
    """Write-audit-publish of one ingest (``pipelines.defs.publish``): INSERT OVERWRITE into the
    run's audit branch, the GX batch suite on that branch, and main fast-forwarded to it only when
    the suite passed. A failing batch fails the step with the check's result and the branch's name;
    main does not move, and the branch stays for inspection until the asset's next run."""
    started = time.monotonic()
    window = context.partition_time_window
    start, end = _naive(window.start), _naive(window.end)
    branch = audit_branch(context.run.run_id)
    # Files the landing sensor saw are registered here: the run needs no landing step before it.
    # In the stack they are first copied from the landing bucket (its days of this window).
    stage_events(settings, start, end)
    ev.register_landing(tablestore.sql(None), settings)
    ev.ensure_events_table(tablestore.sql(None), settings.events.format_version)
    dropped = drop_finished_audit_branches(tablestore.table("events"), context.instance)
    result = ev.ingest(tablestore.sql(spark.session()), start, end, grain, settings.events.format_version,
                       branch=branch)
    written = result.snapshot_id is not None
    lake = replace(lakehouse(tablestore, spark), refs={"events": branch} if written else {}, window=(start, end))
    run = events_batch_valid(lake)
    audit: dict[str, Any] = {
        "audit_branch": branch if written else "",
        "audited_snapshot_id": result.snapshot_id or 0,
        "audit_branches_dropped": ", ".join(dropped),
    }
    checked = check_result(run, settings)
    yield dg.AssetCheckResult(check_name=BATCH_CHECK, passed=checked.passed, severity=checked.severity,
                              description=checked.description, metadata={**checked.metadata, **audit})
    if not run.success:
        raise dg.Failure(
            description=f"events of {start:%Y-%m-%d %H:%M} .. {end:%Y-%m-%d %H:%M} failed {BATCH_CHECK}: main was "
                        f"not published; the batch is kept on branch {branch} for inspection "
                        f"(SELECT ... FROM {ev.EVENTS}.branch_{branch})",
            metadata={**audit, "failed": dg.MetadataValue.json(run.failed_expectations())},
            allow_retries=False,
        )
    published = publish(tablestore.table("events"), branch) if written else 0
    yield _ingest_result(result, tablestore, started, {**audit, "published_snapshot_id": published})


def build_ingest_assets(settings: PipelineSettings) -> list[dg.AssetsDefinition]:
    daily = daily_partitions(settings)
    before_evolution = [d.isoformat() for d in settings.daily_dates if d < settings.evolution.at]

    @dg.asset(key=LANDING_KEY, retry_policy=STEP_RETRY, group_name="ingest", kinds={"parquet"})
    def landing_events(tablestore: TableStoreResource, spark: SparkResource) -> dg.MaterializeResult:
        """Synthetic shop events as Hive-style Parquet (``landing/events/dt=YYYY-MM-DD/``), registered
        in the external table ``lakehouse.shop.landing_events``."""
        written = [write_landing_day(settings, day) for day in settings.data.dates]
        files_added = ev.register_landing(tablestore.sql(None), settings)
        return dg.MaterializeResult(metadata={
            "days": len(written),
            "rows": sum(rows for _, rows, _ in written),
            "files_changed": sum(1 for *_, changed in written if changed),
            "files_registered": files_added,
            "path": str(settings.events_landing),
        })

    @dg.asset(key=EVENTS_KEY, deps=[LANDING_KEY], partitions_def=daily, backfill_policy=dg.BackfillPolicy.single_run(),
              group_name="ingest", kinds={"iceberg", "spark"}, retry_policy=STEP_RETRY,
              freshness_policy=USER_TABLE_FRESHNESS, check_specs=[_batch_check(EVENTS_KEY)])
    def events(context: AssetExecutionContext, tablestore: TableStoreResource,
               spark: SparkResource) -> Iterator[dg.AssetCheckResult | dg.MaterializeResult]:
        """``lakehouse.shop.events`` by day, partitioned by ``days(event_ts)``: one landing day per
        partition, written with INSERT OVERWRITE so a re-run replaces the day. A range of days
        runs as one INSERT OVERWRITE, into the run's audit branch; main gets it once the batch
        passed its check."""
        yield from audited_ingest(context, tablestore, spark, settings, ev.DAY_FIELD)

    @dg.asset(
        key=EVOLUTION_KEY, retry_policy=STEP_RETRY, group_name="ingest", kinds={"iceberg"},
        automation_condition=FOLLOWS_UPSTREAM,
        deps=[dg.AssetDep(EVENTS_KEY, partition_mapping=dg.SpecificPartitionsPartitionMapping(before_evolution))],
    )
    def events_schema_evolution(tablestore: TableStoreResource) -> dg.MaterializeResult:
        """Evolve ``events`` before the days that carry ``device`` land: ADD COLUMN device, widen
        quantity, price and amount, RENAME country TO country_code. Metadata only."""
        ran = ev.evolve_schema(tablestore.sql(None), format_version=settings.events.format_version)
        table = tablestore.table("events")
        return dg.MaterializeResult(metadata={
            "statements": dg.MetadataValue.md("\n".join(f"- `{s}`" for s in ran) or "already evolved"),
            "schema_id": table.schema().schema_id,
            "schema": dg.MetadataValue.md(
                "\n".join(f"- {f.name}: {f.field_type}" for f in table.schema().fields)
            ),
        })

    # The cut-over follows the data: eager waits until every daily partition is materialized.
    @dg.asset(key=ROLLOVER_KEY, deps=[EVENTS_KEY, EVOLUTION_KEY], group_name="ingest", kinds={"iceberg"},
              retry_policy=STEP_RETRY, automation_condition=FOLLOWS_UPSTREAM)
    def events_rollover(tablestore: TableStoreResource) -> dg.MaterializeResult:
        """At the cut-over, REPLACE PARTITION FIELD days(event_ts) WITH hours(event_ts). Files
        written before keep the day spec; metadata only."""
        ran = ev.roll_over(tablestore.sql(None), settings.events.format_version)
        table = tablestore.table("events")
        return dg.MaterializeResult(metadata={
            "statement": ran or "already rolled over",
            "spec_id": table.spec().spec_id,
            "spec": str(table.spec()),
        })

    @dg.asset(
        key=EVENTS_HOURLY_KEY, deps=[ROLLOVER_KEY, EVOLUTION_KEY], partitions_def=hourly_partitions(settings),
        backfill_policy=dg.BackfillPolicy.single_run(), group_name="ingest", kinds={"iceberg", "spark"},
        retry_policy=STEP_RETRY, freshness_policy=USER_TABLE_FRESHNESS, check_specs=[_batch_check(EVENTS_HOURLY_KEY)],
    )
    def events_hourly(context: AssetExecutionContext, tablestore: TableStoreResource,
                      spark: SparkResource) -> Iterator[dg.AssetCheckResult | dg.MaterializeResult]:
        """``lakehouse.shop.events`` by hour from the cut-over, partitioned by ``hours(event_ts)``.
        A range of hours runs as one INSERT OVERWRITE into the run's audit branch, published once
        it passed its check."""
        yield from audited_ingest(context, tablestore, spark, settings, ev.HOUR_FIELD)

    @dg.asset(key=REQUESTS_LANDING_KEY, retry_policy=STEP_RETRY, group_name="erasure", kinds={"json"})
    def landing_erasure_requests() -> dg.MaterializeResult:
        """The privacy desk's export of GDPR erasure requests (``landing/erasure_requests``)."""
        path, changed = write_erasure_requests(settings)
        return dg.MaterializeResult(metadata={"path": str(path), "requests": len(settings.erasure.requested_users),
                                              "changed": changed})

    return [landing_events, events, events_schema_evolution, events_rollover, events_hourly,
            landing_erasure_requests]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(assets=build_ingest_assets(selected_settings()))
