"""Run the pipeline's plan through a Dagster webserver's GraphQL API, as a user's clicks would.

``pipelines.run.pipeline_plan`` is the whole asset graph as runs, in the order the dates impose
(``run_pipeline`` runs the same plan in-process). Here each step becomes one ``launchRun`` of
the implicit asset job: the daemon dequeues it and runs it in the ``dagster-daemon`` container,
where the Spark driver talks to the stack's cluster. The stack test, ``make e2e-stack`` and
``bench/stack_pipeline.py`` use it.

    python -m infra.dagster_client http://127.0.0.1:3000
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.run import PlanStep, pipeline_plan
from pipelines.settings import CONFIG_DIR, PipelineSettings, load_settings

LOCATION = "pipelines"
REPOSITORY = "__repository__"
ASSET_JOB = "__ASSET_JOB"
DONE = ("SUCCESS", "FAILURE", "CANCELED")
STEP_SPAN = ("ExecutionStepStartEvent", "ExecutionStepSuccessEvent", "ExecutionStepFailureEvent")
STACK_SETTINGS = CONFIG_DIR / "stack.yaml"

LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename
  ... on LaunchRunSuccess { run { runId } }
  ... on PythonError { message }
  ... on InvalidSubsetError { message }
  ... on RunConfigValidationInvalid { errors { message } }
} }"""
STATUS = """query($id: ID!) { runOrError(runId: $id) { __typename
  ... on Run { status startTime endTime } ... on PythonError { message } } }"""
TAGS = """query($id: ID!) { runOrError(runId: $id) { __typename
  ... on Run { status tags { key value } } ... on PythonError { message } } }"""
# Set on a failed run when Dagster's run retries (the instance's ``run_retries``) will re-execute
# it, and then to the new run's id once the daemon has launched it.
WILL_RETRY_TAG = "dagster/will_retry"
RETRY_RUN_TAG = "dagster/auto_retry_run_id"
# A run's failure and its WILL_RETRY_TAG are two writes: how long a failed run may stay untagged.
RETRY_TAG_GRACE_S = 10.0
EVENTS = """query($id: ID!, $cursor: String) { logsForRun(runId: $id, afterCursor: $cursor) {
  __typename
  ... on EventConnection { cursor hasMore events { __typename
    ... on MessageEvent { message timestamp stepKey }
    ... on MaterializationEvent { assetKey { path } metadataEntries { label
      ... on TextMetadataEntry { text } ... on IntMetadataEntry { intValue } ... on JsonMetadataEntry { jsonString }
      ... on MarkdownMetadataEntry { mdStr } } }
    ... on AssetCheckEvaluationEvent { evaluation { checkName success description assetKey { path } } }
    ... on ExecutionStepFailureEvent { error { message causes { message } } }
    ... on ExecutionStepUpForRetryEvent { error { message causes { message } } secondsToWait }
    ... on RunFailureEvent { message }
  } }
  ... on PythonError { message } } }"""


@dataclass
class CheckResult:
    asset: str
    name: str
    passed: bool
    description: str


