"""Materialize the whole asset graph in order, in-process, with ``dagster.materialize``.

The order follows the dates of the settings, in four runs: landing, the daily partitions before
the evolution and the evolution (with its checks); the remaining daily partitions and the
rollover; every hour from the cut-over, the retention and the erasure requests; the customers
and their features, the hourly rollup, the erasure (with its checks) and the Trino reconciliation. ``make demo`` and
the e2e test run this.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import dagster as dg

from pipelines.definitions import build_assets, build_checks
from pipelines.defs.customers.assets import CUSTOMERS_KEY, LTV_KEY, SEGMENTS_KEY
from pipelines.defs.erasure.assets import ERASURE_KEY, REQUESTS_KEY
from pipelines.defs.ingest.assets import (
    EVENTS_HOURLY_KEY,
    EVENTS_KEY,
    EVOLUTION_KEY,
    LANDING_KEY,
    REQUESTS_LANDING_KEY,
    ROLLOVER_KEY,
    hourly_partitions,
)
from pipelines.defs.ingest.retention import RETENTION_KEY
from pipelines.defs.reconcile.assets import RECONCILE_KEY
from pipelines.defs.resources import resources
from pipelines.defs.rollups.assets import ROLLUP_KEY
from pipelines.settings import PipelineSettings, load_settings
from tablestore.errors import ConfigError


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
class PipelineRun:
    settings: PipelineSettings
    steps: list[StepOutcome] = field(default_factory=list)

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


@dataclass(frozen=True)
class PlanStep:
    """One run of the plan: the assets (with their checks) of ``keys``, for one partition, a
    range of partitions (``tags``) or none."""

    label: str
    keys: list[dg.AssetKey]
    partition_key: str | None = None
    tags: dict[str, str] | None = None


def _range_tags(keys: Sequence[str]) -> dict[str, str]:
    return {"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]}


def _span(keys: Sequence[str]) -> str:
    return keys[0] if len(keys) == 1 else f"{keys[0]} .. {keys[-1]}"


def pipeline_plan(settings: PipelineSettings) -> list[PlanStep]:
    """The whole asset graph as four runs, in the order the dates impose. ``run_pipeline`` runs
    it in-process; ``infra.dagster_client`` launches the same runs through Dagster's GraphQL API.

    A run costs a Dagster process start by itself (about 5 s in the stack), so a run holds every
    step that the dates let go together: a partitioned asset over a range of partitions (one
    INSERT OVERWRITE, the assets' single-run backfill policy) and the unpartitioned assets around
    it, which Dagster runs after their upstreams. The boundaries are where the order cannot be a
    dependency: the days after the evolution must land after it (the evolution itself depends on
    the days before it), and the hours are another partitions definition. The customers start a
    run of their own so that a failure there resumes without landing the hours again."""
    before = [d.isoformat() for d in settings.daily_dates if d < settings.evolution_at]
    after = [d.isoformat() for d in settings.daily_dates if d >= settings.evolution_at]
    hours = hourly_partitions(settings).get_partition_keys()
    # settings guarantee data.start < evolution.at: there is always a day before the evolution.
    plan = [PlanStep(f"landing, events {_span(before)}, schema evolution",
                     [LANDING_KEY, REQUESTS_LANDING_KEY, EVENTS_KEY, EVOLUTION_KEY], None, _range_tags(before))]
    if after:
        plan.append(PlanStep(f"events {_span(after)}, rollover", [EVENTS_KEY, ROLLOVER_KEY], None, _range_tags(after)))
    else:  # evolution.at == rollover.cutover: no day lands after the evolution
        plan.append(PlanStep("rollover", [ROLLOVER_KEY]))
    return [
        *plan,
        PlanStep(f"events_hourly {_span(hours)}, events retention, erasure requests",
                 [EVENTS_HOURLY_KEY, RETENTION_KEY, REQUESTS_KEY], None, _range_tags(hours)),
        PlanStep("customers and features, hourly rollup, gdpr erasure, trino reconciliation",
                 [CUSTOMERS_KEY, SEGMENTS_KEY, LTV_KEY, ROLLUP_KEY, ERASURE_KEY, RECONCILE_KEY]),
    ]


def run_pipeline(
    settings_file: str | None = None,
    root: str | None = None,
    log: Callable[[str], None] = print,
    stop_on_failure: bool = True,
    log_level: str = "DEBUG",
    resume_from: str | None = None,
) -> PipelineRun:
    """Materialize every asset once, in order; returns what each step did and every check.

    ``log_level`` is the level of Dagster's console logger (the demo shows warnings only).
    ``resume_from`` resumes a run that failed: the steps before the one with that label are
    not run again."""
    settings = load_settings(settings_file, root)
    assets = build_assets(settings)
    checks = build_checks()
    res = resources(settings_file, str(settings.root))
    instance = dg.DagsterInstance.ephemeral()
    run = PipelineRun(settings)

    def step(label: str, keys: list[dg.AssetKey], partition_key: str | None = None,
             tags: dict[str, str] | None = None) -> bool:
        log(f"materializing {label}")
        result = dg.materialize(
            [*assets, *checks], selection=dg.AssetSelection.assets(*keys), partition_key=partition_key,
            resources=res, instance=instance, tags=tags, raise_on_error=False,
            run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
        )
        outcome = step_outcome(label, result, instance)
        run.steps.append(outcome)
        for check in outcome.checks:
            log(f"  check {check.name}: {'passed' if check.passed else 'FAILED'} ({check.description})")
        if outcome.error:
            log(f"  failed: {outcome.error}")
        return outcome.success

    plan = [(p.label, p.keys, p.partition_key, p.tags) for p in pipeline_plan(settings)]
    labels = [label for label, *_ in plan]
    if resume_from is not None and resume_from not in labels:
        raise ConfigError(f"no step {resume_from!r} to resume from; the steps are: {', '.join(labels)}")
    if resume_from is not None:
        plan = plan[labels.index(resume_from):]
    for label, keys, partition_key, tags in plan:
        if not step(label, keys, partition_key, tags) and stop_on_failure:
            break
    return run
