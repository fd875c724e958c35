"""What the service signs for a client (the REST spec's remote signing), and how: S3 requests,
checked against one table's locations and the principal's role, signed with SigV4.

A client that loads a table with ``X-Iceberg-Access-Delegation: remote-signing`` gets no storage
credential. Before each S3 request it sends the request's method, URI, headers and region to
``POST .../tables/{table}/sign`` (:mod:`tablestore.rest.routes.signing`), and sends the request with
the headers it gets back. Here:

- :func:`parse_request` reads what the request does: which bucket, which object key (or which
  listing prefix), which operation (its method and sub-resource query), whether it reads or
  writes, and which other keys it touches (a copy's source, a multi-object delete's keys);
- :func:`check_request` refuses (``ForbiddenError``, 403) every request outside the table's
  locations, every write for a principal without the write role, and every operation that is
  neither reading nor writing a table's objects (bucket policies, ACLs, other buckets' lists);
- :class:`RequestSigner` signs what passed with the catalog's own key (botocore's SigV4 signer),
  which never leaves the service: the answer holds a signature for this one request.

The payload is not seen by the service (clients send it only for a multi-object delete), so the
signature covers ``UNSIGNED-PAYLOAD``, or the payload hash the client declared in
``x-amz-content-sha256``. A multi-object delete is signed only when its body, which names the keys
it deletes, is bound to the request by a ``Content-MD5`` or ``x-amz-content-sha256`` of the
body that the service checks: otherwise a client could show one list of keys and send another.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
import xml.etree.ElementTree as ElementTree
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from tablestore.errors import ForbiddenError, TableStoreError, ValidationError

UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
CONTENT_SHA256 = "x-amz-content-sha256"
COPY_SOURCE = "x-amz-copy-source"
# Headers the service sets itself, or that change between a signing and the request it signs
# (the AWS SDK's retry and invocation ids): never signed, never given back.
_NOT_SIGNED = frozenset({
    "authorization", "x-amz-date", "date", "x-amz-security-token", "host", "amz-sdk-invocation-id",
    "amz-sdk-retry", "amz-sdk-request", "content-length", "user-agent", "expect", "connection",
    "transfer-encoding",
})
# Query parameters by what they select: an object operation may carry only these.
_OBJECT_READ_QUERY = frozenset({"versionId", "partNumber", "uploadId", "max-parts", "part-number-marker", "x-id"})
_OBJECT_PUT_QUERY = frozenset({"partNumber", "uploadId", "x-id"})
_OBJECT_POST_QUERY = frozenset({"uploads", "uploadId", "x-id"})
_OBJECT_DELETE_QUERY = frozenset({"uploadId", "versionId", "x-id"})
# Listings of a bucket (ListObjects v1 and v2, ListMultipartUploads): a prefix is required.
_LIST_QUERY = frozenset({
    "list-type", "prefix", "delimiter", "continuation-token", "start-after", "max-keys", "encoding-type",
    "fetch-owner", "marker", "uploads", "key-marker", "upload-id-marker", "max-uploads", "x-id",
})
# AWS's hosts: path style (s3.amazonaws.com, s3.<region>.amazonaws.com, s3-<region>...) or
# virtual-hosted (<bucket>.s3...).
_AWS_HOST = re.compile(r"^(?:(?P<bucket>.+)\.)?s3(?:[.-][a-z0-9-]+)*\.amazonaws\.com(?:\.cn)?(?::443)?$")
_S3_SCHEMES = ("s3://", "s3a://", "s3n://")


REMOTE_SIGNING = "remote-signing"
# The load-table config that turns a client's remote signer on. Iceberg 1.11 names the endpoint
# signer.endpoint; Java 1.10 and pyiceberg read s3.signer.endpoint; pyiceberg signs only in its
# fsspec FileIO (pyarrow's S3 client cannot call out to a signer), with the signer it names.
ENABLED = "s3.remote-signing-enabled"
SIGNER_ENDPOINT = "signer.endpoint"
S3_SIGNER_ENDPOINT = "s3.signer.endpoint"
PYICEBERG_SIGNER = "s3.signer"
PYICEBERG_IO = "py-io-impl"


def signer_config(prefix: str, identifier: Sequence[str], separator_encoded: str) -> dict[str, str]:
    """The ``config`` of a LoadTableResult for a client that signs through this service: remote
    signing on, and the table's own signing endpoint, relative, so that clients resolve it against
    the catalog URI they use (the spec's default for ``signer.uri``)."""
    namespace = separator_encoded.join(quote(level, safe="") for level in identifier[:-1])
    endpoint = f"v1/{quote(prefix, safe='')}/namespaces/{namespace}/tables/{quote(identifier[-1], safe='')}/sign"
    return {
        ENABLED: "true",
        SIGNER_ENDPOINT: endpoint,
        S3_SIGNER_ENDPOINT: endpoint,
        PYICEBERG_SIGNER: "S3V4RestSigner",
        PYICEBERG_IO: "pyiceberg.io.fsspec.FsspecFileIO",
    }


class SigningUnavailableError(TableStoreError):
    """The service has no key to sign with: it answers 503 and says so."""


@dataclass(frozen=True)
class S3Location:
    """A bucket and a key prefix (no leading or trailing slash): one of a table's locations."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, location: str) -> S3Location | None:
        """The S3 location of ``s3://bucket/path`` (s3a, s3n too); None for another scheme."""
        if not location.startswith(_S3_SCHEMES):
            return None
        parts = urlsplit(location)
        return cls(parts.netloc, parts.path.strip("/"))

    def holds(self, bucket: str, key: str) -> bool:
        """Whether ``key`` in ``bucket`` lies below this location (a folder: ``prefix/...``)."""
        return bucket == self.bucket and bool(self.prefix) and key.startswith(self.prefix + "/")

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


@dataclass(frozen=True)
class S3Request:
    """What an S3 request does, as far as signing it is concerned."""

    method: str
    bucket: str
    key: str | None  # None for a request on the bucket itself
    query: Mapping[str, str]
    operation: str  # a name for messages: GetObject, PutObject, ListObjects, ...
    write: bool
    # Every (bucket, key) the request reads or writes, and every listing prefix it reads.
    keys: tuple[tuple[str, str], ...] = ()
    prefixes: tuple[tuple[str, str], ...] = ()


def query_parameters(query: str) -> list[tuple[str, str]]:
    """The decoded parameters of a query string ('+' is kept: S3 clients encode a space as %20)."""
    pairs = []
    for pair in query.split("&") if query else ():
        name, _, value = pair.partition("=")
        pairs.append((unquote(name), unquote(value)))
    return pairs


def _host_bucket(host: str, endpoint: str | None) -> tuple[bool, str | None]:
    """Whether ``host`` is the catalog's S3 endpoint, and the bucket a virtual-hosted name gives."""
    host = host.lower()
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
        ours = parts.netloc.lower()
        if host == ours:
            return True, None
        if ours and host.endswith("." + ours):
            return True, host[: -len(ours) - 1]
        return False, None
    match = _AWS_HOST.match(host)
    if match is None:
        return False, None
    return True, match.group("bucket")


def _plain_key(key: str, what: str) -> str:
    # Some S3-compatible stores resolve '.' and '..' segments: a key that would pass a prefix
    # check and then name another table's object is refused outright.
    if any(segment in (".", "..") for segment in key.split("/")) or any(ord(c) < 32 for c in key):
        raise ForbiddenError(f"remote signing refused: the {what} {key!r} has '.' or '..' segments or control "
                             "characters")
    return key


def parse_request(method: str, uri: str, headers: Mapping[str, Sequence[str]], body: str | None,
                  endpoint: str | None) -> S3Request:
    """The S3 request ``method uri`` (with its headers, and the body of a multi-object delete),
    as the operation it is; ForbiddenError for a host other than the catalog's S3 endpoint
    (``endpoint``; AWS's S3 hosts when None) and for any operation this service does not sign."""
    method = method.upper()
    try:
        parts = urlsplit(uri)
    except ValueError as e:  # an invalid IPv6 host, a bad port
        raise ValidationError(f"remote signing: the uri {uri!r} is not a URL: {e}") from None
    if parts.scheme not in ("http", "https"):
        raise ValidationError(f"remote signing: the uri {uri!r} is not an http(s) URL")
    ours, virtual_bucket = _host_bucket(parts.netloc, endpoint)
    if not ours:
        raise ForbiddenError(f"remote signing refused: {parts.netloc!r} is not the catalog's S3 endpoint "
                             f"({endpoint or 'AWS S3'}); the service signs requests to its own storage only")
    path = unquote(parts.path)
    if virtual_bucket is not None:
        bucket, key = virtual_bucket, path.lstrip("/")
    else:
        bucket, _, key = path.lstrip("/").partition("/")
    if not bucket:
        raise ForbiddenError("remote signing refused: the request names no bucket (ListBuckets and other "
                             "account-wide operations are not signed)")
    query = dict(query_parameters(parts.query))
    lowered = {k.lower(): v for k, v in headers.items()}
    if key:
        return _object_request(method, bucket, _plain_key(key, "object key"), query, lowered)
    return _bucket_request(method, bucket, query, lowered, body)


def _unexpected(names: Iterable[str], allowed: frozenset[str], method: str, what: str) -> None:
    extra = sorted(n for n in names if n not in allowed and not (method == "GET" and n.startswith("response-")))
    if extra:
        raise ForbiddenError(f"remote signing refused: {method} on {what} with {', '.join(extra)} is not an "
                             "operation on a table's files (only reads, writes, listings and multipart uploads "
                             "of objects are signed)")


def _object_request(method: str, bucket: str, key: str, query: Mapping[str, str],
                    headers: Mapping[str, Sequence[str]]) -> S3Request:
    where = f"s3://{bucket}/{key}"
    if method in ("GET", "HEAD"):
        _unexpected(query, _OBJECT_READ_QUERY, method, where)
        operation = "ListParts" if "uploadId" in query else ("HeadObject" if method == "HEAD" else "GetObject")
        return S3Request(method, bucket, key, query, operation, False, ((bucket, key),))
    if method == "PUT":
        _unexpected(query, _OBJECT_PUT_QUERY, method, where)
        keys = [(bucket, key)]
        source = headers.get(COPY_SOURCE)
        if source:
            # CopyObject / UploadPartCopy: the source is read, and must be the table's too.
            text = unquote(source[0]).lstrip("/").split("?", 1)[0]
            source_bucket, _, source_key = text.partition("/")
            keys.append((source_bucket, _plain_key(source_key, "copy source")))
        operation = "UploadPart" if "uploadId" in query else ("CopyObject" if source else "PutObject")
        return S3Request(method, bucket, key, query, operation, True, tuple(keys))
    if method == "POST":
        _unexpected(query, _OBJECT_POST_QUERY, method, where)
        if "uploads" in query:
            operation = "CreateMultipartUpload"
        elif "uploadId" in query:
            operation = "CompleteMultipartUpload"
        else:
            raise ForbiddenError(f"remote signing refused: POST on {where} without ?uploads or ?uploadId is not "
                                 "a multipart upload")
        return S3Request(method, bucket, key, query, operation, True, ((bucket, key),))
    if method == "DELETE":
        _unexpected(query, _OBJECT_DELETE_QUERY, method, where)
        operation = "AbortMultipartUpload" if "uploadId" in query else "DeleteObject"
        return S3Request(method, bucket, key, query, operation, True, ((bucket, key),))
    raise ForbiddenError(f"remote signing refused: {method} on {where} is not signed")


def _bucket_request(method: str, bucket: str, query: Mapping[str, str], headers: Mapping[str, Sequence[str]],
                    body: str | None) -> S3Request:
    where = f"bucket {bucket!r}"
    if method in ("GET", "HEAD") and (not query or set(query) == {"location"}):
        # HeadBucket and GetBucketLocation: what clients ask before they read a table's bucket.
        return S3Request(method, bucket, None, query, "GetBucketLocation" if query else "HeadBucket", False)
    if method == "GET":
        _unexpected(query, _LIST_QUERY, method, where)
        prefix = query.get("prefix", "")
        if not prefix:
            raise ForbiddenError(f"remote signing refused: a listing of {where} needs a prefix inside the "
                                 "table's location; the whole bucket is not listed")
        operation = "ListMultipartUploads" if "uploads" in query else "ListObjects"
        return S3Request(method, bucket, None, query, operation, False,
                         prefixes=((bucket, _plain_key(prefix, "listing prefix")),))
    if method == "POST" and set(query) <= {"delete", "x-id"} and "delete" in query:
        return S3Request(method, bucket, None, query, "DeleteObjects", True,
                         tuple((bucket, _plain_key(key, "object key")) for key in _deleted_keys(headers, body)))
    raise ForbiddenError(f"remote signing refused: {method} on {where}"
                         + (f" with {', '.join(sorted(query))}" if query else "")
                         + " is not an operation on a table's files")


def _deleted_keys(headers: Mapping[str, Sequence[str]], body: str | None) -> list[str]:
    """The keys a DeleteObjects body names, once the body is known to be the one sent."""
    if not body:
        raise ForbiddenError("remote signing refused: a multi-object delete (POST ?delete) is signed only with "
                             "its body, which names the keys it deletes; send 'body' in the sign request or "
                             "delete the objects one by one")
    raw = body.encode("utf-8")
    if not _bound(headers, raw):
        raise ForbiddenError("remote signing refused: the multi-object delete's body is not bound to the request "
                             "(no Content-MD5, x-amz-content-sha256 or x-amz-checksum-crc32/sha1/sha256 header "
                             "of that body), so the keys it deletes cannot be checked")
    try:
        root = ElementTree.fromstring(raw)
    except ElementTree.ParseError as e:
        raise ValidationError(f"remote signing: the multi-object delete's body is not XML: {e}") from None
    keys = [element.text or "" for element in root.iter() if element.tag.rsplit("}", 1)[-1] == "Key"]
    if not keys:
        raise ValidationError("remote signing: the multi-object delete's body names no key")
    return keys


def _bound(headers: Mapping[str, Sequence[str]], raw: bytes) -> bool:
    """Whether a signed header of the request is a digest of ``raw``: S3 then refuses any other body."""
    def b64(digest: bytes) -> str:
        return base64.b64encode(digest).decode("ascii")

    expected = {
        "content-md5": b64(hashlib.md5(raw).digest()),
        CONTENT_SHA256: hashlib.sha256(raw).hexdigest(),
        "x-amz-checksum-crc32": b64(zlib.crc32(raw).to_bytes(4, "big")),
        "x-amz-checksum-sha1": b64(hashlib.sha1(raw).digest()),
        "x-amz-checksum-sha256": b64(hashlib.sha256(raw).digest()),
    }
    return any((headers.get(name) or [""])[0] == value for name, value in expected.items())


def check_request(request: S3Request, locations: Sequence[S3Location], may_write: bool, table: str) -> None:
    """ForbiddenError unless every key and prefix of ``request`` lies inside one of the table's
    ``locations``, and it only reads or the principal ``may_write``."""
    if request.write and not may_write:
        raise ForbiddenError(f"remote signing refused: {request.operation} writes, and this principal has only "
                             f"the read role in the catalog (or, under grants, READ without WRITE on {table}); "
                             f"{table} is read-only for it")
    where = ", ".join(str(location) for location in locations) or "no S3 location"
    if request.key is None and not request.keys and not request.prefixes:
        # HeadBucket, GetBucketLocation: allowed for a bucket holding the table.
        if any(location.bucket == request.bucket for location in locations):
            return
        raise ForbiddenError(f"remote signing refused: bucket {request.bucket!r} holds none of {table}'s files "
                             f"({where})")
    for bucket, key in request.keys:
        if not any(location.holds(bucket, key) for location in locations):
            raise ForbiddenError(f"remote signing refused: s3://{bucket}/{key} ({request.operation}) is outside "
                                 f"the locations of {table} ({where}); a request is signed only for the files "
                                 "of the table its signing URL names")
    for bucket, prefix in request.prefixes:
        if not any(location.holds(bucket, prefix) for location in locations):
            raise ForbiddenError(f"remote signing refused: the listing of s3://{bucket}/{prefix} "
                                 f"({request.operation}) is outside the locations of {table} ({where})")


@dataclass
class RequestSigner:
    """Signs S3 requests with SigV4 and the catalog's key (``properties``: the catalog's own)."""

    properties: Mapping[str, str] = field(repr=False)
    _credentials: Any = field(default=None, init=False, repr=False)

    @property
    def endpoint(self) -> str | None:
        return self.properties.get("s3.endpoint") or None

    def _key(self) -> Any:
        if self._credentials is None:
            from botocore.credentials import Credentials

            key, secret = self.properties.get("s3.access-key-id"), self.properties.get("s3.secret-access-key")
            if key and secret:
                self._credentials = Credentials(key, secret, self.properties.get("s3.session-token") or None)
            else:  # the environment's: AWS_* variables, a profile, an instance role
                import botocore.session

                found = botocore.session.Session().get_credentials()
                if found is None:
                    raise SigningUnavailableError(
                        "cannot sign: the catalog has no S3 key (s3.access-key-id and s3.secret-access-key) "
                        "and none was found in the environment")
                self._credentials = found
        return self._credentials

    def sign(self, method: str, uri: str, region: str | None, headers: Mapping[str, Sequence[str]]
             ) -> dict[str, list[str]]:
        """The headers to add to the request ``method uri`` for it to be signed: the signature,
        its date, the payload hash (when the client sent none) and a session token (when the
        catalog's key has one). The client's own headers are signed as sent."""
        from botocore.awsrequest import AWSRequest

        signed: dict[str, str] = {}
        for name, values in headers.items():
            if name.lower() not in _NOT_SIGNED and values:
                signed[name] = ",".join(values)
        payload = next((v for k, v in signed.items() if k.lower() == CONTENT_SHA256), None) or UNSIGNED_PAYLOAD
        # The query as parameters, so that botocore encodes them as SigV4 and S3 do, whether the
        # client's URI encoded them or not.
        parts = urlsplit(uri)
        request = AWSRequest(method=method.upper(), url=parts._replace(query="").geturl(), headers=signed,
                             params=query_parameters(parts.query))
        credentials = self._key().get_frozen_credentials()
        region = region or self.properties.get("s3.region") or self.properties.get("client.region") or "us-east-1"
        _signer_class()(credentials, region, payload).add_auth(request)
        before = {k.lower() for k in signed}
        return {name: [value] for name, value in request.headers.items() if name.lower() not in before}


@functools.cache
def _signer_class() -> Any:
    """botocore's S3 SigV4 signer with the payload hash given, not computed from a body the
    service never sees (botocore is imported on the first signing, as credentials.py does)."""
    from botocore.auth import S3SigV4Auth

    class FixedPayloadAuth(S3SigV4Auth):
        def __init__(self, credentials: Any, region: str, payload: str) -> None:
            super().__init__(credentials, "s3", region)
            self._payload = payload

        def payload(self, request: Any) -> str:
            return self._payload

    return FixedPayloadAuth


__all__ = [
    "ENABLED",
    "REMOTE_SIGNING",
    "RequestSigner",
    "S3Location",
    "S3Request",
    "SigningUnavailableError",
    "check_request",
    "parse_request",
    "signer_config",
]
