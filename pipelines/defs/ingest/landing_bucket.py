"""The landing bucket: where the stack's sources drop their files, watched by the sensors.

In the Docker Compose stack the landing data arrives in a MinIO bucket (settings
``landing-bucket``): ``events/dt=YYYY-MM-DD/*.parquet`` from the shop and
``erasure_requests/*.jsonl`` from the privacy desk. The sensors list it with a key that can only
list and read that bucket (``MINIO_LANDING_USER``, made by storage-init; only the code server
holds it). A run copies the files it was asked for into the local landing folder, where Spark
reads them as the external table ``landing_events``, and where the erasure requests are loaded
from. Without ``landing-bucket`` (the embedded default) the sensors list the local folder itself
and nothing is copied.

A file's fingerprint is its size and modification time in both places: a file uploaded again
is landed again (ingestion writes nothing for partitions whose rows did not change).
"""

from __future__ import annotations

import datetime
import fnmatch
import os
from pathlib import Path
from urllib.parse import urlparse

import pyarrow.fs as pafs

from pipelines.defs.ingest.landing import write_if_changed
from pipelines.settings import LandingBucket, PipelineSettings
from tablestore.errors import ConfigError

EVENTS_PREFIX = "events"
REQUESTS_PREFIX = "erasure_requests"
EVENTS_PATTERN = "dt=*/*.parquet"
REQUESTS_PATTERN = "*.jsonl"
# The landing reader's key (storage-init's MinIO user with list and read of the bucket alone).
ACCESS_KEY_ENV, SECRET_KEY_ENV = "MINIO_LANDING_USER", "MINIO_LANDING_PASSWORD"


def s3_filesystem(endpoint: str, access_key: str, secret_key: str, region: str = "us-east-1") -> pafs.S3FileSystem:
    """An S3 server's file system (``endpoint``: a URL, or ``host:port`` for plain HTTP), path-style."""
    parsed = urlparse(endpoint if "://" in endpoint else f"http://{endpoint}")
    return pafs.S3FileSystem(access_key=access_key, secret_key=secret_key, endpoint_override=parsed.netloc,
                             scheme=parsed.scheme, region=region, force_virtual_addressing=False,
                             connect_timeout=10, request_timeout=30)


def bucket_filesystem(bucket: LandingBucket) -> pafs.S3FileSystem:
    """The bucket's S3 file system, with the landing reader's key from the environment."""
    access_key, secret_key = os.environ.get(ACCESS_KEY_ENV), os.environ.get(SECRET_KEY_ENV)
    if not access_key or not secret_key:
        raise ConfigError(f"the landing bucket {bucket.name!r} needs the landing reader's key: set {ACCESS_KEY_ENV} "
                          f"and {SECRET_KEY_ENV} (the stack's .env; storage-init creates that MinIO user)")
    return s3_filesystem(bucket.endpoint, access_key, secret_key, bucket.region)


def bucket_files(bucket: LandingBucket, prefix: str, pattern: str) -> dict[str, str]:
    """The objects under ``prefix/`` whose path below it matches ``pattern``, with fingerprints."""
    fs = bucket_filesystem(bucket)
    selector = pafs.FileSelector(f"{bucket.name}/{prefix}", recursive=True, allow_not_found=True)
    base = f"{bucket.name}/{prefix}/"
    files = {}
    for info in sorted(fs.get_file_info(selector), key=lambda i: i.path):
        relative = info.path.removeprefix(base)
        if info.type == pafs.FileType.File and fnmatch.fnmatchcase(relative, pattern):
            mtime = info.mtime_ns if info.mtime_ns is not None else 0
            files[relative] = f"{info.size}-{mtime}"
    return files


def local_files(folder: Path, pattern: str) -> dict[str, str]:
    """The files under ``folder`` whose relative path matches ``pattern``, with fingerprints."""
    if not folder.is_dir():
        return {}
    files = {}
    for path in sorted(folder.glob(pattern)):
        stat = path.stat()
        files[path.relative_to(folder).as_posix()] = f"{stat.st_size}-{stat.st_mtime_ns}"
    return files


def landed_events(settings: PipelineSettings) -> dict[str, str]:
    """Every landed events file (``dt=YYYY-MM-DD/part.parquet``) with its fingerprint."""
    if settings.landing_bucket is None:
        return local_files(settings.events_landing, EVENTS_PATTERN)
    return bucket_files(settings.landing_bucket, EVENTS_PREFIX, EVENTS_PATTERN)


def landed_requests(settings: PipelineSettings) -> dict[str, str]:
    """Every landed export of erasure requests (``*.jsonl``) with its fingerprint."""
    if settings.landing_bucket is None:
        return local_files(settings.requests_landing, REQUESTS_PATTERN)
    return bucket_files(settings.landing_bucket, REQUESTS_PREFIX, REQUESTS_PATTERN)


def _copy(bucket: LandingBucket, prefix: str, relatives: list[str], folder: Path) -> list[str]:
    fs = bucket_filesystem(bucket)
    copied = []
    for relative in relatives:
        with fs.open_input_stream(f"{bucket.name}/{prefix}/{relative}") as stream:
            payload = stream.read()
        if write_if_changed(folder / relative, payload):
            copied.append(relative)
    return copied


def stage_events(settings: PipelineSettings, start: datetime.datetime, end: datetime.datetime) -> list[str]:
    """Copy the bucket's events files of the days that [start, end) touches into the local
    landing folder; answer those whose bytes were new there. Nothing to do without a bucket."""
    if settings.landing_bucket is None:
        return []
    first, last = start.date(), (end - datetime.timedelta(microseconds=1)).date()
    days = {f"dt={first + datetime.timedelta(days=i)}" for i in range((last - first).days + 1)}
    wanted = [r for r in landed_events(settings) if r.split("/", 1)[0] in days]
    return _copy(settings.landing_bucket, EVENTS_PREFIX, wanted, settings.events_landing)


def stage_requests(settings: PipelineSettings) -> list[str]:
    """Copy the bucket's exports of erasure requests into the local landing folder."""
    if settings.landing_bucket is None:
        return []
    wanted = list(landed_requests(settings))
    return _copy(settings.landing_bucket, REQUESTS_PREFIX, wanted, settings.requests_landing)
