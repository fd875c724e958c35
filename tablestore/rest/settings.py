"""The ``server:`` section of the configuration: what ``tablestore catalog serve`` serves, to whom.

::

    server:
      catalogs: [lakehouse]            # the catalogs served (default: the default catalog)
      tokens: [{name: trino, token: "${TRINO_TOKEN}", role: read}]   # or roles: {lakehouse: write}
      clients: [{client-id: dagster, client-secret: "${DAGSTER_SECRET}", role: write}]
      authorization: grants            # roles (default) | grants (tablestore.rest.auth.grants)
      oidc: [{issuer: "https://idp.example/realms/lake", audience: lakehouse}]  # tablestore.rest.auth.oidc_settings

Every key, with its default and what it does, is in docs/catalog-service.md (Configuration);
:class:`ServerSettings` declares them in the same order, each field the key with hyphens.
Each served catalog is one REST ``prefix`` (its name). The non-secret ``s3.*`` properties of a
served catalog (endpoint, region, path style) are handed out in ``/v1/config`` and in every
LoadTableResult ``config``; its keys never are: clients that ask get scoped, short-lived
credentials instead (:mod:`tablestore.rest.storage.credentials`).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import unquote

from pydantic import AfterValidator, AliasChoices, BeforeValidator, Field, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from tablestore.config import LakehouseConfig, Properties, SqlCatalogConfig
from tablestore.config_files import FileModel, Flag, Listed
from tablestore.config_problems import checked, problem_at, validated
from tablestore.rest.auth.grants import AuthorizationField, AuthorizationSettings
from tablestore.rest.auth.oidc_settings import OidcIssuers
from tablestore.rest.auth.principals import READ, Principal, RoleGrant
from tablestore.rest.storage.credentials import VendingSettings

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8181
# The REST spec's separator of namespace levels in a URL, url-encoded: the unit separator.
DEFAULT_NAMESPACE_SEPARATOR = "%1F"

# The default of server.max-request-bytes (the envelope refuses longer bodies with 413).
DEFAULT_MAX_REQUEST_BYTES = 8 * 1024 * 1024


def _separator(value: str) -> str:
    decoded = unquote(value)
    if not decoded or "." in decoded or "/" in decoded:
        raise PydanticCustomError("separator", "url-encoded, not empty, '.' or '/'")
    return value


# `auth: required | none` as a flag (the error shows the value lower-cased, as compared).
_Switch = Annotated[bool, BeforeValidator(lambda v: v == "required"),
                    checked(lambda v: v in ("required", "none"), "'required' or 'none'"),
                    BeforeValidator(lambda v: str(v).lower())]
_Positive = Annotated[int, Field(ge=1)]


class _Grant(FileModel, Principal):
    """A principal as a file grants it: ``role`` (read unless told) or ``roles``, a RoleGrant."""

    roles: RoleGrant = Field(default_factory=lambda: {"*": READ}, validation_alias=AliasChoices("roles", "role"),
                             description="read, write or a mapping of catalog names to them")


def _long(token: str) -> str:
    if len(token) < 16:
        raise PydanticCustomError("config_must", "is shorter than 16 characters; use a long random one")
    return token


class TokenEntry(_Grant):
    """A static bearer token and whose it is (``name``: ``token<i>`` unless named)."""

    EXAMPLE = "token: ${MY_TOKEN}"

    name: str = ""
    token: Annotated[str, AfterValidator(_long)]


class ClientEntry(_Grant):
    """OAuth2 client credentials; the client's principal is named by its id."""

    EXAMPLE = "client-id: dagster, client-secret: ${DAGSTER_SECRET}"

    name: str = Field(alias="client-id")
    client_secret: str

    @property
    def client_id(self) -> str:
        return self.name


def _named(tokens: tuple[TokenEntry, ...]) -> tuple[TokenEntry, ...]:
    return tuple(t if t.name else t.model_copy(update={"name": f"token{i}"}) for i, t in enumerate(tokens))


def _secret(value: Any) -> Any:
    # Without one, a random secret: the tokens this process issues are valid only in it.
    value = str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
    return (value.encode() if value else secrets.token_bytes(32)) if isinstance(value, str | None) else value


