"""The code location loads, with the assets, checks and settings the pipeline relies on."""

from __future__ import annotations

import datetime
import tomllib
from pathlib import Path

import dagster as dg
import pytest

from pipelines.definitions import PROJECT_DIR, build_definitions
from pipelines.defs.ingest.landing import events_for_day, write_landing_day
from pipelines.settings import CONFIG_DIR, load_settings
from tablestore.errors import ConfigError


def test_definitions_load_with_every_asset_and_blocking_check(tmp_path: Path) -> None:
    defs = build_definitions(root=str(tmp_path))
    keys = {spec.key.to_user_string() for spec in defs.resolve_all_asset_specs()}
    assert keys == {
        "landing/events", "landing/erasure_requests", "lakehouse/shop/events", "lakehouse/shop/events_hourly",
        "lakehouse/shop/events_schema_evolution", "lakehouse/shop/events_rollover", "lakehouse/shop/customers",
        "lakehouse/shop/customer_segments", "lakehouse/shop/customer_lifetime_value",
        "lakehouse/shop/erasure_requests", "lakehouse/shop/gdpr_erasure", "lakehouse/shop/trino_reconciliation",
        "lakehouse/shop/events_retention", "lakehouse/shop/events_hourly_rollup",
        "lakehouse/shop/maintenance/events", "lakehouse/shop/maintenance/customers",
        "lakehouse/shop/maintenance/erasure_requests", "lakehouse/shop/maintenance/erasure_audit",
    }
    graph = defs.resolve_asset_graph()
    checks = {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys}
    assert checks == {
        # Write-audit-publish: the ingests' own gate, evaluated on the run's audit branch.
        ("lakehouse/shop/events", "events_batch_valid"),
        ("lakehouse/shop/events_hourly", "events_batch_valid"),
        ("lakehouse/shop/events_schema_evolution", "null_device_before_evolution"),
        ("lakehouse/shop/events_schema_evolution", "evolved_types"),
        ("lakehouse/shop/events_hourly", "partition_specs_by_cutover"),
        ("lakehouse/shop/gdpr_erasure", "erased_users_gone"),
        ("lakehouse/shop/gdpr_erasure", "landing_reconciles"),
    }
    assert all(graph.get_check_spec(k).blocking for k in graph.asset_check_keys)
    daily = graph.get(dg.AssetKey(["lakehouse", "shop", "events"])).partitions_def
    assert daily is not None
    assert daily.get_partition_keys() == ["2026-11-01", "2026-11-02", "2026-11-03"]


def test_the_defs_folder_is_loaded_for_the_settings_and_root_asked_for(tmp_path: Path) -> None:
    # [tool.dg] names the defs module that load_from_defs_folder walks.
    project = tomllib.loads((PROJECT_DIR.parent / "pyproject.toml").read_text())["tool"]["dg"]["project"]
    assert (project["root_module"], project["defs_module"]) == ("pipelines", "pipelines.defs")
    text = (CONFIG_DIR / "embedded.yaml").read_text().replace("cutover: 2026-11-04", "cutover: 2026-11-03")
    other = tmp_path / "other.yaml"
    other.write_text(text)
    defs = build_definitions(str(other), root=str(tmp_path / "root"))
    graph = defs.resolve_asset_graph()
    daily = graph.get(dg.AssetKey(["lakehouse", "shop", "events"])).partitions_def
    assert daily is not None and daily.get_partition_keys() == ["2026-11-01", "2026-11-02"]
    hourly = graph.get(dg.AssetKey(["lakehouse", "shop", "events_hourly"])).partitions_def
    assert hourly is not None and hourly.get_partition_keys()[0] == "2026-11-03-00:00"
    assert len(hourly.get_partition_keys()) == 48
    # The resources come from their own module's definitions, with the same settings and root.
    assert set(defs.resources or {}) >= {"tablestore", "spark"}
    store = (defs.resources or {})["tablestore"]
    assert (store.settings_file, store.root) == (str(other), str(tmp_path / "root"))
    assert store.settings.rollover.cutover == datetime.date(2026, 11, 3)
    # The default (what `dagster dev` and the daemon load) is the environment's file again.
    default = build_definitions(root=str(tmp_path)).resolve_asset_graph()
    days = default.get(dg.AssetKey(["lakehouse", "shop", "events"])).partitions_def
    assert days is not None and days.get_partition_keys()[-1] == "2026-11-03"


