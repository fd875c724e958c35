"""Scoped, short-lived storage credentials vended by the catalog service, enforced by MinIO.

The service's S3 key is a MinIO user's whose policy covers the test's bucket only (as the
stack's catalog user does: ``infra/storage_init.py``). It vends with MinIO's real STS
``AssumeRole`` (on the S3 port) and a session policy per table; MinIO makes a vended key worth
the intersection of that user's policy and the session policy. So these tests prove
enforcement by trying: a read credential cannot PUT or DELETE (403), a credential for table A
cannot list or read table B, and an expired credential is refused.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.exceptions
import pyarrow as pa
import pytest
import requests

from tablestore.errors import ConfigError, ForbiddenError, ValidationError
from tablestore.rest.storage.credentials import (
    EXPIRES_AT,
    READ_ACTIONS,
    WRITE_ACTIONS,
    CredentialVendor,
    session_policy,
    vending_settings,
)
from tests.rest.conftest import CATALOG, READ_TOKEN, WRITE_TOKEN, RestService, write_config

pytestmark = pytest.mark.s3

SCHEMA = pa.schema([pa.field("id", pa.int64())])
# The catalog's own key (a MinIO user's): distinctive, so that any response carrying it is found by search.
ACCESS_KEY = "AKIACATALOGOWNKEY0001"
SECRET_KEY = "catalog-own-secret-0123456789abcdefXYZ"
DELEGATE = {"X-Iceberg-Access-Delegation": "vended-credentials"}


class Recorder:
    """Every response body and header the service sent to the clients of a test."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self.texts.append(f"{response.request.method} {response.url} {response.status_code} "
                          f"{dict(response.headers)} {response.text}")

    def watch(self, session: requests.Session) -> None:
        session.hooks["response"].append(self)


def _catalog_user(s3_server: Any, bucket: str, access_key: str = ACCESS_KEY) -> dict[str, str]:
    """The S3 properties of a MinIO user limited to ``bucket``: the catalog's own key."""
    s3_server.create_user(access_key, SECRET_KEY, [bucket])
    return {**s3_server.properties, "s3.access-key-id": access_key, "s3.secret-access-key": SECRET_KEY}


def _service(tmp_path: Path, s3_server: Any, extra: str = "") -> RestService:
    bucket = s3_server.create_bucket()
    s3 = _catalog_user(s3_server, bucket)
    warehouse = f"s3://{bucket}/warehouse"
    catalog_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    config = tmp_path / "tablestore.yaml"
    write_config(config, catalog_uri, warehouse, s3)
    if extra:
        config.write_text(config.read_text() + extra)
    service = RestService(config, catalog_uri, warehouse, tmp_path, s3_properties=s3)
    service.start()
    return service


@pytest.fixture
def vending_service(tmp_path: Path, s3_server: Any) -> Iterator[RestService]:
    # STS at its default: the catalog's s3.endpoint, MinIO's S3 port.
    service = _service(tmp_path, s3_server)
    try:
        yield service
    finally:
        service.stop()


def _refused(call: Any, **kwargs: Any) -> str:
    """The S3 error code of a call that must fail with 403."""
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        call(**kwargs)
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403, refused.value.response
    code: str = refused.value.response["Error"]["Code"]
    return code


def _client(s3_server: Any, creds: dict[str, str]) -> Any:
    return s3_server.client(creds["s3.access-key-id"], creds["s3.secret-access-key"], creds["s3.session-token"])


def _get(service: RestService, path: str, token: str, headers: dict[str, str] | None = None,
         recorder: Recorder | None = None) -> requests.Response:
    response = requests.get(f"{service.uri}/v1/{CATALOG}/{path}", timeout=30,
                            headers={"Authorization": f"Bearer {token}", **(headers or {})})
    if recorder is not None:
        recorder(response)
    return response


def _allowed(policy: dict[str, Any]) -> tuple[set[str], set[str], list[str]]:
    """(object actions, object resources, listable prefixes) a session policy allows."""
    actions: set[str] = set()
    resources: set[str] = set()
    prefixes: list[str] = []
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        if statement["Action"] == ["s3:ListBucket"]:
            prefixes += statement["Condition"]["StringLike"]["s3:prefix"]
        elif statement["Action"] != ["s3:GetBucketLocation"]:
            actions |= set(statement["Action"])
            resources |= set(statement["Resource"])
    return actions, resources, prefixes


