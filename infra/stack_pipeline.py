"""The stack's pipeline as its users run it: land files, and watch what Dagster's daemon runs.

Nothing here launches a run. ``drive`` lands the events of every day in the landing bucket
(``infra.landing_feed``) and follows, through the webserver's GraphQL API, the runs that the
daemon starts: the landing sensor's ingests, and the runs the automation conditions request
downstream of them. Once every table up to the customers' features is materialized and no run
is queued or in progress, it lands the privacy desk's export of erasure requests and follows the
erasure sensor's run and the erasure and the Trino reconciliation that follow it. The export
lands second on purpose: the requests are ingestion's suppression list, and landed first they
would keep their subjects out of ``events`` and leave nothing to erase.

A run that fails as a whole (not started in time, say) is re-executed by Dagster's run retries
as a new run; the watcher follows that one and reports the failed attempt with it. The stack
test, ``make e2e-stack`` and ``bench/stack_pipeline.py`` use it.

    python -m infra.stack_pipeline http://127.0.0.1:3000
"""

from __future__ import annotations

import argparse
import os
import time
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.dagster_client import (
    DONE,
    RETRY_RUN_TAG,
    RETRY_TAG_GRACE_S,
    WILL_RETRY_TAG,
    DagsterClient,
    RunResult,
    stack_settings,
)
from infra.landing_feed import LandingBucketWriter, land_erasure_requests, land_events

# What the landed events bring about, and then what the landed erasure requests do.
INGESTED = ("lakehouse/shop/events", "lakehouse/shop/events_schema_evolution", "lakehouse/shop/events_rollover",
            "lakehouse/shop/events_hourly", "lakehouse/shop/customers", "lakehouse/shop/customer_segments",
            "lakehouse/shop/customer_lifetime_value", "lakehouse/shop/events_hourly_rollup")
ERASED = ("lakehouse/shop/erasure_requests", "lakehouse/shop/gdpr_erasure", "lakehouse/shop/trino_reconciliation")
RUNS = """query($since: Float) { runsOrError(filter: {createdAfter: $since}, limit: 1000) { __typename
  ... on Runs { results { runId status creationTime tags { key value } assetSelection { path } } }
  ... on PythonError { message } } }"""
EVENT_PAGE = """query($id: ID!, $cursor: String) { logsForRun(runId: $id, afterCursor: $cursor) { __typename
  ... on EventConnection { cursor hasMore events { __typename ... on MessageEvent { stepKey timestamp } } }
  ... on PythonError { message } } }"""
# Called with each new page of events of a run in progress: (its index among the runs watched, in
# the order they were created, its id, the events).
EventHook = Callable[[int, str, list[dict[str, Any]]], None]


@dataclass
class Watched:
    """A run the daemon started, as the watcher saw it."""

    run_id: str
    created: float
    label: str
    status: str = "QUEUED"
    tags: dict[str, str] = field(default_factory=dict)
    cursor: str | None = None
    result: RunResult | None = None
    ended: float | None = None  # time.monotonic() when the watcher saw it done

    @property
    def parent(self) -> str | None:
        return self.tags.get("dagster/parent_run_id")

    @property
    def retried(self) -> bool:
        return self.status == "FAILURE" and bool(self.tags.get(RETRY_RUN_TAG))

    def retry_pending(self) -> bool:
        """Failed, and Dagster's run retries will re-execute it but have not launched it yet (its
        failure and the tag saying so are two writes: a grace period for the second)."""
        if self.status != "FAILURE" or self.retried:
            return False
        will = self.tags.get(WILL_RETRY_TAG)
        return will == "true" or (will is None and time.monotonic() - (self.ended or 0.0) < RETRY_TAG_GRACE_S)

    @property
    def failed_for_good(self) -> bool:
        return self.status == "FAILURE" and not self.retried and not self.retry_pending()


@dataclass
class Flow:
    """The runs of a driven pipeline: ``results`` holds each run's last attempt, in order."""

    results: list[RunResult] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # per phase: landing to settled

    @property
    def success(self) -> bool:
        return bool(self.results) and all(r.success for r in self.results)


def label_of(run: dict[str, Any]) -> str:
    """What started the run and what it materializes, from its tags and asset selection."""
    tags = {t["key"]: t["value"] for t in run["tags"]}
    trigger = tags.get("dagster/sensor_name") or tags.get("lakehouse/trigger") or "launched"
    assets = ", ".join(p["path"][-1] for p in run.get("assetSelection") or [])
    start, end = tags.get("dagster/asset_partition_range_start"), tags.get("dagster/asset_partition_range_end")
    span = f" {start} .. {end}" if start else (f" {tags['dagster/partition']}" if "dagster/partition" in tags else "")
    return f"{trigger}: {assets}{span}"


