"""tablestore's extension endpoints for catalog functions (not in the Iceberg REST spec).

``/v1/{prefix}/namespaces/{namespace}/functions[/{name}]``: list, create, load, drop. Listed in
``/v1/config`` ``endpoints`` so a client can tell whether a server has them.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response

from tablestore.catalog.base import FunctionDef
from tablestore.rest.access import ReadAccess, WriteAccess
from tablestore.rest.auth.grants import Privilege, table_securable
from tablestore.rest.routes.limits import check_properties
from tablestore.rest.routes.models import CreateFunctionRequest
from tablestore.rest.routes.namespaces import page

router = APIRouter(prefix="/v1/{prefix}", tags=["functions (tablestore extension)"])


def function_json(function: FunctionDef) -> dict[str, Any]:
    return {
        "identifier": {"namespace": list(function.identifier[:-1]), "name": function.identifier[-1]},
        "class-name": function.class_name,
        "return-type": function.return_type,
        "properties": dict(function.properties),
        "created-ms": function.created_ms,
    }


@router.get("/namespaces/{namespace}/functions")
def list_functions(
    namespace: str,
    access: ReadAccess,
    page_token: str | None = Query(default=None, alias="pageToken"),
    page_size: int | None = Query(default=None, alias="pageSize"),
) -> dict[str, Any]:
    ns = access.parse_namespace(namespace)
    whole = access.require_listing(ns)
    found, token = page(access.visible(access.catalog.list_functions(ns), "table", whole), page_token, page_size)
    return {"identifiers": [{"namespace": list(i[:-1]), "name": i[-1]} for i in found], "next-page-token": token}


@router.post("/namespaces/{namespace}/functions")
def create_function(namespace: str, body: CreateFunctionRequest, access: WriteAccess) -> dict[str, Any]:
    check_properties(body.properties, "function properties")
    ident = access.parse_identifier(namespace, body.name, "function")
    access.require_namespace(Privilege.CREATE, ident[:-1])
    if body.replace:
        access.require_table(Privilege.DROP, ident)
    function = access.catalog.create_function(ident, body.class_name, body.return_type, body.replace,
                                              body.properties)
    return function_json(function)


@router.get("/namespaces/{namespace}/functions/{name}")
def load_function(namespace: str, name: str, access: ReadAccess) -> dict[str, Any]:
    ident = access.parse_identifier(namespace, name, "function")
    access.require_table(Privilege.READ, ident)
    return function_json(access.catalog.load_function(ident))


@router.delete("/namespaces/{namespace}/functions/{name}", status_code=204)
def drop_function(namespace: str, name: str, access: WriteAccess) -> Response:
    ident = access.parse_identifier(namespace, name, "function")
    access.require_table(Privilege.DROP, ident)
    access.catalog.drop_function(ident)
    access.forget(table_securable(ident))
    return Response(status_code=204)


__all__ = ["function_json", "router"]
