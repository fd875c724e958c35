"""Under grants, vended credentials and remote signatures reach only the tables granted, and
write only where WRITE is held: tried against real MinIO, which enforces the vended session
policies and checks the signatures.

The catalog's own S3 key is a MinIO user's limited to the test's bucket; ``alice`` holds READ on
``g.t1``, the role ``analysts`` (``bob``) WRITE on it, and nobody but the admin holds anything on
``g.t2``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import botocore.exceptions
import pyarrow as pa
import pytest
import requests

from tests.rest.grant_fixtures import ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, Admin, start_grants_service
from tests.services import CATALOG, RestService, S3Server

pytestmark = pytest.mark.s3

SCHEMA = pa.schema([pa.field("id", pa.int64())])
ACCESS_KEY = "AKIAGRANTSCATALOG001"
SECRET_KEY = "grants-catalog-secret-0123456789abcdef"
DELEGATE = {"X-Iceberg-Access-Delegation": "vended-credentials"}


@dataclass
class Lake:
    service: RestService
    s3: S3Server
    bucket: str
    metadata: dict[str, str]  # table -> its current metadata file's key

    def load(self, table: str, token: str) -> requests.Response:
        return requests.get(f"{self.service.uri}/v1/{CATALOG}/namespaces/g/tables/{table}", timeout=30,
                            headers={"Authorization": f"Bearer {token}", **DELEGATE})

    def s3_client(self, loaded: requests.Response) -> Any:
        assert loaded.status_code == 200, loaded.text
        (credential,) = loaded.json()["storage-credentials"]
        creds = credential["config"]
        return self.s3.client(creds["s3.access-key-id"], creds["s3.secret-access-key"], creds["s3.session-token"])

    def sign(self, table: str, method: str, key: str, token: str) -> requests.Response:
        return requests.post(f"{self.service.uri}/v1/{CATALOG}/namespaces/g/tables/{table}/sign", timeout=30,
                             headers={"Authorization": f"Bearer {token}"},
                             json={"region": self.s3.region, "uri": f"{self.s3.endpoint}/{self.bucket}/{key}",
                                   "method": method, "headers": {}})


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server) -> Iterator[Lake]:
    workdir = tmp_path_factory.mktemp("grants-s3")
    bucket = s3_server.create_bucket()
    s3_server.create_user(ACCESS_KEY, SECRET_KEY, [bucket])
    s3 = {**s3_server.properties, "s3.access-key-id": ACCESS_KEY, "s3.secret-access-key": SECRET_KEY}
    service = start_grants_service(workdir, f"sqlite:///{workdir / 'catalog.db'}", f"s3://{bucket}/warehouse", s3)
    client = service.client(ADMIN_TOKEN)
    try:
        client.create_namespace("g")
        metadata = {}
        for name in ("t1", "t2"):
            client.create_table(f"g.{name}", SCHEMA).append(pa.table({"id": [1]}, schema=SCHEMA))
            metadata[name] = client.load_table(f"g.{name}").metadata_location.removeprefix(f"s3://{bucket}/")
        admin = Admin(service)
        assert admin.grant("READ", "table", ("g", "t1"), "alice").status_code == 200
        assert admin.grant("WRITE", "table", ("g", "t1"), "analysts", "role").status_code == 200
        yield Lake(service, s3_server, bucket, metadata)
    finally:
        client.close()
        service.stop()


def _denied(call: Any, **kwargs: Any) -> str:
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        call(**kwargs)
    code: str = refused.value.response["Error"]["Code"]
    return code


def _folder(key: str) -> str:
    return key.split("/metadata/")[0]


def test_vended_credentials_reach_only_the_granted_table_and_write_only_with_write(lake: Lake) -> None:
    bucket, t1, t2 = lake.bucket, lake.metadata["t1"], lake.metadata["t2"]
    # alice (READ on t1): reads t1's files, writes nothing, and is AccessDenied on t2's.
    alice = lake.s3_client(lake.load("t1", ALICE_TOKEN))
    assert alice.get_object(Bucket=bucket, Key=t1)["Body"].read().startswith(b"{")
    assert _denied(alice.put_object, Bucket=bucket, Key=f"{_folder(t1)}/data/x.bin", Body=b"x") == "AccessDenied"
    assert _denied(alice.get_object, Bucket=bucket, Key=t2) == "AccessDenied"
    assert _denied(alice.list_objects_v2, Bucket=bucket, Prefix=f"{_folder(t2)}/") == "AccessDenied"
    # t2 itself and its credentials are refused to her.
    refused = lake.load("t2", ALICE_TOKEN)
    assert refused.status_code == 403 and "lacks the READ privilege on table 'g.t2'" in refused.text
    credentials = requests.get(f"{lake.service.uri}/v1/{CATALOG}/namespaces/g/tables/t2/credentials", timeout=30,
                               headers={"Authorization": f"Bearer {ALICE_TOKEN}"})
    assert credentials.status_code == 403
    # Her credentials endpoint for t1 vends read-only ones too.
    fresh = requests.get(f"{lake.service.uri}/v1/{CATALOG}/namespaces/g/tables/t1/credentials", timeout=30,
                         headers={"Authorization": f"Bearer {ALICE_TOKEN}"}).json()["storage-credentials"]
    renewed = fresh[0]["config"]
    again = lake.s3.client(renewed["s3.access-key-id"], renewed["s3.secret-access-key"], renewed["s3.session-token"])
    assert _denied(again.put_object, Bucket=bucket, Key=f"{_folder(t1)}/data/x.bin", Body=b"x") == "AccessDenied"

    # bob (WRITE on t1 through the role analysts): writes and deletes in t1, nothing in t2.
    bob = lake.s3_client(lake.load("t1", BOB_TOKEN))
    bob.put_object(Bucket=bucket, Key=f"{_folder(t1)}/data/probe.bin", Body=b"probe")
    bob.delete_object(Bucket=bucket, Key=f"{_folder(t1)}/data/probe.bin")
    assert _denied(bob.put_object, Bucket=bucket, Key=f"{_folder(t2)}/data/x.bin", Body=b"x") == "AccessDenied"
    assert _denied(bob.get_object, Bucket=bucket, Key=t2) == "AccessDenied"

    # And the grants are what clients read with: alice's tablestore client scans t1.
    client = lake.service.client(ALICE_TOKEN)
    try:
        assert client.load_table("g.t1").scan().to_arrow().column("id").to_pylist() == [1]
    finally:
        client.close()


def _send(lake: Lake, signed: requests.Response, method: str, key: str, body: bytes | None = None) -> int:
    assert signed.status_code == 200, signed.text
    headers = {name: ", ".join(values) for name, values in signed.json()["headers"].items()}
    return requests.request(method, f"{lake.s3.endpoint}/{lake.bucket}/{key}", headers=headers, data=body,
                            timeout=30).status_code


def test_signatures_reach_only_the_granted_table_and_sign_writes_only_with_write(lake: Lake) -> None:
    t1, t2 = lake.metadata["t1"], lake.metadata["t2"]
    probe = f"{_folder(t1)}/data/signed-probe.bin"
    # alice: a read of t1's file is signed and MinIO answers it; a write is not signed.
    assert _send(lake, lake.sign("t1", "GET", t1, ALICE_TOKEN), "GET", t1) == 200
    write = lake.sign("t1", "PUT", probe, ALICE_TOKEN)
    assert write.status_code == 403 and "READ without WRITE on g.t1" in write.text, write.text
    # Neither through t2's endpoint (no READ on it) nor through t1's (outside its location).
    assert "lacks the READ privilege on table 'g.t2'" in lake.sign("t2", "GET", t2, ALICE_TOKEN).text
    assert lake.sign("t2", "GET", t2, ALICE_TOKEN).status_code == 403
    assert lake.sign("t1", "GET", t2, ALICE_TOKEN).status_code == 403
    # bob: writes in t1 are signed and land; t2 is refused.
    assert _send(lake, lake.sign("t1", "PUT", probe, BOB_TOKEN), "PUT", probe, b"probe") == 200
    assert _send(lake, lake.sign("t1", "DELETE", probe, BOB_TOKEN), "DELETE", probe) == 204
    assert lake.sign("t2", "PUT", f"{_folder(t2)}/data/x.bin", BOB_TOKEN).status_code == 403
