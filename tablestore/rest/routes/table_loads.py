"""Table loads answered in the envelope: ``GET`` and ``HEAD .../namespaces/{namespace}/tables/{table}``
without FastAPI's router, its dependency solving, pydantic or a worker thread.

Every engine loads a table before every query, and a load from memory is little work: one
indexed read of the table's row and the metadata file's JSON, serialized once while cached. In
the profile of the benchmark's loads most of a request's time went around that work instead:
the hand-off to a worker thread and back (``Condition.notify``, 28% of the samples), routing
(``APIRoute.matches`` over every route), dependency solving and query validation. So the
envelope (:mod:`tablestore.rest.envelope`) hands these requests here, after it has
authenticated them, and the same checks and answers as the routes' (:mod:`tablestore.rest.routes.tables`)
are made directly:

- the caller's role (or, under grants, its READ privilege) on the table, before anything about
  the table is looked up (403 either way);
- the table's row read on the event loop (:meth:`ServedSqlCatalog.pointer`), its metadata from
  the cache when the file is local (a stat, as every load makes); a cache miss, a file behind
  the network, a missing row, vended credentials (STS) and grants (their database) are done in a
  worker thread, by the same functions the routes call;
- the same ETag, ``If-None-Match`` (304), ``config`` and ``storage-credentials`` for
  ``X-Iceberg-Access-Delegation``, and the same response objects, so headers and bodies are the
  routes' byte for byte; errors as the app's handlers answer them.

Anything else (``snapshots=refs`` or another query string, a catalog that is not the service's
SQL catalog, an unknown prefix) goes on to the router. ``tests/rest/test_table_loads.py``
compares both answers for each case.
"""

from __future__ import annotations

import re
from functools import partial

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from tablestore.errors import TableStoreError
from tablestore.names import Identifier
from tablestore.rest.access import Access, Service, delegation_mechanisms
from tablestore.rest.auth.authorizer import RoleAuthorizer
from tablestore.rest.auth.grants import Privilege
from tablestore.rest.auth.principals import READ, Principal
from tablestore.rest.errors import error_response, tablestore_error_response, unexpected_error_response
from tablestore.rest.routes.tables import etag_of, table_response
from tablestore.rest.state.served_catalog import ServedSqlCatalog
from tablestore.rest.storage.credentials import DELEGATION_HEADER, VENDED, VendingError
from tablestore.rest.storage.signing import SigningUnavailableError
from tablestore.spec.metadata.table_metadata import TableMetadata

LOAD_ROUTE = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"
_PATH = re.compile(r"/v1/([^/]+)/namespaces/([^/]+)/tables/([^/]+)")
# The query strings answered here: none, or the default snapshot mode spelled out (Java's client
# sends it). The routes ignore unknown parameters; here they send the request to the router.
_QUERIES = {"GET": (b"", b"snapshots=all"), "HEAD": (b"",)}
_DELEGATION = DELEGATION_HEADER.encode("latin-1")
_IF_NONE_MATCH = b"if-none-match"


class Target:
    """A request for the fast path: the served catalog and the path's names."""

    __slots__ = ("catalog", "namespace", "prefix", "table")

    def __init__(self, catalog: ServedSqlCatalog, prefix: str, namespace: str, table: str) -> None:
        self.catalog = catalog
        self.prefix = prefix
        self.namespace = namespace
        self.table = table


def table_target(service: Service, path: str) -> Target | None:
    """The table a path ``/v1/{prefix}/namespaces/{namespace}/tables/{table}`` names, when its
    prefix is one of the service's SQL catalogs (else the router answers it)."""
    match = _PATH.fullmatch(path)
    if match is None:
        return None
    catalog = service.catalogs.get(match.group(1))
    if not isinstance(catalog, ServedSqlCatalog):
        return None
    return Target(catalog, match.group(1), match.group(2), match.group(3))


class TableLoads:
    """The fast path of table loads; see the module docstring."""

    def __init__(self, service: Service) -> None:
        self.service = service

    def target(self, scope: Scope) -> Target | None:
        """The load this request is, if it is one answered here."""
        queries = _QUERIES.get(scope["method"])
        if queries is None or scope.get("query_string", b"") not in queries:
            return None
        return table_target(self.service, scope["path"])

    async def answer(self, scope: Scope, receive: Receive, send: Send, principal: Principal, target: Target) -> None:
        try:
            response = await self._respond(scope, principal, target)
        except (VendingError, SigningUnavailableError) as e:
            # As the app's handler of these: STS down or refusing, the request was fine.
            response = error_response(503, "ServiceUnavailableException", str(e))
        except TableStoreError as e:
            response = tablestore_error_response(e)
        except Exception as e:
            # As the app's handler of the unexpected: logged, answered 500, raised for the envelope.
            await unexpected_error_response(scope, e)(scope, receive, send)
            raise
        await response(scope, receive, send)

    async def _respond(self, scope: Scope, principal: Principal, target: Target) -> Response:
        service, catalog = self.service, target.catalog
        delegation, if_none_match = _headers(scope)
        access = Access(service, target.prefix, catalog, principal, delegation_mechanisms(delegation))
        service.authorizer.check_endpoint(principal, target.prefix, READ)
        ident = access.parse_identifier(target.namespace, target.table)
        if isinstance(service.authorizer, RoleAuthorizer):
            access.require_table(Privilege.READ, ident)
        else:  # grants are read from the catalog's database
            await anyio.to_thread.run_sync(access.require_table, Privilege.READ, ident)
        if scope["method"] == "HEAD":
            return Response(status_code=204 if await catalog.pointer(ident) is not None else 404)
        pointer = await catalog.pointer(ident)
        if pointer and catalog.answers_from_memory(pointer):
            location, metadata = catalog.load_at(ident, pointer)
        else:
            location, metadata = await anyio.to_thread.run_sync(_load, catalog, ident, pointer)
        etag = etag_of(location, "all")
        if if_none_match and (if_none_match.strip() == "*" or etag in [t.strip() for t in if_none_match.split(",")]):
            return Response(status_code=304, headers={"ETag": etag})
        answer = partial(table_response, access, location, metadata, headers={"ETag": etag}, ident=ident)
        if VENDED in access.delegation:
            return await anyio.to_thread.run_sync(answer)  # credentials come from STS
        return answer()


def _load(catalog: ServedSqlCatalog, ident: Identifier, location: str | None) -> tuple[str, TableMetadata]:
    # Without a location the row was missing or empty: the route's load says why (a view of the
    # name, no namespace, no location), or finds the table created meanwhile.
    return catalog.load_at(ident, location) if location else catalog.load_table_metadata(ident)


def _headers(scope: Scope) -> tuple[str | None, str | None]:
    """X-Iceberg-Access-Delegation and If-None-Match, the first of each, as the routes read them."""
    delegation = if_none_match = None
    for key, value in scope["headers"]:
        if key == _DELEGATION and delegation is None:
            delegation = value.decode("latin-1")
        elif key == _IF_NONE_MATCH and if_none_match is None:
            if_none_match = value.decode("latin-1")
    return delegation, if_none_match


__all__ = ["LOAD_ROUTE", "TableLoads", "Target", "table_target"]