def test_vended_credentials_are_scoped_to_the_table_read_only_for_readers_and_expiring(
        vending_service: RestService, s3_server: Any) -> None:
    service = vending_service
    ns = f"cred_{uuid.uuid4().hex[:8]}"
    writer = service.client()  # tablestore's rest catalog: it asks for vended credentials
    try:
        writer.create_namespace(ns)
        table = writer.create_table(f"{ns}.t", SCHEMA)
        table.append(pa.table({"id": [1, 2]}, schema=SCHEMA))
        writer.load_table(f"{ns}.t").append(pa.table({"id": [3]}, schema=SCHEMA))
        loaded_table = writer.load_table(f"{ns}.t")
        location = loaded_table.metadata.location
        # Table B, beside A in the same namespace, bucket and warehouse.
        other = writer.create_table(f"{ns}.u", SCHEMA)
        other.append(pa.table({"id": [9]}, schema=SCHEMA))
        other_metadata = writer.load_table(f"{ns}.u").metadata_location
        # The writer's FileIO holds vended credentials, not the catalog's key.
        config = writer._table_configs[location]
        assert config["s3.access-key-id"] != ACCESS_KEY and config["s3.session-token"]
        # Credentials with less than 5 minutes left are renewed at the credentials endpoint
        # before the table's files are touched again.
        recorder = Recorder()
        recorder.watch(writer._session)
        config[EXPIRES_AT] = str(int((time.time() + 60) * 1000))
        writer._table_ios.pop(location, None)
        io = writer.table_io(loaded_table.metadata)
        assert [t.split(" ")[:2] for t in recorder.texts] == \
            [["GET", f"{service.uri}/v1/{CATALOG}/namespaces/{ns}/tables/t/credentials"]]
        renewed = writer._table_configs[location]
        assert int(renewed[EXPIRES_AT]) / 1000 - time.time() > 600
        assert io.properties["s3.session-token"] == renewed["s3.session-token"]
    finally:
        writer.close()
    bucket, key = location.removeprefix("s3://").split("/", 1)
    other_key = other_metadata.removeprefix(f"s3://{bucket}/").split("/metadata/")[0]

    # The session policy the service asks STS for: the table's files, read-only for readers.
    for write, expected in ((False, set(READ_ACTIONS)), (True, set(READ_ACTIONS) | set(WRITE_ACTIONS))):
        actions, resources, prefixes = _allowed(session_policy([location], write))
        assert (actions, resources, prefixes) == (expected, {f"arn:aws:s3:::{bucket}/{key}/*"}, [key, f"{key}/*"])

    before = time.time()
    vended: dict[str, dict[str, str]] = {}
    for role, token in (("read", READ_TOKEN), ("write", WRITE_TOKEN)):
        loaded = _get(service, f"namespaces/{ns}/tables/t", token, DELEGATE).json()
        (credential,) = loaded["storage-credentials"]
        assert credential["prefix"] == location
        creds = credential["config"]
        assert set(creds) >= {"s3.access-key-id", "s3.secret-access-key", "s3.session-token", EXPIRES_AT}
        assert creds["s3.access-key-id"] != ACCESS_KEY and creds["s3.secret-access-key"] != SECRET_KEY
        assert creds["s3.endpoint"] == s3_server.endpoint
        # Expiring: 15 minutes (the default duration) from now, in milliseconds.
        expires_in = int(creds[EXPIRES_AT]) / 1000 - before
        assert 600 <= expires_in <= 900 + 5, expires_in
        # The same credentials in config, for clients that read only config.
        assert loaded["config"]["s3.session-token"] == creds["s3.session-token"]
        # The credentials endpoint vends the same scope for the same role.
        fresh = _get(service, f"namespaces/{ns}/tables/t/credentials", token).json()["storage-credentials"]
        assert [c["prefix"] for c in fresh] == [location]
        vended[role] = creds
    assert vended["read"]["s3.access-key-id"] != vended["write"]["s3.access-key-id"]

    # What MinIO enforces, tried with each credential.
    metadata_key = loaded_table.metadata_location.removeprefix(f"s3://{bucket}/")
    read, write = _client(s3_server, vended["read"]), _client(s3_server, vended["write"])
    for s3 in (read, write):
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{key}/")
        assert metadata_key in [o["Key"] for o in listed["Contents"]]
        assert s3.get_object(Bucket=bucket, Key=metadata_key)["Body"].read().startswith(b"{")
        # Nothing outside the table: not the bucket's listing, not the warehouse's.
        assert _refused(s3.list_objects_v2, Bucket=bucket) == "AccessDenied"
        assert _refused(s3.list_objects_v2, Bucket=bucket, Prefix="warehouse/") == "AccessDenied"
        # Table A's credential neither lists nor reads table B.
        assert _refused(s3.list_objects_v2, Bucket=bucket, Prefix=f"{other_key}/") == "AccessDenied"
        assert _refused(s3.get_object, Bucket=bucket,
                        Key=other_metadata.removeprefix(f"s3://{bucket}/")) == "AccessDenied"
    # A read credential cannot write or delete.
    assert _refused(read.put_object, Bucket=bucket, Key=f"{key}/data/x.parquet", Body=b"x") == "AccessDenied"
    assert _refused(read.delete_object, Bucket=bucket, Key=metadata_key) == "AccessDenied"
    assert read.head_object(Bucket=bucket, Key=metadata_key)["ContentLength"] > 0  # still there
    # A write credential writes and deletes in its table, and nowhere else.
    write.put_object(Bucket=bucket, Key=f"{key}/data/probe.bin", Body=b"probe")
    write.delete_object(Bucket=bucket, Key=f"{key}/data/probe.bin")
    assert _refused(write.put_object, Bucket=bucket, Key="warehouse/elsewhere/x", Body=b"x") == "AccessDenied"

    # pyiceberg (which asks for vended credentials by default) reads and writes with them.
    py_table = service.pyiceberg().load_table(f"{ns}.t")
    assert py_table.io.properties["s3.access-key-id"] not in (ACCESS_KEY, None)
    assert sorted(py_table.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
    py_table.append(pa.table({"id": [4]}, schema=SCHEMA))
    reader = service.client(READ_TOKEN)
    try:
        assert sorted(reader.load_table(f"{ns}.t").scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4]
    finally:
        reader.close()

    # A client that does not ask gets no credentials at all, and no key in config.
    plain = _get(service, f"namespaces/{ns}/tables/t", READ_TOKEN).json()
    assert "storage-credentials" not in plain
    assert not {"s3.access-key-id", "s3.secret-access-key", "s3.session-token"} & set(plain["config"])


def test_the_catalogs_own_key_appears_in_no_response_of_any_endpoint(vending_service: RestService) -> None:
    service = vending_service
    recorder = Recorder()
    ns = f"nokey_{uuid.uuid4().hex[:8]}"
    client = service.client()
    recorder.watch(client._session)
    try:
        client.create_namespace(ns, {"owner": "x"})
        table = client.create_table(f"{ns}.t", SCHEMA, partition_by=["id"])
        table.append(pa.table({"id": [1, 2]}, schema=SCHEMA))
        client.load_table(f"{ns}.t").delete("id = 1")
        client.create_view(f"{ns}.v", f"SELECT id FROM {ns}.t", SCHEMA)
        view = client.load_view(f"{ns}.v")
        client.drop_view(f"{ns}.v")
        client.register_view(f"{ns}.v", view.metadata_location)
        client.rename_table(f"{ns}.t", f"{ns}.t2")
        # A register needs files no live table owns: those of a table dropped without purge.
        client.create_table(f"{ns}.gone", SCHEMA).append(pa.table({"id": [3]}, schema=SCHEMA))
        gone = client.load_table(f"{ns}.gone").metadata_location
        client.drop_table(f"{ns}.gone")
        client.register_table(f"{ns}.t3", gone)
        client.update_namespace_properties(ns, updates={"k": "v"})
        client.list_namespaces(), client.list_tables(ns), client.list_views(ns)
        client.load_credentials(f"{ns}.t2")
        client.create_function(f"{ns}.f", "com.example.F", "int")
        client.list_functions(ns)
    finally:
        client.close()
    py = service.pyiceberg()
    recorder.watch(py._session)
    py.create_table_transaction(f"{ns}.staged", SCHEMA).commit_transaction()  # stage-create
    py.load_table(f"{ns}.staged")
    for path in ("namespaces", f"namespaces/{ns}", f"namespaces/{ns}/tables/t2", f"namespaces/{ns}/views/v",
                 f"namespaces/{ns}/tables/t2/credentials", f"namespaces/{ns}/functions/f", "nowhere"):
        for token in (READ_TOKEN, WRITE_TOKEN):
            _get(service, path, token, DELEGATE, recorder)
    recorder(requests.get(f"{service.uri}/v1/config", headers={"Authorization": f"Bearer {READ_TOKEN}"},
                          timeout=30))
    recorder(requests.get(f"{service.uri}/openapi.json", timeout=30))
    everything = "\n".join(recorder.texts)
    assert len(recorder.texts) >= 39
    assert "s3.session-token" in everything  # credentials were vended on the way ...
    assert ACCESS_KEY not in everything and SECRET_KEY not in everything  # ... never the catalog's
    service.stop()
    assert SECRET_KEY not in service.log()


def test_a_failing_sts_is_a_503_naming_the_cause_and_vending_can_be_turned_off(
        tmp_path: Path, s3_server: Any) -> None:
    closed = f"http://127.0.0.1:{_closed_port()}"
    (tmp_path / "a").mkdir()
    service = _service(tmp_path / "a", s3_server, f"  storage-credentials: {{sts-endpoint: '{closed}'}}\n")
    try:
        client = service.client()
        client.create_namespace("n")
        response = requests.post(f"{service.uri}/v1/{CATALOG}/namespaces/n/tables", timeout=60,
                                 headers={"Authorization": f"Bearer {WRITE_TOKEN}", **DELEGATE},
                                 json={"name": "t", "schema": {"type": "struct", "schema-id": 0, "fields": [
                                     {"id": 1, "name": "id", "type": "long", "required": False}]}})
        assert response.status_code == 503, response.text
        error = response.json()["error"]
        assert error["type"] == "ServiceUnavailableException"
        assert f"STS AssumeRole at {closed} failed" in error["message"] and "sts-endpoint" in error["message"]
        client.close()
    finally:
        service.stop()

    (tmp_path / "b").mkdir()
    off = _service(tmp_path / "b", s3_server, "  storage-credentials: {vending: none}\n")
    try:
        off.client().create_namespace("n")
        created = requests.post(f"{off.uri}/v1/{CATALOG}/namespaces/n/tables", timeout=60,
                                headers={"Authorization": f"Bearer {WRITE_TOKEN}", **DELEGATE},
                                json={"name": "t", "schema": {"type": "struct", "schema-id": 0, "fields": []}})
        assert created.status_code == 200, created.text
        assert "storage-credentials" not in created.json()
        assert _get(off, "namespaces/n/tables/t/credentials", READ_TOKEN).json() == {"storage-credentials": []}
        assert ACCESS_KEY not in created.text
    finally:
        off.stop()


def _closed_port() -> int:
    from infra.local.processes import free_port

    return free_port()


def test_storage_credential_settings_are_validated() -> None:
    assert vending_settings({"duration-seconds": 3600}, "x").duration_s == 3600
    with pytest.raises(ConfigError, match=r"duration-seconds must be between 900 and 43200"):
        vending_settings({"duration-seconds": 60}, "x")
    with pytest.raises(ConfigError, match=r"vending must be sts or none"):
        vending_settings({"vending": "static"}, "x")
    with pytest.raises(ConfigError, match=r"unknown key server.storage-credentials.ttl"):
        vending_settings({"ttl": 1}, "x")


def test_no_credentials_are_vended_for_paths_that_would_widen_the_policy_beyond_the_table(
        vending_service: RestService) -> None:
    # A writer controls its table's write paths: pointed at the bucket, outside the warehouse or
    # at IAM wildcards or policy variables, they would turn one table's credentials into the
    # bucket's. The service refuses such paths at commit.
    service = vending_service
    ns = f"widen_{uuid.uuid4().hex[:8]}"
    writer = service.client()
    try:
        writer.create_namespace(ns)
        table = writer.create_table(f"{ns}.t", SCHEMA)
        location = table.metadata.location
        bucket = location.removeprefix("s3://").split("/", 1)[0]
        for path, reason in ((f"s3://{bucket}", "is outside the warehouse"),
                             (f"s3://{bucket}/elsewhere", "is outside the warehouse"),
                             (f"{location}/*", "contains '[*]', '[?]' or '[$]'"),
                             (f"{location}/data?", "contains '[*]', '[?]' or '[$]'"),
                             (f"{location}/${{aws:username}}", "contains '[*]', '[?]' or '[$]'")):
            with pytest.raises(ValidationError, match=reason):
                writer.load_table(f"{ns}.t").update_properties({"write.data.path": path})
        assert "write.data.path" not in writer.load_table(f"{ns}.t").properties
    finally:
        writer.close()

    # Paths that got there another way (a catalog that allows external locations, another
    # writer of the catalog database) are refused when vending, before STS is asked.
    closed = f"http://127.0.0.1:{_closed_port()}"
    vendor = CredentialVendor({}, f"s3://{bucket}/warehouse",
                              vending_settings({"vending": "sts", "sts-endpoint": closed}, "test"))
    for path, reason in ((f"s3://{bucket}", "must name a folder in a bucket"),
                         (f"s3://{bucket}/elsewhere", "outside the catalog's warehouse"),
                         (f"{location}/*", "without '*', '?' or '$'")):
        with pytest.raises(ForbiddenError) as refused:
            vendor.storage_credentials(location, [path], write=True)
        assert reason in str(refused.value) and repr(path) in str(refused.value)
    # (Its STS endpoint is a closed port: had it asked, the error would be a VendingError.)


# -- expiry ---------------------------------------------------------------------------------------
# MinIO's STS vends for 900 s at the least (as AWS's does), and nothing moves MinIO's clock, so a
# credential is vended by the first test of the session and tried by the last one
# (tests/conftest.py puts these two there). In the whole suite that waits for nothing; a run of
# this module alone waits out the rest of the 15 minutes.
EXPIRY_PARENT = "AKIAEXPIRYCHECKPARENT"
_early: dict[str, Any] = {}


def test_a_credential_vended_when_the_session_starts_works_until_it_expires(s3_server: Any) -> None:
    bucket = s3_server.create_bucket()
    s3 = _catalog_user(s3_server, bucket, EXPIRY_PARENT)
    location = f"s3://{bucket}/warehouse/ns/expiring"
    s3_server.client().put_object(Bucket=bucket, Key="warehouse/ns/expiring/metadata/v1.json", Body=b"{}")
    vendor = CredentialVendor(s3, f"s3://{bucket}/warehouse", vending_settings({"duration-seconds": 900}, "test"))
    (credential,) = vendor.storage_credentials(location, [], write=False)
    creds = credential["config"]
    expires_at = int(creds[EXPIRES_AT]) / 1000
    assert 880 <= expires_at - time.time() <= 905
    client = _client(s3_server, creds)
    assert client.get_object(Bucket=bucket, Key="warehouse/ns/expiring/metadata/v1.json")["Body"].read() == b"{}"
    _early.update(creds=creds, bucket=bucket, expires_at=expires_at)


@pytest.mark.timeout(1200)
def test_an_expired_vended_credential_is_refused(s3_server: Any) -> None:
    if not _early:
        pytest.fail("test_a_credential_vended_when_the_session_starts_works_until_it_expires did not run first")
    wait = _early["expires_at"] + 5 - time.time()
    if wait > 0:
        print(f"waiting {wait:.0f} s for the credential vended at the start of the session to expire")
        time.sleep(wait)
    client = _client(s3_server, _early["creds"])
    code = _refused(client.get_object, Bucket=_early["bucket"], Key="warehouse/ns/expiring/metadata/v1.json")
    # MinIO drops an expired temporary key: it answers as for a key it never issued.
    assert code == "InvalidAccessKeyId"
    # The object and its parent user are still there: it is the credential that expired.
    s3 = {"s3.access-key-id": EXPIRY_PARENT, "s3.secret-access-key": SECRET_KEY, "s3.session-token": ""}
    assert _client(s3_server, s3).get_object(Bucket=_early["bucket"],
                                             Key="warehouse/ns/expiring/metadata/v1.json")["Body"].read() == b"{}"
