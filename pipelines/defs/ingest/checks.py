"""Checks on ingestion: NULL device before the evolution, widened types, specs by cut-over."""

from __future__ import annotations

import dagster as dg

from pipelines.defs.ingest.assets import EVENTS_HOURLY_KEY, EVOLUTION_KEY
from pipelines.defs.quality_checks import suite_check
from pipelines.defs.retries import STEP_RETRY


def build_ingest_checks() -> list[dg.AssetChecksDefinition]:
    return [
        suite_check("null_device_before_evolution", EVOLUTION_KEY, retry_policy=STEP_RETRY),
        suite_check("evolved_types", EVOLUTION_KEY, retry_policy=STEP_RETRY),
        suite_check("partition_specs_by_cutover", EVENTS_HOURLY_KEY, retry_policy=STEP_RETRY),
    ]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(asset_checks=build_ingest_checks())
