"""The Dagster code location: ``dagster dev -m pipelines.definitions`` (``make dagster``).

Dagster's project layout (``[tool.dg]`` in pyproject.toml): every module of ``pipelines/defs/``
declares its own definitions (assets, checks, resources, sensors, schedules) with
``@dg.definitions``, and ``load_from_defs_folder`` finds and merges them. The settings they are
built for come from ``pipelines.settings.use_settings`` (the environment by default).
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from pipelines.settings import PipelineSettings, use_settings

PROJECT_DIR = Path(__file__).resolve().parent


def build_definitions(settings_file: str | None = None, root: str | None = None,
                      settings: PipelineSettings | None = None) -> dg.Definitions:
    """The code location for a settings file and root (default: what the environment selects),
    built from the defs folder alone; ``settings``, when the caller has loaded them already."""
    with use_settings(settings_file, root, settings):
        folder = dg.load_from_defs_folder(path_within_project=PROJECT_DIR)
    # Every step of a run in the run's process: one SparkSession, so one Spark application,
    # per run. The multiprocess executor started an application per step, and parallel
    # steps' applications waited for each other's cores on a small worker.
    return dg.Definitions.merge(folder, dg.Definitions(executor=dg.in_process_executor))


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions()
