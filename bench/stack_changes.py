"""The downstream assets after a one-hour landing in the Docker Compose stack, against a full recompute.

Issue 45's stack figure, beside the embedded one (``bench/pipeline_changes.py``). On a shared
machine the stack runs under the lock its users share, and the embedded side right after, at the
same size, in one command line::

    flock /tmp/docker-stack.lock timeout 2700 python -m bench.stack_changes --rows 1000000 && \\
    BENCH_CONTESTANTS=changes python -m bench.run --only pipeline_changes --rows 1000000 --rounds 2

A throwaway stack (no Trino: nothing here reads through it) runs with the stack's settings but a
``data`` section of 30 days of ``--rows / 30`` events from 1,000,000 users (the embedded
benchmark's user ids), mounted into the Dagster containers (``LAKEHOUSE_SETTINGS``): days 1-29
go to the daily ``events``, day 30 (the schema evolution's day and the cut-over) to
``events_hourly``. Nothing here launches a
pipeline run but the full recompute:

1. the landing: days 1-29 and hours 0-22 of day 30 are put into the landing bucket, as the
   stack's feed does (``infra.landing_feed``); the landing sensor ingests them and the
   automation builds everything downstream (the first run of the downstream assets is a full
   recomputation: nothing consumed before). Untimed; its downstream run is reported.
2. ``changes``: hour 23 of day 30 lands as a second file of that day (``rows / 720`` rows, the
   embedded benchmark's hour); the sensor ingests that hour alone (the other 23 are unchanged),
   and the automation refreshes the four downstream assets from the changelog.
3. ``full-recompute`` (the floor): one run of the same four assets launched with the run config
   ``full: true`` (what a backfill does, and the embedded floor's ``full=True``), on the same
   table.

What is counted, per contestant: the Dagster runs that materialize the four downstream assets
(``customers``, ``customer_segments``, ``customer_lifetime_value``, ``events_hourly_rollup``),
not the hour's ingest, each from the webserver's GraphQL API. ``run``: the run's ``startTime``
(its process has started and loaded the code location) to its ``endTime``; ``steps``: the four
steps, each from its ExecutionStepStartEvent to its success (the asset bodies with Dagster's
per-step bookkeeping; the embedded benchmark times the bodies alone); ``queued``: the run's
creation to its start (Dagster's queue, the launch, the run process starting and loading the
code); ``total``: creation to end. The target is read on ``run``; ``steps`` is the figure to set
beside the embedded one. Each step's materialization says where it
ran (``engine``, ``engine_reason``): ``in-process`` means the run's own process in the
``dagster-code`` container. Not a test: figures go to the console and to
``bench/results/stack_changes.jsonl``. Target: ``changes`` at most 0.10 of ``full-recompute``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import yaml

from bench.common import DAYS, RESULTS_DIR
from infra.compose_stack import running_stack
from infra.dagster_client import STACK_SETTINGS, DagsterClient
from infra.landing_feed import LandingBucketWriter
from infra.stack_pipeline import INGESTED, Watcher
from pipelines.defs.ingest.landing import events_for_day, landing_parquet
from pipelines.defs.ingest.landing_bucket import EVENTS_PREFIX
from pipelines.settings import PipelineSettings, load_settings

TARGET = 0.10
# The embedded benchmark draws user ids from 1..1,000,000 whatever the size (bench.common).
USERS = 1_000_000
# All in the past: Dagster has no time partition that has not ended yet.
START = datetime.date(2026, 10, 1)
LAST_HOUR = 23
DOWNSTREAM = ("lakehouse/shop/customers", "lakehouse/shop/customer_segments",
              "lakehouse/shop/customer_lifetime_value", "lakehouse/shop/events_hourly_rollup")
EVENTS_HOURLY = "lakehouse/shop/events_hourly"
# Where the Dagster containers find this benchmark's settings.
MOUNTED_SETTINGS = "/etc/lakehouse-bench/settings.yaml"
SETTINGS_SERVICES = ("dagster-code", "dagster-webserver", "dagster-daemon")
RUN_TIMES = """query($id: ID!) { runOrError(runId: $id) { __typename
  ... on Run { creationTime startTime endTime } ... on PythonError { message } } }"""
STEP_EVENTS = ("ExecutionStepStartEvent", "ExecutionStepSuccessEvent", "ExecutionStepFailureEvent")
# Automation ticks are 5 s apart in the stack: a phase is over when this long passes with no new run.
QUIET_S = 20.0


def settings_document(rows: int) -> dict[str, Any]:
    """The stack's settings with this benchmark's 30 days."""
    doc: dict[str, Any] = yaml.safe_load(STACK_SETTINGS.read_text())
    doc["data"] = {"start": START.isoformat(), "days": DAYS, "events-per-day": max(24, rows // DAYS),
                   "users": USERS, "seed": 20261001}
    # Evolution and cut-over on day 30: days 1-29 are one ingest run (fewer runs to wait for; the
    # timed runs are the same either way).
    last = (START + datetime.timedelta(days=DAYS - 1)).isoformat()
    doc["evolution"] = {"at": last}
    doc["rollover"] = {"cutover": last}
    return doc


def compose_override(settings_file: Path) -> str:
    """A Compose file that gives the Dagster containers ``settings_file`` as their settings."""
    return yaml.safe_dump({"services": {name: {"environment": {"LAKEHOUSE_SETTINGS": MOUNTED_SETTINGS},
                                               "volumes": [f"{settings_file}:{MOUNTED_SETTINGS}:ro"]}
                                        for name in SETTINGS_SERVICES}})


Landing = tuple[dict[str, bytes], tuple[str, bytes], int]


def cached_landing(settings: PipelineSettings, cache: Path | None) -> Landing:
    """``landing_files``, kept in ``cache`` (a directory per size) when given: made once, before
    taking the stack's lock (``--prepare``), they need not be made again under it."""
    if cache is None:
        return landing_files(settings)
    folder = cache / f"events-{settings.data.events_per_day}-a-day"
    index = folder / "index.json"
    if index.exists():
        meta = json.loads(index.read_text())
        files = {key: (folder / key).read_bytes() for key in meta["files"]}
        return files, (meta["hour"], (folder / meta["hour"]).read_bytes()), int(meta["rows"])
    files, hour, rows = landing_files(settings)
    for key, payload in [*files.items(), hour]:
        (folder / key).parent.mkdir(parents=True, exist_ok=True)
        (folder / key).write_bytes(payload)
    index.write_text(json.dumps({"files": list(files), "hour": hour[0], "rows": rows}))
    return files, hour, rows


