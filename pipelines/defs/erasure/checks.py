"""Checks on erasure: no erased subject remains; landing minus erased rows equals events."""

from __future__ import annotations

import dagster as dg

from pipelines.defs.erasure.assets import ERASURE_KEY
from pipelines.defs.quality_checks import suite_check
from pipelines.defs.retries import STEP_RETRY


def build_erasure_checks() -> list[dg.AssetChecksDefinition]:
    return [
        suite_check("erased_users_gone", ERASURE_KEY, retry_policy=STEP_RETRY),
        suite_check("landing_reconciles", ERASURE_KEY, retry_policy=STEP_RETRY),
    ]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(asset_checks=build_erasure_checks())
