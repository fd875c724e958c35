"""The Iceberg REST catalog service: a FastAPI app over tablestore's SQL catalogs.

``create_app(config)`` serves the catalogs named in the config's ``server:`` section (see
:mod:`tablestore.rest.settings`), each under its name as the REST ``prefix``; ``serve`` runs it
on uvicorn (``tablestore catalog serve``). Handlers are plain functions run in uvicorn's thread
pool, each opening its own database connection from the catalog's pool.
"""

from __future__ import annotations

import base64
import binascii
import gc
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any
from urllib.parse import parse_qs, unquote_plus

import anyio
from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse

from tablestore.catalog.base import Catalog
from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.config import LakehouseConfig
from tablestore.errors import NoSuchCatalogError, NotAuthorizedError
from tablestore.rest.access import Service, declare_bearer_auth, principal_of, service_of
from tablestore.rest.auth.tokens import Authenticator
from tablestore.rest.envelope import Envelope, configure_access_log
from tablestore.rest.errors import error_response, install_error_handlers
from tablestore.rest.routes import (
    changelog_planning,
    credentials,
    functions,
    grants,
    health,
    metrics,
    namespaces,
    planning,
    signing,
    tables,
    views,
)
from tablestore.rest.settings import ServerSettings, server_settings
from tablestore.rest.state.idempotency import IdempotencyMiddleware, IdempotencyStore, Stored, iso_duration
from tablestore.rest.state.replicas import Replica, landed_commit
from tablestore.rest.state.served_catalog import ServedSqlCatalog
from tablestore.rest.storage.credentials import VendingError
from tablestore.rest.storage.signing import SigningUnavailableError

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
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/transactions/commit",
    "GET /v1/{prefix}/namespaces/{namespace}/views",
    "POST /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/views/rename",
    "POST /v1/{prefix}/namespaces/{namespace}/register-view",
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
    sql_catalogs = {name: c for name, c in served.items() if isinstance(c, SqlCatalog)}
    # This process among the other replicas on the same databases (tablestore.rest.state.replicas).
    replica = Replica(c.engine for c in sql_catalogs.values())
    service.auth.revoked = replica.is_revoked
    # Idempotency keys live in each catalog's own database (shared by every instance).
    stores = {
        name: IdempotencyStore(catalog.engine, name, settings.idempotency_lifetime_s, owner=replica.instance_id,
                               alive=partial(replica.alive, catalog.engine))
        for name, catalog in sql_catalogs.items()
    }

    def landed(method: str, path: str, key: str) -> Stored | None:
        found = landed_commit(sql_catalogs, settings.namespace_separator, method, path, key)
        return Stored(*found) if found is not None else None

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        replica.start()
        yield
        replica.stop()
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
    app.state.replica = replica
    app.state.metrics = service_metrics = metrics.ServiceMetrics(service)
    install_error_handlers(app)

    @app.get("/v1/config", tags=["config"])
    def get_config(
        request: Request, warehouse: str | None = Query(default=None)
    ) -> dict[str, Any]:
        principal = principal_of(request)
        svc = service_of(request)
        name = warehouse or svc.settings.catalogs[0]
        catalog = svc.catalogs.get(name)
        if catalog is None:
            raise NoSuchCatalogError(
                f"this server serves no catalog {name!r}; it serves {', '.join(svc.catalogs)}"
            )
        svc.authorizer.check_config(svc, principal, name)
        defaults = svc.client_config(catalog)
        # With external issuers, tokens come from the identity provider: the caller's issuer's
        # token endpoint (else the first issuer's), where Java's, Trino's and pyiceberg's OAuth2
        # clients refresh. A default, not an override: a client's own setting wins.
        token_endpoint = svc.auth.token_endpoint(request.headers.get("authorization"))
        if token_endpoint:
            defaults["oauth2-server-uri"] = token_endpoint
        config: dict[str, Any] = {
            "defaults": defaults,
            "overrides": {"prefix": name, "namespace-separator": svc.settings.namespace_separator_encoded},
            "endpoints": ENDPOINTS,
        }
        if name in stores:
            # The spec: its presence says Idempotency-Key is supported on mutations.
            config["idempotency-key-lifetime"] = iso_duration(settings.idempotency_lifetime_s)
        return config

    @app.post("/v1/oauth/tokens", tags=["oauth"])
    async def get_token(request: Request) -> JSONResponse:
        # Form-encoded as OAuth2 requires (RFC 6749 4.4); parsed here rather than with FastAPI's
        # Form, which would need python-multipart.
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode("utf-8", "replace")).items()}
        grant = form.get("grant_type")
        if grant == TOKEN_EXCHANGE:
            return _exchange(service_of(request).auth, form)
        if grant != "client_credentials":
            return oauth_error(400, "unsupported_grant_type",
                               f"grant_type must be client_credentials or {TOKEN_EXCHANGE}")
        credentials = _client_credentials(request.headers.get("authorization"), form)
        if isinstance(credentials, JSONResponse):
            return credentials
        client_id, client_secret, basic = credentials
        try:
            token, ttl = service_of(request).auth.issue(client_id, client_secret)
        except NotAuthorizedError:
            # RFC 6749 5.2: a client that authenticated with the Authorization header is answered
            # with 401 and a challenge in the scheme it used.
            headers = {"WWW-Authenticate": f'Basic realm="{TOKEN_REALM}"'} if basic else None
            issuers = service_of(request).settings.oidc
            hint = f"; this service's users get their tokens from {issuers[0].issuer}" if issuers else ""
            return oauth_error(401, "invalid_client", f"invalid client credentials{hint}", headers)
        return JSONResponse({
            "access_token": token,
            "token_type": "bearer",
            "expires_in": ttl,
            "issued_token_type": ACCESS_TOKEN_TYPE,
        })

    @app.post("/v1/oauth/revoke", tags=["oauth"])
    async def revoke_token(request: Request) -> JSONResponse:
        # RFC 7009, for any authenticated caller (holding a token is enough to revoke it): unknown
        # and expired tokens are answered 200 too. Every replica refuses it within a heartbeat
        # (tablestore.rest.state.replicas).
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode("utf-8", "replace")).items()}
        token = form.get("token", "")
        if not token:
            return oauth_error(400, "invalid_request", "send the token to revoke as the form field 'token'")
        if settings.token_principal(token) is not None:
            return oauth_error(400, "unsupported_token_type",
                               "static tokens come from the configuration: remove them there, on every replica")
        try:
            claims = service.auth.claims(token)
        except NotAuthorizedError:
            return JSONResponse({})
        await anyio.to_thread.run_sync(replica.revoke, token, int(claims["exp"]) * 1000)
        return JSONResponse({})

    @app.exception_handler(VendingError)
    @app.exception_handler(SigningUnavailableError)
    async def _vending(_request: Request, exc: VendingError | SigningUnavailableError) -> JSONResponse:
        # STS down or refusing: the service cannot give access now, the request was fine.
        return error_response(503, "ServiceUnavailableException", str(exc))

    for module in (namespaces, tables, credentials, signing, views, functions, planning, changelog_planning,
                   grants, health, metrics):
        app.include_router(module.router)
    _document_prefixes(app, list(served))
    app.add_middleware(IdempotencyMiddleware, stores=stores, landed=landed)
    # Added last, so outermost: it authenticates a request once and limits it before anything
    # reads it, and times, counts and logs every request, its own refusals included.
    app.add_middleware(Envelope, routes=app.routes, service=service, metrics=service_metrics)
    return app


