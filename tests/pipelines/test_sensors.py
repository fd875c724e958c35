"""The sensors, ticked by Dagster's own sensor daemon loop over a persistent instance.

Each tick opens a new ``DagsterInstance`` over the same directory and loads the code location
as the daemon does (``pipelines.definitions``, in-process): that is a daemon restart. The
instance queues the runs (``QueuedRunCoordinator``, nothing launches them), so the test reads
exactly what the sensors requested. No Spark and no table are involved.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.storage.dagster_run import DagsterRunStatus
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._daemon.sensor import execute_sensor_iteration

from pipelines.defs.erasure.sensors import ERASURE_SENSOR
from pipelines.defs.ingest.assets import EVOLUTION_KEY
from pipelines.defs.ingest.landing import write_erasure_requests, write_landing_day
from pipelines.defs.ingest.sensors import LANDING_SENSOR, RANGE_END, RANGE_START
from pipelines.settings import CONFIG_DIR, PipelineSettings, load_settings

QUEUED = "run_coordinator:\n  module: dagster._core.run_coordinator\n  class: QueuedRunCoordinator\n"
# The sensors' shortest interval in these tests (settings `automation: {tick-seconds: N}`, as the
# stack shortens it), instead of their default 10 s: a tick after this long is a new tick.
TICK_S = 1


@pytest.fixture
def lakehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[PipelineSettings, Path]:
    # The code location reads its settings from the environment, as under the daemon: the
    # embedded settings, with the sensors ticking every TICK_S seconds.
    settings_file = tmp_path / "embedded-fast.yaml"
    settings_file.write_text((CONFIG_DIR / "embedded.yaml").read_text() + f"automation: {{tick-seconds: {TICK_S}}}\n")
    monkeypatch.setenv("LAKEHOUSE_ENV", "embedded")
    monkeypatch.setenv("LAKEHOUSE_SETTINGS", str(settings_file))
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(tmp_path / "root"))
    home = tmp_path / "dagster-home"
    home.mkdir()
    (home / "dagster.yaml").write_text(QUEUED)
    settings = load_settings()
    assert settings.automation.tick_seconds == TICK_S
    return settings, home


@contextmanager
def daemon(home: Path) -> Iterator[tuple[dg.DagsterInstance, WorkspaceProcessContext]]:
    """A new instance over ``home`` and the code location, as a (re)started daemon loads them."""
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name="pipelines.definitions", attribute="defs"), location_name="pipelines")
    with dg.DagsterInstance.from_config(str(home)) as instance, \
            WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget(origin)) as workspace:
        yield instance, workspace


def tick(home: Path) -> list[dict[str, object]]:
    """One pass of the sensor daemon after a restart; the runs it queued, oldest first."""
    with daemon(home) as (instance, workspace):
        before = {r.run_id for r in instance.get_runs()}
        list(execute_sensor_iteration(workspace, logging.getLogger("sensor-test"), None, None))
        runs = [r for r in reversed(instance.get_runs()) if r.run_id not in before]
        assert all(r.status == DagsterRunStatus.QUEUED for r in runs)
        return [{"sensor": r.tags.get("dagster/sensor_name"),
                 "assets": sorted(k.to_user_string() for k in r.asset_selection or ()),
                 "range": (r.tags.get(RANGE_START), r.tags.get(RANGE_END))} for r in runs]


def cursor(home: Path, name: str) -> dict[str, str]:
    with daemon(home) as (instance, workspace):
        location = next(iter(workspace.create_request_context().get_code_location_entries().values()))
        assert location.code_location is not None
        repository = next(iter(location.code_location.get_repositories().values()))
        state = instance.get_instigator_state(repository.get_sensor(name).get_remote_origin_id(),
                                              repository.get_sensor(name).selector_id)
        assert state is not None and state.instigator_data is not None
        return json.loads(state.instigator_data.cursor or "{}")  # type: ignore[union-attr]


def test_a_landed_file_is_requested_once_across_daemon_restarts_and_days_wait_for_the_evolution(
        lakehouse: tuple[PipelineSettings, Path]) -> None:
    settings, home = lakehouse
    for day in settings.data.dates:  # 2026-11-01 .. 04: evolution.at 03, cut-over 04
        write_landing_day(settings, day)

    first = tick(home)
    # The days before the evolution go as one range of the daily asset; 11-03 carries device
    # and waits for the evolution, 11-04 is hourly and waits for the rollover.
    assert first == [{"sensor": LANDING_SENSOR, "assets": ["lakehouse/shop/events"],
                      "range": ("2026-11-01", "2026-11-02")}]
    assert sorted(cursor(home, LANDING_SENSOR)) == ["dt=2026-11-01/part-00000.parquet",
                                                    "dt=2026-11-02/part-00000.parquet"]

    time.sleep(TICK_S)  # the sensor's minimum interval, measured from its last tick
    assert tick(home) == []  # restarted: the cursor came back from the instance

    # The evolution materialized (as its automation condition would have it); a second file
    # lands for 11-02. The next tick asks for 11-02 again and 11-03, in one range; 11-04 waits.
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.report_runless_asset_event(dg.AssetMaterialization(EVOLUTION_KEY))
    extra = settings.events_landing / "dt=2026-11-02" / "part-00001.parquet"
    extra.write_bytes((settings.events_landing / "dt=2026-11-02" / "part-00000.parquet").read_bytes())
    time.sleep(TICK_S)
    assert tick(home) == [{"sensor": LANDING_SENSOR, "assets": ["lakehouse/shop/events"],
                           "range": ("2026-11-02", "2026-11-03")}]
    assert "dt=2026-11-04/part-00000.parquet" not in cursor(home, LANDING_SENSOR)


def test_a_request_export_loads_once_and_again_when_it_changes(lakehouse: tuple[PipelineSettings, Path]) -> None:
    settings, home = lakehouse
    write_erasure_requests(settings)
    requests = {"sensor": ERASURE_SENSOR, "assets": ["lakehouse/shop/erasure_requests"], "range": (None, None)}
    assert tick(home) == [requests]
    time.sleep(TICK_S)
    assert tick(home) == []
    path = settings.requests_landing / "requests.jsonl"
    path.write_text(path.read_text() + '{"request_id": "gdpr-x-9", "user_id": 9, "requested_at": "2026-11-04T10:00:00"}\n')
    time.sleep(TICK_S)
    assert tick(home) == [requests]
