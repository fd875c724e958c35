"""The ``server.oidc`` section: what it accepts, and what it refuses with a message saying what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from tablestore.config import parse_config
from tablestore.errors import ConfigError
from tablestore.rest.auth.oidc_settings import ASYMMETRIC_ALGORITHMS
from tablestore.rest.settings import ServerSettings, server_settings

ISSUER = "https://sso.example.com/realms/data"


def _settings(tmp_path: Path, oidc: str, tokens: bool = False) -> ServerSettings:
    static = "  tokens: [{token: a-long-static-token-0123, role: read}]\n" if tokens else ""
    text = f"""
catalogs:
  - {{name: lake, type: sql, warehouse: {tmp_path / 'wh'}}}
server:
{static}  oidc: {oidc}
"""
    return server_settings(parse_config(text, str(tmp_path / "tablestore.yaml")))


def test_an_issuer_alone_is_enough_to_serve_and_has_secure_defaults(tmp_path: Path) -> None:
    settings = _settings(tmp_path, f"[{{issuer: {ISSUER}, audience: tablestore, roles-claim: groups, "
                                   "roles: {analysts: {lake: read}, engineers: WRITE}}]")
    (issuer,) = settings.oidc
    assert issuer.roles == {"analysts": {"lake": "read"}, "engineers": {"*": "write"}}
    assert issuer.algorithms == ASYMMETRIC_ALGORITHMS and "HS256" not in issuer.algorithms
    assert (issuer.principal_claim, issuer.leeway_seconds, issuer.jwks_cache_seconds,
            issuer.jwks_min_refresh_seconds) == ("sub", 30, 600, 10)
    assert issuer.discovery_url == f"{ISSUER}/.well-known/openid-configuration"


@pytest.mark.parametrize(("oidc", "message"), [
    (f"[{{issuer: {ISSUER}, roles-claim: sub, roles: {{u: read}}}}]",
     "server.oidc[0] needs audience (for example"),
    (f"[{{issuer: {ISSUER}, audience: t, roles-claim: sub, roles: {{u: read}}, algorithms: [RS256, HS256]}}]",
     "'HS256' is not accepted: only public-key signatures"),
    (f"[{{issuer: {ISSUER}, audience: t, roles-claim: sub, roles: {{u: read}}, algorithms: none}}]",
     "'none' is not accepted"),
    ("[{issuer: 'http://sso.example.com/realms/data', audience: t, roles-claim: sub, roles: {u: read}}]",
     "is plain http to another host; use https (or set insecure-http: true"),
    (f"[{{issuer: {ISSUER}, audience: t, roles-claim: sub, roles: {{u: {{elsewhere: read}}}}}}]",
     "server.oidc[0].roles name catalog 'elsewhere', which is not served (['lake'])"),
    (f"[{{issuer: {ISSUER}, audience: t, roles-claim: sub, roles: {{u: admin}}}}]",
     "server.oidc[0].roles.u: role 'admin' for '*' is not one of read, write"),
    (f"[{{issuer: {ISSUER}, audience: t, roles-claim: sub, roles: {{u: read}}}}, "
     f"{{issuer: {ISSUER}, audience: t, roles-claim: sub, roles: {{v: read}}}}]",
     f"server.oidc lists the issuer {ISSUER} twice"),
    (f"[{{issuer: {ISSUER}, audience: t, roles-claim: sub, roles: {{u: read}}, leeway: 3}}]",
     "unknown key server.oidc[0].leeway; expected one of issuer, audience, roles-claim"),
])
def test_bad_issuers_are_refused_naming_the_problem(tmp_path: Path, oidc: str, message: str) -> None:
    with pytest.raises(ConfigError, match=None) as refused:
        _settings(tmp_path, oidc, tokens=True)
    assert message in str(refused.value), str(refused.value)


def test_plain_http_is_accepted_on_loopback_or_when_asked(tmp_path: Path) -> None:
    loopback = _settings(tmp_path, "[{issuer: 'http://127.0.0.1:8080/realms/r', audience: t, roles-claim: sub, "
                                   "roles: {u: read}}]")
    assert loopback.oidc[0].issuer == "http://127.0.0.1:8080/realms/r"
    private = _settings(tmp_path, "[{issuer: 'http://keycloak:8080/realms/r', audience: t, roles-claim: sub, "
                                  "roles: {u: read}, insecure-http: true}]")
    assert private.oidc[0].insecure_http is True
