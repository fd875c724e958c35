"""The Dagster code location: ``dagster dev -m pipelines.definitions`` (``make dagster``)."""

from __future__ import annotations

import dagster as dg

from pipelines.defs.customers.assets import build_customer_assets
from pipelines.defs.erasure.assets import build_erasure_assets
from pipelines.defs.erasure.checks import build_erasure_checks
from pipelines.defs.ingest.assets import build_ingest_assets
from pipelines.defs.ingest.checks import build_ingest_checks
from pipelines.defs.ingest.retention import build_retention_assets
from pipelines.defs.reconcile.assets import build_reconcile_assets
from pipelines.defs.resources import resources
from pipelines.settings import PipelineSettings, load_settings


def build_assets(settings: PipelineSettings) -> list[dg.AssetsDefinition]:
    return [*build_ingest_assets(settings), *build_retention_assets(settings), *build_customer_assets(),
            *build_erasure_assets(settings), *build_reconcile_assets()]


def build_checks() -> list[dg.AssetChecksDefinition]:
    return [*build_ingest_checks(), *build_erasure_checks()]


def build_definitions(settings_file: str | None = None, root: str | None = None) -> dg.Definitions:
    settings = load_settings(settings_file, root)
    return dg.Definitions(
        assets=build_assets(settings),
        asset_checks=build_checks(),
        resources=resources(settings_file, root),
        # Every step of a run in the run's process: one SparkSession, so one Spark application,
        # per run. The multiprocess executor started an application per step, and parallel
        # steps' applications waited for each other's cores on a small worker.
        executor=dg.in_process_executor,
    )


defs = build_definitions()
