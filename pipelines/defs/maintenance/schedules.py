"""The nightly maintenance schedule: every table's maintenance asset, after ingestion.

A tick is skipped while another run of the code location is queued or running (an ingest, an
automation run): maintenance commits would race the writers' commits and retry. The next tick
catches up.
"""

from __future__ import annotations

import dagster as dg

from pipelines.defs.maintenance.assets import MAINTENANCE_GROUP
from pipelines.settings import selected_settings

MAINTENANCE_JOB = "table_maintenance"
MAINTENANCE_SCHEDULE = "table_maintenance_nightly"
MAINTENANCE_TAG = "lakehouse/maintenance"
MAINTENANCE_CRON = "0 3 * * *"
IN_PROGRESS = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
               dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]

maintenance_job = dg.define_asset_job(MAINTENANCE_JOB, selection=dg.AssetSelection.groups(MAINTENANCE_GROUP),
                                      tags={MAINTENANCE_TAG: "true"})


def busy_runs(instance: dg.DagsterInstance) -> list[str]:
    """Runs other than maintenance that are queued or running."""
    runs = instance.get_runs(filters=dg.RunsFilter(statuses=IN_PROGRESS))
    return [r.run_id for r in runs if r.tags.get(MAINTENANCE_TAG) != "true"]


def build_maintenance_schedule(running: bool = True) -> dg.ScheduleDefinition:
    @dg.schedule(name=MAINTENANCE_SCHEDULE, job=maintenance_job, cron_schedule=MAINTENANCE_CRON,
                 default_status=dg.DefaultScheduleStatus.RUNNING if running else dg.DefaultScheduleStatus.STOPPED,
                 description="Compaction, expiry, orphan removal and manifest rewrites of every table, nightly.")
    def table_maintenance_nightly(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        busy = busy_runs(context.instance)
        if busy:
            return dg.SkipReason(f"{len(busy)} run(s) in progress; maintenance runs after them")
        when = context.scheduled_execution_time
        return dg.RunRequest(run_key=f"maintenance:{when.isoformat() if when else 'now'}",
                             tags={MAINTENANCE_TAG: "true"})

    return table_maintenance_nightly


@dg.definitions
def defs() -> dg.Definitions:
    schedule = build_maintenance_schedule(selected_settings().automation.running)
    return dg.Definitions(jobs=[maintenance_job], schedules=[schedule])
