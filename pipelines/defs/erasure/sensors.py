"""The erasure sensor: a new or changed export of the privacy desk loads its requests.

The desk drops JSON-lines files into the requests landing folder. A file whose fingerprint
(size and modification time) is not in the cursor requests a run of ``erasure_requests``, which
adds the requests it does not hold yet; ``gdpr_erasure`` follows through its automation
condition. The cursor lives in the Dagster instance, so a daemon restart requests nothing again.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg

from pipelines.defs.erasure.assets import REQUESTS_KEY
from pipelines.defs.ingest.sensors import default_status
from pipelines.settings import PipelineSettings, selected_settings

ERASURE_SENSOR = "erasure_requests_sensor"
ERASURE_INTERVAL = 10


def request_files(folder: Path) -> dict[str, str]:
    """The request exports under ``folder`` (file name) with their fingerprints."""
    if not folder.is_dir():
        return {}
    return {p.name: f"{p.stat().st_size}-{p.stat().st_mtime_ns}" for p in sorted(folder.glob("*.jsonl"))}


def build_erasure_sensor(settings: PipelineSettings) -> dg.SensorDefinition:
    @dg.sensor(
        name=ERASURE_SENSOR, asset_selection=[REQUESTS_KEY], minimum_interval_seconds=ERASURE_INTERVAL,
        default_status=default_status(settings),
        description=f"New or changed request exports in {settings.requests_landing}: load the requests.",
    )
    def erasure_requests_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        new = {name: fp for name, fp in request_files(settings.requests_landing).items() if seen.get(name) != fp}
        if not new:
            return dg.SkipReason("no new erasure request export")
        run = dg.RunRequest(
            run_key="erasure_requests:" + ",".join(f"{n}@{f}" for n, f in sorted(new.items())),
            asset_selection=[REQUESTS_KEY], tags={"lakehouse/trigger": ERASURE_SENSOR},
        )
        return dg.SensorResult(run_requests=[run], cursor=json.dumps({**seen, **new}, sort_keys=True))

    return erasure_requests_sensor


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(sensors=[build_erasure_sensor(selected_settings())])
