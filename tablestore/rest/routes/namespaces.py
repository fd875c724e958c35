"""Namespace endpoints: list (with ``parent``), create, load, exists, drop, update properties."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response

from tablestore.catalog.base import LOCATION
from tablestore.errors import ValidationError
from tablestore.rest.access import Access, ReadAccess, WriteAccess
from tablestore.rest.auth.grants import Privilege, namespace_securable
from tablestore.rest.routes.limits import check_properties, check_property_keys
from tablestore.rest.routes.models import CreateNamespaceRequest, UpdateNamespacePropertiesRequest

router = APIRouter(prefix="/v1/{prefix}", tags=["namespaces"])


def page(items: list[Any], page_token: str | None, page_size: int | None) -> tuple[list[Any], str | None]:
    """One page of ``items``; the token is the offset of the next page."""
    if page_token in (None, "") and page_size is None:
        return items, None
    try:
        start = int(page_token) if page_token else 0
    except ValueError:
        raise ValidationError(f"pageToken {page_token!r} is not one this server issued") from None
    if start < 0 or (page_size is not None and page_size < 1):
        raise ValidationError("pageToken must be a token this server issued and pageSize at least 1")
    end = len(items) if page_size is None else start + page_size
    return items[start:end], (str(end) if end < len(items) else None)


def with_location(access: Access, namespace: tuple[str, ...], properties: dict[str, str]) -> dict[str, str]:
    """A namespace's properties as answered: with its ``location``, the warehouse path where
    its tables go by default, when none was set.

    Trino needs it: without a namespace location its REST catalog creates a table at once
    (not staged), writing the first metadata file, and then refuses the table it made because
    its location is not empty.
    """
    warehouse = access.catalog.warehouse
    if LOCATION in properties or not warehouse:
        return properties
    return {**properties, LOCATION: "/".join((warehouse.rstrip("/"), *namespace))}


def require_seen(access: Access, namespace: tuple[str, ...]) -> None:
    """Loading a namespace (or asking whether it exists) needs LIST on it, or any privilege that
    reaches it or something inside it."""
    access.require_seen(namespace)


@router.get("/namespaces")
def list_namespaces(
    access: ReadAccess,
    parent: str | None = Query(default=None),
    page_token: str | None = Query(default=None, alias="pageToken"),
    page_size: int | None = Query(default=None, alias="pageSize"),
) -> dict[str, Any]:
    parent_ns = access.parse_namespace(parent) if parent else ()
    whole = access.require_listing(parent_ns)
    listed = access.visible(access.catalog.list_namespaces(parent_ns), "namespace", whole)
    found, token = page(listed, page_token, page_size)
    return {"namespaces": [list(ns) for ns in found], "next-page-token": token}


@router.post("/namespaces")
def create_namespace(body: CreateNamespaceRequest, access: WriteAccess) -> dict[str, Any]:
    namespace = tuple(body.namespace)
    access.require_namespace(Privilege.CREATE, namespace[:-1])
    check_properties(body.properties, "namespace properties")
    if LOCATION in body.properties:
        access.check_location(body.properties[LOCATION], "namespace location")
    access.catalog.create_namespace(namespace, body.properties)
    properties = access.catalog.load_namespace_properties(namespace)
    return {"namespace": list(namespace), "properties": with_location(access, namespace, properties)}


@router.get("/namespaces/{namespace}")
def load_namespace(namespace: str, access: ReadAccess) -> dict[str, Any]:
    ns = access.parse_namespace(namespace)
    require_seen(access, ns)
    properties = access.catalog.load_namespace_properties(ns)
    return {"namespace": list(ns), "properties": with_location(access, ns, properties)}


@router.head("/namespaces/{namespace}", status_code=204)
def namespace_exists(namespace: str, access: ReadAccess) -> Response:
    ns = access.parse_namespace(namespace)
    require_seen(access, ns)
    exists = access.catalog.namespace_exists(ns)
    return Response(status_code=204 if exists else 404)


@router.delete("/namespaces/{namespace}", status_code=204)
def drop_namespace(namespace: str, access: WriteAccess) -> Response:
    ns = access.parse_namespace(namespace)
    access.require_namespace(Privilege.DROP, ns)
    access.catalog.drop_namespace(ns)
    access.forget(namespace_securable(ns))
    return Response(status_code=204)


@router.post("/namespaces/{namespace}/properties")
def update_namespace_properties(
    namespace: str, body: UpdateNamespacePropertiesRequest, access: WriteAccess
) -> dict[str, Any]:
    ns = access.parse_namespace(namespace)
    access.require_namespace(Privilege.WRITE, ns)
    check_properties(body.updates, "namespace properties")
    check_property_keys(body.removals, "namespace property removals")
    if LOCATION in body.updates:
        access.check_location(body.updates[LOCATION], "namespace location")
    summary = access.catalog.update_namespace_properties(ns, set(body.removals), body.updates)
    return {"updated": summary.updated, "removed": summary.removed, "missing": summary.missing}


__all__ = ["page", "require_seen", "router"]
