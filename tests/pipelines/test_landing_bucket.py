"""The landing bucket on a real MinIO, without the Docker stack: storage-init makes the bucket and
its read-only reader, the landing feed puts the sources' files with the root key, and the
sensors' listing and the runs' staging read them back with the reader's key alone."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.landing_feed import LandingBucketWriter, land_erasure_requests, land_events
from pipelines.defs.ingest.landing import erasure_requests_file, landing_day_file
from pipelines.defs.ingest.landing_bucket import (
    ACCESS_KEY_ENV,
    SECRET_KEY_ENV,
    bucket_filesystem,
    landed_events,
    landed_requests,
    stage_events,
    stage_requests,
)
from pipelines.settings import LandingBucket, load_settings
from tablestore.errors import ConfigError
from tests.services import S3Server

pytestmark = [pytest.mark.s3]

READER, READER_SECRET = "landing-reader", "landing-reader-secret"


def test_sources_land_files_that_the_reader_lists_and_stages_and_may_not_write(
        s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = s3_server.endpoint.split("://", 1)[1]
    bucket = f"landing-{os.getpid()}"
    env = {**os.environ, "MINIO_ROOT_USER": s3_server.access_key, "MINIO_ROOT_PASSWORD": s3_server.secret_key,
           "MINIO_LANDING_USER": READER, "MINIO_LANDING_PASSWORD": READER_SECRET}
    init = subprocess.run([sys.executable, "-m", "infra.storage_init", "--endpoint", host, "--bucket", f"lh-{os.getpid()}",
                           "--landing-bucket", bucket], env=env, capture_output=True, text=True, timeout=120)
    assert init.returncode == 0, init.stderr
    assert f"MinIO user {READER} with policy lakehouse-landing-reader (list and read of {bucket} only)" in init.stdout

    settings = load_settings(root=str(tmp_path / "lakehouse"))
    writer = LandingBucketWriter(lambda: host, s3_server.access_key, s3_server.secret_key, bucket)
    landed = land_events(writer, settings)
    assert landed == [f"s3://{bucket}/events/dt={d.isoformat()}/part-00000.parquet" for d in settings.data.dates]
    assert land_erasure_requests(writer, settings) == f"s3://{bucket}/erasure_requests/requests.jsonl"

    landing = LandingBucket(endpoint=s3_server.endpoint, name=bucket)
    settings = settings.model_copy(update={"landing_bucket": landing})
    monkeypatch.delenv(ACCESS_KEY_ENV, raising=False)
    with pytest.raises(ConfigError, match=f"set {ACCESS_KEY_ENV} and {SECRET_KEY_ENV}"):
        landed_events(settings)
    monkeypatch.setenv(ACCESS_KEY_ENV, READER)
    monkeypatch.setenv(SECRET_KEY_ENV, READER_SECRET)
    assert sorted(landed_events(settings)) == [f"dt={d.isoformat()}/part-00000.parquet" for d in settings.data.dates]
    assert list(landed_requests(settings)) == ["requests.jsonl"]

    # A run stages the days of its window (two of the four) and the exports, byte for byte.
    first = settings.data.dates[0]
    window = (datetime.datetime.combine(first, datetime.time()),
              datetime.datetime.combine(first + datetime.timedelta(days=2), datetime.time()))
    assert stage_events(settings, *window) == [f"dt={(first + datetime.timedelta(days=i)).isoformat()}/part-00000.parquet"
                                               for i in range(2)]
    staged = settings.events_landing / f"dt={first.isoformat()}" / "part-00000.parquet"
    assert staged.read_bytes() == landing_day_file(settings, first)[0]
    assert stage_events(settings, *window) == []  # the same bytes are not written again
    assert stage_requests(settings) == ["requests.jsonl"]
    assert (settings.requests_landing / "requests.jsonl").read_bytes() == erasure_requests_file(settings)

    # The reader's key lists and reads; it cannot write the bucket.
    reader = bucket_filesystem(landing)
    with pytest.raises(OSError, match="ACCESS_DENIED"), \
            reader.open_output_stream(f"{bucket}/events/forged.parquet") as out:
        out.write(b"forged")
    assert "forged.parquet" not in str(sorted(landed_events(settings)))
