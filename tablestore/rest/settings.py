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

Each served catalog is one REST ``prefix`` (its name). The non-secret ``s3.*`` properties of a
served catalog (endpoint, region, path style) are handed out in ``/v1/config`` and in every
LoadTableResult ``config``; its keys never are: clients that ask get scoped, short-lived
credentials instead (:mod:`tablestore.rest.credentials`).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tablestore.config import LakehouseConfig
from tablestore.errors import ConfigError
from tablestore.rest.credentials import VendingSettings, vending_settings
from tablestore.rest.limits import DEFAULT_MAX_REQUEST_BYTES

READ = "read"
WRITE = "write"
ROLES = (READ, WRITE)
_KEYS = ("catalogs", "host", "port", "tokens", "clients", "token-ttl-seconds", "token-secret",
         "allow-external-locations", "table-config", "auth", "idempotency-key-lifetime-seconds",
         "scan-planning-page-size", "scan-plan-ttl-seconds", "storage-credentials",
         "max-request-bytes")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8181


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


@dataclass(frozen=True, repr=False)
class ServerSettings:
    """The validated ``server:`` section (see the module docstring)."""

    catalogs: tuple[str, ...]
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    tokens: dict[str, Principal] = field(default_factory=dict)  # token -> principal
    clients: dict[str, tuple[str, Principal]] = field(default_factory=dict)  # id -> (secret, principal)
    token_ttl_s: int = 3600
    token_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    allow_external_locations: bool = False
    table_config: dict[str, str] = field(default_factory=dict)
    auth_required: bool = True
    idempotency_lifetime_s: int = 1800
    vending: VendingSettings = field(default_factory=VendingSettings)
    scan_planning_page_size: int = 5000
    scan_plan_ttl_s: int = 600
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES

    def __repr__(self) -> str:
        # Tokens and secrets are never shown; only who they belong to.
        return (
            f"ServerSettings(catalogs={self.catalogs!r}, host={self.host!r}, port={self.port}, "
            f"principals={sorted(p.name for p in self.tokens.values())!r}, "
            f"clients={sorted(self.clients)!r}, auth_required={self.auth_required})"
        )


def _roles(entry: Mapping[str, Any], catalogs: tuple[str, ...], where: str) -> dict[str, str]:
    if "roles" in entry:
        raw = entry["roles"]
        if not isinstance(raw, dict) or not raw:
            raise ConfigError(f"{where}.roles must map catalog names to read or write, got {raw!r}")
        roles = {str(k): str(v).lower() for k, v in raw.items()}
    else:
        roles = {"*": str(entry.get("role", READ)).lower()}
    for catalog, role in roles.items():
        if role not in ROLES:
            raise ConfigError(f"{where}: role {role!r} for {catalog!r} is not one of read, write")
        if catalog != "*" and catalog not in catalogs:
            raise ConfigError(f"{where}: roles name catalog {catalog!r}, which is not served ({list(catalogs)})")
    return roles


