"""Auth: tokens, roles, OAuth2 client credentials; secrets never in the log; settings validation."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import subprocess
import sys
import time
from pathlib import Path

import jwt
import pytest
import requests

from tablestore.config import parse_config
from tablestore.errors import ConfigError, ForbiddenError, NotAuthorizedError
from tablestore.rest.settings import ServerSettings, server_settings
from tests.rest.conftest import (
    CATALOG,
    CLIENT_ID,
    CLIENT_SECRET,
    READ_TOKEN,
    WRITE_TOKEN,
    RestService,
)


def _get(service: RestService, path: str, headers: dict[str, str] | None = None) -> requests.Response:
    return requests.get(f"{service.uri}/v1/{path}", headers=headers or {}, timeout=30)


def test_missing_or_wrong_tokens_get_401(rest_service: RestService) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong-token-xxxxxxxxxxxxxxxx"}, {"Authorization": "Basic abc"},
                    {"Authorization": "Bearer ts1.eyJzdWIiOiJldGwiLCJleHAiOjk5OTk5OTk5OTl9.forged"}):
        for path in ("config", f"{CATALOG}/namespaces", f"{CATALOG}/namespaces/x/tables/y", "nothere/namespaces"):
            response = _get(rest_service, path, headers)
            assert response.status_code == 401, (headers, path)
            assert response.json()["error"]["type"] == "NotAuthorizedException"
            # RFC 6750 3.1: a refused bearer token is an invalid_token, a missing one has no error code.
            challenge = response.headers["WWW-Authenticate"]
            if headers.get("Authorization", "").startswith("Bearer "):
                assert challenge == ('Bearer error="invalid_token", '
                                     f'error_description="{response.json()["error"]["message"]}"'), challenge
            else:
                assert challenge == "Bearer"


def test_a_read_only_token_reads_but_cannot_commit(rest_service: RestService) -> None:
    from pyiceberg.exceptions import ForbiddenError as PyForbiddenError

    writer = rest_service.client()
    writer.create_namespace("sec")
    import pyarrow as pa

    schema = pa.schema([pa.field("id", pa.int64())])
    writer.create_table("sec.t", schema).append(pa.table({"id": [1]}, schema=schema))
    writer.close()

    reader = rest_service.client(READ_TOKEN)
    try:
        table = reader.load_table("sec.t")
        assert table.scan().to_arrow().column("id").to_pylist() == [1]
        with pytest.raises(ForbiddenError):
            table.append(pa.table({"id": [2]}, schema=schema))
        with pytest.raises(ForbiddenError):
            reader.create_namespace("sec2")
        with pytest.raises(ForbiddenError):
            reader.drop_table("sec.t")
    finally:
        reader.close()
    py = rest_service.pyiceberg(READ_TOKEN)
    with pytest.raises(PyForbiddenError):
        py.load_table("sec.t").append(pa.table({"id": [3]}, schema=schema))
    response = requests.post(f"{rest_service.uri}/v1/{CATALOG}/namespaces/sec/tables/t", timeout=30,
                             headers={"Authorization": f"Bearer {READ_TOKEN}"}, json={"updates": []})
    assert response.status_code == 403 and response.json()["error"]["type"] == "ForbiddenException"
    assert rest_service.client().load_table("sec.t").scan().to_arrow().column("id").to_pylist() == [1]


def test_oauth2_client_credentials(rest_service: RestService) -> None:
    url = f"{rest_service.uri}/v1/oauth/tokens"
    good = {"grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
    response = requests.post(url, data=good, timeout=30)
    assert response.status_code == 200
    body = response.json()
    assert body["token_type"] == "bearer" and body["expires_in"] == 3600
    assert _get(rest_service, "config", {"Authorization": f"Bearer {body['access_token']}"}).status_code == 200

    bad = requests.post(url, data={**good, "client_secret": "nope"}, timeout=30)
    assert bad.status_code == 401 and bad.json()["error"] == "invalid_client"
    assert requests.post(url, data={**good, "grant_type": "password"}, timeout=30).status_code == 400

    from tablestore.catalog.rest import RestCatalog

    with RestCatalog("c", uri=rest_service.uri, credential=f"{CLIENT_ID}:{CLIENT_SECRET}") as catalog:
        catalog.create_namespace("oauth_ns")
    from pyiceberg.catalog.rest import RestCatalog as PyRestCatalog

    py = PyRestCatalog("p", uri=rest_service.uri, credential=f"{CLIENT_ID}:{CLIENT_SECRET}",
                       **{"oauth2-server-uri": url})
    assert ("oauth_ns",) in py.list_namespaces()
    with pytest.raises(NotAuthorizedError):
        RestCatalog("c", uri=rest_service.uri, credential=f"{CLIENT_ID}:wrong")


def test_oauth2_token_endpoint_takes_http_basic_client_authentication(rest_service: RestService) -> None:
    """RFC 6749 2.3.1: servers must accept the client's id and secret by HTTP Basic (DuckDB and
    Java's clients send them so), each part form-urlencoded before base64."""
    url = f"{rest_service.uri}/v1/oauth/tokens"
    grant = {"grant_type": "client_credentials"}
    response = requests.post(url, data=grant, auth=(CLIENT_ID, CLIENT_SECRET), timeout=30)
    assert response.status_code == 200, response.text
    token = response.json()["access_token"]
    assert _get(rest_service, "config", {"Authorization": f"Bearer {token}"}).status_code == 200

    # Form-urlencoded parts: %65 is "e".
    encoded = base64.b64encode(f"%65tl:{CLIENT_SECRET}".encode()).decode()
    response = requests.post(url, data=grant, headers={"Authorization": f"Basic {encoded}"}, timeout=30)
    assert response.status_code == 200, response.text
    # A client_id in the body naming the same client is allowed beside Basic.
    response = requests.post(url, data={**grant, "client_id": CLIENT_ID}, auth=(CLIENT_ID, CLIENT_SECRET), timeout=30)
    assert response.status_code == 200, response.text

    # Wrong or malformed Basic credentials: 401 invalid_client with a Basic challenge (RFC 6749 5.2).
    for auth in ({"auth": (CLIENT_ID, "wrong")}, {"headers": {"Authorization": "Basic not-base64!"}}):
        bad = requests.post(url, data=grant, timeout=30, **auth)
        assert bad.status_code == 401 and bad.json()["error"] == "invalid_client"
        assert bad.headers["WWW-Authenticate"] == 'Basic realm="tablestore"'
    # One authentication method per request.
    both = requests.post(url, data={**grant, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET},
                         auth=(CLIENT_ID, CLIENT_SECRET), timeout=30)
    assert both.status_code == 400 and both.json()["error"] == "invalid_request"
    # The form body alone still works, and its failures carry no Basic challenge.
    body = requests.post(url, data={**grant, "client_id": CLIENT_ID, "client_secret": "wrong"}, timeout=30)
    assert body.status_code == 401 and "WWW-Authenticate" not in body.headers


EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS = "urn:ietf:params:oauth:token-type:access_token"


def test_oauth2_token_exchange_refreshes_a_valid_token_of_ours_and_refuses_anything_else(
    rest_service: RestService,
) -> None:
    """RFC 8693, as Java's and Trino's clients refresh: our valid token as subject_token gets a
    fresh token of the same principal; anything else the right OAuth2 error."""
    url = f"{rest_service.uri}/v1/oauth/tokens"
    issued = requests.post(url, timeout=30, data={"grant_type": "client_credentials", "client_id": CLIENT_ID,
                                                   "client_secret": CLIENT_SECRET}).json()["access_token"]
    # Java sends the token being refreshed as bearer too, and no client credentials.
    answer = requests.post(url, timeout=30, headers={"Authorization": f"Bearer {issued}"},
                           data={"grant_type": EXCHANGE, "subject_token": issued, "subject_token_type": ACCESS})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["token_type"] == "bearer" and body["issued_token_type"] == ACCESS and body["expires_in"] == 3600
    fresh = body["access_token"]
    assert jwt.get_unverified_header(fresh)["alg"] == "HS256"
    # The same principal and roles: the client's write role lets it create a namespace.
    create = requests.post(f"{rest_service.uri}/v1/{CATALOG}/namespaces", timeout=30,
                           headers={"Authorization": f"Bearer {fresh}"}, json={"namespace": ["exchanged"]})
    assert create.status_code == 200, create.text
    # A static read token is exchanged for an expiring token that still only reads.
    read = requests.post(url, timeout=30, data={"grant_type": EXCHANGE, "subject_token": READ_TOKEN,
                                                "subject_token_type": ACCESS}).json()["access_token"]
    assert jwt.get_unverified_header(read)["alg"] == "HS256" and _get(rest_service, f"{CATALOG}/namespaces",
                                           {"Authorization": f"Bearer {read}"}).status_code == 200
    refused = requests.post(f"{rest_service.uri}/v1/{CATALOG}/namespaces", timeout=30,
                            headers={"Authorization": f"Bearer {read}"}, json={"namespace": ["nope"]})
    assert refused.status_code == 403

    forged = "ts1.eyJzdWIiOiJldGwiLCJleHAiOjk5OTk5OTk5OTl9.forged"
    expired = "ts1.eyJzdWIiOiJldGwiLCJleHAiOjF9.expired"
    for form, error in [
        ({"subject_token": forged, "subject_token_type": ACCESS}, "invalid_grant"),
        ({"subject_token": expired, "subject_token_type": ACCESS}, "invalid_grant"),
        ({"subject_token": "wrong-token-xxxxxxxxxxxxxxxx", "subject_token_type": ACCESS}, "invalid_grant"),
        ({"subject_token_type": ACCESS}, "invalid_request"),
        ({"subject_token": issued, "subject_token_type": "urn:ietf:params:oauth:token-type:id_token"},
         "invalid_request"),
        ({"subject_token": issued, "subject_token_type": ACCESS, "actor_token": issued,
          "actor_token_type": ACCESS}, "invalid_request"),
    ]:
        answer = requests.post(url, timeout=30, data={"grant_type": EXCHANGE, **form})
        assert (answer.status_code, answer.json()["error"]) == (400, error), form
        assert "access_token" not in answer.json()
    wrong_grant = requests.post(url, timeout=30, data={"grant_type": "password", "username": "x"})
    assert (wrong_grant.status_code, wrong_grant.json()["error"]) == (400, "unsupported_grant_type")


