"""Per-request access: the served catalog named by ``{prefix}``, checked against the caller's role.

Authentication comes before the catalog lookup, so an unauthenticated caller learns nothing
about which catalogs exist (401, not 404).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request

from tablestore.catalog import Catalog
from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.errors import NoSuchCatalogError, ValidationError
from tablestore.names import Identifier, to_namespace, validate_name
from tablestore.rest.credentials import DELEGATION_HEADER, VENDED, CredentialVendor, public_properties
from tablestore.rest.plan_store import PlanStore
from tablestore.rest.s3_signing import REMOTE_SIGNING, RequestSigner, S3Location, signer_config
from tablestore.rest.security import LOCATION_PROPERTIES, Authenticator, check_location
from tablestore.rest.settings import READ, WRITE, Principal, ServerSettings
from tablestore.rest.stats import Stats

# The REST spec joins namespace levels in a path segment with the unit separator (%1F).
NAMESPACE_SEPARATOR = "\x1f"
# The bearer scheme of the OpenAPI document. Operations name it there (``declare_bearer_auth``)
# rather than as a dependency, which FastAPI would resolve on every request for nothing: the
# header itself is read below.
BEARER_SCHEME = "HTTPBearer"


def declare_bearer_auth(schema: dict[str, Any]) -> None:
    """Declare bearer tokens in an OpenAPI document: the scheme, and every operation needs it
    (the token endpoint excepted: it is how clients get one)."""
    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {})[BEARER_SCHEME] = {"type": "http", "scheme": "bearer"}
    for path, item in schema.get("paths", {}).items():
        if path == "/v1/oauth/tokens":
            continue
        for operation in item.values():
            if isinstance(operation, dict):
                operation["security"] = [{BEARER_SCHEME: []}]


@dataclass
class Service:
    """What the app serves: the catalogs by prefix, the settings, the authenticator."""

    settings: ServerSettings
    catalogs: dict[str, Catalog]
    auth: Authenticator = field(init=False)
    vendors: dict[str, CredentialVendor] = field(init=False)
    signers: dict[str, RequestSigner] = field(init=False)
    plans: PlanStore = field(init=False)
    stats: Stats = field(init=False)  # service-wide counters for /metrics (tablestore.rest.stats)

    def __post_init__(self) -> None:
        self.auth = Authenticator(self.settings)
        self.vendors = {name: CredentialVendor(catalog.properties, catalog.warehouse, self.settings.vending)
                        for name, catalog in self.catalogs.items()}
        self.signers = {name: RequestSigner(catalog.properties) for name, catalog in self.catalogs.items()}
        # Paged plans of SQL catalogs live in their database, so any replica serves their pages.
        self.plans = PlanStore(self.settings.scan_plan_ttl_s, engines={
            name: catalog.engine for name, catalog in self.catalogs.items() if isinstance(catalog, SqlCatalog)})
        self.stats = Stats()

    def client_config(self, catalog: Catalog) -> dict[str, str]:
        """What every client may know about a catalog's files: its ``s3.*`` properties without
        the keys (endpoint, region, path style), and table-config."""
        out = public_properties(catalog.properties)
        out.update(self.settings.table_config)
        return out

    def close(self) -> None:
        for catalog in self.catalogs.values():
            catalog.close()


@dataclass
class Access:
    """An authorized request on one catalog."""

    service: Service
    prefix: str
    catalog: Catalog
    principal: Principal
    # The delegated access mechanisms the client asked for (X-Iceberg-Access-Delegation), in its order.
    delegation: tuple[str, ...] = ()

    def parse_namespace(self, text: str) -> Identifier:
        """A namespace of a path or query parameter, split by the server's separator."""
        return parse_namespace(text, self.service.settings.namespace_separator)

    def parse_identifier(self, namespace: str, name: str, kind: str = "table") -> Identifier:
        return parse_identifier(namespace, name, kind, self.service.settings.namespace_separator)

    def check_location(self, location: str, what: str) -> None:
        check_location(location, self.catalog.warehouse, self.service.settings.allow_external_locations, what)

    def storage_credentials(self, location: str, properties: dict[str, str]) -> list[dict[str, Any]]:
        """Credentials for a table's files, scoped to its location (and data/metadata paths),
        with writes only for the write role; ``[]`` when vending is off or not in S3."""
        vendor = self.service.vendors.get(self.prefix)
        if vendor is None:
            return []
        extra = [properties[k] for k in LOCATION_PROPERTIES if properties.get(k)]
        return vendor.storage_credentials(location, extra, self.principal.can(self.prefix, WRITE))

    def table_config(self, location: str, properties: dict[str, str], ident: Identifier | None = None
                     ) -> tuple[dict[str, str], list[dict[str, Any]]]:
        """A LoadTableResult's ``config`` and ``storage-credentials``, with the first delegated
        access mechanism the client asked for that the service can give for the table:

        - ``vended-credentials``: scoped credentials (when vending is on and the table is in S3).
          They go in ``config`` too: pyiceberg matches storage-credentials against the metadata
          location, which a staged create does not have, and DuckDB reads ``config``.
        - ``remote-signing``: the signer properties of the table ``ident`` (in S3), and no credential.
        """
        config = self.service.client_config(self.catalog)
        for mechanism in self.delegation:
            if mechanism == VENDED:
                credentials = self.storage_credentials(location, properties)
                if credentials:
                    config.update(credentials[0]["config"])
                    return config, credentials
            elif mechanism == REMOTE_SIGNING and ident is not None and S3Location.parse(location) is not None:
                config.update(signer_config(self.prefix, ident, self.service.settings.namespace_separator_encoded))
                return config, []
        return config, []


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def authenticate(request: Request) -> Principal:
    return service_of(request).auth.authenticate(request.headers.get("authorization"))