def landing_files(settings: PipelineSettings) -> Landing:
    """The 30 days' files (the last day without its last hour), the last hour's file, and the
    rows of the 30 days."""
    files: dict[str, bytes] = {}
    hour: tuple[str, bytes] = ("", b"")
    rows = 0
    last = settings.data.dates[-1]
    for day in settings.data.dates:
        table = events_for_day(settings, day)
        rows += table.num_rows
        key = f"{EVENTS_PREFIX}/dt={day.isoformat()}/part-0000{{}}.parquet"
        if day != last:
            files[key.format(0)] = landing_parquet(table)
            continue
        late = pc.equal(pc.hour(table.column("event_ts")), LAST_HOUR)
        files[key.format(0)] = landing_parquet(table.filter(pc.invert(late)))
        hour = (key.format(1), landing_parquet(table.filter(late)))
    return files, hour, rows


@dataclass
class TimedRun:
    """One run of downstream assets: its times from GraphQL and what its steps did."""

    run_id: str
    label: str
    queued_s: float  # creation to start (the queue, the launch, the run process loading the code)
    run_s: float  # start to end
    total_s: float  # creation to end
    steps_s: float  # the downstream steps, each from its start to its end
    before_steps_s: float  # the run's start to its first step's start (process, code, resources)
    after_steps_s: float  # the last step's end to the run's end
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)  # per asset: seconds and metadata


