"""Scoped, short-lived storage credentials for clients (the REST spec's "vended credentials").

The service never hands out the served catalog's own S3 key. A client that asks for delegated
access (``X-Iceberg-Access-Delegation: vended-credentials`` on a load or create, or
``GET .../tables/{t}/credentials``) gets temporary credentials from STS ``AssumeRole`` made
through botocore's STS client with the catalog's key and an inline *session policy* that allows only:

- the table's location (and its ``write.data.path`` / ``write.metadata.path`` if set
  elsewhere), as ``s3:GetObject`` and ``s3:ListBucket`` limited by ``s3:prefix``;
- writes there too (``s3:PutObject``, ``s3:DeleteObject``, multipart) only for a principal with
  the write role in the catalog;

for ``duration-seconds`` (15 minutes by default). STS makes the session's permissions the
intersection of the assumed role (MinIO: the calling user's policy) and the session policy,
so the credentials can do no more than the policy says, wherever the storage enforces policies
(AWS S3, MinIO). The credentials come back in the LoadTableResult's ``storage-credentials``
(prefix: the table location) and, for clients that only read ``config`` (pyiceberg on a
staged create, DuckDB), in ``config`` too, with ``s3.session-token-expires-at-ms``.

Settings (``server.storage-credentials``)::

    storage-credentials:
      vending: sts                 # sts (default for an s3:// warehouse) | none
      duration-seconds: 900        # 900..43200 (AWS STS's bounds)
      role-arn: arn:aws:iam::123456789012:role/lake-clients   # AWS needs a real role; MinIO ignores it
      sts-endpoint: http://minio:9000                         # default: the catalog's s3.endpoint

Credentials are cached per (locations, access) and reused while at least two thirds of their
lifetime remain, so a busy table costs one AssumeRole per few minutes, not one per load.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from tablestore.config_files import FileModel
from tablestore.config_problems import validated
from tablestore.errors import ForbiddenError, TableStoreError
from tablestore.rest.state.stats import CACHE_HITS, CACHE_MISSES, CREDENTIALS_VENDED, Stats

DELEGATION_HEADER = "x-iceberg-access-delegation"
VENDED = "vended-credentials"
EXPIRES_AT = "s3.session-token-expires-at-ms"
# The catalog's own secrets: never part of what a client is told.
SECRET_PROPERTIES = frozenset({"s3.access-key-id", "s3.secret-access-key", "s3.session-token",
                               "client.access-key-id", "client.secret-access-key", "client.session-token"})
DEFAULT_DURATION_S = 900
MIN_DURATION_S, MAX_DURATION_S = 900, 43200
# A placeholder: MinIO ignores the role (the session gets the calling user's policy, cut down by
# the session policy); AWS needs a real role. 123456789012 is AWS's example account id, and the
# account moto serves by default.
DEFAULT_ROLE_ARN = "arn:aws:iam::123456789012:role/tablestore-vended"
READ_ACTIONS = ("s3:GetObject", "s3:GetObjectVersion")
WRITE_ACTIONS = ("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")


class VendingError(TableStoreError):
    """STS refused or could not be reached: the service answers 503 and names the cause."""


def _lower(value: Any) -> Any:
    return str(value).lower() if value is not None else None


def _duration(value: int) -> int:
    if not MIN_DURATION_S <= value <= MAX_DURATION_S:
        raise PydanticCustomError("config_must", "must be between {low} and {high} (STS's bounds), got {got}",
                                  {"low": MIN_DURATION_S, "high": MAX_DURATION_S, "got": value})
    return value


class VendingSettings(FileModel):
    """The validated ``server.storage-credentials`` section (see the module docstring)."""

    # None: sts for an s3:// warehouse, nothing otherwise.
    vending: Annotated[Literal["sts", "none"] | None, BeforeValidator(_lower)] = Field(
        default=None, description="sts or none")
    duration_s: Annotated[int, AfterValidator(_duration)] = Field(default=DEFAULT_DURATION_S, alias="duration-seconds")
    role_arn: str = DEFAULT_ROLE_ARN
    sts_endpoint: str | None = None


def vending_settings(raw: Any, where: str) -> VendingSettings:
    """``server.storage-credentials`` as VendingSettings; ConfigError naming what is wrong."""
    return validated(VendingSettings, raw, where, prefix=("server", "storage-credentials"))


def public_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """A catalog's ``s3.*`` properties without its secrets: what every client may know.

    The region goes out under both names: pyiceberg reads ``s3.region``, Java's S3FileIO (and
    so Spark and Trino's REST clients) ``client.region``.
    """
    out = {k: v for k, v in properties.items() if k.startswith("s3.") and k not in SECRET_PROPERTIES}
    if "s3.region" in out:
        out.setdefault("client.region", out["s3.region"])
    return out


def wants_vended(header: str | None) -> bool:
    """Whether ``X-Iceberg-Access-Delegation`` (a comma-separated list) asks for credentials."""
    return bool(header) and VENDED in [part.strip().lower() for part in (header or "").split(",")]


def _bucket_and_key(location: str) -> tuple[str, str]:
    parts = urlsplit(location)
    return parts.netloc, parts.path.lstrip("/").rstrip("/")


def session_policy(locations: Iterable[str], write: bool) -> dict[str, Any]:
    """The IAM session policy allowing reads (and with ``write`` writes) under ``locations`` only."""
    by_bucket: dict[str, list[str]] = {}
    for location in locations:
        bucket, key = _bucket_and_key(location)
        by_bucket.setdefault(bucket, []).append(key)
    objects = [f"arn:aws:s3:::{bucket}/{key}/*" for bucket, keys in by_bucket.items() for key in keys]
    statements: list[dict[str, Any]] = [
        {"Effect": "Allow", "Action": list(READ_ACTIONS + (WRITE_ACTIONS if write else ())), "Resource": objects},
    ]
    for bucket, keys in sorted(by_bucket.items()):
        statements.append({
            "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [f"arn:aws:s3:::{bucket}"],
            "Condition": {"StringLike": {"s3:prefix": [p for key in keys for p in (key, f"{key}/*")]}},
        })
        statements.append({"Effect": "Allow", "Action": ["s3:GetBucketLocation"],
                           "Resource": [f"arn:aws:s3:::{bucket}"]})
    return {"Version": "2012-10-17", "Statement": statements}


@dataclass
class _Vended:
    config: dict[str, str]
    expires_at_s: float


@dataclass
class CredentialVendor:
    """Vends scoped credentials for the tables of one served catalog (``properties``: its own)."""

    properties: Mapping[str, str] = field(repr=False)
    warehouse: str | None
    settings: VendingSettings = field(default_factory=VendingSettings)
    _cache: dict[tuple[tuple[str, ...], bool], _Vended] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _client: Any = field(default=None, init=False, repr=False)
    # For /metrics: credentials vended by access, and reuses of cached ones (a miss is an AssumeRole).
    stats: Stats = field(default_factory=Stats, init=False, repr=False)

    @property
    def enabled(self) -> bool:
        if self.settings.vending == "none":
            return False
        return self.settings.vending == "sts" or bool(self.warehouse and self.warehouse.startswith("s3://"))

    def public_config(self) -> dict[str, str]:
        return public_properties(self.properties)

    def storage_credentials(self, location: str, extra_locations: Iterable[str], write: bool) -> list[dict[str, Any]]:
        """The spec's ``storage-credentials`` for a table at ``location``: one entry per prefix
        (the table location, and its data or metadata paths if elsewhere), all with the same
        credentials; empty when vending is off or the table is not in S3."""
        if not self.enabled or not location.startswith("s3://"):
            return []
        locations = tuple(sorted({location.rstrip("/"), *(p.rstrip("/") for p in extra_locations
                                                         if p.startswith("s3://"))}))
        for prefix in locations:
            self._check_vendable(prefix)
        vended = self._vend(locations, write)
        self.stats.inc(CREDENTIALS_VENDED, "write" if write else "read")
        # One entry per prefix (clients pick the longest prefix matching a file's path).
        return [{"prefix": prefix, "config": dict(vended.config)} for prefix in locations]

    def _check_vendable(self, prefix: str) -> None:
        # A writer sets its table's location and write.data.path / write.metadata.path: without
        # these checks, a path of s3://bucket or one with IAM wildcards (* ?) or policy variables
        # ($) would widen the session policy from one table to the bucket.
        bucket, key = _bucket_and_key(prefix)
        if any(c in prefix for c in "*?$") or not bucket or not key:
            raise ForbiddenError(
                f"no credentials are vended for {prefix!r}: a table location or write path must name "
                "a folder in a bucket, without '*', '?' or '$'; change the table's location or its "
                "write.data.path / write.metadata.path")
        warehouse = (self.warehouse or "").rstrip("/")
        if warehouse.startswith("s3://") and prefix != warehouse and not prefix.startswith(warehouse + "/"):
            raise ForbiddenError(
                f"no credentials are vended for {prefix!r}: it is outside the catalog's warehouse "
                f"{warehouse!r}, and vended credentials cover only locations under it; move the "
                "table's location or write paths under the warehouse, or read it with the catalog's "
                "own key")

    def _vend(self, locations: tuple[str, ...], write: bool) -> _Vended:
        key = (locations, write)
        now = time.time()
        with self._lock:
            cached = self._cache.get(key)
            # Reused while two thirds of its lifetime remain: every client gets at least that much.
            if cached is not None and cached.expires_at_s - now > self.settings.duration_s * 2 / 3:
                self.stats.inc(CACHE_HITS, "credentials")
                return cached
        self.stats.inc(CACHE_MISSES, "credentials")
        vended = self._assume_role(locations, write)
        with self._lock:
            self._cache[key] = vended
            for stale in [k for k, v in self._cache.items() if v.expires_at_s <= now]:
                del self._cache[stale]
        return vended

    def _assume_role(self, locations: tuple[str, ...], write: bool) -> _Vended:
        policy = json.dumps(session_policy(locations, write), separators=(",", ":"))
        endpoint = self.settings.sts_endpoint or self.properties.get("s3.endpoint") or None
        try:
            answer = self._sts(endpoint).assume_role(
                RoleArn=self.settings.role_arn, Policy=policy, DurationSeconds=self.settings.duration_s,
                RoleSessionName=f"tablestore-{'write' if write else 'read'}-{int(time.time())}")
            issued = answer["Credentials"]
            config = {
                **self.public_config(),
                "s3.access-key-id": str(issued["AccessKeyId"]),
                "s3.secret-access-key": str(issued["SecretAccessKey"]),
                "s3.session-token": str(issued["SessionToken"]),
            }
            expires_at_s = issued["Expiration"].timestamp()
        except Exception as e:  # refused, unreachable, not an STS answer
            raise VendingError(
                f"cannot vend storage credentials: STS AssumeRole at {endpoint or 'the AWS STS endpoint'} failed "
                f"({type(e).__name__}: {_short(e)}); check server.storage-credentials (sts-endpoint, "
                "role-arn) and the catalog's S3 key, or set vending: none"
            ) from None
        config[EXPIRES_AT] = str(int(expires_at_s * 1000))
        return _Vended(config, expires_at_s)

    def _sts(self, endpoint: str | None) -> Any:
        """botocore's STS client signed with the catalog's key, made once (clients are thread-safe).

        ``endpoint`` is MinIO's STS (its S3 port) or another STS; None is AWS's endpoint for the
        region. Created lazily: a catalog that never vends never imports botocore."""
        with self._lock:
            if self._client is None:
                import botocore.session
                from botocore.config import Config

                self._client = botocore.session.Session().create_client(
                    "sts", endpoint_url=endpoint, region_name=self.properties.get("s3.region") or "us-east-1",
                    aws_access_key_id=self.properties.get("s3.access-key-id") or "",
                    aws_secret_access_key=self.properties.get("s3.secret-access-key") or "",
                    # A catalog key that is itself temporary: its token is signed with the request.
                    aws_session_token=self.properties.get("s3.session-token") or None,
                    config=Config(connect_timeout=5, read_timeout=20, retries={"max_attempts": 2, "mode": "standard"}),
                )
            return self._client


def _short(error: BaseException) -> str:
    text = str(error)
    return text if len(text) < 300 else text[:300] + "..."


__all__ = [
    "DELEGATION_HEADER",
    "EXPIRES_AT",
    "SECRET_PROPERTIES",
    "VENDED",
    "CredentialVendor",
    "VendingError",
    "VendingSettings",
    "public_properties",
    "session_policy",
    "vending_settings",
    "wants_vended",
]
