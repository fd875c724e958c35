"""The ``server.oidc`` section: the OpenID Connect issuers whose bearer tokens the service accepts.

::

    server:
      oidc:
        - issuer: https://sso.example.com/realms/data   # the tokens' ``iss``, exactly
          audience: tablestore                        # their ``aud`` must contain it
          roles-claim: realm_access.roles              # a dotted path to a string or a list of strings
          roles:                                       # a value of that claim -> the role it gives
            lakehouse-writer: write                    # in every served catalog ...
            lakehouse-reader: {lakehouse: read}        # ... or per catalog
          principal-claim: preferred_username          # names the principal (default sub)
          discovery-uri: http://keycloak:8080/realms/data/.well-known/openid-configuration
          token-endpoint: https://sso.example.com/realms/data/protocol/openid-connect/token
          algorithms: [RS256, ES256]                   # default: RS*, PS* and ES*
          leeway-seconds: 30                           # clock skew allowed on exp, nbf and iat
          jwks-cache-seconds: 600                      # keys are fetched again after this long
          jwks-min-refresh-seconds: 10                 # at most one fetch this often (unknown kid)
          insecure-http: false                         # http:// to a host other than loopback

``discovery-uri`` defaults to the issuer's ``/.well-known/openid-configuration`` (set it when the
service reaches the provider by another address than its clients do); ``token-endpoint`` to
the one discovered there: it is what ``/v1/config`` tells clients to fetch tokens from.

This module is only the section's model; :mod:`tablestore.rest.auth.oidc` verifies the tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

# The signatures accepted from an issuer: public-key ones only. ``none`` and the HMAC family
# (HS*) are never accepted: an HS* token "signed" with the issuer's public key (which anyone can
# fetch) would verify if a library took the public key as an HMAC secret.
ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
WELL_KNOWN = "/.well-known/openid-configuration"
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")

ROLES = ("read", "write")  # tablestore.rest.settings' READ and WRITE


def _grant(value: Any) -> Any:
    # ``write`` means every served catalog, as a static token's ``role``.
    if isinstance(value, dict) and not value:
        raise PydanticCustomError("config_must", "must map catalog names to read or write, got an empty mapping")
    if not isinstance(value, str | dict):
        raise PydanticCustomError("config_value", "must be read, write or a mapping of catalog names to them, got {v}",
                                  {"v": repr(value)})
    grant = {"*": value} if isinstance(value, str) else value
    out = {}
    for catalog, role in grant.items():
        if str(role).lower() not in ROLES:
            raise PydanticCustomError("config_value", "role {role} for {catalog} is not one of read, write",
                                      {"role": repr(role), "catalog": repr(str(catalog))})
        out[str(catalog)] = str(role).lower()
    return out


Grant = Annotated[dict[str, str], BeforeValidator(_grant)]


def _url(value: Any) -> Any:
    return str(value).strip() if value is not None else value


class OidcIssuer(BaseModel):
    """One trusted issuer (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    issuer: Annotated[str, BeforeValidator(_url)] = Field(description="the issuer URL, as in its tokens' iss claim")
    audience: Annotated[str, BeforeValidator(_url)] = Field(
        description="the audience this service's tokens carry (a Keycloak audience mapper adds it)")
    roles_claim: str = Field(alias="roles-claim",
                             description="a dotted claim path such as realm_access.roles, groups or sub")
    roles: dict[str, Grant] = Field(description="a mapping of claim values to read, write or {catalog: role}")
    principal_claim: str = Field(default="sub", alias="principal-claim")
    discovery_uri: Annotated[str | None, BeforeValidator(_url)] = Field(default=None, alias="discovery-uri")
    token_endpoint: Annotated[str | None, BeforeValidator(_url)] = Field(default=None, alias="token-endpoint")
    algorithms: tuple[str, ...] = Field(default=ASYMMETRIC_ALGORITHMS,
                                        description=f"a list of {', '.join(ASYMMETRIC_ALGORITHMS)}")
    leeway_seconds: int = Field(default=30, alias="leeway-seconds", ge=0, le=300)
    jwks_cache_seconds: int = Field(default=600, alias="jwks-cache-seconds", ge=1)
    jwks_min_refresh_seconds: float = Field(default=10, alias="jwks-min-refresh-seconds", ge=0)
    insecure_http: bool = Field(default=False, alias="insecure-http")

    @model_validator(mode="before")
    @classmethod
    def _has_essentials(cls, entry: Any) -> Any:
        if not isinstance(entry, dict):
            raise PydanticCustomError("config_must", "needs issuer, audience, roles-claim and roles")
        missing = [k for k in ("issuer", "audience", "roles-claim", "roles") if not entry.get(k)]
        if missing:
            raise PydanticCustomError(
                "config_must", "needs {missing} (for example issuer: https://sso.example.com/realms/data, "
                "audience: tablestore, roles-claim: realm_access.roles, roles: {example})",
                {"missing": ", ".join(missing), "example": "{lakehouse-writer: write}"})
        return entry

    @field_validator("algorithms", mode="before")
    @classmethod
    def _public_key_algorithms(cls, value: Any) -> Any:
        names = [value] if isinstance(value, str) else list(value or [])
        if not names:
            raise PydanticCustomError("config_must", "must name at least one of {known}",
                                      {"known": ", ".join(ASYMMETRIC_ALGORITHMS)})
        for name in names:
            if str(name) not in ASYMMETRIC_ALGORITHMS:
                raise PydanticCustomError(
                    "config_value", "{name} is not accepted: only public-key signatures ({known}); "
                    "never none or HS*, which anyone holding the issuer's public key could forge",
                    {"name": repr(name), "known": ", ".join(ASYMMETRIC_ALGORITHMS)})
        return tuple(str(n) for n in names)

    @model_validator(mode="after")
    def _secure_urls(self) -> OidcIssuer:
        for key, url in (("issuer", self.issuer), ("discovery-uri", self.discovery_uri),
                         ("token-endpoint", self.token_endpoint)):
            if url is None:
                continue
            parts = urlsplit(url)
            if parts.scheme not in ("https", "http") or not parts.hostname:
                raise PydanticCustomError("config_value", "{key} {url} is not an http(s) URL",
                                          {"key": key, "url": repr(url)})
            if parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS and not self.insecure_http:
                # The keys come from there: whoever can change them in transit can sign tokens.
                raise PydanticCustomError(
                    "config_value", "{key} {url} is plain http to another host; use https (or set "
                    "insecure-http: true on a private network, such as the stack's)", {"key": key, "url": repr(url)})
        return self

    @property
    def discovery_url(self) -> str:
        return self.discovery_uri or self.issuer.rstrip("/") + WELL_KNOWN

    def catalogs_named(self) -> set[str]:
        """The catalogs the role mapping names (``*`` left out)."""
        return {catalog for grant in self.roles.values() for catalog in grant if catalog != "*"}


def _listed(value: Any) -> Any:
    if value is None:
        return []
    return [value] if isinstance(value, dict) else value


OidcIssuers = Annotated[tuple[OidcIssuer, ...], BeforeValidator(_listed)]


def issuers_problem(issuers: Sequence[OidcIssuer], catalogs: tuple[str, ...]) -> str | None:
    """What is wrong with the section as a whole (each issuer once, only served catalogs named),
    or None."""
    seen: set[str] = set()
    for i, entry in enumerate(issuers):
        if entry.issuer in seen:
            return f"server.oidc lists the issuer {entry.issuer} twice; merge its role mappings into one entry"
        seen.add(entry.issuer)
        unknown = sorted(entry.catalogs_named() - set(catalogs))
        if unknown:
            return f"server.oidc[{i}].roles name catalog {unknown[0]!r}, which is not served ({list(catalogs)})"
    return None


__all__ = ["ASYMMETRIC_ALGORITHMS", "OidcIssuer", "OidcIssuers", "issuers_problem"]
