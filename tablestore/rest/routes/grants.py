"""The admin API of grants (a tablestore extension, outside the Iceberg REST spec's paths):

- ``GET /v1/admin/grants?catalog=NAME``: the grants the caller may see: those on what it holds
  MANAGE_GRANTS on, and its own (and its roles');
- ``POST /v1/admin/grants``: grant one privilege (``{"catalog", "securable", "privilege",
  "grantee"}``), answered ``{"granted": true}``, or false when it was held already;
- ``DELETE /v1/admin/grants`` with the same body: revoke it, answered ``{"revoked": true|false}``.

Granting or revoking needs MANAGE_GRANTS on the securable (or above it). Under the two roles
(grants not enabled) the write role manages grants, so they can be prepared before
``server.authorization: grants`` is switched on. A grant names an object that exists; the grants
of a dropped object go with it (:meth:`tablestore.rest.access.Access.forget`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from tablestore.errors import NoSuchNamespaceError, NoSuchTableError
from tablestore.rest.access import Access, open_access, service_of
from tablestore.rest.auth.grants import NAMESPACE, TABLE, Grant, Privilege

router = APIRouter(prefix="/v1/admin", tags=["access control (tablestore extension)"])


class GrantRequest(BaseModel):
    """One privilege on one securable for one grantee, in one served catalog."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    catalog: str | None = Field(default=None, description="the served catalog (default: the first)")
    securable: dict[str, Any]
    privilege: str
    grantee: dict[str, str]


def _access(request: Request, catalog: str | None) -> Access:
    return open_access(request, catalog or service_of(request).settings.catalogs[0])


def _parsed(access: Access, body: GrantRequest) -> Grant:
    grant = Grant.from_json({"securable": body.securable, "privilege": body.privilege, "grantee": body.grantee})
    access.require(Privilege.MANAGE_GRANTS, grant.securable)
    return grant


def _check_exists(access: Access, grant: Grant) -> None:
    """A grant names an existing namespace, or table (view, function)."""
    catalog, path = access.catalog, grant.securable.path
    if grant.securable.kind == NAMESPACE and not catalog.namespace_exists(path):
        raise NoSuchNamespaceError(f"cannot grant on namespace {'.'.join(path)!r}: it does not exist")
    if grant.securable.kind == TABLE and not (catalog.table_exists(path) or catalog.view_exists(path)
                                              or catalog.function_exists(path)):
        raise NoSuchTableError(f"cannot grant on table {'.'.join(path)!r}: no table, view or function has that name")


@router.get("/grants")
def list_grants(request: Request, catalog: Annotated[str | None, Query()] = None) -> dict[str, Any]:
    access = _access(request, catalog)
    store = access.service.grant_store(access.prefix)
    shown = access.service.authorizer.grants_shown(access, store.grants())
    return {"catalog": access.prefix, "grants": [g.to_json() for g in shown]}


@router.post("/grants")
def grant_privilege(request: Request, body: Annotated[GrantRequest, Body()]) -> dict[str, Any]:
    access = _access(request, body.catalog)
    grant = _parsed(access, body)
    _check_exists(access, grant)
    granted = access.service.grant_store(access.prefix).grant(grant, access.principal.name)
    return {"catalog": access.prefix, "grant": grant.to_json(), "granted": granted}


@router.delete("/grants")
def revoke_privilege(request: Request, body: Annotated[GrantRequest, Body()]) -> dict[str, Any]:
    access = _access(request, body.catalog)
    grant = _parsed(access, body)
    revoked = access.service.grant_store(access.prefix).revoke(grant)
    return {"catalog": access.prefix, "grant": grant.to_json(), "revoked": revoked}


__all__ = ["GrantRequest", "router"]
