"""The landing sensor: a file that lands requests a run for its partitions, once.

The landing folder holds one Hive-style directory per day (``dt=YYYY-MM-DD/*.parquet``); in the
stack it is the ``events/`` prefix of the landing bucket (``landing_bucket.py``), and the run
copies its days' files from there before it ingests them. Each tick lists it and compares every
file's fingerprint (size and modification time) with the sensor's cursor, the fingerprints of
the files already requested. The daemon stores the cursor
in the Dagster instance with the tick, so it survives a restart of the daemon: a file is
requested once, and again only when it is replaced (the landing writer leaves a file whose bytes
would not change untouched; a file uploaded to the bucket again is replaced).

Which asset a day goes to, and when, follows from the settings and the data:

- a day before ``rollover.cutover`` is a partition of the daily ``events``; a day from the
  cut-over on is 24 partitions of ``events_hourly``;
- a day from ``evolution.at`` on carries ``device`` and waits until the schema evolution has
  materialized (which itself follows the days before it, ``AutomationCondition.eager``);
- an hourly day waits until the rollover has materialized (which follows the last daily
  partition), so the cut-over happens when the data reaches it, not in a hand-written order.

A file that waits is left out of the cursor and looked at again at the next tick. Contiguous
days of one asset go in one run over a range of partitions (one INSERT OVERWRITE, the assets'
single-run backfill policy).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import dagster as dg

from pipelines.defs.ingest.assets import EVENTS_HOURLY_KEY, EVENTS_KEY, EVOLUTION_KEY, ROLLOVER_KEY
from pipelines.defs.ingest.landing_bucket import landed_events
from pipelines.settings import PipelineSettings, selected_settings

LANDING_SENSOR = "landing_events_sensor"
# Seconds between two ticks: a directory listing, cheap enough to run often.
LANDING_INTERVAL = 10
RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"


def day_of(relative: str) -> datetime.date | None:
    directory = relative.split("/", 1)[0]
    try:
        return datetime.date.fromisoformat(directory.removeprefix("dt="))
    except ValueError:
        return None


@dataclass
class LandingPlan:
    """What a tick asks for: the runs, the files they cover, and what waits and why."""

    runs: list[dg.RunRequest] = field(default_factory=list)
    requested: dict[str, str] = field(default_factory=dict)
    waiting: dict[str, str] = field(default_factory=dict)
    ignored: dict[str, str] = field(default_factory=dict)
    ignored_fingerprints: dict[str, str] = field(default_factory=dict)


def _ranges(days: list[datetime.date]) -> list[list[datetime.date]]:
    out: list[list[datetime.date]] = []
    for day in sorted(days):
        if out and (day - out[-1][-1]).days == 1:
            out[-1].append(day)
        else:
            out.append([day])
    return out


def plan_landing(settings: PipelineSettings, seen: Mapping[str, str], landed: Mapping[str, str],
                 evolved: bool, rolled_over: bool) -> LandingPlan:
    """The runs for the files of ``landed`` that ``seen`` (the cursor) does not hold as they are."""
    plan = LandingPlan()
    by_day: dict[datetime.date, dict[str, str]] = {}
    for relative, fingerprint in landed.items():
        if seen.get(relative) == fingerprint:
            continue
        day = day_of(relative)
        if day is None or not settings.data.start <= day < settings.data.end:
            plan.ignored[relative] = "outside the landing days of the settings"
            plan.ignored_fingerprints[relative] = fingerprint
            continue
        if day >= settings.rollover.cutover and not rolled_over:
            plan.waiting[relative] = "an hourly day: waits for the rollover"
            continue
        if day >= settings.evolution.at and not evolved:
            plan.waiting[relative] = "carries device: waits for the schema evolution"
            continue
        by_day.setdefault(day, {})[relative] = fingerprint
    daily = [d for d in by_day if d < settings.rollover.cutover]
    hourly = [d for d in by_day if d >= settings.rollover.cutover]
    for key, days, hours in ((EVENTS_KEY, daily, False), (EVENTS_HOURLY_KEY, hourly, True)):
        for span in _ranges(days):
            first = span[0].isoformat() + ("-00:00" if hours else "")
            last = span[-1].isoformat() + ("-23:00" if hours else "")
            files = {r: f for d in span for r, f in by_day[d].items()}
            plan.requested.update(files)
            plan.runs.append(dg.RunRequest(
                # A run key names the files' versions: Dagster never launches the same key twice.
                run_key=f"{key.path[-1]}:{first}..{last}:" + ",".join(f"{r}@{f}" for r, f in sorted(files.items())),
                asset_selection=[key],
                tags={RANGE_START: first, RANGE_END: last, "lakehouse/trigger": LANDING_SENSOR},
            ))
    return plan


def default_status(settings: PipelineSettings) -> dg.DefaultSensorStatus:
    """Running unless the settings say ``automation: {running: false}``."""
    return dg.DefaultSensorStatus.RUNNING if settings.automation.running else dg.DefaultSensorStatus.STOPPED


def landing_place(settings: PipelineSettings, prefix: str) -> str:
    """Where the sensors look for landed files: the landing bucket's prefix, else the local folder."""
    if settings.landing_bucket is not None:
        return f"s3://{settings.landing_bucket.name}/{prefix}/"
    return str(settings.landing / prefix)


def _materialized(instance: dg.DagsterInstance, key: dg.AssetKey) -> bool:
    return instance.get_latest_materialization_event(key) is not None


def build_landing_sensor(settings: PipelineSettings) -> dg.SensorDefinition:
    @dg.sensor(
        name=LANDING_SENSOR, asset_selection=[EVENTS_KEY, EVENTS_HOURLY_KEY],
        minimum_interval_seconds=settings.automation.tick_seconds or LANDING_INTERVAL,
        default_status=default_status(settings),
        description=f"New or replaced files in {landing_place(settings, 'events')}: runs for their day or hour "
                    "partitions.",
    )
    def landing_events_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        plan = plan_landing(settings, seen, landed_events(settings),
                            evolved=_materialized(context.instance, EVOLUTION_KEY),
                            rolled_over=_materialized(context.instance, ROLLOVER_KEY))
        for relative, why in {**plan.waiting, **plan.ignored}.items():
            context.log.info(f"{relative}: {why}")
        if not plan.runs:
            if plan.ignored_fingerprints:
                context.update_cursor(json.dumps({**seen, **plan.ignored_fingerprints}, sort_keys=True))
            return dg.SkipReason(f"no new landed file ({len(plan.waiting)} waiting)")
        # Files outside the settings' days are remembered too, so that they are logged once.
        cursor = json.dumps({**seen, **plan.ignored_fingerprints, **plan.requested}, sort_keys=True)
        return dg.SensorResult(run_requests=plan.runs, cursor=cursor)

    return landing_events_sensor


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(sensors=[build_landing_sensor(selected_settings())])
