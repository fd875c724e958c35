"""View endpoints: list, create, load, exists, replace (commit), drop and rename."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Query, Response

from tablestore.catalog.base import read_view_metadata_file
from tablestore.errors import NoSuchNamespaceError, ViewAlreadyExistsError
from tablestore.names import normalize_location
from tablestore.rest.access import (
    Access,
    ReadAccess,
    WriteAccess,
)
from tablestore.rest.auth.grants import Privilege, table_securable
from tablestore.rest.paths import identifier_of
from tablestore.rest.routes.limits import check_properties
from tablestore.rest.routes.models import CommitViewRequest, CreateViewRequest, RegisterViewRequest, RenameRequest
from tablestore.rest.routes.namespaces import page
from tablestore.rest.routes.tables import parsed, require_rename
from tablestore.rest.routes.view_updates import apply_view_updates, check_view_requirements, new_view_from_request
from tablestore.spec.metadata.view import ViewMetadata

router = APIRouter(prefix="/v1/{prefix}", tags=["views"])


def _result(access: Access, location: str, metadata: ViewMetadata) -> dict[str, Any]:
    return {"metadata-location": location, "metadata": metadata.to_json(),
            "config": access.service.client_config(access.catalog)}


@router.get("/namespaces/{namespace}/views")
def list_views(
    namespace: str,
    access: ReadAccess,
    page_token: str | None = Query(default=None, alias="pageToken"),
    page_size: int | None = Query(default=None, alias="pageSize"),
) -> dict[str, Any]:
    ns = access.parse_namespace(namespace)
    whole = access.require_listing(ns)
    found, token = page(access.visible(access.catalog.list_views(ns), "table", whole), page_token, page_size)
    return {"identifiers": [{"namespace": list(i[:-1]), "name": i[-1]} for i in found], "next-page-token": token}


@router.post("/namespaces/{namespace}/views")
def create_view(namespace: str, body: CreateViewRequest, access: WriteAccess) -> dict[str, Any]:
    check_properties(body.properties, "view properties")
    catalog = access.catalog
    ident = access.parse_identifier(namespace, body.name, "view")
    access.require_namespace(Privilege.CREATE, ident[:-1])
    if not catalog.namespace_exists(ident[:-1]):
        raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(ident[:-1])}")
    if catalog.table_exists(ident):
        raise ViewAlreadyExistsError(f"Table with same name already exists: {'.'.join(ident)}")
    if catalog.view_exists(ident):
        raise ViewAlreadyExistsError(f"View already exists: {'.'.join(ident)}")
    location = normalize_location(body.location) if body.location else catalog.default_table_location(ident)
    access.check_location(location, "view location")
    metadata = parsed("view", lambda: new_view_from_request(
        location, body.schema_, body.view_version, body.properties, time.time_ns() // 1_000_000
    ))
    metadata_location = catalog.commit_view(ident, None, metadata)  # ViewAlreadyExistsError (409) if taken meanwhile
    return _result(access, metadata_location, metadata)


@router.post("/namespaces/{namespace}/register-view")
def register_view(namespace: str, body: RegisterViewRequest, access: WriteAccess) -> dict[str, Any]:
    """Add a view by an existing view metadata file (written by another catalog, or kept from a
    dropped view), as register does for tables."""
    catalog = access.catalog
    ident = access.parse_identifier(namespace, body.name, "view")
    access.require_namespace(Privilege.CREATE, ident[:-1])
    location = normalize_location(body.metadata_location)
    access.check_location(location, "metadata location")
    metadata = read_view_metadata_file(catalog.io, location)
    # Checked before registering: a view whose files live elsewhere must not enter the catalog.
    access.check_location(metadata.location, "view location")
    if not catalog.namespace_exists(ident[:-1]):
        raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(ident[:-1])}")
    if catalog.table_exists(ident):
        raise ViewAlreadyExistsError(f"Table with same name already exists: {'.'.join(ident)}")
    catalog.register_view(ident, location)  # ViewAlreadyExistsError (409) if the name is taken
    return _result(access, location, metadata)


@router.get("/namespaces/{namespace}/views/{view}")
def load_view(namespace: str, view: str, access: ReadAccess) -> dict[str, Any]:
    ident = access.parse_identifier(namespace, view, "view")
    access.require_table(Privilege.READ, ident)
    location, metadata = access.catalog.load_view_metadata(ident)
    return _result(access, location, metadata)


@router.head("/namespaces/{namespace}/views/{view}", status_code=204)
def view_exists(namespace: str, view: str, access: ReadAccess) -> Response:
    ident = access.parse_identifier(namespace, view, "view")
    access.require_table(Privilege.READ, ident)
    exists = access.catalog.view_exists(ident)
    return Response(status_code=204 if exists else 404)


@router.post("/namespaces/{namespace}/views/{view}")
def replace_view(namespace: str, view: str, body: CommitViewRequest, access: WriteAccess) -> Any:
    catalog = access.catalog
    ident = access.parse_identifier(namespace, view, "view")
    access.require_table(Privilege.WRITE, ident)
    base_location, base = catalog.load_view_metadata(ident)
    check_view_requirements(body.requirements, base)
    metadata = parsed("view update", lambda: apply_view_updates(base, body.updates, time.time_ns() // 1_000_000))
    if metadata is base:
        return _result(access, base_location, base)
    access.check_location(metadata.location, "view location")
    # Compare-and-swap: CommitConflictError (409) if another replace won meanwhile.
    location = catalog.commit_view(ident, base_location, metadata)
    return _result(access, location, read_view_metadata_file(catalog.io, location))


@router.delete("/namespaces/{namespace}/views/{view}", status_code=204)
def drop_view(namespace: str, view: str, access: WriteAccess) -> Response:
    ident = access.parse_identifier(namespace, view, "view")
    access.require_table(Privilege.DROP, ident)
    access.catalog.drop_view(ident)
    access.forget(table_securable(ident))
    return Response(status_code=204)


@router.post("/views/rename", status_code=204)
def rename_view(body: RenameRequest, access: WriteAccess) -> Response:
    source = identifier_of(body.source.namespace, body.source.name, "view")
    destination = identifier_of(body.destination.namespace, body.destination.name, "view")
    require_rename(access, source, destination)
    access.catalog.rename_view(source, destination)
    access.moved(source, destination)
    return Response(status_code=204)


__all__ = ["router"]
