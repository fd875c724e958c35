"""Remote signing (the REST spec's ``/sign`` endpoint and ``X-Iceberg-Access-Delegation:
remote-signing``) against real MinIO: pyiceberg's REST signer and Java's S3FileIO read and append
with no storage credential, and the service refuses what a principal or a table may not do.

The catalog's S3 key is a MinIO user's with access to the test's bucket only; STS vending is off,
so signing is the clients' only way to the files.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import requests

from tablestore.catalog.sql_catalog import SqlCatalog
from tests.rest.conftest import CATALOG, READ_TOKEN, WRITE_TOKEN, RestService, write_config
from tests.services import S3Server

pytestmark = pytest.mark.s3

SCHEMA = pa.schema([pa.field("id", pa.int64())])
# Distinctive, so that a leak into a response or a log is found by search.
ACCESS_KEY = "AKIASIGNING012345678"
SECRET_KEY = "signing-secret-key-0123456789abcdefXYZ"
REMOTE_SIGNING = {"header.X-Iceberg-Access-Delegation": "remote-signing"}


class Signing:
    """A service on a warehouse in MinIO, and what the tests reach it with."""

    def __init__(self, service: RestService, server: S3Server, bucket: str) -> None:
        self.service, self.server, self.bucket = service, server, bucket

    def pyiceberg(self, token: str = WRITE_TOKEN) -> Any:
        """pyiceberg's REST catalog, asking for remote signing: the URI, a token, nothing of S3."""
        from pyiceberg.catalog.rest import RestCatalog as PyRestCatalog

        return PyRestCatalog("rest", uri=self.service.uri, token=token, **REMOTE_SIGNING)

    def direct(self) -> SqlCatalog:
        return SqlCatalog(CATALOG, **self.service.direct_properties())

    def keys(self, location: str) -> list[str]:
        """Every object key under a table location, listed with MinIO's root key."""
        prefix = location.removeprefix(f"s3://{self.bucket}/").rstrip("/") + "/"
        client = self.server.client()
        found: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            found += [item["Key"] for item in page.get("Contents", [])]
        return sorted(found)

    def sign(self, namespace: str, table: str, method: str, uri: str, token: str = WRITE_TOKEN,
             headers: dict[str, list[str]] | None = None, **extra: Any) -> requests.Response:
        return requests.post(f"{self.service.uri}/v1/{CATALOG}/namespaces/{namespace}/tables/{table}/sign",
                             headers={"Authorization": f"Bearer {token}"}, timeout=30,
                             json={"region": self.server.region, "uri": uri, "method": method,
                                   "headers": headers or {}, **extra})

    def url(self, key: str, query: str = "") -> str:
        return f"{self.server.endpoint}/{self.bucket}/{key}" + (f"?{query}" if query else "")


