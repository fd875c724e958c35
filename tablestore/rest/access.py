"""Per-request access: the served catalog named by ``{prefix}``, checked against the caller's role
or, with ``server.authorization: grants``, against its grants (:mod:`tablestore.rest.auth.grants`).

Authentication comes before the catalog lookup, so an unauthenticated caller learns nothing
about which catalogs exist (401, not 404). Every endpoint then names the privilege it needs on
the object it touches (``Access.require``); under the two roles, LIST and READ need the read
role and the other privileges the write role, so both models run through the same checks.
Privileges are checked by name before the object is looked up: a caller without READ on a
table learns nothing of whether it exists (403 either way).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request

from tablestore.catalog.base import Catalog
from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.errors import ConfigError, NoSuchCatalogError, NotAuthorizedError, ValidationError
from tablestore.names import Identifier
from tablestore.rest.auth.authorizer import Authorizer, authorizer_for
from tablestore.rest.auth.grants import (
    GrantStore,
    Held,
    Privilege,
    Securable,
    catalog_securable,
    namespace_securable,
    table_securable,
)
from tablestore.rest.auth.principals import READ, WRITE, Principal
from tablestore.rest.auth.tokens import LOCATION_PROPERTIES, Authenticator, check_location
from tablestore.rest.paths import parse_identifier, parse_namespace
from tablestore.rest.settings import ServerSettings
from tablestore.rest.state.plan_store import PlanStore
from tablestore.rest.state.stats import Stats
from tablestore.rest.storage.credentials import DELEGATION_HEADER, VENDED, CredentialVendor, public_properties
from tablestore.rest.storage.signing import REMOTE_SIGNING, RequestSigner, S3Location, signer_config

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
    stats: Stats = field(init=False)  # service-wide counters for /metrics (tablestore.rest.state.stats)
    authorizer: Authorizer = field(init=False)  # roles or grants, chosen once (tablestore.rest.auth.authorizer)

    def __post_init__(self) -> None:
        self.auth = Authenticator(self.settings)
        self.authorizer = authorizer_for(self.settings.authorization.grants)
        self.vendors = {name: CredentialVendor(catalog.properties, catalog.warehouse, self.settings.vending)
                        for name, catalog in self.catalogs.items()}
        self.signers = {name: RequestSigner(catalog.properties) for name, catalog in self.catalogs.items()}
        # Paged plans of SQL catalogs live in their database, so any replica serves their pages.
        self.plans = PlanStore(self.settings.scan_plan_ttl_s, engines={
            name: catalog.engine for name, catalog in self.catalogs.items() if isinstance(catalog, SqlCatalog)})
        self.stats = Stats()
        self._grant_stores: dict[str, GrantStore] = {}
        self._client_configs: dict[int, dict[str, str]] = {}
        self._grant_lock = threading.Lock()
        if self.settings.authorization.grants:
            others = [name for name, catalog in self.catalogs.items() if not isinstance(catalog, SqlCatalog)]
            if others:
                raise ConfigError(f"server.authorization: grants are kept in a SQL catalog's database; "
                                  f"{', '.join(others)} is not a SQL catalog")

    def grant_store(self, prefix: str) -> GrantStore:
        """The grants of a served catalog, its table created on first use (so a service that never
        uses grants adds nothing to its database)."""
        store = self._grant_stores.get(prefix)
        if store is None:
            catalog = self.catalogs[prefix]
            if not isinstance(catalog, SqlCatalog):
                raise ValidationError(f"catalog {prefix!r} keeps no grants: it is not a SQL catalog")
            with self._grant_lock:
                store = self._grant_stores.get(prefix)
                if store is None:
                    store = self._grant_stores[prefix] = GrantStore(catalog.engine, prefix)
        return store

    def held(self, principal: Principal, prefix: str) -> Held:
        """What ``principal`` holds in a served catalog under grants: its grants and its roles'."""
        authorization = self.settings.authorization
        if principal.name in authorization.admins:
            return Held((), admin=True)
        return Held(tuple(self.grant_store(prefix).grants(authorization.grantees(principal.name))))

    def client_config(self, catalog: Catalog) -> dict[str, str]:
        """What every client may know about a catalog's files: its ``s3.*`` properties without
        the keys (endpoint, region, path style), and table-config."""
        # Made once per catalog (its properties and the settings do not change), copied per answer.
        found = self._client_configs.get(id(catalog))
        if found is None:
            found = public_properties(catalog.properties)
            found.update(self.settings.table_config)
            self._client_configs[id(catalog)] = found
        return dict(found)

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
    _held: Held | None = field(default=None, init=False, repr=False)

    # -- authorization (decided by the service's Authorizer) ------------------------------------
    def held(self) -> Held:
        """The caller's grants in this catalog, read once per request."""
        if self._held is None:
            self._held = self.service.held(self.principal, self.prefix)
        return self._held

    def may(self, privilege: Privilege, securable: Securable) -> bool:
        return self.service.authorizer.may(self, privilege, securable)

    def require(self, privilege: Privilege, securable: Securable) -> None:
        """ForbiddenError (403) naming the privilege and the object unless the caller holds it."""
        if not self.may(privilege, securable):
            raise self.service.authorizer.refusal(self, privilege, securable)

    def require_table(self, privilege: Privilege, ident: Identifier) -> None:
        self.require(privilege, table_securable(ident))

    def require_namespace(self, privilege: Privilege, namespace: Identifier) -> None:
        """``privilege`` on a namespace, or on the catalog for its top level (``()``)."""
        self.require(privilege, namespace_securable(namespace) if namespace else catalog_securable())

    def require_seen(self, namespace: Identifier) -> None:
        """Loading a namespace (or asking whether it exists) needs LIST on it, or any privilege
        that reaches it or something inside it."""
        if not self.service.authorizer.sees(self, namespace_securable(namespace)):
            self.require_namespace(Privilege.LIST, namespace)

    def require_listing(self, namespace: Identifier) -> bool:
        """Whether the caller may list everything in ``namespace`` (LIST there or above); False
        when it may list only what its privileges reach (:meth:`visible`); ForbiddenError when
        it holds nothing there at all. The catalog's top level is always listable so."""
        securable = namespace_securable(namespace) if namespace else catalog_securable()
        if self.may(Privilege.LIST, securable):
            return True
        if namespace and not self.service.authorizer.sees(self, securable):
            self.require(Privilege.LIST, securable)
        return False

    def visible(self, found: Iterable[Identifier], kind: str, whole: bool) -> list[Identifier]:
        """The namespaces or tables of a listing the caller may see: all of them with LIST on
        their namespace (``whole``), else those any of its privileges reaches."""
        return list(found) if whole else self.service.authorizer.visible(self, found, kind)

    def forget(self, securable: Securable) -> None:
        """Drop the grants of a dropped object, so a new object of its name does not inherit them."""
        self.service.authorizer.forget(self, securable)

    def moved(self, source: Identifier, destination: Identifier) -> None:
        """A renamed table or view keeps its grants under the new name."""
        self.service.authorizer.moved(self, source, destination)

    def parse_namespace(self, text: str) -> Identifier:
        """A namespace of a path or query parameter, split by the server's separator."""
        return parse_namespace(text, self.service.settings.namespace_separator)

    def parse_identifier(self, namespace: str, name: str, kind: str = "table") -> Identifier:
        return parse_identifier(namespace, name, kind, self.service.settings.namespace_separator)

    def check_location(self, location: str, what: str) -> None:
        check_location(location, self.catalog.warehouse, self.service.settings.allow_external_locations, what)

    def may_write(self, ident: Identifier | None) -> bool:
        """Whether credentials and signatures for the table ``ident`` may write its files: the
        write role, or under grants WRITE on the table (a staged create's table included)."""
        if ident is None:
            return self.service.authorizer.may_write_unnamed(self)
        return self.may(Privilege.WRITE, table_securable(ident))

    def storage_credentials(self, location: str, properties: dict[str, str],
                            ident: Identifier | None) -> list[dict[str, Any]]:
        """Credentials for a table's files, scoped to its location (and data/metadata paths),
        with writes only for who may write the table; ``[]`` when vending is off or not in S3."""
        vendor = self.service.vendors.get(self.prefix)
        if vendor is None:
            return []
        extra = [properties[k] for k in LOCATION_PROPERTIES if properties.get(k)]
        return vendor.storage_credentials(location, extra, self.may_write(ident))

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
                credentials = self.storage_credentials(location, properties, ident)
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