class Watcher:
    """Follows every run created after ``since``: their statuses, and with ``on_events`` their
    event logs while they run."""

    def __init__(self, client: DagsterClient, since: float, on_events: EventHook | None = None,
                 log: Callable[[str], None] = print) -> None:
        self.client, self.since, self.on_events, self.log = client, since, on_events, log
        self.runs: dict[str, Watched] = {}

    def ordered(self) -> list[Watched]:
        return sorted(self.runs.values(), key=lambda w: w.created)

    def poll(self) -> None:
        answer = self.client.graphql(RUNS, {"since": self.since})["runsOrError"]
        if answer["__typename"] != "Runs":
            raise RuntimeError(f"runs since {self.since}: {answer}")
        for run in answer["results"]:
            watched = self.runs.setdefault(run["runId"], Watched(run["runId"], run["creationTime"], label_of(run)))
            watched.status, watched.tags = run["status"], {t["key"]: t["value"] for t in run["tags"]}
        for index, watched in enumerate(self.ordered()):
            if self.on_events is not None and watched.result is None:
                self._follow(index, watched)
            if watched.status in DONE and watched.result is None:
                watched.ended = time.monotonic()
                watched.result = self.client.result(watched.label, watched.run_id, watched.status,
                                                    time.time() - watched.created)
                self.log(f"{watched.label}: {watched.status} in {watched.result.seconds:.1f} s ({watched.run_id})"
                         + (f"; {watched.result.errors[0][:300]}" if watched.result.errors else ""))
                for key, error in watched.result.retries:
                    self.log(f"  {key} failed and was retried: {error[:300]}")

    def _follow(self, index: int, watched: Watched) -> None:
        assert self.on_events is not None
        while True:
            page = self.client.graphql(EVENT_PAGE, {"id": watched.run_id, "cursor": watched.cursor})["logsForRun"]
            if page["__typename"] != "EventConnection":
                return
            watched.cursor = page["cursor"]
            if page["events"]:
                self.on_events(index, watched.run_id, page["events"])
            if not page["hasMore"]:
                return

    def failed_for_good(self) -> list[Watched]:
        return [w for w in self.ordered() if w.result is not None and w.failed_for_good]

    def wait_for(self, assets: tuple[str, ...], since: float, deadline: float, poll_s: float = 1.0) -> None:
        """Until every asset of ``assets`` was materialized by a run created after ``since`` (a
        wall-clock time) and no run is queued, in progress or about to be re-executed; returns
        early when a run failed for good."""
        done: set[str] = set()
        unsettled: list[str] = []
        while True:
            try:  # the webserver reads the runs from PostgreSQL, which a fault may have killed
                self.poll()
            except (urllib.error.URLError, OSError, RuntimeError) as e:
                unsettled = [f"the webserver did not answer: {e}"]
            else:
                done = {key for w in self.ordered() if w.created >= since and w.status == "SUCCESS"
                        and w.result is not None for key in w.result.materializations}
                unsettled = [f"{w.label} is {w.status}" for w in self.ordered()
                             if w.status not in DONE or w.result is None or w.retry_pending()]
                if not unsettled and (set(assets) <= done or self.failed_for_good()):
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"at the deadline, not materialized: {sorted(set(assets) - done)}; {unsettled}")
            time.sleep(poll_s)

    def flow(self) -> list[RunResult]:
        """Each run's last attempt, in order; the attempts that failed as runs and that Dagster
        re-executed are in its ``failed_runs``."""
        by_id = self.runs
        out = []
        for watched in self.ordered():
            if watched.retried or watched.result is None:
                continue
            result, parent = watched.result, watched.parent
            while parent is not None and parent in by_id:
                result.failed_runs.insert(0, (parent, self.client.failure_of(parent)))
                result.label = by_id[parent].label  # what started the first attempt
                parent = by_id[parent].parent
            out.append(result)
        return out


def drive(url: str, writer: LandingBucketWriter, env_file: Path | None = None, timeout_s: float = 2400.0,
          on_events: EventHook | None = None, log: Callable[[str], None] = print) -> Flow:
    """Land the events, wait for what they bring about, land the erasure requests, wait again."""
    settings = stack_settings(env_file)
    client = DagsterClient(url)
    deadline = time.monotonic() + timeout_s
    watcher = Watcher(client, time.time(), on_events, log)
    flow = Flow()
    for name, land, assets in (("events", land_events, INGESTED), ("erasure requests", land_erasure_requests, ERASED)):
        started, since = time.monotonic(), time.time()
        landed = land(writer, settings)
        log(f"landed {name}: {landed}")
        watcher.wait_for(assets, since, deadline)
        flow.seconds[name] = time.monotonic() - started
        log(f"{name}: settled {flow.seconds[name]:.1f} s after landing")
        if watcher.failed_for_good():
            break
    flow.results = watcher.flow()
    return flow


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the Dagster webserver, e.g. http://127.0.0.1:3000")
    parser.add_argument("--minio", default="127.0.0.1:9000", help="host:port of the stack's MinIO")
    parser.add_argument("--timeout", type=float, default=2400.0, help="seconds for the whole pipeline")
    parser.add_argument("--env-file", type=Path, default=Path(".env"), help="the stack's secrets")
    args = parser.parse_args(argv)
    stack_settings(args.env_file)  # reads the stack's .env into the environment
    writer = LandingBucketWriter(args.minio, os.environ["MINIO_ROOT_USER"], os.environ["MINIO_ROOT_PASSWORD"])
    flow = drive(args.url, writer, args.env_file, args.timeout)
    return 0 if flow.success else 1


if __name__ == "__main__":
    raise SystemExit(main())