def timed_run(client: DagsterClient, run_id: str, label: str, materializations: dict[str, dict[str, Any]]) -> TimedRun:
    run = client.graphql(RUN_TIMES, {"id": run_id})["runOrError"]
    if run["__typename"] != "Run":
        raise RuntimeError(f"run {run_id}: {run}")
    spans: dict[str, list[float]] = {}
    for event in client.events(run_id):
        if event["__typename"] in STEP_EVENTS and event.get("stepKey"):
            spans.setdefault(event["stepKey"], []).append(float(event["timestamp"]) / 1000.0)
    ours = {key: t for key, t in spans.items() if key.replace("__", "/") in DOWNSTREAM}
    first = min(min(t) for t in ours.values())
    last = max(max(t) for t in ours.values())
    steps: dict[str, dict[str, Any]] = {}
    for key, times in sorted(ours.items()):
        asset = key.replace("__", "/")
        meta = materializations.get(asset, {})
        steps[asset.rsplit("/", 1)[-1]] = {
            "s": max(times) - min(times),
            **{k: meta.get(k) for k in ("engine", "engine_reason", "mode", "changed_rows_read", "keys_touched",
                                        "users_recomputed", "hours_recomputed", "duration_s")},
        }
    return TimedRun(run_id, label, run["startTime"] - run["creationTime"], run["endTime"] - run["startTime"],
                    run["endTime"] - run["creationTime"], sum(float(s["s"]) for s in steps.values()),
                    first - run["startTime"], run["endTime"] - last, steps)


def settle(watcher: Watcher, deadline: float) -> None:
    """Until QUIET_S pass with no new run and none unfinished (the automation's later ticks)."""
    while True:
        failed = [(w.label, w.run_id, w.result.errors[:1] if w.result else None) for w in watcher.failed_for_good()]
        if failed:
            raise SystemExit(f"runs failed for good: {failed}")
        known = set(watcher.runs)
        watcher.wait_for((), 0.0, deadline)
        quiet_until = time.monotonic() + QUIET_S
        while time.monotonic() < quiet_until and set(watcher.runs) == known:
            time.sleep(1.0)
            watcher.poll()
        if set(watcher.runs) == known:
            return


def downstream_runs(watcher: Watcher, client: DagsterClient, since: float) -> list[TimedRun]:
    """The runs created after ``since`` (wall clock) that materialized a downstream asset."""
    out = []
    for w in watcher.ordered():
        if w.created < since or w.result is None or not set(w.result.materializations) & set(DOWNSTREAM):
            continue
        if not w.result.success:
            raise SystemExit(f"{w.label} ({w.run_id}) {w.status}: {w.result.errors[:1]}")
        out.append(timed_run(client, w.run_id, w.label, w.result.materializations))
    if not out:
        raise SystemExit("no run materialized the downstream assets")
    return out


def measure_stack(url: Callable[[], str], minio: Callable[[], str], landing: Landing,
                  deadline: float) -> dict[str, Any]:
    # Both asked again when refused: a Docker engine that restarts publishes on new host ports.
    client = DagsterClient(url)
    writer = LandingBucketWriter(minio, os.environ["MINIO_ROOT_USER"], os.environ["MINIO_ROOT_PASSWORD"])
    files, hour, rows = landing
    print(f"landing: {len(files)} files, {rows:,} rows over {DAYS} days; the hour: {hour[0]}")
    watcher = Watcher(client, time.time())

    since, started = time.time(), time.monotonic()
    for key, payload in files.items():
        writer.put(key, payload)
    watcher.wait_for(INGESTED, since, deadline)
    settle(watcher, deadline)
    first = downstream_runs(watcher, client, since)
    landing_s = time.monotonic() - started
    print(f"30 days landed and built in {landing_s:.1f} s ({len(watcher.runs)} runs)")

    since, started = time.time(), time.monotonic()
    writer.put(*hour)
    watcher.wait_for((EVENTS_HOURLY, *DOWNSTREAM), since, deadline)
    hour_s = time.monotonic() - started
    settle(watcher, deadline)
    changes = downstream_runs(watcher, client, since)
    ingest = [w for w in watcher.ordered() if w.created >= since and w.result is not None
              and EVENTS_HOURLY in w.result.materializations]
    hour_meta = ingest[-1].result.materializations[EVENTS_HOURLY] if ingest and ingest[-1].result else {}

    since = time.time()
    ops = {key.replace("/", "__"): {"config": {"full": True}} for key in DOWNSTREAM}
    client.launch_assets("full recompute", [key.split("/") for key in DOWNSTREAM],
                         tags={"lakehouse/trigger": "bench.stack_changes"}, run_config={"ops": ops})
    watcher.wait_for(DOWNSTREAM, since, deadline)
    settle(watcher, deadline)
    full = downstream_runs(watcher, client, since)
    return {"rows": rows, "hour_rows": hour_meta.get("rows_added"), "events_rows": hour_meta.get("rows_total"),
            "landing_s": landing_s, "hour_landing_to_settled_s": hour_s,
            "first": [asdict(r) for r in first], "changes": [asdict(r) for r in changes],
            "full": [asdict(r) for r in full]}


