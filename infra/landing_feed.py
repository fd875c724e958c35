"""Land the pipeline's data in the stack's landing bucket, as its sources would.

The shop drops one Parquet file per day (``events/dt=YYYY-MM-DD/part-00000.parquet``) and the
privacy desk its export of erasure requests (``erasure_requests/requests.jsonl``), the same
bytes that the embedded pipeline writes to its landing folder (``pipelines.defs.ingest.landing``).
The stack's sensors see them and run the pipeline; nothing else is needed. The stack test,
``make e2e-stack`` and ``bench/stack_pipeline.py`` land with MinIO's root key, as an operator
would; the pipeline itself only ever reads the bucket, with the landing reader's key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow.fs as pafs

from pipelines.defs.ingest.landing import erasure_requests_file, landing_day_file
from pipelines.defs.ingest.landing_bucket import EVENTS_PREFIX, REQUESTS_PREFIX, s3_filesystem
from pipelines.settings import PipelineSettings

LANDING_BUCKET = "landing"


@dataclass(frozen=True)
class LandingBucketWriter:
    """Puts objects into the landing bucket at ``endpoint`` (``host:port``) with a key that may.

    ``endpoint`` may be a function answering it at each put: a MinIO container restarted with an
    engine-chosen host port is published on another port than before."""

    endpoint: str | Callable[[], str]
    access_key: str
    secret_key: str
    bucket: str = LANDING_BUCKET

    def filesystem(self) -> pafs.S3FileSystem:
        endpoint = self.endpoint() if callable(self.endpoint) else self.endpoint
        return s3_filesystem(endpoint, self.access_key, self.secret_key)

    def put(self, key: str, payload: bytes) -> str:
        with self.filesystem().open_output_stream(f"{self.bucket}/{key}") as out:
            out.write(payload)
        return f"s3://{self.bucket}/{key}"


def land_events(writer: LandingBucketWriter, settings: PipelineSettings) -> list[str]:
    """Every day of the settings' events, one Parquet file a day (as the embedded landing writes it).
    The files are made first and then put one after the other, so that the landing sensor's ticks
    see them arrive within moments (a tick between two puts requests the days it saw)."""
    files = {f"{EVENTS_PREFIX}/dt={day.isoformat()}/part-00000.parquet": landing_day_file(settings, day)[0]
             for day in settings.data.dates}
    return [writer.put(key, payload) for key, payload in files.items()]


def land_erasure_requests(writer: LandingBucketWriter, settings: PipelineSettings) -> str:
    """The privacy desk's export: one JSON object per request and line."""
    return writer.put(f"{REQUESTS_PREFIX}/requests.jsonl", erasure_requests_file(settings))