TOKEN_REALM = "tablestore"
# RFC 8693: how Java's and Trino's OAuth2 clients refresh a token before it expires.
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"


def oauth_error(status: int, error: str, description: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """An OAuth2 error answer (RFC 6749 5.2): ``error`` and ``error_description``."""
    return JSONResponse({"error": error, "error_description": description}, status_code=status,
                        headers=dict(headers) if headers else None)


def _exchange(auth: Authenticator, form: Mapping[str, str]) -> JSONResponse:
    """RFC 8693 token exchange of one of our access tokens for a fresh one of the same principal.

    Only the refresh form is supported: no actor (delegation) and an access token in, an access
    token out. A subject token that is not ours, or has expired, is ``invalid_grant``.
    """
    subject = form.get("subject_token", "")
    if not subject:
        return oauth_error(400, "invalid_request", "token exchange needs a subject_token (the token to refresh)")
    if form.get("subject_token_type", ACCESS_TOKEN_TYPE) != ACCESS_TOKEN_TYPE:
        return oauth_error(400, "invalid_request", f"subject_token_type must be {ACCESS_TOKEN_TYPE}")
    if form.get("requested_token_type", ACCESS_TOKEN_TYPE) != ACCESS_TOKEN_TYPE:
        return oauth_error(400, "invalid_request", f"requested_token_type must be {ACCESS_TOKEN_TYPE}")
    if form.get("actor_token"):
        return oauth_error(400, "invalid_request",
                           "this server exchanges a token for a fresh one of the same principal; "
                           "delegation (actor_token) is not supported")
    try:
        token, ttl, _principal = auth.exchange(subject)
    except NotAuthorizedError as e:
        return oauth_error(400, "invalid_grant", f"the subject_token cannot be exchanged: {e}")
    return JSONResponse({"access_token": token, "token_type": "bearer", "expires_in": ttl,
                         "issued_token_type": ACCESS_TOKEN_TYPE})


def _client_credentials(authorization: str | None, form: Mapping[str, str]) -> tuple[str, str, bool] | JSONResponse:
    """The client id and secret of a token request, and whether they came by HTTP Basic.

    RFC 6749 2.3.1: servers must accept HTTP Basic client authentication (DuckDB and Java's
    OAuth2 clients use it; pyiceberg puts them in the form body), each part form-urlencoded
    before base64. A client uses one method per request, so a secret both in the header and in
    the body is refused; a client_id in the body must then name the same client.
    """
    scheme, _, value = (authorization or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return form.get("client_id", ""), form.get("client_secret", ""), False
    challenge = {"WWW-Authenticate": f'Basic realm="{TOKEN_REALM}"'}
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        decoded = ""
    if ":" not in decoded:
        return JSONResponse({"error": "invalid_client",
                             "error_description": "the Basic credentials are not base64 of client_id:client_secret"},
                            status_code=401, headers=challenge)
    raw_id, _, raw_secret = decoded.partition(":")
    client_id, client_secret = unquote_plus(raw_id), unquote_plus(raw_secret)
    if "client_secret" in form or form.get("client_id", client_id) != client_id:
        return JSONResponse({"error": "invalid_request",
                             "error_description": "send the client credentials either with HTTP Basic or in "
                                                  "the form body, not both"},
                            status_code=400)
    return client_id, client_secret, True


IDEMPOTENCY_PARAMETER = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "format": "uuid", "minLength": 36, "maxLength": 36},
    "description": "A UUID (the spec asks for UUIDv7) naming this operation: a retry with the same key "
                   "replays the first response (2xx, 4xx) instead of running again.",
}


