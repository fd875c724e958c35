"""The ``server.oidc`` section: the OpenID Connect issuers whose bearer tokens the service accepts.

::

    server:
      oidc:
        - issuer: https://sso.example.com/realms/data   # the tokens' ``iss``, exactly
          audience: tablestore                        # their ``aud`` must contain it
          roles-claim: realm_access.roles              # a dotted path to a string or a list of strings
          roles: {lakehouse-writer: write, lakehouse-reader: {lakehouse: read}}   # claim value -> RoleGrant

Every key, with its default and what it does, is in docs/catalog-service.md (External identity
provider); :class:`OidcIssuer` declares them in the same order, each field the key with hyphens.
``discovery-uri`` defaults to the issuer's ``/.well-known/openid-configuration`` (set it when the
service reaches the provider by another address than its clients do); ``token-endpoint`` to
the one discovered there: it is what ``/v1/config`` tells clients to fetch tokens from.

This module is only the section's model; :mod:`tablestore.rest.auth.oidc` verifies the tokens.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from tablestore.config_files import FileModel, Flag, Listed
from tablestore.config_problems import problem_at
from tablestore.rest.auth.principals import RoleGrant

# The signatures accepted from an issuer: public-key ones only. ``none`` and the HMAC family
# (HS*) are never accepted: an HS* token "signed" with the issuer's public key (which anyone can
# fetch) would verify if a library took the public key as an HMAC secret.
ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
WELL_KNOWN = "/.well-known/openid-configuration"
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


def _url(value: Any) -> Any:
    return str(value).strip() if value is not None else value


_Url = Annotated[str, BeforeValidator(_url)]


class OidcIssuer(FileModel):
    """One trusted issuer (see the module docstring)."""

    EXAMPLE = ("issuer: https://sso.example.com/realms/data, audience: tablestore, roles-claim: realm_access.roles, "
               "roles: {lakehouse-writer: write}")

    issuer: _Url = Field(description="the issuer URL, as in its tokens' iss claim")
    audience: _Url = Field(min_length=1,
                           description="the audience this service's tokens carry (a Keycloak audience mapper adds it)")
    roles_claim: str = Field(min_length=1, description="a dotted claim path such as realm_access.roles, groups or sub")
    roles: dict[str, RoleGrant] = Field(
        min_length=1, description="a mapping of claim values to read, write or {catalog: role}")
    principal_claim: str = "sub"
    discovery_uri: _Url | None = None
    token_endpoint: _Url | None = None
    algorithms: Listed[str] = Field(default=ASYMMETRIC_ALGORITHMS,
                                    description=f"a list of {', '.join(ASYMMETRIC_ALGORITHMS)}")
    leeway_seconds: int = Field(default=30, ge=0, le=300)
    jwks_cache_seconds: int = Field(default=600, ge=1)
    jwks_min_refresh_seconds: float = Field(default=10, ge=0)
    insecure_http: Flag = False

    @field_validator("algorithms")
    @classmethod
    def _public_key_algorithms(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        if not names:
            raise PydanticCustomError("config_must", "must name at least one of {known}",
                                      {"known": ", ".join(ASYMMETRIC_ALGORITHMS)})
        for name in names:
            if name not in ASYMMETRIC_ALGORITHMS:
                raise PydanticCustomError(
                    "config_value", "{name} is not accepted: only public-key signatures ({known}); "
                    "never none or HS*, which anyone holding the issuer's public key could forge",
                    {"name": repr(name), "known": ", ".join(ASYMMETRIC_ALGORITHMS)})
        return names

    @model_validator(mode="after")
    def _secure_urls(self) -> OidcIssuer:
        for key, url in (("issuer", self.issuer), ("discovery-uri", self.discovery_uri),
                         ("token-endpoint", self.token_endpoint)):
            parts = urlsplit(url or "")
            if url is not None and (parts.scheme not in ("https", "http") or not parts.hostname):
                raise problem_at((key,), f"{url!r} is not an http(s) URL")
            if url is not None and parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS and (
                    not self.insecure_http):
                # The keys come from there: whoever can change them in transit can sign tokens.
                raise problem_at((key,), f"{url!r} is plain http to another host; use https (or set "
                                 "insecure-http: true on a private network, such as the stack's)")
        return self

    @property
    def discovery_url(self) -> str:
        return self.discovery_uri or self.issuer.rstrip("/") + WELL_KNOWN

    def catalogs_named(self) -> set[str]:
        """The catalogs the role mapping names (``*`` left out)."""
        return {catalog for grant in self.roles.values() for catalog in grant if catalog != "*"}


def _each_issuer_once(issuers: tuple[OidcIssuer, ...]) -> tuple[OidcIssuer, ...]:
    seen = [entry.issuer for entry in issuers]
    twice = next((issuer for i, issuer in enumerate(seen) if issuer in seen[:i]), None)
    if twice is not None:
        raise PydanticCustomError("config_must", f"lists the issuer {twice} twice; merge its role mappings into one "
                                                 "entry")
    return issuers


# The section: a list of issuers (or one), each issuer once.
OidcIssuers = Annotated[Listed[OidcIssuer], AfterValidator(_each_issuer_once)]


__all__ = ["ASYMMETRIC_ALGORITHMS", "OidcIssuer", "OidcIssuers"]
