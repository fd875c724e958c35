"""Table commits answered in the envelope: ``POST .../namespaces/{namespace}/tables/{table}``
without FastAPI's router, its dependency solving and its request validation.

A commit is the most frequent mutation of every writer, and the service's own work for one is
small: check the requirements, apply the updates, write the next metadata file and swap the
row. In the profile of 16 writers committing to 16 tables, FastAPI's share of the service's
CPU (matching the path against every route, solving the dependencies, validating the body
through a ``TypeAdapter``, the exception middleware) was a fifth of the samples holding the GIL.
So the envelope (:mod:`tablestore.rest.envelope`) hands plain commits here, after it has
authenticated them and while it limits their bodies, and the route's work is done directly:

- the write role is checked first (403), as the route's dependency does;
- the body is read and parsed as the route parses it (``json.loads``, then the same pydantic
  model); a body that does not parse, or comes with a content type other than JSON, goes on to
  the router with its bytes, which answers it as it always has (400 naming the problem);
- the route's own functions (:mod:`tablestore.rest.routes.tables`) parse and check the changes
  and answer, and the commit is made on the event loop when it can be
  (:meth:`ServedSqlCatalog.commit_on_loop`: no other commit to the table under way, its state
  known, PostgreSQL), else in one worker thread as the route makes it (under grants, whose
  checks read the database, the whole route runs there); its answer or error is the one the
  route's handlers make.

A commit with an ``Idempotency-Key``, a query string, or to a catalog that is not the
service's SQL catalog goes to the router (and through the idempotency store).
``tests/rest/test_table_commits.py`` compares the answers of both ways.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import pydantic
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from tablestore.errors import TableStoreError
from tablestore.names import Identifier
from tablestore.rest.access import Access, Service, delegation_mechanisms
from tablestore.rest.auth.authorizer import RoleAuthorizer
from tablestore.rest.auth.principals import WRITE, Principal
from tablestore.rest.errors import tablestore_error_response, unexpected_error_response
from tablestore.rest.routes.models import CommitTableRequest
from tablestore.rest.routes.table_loads import Target, table_target
from tablestore.rest.routes.tables import commit_request, commit_response, table_response
from tablestore.rest.state.idempotency import HEADER as IDEMPOTENCY_HEADER
from tablestore.rest.state.served_catalog import ServedSqlCatalog
from tablestore.rest.storage.credentials import DELEGATION_HEADER
from tablestore.spec.metadata.update_models import TableRequirement, TableUpdate

COMMIT_ROUTE = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"
_IDEMPOTENCY_KEY = IDEMPOTENCY_HEADER.encode("latin-1")
_DELEGATION = DELEGATION_HEADER.encode("latin-1")
_CONTENT_TYPE = b"content-type"
_JSON = "application/json"
_UNREAD = object()

ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class TableCommits:
    """The fast path of table commits; see the module docstring."""

    def __init__(self, service: Service) -> None:
        self.service = service

    def target(self, scope: Scope) -> Target | None:
        """The commit this request is, if it is one answered here."""
        if scope["method"] != "POST" or scope.get("query_string", b""):
            return None
        if any(key == _IDEMPOTENCY_KEY for key, _ in scope["headers"]):
            return None
        return table_target(self.service, scope["path"])

    async def answer(self, scope: Scope, receive: Receive, send: Send, principal: Principal, target: Target,
                     router: ASGIApp) -> None:
        """Answer the commit, or hand it to ``router`` (the app) when its body is not one the
        route would take: the router then reads the same bytes and answers as it always has."""
        body = await _read_body(receive)
        if body is None:
            return  # the client left, or the envelope refused the body (413): nothing to answer
        # In the route's order: the body's JSON (400), the write role (403), the body's model (400).
        document = _json(scope, body)
        if document is _UNREAD:
            await router(scope, _replay(body, receive), send)
            return
        try:
            self.service.authorizer.check_endpoint(principal, target.prefix, WRITE)
        except TableStoreError as e:
            await tablestore_error_response(e)(scope, receive, send)
            return
        try:
            request = CommitTableRequest.model_validate(document)
        except pydantic.ValidationError:
            await router(scope, _replay(body, receive), send)
            return
        access = Access(self.service, target.prefix, target.catalog, principal,
                        delegation_mechanisms(_header(scope, _DELEGATION)))
        try:
            response = await self._commit(access, target, request)
        except TableStoreError as e:
            response = tablestore_error_response(e)
        except Exception as e:
            # As the app's handler of the unexpected: logged, answered 500, raised for the envelope.
            # It deletes nothing: a commit's files are the catalog's to keep or remove.
            await unexpected_error_response(scope, e)(scope, receive, send)
            raise
        await response(scope, receive, send)


    async def _commit(self, access: Access, target: Target, request: CommitTableRequest) -> Response:
        if not isinstance(self.service.authorizer, RoleAuthorizer):
            # Grants are read from the catalog's database: the whole route in a worker thread.
            return await anyio.to_thread.run_sync(
                partial(commit_response, access, target.namespace, target.table, request))
        # The role was checked; parsing the changes and checking their locations is work in memory.
        ident, requirements, updates = commit_request(access, target.namespace, target.table, request)
        catalog = target.catalog
        committed = await catalog.commit_on_loop(ident, requirements, updates)
        if committed is None:
            return await anyio.to_thread.run_sync(_commit_in_thread, access, catalog, ident, requirements, updates)
        return table_response(access, *committed, with_config=False)


def _commit_in_thread(access: Access, catalog: ServedSqlCatalog, ident: Identifier,
                      requirements: list[TableRequirement], updates: list[TableUpdate]) -> Response:
    # Answered at once, as the route does: the answer's JSON comes from the metadata cache, which
    # drops a table's file when the table moves on, and an answer made after another commit had
    # moved it (on the event loop, while this one came back) put the superseded file back into
    # the cache, where nothing dropped it again (the benchmark's one-table cases filled the cache
    # with them and pushed the loads' files out).
    return table_response(access, *catalog.commit_table(ident, requirements, updates), with_config=False)


def _header(scope: Scope, name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), None)


def _json(scope: Scope, body: bytes) -> Any:
    """The body's JSON document, read as the route reads it (``json.loads``, with a JSON content
    type); ``_UNREAD`` for any body the route would refuse or read otherwise."""
    content_type = _header(scope, _CONTENT_TYPE)
    if content_type is None or content_type.partition(";")[0].strip().lower() != _JSON:
        return _UNREAD
    try:
        return json.loads(body)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
        return _UNREAD


async def _read_body(receive: Receive) -> bytes | None:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives ``body`` once, then what the connection says (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


__all__ = ["COMMIT_ROUTE", "TableCommits"]