def _document_prefixes(app: FastAPI, prefixes: list[str]) -> None:
    """Make the OpenAPI document name the served prefixes (an enum of the ``prefix`` parameter),
    declare the bearer tokens and the Idempotency-Key header of mutations."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            declare_bearer_auth(schema)
            # The spec names the parameter plan-id, which cannot be a Python (route) name.
            schema["paths"] = {path.replace("{plan_id}", "{plan-id}"): item
                               for path, item in schema.get("paths", {}).items()}
            for path, item in schema.get("paths", {}).items():
                for method, operation in item.items():
                    if not isinstance(operation, dict):
                        continue
                    for parameter in operation.get("parameters", []):
                        if parameter.get("name") == "plan_id" and parameter.get("in") == "path":
                            parameter["name"] = "plan-id"
                        if parameter.get("name") == "prefix" and parameter.get("in") == "path":
                            parameter["schema"] = {"type": "string", "enum": prefixes}
                    if method in ("post", "delete") and path.startswith("/v1/{prefix}/") \
                            and not path.endswith(("/metrics", "/sign")):
                        operation.setdefault("parameters", []).append(dict(IDEMPOTENCY_PARAMETER))
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


# Allocations between young collections (CPython's default is 700).
GC_YOUNG_THRESHOLD = 20_000


def quiet_garbage_collector() -> None:
    """Keep the cyclic garbage collector's pauses out of the requests of a long-running service.

    The objects made at start-up (FastAPI, pydantic, SQLAlchemy and their modules: most of the
    process's objects) live as long as the process, so they are frozen out of collections. And
    a request allocates hundreds of short-lived objects, so young collections come rarer. Measured
    under the benchmark's loads: full collections of 50,000 to 180,000 objects took 25 to 150 ms
    each, and were the loads' slowest answers (p99); CPython's default of 700 allocations made a
    young collection every few requests.
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


def serve(config: LakehouseConfig, host: str | None = None, port: int | None = None) -> None:
    """Run the service on uvicorn until interrupted."""
    import uvicorn

    settings = server_settings(config, {"host": host, "port": port})
    app = create_app(config, settings)
    quiet_garbage_collector()
    # The service's own records from INFO (start-up, and the request guard's log of failed
    # requests); the libraries' stay at the CLI's WARNING.
    logging.getLogger("tablestore").setLevel(logging.INFO)
    configure_access_log()
    logger.info("serving catalogs %s on http://%s:%d (request bodies up to %d bytes)", ", ".join(settings.catalogs),
                settings.host, settings.port, settings.max_request_bytes)
    # uvicorn's access_log off: its lines carry query strings, which are the client's to keep;
    # tablestore.rest.envelope logs every request without them.
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning", access_log=False)


__all__ = ["ENDPOINTS", "GC_YOUNG_THRESHOLD", "create_app", "quiet_garbage_collector", "serve"]