def principal_of(request: Request) -> Principal:
    """The caller, as the envelope authenticated it once for the whole request
    (:mod:`tablestore.rest.envelope`): never verified again here."""
    principal: Principal | None = request.scope.get("state", {}).get("principal")
    if principal is None:
        # Only a path the envelope leaves open reaches here, and none of them asks who calls.
        raise NotAuthorizedError("no bearer token; send 'Authorization: Bearer <token>'")
    return principal


def _access(role: str) -> Callable[..., Awaitable[Access]]:
    # Async although it awaits nothing: it only looks up the catalog and checks the role, and a
    # sync dependency would cost a thread-pool hop per request (the endpoints need their own).
    async def dependency(request: Request, prefix: str) -> Access:
        access = open_access(request, prefix)
        access.service.authorizer.check_endpoint(access.principal, prefix, role)
        return access

    return dependency


def open_access(request: Request, prefix: str) -> Access:
    """The caller's access to the served catalog ``prefix``, authenticated and not yet authorized."""
    service = service_of(request)
    principal = principal_of(request)
    catalog = service.catalogs.get(prefix)
    if catalog is None:
        raise NoSuchCatalogError(f"this server serves no catalog {prefix!r}; GET /v1/config lists the prefix")
    delegation = delegation_mechanisms(request.headers.get(DELEGATION_HEADER))
    return Access(service, prefix, catalog, principal, delegation)


# Under grants both only authenticate: each endpoint requires its privilege (Access.require).
reader = _access(READ)
writer = _access(WRITE)
ReadAccess = Annotated[Access, Depends(reader)]
WriteAccess = Annotated[Access, Depends(writer)]


def delegation_mechanisms(header: str | None) -> tuple[str, ...]:
    """The mechanisms of an ``X-Iceberg-Access-Delegation`` header (a comma-separated list), in order."""
    return tuple(part for part in (p.strip().lower() for p in (header or "").split(",")) if part)


__all__ = [
    "Access",
    "ReadAccess",
    "Service",
    "WriteAccess",
    "declare_bearer_auth",
    "delegation_mechanisms",
    "open_access",
    "principal_of",
    "reader",
    "service_of",
    "writer",
]
