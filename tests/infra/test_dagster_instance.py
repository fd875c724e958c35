"""infra.dagster_instance: run monitoring's timeouts from the stack's environment."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infra.dagster_instance import with_overrides

ROOT = Path(__file__).resolve().parents[2]
IMAGE_CONFIG = yaml.safe_load((ROOT / "infra" / "dagster" / "dagster.yaml").read_text())


def test_the_environment_overrides_run_monitorings_timeouts_and_keeps_the_rest() -> None:
    updated = with_overrides(IMAGE_CONFIG, {"DAGSTER_RUN_START_TIMEOUT_SECONDS": "45",
                                            "DAGSTER_RUN_MONITORING_POLL_SECONDS": "5"})
    assert updated["run_monitoring"] == {**IMAGE_CONFIG["run_monitoring"], "start_timeout_seconds": 45,
                                         "poll_interval_seconds": 5}
    assert {k: v for k, v in updated.items() if k != "run_monitoring"} == {
        k: v for k, v in IMAGE_CONFIG.items() if k != "run_monitoring"}


def test_empty_or_unset_variables_keep_the_images_values() -> None:
    assert with_overrides(IMAGE_CONFIG, {"DAGSTER_RUN_START_TIMEOUT_SECONDS": ""}) == IMAGE_CONFIG
    assert IMAGE_CONFIG["run_monitoring"]["start_timeout_seconds"] == 90


def test_a_value_that_is_not_whole_seconds_is_refused_naming_the_variable() -> None:
    with pytest.raises(SystemExit, match="DAGSTER_RUN_START_TIMEOUT_SECONDS='1.5'"):
        with_overrides(IMAGE_CONFIG, {"DAGSTER_RUN_START_TIMEOUT_SECONDS": "1.5"})
