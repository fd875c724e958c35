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

import pydantic
from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from tablestore.config import LakehouseConfig, SqlCatalogConfig
from tablestore.config_problems import FILE_SPELLING, validated
from tablestore.rest.auth.grants import AuthorizationField, AuthorizationSettings
from tablestore.rest.auth.oidc_settings import OidcIssuers, issuers_problem
from tablestore.rest.auth.principals import READ, ROLES, Principal
from tablestore.rest.storage.credentials import VendingSettings

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8181
# The REST spec's separator of namespace levels in a URL, url-encoded: the unit separator.
DEFAULT_NAMESPACE_SEPARATOR = "%1F"

# The default of server.max-request-bytes (the envelope refuses longer bodies with 413).
DEFAULT_MAX_REQUEST_BYTES = 8 * 1024 * 1024


def _text(value: Any) -> Any:
    # A name or secret YAML read as a number is still meant as text.
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def _listed(value: Any) -> Any:
    return [value] if isinstance(value, str) else ([] if value is None else value)


def _required_or_none(value: str) -> bool:
    if value not in ("required", "none"):
        raise PydanticCustomError("literal_error", "'required' or 'none'")
    return value == "required"


def _separator(value: str) -> str:
    decoded = unquote(value)
    if not decoded or "." in decoded or "/" in decoded:
        raise PydanticCustomError("separator", "url-encoded, not empty, '.' or '/'")
    return value


# `auth: required | none` as a flag (the error shows the value lower-cased, as compared).
_Switch = Annotated[bool, BeforeValidator(_required_or_none), BeforeValidator(lambda v: str(v).lower())]
_Flag = Annotated[bool, BeforeValidator(lambda v: str(v).lower() in ("true", "1", "yes"))]
_Positive = Annotated[int, Field(ge=1)]


def _roles(roles: Any) -> Any:
    if isinstance(roles, dict) and not roles:
        raise PydanticCustomError("config_must", "must map catalog names to read or write, got an empty mapping")
    return {str(k): str(v).lower() for k, v in roles.items()} if isinstance(roles, dict) else roles


class _Grant(Principal):
    """A principal as a file grants it: ``role`` for every served catalog, or ``roles`` per catalog."""

    model_config = FILE_SPELLING

    name: Annotated[str, BeforeValidator(_text)]
    roles: Annotated[dict[str, str], BeforeValidator(_roles)] = Field(
        description="a mapping of catalog names to read or write")

    @model_validator(mode="before")
    @classmethod
    def _every_catalog(cls, entry: Any) -> Any:
        if isinstance(entry, dict) and entry.get("roles") is None:
            return {**entry, "roles": {"*": str(entry.get("role", READ)).lower()}}
        return entry

    @model_validator(mode="after")
    def _known_roles(self) -> _Grant:
        for catalog, role in self.roles.items():
            if role not in ROLES:
                raise PydanticCustomError("config_value", f"role {role!r} for {catalog!r} is not one of read, write")
        return self


class TokenEntry(_Grant):
    """A static bearer token and whose it is (``name``: ``token<i>`` unless named)."""

    token: str

    @model_validator(mode="before")
    @classmethod
    def _has_token(cls, entry: Any) -> Any:
        if not isinstance(entry, dict) or not str(entry.get("token") or "").strip():
            raise PydanticCustomError("config_must", "needs a 'token' (for example token: ${MY_TOKEN})")
        if len(str(entry["token"])) < 16:
            raise PydanticCustomError("config_value", "the token is shorter than 16 characters; use a long random one")
        return {**entry, "token": str(entry["token"])}


class ClientEntry(_Grant):
    """OAuth2 client credentials; the client's principal is named by its id."""

    client_id: str
    client_secret: str

    @model_validator(mode="before")
    @classmethod
    def _has_credentials(cls, entry: Any) -> Any:
        if not isinstance(entry, dict) or not entry.get("client-id") or not entry.get("client-secret"):
            raise PydanticCustomError("config_must", "needs 'client-id' and 'client-secret'")
        client_id = str(entry["client-id"])
        return {**entry, "name": client_id, "client-id": client_id, "client-secret": str(entry["client-secret"])}


def _tokens(value: Any) -> Any:
    entries = _listed(value)
    return [{**e, "name": f"token{i}"} if isinstance(e, dict) and e.get("name") in (None, "") else e
            for i, e in enumerate(entries)] if isinstance(entries, list) else entries


def _secret(value: Any) -> Any:
    # Without one, a random secret: the tokens this process issues are valid only in it.
    value = _text(value)
    return (value.encode() if value else secrets.token_bytes(32)) if isinstance(value, str | None) else value