@pytest.fixture(autouse=True)
def _one_s3_client_per_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyiceberg 0.12 installs its signer on the S3 client of an s3fs filesystem, which fsspec
    shares between threads, by unregistering and registering it again from each thread; a request
    sent from another thread in between goes out unsigned and MinIO answers 403 (apache/iceberg-python
    #3896, a client bug). With the instance cache off, each thread's filesystem has its own client."""
    from s3fs import S3FileSystem

    monkeypatch.setattr(S3FileSystem, "cachable", False)


@pytest.fixture
def signing(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Signing]:
    server: S3Server = request.getfixturevalue("s3_server")
    bucket = server.create_bucket()
    server.create_user(ACCESS_KEY, SECRET_KEY, [bucket])
    s3 = {**server.properties, "s3.access-key-id": ACCESS_KEY, "s3.secret-access-key": SECRET_KEY}
    catalog_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = f"s3://{bucket}/warehouse"
    config = tmp_path / "tablestore.yaml"
    write_config(config, catalog_uri, warehouse, s3, server_extra={"storage-credentials": "{vending: none}"})
    service = RestService(config, catalog_uri, warehouse, tmp_path, s3_properties=s3)
    service.start()
    try:
        yield Signing(service, server, bucket)
    finally:
        service.stop()


def _ids(table: Any) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def test_load_table_gives_signer_properties_and_no_credential(signing: Signing) -> None:
    py = signing.pyiceberg()
    py.create_namespace("sig")
    py.create_table("sig.t", SCHEMA)
    url = f"{signing.service.uri}/v1/{CATALOG}/namespaces/sig/tables/t"
    loaded = requests.get(url, timeout=30, headers={"Authorization": f"Bearer {READ_TOKEN}",
                                                    "X-Iceberg-Access-Delegation": "remote-signing"})
    assert loaded.status_code == 200, loaded.text
    body = loaded.json()
    config = body["config"]
    endpoint = f"v1/{CATALOG}/namespaces/sig/tables/t/sign"
    assert config["s3.remote-signing-enabled"] == "true"
    assert config["signer.endpoint"] == config["s3.signer.endpoint"] == endpoint
    assert config["s3.endpoint"] == signing.server.endpoint
    assert "storage-credentials" not in body
    assert not {"s3.access-key-id", "s3.secret-access-key", "s3.session-token"} & set(config)
    assert ACCESS_KEY not in loaded.text and SECRET_KEY not in loaded.text
    # Without the header, or asking for vended credentials (vending is off here), no signer.
    for header in ({}, {"X-Iceberg-Access-Delegation": "vended-credentials"}):
        plain = requests.get(url, timeout=30, headers={"Authorization": f"Bearer {READ_TOKEN}", **header}).json()
        assert "s3.remote-signing-enabled" not in plain["config"]
    # The first mechanism the service can give wins: vending is off, so signing.
    both = requests.get(url, timeout=30, headers={"Authorization": f"Bearer {READ_TOKEN}",
                                                  "X-Iceberg-Access-Delegation": "vended-credentials,remote-signing"})
    assert both.json()["config"]["s3.remote-signing-enabled"] == "true"
    # The config endpoint advertises the endpoint.
    advertised = requests.get(f"{signing.service.uri}/v1/config", timeout=30,
                              headers={"Authorization": f"Bearer {READ_TOKEN}"}).json()["endpoints"]
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign" in advertised


def test_pyiceberg_reads_and_appends_through_the_signer(signing: Signing) -> None:
    from pyiceberg.io.fsspec import FsspecFileIO

    writer = signing.pyiceberg()
    writer.create_namespace("sig")
    table = writer.create_table("sig.events", SCHEMA)
    # pyiceberg signs in its fsspec FileIO, which the service's config names, with no key of its own.
    assert isinstance(table.io, FsspecFileIO)
    assert "s3.secret-access-key" not in table.io.properties
    table.append(pa.table({"id": [1, 2, 3]}, schema=SCHEMA))
    writer.load_table("sig.events").append(pa.table({"id": [4]}, schema=SCHEMA))

    reader = signing.pyiceberg(READ_TOKEN)
    read = reader.load_table("sig.events")
    assert _ids(read) == [1, 2, 3, 4]
    assert len(read.metadata.snapshots) == 2

    # What MinIO holds, read with its root key: two data files and the metadata of two commits,
    # under the table's location; and the same rows through the catalog database.
    keys = signing.keys(read.metadata.location)
    assert len([k for k in keys if k.endswith(".parquet")]) == 2
    assert len([k for k in keys if k.endswith(".metadata.json")]) == 3
    direct = signing.direct()
    try:
        assert _ids(direct.load_table("sig.events")) == [1, 2, 3, 4]
    finally:
        direct.close()

    signing.service.stop()  # flushes the server's log
    assert SECRET_KEY not in signing.service.log()


def test_a_read_role_cannot_write_through_the_signer(signing: Signing) -> None:
    from pyiceberg.io.fsspec import SignError

    writer = signing.pyiceberg()
    writer.create_namespace("sig")
    writer.create_table("sig.t", SCHEMA).append(pa.table({"id": [1]}, schema=SCHEMA))
    location = writer.load_table("sig.t").metadata.location
    before = signing.keys(location)

    # pyiceberg with a read token reads, and its append fails at the first PUT: the signer is
    # refused, so the request is never sent.
    reader = signing.pyiceberg(READ_TOKEN).load_table("sig.t")
    assert _ids(reader) == [1]
    with pytest.raises(SignError, match="403"):
        reader.append(pa.table({"id": [2]}, schema=SCHEMA))
    assert signing.keys(location) == before
    assert _ids(signing.pyiceberg().load_table("sig.t")) == [1]

    # The service's answer, for every write method.
    key = location.removeprefix(f"s3://{signing.bucket}/") + "/data/intruder.parquet"
    for method, query in (("PUT", ""), ("DELETE", ""), ("POST", "uploads")):
        refused = signing.sign("sig", "t", method, signing.url(key, query), token=READ_TOKEN)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["type"] == "ForbiddenException"
        assert "read role" in refused.json()["error"]["message"]
    assert signing.keys(location) == before


def test_requests_outside_the_named_table_are_refused(signing: Signing) -> None:
    py = signing.pyiceberg()
    py.create_namespace("sig")
    mine = py.create_table("sig.t", SCHEMA)
    mine.append(pa.table({"id": [1]}, schema=SCHEMA))
    other = py.create_table("sig.t2", SCHEMA)  # its location starts with mine's: .../t2 after .../t
    other.append(pa.table({"id": [2]}, schema=SCHEMA))
    key_of = lambda location: location.removeprefix(f"s3://{signing.bucket}/")  # noqa: E731
    base, other_base = key_of(mine.metadata.location), key_of(other.metadata.location)
    assert other_base.startswith(base)
    other_file = next(k for k in signing.keys(other.metadata.location) if k.endswith(".parquet"))
    before = signing.keys(other.metadata.location)

    refusals = [
        ("GET", signing.url(other_file)),  # another table's file, through this table's URL
        ("PUT", signing.url(other_base + "/data/x.parquet")),
        ("DELETE", signing.url(other_file)),
        ("GET", signing.url("", f"list-type=2&prefix={other_base}/")),  # another table's listing
        ("GET", signing.url("", f"list-type=2&prefix={base}")),  # a prefix that lists t2 too
        ("GET", signing.url("", "list-type=2")),  # the whole bucket
        ("GET", signing.url(base + "/../" + key_of(other.metadata.location).rsplit("/", 1)[-1] + "/x")),
        ("PUT", signing.url(base + "/data/x.parquet", "acl")),  # not a file operation
        ("GET", signing.url("", "policy")),
        ("PUT", f"http://127.0.0.1:1/{signing.bucket}/{base}/data/x.parquet"),  # not the catalog's S3
        ("POST", signing.url("", "delete")),  # a multi-object delete without its body
    ]
    for method, uri in refusals:
        refused = signing.sign("sig", "t", method, uri)
        assert refused.status_code == 403, (method, uri, refused.text)
        assert refused.json()["error"]["type"] == "ForbiddenException"
    # A copy into the table from another table's file.
    copy = signing.sign("sig", "t", "PUT", signing.url(base + "/data/copy.parquet"),
                        headers={"x-amz-copy-source": [f"/{signing.bucket}/{other_file}"]})
    assert copy.status_code == 403
    # A multi-object delete whose body names another table's file, bound by its Content-MD5.
    import base64
    import hashlib

    xml = f"<Delete><Object><Key>{other_file}</Key></Object></Delete>"
    md5 = base64.b64encode(hashlib.md5(xml.encode()).digest()).decode()
    delete = signing.sign("sig", "t", "POST", signing.url("", "delete"), headers={"Content-MD5": [md5]}, body=xml)
    assert delete.status_code == 403 and "outside the locations" in delete.json()["error"]["message"]
    # The table must exist; and the other table's URL signs its own files.
    assert signing.sign("sig", "nope", "GET", signing.url(other_file)).status_code == 404
    assert signing.sign("sig", "t2", "GET", signing.url(other_file)).status_code == 200
    assert signing.keys(other.metadata.location) == before


def _signed(signing: Signing, table: str, method: str, uri: str, token: str = WRITE_TOKEN,
            headers: dict[str, str] | None = None, body: bytes | None = None) -> requests.Response:
    """Sign ``method uri`` through the service, then send it to MinIO as signed."""
    sent = dict(headers or {})
    answer = signing.sign("sig", table, method, uri, token=token, headers={k: [v] for k, v in sent.items()})
    assert answer.status_code == 200, answer.text
    signed = answer.json()
    assert answer.headers["Cache-Control"] == ("private" if method in ("GET", "HEAD") else "no-cache")
    for name, values in signed["headers"].items():
        sent[name] = ", ".join(values)
    return requests.request(method, signed["uri"], headers=sent, data=body, timeout=30)


def test_signed_requests_reach_minio(signing: Signing) -> None:
    py = signing.pyiceberg()
    py.create_namespace("sig")
    table = py.create_table("sig.t", SCHEMA)
    base = table.metadata.location.removeprefix(f"s3://{signing.bucket}/")

    # An object written, read, listed and deleted, each request signed by the service.
    key = f"{base}/data/hello.txt"
    assert _signed(signing, "t", "PUT", signing.url(key), body=b"hello").status_code == 200
    got = _signed(signing, "t", "GET", signing.url(key), token=READ_TOKEN)
    assert (got.status_code, got.content) == (200, b"hello")
    assert _signed(signing, "t", "HEAD", signing.url(key), token=READ_TOKEN).status_code == 200
    listing = _signed(signing, "t", "GET", signing.url("", f"list-type=2&prefix={base}/data/"), token=READ_TOKEN)
    assert listing.status_code == 200 and f"<Key>{key}</Key>" in listing.text

    # A multipart upload: initiate, one part, complete.
    big = f"{base}/data/multipart.bin"
    started = _signed(signing, "t", "POST", signing.url(big, "uploads"))
    assert started.status_code == 200, started.text
    upload_id = started.text.split("<UploadId>")[1].split("</UploadId>")[0]
    part = _signed(signing, "t", "PUT", signing.url(big, f"partNumber=1&uploadId={upload_id}"), body=b"x" * 1024)
    assert part.status_code == 200, part.text
    etag = part.headers["ETag"]
    done = f"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{etag}</ETag></Part>" \
           "</CompleteMultipartUpload>"
    completed = _signed(signing, "t", "POST", signing.url(big, f"uploadId={upload_id}"), body=done.encode())
    assert completed.status_code == 200, completed.text
    assert signing.server.client().get_object(Bucket=signing.bucket, Key=big)["Body"].read() == b"x" * 1024

    # A multi-object delete of the table's own files, its body bound by Content-MD5.
    import base64
    import hashlib

    xml = f"<Delete><Object><Key>{key}</Key></Object><Object><Key>{big}</Key></Object></Delete>"
    md5 = base64.b64encode(hashlib.md5(xml.encode()).digest()).decode()
    answer = signing.sign("sig", "t", "POST", signing.url("", "delete"), headers={"Content-MD5": [md5]}, body=xml)
    assert answer.status_code == 200, answer.text
    headers = {"Content-MD5": md5, **{k: ", ".join(v) for k, v in answer.json()["headers"].items()}}
    deleted = requests.post(signing.url("", "delete"), headers=headers, data=xml.encode(), timeout=30)
    assert deleted.status_code == 200, deleted.text
    assert not [k for k in signing.keys(table.metadata.location) if k.startswith(f"{base}/data/")]


def test_signed_requests_are_counted_by_catalog(signing: Signing) -> None:
    """/metrics counts the requests the service signed, by catalog: two signed, one refused."""
    py = signing.pyiceberg()
    py.create_namespace("count")
    table = py.create_table("count.t", SCHEMA)
    key = table.metadata.location.removeprefix(f"s3://{signing.bucket}/") + "/data/a.parquet"
    assert signing.sign("count", "t", "PUT", signing.url(key)).status_code == 200
    assert signing.sign("count", "t", "GET", signing.url(key), token=READ_TOKEN).status_code == 200
    assert signing.sign("count", "t", "PUT", signing.url(key), token=READ_TOKEN).status_code == 403
    metrics = requests.get(f"{signing.service.uri}/metrics", headers={"Authorization": f"Bearer {READ_TOKEN}"},
                           timeout=30)
    assert f'tablestore_requests_signed_total{{catalog="{CATALOG}"}} 2.0' in metrics.text.splitlines()


def _java(signing: Signing, token: str, statements: list[str]) -> subprocess.CompletedProcess[str]:
    """Java's REST catalog client and S3FileIO (``oracle rest-sql`` with Iceberg's AWS bundle),
    asking for remote signing: the URI, a token, nothing of S3."""
    from infra import iceberg_aws
    from tests.oracle import ORACLE_DIR, _ensure_built

    _ensure_built()
    env = {**os.environ, **iceberg_aws.oracle_environment(iceberg_aws.install())}
    return subprocess.run(
        [str(ORACLE_DIR / "oracle"), "rest-sql", signing.service.uri, "--token", token, "--warehouse", CATALOG,
         "--conf", "header.X-Iceberg-Access-Delegation=remote-signing", "-e", "; ".join(statements)],
        capture_output=True, text=True, timeout=900, env=env)


@pytest.mark.oracle
def test_java_s3fileio_reads_and_appends_through_the_signer(signing: Signing) -> None:
    py = signing.pyiceberg()
    py.create_namespace("sig")
    py.create_table("sig.t", SCHEMA).append(pa.table({"id": [1, 2]}, schema=SCHEMA))
    location = py.load_table("sig.t").metadata.location

    first_list = py.load_table("sig.t").current_snapshot().manifest_list
    # Expiring the first snapshot deletes its manifest list with S3FileIO's bulk delete: a
    # multi-object delete, signed with its body.
    expire = ("CALL rest.system.expire_snapshots(table => 'sig.t', older_than => TIMESTAMP '2100-01-01 00:00:00', "
              "retain_last => 1)")
    done = _java(signing, WRITE_TOKEN, ["SELECT * FROM rest.sig.t ORDER BY id", "INSERT INTO rest.sig.t VALUES (10)",
                                        "SELECT * FROM rest.sig.t ORDER BY id", expire])
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [r["rows"] for r in results[:2]] == [[[1], [2]], [[1], [2], [10]]], done.stdout[-2000:]
    expired = dict(zip([c["name"] for c in results[2]["columns"]], results[2]["rows"][0], strict=True))
    assert expired["deleted_manifest_lists_count"] == 1, expired
    assert first_list.removeprefix(f"s3://{signing.bucket}/") not in signing.keys(location)
    # Java's commit, and its data file in MinIO, as pyiceberg (through the signer) and the
    # catalog database see them.
    assert _ids(signing.pyiceberg(READ_TOKEN).load_table("sig.t")) == [1, 2, 10]
    assert len([k for k in signing.keys(location) if k.endswith(".parquet")]) == 2
    before = signing.keys(location)

    # A read role reads, and its INSERT fails at the first PUT with the service's 403.
    refused = _java(signing, READ_TOKEN, ["SELECT count(*) FROM rest.sig.t", "INSERT INTO rest.sig.t VALUES (11)"])
    assert refused.returncode != 0
    assert '"rows": [[3]]' in refused.stdout
    assert "ForbiddenException" in refused.stderr and "only the read role" in refused.stderr, refused.stderr[-3000:]
    assert signing.keys(location) == before
    direct = signing.direct()
    try:
        assert _ids(direct.load_table("sig.t")) == [1, 2, 10]
    finally:
        direct.close()
