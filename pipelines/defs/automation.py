"""Declarative automation: the daemon, not a script, decides what runs after new data.

The sensors of ``ingest/sensors.py`` and ``erasure/sensors.py`` start runs for landed files;
every asset downstream of them carries an ``AutomationCondition`` (``eager``: run when an
upstream was updated and none is missing or in progress), and this sensor evaluates them.
"""

from __future__ import annotations

import datetime

import dagster as dg

from pipelines.settings import selected_settings

AUTOMATION_SENSOR = "lakehouse_automation"
# Seconds between two evaluations (settings `automation: {tick-seconds: N}` shortens it).
AUTOMATION_INTERVAL = 30
# Conditions on the assets downstream of ingestion (see their @asset definitions).
FOLLOWS_UPSTREAM = dg.AutomationCondition.eager()
# The tables users read (events, customers): the UI warns when one has not been materialized
# for six hours, and fails its freshness after a day (the landing sensor runs every few seconds).
USER_TABLE_FRESHNESS = dg.FreshnessPolicy.time_window(
    fail_window=datetime.timedelta(days=1), warn_window=datetime.timedelta(hours=6))


@dg.definitions
def defs() -> dg.Definitions:
    settings = selected_settings()
    running = settings.automation.running
    return dg.Definitions(sensors=[dg.AutomationConditionSensorDefinition(
        AUTOMATION_SENSOR, target=dg.AssetSelection.all(),
        default_status=dg.DefaultSensorStatus.RUNNING if running else dg.DefaultSensorStatus.STOPPED,
        minimum_interval_seconds=settings.automation.tick_seconds or AUTOMATION_INTERVAL,
        description="Evaluates the assets' automation conditions.",
    )])