def _total(runs: list[dict[str, Any]], key: str) -> float:
    return float(sum(r[key] for r in runs))


def report(figures: dict[str, Any]) -> dict[str, float]:
    print(f"events: {figures['events_rows']} rows after the hour ({figures['hour_rows']} rows landed in it)")
    for name in ("first", "changes", "full"):
        for run in figures[name]:
            print(f"{name}: {run['label']} ({run['run_id']}): queued {run['queued_s']:.1f} s, run {run['run_s']:.1f} s "
                  f"(before the steps {run['before_steps_s']:.1f} s, steps {run['steps_s']:.1f} s, "
                  f"after {run['after_steps_s']:.1f} s)")
            for asset, step in run["steps"].items():
                # duration_s: the asset body's own clock (its refresh, from the materialization's
                # metadata); the rest of the step is Dagster's bookkeeping around it.
                body = f"body {step['duration_s']:.1f} s, " if isinstance(step.get("duration_s"), (int, float)) else ""
                print(f"    {asset:<26} {step['s']:>7.1f} s  {body}{step['mode']}, {step['engine']}: "
                      f"{step['engine_reason']}")
    ratios = {}
    print(f"{'counted':<28} {'full-recompute s':>17} {'changes s':>10} {'ratio':>7}")
    for key in ("run_s", "steps_s", "queued_s", "total_s"):
        full, changes = _total(figures["full"], key), _total(figures["changes"], key)
        ratios[key] = changes / full if full else float("nan")
        print(f"{key:<28} {full:>17.1f} {changes:>10.1f} {ratios[key]:>7.3f}")
    met = ratios["run_s"] <= TARGET
    print(f"hour landed to downstream settled: {figures['hour_landing_to_settled_s']:.1f} s")
    print(f"target: changes' runs at most {TARGET} of the full recompute's: {'met' if met else 'MISSED'} "
          f"({ratios['run_s']:.3f}; steps alone {ratios['steps_s']:.3f})")
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stack_changes", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="events over the 30 days (default 1,000,000)")
    parser.add_argument("--budget", type=float, default=2500.0,
                        help="seconds for everything but the stack's teardown (default 2500: under a 2700 s lock)")
    parser.add_argument("--cache", type=Path, help="keep the landing files here (made once for each size)")
    parser.add_argument("--prepare", action="store_true", help="only make the landing files (with --cache)")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.budget
    # `timeout` ends us with SIGTERM: exit through the stack's `down -v`, not around it.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with tempfile.TemporaryDirectory(prefix="tablestore-bench-changes-") as tmp:
        settings_file = Path(tmp) / "settings.yaml"
        settings_file.write_text(yaml.safe_dump(settings_document(args.rows), sort_keys=False))
        settings_file.chmod(0o644)  # read by the containers' user
        override = Path(tmp) / "compose.override.yaml"
        override.write_text(compose_override(settings_file))
        # The files are made before the stack starts (a minute at 1M rows, not spent under its lock).
        # Of the settings the host needs only the data: the catalog's token is the containers'.
        os.environ.setdefault("CATALOG_TOKEN_DAGSTER", "unused-on-the-host")
        landing = cached_landing(load_settings(settings_file), args.cache)
        if args.prepare:
            print(f"landing files: {len(landing[0]) + 1}, {landing[2]:,} rows, in {args.cache}")
            return 0
        with running_stack(Path(tmp), prefix="tablestore-bench", profiles=(), overrides=(override,)) as running:
            up_s = running.timings["up"]
            for key in ("MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD"):
                os.environ.setdefault(key, running.env[key])
            figures = measure_stack(lambda: running.url("dagster-webserver", 3000),
                                    lambda: running.address("minio", 9000), landing, deadline)
    print(f"docker compose up --build --wait: {up_s:.1f} s")
    ratios = report(figures)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    RESULTS_DIR.mkdir(exist_ok=True)
    with (RESULTS_DIR / "stack_changes.jsonl").open("a") as out:
        out.write(json.dumps({"benchmark": "stack_changes", "commit": commit, "machine": platform.node(),
                              "cpus": os.cpu_count(), "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "up_s": up_s, "ratios": ratios, **figures}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