class ServerSettings(FileModel):
    """The ``server:`` section, as the file spells it and as the service uses it (see the module
    docstring); :func:`server_settings` checks it against the catalogs of its configuration."""

    catalogs: Listed[str] = Field((), description="a list of served catalog names")
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    tokens: Annotated[Listed[TokenEntry], AfterValidator(_named)] = Field(
        (), description="a list of tokens ({token: ..., role: read})")
    clients: Listed[ClientEntry] = Field(
        (), description="a list of OAuth2 clients ({client-id: ..., client-secret: ...})")
    token_ttl_s: int = Field(3600, alias="token-ttl-seconds")
    token_secret: Annotated[bytes, BeforeValidator(_secret)] = Field(None, validate_default=True)
    allow_external_locations: Flag = False
    table_config: Properties = Field(default_factory=dict, description="a mapping of properties")
    auth_required: _Switch = Field(True, alias="auth")
    idempotency_lifetime_s: _Positive = Field(1800, alias="idempotency-key-lifetime-seconds")
    scan_planning_page_size: _Positive = 5000
    scan_plan_ttl_s: _Positive = Field(600, alias="scan-plan-ttl-seconds")
    vending: VendingSettings = Field(default_factory=VendingSettings, alias="storage-credentials")
    max_request_bytes: int = Field(
        DEFAULT_MAX_REQUEST_BYTES, ge=64 * 1024, description="smaller limits refuse ordinary commits")
    # Advertised url-encoded in /v1/config; paths are split by the decoded one (and by %1F).
    namespace_separator_encoded: Annotated[str, AfterValidator(_separator)] = Field(
        DEFAULT_NAMESPACE_SEPARATOR, alias="namespace-separator",
        description="url-encoded, like %1F; not '.', which names may contain")
    metrics_auth_required: _Switch = Field(True, alias="metrics-auth")
    access_log: Flag = True
    authorization: AuthorizationField = Field(default_factory=AuthorizationSettings)
    oidc: OidcIssuers = Field((), description="a list of issuers ({issuer: ..., audience: ...})")

    @model_validator(mode="after")
    def _serves(self, info: ValidationInfo) -> ServerSettings:
        config = info.context
        if not isinstance(config, LakehouseConfig):
            return self  # made in code, not read from a configuration
        for name in self.catalogs:
            if name not in config.catalogs:
                raise problem_at(("catalogs",), f"names {name!r}, which is not a defined catalog")
            if not isinstance(config.catalogs[name], SqlCatalogConfig):
                raise problem_at(("catalogs",), f"names {name!r}, a {config.catalogs[name].type} catalog; the "
                                 "server serves sql catalogs")
        granted = [((key, i, "roles"), {*entry.roles} - {"*"})
                   for key, entries in (("tokens", self.tokens), ("clients", self.clients))
                   for i, entry in enumerate(entries)]
        granted += [(("oidc", i, "roles"), issuer.catalogs_named()) for i, issuer in enumerate(self.oidc)]
        for at, named in granted:
            unserved = sorted(named - {*self.catalogs})
            if unserved:
                raise problem_at(at, f"name catalog {unserved[0]!r}, which is not served ({list(self.catalogs)})")
        if self.auth_required and not self.tokens and not self.clients and not self.oidc:
            raise PydanticCustomError(
                "config", "the server has no tokens, no clients and no OIDC issuer; add some under server.tokens, "
                "server.clients or server.oidc (or set server.auth: none for local use)")
        return self

    @property
    def namespace_separator(self) -> str:
        return unquote(self.namespace_separator_encoded)

    def token_principal(self, token: str) -> TokenEntry | None:
        """The static token ``token`` (compared in constant time), if it is one."""
        return next((e for e in self.tokens if hmac.compare_digest(e.token.encode(), token.encode())), None)

    def client(self, client_id: str) -> ClientEntry | None:
        return next((c for c in self.clients if c.client_id == client_id), None)

    def __repr__(self) -> str:
        # Tokens and secrets are never shown; only who they belong to.
        return (f"ServerSettings(catalogs={self.catalogs!r}, host={self.host!r}, port={self.port}, "
                f"principals={sorted(p.name for p in self.tokens)!r}, "
                f"clients={sorted(c.client_id for c in self.clients)!r}, auth_required={self.auth_required})")


def server_settings(config: LakehouseConfig, overrides: Mapping[str, Any] | None = None) -> ServerSettings:
    """The server settings of ``config`` (``overrides`` such as host and port from the CLI win)."""
    raw = {**config.server, **{k: v for k, v in (overrides or {}).items() if v is not None}}
    # Unless told, the service serves the default catalog.
    raw["catalogs"] = raw.get("catalogs") or config.default_catalog
    return validated(ServerSettings, raw, config.source, prefix=("server",), context=config)


__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "ClientEntry", "ServerSettings", "TokenEntry", "server_settings"]
