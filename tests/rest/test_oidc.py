"""The catalog service behind a real Keycloak 26: tokens of external OpenID Connect issuers.

One Keycloak and one service per module. Keycloak holds three realms, each an issuer:
``lakehouse`` (trusted; its realm roles ``catalog-writer`` and ``catalog-reader`` map to the
service's roles), ``partners`` (trusted; a client's ``sub`` maps to read) and ``master``
(Keycloak's own, not trusted). The service serves a local catalog (for Java's client, which has no S3 FileIO
here) and an S3 one (for Trino, with vended credentials), and keeps its static tokens.

pyiceberg, Java's REST client (``oracle rest-sql``) and Trino 476 each get their token from
Keycloak with client credentials and read and write as their roles allow. Expired tokens,
tokens of an untrusted issuer, forged signatures, HS256 with the public key, ``none`` and a
wrong audience are refused with 401 and RFC 6750's ``invalid_token``, logged without the token.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import pyarrow as pa
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.keycloak import Client, KeycloakServer, start_keycloak
from tests.oracle import ORACLE_DIR, _ensure_built
from tests.services import READ_TOKEN, WRITE_TOKEN, RestService, S3Server
from tests.trino import TrinoServer, rest_catalog_properties

pytestmark = [pytest.mark.s3]

LOCAL = "lake"  # the served catalog with a local warehouse
S3 = "lake_s3"  # and the one in S3
AUDIENCE = "tablestore"
BUILT_IN = "etl"  # a client of the service's own token endpoint
SECRET = "keycloak-client-secret-0123456789"
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


@dataclass
class Realms:
    keycloak: KeycloakServer
    lakehouse: str  # issuer URLs
    partners: str
    elsewhere: str
    partner_sub: str

    def token(self, realm: str, client: str) -> str:
        return self.keycloak.token(realm, client, SECRET)


@dataclass
class Lake:
    realms: Realms
    service: RestService
    s3: S3Server

    @property
    def keycloak(self) -> KeycloakServer:
        return self.realms.keycloak

    def get(self, path: str, token: str) -> requests.Response:
        return requests.get(f"{self.service.uri}{path}", headers={"Authorization": f"Bearer {token}"}, timeout=60)

    def pyiceberg(self, client: str, warehouse: str = LOCAL) -> Any:
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog("kc", uri=self.service.uri, warehouse=warehouse, credential=f"{client}:{SECRET}",
                           **{"oauth2-server-uri": self.keycloak.token_endpoint("lakehouse")})


@pytest.fixture(scope="module")
def realms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Realms]:
    started = time.monotonic()
    keycloak = start_keycloak(tmp_path_factory.mktemp("keycloak"))
    print(f"Keycloak answered after {time.monotonic() - started:.1f} s")  # shown with -s
    try:
        roles = ("catalog-writer", "catalog-reader")
        lakehouse = keycloak.import_realm("lakehouse", roles, [
            Client("writer", SECRET, ("catalog-writer",), AUDIENCE),
            Client("reader", SECRET, ("catalog-reader",), AUDIENCE),
            Client("nobody", SECRET, (), AUDIENCE),
            # Tokens that live 2 s, for the expiry test; and tokens for another audience.
            Client("brief", SECRET, ("catalog-writer",), AUDIENCE, (("access.token.lifespan", "2"),)),
            Client("other-service", SECRET, ("catalog-writer",), "billing")])
        partner = Client("partner", SECRET, (), AUDIENCE)
        partners = keycloak.import_realm("partners", (), [partner])
        # Another issuer holding a client of the same name and role, trusted nowhere: the
        # master realm, which every Keycloak has.
        keycloak.import_client("master", Client("writer", SECRET, ("catalog-writer",), AUDIENCE), roles)
        print(f"Keycloak and its realms ready after {time.monotonic() - started:.1f} s")
        yield Realms(keycloak, lakehouse, partners, keycloak.issuer("master"), partner.account_id)
    finally:
        keycloak.stop()


def _config(path: Path, workdir: Path, s3: S3Server, bucket: str, realms: Realms) -> str:
    oidc = [
        {"issuer": realms.lakehouse, "audience": AUDIENCE, "principal-claim": "azp",
         "roles-claim": "realm_access.roles",
         "roles": {"catalog-writer": "write", "catalog-reader": {LOCAL: "read", S3: "read"}},
         # Small on purpose: the expiry test waits for its token's exp plus this, and the
         # rotation test for this long between two fetches of the keys.
         "leeway-seconds": 1, "jwks-min-refresh-seconds": 1},
        {"issuer": realms.partners, "audience": AUDIENCE, "principal-claim": "azp", "roles-claim": "sub",
         "roles": {realms.partner_sub: {LOCAL: "read"}}},
    ]
    s3_lines = "".join(f'      {k.removeprefix("s3.")}: "{v}"\n' for k, v in s3.properties.items())
    uri = f"sqlite:///{workdir / 'catalog.db'}"
    path.write_text(f"""
