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
from tablestore.errors import NoSuchCatalogError, ValidationError
from tablestore.names import Identifier, to_namespace, validate_name
from tablestore.rest.plan_store import PlanStore
from tablestore.rest.security import Authenticator, check_location
from tablestore.rest.settings import READ, WRITE, Principal, ServerSettings

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
    plans: PlanStore = field(init=False)

    def __post_init__(self) -> None:
        self.auth = Authenticator(self.settings)
        self.plans = PlanStore(self.settings.scan_plan_ttl_s)

    def client_config(self, catalog: Catalog) -> dict[str, str]:
        """What clients need to reach a catalog's files: its ``s3.*`` properties and table-config."""
        out = {k: v for k, v in catalog.properties.items() if k.startswith("s3.")}
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

    def check_location(self, location: str, what: str) -> None:
        check_location(location, self.catalog.warehouse, self.service.settings.allow_external_locations, what)


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
        return Access(service, prefix, catalog, principal)

    return dependency


reader = _access(READ)
writer = _access(WRITE)
ReadAccess = Annotated[Access, Depends(reader)]
WriteAccess = Annotated[Access, Depends(writer)]


def parse_namespace(text: str) -> Identifier:
    """A namespace path segment (levels joined by %1F) as a validated tuple."""
    return to_namespace(tuple(text.split(NAMESPACE_SEPARATOR)))


def parse_identifier(namespace: str, name: str, kind: str = "table") -> Identifier:
    validate_name(name, f"{kind} name")
    return (*parse_namespace(namespace), name)


def identifier_of(namespace: list[str], name: str, kind: str = "table") -> Identifier:
    if not isinstance(namespace, list) or not namespace:
        raise ValidationError(f"a {kind} identifier needs a namespace with at least one level")
    validate_name(name, f"{kind} name")
    return (*to_namespace(tuple(namespace)), name)


def identifier_json(identifier: Identifier) -> dict[str, Any]:
    return {"namespace": list(identifier[:-1]), "name": identifier[-1]}


__all__ = [
    "NAMESPACE_SEPARATOR",
    "Access",
    "ReadAccess",
    "Service",
    "WriteAccess",
    "authenticate",
    "declare_bearer_auth",
    "identifier_json",
    "identifier_of",
    "parse_identifier",
    "parse_namespace",
    "reader",
    "service_of",
    "writer",
]