@dataclass
class RunResult:
    label: str
    run_id: str
    status: str
    seconds: float  # from the launch to the end of the run: queueing and process start included
    materializations: dict[str, dict[str, Any]] = field(default_factory=dict)
    checks: list[CheckResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Seconds per Dagster step (an asset, or a check), from its first event to its last one.
    step_seconds: dict[str, float] = field(default_factory=dict)
    # The attempts that failed and were retried (the step's retry policy): step key and error.
    retries: list[tuple[str, str]] = field(default_factory=list)
    # Earlier runs of this step that failed as runs (not started in time, say) and that Dagster's
    # run retries re-executed as a new run: their ids and why they failed. ``run_id`` is the last.
    failed_runs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.status == "SUCCESS" and all(c.passed for c in self.checks)


class DagsterClient:
    """A Dagster webserver's GraphQL API at ``url`` (e.g. ``http://127.0.0.1:3000``)."""

    def __init__(self, url: str, timeout_s: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            answer: dict[str, Any] = json.load(response)
        if answer.get("errors"):
            raise RuntimeError(f"GraphQL errors from {self.url}: {answer['errors']}")
        data: dict[str, Any] = answer["data"]
        return data

    def asset_keys(self) -> list[list[str]]:
        nodes = self.graphql("{ assetNodes { assetKey { path } } }")["assetNodes"]
        return [list(n["assetKey"]["path"]) for n in nodes]

    def launch(self, step: PlanStep) -> str:
        """Queue one run of ``step``'s assets and their checks; answers the run id."""
        tags = dict(step.tags or {})
        if step.partition_key is not None:
            tags["dagster/partition"] = step.partition_key
        return self.launch_assets(step.label, [list(k.path) for k in step.keys], tags)

    def launch_assets(self, label: str, keys: list[list[str]], tags: dict[str, str] | None = None) -> str:
        """Queue one run of the assets ``keys`` (paths) and their checks; answers the run id."""
        params = {
            "selector": {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "jobName": ASSET_JOB,
                         "assetSelection": [{"path": key} for key in keys]},
            "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]},
            "runConfigData": {},
        }
        launched = self.graphql(LAUNCH, {"params": params})["launchRun"]
        if launched["__typename"] != "LaunchRunSuccess":
            raise RuntimeError(f"launching {label!r} failed: {launched}")
        run_id: str = launched["run"]["runId"]
        return run_id

    def wait(self, run_id: str, deadline: float, poll_s: float = 1.0) -> str:
        """The run's final status, polling until ``deadline`` (time.monotonic())."""
        while True:
            run = self.graphql(STATUS, {"id": run_id})["runOrError"]
            if run["__typename"] != "Run":
                raise RuntimeError(f"run {run_id}: {run}")
            status: str = run["status"]
            if status in DONE:
                return status
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} still {status} at the deadline; see {self.url}/runs/{run_id}")
            time.sleep(poll_s)

    def retry_of(self, run_id: str, deadline: float, poll_s: float = 1.0) -> str | None:
        """The run that Dagster's run retries launched for the failed run ``run_id``, once the
        daemon has launched it; None when the run will not be retried (it succeeded, it failed in
        a step, which the step's retry policy handles, or its retries are spent)."""
        untagged_until = time.monotonic() + RETRY_TAG_GRACE_S
        while True:
            run = self.graphql(TAGS, {"id": run_id})["runOrError"]
            if run["__typename"] != "Run":
                raise RuntimeError(f"run {run_id}: {run}")
            tags = {t["key"]: t["value"] for t in run["tags"]}
            if run["status"] != "FAILURE" or tags.get(WILL_RETRY_TAG) == "false":
                return None
            if tags.get(RETRY_RUN_TAG):
                return tags[RETRY_RUN_TAG]
            if WILL_RETRY_TAG not in tags and time.monotonic() > untagged_until:
                return None
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} will be retried, but no retry was launched by the deadline")
            time.sleep(poll_s)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = self.graphql(EVENTS, {"id": run_id, "cursor": cursor})["logsForRun"]
            if page["__typename"] != "EventConnection":
                raise RuntimeError(f"events of run {run_id}: {page}")
            out.extend(page["events"])
            cursor = page["cursor"]
            if not page["hasMore"]:
                return out

    def run_step(self, step: PlanStep, deadline: float) -> RunResult:
        """Launch ``step`` and wait for its outcome, following the runs that Dagster's run
        retries launch when a run fails as a whole."""
        started = time.monotonic()
        run_id = self.launch(step)
        failed_runs: list[tuple[str, str]] = []
        while True:
            status = self.wait(run_id, deadline)
            retry = self.retry_of(run_id, deadline) if status == "FAILURE" else None
            if retry is None:
                break
            failed_runs.append((run_id, self.failure_of(run_id)))
            run_id = retry
        result = self.result(step.label, run_id, status, time.monotonic() - started)
        result.failed_runs = failed_runs
        return result

    def failure_of(self, run_id: str) -> str:
        """Why the run ``run_id`` failed: its run failure's message, else its steps' errors."""
        result = self.result(run_id, run_id, "FAILURE", 0.0)
        return "; ".join(result.errors)[:2000]

    def result(self, label: str, run_id: str, status: str, seconds: float) -> RunResult:
        """What the finished run ``run_id`` (of the plan's step ``label``) did, from its event log."""
        result = RunResult(label, run_id, status, seconds)
        spans: dict[str, list[float]] = {}
        for event in self.events(run_id):
            kind = event["__typename"]
            # From the step's start to its end: earlier events (materializations planned at the
            # run's start) name the step too.
            if kind in STEP_SPAN and event.get("stepKey") and event.get("timestamp"):
                spans.setdefault(event["stepKey"], []).append(float(event["timestamp"]) / 1000.0)
            if kind == "MaterializationEvent":
                result.materializations["/".join(event["assetKey"]["path"])] = {
                    m["label"]: next((v for k, v in m.items() if k != "label"), None) for m in event["metadataEntries"]}
            elif kind == "AssetCheckEvaluationEvent":
                ev = event["evaluation"]
                result.checks.append(CheckResult("/".join(ev["assetKey"]["path"]), ev["checkName"], ev["success"],
                                                 ev.get("description") or ""))
            elif kind == "RunFailureEvent":
                result.errors.append(str(event.get("message") or "").strip()[:2000])
            elif kind in ("ExecutionStepFailureEvent", "ExecutionStepUpForRetryEvent"):
                # The step's error wraps the asset's or check's own exception: keep its causes.
                error = event["error"] or {}
                chain = [error.get("message", ""), *(c["message"] for c in error.get("causes") or [])]
                text = " <- ".join(str(m).strip() for m in chain)[-2000:]
                if kind == "ExecutionStepFailureEvent":
                    result.errors.append(text)
                else:  # what failed, in a line: the error's first line and its first cause's
                    head = [str(m).strip().splitlines()[0] for m in chain[:2] if str(m).strip()]
                    result.retries.append((str(event.get("stepKey")), " <- ".join(head)[:600]))
        result.step_seconds = {key: max(t) - min(t) for key, t in spans.items()}
        return result


