"""The ``server:`` section of the configuration: what ``tablestore catalog serve`` serves, to whom.

::

    server:
      catalogs: [lakehouse]            # the catalogs served (default: the default catalog)
      host: 0.0.0.0                    # default 127.0.0.1
      port: 8181
      tokens:                          # static bearer tokens
        - name: trino
          token: ${TRINO_TOKEN}
          role: read                   # read | write, for every served catalog ...
        - name: spark
          token: ${SPARK_TOKEN}
          roles: {lakehouse: write}    # ... or per catalog
      clients:                         # OAuth2 client credentials (POST /v1/oauth/tokens)
        - client-id: dagster
          client-secret: ${DAGSTER_SECRET}
          role: write
      token-ttl-seconds: 3600          # lifetime of tokens issued to clients
      token-secret: ${TOKEN_SECRET}    # signs issued tokens (default: random per process)
      allow-external-locations: false  # table locations outside the warehouse
      table-config: {}                 # extra properties handed to clients with every table
      idempotency-key-lifetime-seconds: 1800  # how long an Idempotency-Key is replayed
      storage-credentials:             # scoped, short-lived S3 credentials (tablestore.rest.credentials)
        vending: sts                   # sts (default for an s3:// warehouse) | none
        duration-seconds: 900
      scan-planning-page-size: 5000    # file scan tasks per page of a served scan plan
      scan-plan-ttl-seconds: 600       # how long a paged plan's pages wait to be fetched
      auth: required                   # or none: everyone may write (local use only)
      max-request-bytes: 8388608       # larger request bodies are refused (413) while read
      namespace-separator: "%1F"       # joins namespace levels in URLs, url-encoded (the spec's default)
      metrics-auth: required           # GET /metrics needs a bearer token; none: open (a private port)
      access-log: true                 # one JSON line per request on stderr (tablestore.rest.access_log)
      oidc: []                         # external OpenID Connect issuers (tablestore.rest.oidc_settings)

Each served catalog is one REST ``prefix`` (its name). The non-secret ``s3.*`` properties of a
served catalog (endpoint, region, path style) are handed out in ``/v1/config`` and in every
LoadTableResult ``config``; its keys never are: clients that ask get scoped, short-lived
credentials instead (:mod:`tablestore.rest.credentials`).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import unquote

import pydantic
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from tablestore.config import LakehouseConfig, problem_message
from tablestore.errors import ConfigError
from tablestore.rest.credentials import VendingSettings
from tablestore.rest.limits import DEFAULT_MAX_REQUEST_BYTES
from tablestore.rest.oidc_settings import OidcIssuer, OidcIssuers, issuers_problem

READ = "read"
WRITE = "write"
ROLES = (READ, WRITE)
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8181
# The REST spec's separator of namespace levels in a URL, url-encoded: the unit separator.
DEFAULT_NAMESPACE_SEPARATOR = "%1F"


@dataclass(frozen=True, repr=False)
class Principal:
    """Who a token belongs to, and its role (``read`` or ``write``) in each served catalog."""

    name: str
    roles: dict[str, str]

    def can(self, catalog: str, role: str) -> bool:
        held = self.roles.get(catalog) or self.roles.get("*")
        return held == WRITE or (held == READ and role == READ)

    def __repr__(self) -> str:
        return f"Principal(name={self.name!r}, roles={self.roles!r})"


# -- the ``server:`` section as written ------------------------------------------------------------


def _text(value: Any) -> Any:
    # A name or secret YAML read as a number is still meant as text.
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


class _Grant(BaseModel):
    """A token's or client's roles: ``role`` for every served catalog, or ``roles`` per catalog."""

    role: Any = READ
    roles: dict[Any, Any] | None = Field(default=None, description="a mapping of catalog names to read or write")
    name: Annotated[str | None, BeforeValidator(_text)] = None

    @field_validator("roles")
    @classmethod
    def _some_roles(cls, roles: dict[Any, Any] | None) -> dict[Any, Any] | None:
        if roles is not None and not roles:
            raise PydanticCustomError("config_must", "must map catalog names to read or write, got an empty mapping")
        return roles

    @model_validator(mode="after")
    def _known_roles(self) -> _Grant:
        for catalog, role in self.granted().items():
            if role not in ROLES:
                raise PydanticCustomError("config_value", "role {role} for {catalog} is not one of read, write",
                                          {"role": repr(role), "catalog": repr(catalog)})
        return self

    def granted(self) -> dict[str, str]:
        if self.roles is not None:
            return {str(k): str(v).lower() for k, v in self.roles.items()}
        return {"*": str(self.role).lower()}


def _required(value: Any, message: str) -> Any:
    if not isinstance(value, dict):
        raise PydanticCustomError("config_missing", message)
    return value


class _TokenEntry(_Grant):
    token: str

    @model_validator(mode="before")
    @classmethod
    def _has_token(cls, entry: Any) -> Any:
        entry = _required(entry, "needs a 'token' (for example token: ${MY_TOKEN})")
        token = str(entry.get("token") or "").strip()
        if not token:
            raise PydanticCustomError("config_missing", "needs a 'token' (for example token: ${MY_TOKEN})")
        if len(str(entry["token"])) < 16:
            raise PydanticCustomError("config_value", "the token is shorter than 16 characters; use a long random one")
        return {**entry, "token": str(entry["token"])}


class _ClientEntry(_Grant):
    client_id: str = Field(alias="client-id")
    client_secret: str = Field(alias="client-secret")

    @model_validator(mode="before")
    @classmethod
    def _has_credentials(cls, entry: Any) -> Any:
        entry = _required(entry, "needs 'client-id' and 'client-secret'")
        if not entry.get("client-id") or not entry.get("client-secret"):
            raise PydanticCustomError("config_missing", "needs 'client-id' and 'client-secret'")
        return {**entry, "client-id": str(entry["client-id"]), "client-secret": str(entry["client-secret"])}


def _listed(value: Any) -> Any:
    return [value] if isinstance(value, str) else ([] if value is None else value)


def _flag(value: Any) -> bool:
    return str(value).lower() in ("true", "1", "yes")


def _at_least_one(value: int) -> int:
    if value < 1:
        raise PydanticCustomError("config_must", "must be at least 1")
    return value


_Positive = Annotated[int, AfterValidator(_at_least_one)]


def _separator(value: str) -> str:
    decoded = unquote(value)
    if not decoded:
        raise PydanticCustomError("separator", "the namespace separator cannot be empty")
    if "." in decoded or "/" in decoded:
        raise PydanticCustomError(
            "separator", "the namespace separator cannot contain '.' (names may) or '/'; the default is %1F")
    return value


class _ServerSection(BaseModel):
    """The ``server:`` section, key by key (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    catalogs: Annotated[list[str], BeforeValidator(_listed)] = Field(
        default_factory=list, description="a list of served catalog names")
    host: Annotated[str, BeforeValidator(_text)] = DEFAULT_HOST
    port: int = DEFAULT_PORT
    tokens: Annotated[list[_TokenEntry], BeforeValidator(_listed)] = Field(
        default_factory=list, description="a list of tokens ({token: ..., role: read})")
    clients: Annotated[list[_ClientEntry], BeforeValidator(_listed)] = Field(
        default_factory=list, description="a list of OAuth2 clients ({client-id: ..., client-secret: ...})")
    token_ttl_seconds: int = Field(default=3600, alias="token-ttl-seconds")
    token_secret: Annotated[str | None, BeforeValidator(_text)] = Field(default=None, alias="token-secret")
    allow_external_locations: Annotated[bool, BeforeValidator(_flag)] = Field(
        default=False, alias="allow-external-locations")
    table_config: Annotated[dict[str, Any], BeforeValidator(lambda v: {} if v is None else v)] = Field(
        default_factory=dict, alias="table-config", description="a mapping of properties")
    auth: Annotated[Literal["required", "none"], BeforeValidator(lambda v: str(v).lower())] = Field(
        default="required", description="'required' or 'none'")
    idempotency_key_lifetime_seconds: _Positive = Field(default=1800, alias="idempotency-key-lifetime-seconds")
    scan_planning_page_size: _Positive = Field(default=5000, alias="scan-planning-page-size")
    scan_plan_ttl_seconds: _Positive = Field(default=600, alias="scan-plan-ttl-seconds")
    storage_credentials: Annotated[VendingSettings, BeforeValidator(lambda v: {} if v is None else v)] = Field(
        default_factory=VendingSettings, alias="storage-credentials")
    max_request_bytes: int = Field(
        default=DEFAULT_MAX_REQUEST_BYTES, alias="max-request-bytes", ge=64 * 1024,
        description="smaller limits refuse ordinary commits")
    namespace_separator: Annotated[str, AfterValidator(_separator)] = Field(
        default=DEFAULT_NAMESPACE_SEPARATOR, alias="namespace-separator",
        description="url-encoded, like %1F; not '.', which names may contain")
    metrics_auth: Annotated[Literal["required", "none"], BeforeValidator(lambda v: str(v).lower())] = Field(
        default="required", alias="metrics-auth", description="'required' or 'none'")
    access_log: Annotated[bool, BeforeValidator(_flag)] = Field(default=True, alias="access-log")
    oidc: OidcIssuers = Field(default_factory=list, description="a list of issuers ({issuer: ..., audience: ...})")


# -- the settings the service runs with --------------------------------------------------------------


class ServerSettings(BaseModel):
    """The validated ``server:`` section, as the service uses it (see the module docstring)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    catalogs: tuple[str, ...]
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    tokens: dict[str, Principal] = Field(default_factory=dict)  # token -> principal
    clients: dict[str, tuple[str, Principal]] = Field(default_factory=dict)  # id -> (secret, principal)
    token_ttl_s: int = 3600
    token_secret: bytes = Field(default_factory=lambda: secrets.token_bytes(32))
    allow_external_locations: bool = False
    table_config: dict[str, str] = Field(default_factory=dict)
    auth_required: bool = True
    idempotency_lifetime_s: int = 1800
    vending: VendingSettings = Field(default_factory=VendingSettings)
    scan_planning_page_size: int = 5000
    scan_plan_ttl_s: int = 600
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    # Advertised url-encoded in /v1/config; paths are split by the decoded one (and by %1F).
    namespace_separator_encoded: str = DEFAULT_NAMESPACE_SEPARATOR

    @property
    def namespace_separator(self) -> str:
        return unquote(self.namespace_separator_encoded)
    metrics_auth_required: bool = True
    access_log: bool = True
    oidc: tuple[OidcIssuer, ...] = ()

    def __repr__(self) -> str:
        # Tokens and secrets are never shown; only who they belong to.
        return (
            f"ServerSettings(catalogs={self.catalogs!r}, host={self.host!r}, port={self.port}, "
            f"principals={sorted(p.name for p in self.tokens.values())!r}, "
            f"clients={sorted(self.clients)!r}, auth_required={self.auth_required})"
        )

    def __str__(self) -> str:
        return repr(self)


def _principal_roles(grant: _Grant, catalogs: tuple[str, ...], where: str) -> dict[str, str]:
    roles = grant.granted()
    for catalog in roles:
        if catalog != "*" and catalog not in catalogs:
            raise ConfigError(f"{where}: roles name catalog {catalog!r}, which is not served ({list(catalogs)})")
    return roles


def server_settings(config: LakehouseConfig, overrides: Mapping[str, Any] | None = None) -> ServerSettings:
    """The server settings of ``config`` (``overrides`` such as host and port from the CLI win)."""
    raw: dict[str, Any] = {**config.server, **{k: v for k, v in (overrides or {}).items() if v is not None}}
    src = config.source
    try:
        section = _ServerSection.model_validate(raw)
    except pydantic.ValidationError as e:
        raise ConfigError(f"{src}: {problem_message(e.errors()[0], _ServerSection, ('server',))}") from None
    catalogs = tuple(section.catalogs or [config.default_catalog])
    for name in catalogs:
        if name not in config.catalogs:
            raise ConfigError(f"{src}: server.catalogs names {name!r}, which is not a defined catalog")
        if config.catalogs[name].type != "sql":
            raise ConfigError(f"{src}: server.catalogs: {name!r} is a {config.catalogs[name].type} catalog; "
                              "the server serves sql catalogs")
    tokens = {
        entry.token: Principal(entry.name or f"token{i}",
                               _principal_roles(entry, catalogs, f"{src}: server.tokens[{i}]"))
        for i, entry in enumerate(section.tokens)
    }
    clients = {
        entry.client_id: (entry.client_secret, Principal(
            entry.client_id, _principal_roles(entry, catalogs, f"{src}: server.clients[{i}]")))
        for i, entry in enumerate(section.clients)
    }
    problem = issuers_problem(section.oidc, catalogs)
    if problem:
        raise ConfigError(f"{src}: {problem}")
    if section.auth == "required" and not tokens and not clients and not section.oidc:
        raise ConfigError(f"{src}: the server has no tokens, no clients and no OIDC issuer; add some under "
                          "server.tokens, server.clients or server.oidc (or set server.auth: none for local use)")
    return ServerSettings(
        catalogs=catalogs,
        host=section.host,
        port=section.port,
        tokens=tokens,
        clients=clients,
        token_ttl_s=section.token_ttl_seconds,
        token_secret=section.token_secret.encode() if section.token_secret else secrets.token_bytes(32),
        allow_external_locations=section.allow_external_locations,
        table_config={str(k): str(v) for k, v in section.table_config.items()},
        auth_required=section.auth == "required",
        idempotency_lifetime_s=section.idempotency_key_lifetime_seconds,
        scan_planning_page_size=section.scan_planning_page_size,
        scan_plan_ttl_s=section.scan_plan_ttl_seconds,
        max_request_bytes=section.max_request_bytes,
        namespace_separator_encoded=section.namespace_separator,
        vending=section.storage_credentials,
        metrics_auth_required=section.metrics_auth == "required",
        access_log=section.access_log,
        oidc=tuple(section.oidc),
    )


__all__ = ["READ", "WRITE", "Principal", "ServerSettings", "server_settings"]
