"""The erasure sensor: a new or changed export of the privacy desk loads its requests.

The desk drops JSON-lines files into the requests landing folder (in the stack, the
``erasure_requests/`` prefix of the landing bucket, which the run copies before it loads them).
A file whose fingerprint (size and modification time) is not in the cursor requests a run of
``erasure_requests``, which adds the requests it does not hold yet; ``gdpr_erasure`` follows through its automation
condition. The cursor lives in the Dagster instance, so a daemon restart requests nothing again.
"""

from __future__ import annotations

import json

import dagster as dg

from pipelines.defs.erasure.assets import REQUESTS_KEY
from pipelines.defs.ingest.landing_bucket import landed_requests
from pipelines.defs.ingest.sensors import default_status, landing_place
from pipelines.settings import PipelineSettings, selected_settings

ERASURE_SENSOR = "erasure_requests_sensor"
ERASURE_INTERVAL = 10


def build_erasure_sensor(settings: PipelineSettings) -> dg.SensorDefinition:
    @dg.sensor(
        name=ERASURE_SENSOR, asset_selection=[REQUESTS_KEY],
        minimum_interval_seconds=settings.automation.tick_seconds or ERASURE_INTERVAL,
        default_status=default_status(settings),
        description=f"New or changed request exports in {landing_place(settings, 'erasure_requests')}: load the "
                    "requests.",
    )
    def erasure_requests_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        new = {name: fp for name, fp in landed_requests(settings).items() if seen.get(name) != fp}
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