class ServerSettings(pydantic.BaseModel):
    """The ``server:`` section, as the file spells it and as the service uses it (see the module
    docstring); :func:`server_settings` checks it against the catalogs of its configuration."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", **FILE_SPELLING)

    catalogs: Annotated[tuple[str, ...], BeforeValidator(_listed)] = Field(
        (), validate_default=True, description="a list of served catalog names")
    host: Annotated[str, BeforeValidator(_text)] = DEFAULT_HOST
    port: int = DEFAULT_PORT
    tokens: Annotated[tuple[TokenEntry, ...], BeforeValidator(_tokens)] = Field(
        (), description="a list of tokens ({token: ..., role: read})")
    clients: Annotated[tuple[ClientEntry, ...], BeforeValidator(_listed)] = Field(
        (), description="a list of OAuth2 clients ({client-id: ..., client-secret: ...})")
    token_ttl_s: int = Field(3600, alias="token-ttl-seconds")
    token_secret: Annotated[bytes, BeforeValidator(_secret)] = Field(None, validate_default=True)
    allow_external_locations: _Flag = False
    table_config: Annotated[dict[str, str], BeforeValidator(
        lambda v: {} if v is None else {str(k): str(x) for k, x in v.items()} if isinstance(v, dict) else v)] = Field(
        default_factory=dict, description="a mapping of properties")
    auth_required: _Switch = Field(True, alias="auth", description="'required' or 'none'")
    idempotency_lifetime_s: _Positive = Field(1800, alias="idempotency-key-lifetime-seconds")
    scan_planning_page_size: _Positive = 5000
    scan_plan_ttl_s: _Positive = Field(600, alias="scan-plan-ttl-seconds")
    vending: Annotated[VendingSettings, BeforeValidator(lambda v: {} if v is None else v)] = Field(
        default_factory=VendingSettings, alias="storage-credentials")
    max_request_bytes: int = Field(
        DEFAULT_MAX_REQUEST_BYTES, ge=64 * 1024, description="smaller limits refuse ordinary commits")
    # Advertised url-encoded in /v1/config; paths are split by the decoded one (and by %1F).
    namespace_separator_encoded: Annotated[str, AfterValidator(_separator)] = Field(
        DEFAULT_NAMESPACE_SEPARATOR, alias="namespace-separator",
        description="url-encoded, like %1F; not '.', which names may contain")
    metrics_auth_required: _Switch = Field(True, alias="metrics-auth", description="'required' or 'none'")
    access_log: _Flag = True
    authorization: AuthorizationField = Field(default_factory=AuthorizationSettings)
    oidc: OidcIssuers = Field(
        (), description="a list of issuers ({issuer: ..., audience: ...})")

    @pydantic.field_validator("catalogs")
    @classmethod
    def _default_catalog(cls, catalogs: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        # Unless told, the service serves the default catalog.
        config = info.context
        return catalogs or ((config.default_catalog,) if isinstance(config, LakehouseConfig) else ())

    @model_validator(mode="after")
    def _serves(self, info: ValidationInfo) -> ServerSettings:
        config = info.context
        if not isinstance(config, LakehouseConfig):
            return self  # made in code, not read from a configuration
        for name in self.catalogs:
            if name not in config.catalogs:
                raise _problem(f"server.catalogs names {name!r}, which is not a defined catalog")
            if not isinstance(config.catalogs[name], SqlCatalogConfig):
                raise _problem(f"server.catalogs: {name!r} is a {config.catalogs[name].type} catalog; "
                               "the server serves sql catalogs")
        for key, entries in (("tokens", self.tokens), ("clients", self.clients)):
            for i, entry in enumerate(entries):
                unserved = [c for c in entry.roles if c not in ("*", *self.catalogs)]
                if unserved:
                    raise _problem(f"server.{key}[{i}]: roles name catalog {unserved[0]!r}, which is not served "
                                   f"({list(self.catalogs)})")
        problem = issuers_problem(self.oidc, self.catalogs)
        if problem:
            raise _problem(problem)
        if self.auth_required and not self.tokens and not self.clients and not self.oidc:
            raise _problem("the server has no tokens, no clients and no OIDC issuer; add some under "
                           "server.tokens, server.clients or server.oidc (or set server.auth: none for local use)")
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

    __str__ = __repr__


def _problem(message: str) -> PydanticCustomError:
    return PydanticCustomError("config", message)


def server_settings(config: LakehouseConfig, overrides: Mapping[str, Any] | None = None) -> ServerSettings:
    """The server settings of ``config`` (``overrides`` such as host and port from the CLI win)."""
    raw = {**config.server, **{k: v for k, v in (overrides or {}).items() if v is not None}}
    return validated(ServerSettings, raw, config.source, prefix=("server",), context=config)


__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "ClientEntry", "ServerSettings", "TokenEntry", "server_settings"]