def test_sensors_schedule_and_automation_conditions_drive_the_graph(tmp_path: Path) -> None:
    defs = build_definitions(root=str(tmp_path))
    running = dg.DefaultSensorStatus.RUNNING
    sensors = {s.name: s for s in defs.sensors or ()}
    assert set(sensors) == {"landing_events_sensor", "erasure_requests_sensor", "lakehouse_automation"}
    assert all(s.default_status == running for s in sensors.values())
    schedules = {s.name: s for s in defs.schedules or ()}
    assert set(schedules) == {"table_maintenance_nightly"}
    assert defs.resolve_schedule_def("table_maintenance_nightly").cron_schedule == "0 3 * * *"
    graph = defs.resolve_asset_graph()
    automated = {k.to_user_string() for k in graph.get_all_asset_keys() if graph.get(k).automation_condition}
    # What follows the sensors' runs; ingestion itself is started by the landing sensor, the
    # requests by the erasure sensor, maintenance by its schedule.
    assert automated == {
        "lakehouse/shop/events_schema_evolution", "lakehouse/shop/events_rollover", "lakehouse/shop/customers",
        "lakehouse/shop/customer_segments", "lakehouse/shop/customer_lifetime_value",
        "lakehouse/shop/gdpr_erasure", "lakehouse/shop/trino_reconciliation", "lakehouse/shop/events_hourly_rollup",
    }
    fresh = {k.to_user_string() for k in graph.get_all_asset_keys() if graph.get(k).freshness_policy}
    assert fresh == {"lakehouse/shop/events", "lakehouse/shop/events_hourly", "lakehouse/shop/customers"}
    maintenance = [k for k in graph.get_all_asset_keys() if k.path[:3] == ["lakehouse", "shop", "maintenance"]]
    assert len(maintenance) == 4
    assert all(graph.get(k).pools == {"table_maintenance"} for k in maintenance)
    # `automation: {running: false}` leaves them stopped until someone starts them in the UI.
    stopped = tmp_path / "stopped.yaml"
    stopped.write_text((CONFIG_DIR / "embedded.yaml").read_text() + "automation: {running: false}\n")
    quiet = build_definitions(str(stopped), root=str(tmp_path))
    assert {s.default_status for s in quiet.sensors or ()} == {dg.DefaultSensorStatus.STOPPED}
    assert quiet.resolve_schedule_def("table_maintenance_nightly").default_status == dg.DefaultScheduleStatus.STOPPED
    # The stack runs itself: its sensors, automation and schedule start with the daemon.
    stack_yaml = (CONFIG_DIR / "stack.yaml").read_text()
    assert "running: true" in stack_yaml and "running: false" not in stack_yaml


def test_landing_is_deterministic_and_gains_device_at_the_evolution(tmp_path: Path) -> None:
    settings = load_settings(root=str(tmp_path))
    before = events_for_day(settings, datetime.date(2026, 11, 1))
    assert before.equals(events_for_day(settings, datetime.date(2026, 11, 1)))
    assert "device" not in before.column_names
    after = events_for_day(settings, datetime.date(2026, 11, 3))
    assert after.column("device").null_count == 0
    assert str(before.schema.field("amount").type) == "decimal128(10, 2)"
    path, rows, changed = write_landing_day(settings, datetime.date(2026, 11, 1))
    assert (rows, changed) == (settings.data.events_per_day, True)
    assert path.parent.name == "dt=2026-11-01"
    assert write_landing_day(settings, datetime.date(2026, 11, 1))[2] is False


def test_settings_refuse_dates_out_of_order(tmp_path: Path) -> None:
    text = (CONFIG_DIR / "embedded.yaml").read_text().replace("cutover: 2026-11-04", "cutover: 2026-11-02")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(ConfigError, match=r"evolution.at <= rollover.cutover"):
        load_settings(bad, root=tmp_path)


def test_unknown_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_ENV", "prod")
    monkeypatch.delenv("LAKEHOUSE_SETTINGS", raising=False)
    with pytest.raises(ConfigError, match="embedded, stack"):
        load_settings()