def stack_settings(env_file: Path | None = None) -> PipelineSettings:
    """The stack's pipeline settings (``pipelines/config/stack.yaml``), whose secrets come from
    the environment, else from ``env_file`` (the stack's ``.env``, read into the environment)."""
    if env_file is not None and env_file.exists():
        for line in env_file.read_text().splitlines():
            if "=" in line and not line.lstrip().startswith("#"):
                key, value = line.split("=", 1)
                os.environ.setdefault(key.strip(), value.strip())
    return load_settings(STACK_SETTINGS)


def stack_plan(env_file: Path | None = None) -> list[PlanStep]:
    """The plan of the stack's pipeline settings (see ``stack_settings``)."""
    return pipeline_plan(stack_settings(env_file))


def run_plan(url: str, steps: list[PlanStep], timeout_s: float = 1800.0,
             log: Callable[[str], None] = print, stop_on_failure: bool = True) -> list[RunResult]:
    """Every step of ``steps`` as one run each, in order; stops at the first failure."""
    client = DagsterClient(url)
    deadline = time.monotonic() + timeout_s
    results = []
    for step in steps:
        result = client.run_step(step, deadline)
        results.append(result)
        failed = [c.name for c in result.checks if not c.passed]
        log(f"{step.label}: {result.status} in {result.seconds:.1f} s"
            + (f"; checks failed: {failed}" if failed else "") + (f"; {result.errors[0]}" if result.errors else ""))
        for key, seconds in result.step_seconds.items():
            log(f"  {key}: {seconds:.1f} s")
        for key, error in result.retries:
            log(f"  {key} failed and was retried: {error[:300]}")
        for run_id, error in result.failed_runs:
            log(f"  run {run_id} failed and Dagster re-executed it: {error[:300]}")
        if not result.success and stop_on_failure:
            break
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the Dagster webserver, e.g. http://127.0.0.1:3000")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds for the whole plan")
    parser.add_argument("--env-file", type=Path, default=Path(".env"), help="the stack's secrets")
    args = parser.parse_args(argv)
    results = run_plan(args.url, stack_plan(args.env_file), timeout_s=args.timeout)
    return 0 if results and all(r.success for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