catalogs:
  - name: {LOCAL}
    type: sql
    uri: "{uri}"
    warehouse: "{workdir / 'warehouse'}"
  - name: {S3}
    type: sql
    uri: "sqlite:///{workdir / 'catalog-s3.db'}"
    warehouse: "s3://{bucket}/warehouse"
    s3:
{s3_lines}
server:
  catalogs: [{LOCAL}, {S3}]
  tokens:
    - {{name: writer, token: {WRITE_TOKEN}, role: write}}
    - {{name: reader, token: {READ_TOKEN}, role: read}}
  clients:
    - {{client-id: {BUILT_IN}, client-secret: {SECRET}, role: read}}
  oidc: {json.dumps(oidc)}
""")
    return uri


@pytest.fixture(scope="module")
def lake(realms: Realms, s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    workdir = tmp_path_factory.mktemp("oidc-service")
    config = workdir / "tablestore.yaml"
    uri = _config(config, workdir, s3_server, s3_server.create_bucket(), realms)
    service = RestService(config, uri, str(workdir / "warehouse"), workdir)
    service.start()
    try:
        yield Lake(realms, service, s3_server)
    finally:
        service.stop()


def _access_lines(service: RestService) -> list[dict[str, Any]]:
    return [json.loads(line) for line in service.log().splitlines() if line.startswith('{"ts"')]


def test_config_points_clients_at_the_callers_issuer_and_static_tokens_still_work(lake: Lake) -> None:
    writer = lake.realms.token("lakehouse", "writer")
    config = lake.get(f"/v1/config?warehouse={LOCAL}", writer)
    assert config.status_code == 200, config.text
    assert config.json()["defaults"]["oauth2-server-uri"] == lake.keycloak.token_endpoint("lakehouse")
    partner = lake.realms.token("partners", "partner")
    config = lake.get(f"/v1/config?warehouse={LOCAL}", partner)
    assert config.json()["defaults"]["oauth2-server-uri"] == lake.keycloak.token_endpoint("partners")
    # A static token: the first issuer's.
    config = lake.get(f"/v1/config?warehouse={LOCAL}", WRITE_TOKEN)
    assert config.json()["defaults"]["oauth2-server-uri"] == lake.keycloak.token_endpoint("lakehouse")
    # A token of the service's own endpoint: its client refreshes it there, so nothing is advertised.
    issued = requests.post(f"{lake.service.uri}/v1/oauth/tokens", timeout=60, data={
        "grant_type": "client_credentials", "client_id": BUILT_IN, "client_secret": SECRET}).json()["access_token"]
    config = lake.get(f"/v1/config?warehouse={LOCAL}", issued)
    assert config.status_code == 200 and "oauth2-server-uri" not in config.json()["defaults"]
    # Unknown clients of that endpoint are told where tokens come from.
    unknown = requests.post(f"{lake.service.uri}/v1/oauth/tokens", timeout=60, data={
        "grant_type": "client_credentials", "client_id": "writer", "client_secret": SECRET})
    assert (unknown.status_code, unknown.json()) == (401, {
        "error": "invalid_client",
        "error_description": f"invalid client credentials; this service's users get their tokens from "
                             f"{lake.realms.lakehouse}"})
    # Mapped by sub, per catalog: the partner reads the local catalog and nothing of the other.
    assert lake.get(f"/v1/{LOCAL}/namespaces", partner).status_code == 200
    refused = lake.get(f"/v1/{S3}/namespaces", partner)
    assert (refused.status_code, refused.json()["error"]["message"]) == (
        403, f"'partner' may not read in catalog '{S3}'")
    # Authenticated, but no role mapped: 403 everywhere.
    nobody = lake.get(f"/v1/{LOCAL}/namespaces", lake.realms.token("lakehouse", "nobody"))
    assert nobody.status_code == 403 and nobody.json()["error"]["type"] == "ForbiddenException"


def test_pyiceberg_writes_and_reads_with_keycloak_tokens_as_its_roles_allow(lake: Lake) -> None:
    from pyiceberg.exceptions import ForbiddenError

    writer = lake.pyiceberg("writer")
    writer.create_namespace("py")
    table = writer.create_table("py.events", SCHEMA)
    table.append(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=SCHEMA))
    reader = lake.pyiceberg("reader")
    assert sorted(reader.load_table("py.events").scan().to_arrow().column("id").to_pylist()) == [1, 2]
    with pytest.raises(ForbiddenError):
        reader.load_table("py.events").append(pa.table({"id": [3], "name": ["c"]}, schema=SCHEMA))
    with pytest.raises(ForbiddenError):
        reader.create_namespace("py_reader")
    expected = {("writer", 200), ("reader", 200), ("reader", 403)}
    deadline = time.monotonic() + 10  # a line is written by the log's own thread, just after the answer
    while True:
        seen = {(line["principal"], line["status"]) for line in _access_lines(lake.service)}
        if seen >= expected or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert seen >= expected


@pytest.mark.oracle
def test_javas_rest_client_writes_and_reads_with_a_keycloak_token(lake: Lake) -> None:
    _ensure_built()
    lake.pyiceberg("writer").create_namespace("java")
    statements = ["CREATE TABLE rest.java.t (id BIGINT, name STRING) USING iceberg",
                  "INSERT INTO rest.java.t VALUES (1, 'x'), (2, 'y')",
                  "SELECT id, name FROM rest.java.t ORDER BY id"]
    done = subprocess.run(
        [str(ORACLE_DIR / "oracle"), "rest-sql", lake.service.uri, "--credential", f"writer:{SECRET}",
         "--warehouse", LOCAL, "--conf", f"oauth2-server-uri={lake.keycloak.token_endpoint('lakehouse')}",
         "-e", "; ".join(statements)],
        capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line)["rows"] for line in done.stdout.splitlines() if line.startswith("{")]
    assert results[-1] == [[1, "x"], [2, "y"]], done.stdout[-2000:]
    # What Java wrote, read by pyiceberg with the reader's token.
    rows = lake.pyiceberg("reader").load_table("java.t").scan().to_arrow().sort_by("id").to_pylist()
    assert rows == [{"id": 1, "name": "x"}, {"id": 2, "name": "y"}]


@pytest.mark.trino
def test_trino_writes_and_reads_with_keycloak_tokens_as_its_roles_allow(lake: Lake, trino: TrinoServer) -> None:
    from trino.exceptions import TrinoQueryError

    endpoint = lake.keycloak.token_endpoint("lakehouse")
    catalogs = {}
    for client in ("writer", "reader"):
        properties = rest_catalog_properties(lake.service.uri, S3, f"{client}:{SECRET}", lake.s3.endpoint,
                                             lake.s3.region)
        properties["iceberg.rest-catalog.oauth2.server-uri"] = endpoint
        catalogs[client] = f"kc_{client}"
        trino.create_catalog(catalogs[client], properties)
    try:
        w, r = catalogs["writer"], catalogs["reader"]
        trino.query(f"CREATE SCHEMA {w}.tr")
        trino.query(f"CREATE TABLE {w}.tr.t AS SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS v(id, name)")
        trino.query(f"INSERT INTO {w}.tr.t VALUES (3, 'c')")
        assert trino.query(f"SELECT id, name FROM {r}.tr.t ORDER BY id") == [[1, "a"], [2, "b"], [3, "c"]]
        # The reader's vended S3 credentials are read-only: its data file is refused by MinIO
        # before any commit, and the catalog refuses it a namespace (403, in the access log).
        with pytest.raises(TrinoQueryError):
            trino.query(f"INSERT INTO {r}.tr.t VALUES (4, 'd')")
        assert trino.query(f"SELECT count(*) FROM {w}.tr.t") == [[3]]
        with pytest.raises(TrinoQueryError):
            trino.query(f"CREATE SCHEMA {r}.tr_reader")
        assert {"principal": "reader", "method": "POST", "route": "/v1/{prefix}/namespaces", "status": 403} in [
            {k: line[k] for k in ("principal", "method", "route", "status")} for line in _access_lines(lake.service)]
        # And pyiceberg reads what Trino wrote, with the reader's token.
        rows = lake.pyiceberg("reader", S3).load_table("tr.t").scan().to_arrow().column("id").to_pylist()
        assert sorted(rows) == [1, 2, 3]
    finally:
        for name in catalogs.values():
            trino.drop_catalog(name)


def _refused(lake: Lake, token: str, message: str) -> None:
    answer = lake.get(f"/v1/{LOCAL}/namespaces", token)
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"] == {"message": message, "type": "NotAuthorizedException", "code": 401}
    assert answer.headers["WWW-Authenticate"] == f'Bearer error="invalid_token", error_description="{message}"'


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def test_expired_untrusted_forged_and_misaddressed_tokens_are_refused_with_401(lake: Lake) -> None:
    realms = lake.realms
    brief = realms.token("lakehouse", "brief")
    assert lake.get(f"/v1/{LOCAL}/namespaces", brief).status_code == 200
    claims = jwt.decode(brief, options={"verify_signature": False})
    # Past exp and the 1 s leeway.
    time.sleep(max(0.0, claims["exp"] + 1.5 - time.time()))
    _refused(lake, brief, f"the bearer token has expired; request a new one at "
                          f"{lake.keycloak.token_endpoint('lakehouse')}")

    stranger = realms.token("master", "writer")
    _refused(lake, stranger, f"the bearer token was issued by '{realms.elsewhere}', which this service does not "
                             f"trust; it accepts tokens of {realms.lakehouse}, {realms.partners}")

    # A real token's header and claims, signed again with a key of our own under the same kid.
    real = realms.token("lakehouse", "writer")
    header = jwt.get_unverified_header(real)
    real_claims = jwt.decode(real, options={"verify_signature": False})
    own = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(real_claims, own, algorithm="RS256", headers={"kid": header["kid"]})
    assert jwt.get_unverified_header(forged)["kid"] == header["kid"]
    _refused(lake, forged, f"the bearer token's signature does not verify with the key of {realms.lakehouse}")

    # HS256 "signed" with the issuer's public key, which anyone can fetch; and no signature at all.
    jwks = requests.get(f"{realms.lakehouse}/protocol/openid-connect/certs", timeout=60).json()
    public = jwt.PyJWK(next(k for k in jwks["keys"] if k["kid"] == header["kid"])).key
    pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    signing_input = f"{_b64(json.dumps({'alg': 'HS256', 'typ': 'JWT', 'kid': header['kid']}).encode())}." \
                    f"{_b64(json.dumps(real_claims).encode())}"
    import hashlib
    import hmac

    confused = f"{signing_input}.{_b64(hmac.new(pem, signing_input.encode(), hashlib.sha256).digest())}"
    _refused(lake, confused, "the bearer token is signed with 'HS256'; this service accepts RS256, RS384, RS512, "
                             f"PS256, PS384, PS512, ES256, ES384, ES512 from {realms.lakehouse}")
    unsigned = f"{_b64(json.dumps({'alg': 'none', 'kid': header['kid']}).encode())}." \
               f"{_b64(json.dumps(real_claims).encode())}."
    _refused(lake, unsigned, "the bearer token is signed with 'none'; this service accepts RS256, RS384, RS512, "
                             f"PS256, PS384, PS512, ES256, ES384, ES512 from {realms.lakehouse}")

    other = realms.token("lakehouse", "other-service")
    _refused(lake, other, "the bearer token is not meant for this service: its audience does not include "
                          "'tablestore'")

    # Each refusal is in the access log as a 401 of no principal, and no token is anywhere in the log.
    # The access log's line is written as the answer leaves, so the last one may trail it a little.
    deadline = time.monotonic() + 30
    while True:
        refusals = [line for line in _access_lines(lake.service)
                    if line["status"] == 401 and line["route"] == "/v1/{prefix}/namespaces"]
        if len(refusals) >= 6 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(refusals) == 6 and {(r["principal"], r["error"]) for r in refusals} == {
        ("-", "NotAuthorizedException")}
    log = lake.service.log()
    for token in (brief, stranger, real, forged, confused, unsigned, other):
        _, claims_part, signature = token.split(".")
        assert token not in log and (signature or claims_part)[:40] not in log


def test_a_rotated_signing_key_is_fetched_on_its_first_token(lake: Lake) -> None:
    keycloak = lake.keycloak
    before = lake.realms.token("lakehouse", "writer")
    assert lake.get(f"/v1/{LOCAL}/namespaces", before).status_code == 200
    realm_id = keycloak.admin("GET", "/lakehouse")["id"]
    keycloak.admin("POST", "/lakehouse/components", {
        "name": "rotated", "providerId": "rsa-generated", "providerType": "org.keycloak.keys.KeyProvider",
        "parentId": realm_id, "config": {"priority": ["500"], "keySize": ["2048"], "active": ["true"],
                                         "enabled": ["true"]}})
    after = lake.realms.token("lakehouse", "writer")
    assert jwt.get_unverified_header(after)["kid"] != jwt.get_unverified_header(before)["kid"]
    time.sleep(1.1)  # jwks-min-refresh-seconds since the last fetch
    answer = lake.get(f"/v1/{LOCAL}/namespaces", after)
    assert answer.status_code == 200, answer.text
    # The old key is still published, so tokens signed with it still pass.
    assert lake.get(f"/v1/{LOCAL}/namespaces", before).status_code == 200


def test_an_unknown_kid_fetches_the_keys_again_at_most_once_per_interval(realms: Realms) -> None:
    from tablestore.errors import NotAuthorizedError
    from tablestore.rest.auth.oidc import IssuerKeys
    from tablestore.rest.auth.oidc_settings import OidcIssuer

    keys = IssuerKeys(OidcIssuer.model_validate({
        "issuer": realms.lakehouse, "audience": AUDIENCE, "roles-claim": "sub", "roles": {"x": "read"},
        "jwks-min-refresh-seconds": 30}))
    kid = jwt.get_unverified_header(realms.token("lakehouse", "writer"))["kid"]
    assert keys.key(kid, "RS256").algorithm_name == "RS256"
    assert keys.fetches == 1
    assert keys.token_endpoint == realms.keycloak.token_endpoint("lakehouse")
    # Made-up kids, as anyone may send: refused without another fetch within the interval.
    for made_up in ("no-such-key", "another"):
        with pytest.raises(NotAuthorizedError, match="does not publish"):
            keys.key(made_up, "RS256")
    assert keys.fetches == 1
    # A known key under another family's algorithm is refused too.
    with pytest.raises(NotAuthorizedError, match="its key is for RS256"):
        keys.key(kid, "ES256")


def test_claim_paths_and_role_mapping() -> None:
    from tablestore.rest.auth.oidc import claim_values, roles_of
    from tablestore.rest.auth.oidc_settings import OidcIssuer

    claims = {"sub": "u1", "groups": ["analysts", 7], "realm_access": {"roles": ["catalog-reader", "x"]},
              "resource_access": {"lake.client": {"roles": ["admin"]}}}
    assert claim_values(claims, "sub") == ["u1"]
    assert claim_values(claims, "groups") == ["analysts"]
    assert claim_values(claims, "realm_access.roles") == ["catalog-reader", "x"]
    # A client id with a dot in it is still one key.
    assert claim_values(claims, "resource_access.lake.client.roles") == ["admin"]
    assert claim_values(claims, "realm_access.missing") == []
    assert claim_values(claims, "sub.deeper") == []
    issuer = OidcIssuer.model_validate({
        "issuer": "https://sso.example.com/realms/r", "audience": "a", "roles-claim": "realm_access.roles",
        "roles": {"catalog-reader": {"lake": "read", "other": "read"}, "x": "write", "unused": "write"}})
    # The strongest grant per catalog; "*" (write) lifts every catalog's own entry.
    assert roles_of(issuer, claims) == {"lake": "write", "other": "write", "*": "write"}
    assert roles_of(issuer, {"realm_access": {"roles": ["catalog-reader"]}}) == {"lake": "read", "other": "read"}
    assert roles_of(issuer, {"sub": "u1"}) == {}


def test_the_stacks_realm_file_gives_tokens_the_stacks_catalog_maps_to_roles(realms: Realms) -> None:
    """infra/keycloak/lakehouse-realm.json (the compose profile imports it), imported into this
    Keycloak under another name: its clients' tokens carry the audience and the realm roles that
    the stack's server.oidc entry (infra/tablestore.stack.yaml) maps to write and read."""
    import re

    from tablestore.config import parse_config
    from tablestore.rest.auth.oidc import roles_of
    from tablestore.rest.settings import server_settings

    root = Path(__file__).resolve().parents[2]
    text = (root / "infra" / "keycloak" / "lakehouse-realm.json").read_text()
    realm = json.loads(re.sub(r"\$\{(\w+)\}", SECRET, text))
    realm["realm"] = "stack"
    realms.keycloak.admin("POST", "", realm)
    stack = (root / "infra" / "tablestore.stack.yaml").read_text()
    (issuer,) = server_settings(parse_config(re.sub(r"\$\{(\w+)(:-)?\}", "x" * 20, stack), "stack.yaml")).oidc
    for client, roles in (("engineer", {"*": "write"}), ("analyst", {"metastore": "read"})):
        # The scope Iceberg's clients ask for by default.
        answer = requests.post(realms.keycloak.token_endpoint("stack"), timeout=60, data={
            "grant_type": "client_credentials", "client_id": client, "client_secret": SECRET, "scope": "catalog"})
        assert answer.status_code == 200, answer.text
        claims = jwt.decode(answer.json()["access_token"], options={"verify_signature": False})
        assert issuer.audience in ([claims["aud"]] if isinstance(claims["aud"], str) else claims["aud"])
        assert claims["azp"] == client and claims["sub"]
        assert roles_of(issuer, claims) == roles, claims


def test_an_issuer_whose_keys_cannot_be_fetched_refuses_its_tokens_saying_so() -> None:
    from infra.local.processes import free_port
    from tablestore.errors import NotAuthorizedError
    from tablestore.rest.auth.oidc import IssuerKeys
    from tablestore.rest.auth.oidc_settings import OidcIssuer

    issuer = f"http://127.0.0.1:{free_port()}/realms/gone"  # nothing listens there
    keys = IssuerKeys(OidcIssuer.model_validate({"issuer": issuer, "audience": AUDIENCE, "roles-claim": "sub",
                                                 "roles": {"x": "read"}}))
    with pytest.raises(NotAuthorizedError) as refused:
        keys.key("any", "RS256")
    assert str(refused.value) == (f"the signing keys of {issuer} could not be fetched "
                                  f"({issuer}/.well-known/openid-configuration); the service's log says why; "
                                  "try again later")
    assert keys.fetches == 1 and keys.token_endpoint is None
