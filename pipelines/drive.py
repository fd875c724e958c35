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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import dagster as dg

from pipelines.definitions import build_definitions
from pipelines.defs.erasure.sensors import ERASURE_SENSOR
from pipelines.defs.ingest.landing import write_erasure_requests, write_landing_day
from pipelines.defs.ingest.sensors import LANDING_SENSOR
from pipelines.settings import PipelineSettings, load_settings

# A bound on the daemon's ticks: the graph settles in a few (each tick runs what became ready).
MAX_TICKS = 20


@dataclass
class CheckOutcome:
    asset: str
    name: str
    passed: bool
    description: str
    metadata: dict[str, object]


@dataclass
class StepOutcome:
    label: str
    success: bool
    materializations: dict[str, dict[str, object]] = field(default_factory=dict)
    checks: list[CheckOutcome] = field(default_factory=list)
    error: str | None = None
    # Seconds per Dagster step (an asset, or a check), from its first event to its last one.
    step_seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class DaemonState:
    """What the daemon keeps between ticks: its instance (runs, materializations), the sensors'
    cursors, the automation's cursor, and the runs that failed (launched again on resume, as
    Dagster's run retries do)."""

    instance: dg.DagsterInstance
    cursors: dict[str, str | None] = field(default_factory=dict)
    automation_cursor: object = None
    failed: list[tuple[str, list[dg.AssetKey], dict[str, str] | None]] = field(default_factory=list)
    erasure_landed: bool = False


@dataclass
class PipelineRun:
    settings: PipelineSettings
    steps: list[StepOutcome] = field(default_factory=list)
    #: The daemon's state when the drive stopped: ``drive(..., resume=run)`` goes on from it.
    daemon: DaemonState | None = None

    @property
    def success(self) -> bool:
        return all(s.success for s in self.steps) and all(c.passed for c in self.checks)

    @property
    def checks(self) -> list[CheckOutcome]:
        return [c for s in self.steps for c in s.checks]

    def metadata(self, key: dg.AssetKey) -> dict[str, object]:
        """The metadata of the last materialization of ``key`` in this run."""
        for step in reversed(self.steps):
            if key.to_user_string() in step.materializations:
                return step.materializations[key.to_user_string()]
        return {}


def _plain(value: object) -> object:
    return getattr(value, "value", value)


STEP_SPAN = ("STEP_START", "STEP_SUCCESS", "STEP_FAILURE")


def _step_seconds(instance: dg.DagsterInstance, run_id: str) -> dict[str, float]:
    spans: dict[str, list[float]] = {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        # From the step's start to its end: earlier events (materializations planned at the run's
        # start) name the step too.
        if entry.step_key and event is not None and event.event_type_value in STEP_SPAN:
            spans.setdefault(entry.step_key, []).append(entry.timestamp)
    return {key: max(t) - min(t) for key, t in spans.items()}


def step_outcome(label: str, result: dg.ExecuteInProcessResult, instance: dg.DagsterInstance) -> StepOutcome:
    outcome = StepOutcome(label, result.success, step_seconds=_step_seconds(instance, result.run_id))
    for event in result.get_asset_materialization_events():
        materialization = event.materialization
        outcome.materializations[materialization.asset_key.to_user_string()] = {
            k: _plain(v) for k, v in materialization.metadata.items()
        }
    for evaluation in result.get_asset_check_evaluations():
        outcome.checks.append(CheckOutcome(
            evaluation.asset_key.to_user_string(), evaluation.check_name, evaluation.passed,
            evaluation.description or "", {k: _plain(v) for k, v in evaluation.metadata.items()},
        ))
    if not result.success:
        failures = [e for e in result.all_events if e.is_step_failure]
        outcome.error = "; ".join(str(e.step_failure_data.error.message).strip() for e in failures
                                  if e.step_failure_data and e.step_failure_data.error) or "run failed"
    return outcome


def materialize(
    definitions: dg.Definitions, selection: Sequence[dg.AssetKey] | dg.AssetSelection,
    partition_key: str | None = None, tags: dict[str, str] | None = None,
    instance: dg.DagsterInstance | None = None, log_level: str = "DEBUG",
) -> dg.ExecuteInProcessResult:
    """One run of the code location's assets or checks in ``selection``, in this process, with
    the location's own resources: what a run the daemon launches executes. Failures are in the
    result, not raised."""
    if not isinstance(selection, dg.AssetSelection):
        selection = dg.AssetSelection.assets(*selection)
    # The resolved assets carry the location's resources bound.
    return dg.materialize(
        definitions.resolve_asset_graph().assets_defs, selection=selection,
        partition_key=partition_key, instance=instance, tags=tags,
        raise_on_error=False, run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
    )


def drive(settings_file: str | None = None, root: str | None = None, log: Callable[[str], None] = print,
          log_level: str = "DEBUG", resume: PipelineRun | None = None) -> PipelineRun:
    """Land the data and run whatever the sensors and automation conditions request, until they
    request nothing more; what each run did. With ``resume`` (a drive that stopped at a failed
    run), go on as the daemon does after the failure: the same instance and cursors, the failed
    runs launched again (Dagster's run retries), then ticks until nothing is requested."""
    settings = load_settings(settings_file, root)
    definitions = build_definitions(settings_file, str(settings.root), settings)
    state = resume.daemon if resume is not None and resume.daemon is not None else \
        DaemonState(dg.DagsterInstance.ephemeral())
    instance = state.instance
    run = PipelineRun(settings, daemon=state)
    cursors = state.cursors

    def execute(label: str, selection: list[dg.AssetKey], tags: dict[str, str] | None) -> None:
        log(f"run {label}")
        result = materialize(definitions, selection, tags=tags, instance=instance, log_level=log_level)
        outcome = step_outcome(label, result, instance)
        run.steps.append(outcome)
        for check in outcome.checks:
            log(f"  check {check.name}: {'passed' if check.passed else 'FAILED'} ({check.description})")
        if outcome.error:
            log(f"  failed: {outcome.error}")
            state.failed.append((label, selection, tags))

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
                                                      cursor=state.automation_cursor)  # type: ignore[arg-type]
        state.automation_cursor = evaluated.cursor
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

    if resume is None:
        # The automation's first evaluation, before any data: as the daemon's first tick, it sets
        # the cursor that later ticks compare with (an update before any cursor is not a new update).
        state.automation_cursor = dg.evaluate_automation_conditions(definitions, instance).cursor
        for day in settings.data.dates:
            write_landing_day(settings, day)
        log(f"landed {len(settings.data.dates)} days of events in {settings.events_landing}")
    else:
        retried, state.failed = state.failed, []
        for label, selection, tags in retried:
            execute(f"retry of {label}", selection, tags)
    settle()
    if run.success and not state.erasure_landed:
        path, _ = write_erasure_requests(settings)
        state.erasure_landed = True
        log(f"landed the erasure requests in {path}")
        settle()
    return run