def server_settings(config: LakehouseConfig, overrides: Mapping[str, Any] | None = None) -> ServerSettings:
    """The server settings of ``config`` (``overrides`` such as host and port from the CLI win)."""
    raw: dict[str, Any] = {**config.server, **{k: v for k, v in (overrides or {}).items() if v is not None}}
    src = config.source
    for key in raw:
        if key not in _KEYS:
            raise ConfigError(f"{src}: unknown key server.{key}; expected one of {', '.join(_KEYS)}")
    names = raw.get("catalogs") or [config.default_catalog]
    if isinstance(names, str):
        names = [names]
    catalogs = tuple(str(n) for n in names)
    for name in catalogs:
        if name not in config.catalogs:
            raise ConfigError(f"{src}: server.catalogs names {name!r}, which is not a defined catalog")
        if config.catalogs[name].type != "sql":
            raise ConfigError(f"{src}: server.catalogs: {name!r} is a {config.catalogs[name].type} catalog; "
                              "the server serves sql catalogs")

    tokens: dict[str, Principal] = {}
    for i, entry in enumerate(raw.get("tokens") or []):
        where = f"{src}: server.tokens[{i}]"
        if not isinstance(entry, dict) or not str(entry.get("token") or "").strip():
            raise ConfigError(f"{where} needs a 'token' (for example token: ${{MY_TOKEN}})")
        token = str(entry["token"])
        if len(token) < 16:
            raise ConfigError(f"{where}: the token is shorter than 16 characters; use a long random one")
        tokens[token] = Principal(str(entry.get("name") or f"token{i}"), _roles(entry, catalogs, where))
    clients: dict[str, tuple[str, Principal]] = {}
    for i, entry in enumerate(raw.get("clients") or []):
        where = f"{src}: server.clients[{i}]"
        if not isinstance(entry, dict) or not entry.get("client-id") or not entry.get("client-secret"):
            raise ConfigError(f"{where} needs 'client-id' and 'client-secret'")
        client_id = str(entry["client-id"])
        clients[client_id] = (str(entry["client-secret"]), Principal(client_id, _roles(entry, catalogs, where)))

    auth = str(raw.get("auth", "required")).lower()
    if auth not in ("required", "none"):
        raise ConfigError(f"{src}: server.auth must be 'required' or 'none', got {auth!r}")
    if auth == "required" and not tokens and not clients:
        raise ConfigError(f"{src}: the server has no tokens and no clients; add some under server.tokens "
                          "or server.clients (or set server.auth: none for local use)")
    table_config = raw.get("table-config") or {}
    if not isinstance(table_config, dict):
        raise ConfigError(f"{src}: server.table-config must be a mapping of properties")
    try:
        port = int(raw.get("port", DEFAULT_PORT))
        ttl = int(raw.get("token-ttl-seconds", 3600))
        idempotency_lifetime = int(raw.get("idempotency-key-lifetime-seconds", 1800))
        page_size = int(raw.get("scan-planning-page-size", 5000))
        plan_ttl = int(raw.get("scan-plan-ttl-seconds", 600))
        max_request_bytes = int(raw.get("max-request-bytes", DEFAULT_MAX_REQUEST_BYTES))
    except (TypeError, ValueError):
        raise ConfigError(f"{src}: server.port, server.token-ttl-seconds, server.idempotency-key-lifetime-seconds, "
                          "server.scan-planning-page-size, server.scan-plan-ttl-seconds and server.max-request-bytes "
                          "must be integers") from None
    if idempotency_lifetime < 1:
        raise ConfigError(f"{src}: server.idempotency-key-lifetime-seconds must be at least 1")
    if page_size < 1 or plan_ttl < 1:
        raise ConfigError(f"{src}: server.scan-planning-page-size and server.scan-plan-ttl-seconds must be at least 1")
    if max_request_bytes < 64 * 1024:
        raise ConfigError(f"{src}: server.max-request-bytes must be at least 65536 (64 KiB): smaller limits "
                          "refuse ordinary commits")
    secret = raw.get("token-secret")
    return ServerSettings(
        catalogs=catalogs,
        host=str(raw.get("host", DEFAULT_HOST)),
        port=port,
        tokens=tokens,
        clients=clients,
        token_ttl_s=ttl,
        token_secret=str(secret).encode() if secret else secrets.token_bytes(32),
        allow_external_locations=str(raw.get("allow-external-locations", False)).lower() in ("true", "1", "yes"),
        table_config={str(k): str(v) for k, v in table_config.items()},
        auth_required=auth == "required",
        idempotency_lifetime_s=idempotency_lifetime,
        scan_planning_page_size=page_size,
        scan_plan_ttl_s=plan_ttl,
        max_request_bytes=max_request_bytes,
        vending=vending_settings(raw.get("storage-credentials"), str(src)),
    )


__all__ = ["READ", "WRITE", "Principal", "ServerSettings", "server_settings"]