def _access(role: str) -> Callable[..., Awaitable[Access]]:
    # Async although it awaits nothing: it only checks the token and looks up the catalog, and a
    # sync dependency would cost a thread-pool hop per request (the endpoints need their own).
    async def dependency(request: Request, prefix: str) -> Access:
        service = service_of(request)
        principal = service.auth.authenticate(request.headers.get("authorization"))
        catalog = service.catalogs.get(prefix)
        if catalog is None:
            raise NoSuchCatalogError(f"this server serves no catalog {prefix!r}; GET /v1/config lists the prefix")
        service.auth.authorize(principal, prefix, role)
        delegation = delegation_mechanisms(request.headers.get(DELEGATION_HEADER))
        return Access(service, prefix, catalog, principal, delegation)

    return dependency


reader = _access(READ)
writer = _access(WRITE)
ReadAccess = Annotated[Access, Depends(reader)]
WriteAccess = Annotated[Access, Depends(writer)]


def delegation_mechanisms(header: str | None) -> tuple[str, ...]:
    """The mechanisms of an ``X-Iceberg-Access-Delegation`` header (a comma-separated list), in order."""
    return tuple(part for part in (p.strip().lower() for p in (header or "").split(",")) if part)


def parse_namespace(text: str, separator: str = NAMESPACE_SEPARATOR) -> Identifier:
    """A namespace path segment as a validated tuple: levels joined by ``separator`` (the
    server's ``namespace-separator``, decoded) or by the spec's default %1F, which the 1.11 spec
    asks servers to accept as well, for older clients. A dot is part of a level's name."""
    parts = [text]
    for sep in dict.fromkeys((separator, NAMESPACE_SEPARATOR)):
        parts = [level for part in parts for level in part.split(sep)]
    return to_namespace(tuple(parts))


def parse_identifier(namespace: str, name: str, kind: str = "table",
                     separator: str = NAMESPACE_SEPARATOR) -> Identifier:
    validate_name(name, f"{kind} name")
    return (*parse_namespace(namespace, separator), name)


def identifier_of(namespace: list[str], name: str, kind: str = "table") -> Identifier:
    if not isinstance(namespace, list) or not namespace:
        raise ValidationError(f"a {kind} identifier needs a namespace with at least one level")
    validate_name(name, f"{kind} name")
    return (*to_namespace(tuple(namespace)), name)


__all__ = [
    "NAMESPACE_SEPARATOR",
    "Access",
    "ReadAccess",
    "Service",
    "WriteAccess",
    "authenticate",
    "declare_bearer_auth",
    "delegation_mechanisms",
    "identifier_of",
    "parse_identifier",
    "parse_namespace",
    "reader",
    "service_of",
    "writer",
]
