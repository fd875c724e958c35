"""The Iceberg REST catalog service: a FastAPI app over tablestore's SQL catalogs.

``create_app(config)`` serves the catalogs named in the config's ``server:`` section (see
:mod:`tablestore.rest.settings`), each under its name as the REST ``prefix``; ``serve`` runs it
on uvicorn (``tablestore catalog serve``). Handlers are plain functions run in uvicorn's thread
pool, each opening its own database connection from the catalog's pool.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse

from tablestore.catalog import Catalog
from tablestore.config import LakehouseConfig
from tablestore.errors import NoSuchCatalogError, NotAuthorizedError
from tablestore.rest import functions, namespaces, tables, views
from tablestore.rest.access import NAMESPACE_SEPARATOR, Service, authenticate, declare_bearer_auth, service_of
from tablestore.rest.errors import install_error_handlers
from tablestore.rest.served_catalog import ServedSqlCatalog
from tablestore.rest.settings import READ, ServerSettings, server_settings

logger = logging.getLogger(__name__)

# What this server implements, as the spec's ConfigResponse ``endpoints`` lists them.
ENDPOINTS = [
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/transactions/commit",
    "GET /v1/{prefix}/namespaces/{namespace}/views",
    "POST /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/views/rename",
    "GET /v1/{prefix}/namespaces/{namespace}/functions",
    "POST /v1/{prefix}/namespaces/{namespace}/functions",
    "GET /v1/{prefix}/namespaces/{namespace}/functions/{name}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/functions/{name}",
]


def create_app(
    config: LakehouseConfig,
    settings: ServerSettings | None = None,
    catalogs: Mapping[str, Catalog] | None = None,
) -> FastAPI:
    """The REST catalog app for ``config`` (``settings`` default to its ``server:`` section;
    ``catalogs`` to new catalog objects of the served catalogs, closed when the app stops)."""
    settings = settings or server_settings(config)
    served: dict[str, Catalog] = dict(catalogs) if catalogs is not None else {
        n: ServedSqlCatalog(n, **config.catalog(n).properties) for n in settings.catalogs
    }
    service = Service(settings, dict(served))

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        if catalogs is None:
            service.close()

    app = FastAPI(
        title="tablestore REST catalog",
        version="1.0",
        description="The Apache Iceberg REST catalog protocol over tablestore's SQL catalog, "
        "plus a functions extension.",
        lifespan=lifespan,
    )
    app.state.service = service
    install_error_handlers(app)

    @app.get("/v1/config", tags=["config"])
    def get_config(
        request: Request, warehouse: str | None = Query(default=None)
    ) -> dict[str, Any]:
        principal = authenticate(request)
        svc = service_of(request)
        name = warehouse or svc.settings.catalogs[0]
        catalog = svc.catalogs.get(name)
        if catalog is None:
            raise NoSuchCatalogError(
                f"this server serves no catalog {name!r}; it serves {', '.join(svc.catalogs)}"
            )
        svc.auth.authorize(principal, name, READ)
        return {
            "defaults": svc.client_config(catalog),
            "overrides": {"prefix": name, "namespace-separator": "%1F"},
            "endpoints": ENDPOINTS,
        }

    @app.post("/v1/oauth/tokens", tags=["oauth"])
    async def get_token(request: Request) -> JSONResponse:
        # Form-encoded as OAuth2 requires (RFC 6749 4.4); parsed here rather than with FastAPI's
        # Form, which would need python-multipart.
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode("utf-8", "replace")).items()}
        if form.get("grant_type") != "client_credentials":
            return JSONResponse({"error": "unsupported_grant_type",
                                 "error_description": "only grant_type=client_credentials is supported"},
                                status_code=400)
        try:
            token, ttl = service_of(request).auth.issue(form.get("client_id", ""), form.get("client_secret", ""))
        except NotAuthorizedError:
            return JSONResponse({"error": "invalid_client", "error_description": "invalid client credentials"},
                                status_code=401)
        return JSONResponse({
            "access_token": token,
            "token_type": "bearer",
            "expires_in": ttl,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        })

    for module in (namespaces, tables, views, functions):
        app.include_router(module.router)
    _document_prefixes(app, list(served))
    return app


def _document_prefixes(app: FastAPI, prefixes: list[str]) -> None:
    """Make the OpenAPI document name the served prefixes (an enum of the ``prefix`` parameter)
    and declare the bearer tokens."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            declare_bearer_auth(schema)
            for item in schema.get("paths", {}).values():
                for operation in item.values():
                    for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                        if parameter.get("name") == "prefix" and parameter.get("in") == "path":
                            parameter["schema"] = {"type": "string", "enum": prefixes}
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def serve(config: LakehouseConfig, host: str | None = None, port: int | None = None) -> None:
    """Run the service on uvicorn until interrupted."""
    import uvicorn

    settings = server_settings(config, {"host": host, "port": port})
    app = create_app(config, settings)
    logger.warning("serving catalogs %s on http://%s:%d", ", ".join(settings.catalogs), settings.host,
                   settings.port)
    # access_log off: request lines are harmless, but query strings are the client's to keep.
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning", access_log=False)


__all__ = ["ENDPOINTS", "NAMESPACE_SEPARATOR", "create_app", "serve"]
