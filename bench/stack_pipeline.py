"""The whole asset graph in the Docker Compose stack and embedded, at the same landing scale.

    python -m bench.stack_pipeline                     # starts a throwaway stack (no Trino), then embedded
    python -m bench.stack_pipeline --dagster-url http://127.0.0.1:3000 --env-file .env   # a running stack

The stack side lands the files in MinIO's landing bucket and follows the runs its sensors and
automation start (``infra.stack_pipeline``), as the stack test does; each run's time runs from
its creation to its end (queueing and the run's process start included), and the whole graph's
from the first landing to the last run settled. The embedded side lands the same events and
lets the same sensors and automation run them in-process (``pipelines.drive``) on the embedded
settings (SQLite catalog, local files, ``local[2]`` Spark) with the stack's ``data:`` section.
The two group the days into runs by what each tick saw, so runs are listed per side and only the
whole graphs are compared. Not a test: figures go to the console and to ``bench/results/stack_pipeline.jsonl``.
Targets (issue 17, 2 cores): the stack within 2x of embedded, the stack's whole graph under 5 min.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from bench.common import RESULTS_DIR
from infra.compose_stack import running_stack
from infra.dagster_client import STACK_SETTINGS, stack_settings
from infra.landing_feed import LandingBucketWriter
from infra.stack_pipeline import drive
from pipelines.drive import drive as drive_in_process
from pipelines.settings import CONFIG_DIR

STACK_TARGET_S = 300.0
RATIO_TARGET = 2.0


Steps = list[tuple[str, float]]


def stack_steps(url: str, minio: str) -> tuple[Steps, float]:
    """The stack's runs, started by its sensors and automation once the files land in MinIO, and
    the whole graph's seconds (each landing to its runs settled)."""
    writer = LandingBucketWriter(minio, os.environ["MINIO_ROOT_USER"], os.environ["MINIO_ROOT_PASSWORD"])
    flow = drive(url, writer, timeout_s=3600.0)
    failed = [r.label for r in flow.results if not r.success]
    if failed:
        raise SystemExit(f"the stack's runs failed: {failed}; see {url}/runs")
    return [(r.label, r.seconds) for r in flow.results], sum(flow.seconds.values())


def embedded_steps(workdir: Path) -> tuple[Steps, float]:
    """The same landing and automation in-process, with the stack's data section: each run's
    seconds from the log (per asset and check of each run from Dagster's event log, printed), and
    the whole graph's."""
    doc = yaml.safe_load((CONFIG_DIR / "embedded.yaml").read_text())
    doc["data"] = yaml.safe_load(STACK_SETTINGS.read_text())["data"]
    settings = workdir / "embedded-at-stack-scale.yaml"
    settings.write_text(yaml.safe_dump(doc))
    marks: list[tuple[str, float]] = []

    def log(message: str) -> None:
        if message.startswith("run "):
            marks.append((message.removeprefix("run "), time.monotonic()))

    started = time.monotonic()
    run = drive_in_process(str(settings), str(workdir / "lakehouse"), log=log, log_level="WARNING")
    ended = time.monotonic()
    if not run.success:
        raise SystemExit(f"the embedded pipeline failed: {[s.error for s in run.steps if not s.success]}")
    for step in run.steps:
        print(f"{step.label}: " + ", ".join(f"{k} {v:.1f} s" for k, v in step.step_seconds.items()))
    ends = [t for _, t in marks[1:]] + [ended]
    return [(label, end - start) for (label, start), end in zip(marks, ends, strict=True)], ended - started


def report(stack: Steps, stack_total: float, embedded: Steps, embedded_total: float,
           extra: dict[str, float]) -> dict[str, object]:
    for side, runs in (("stack", stack), ("embedded", embedded)):
        print(f"{side} runs:")
        for label, seconds in runs:
            print(f"  {label:<70} {seconds:>9.1f} s")
    ratio = stack_total / embedded_total
    print(f"{'whole graph':<44} {'stack s':>9} {'embedded s':>11} {'ratio':>7}")
    print(f"{'':<44} {stack_total:>9.1f} {embedded_total:>11.1f} {ratio:>7.2f}")
    for name, seconds in extra.items():
        print(f"{name}: {seconds:.1f} s")
    print(f"target stack within {RATIO_TARGET}x of embedded: {'met' if ratio <= RATIO_TARGET else 'MISSED'}; "
          f"stack's whole graph under {STACK_TARGET_S:.0f} s: {'met' if stack_total <= STACK_TARGET_S else 'MISSED'}")
    return {"stack_s": stack_total, "embedded_s": embedded_total, "ratio": ratio,
            "stack_runs": [{"label": label, "s": s} for label, s in stack],
            "embedded_runs": [{"label": label, "s": s} for label, s in embedded],
            **{f"{k}_s": v for k, v in extra.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stack_pipeline", description=__doc__.splitlines()[0])
    parser.add_argument("--dagster-url", help="a running stack's Dagster webserver (default: start a throwaway stack)")
    parser.add_argument("--env-file", type=Path, default=Path(".env"), help="that stack's secrets (with --dagster-url)")
    parser.add_argument("--minio", default="127.0.0.1:9000", help="that stack's MinIO, host:port (with --dagster-url)")
    parser.add_argument("--embedded-only", action="store_true",
                        help="time the embedded side alone (e.g. beside the stack test's per-step log)")
    args = parser.parse_args(argv)
    extra: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tablestore-bench-stack-") as tmp:
        if args.embedded_only:
            embedded, embedded_total = embedded_steps(Path(tmp))
            for label, seconds in embedded:
                print(f"{label:<70} {seconds:>9.1f}")
            print(f"{'whole graph, embedded':<70} {embedded_total:>9.1f}")
            return 0
        if args.dagster_url:
            stack_settings(args.env_file)  # loads the secrets the stack settings name
            stack, stack_total = stack_steps(args.dagster_url, args.minio)
        else:
            with running_stack(Path(tmp), prefix="tablestore-bench") as running:
                extra["docker compose up --build --wait"] = running.timings["up"]
                for key in ("MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD", "CATALOG_TOKEN_DAGSTER"):
                    os.environ.setdefault(key, running.env[key])
                stack, stack_total = stack_steps(running.url("dagster-webserver", 3000),
                                                 running.address("minio", 9000))
        embedded, embedded_total = embedded_steps(Path(tmp))
    figures = report(stack, stack_total, embedded, embedded_total, extra)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    RESULTS_DIR.mkdir(exist_ok=True)
    with (RESULTS_DIR / "stack_pipeline.jsonl").open("a") as out:
        out.write(json.dumps({"benchmark": "stack_pipeline", "commit": commit, "machine": platform.node(),
                              "cpus": os.cpu_count(), "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              **figures}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
