"""The pipeline driven as the Dagster daemon drives it, in-process: land files, then let the
code location's own sensors and automation conditions decide what runs.

``drive`` is what ``make demo`` runs. It writes the landing files (the events of every day),
then repeats what the daemon does on each tick, on one ephemeral instance: it evaluates the
landing and erasure sensors (with their cursors) and executes the runs they request, then
evaluates the assets' automation conditions (``dg.evaluate_automation_conditions``, what the
``lakehouse_automation`` sensor runs) and materializes what they request, until nothing is
requested. The privacy desk's export of erasure requests lands once the events are in (it is
ingestion's suppression list: landed first, it would keep its subjects out of ``events`` and
leave nothing to erase), and the same loop runs again. No run order is written here: the days
after the evolution wait for it in the landing sensor, the rollover waits for every day, the
hours wait for the rollover, and everything downstream follows through ``eager``.
"""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg

from pipelines.definitions import build_assets, build_checks, build_definitions
from pipelines.defs.erasure.sensors import ERASURE_SENSOR
from pipelines.defs.ingest.landing import write_erasure_requests, write_landing_day
from pipelines.defs.ingest.sensors import LANDING_SENSOR
from pipelines.defs.resources import resources
from pipelines.run import PipelineRun, step_outcome
from pipelines.settings import load_settings

# A bound on the daemon's ticks: the graph settles in a few (each tick runs what became ready).
MAX_TICKS = 20


def drive(settings_file: str | None = None, root: str | None = None, log: Callable[[str], None] = print,
          log_level: str = "DEBUG") -> PipelineRun:
    """Land the data and run whatever the sensors and automation conditions request, until they
    request nothing more; what each run did, as ``run_pipeline`` reports it."""
    settings = load_settings(settings_file, root)
    root = str(settings.root)
    definitions = build_definitions(settings_file, root)
    assets = [*build_assets(settings), *build_checks()]
    res = resources(settings_file, root)
    instance = dg.DagsterInstance.ephemeral()
    run = PipelineRun(settings)
    cursors: dict[str, str | None] = {}
    automation: dict[str, object] = {"cursor": None}

    def execute(label: str, selection: list[dg.AssetKey], tags: dict[str, str] | None) -> None:
        log(f"run {label}")
        result = dg.materialize(
            assets, selection=dg.AssetSelection.assets(*selection), resources=res, instance=instance, tags=tags,
            raise_on_error=False, run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
        )
        outcome = step_outcome(label, result, instance)
        run.steps.append(outcome)
        for check in outcome.checks:
            log(f"  check {check.name}: {'passed' if check.passed else 'FAILED'} ({check.description})")
        if outcome.error:
            log(f"  failed: {outcome.error}")

    def tick() -> int:
        """One daemon tick: the sensors' runs, then the automation's; how many runs it made."""
        made = 0
        for name in (LANDING_SENSOR, ERASURE_SENSOR):
            sensor = definitions.get_sensor_def(name)
            data = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, cursor=cursors.get(name),
                                                                definitions=definitions))
            cursors[name] = data.cursor if data.cursor is not None else cursors.get(name)
            for request in data.run_requests or []:
                keys = list(request.asset_selection or [])
                span = "" if "dagster/asset_partition_range_start" not in request.tags else (
                    f" {request.tags['dagster/asset_partition_range_start']} .. "
                    f"{request.tags['dagster/asset_partition_range_end']}")
                execute(f"{name}: {', '.join(k.to_user_string() for k in keys)}{span}", keys, dict(request.tags))
                made += 1
        evaluated = dg.evaluate_automation_conditions(definitions, instance,
                                                      cursor=automation["cursor"])  # type: ignore[arg-type]
        automation["cursor"] = evaluated.cursor
        requested = [r.key for r in evaluated.results
                     if isinstance(r.key, dg.AssetKey) and evaluated.get_num_requested(r.key) > 0]
        if requested:
            # One run, as the automation sensor launches the assets it requests together;
            # Dagster orders them by their dependencies inside it.
            execute(f"automation: {', '.join(k.to_user_string() for k in requested)}", requested,
                    {"lakehouse/trigger": "automation"})
            made += 1
        return made

    def settle() -> None:
        for _ in range(MAX_TICKS):
            if tick() == 0 or not run.success:
                return
        raise RuntimeError(f"the sensors and automation still requested runs after {MAX_TICKS} ticks")

    # The automation's first evaluation, before any data: as the daemon's first tick, it sets the
    # cursor that later ticks compare with (an update before any cursor is not a new update).
    automation["cursor"] = dg.evaluate_automation_conditions(definitions, instance).cursor
    for day in settings.data.dates:
        write_landing_day(settings, day)
    log(f"landed {len(settings.data.dates)} days of events in {settings.events_landing}")
    settle()
    if run.success:
        path, _ = write_erasure_requests(settings)
        log(f"landed the erasure requests in {path}")
        settle()
    return run