def test_secrets_never_appear_in_the_log(rest_service: RestService) -> None:
    requests.post(f"{rest_service.uri}/v1/oauth/tokens", timeout=30,
                  data={"grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET})
    _get(rest_service, "config", {"Authorization": f"Bearer {WRITE_TOKEN}"})
    _get(rest_service, "config", {"Authorization": "Bearer wrong-token-xxxxxxxxxxxxxxxx"})
    log = rest_service.log()
    for secret in (WRITE_TOKEN, READ_TOKEN, CLIENT_SECRET, "wrong-token-xxxxxxxxxxxxxxxx", "test-signing-secret"):
        assert secret not in log


def _settings(server: str) -> ServerSettings:
    config = parse_config(f"""
catalogs:
  - {{name: lake, type: sql, uri: "sqlite:////tmp/x.db", warehouse: /tmp/wh}}
server:
{server}
""")
    return server_settings(config)


@pytest.mark.parametrize(("server", "message"), [
    ("  port: 1", "no tokens, no clients and no OIDC issuer"),
    ("  tokens: [{token: short, role: write}]", "shorter than 16"),
    ("  tokens: [{token: aaaaaaaaaaaaaaaaaaaa, role: admin}]", "not one of read, write"),
    ("  tokens: [{token: aaaaaaaaaaaaaaaaaaaa, roles: {other: read}}]", "not served"),
    ("  catalogs: [nope]\n  auth: none", "not a defined catalog"),
    ("  clients: [{client-id: x}]", "client-secret"),
    ("  prot: 1", "unknown key server.prot"),
])
def test_invalid_server_settings_are_reported(server: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _settings(server)


def test_settings_repr_hides_tokens() -> None:
    settings = _settings("  tokens: [{name: spark, token: aaaaaaaaaaaaaaaaaaaa-secret, role: write}]")
    assert "aaaaaaaaaaaaaaaaaaaa-secret" not in repr(settings) and "spark" in repr(settings)


def test_a_client_with_credentials_gets_a_new_token_when_its_token_is_refused(rest_service: RestService) -> None:
    from tablestore.catalog.rest import RestCatalog

    with RestCatalog("c", uri=rest_service.uri, credential=f"{CLIENT_ID}:{CLIENT_SECRET}") as catalog:
        # As if the issued token had expired: the next request gets a 401 and is sent again.
        catalog._session.headers["Authorization"] = "Bearer ts1.eyJzdWIiOiJldGwiLCJleHAiOjF9.expired"
        catalog.create_namespace("refreshed")
        assert catalog.namespace_exists("refreshed")
        assert jwt.get_unverified_header(catalog._session.headers["Authorization"].removeprefix("Bearer "))
        assert "expired" not in catalog._session.headers["Authorization"]


def test_issued_tokens_expire_and_cannot_be_forged() -> None:
    from tablestore.rest.auth.authorizer import RoleAuthorizer
    from tablestore.rest.auth.tokens import Authenticator

    settings = _settings("  clients: [{client-id: etl, client-secret: s3cr3t-s3cr3t, role: read}]")
    auth = Authenticator(settings)
    token, _ = auth.issue("etl", "s3cr3t-s3cr3t")
    principal = auth.authenticate(f"Bearer {token}")
    assert principal.name == "etl" and principal.can("lake", "read") and not principal.can("lake", "write")
    header, payload, signature = token.split(".")
    with pytest.raises(NotAuthorizedError, match="not valid"):
        auth.authenticate(f"Bearer {header}.{payload}.{signature[:-2]}xx")
    with pytest.raises(NotAuthorizedError, match="invalid client credentials"):
        auth.issue("etl", "wrong")
    expired = Authenticator(settings.model_copy(update={"token_ttl_s": -10}))
    old, _ = expired.issue("etl", "s3cr3t-s3cr3t")
    with pytest.raises(NotAuthorizedError, match="expired"):
        expired.authenticate(f"Bearer {old}")
    with pytest.raises(ForbiddenError):
        RoleAuthorizer().check_endpoint(principal, "lake", "write")


def test_issued_tokens_are_jwts_with_the_standard_claims_signed_with_the_token_secret(
    rest_service: RestService,
) -> None:
    from tablestore.rest.auth.tokens import signing_key

    before = int(time.time())
    token = requests.post(f"{rest_service.uri}/v1/oauth/tokens", timeout=30, data={
        "grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
    }).json()["access_token"]
    # The service's token-secret (tests/services.py) verifies it; any other key does not.
    claims = jwt.decode(token, signing_key(b"test-signing-secret"), algorithms=["HS256"], audience="tablestore")
    assert {k: claims[k] for k in ("sub", "iss", "aud", "scope")} == {
        "sub": CLIENT_ID, "iss": "tablestore", "aud": "tablestore", "scope": "catalog"}
    assert before <= claims["iat"] <= time.time() and claims["exp"] - claims["iat"] == 3600
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(token, signing_key(b"another-secret"), algorithms=["HS256"], audience="tablestore")
    # A token with the same claims signed with another key is refused.
    forged = jwt.encode(claims, signing_key(b"another-secret"), algorithm="HS256")
    refused = _get(rest_service, f"{CATALOG}/namespaces", {"Authorization": f"Bearer {forged}"})
    assert refused.status_code == 401 and refused.json()["error"]["message"] == "the bearer token is not valid"


def _legacy_token(secret: bytes, claims: dict[str, object]) -> str:
    """A token in the format issued before JWTs (ts1.<claims>.<HMAC-SHA256 of them>), signed
    correctly with the service's secret: what a client may still hold from before."""
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    payload = b64(json.dumps(claims).encode())
    return f"ts1.{payload}.{b64(hmac.new(secret, payload.encode(), hashlib.sha256).digest())}"


def test_a_token_in_the_format_issued_before_jwts_is_refused_with_401_saying_to_request_a_new_one(
    rest_service: RestService,
) -> None:
    old = _legacy_token(b"test-signing-secret", {"sub": CLIENT_ID, "exp": int(time.time()) + 3600})
    response = _get(rest_service, f"{CATALOG}/namespaces", {"Authorization": f"Bearer {old}"})
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith('Bearer error="invalid_token", error_description=')
    assert response.json()["error"]["message"] == (
        "the bearer token is in the format this service issued before it issued JSON Web Tokens, which it no "
        "longer accepts; request a new token at /v1/oauth/tokens")
    # Nor is it exchanged for a new one: the client asks with its credentials.
    exchange = requests.post(f"{rest_service.uri}/v1/oauth/tokens", timeout=30, data={
        "grant_type": EXCHANGE, "subject_token": old, "subject_token_type": ACCESS})
    assert (exchange.status_code, exchange.json()["error"]) == (400, "invalid_grant")
    assert "request a new token" in exchange.json()["error_description"]


def test_serve_refuses_to_start_without_tokens(tmp_path: Path) -> None:
    config = tmp_path / "tablestore.yaml"
    config.write_text(f"catalogs:\n  - {{name: lake, type: sql, warehouse: {tmp_path / 'wh'}}}\n")
    result = subprocess.run([sys.executable, "-m", "tablestore.cli", "catalog", "serve", "--config", str(config),
                             "--port", "1"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 1
    assert "the server has no tokens, no clients and no OIDC issuer" in result.stderr
