"""A Dagster webserver's GraphQL API as the stack's tests and tools use it: runs and their
event logs read back as what they materialized and checked, a run that Dagster's run retries
re-executed followed to its end, and an asset launched as a user's click would launch it.

Nothing here runs the pipeline: the daemon's sensors and automation do
(``infra/stack_pipeline.py`` lands the files and watches them).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
      ... on TextMetadataEntry { text } ... on IntMetadataEntry { intValue } ... on FloatMetadataEntry { floatValue }
      ... on JsonMetadataEntry { jsonString }
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
    """A Dagster webserver's GraphQL API at ``url`` (e.g. ``http://127.0.0.1:3000``).

    ``url`` may be a function answering it: a Docker engine that restarts brings the webserver
    back on another engine-chosen host port, and a refused connection asks the function again."""

    def __init__(self, url: str | Callable[[], str], timeout_s: float = 60.0) -> None:
        self._resolve = url if callable(url) else None
        self.url = (url() if callable(url) else url).rstrip("/")
        self.timeout_s = timeout_s

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            return self._graphql(query, variables)
        except urllib.error.URLError as e:
            if self._resolve is None or not isinstance(e.reason, ConnectionRefusedError):
                raise
            try:
                fresh = self._resolve().rstrip("/")
            except Exception:  # the container is not published (yet): the refusal stands
                raise e from None
            if fresh == self.url:
                raise
            self.url = fresh
            return self._graphql(query, variables)

    def _graphql(self, query: str, variables: dict[str, Any] | None) -> dict[str, Any]:
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

    def launch_assets(self, label: str, keys: list[list[str]], tags: dict[str, str] | None = None,
                      run_config: dict[str, Any] | None = None) -> str:
        """Queue one run of the assets ``keys`` (paths) and their checks, with ``run_config`` (as
        the Launchpad takes it); answers the run id."""
        params = {
            "selector": {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "jobName": ASSET_JOB,
                         "assetSelection": [{"path": key} for key in keys]},
            "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]},
            "runConfigData": run_config or {},
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

    def failure_of(self, run_id: str) -> str:
        """Why the run ``run_id`` failed: its run failure's message, else its steps' errors."""
        result = self.result(run_id, run_id, "FAILURE", 0.0)
        return "; ".join(result.errors)[:2000]

    def result(self, label: str, run_id: str, status: str, seconds: float) -> RunResult:
        """What the finished run ``run_id`` (called ``label``) did, from its event log."""
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
