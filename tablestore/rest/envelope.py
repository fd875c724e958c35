"""The service's one outermost middleware: every request enters and leaves through it.

For each HTTP request, before any handler or body parser runs:

1. It gets a request id, answered as ``X-Request-ID``: the client's own if it sent a sane one
   (1 to 128 letters, digits and ``._:+/=-``), else a new one.
2. It is authenticated once, from its ``Authorization`` header alone, and the
   :class:`~tablestore.rest.settings.Principal` is put on the request's state
   (``scope["state"]["principal"]``), where the idempotency store, the endpoints' access checks,
   the access log and ``/metrics`` read it; nothing verifies the token again. Requests under
   ``/v1/`` are authenticated (the token endpoint excepted: it is how clients log in), and
   ``/metrics`` unless ``server.metrics-auth: none``. A caller without a valid token gets 401
   before a byte of its body is read. A refused token is answered with RFC 6750's challenge,
   ``WWW-Authenticate: Bearer error="invalid_token", error_description="..."``; a missing one
   with ``Bearer`` alone. The keys of an external OIDC issuer, when they must be fetched, are
   fetched in a worker thread.
3. A body longer than ``server.max-request-bytes`` is refused with 413: at once when its
   ``Content-Length`` says so, else as soon as the bytes read pass the limit. The handler then
   sees a disconnected client, and the connection is closed after the answer.
4. A table load (``GET``/``HEAD .../tables/{table}``) is answered by
   :mod:`tablestore.rest.routes.table_loads`, and a table commit (``POST .../tables/{table}``
   without an ``Idempotency-Key``) by :mod:`tablestore.rest.routes.table_commits`, without the
   router; every other request goes on to the app.
5. When it has been answered: ``tablestore_http_requests_total`` and
   ``tablestore_http_request_duration_seconds`` by route template (:mod:`tablestore.rest.routes.metrics`)
   and idempotent replays are counted; every answer of 400 or more is logged once in text on
   ``tablestore.rest.requests`` (WARNING, 5xx at ERROR) with the request id, method, path, status,
   error type and principal; and one JSON line goes to the ``tablestore.access`` logger at INFO
   (``server.access-log``; under ``serve`` the line is kept in memory and a thread of its own
   writes the lines to stderr every 50 ms, so no request waits on the write or wakes a thread)::

    {"ts":"2025-05-04T10:11:12.345Z","request_id":"5d4c7242587841df","principal":"etl","method":"GET",
     "route":"/v1/{prefix}/namespaces/{namespace}/tables/{table}","status":404,"latency_ms":3.1,
     "error":"NoSuchTableException"}

   ``error`` only on 4xx and 5xx; ``replayed: true`` on an Idempotency-Key replay. The access
   line names the route template, never the path; neither line holds a query string, a header
   or a body, so no token, secret, credential or signed URL can reach the logs.
"""

from __future__ import annotations

import collections
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import anyio
from starlette.routing import BaseRoute, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tablestore.errors import NotAuthorizedError
from tablestore.rest.access import Service
from tablestore.rest.auth.principals import Principal
from tablestore.rest.errors import error_body
from tablestore.rest.routes.metrics import UNMATCHED, ServiceMetrics
from tablestore.rest.routes.table_commits import COMMIT_ROUTE, TableCommits
from tablestore.rest.routes.table_loads import LOAD_ROUTE, TableLoads
from tablestore.rest.state.stats import IDEMPOTENT_REPLAYS

logger = logging.getLogger("tablestore.rest.requests")
access_logger = logging.getLogger("tablestore.access")

REQUEST_ID_HEADER = b"x-request-id"
# Paths outside authentication: clients get their token here.
PUBLIC_PATHS = frozenset({"/v1/oauth/tokens"})
METRICS_PATH = "/metrics"
# How much of an error body is kept to find its type (error bodies are a few hundred bytes).
_ERROR_BODY_PEEK = 4096
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:+/=-]{1,128}")
_PREFIX = re.compile(r"^/v1/([^/]+)/")


def request_id_of(scope: Scope) -> str:
    """The client's X-Request-ID if it is a sane id, else a new one."""
    for key, value in scope.get("headers", []):
        if key == REQUEST_ID_HEADER:
            text = value.decode("latin-1").strip()
            if _REQUEST_ID.fullmatch(text):
                return text
            break
    return uuid.uuid4().hex[:16]


class RouteTable:
    """The route templates of an app, matched against a request's path and method.

    For the answers made before routing (401, 413, idempotent replays), which have no route in
    their scope; a routed request's route is read from its scope. Built on first use, when every
    route is in place.
    """

    def __init__(self, routes: Sequence[BaseRoute]) -> None:
        self._routes = routes
        self._table: list[tuple[re.Pattern[str], frozenset[str], str]] | None = None

    def _build(self) -> list[tuple[re.Pattern[str], frozenset[str], str]]:
        try:
            from fastapi.routing import iter_route_contexts
        except ImportError:  # a FastAPI whose included routers are copied in: plain routes
            pairs = [(getattr(r, "path", None), getattr(r, "methods", None)) for r in self._routes]
        else:
            pairs = [(c.path, getattr(c.original_route, "methods", None)) for c in iter_route_contexts(self._routes)]
        table = []
        for path, methods in pairs:
            if isinstance(path, str):
                regex, _, _ = compile_path(path)
                table.append((regex, frozenset(methods or ()), path.replace("{plan_id}", "{plan-id}")))
        return table

    def template(self, method: str, path: str) -> str:
        """The template of the route serving ``method`` on ``path`` (of another method's route on
        that path: a 405), or ``unmatched``."""
        if self._table is None:
            self._table = self._build()
        other = None
        for regex, methods, template in self._table:
            if regex.match(path):
                if not methods or method in methods:
                    return template
                other = other or template
        return other or UNMATCHED


class _Outcome:
    """What is recorded of one request."""

    def __init__(self, request_id: str, method: str, path: str) -> None:
        self.request_id = request_id
        self.method = method
        self.path = path
        self.status = 0
        self.error_type = "-"
        self.principal = "-"
        self.replayed = False
        self.route: str | None = None  # the template of a request answered without the router
        self.answered_early = False
        self.sending_early = False
        self.body = b""

    def peek(self, chunk: bytes) -> None:
        if len(self.body) < _ERROR_BODY_PEEK:
            self.body += chunk[: _ERROR_BODY_PEEK - len(self.body)]

    def error(self) -> str:
        """The error type of an error answer's body (the REST error model's, or OAuth2's)."""
        try:
            body = json.loads(self.body)
        except ValueError:
            return self.error_type
        if isinstance(body, dict):
            error = body.get("error")
            if isinstance(error, dict) and isinstance(error.get("type"), str):
                return str(error["type"])
            if isinstance(error, str):
                return error
        return self.error_type


Answer = Callable[[int, str, str, str], Awaitable[None]]


class Envelope:
    """ASGI middleware; see the module docstring."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute], service: Service, metrics: ServiceMetrics) -> None:
        self.app = app
        self.routes = RouteTable(routes)
        self.service = service
        self.metrics = metrics
        self.loads = TableLoads(service)
        self.commits = TableCommits(service)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        state = scope.setdefault("state", {})
        request_id = state["request_id"] = request_id_of(scope)
        outcome = _Outcome(request_id, scope["method"], scope["path"])
        self.metrics.in_progress.inc()
        try:
            await self._guarded(scope, receive, send, outcome)
        finally:
            self.metrics.in_progress.dec()
            if outcome.status == 0:
                outcome.status = 500  # failed before answering; the client got nothing or the server's 500
            self._record(scope, outcome, time.perf_counter() - started)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send, outcome: _Outcome) -> None:
        request_id = outcome.request_id.encode()
        limit = self.service.settings.max_request_bytes

        async def answer(status: int, error_type: str, message: str, challenge: str = "Bearer") -> None:
            # Connection: close, so that uvicorn does not read the unread rest of the body.
            headers = {"content-type": "application/json", "connection": "close"}
            if status == 401:
                headers["www-authenticate"] = challenge
            await observed({"type": "http.response.start", "status": status,
                            "headers": [(k.encode(), v.encode()) for k, v in headers.items()]})
            await observed({"type": "http.response.body",
                            "body": json.dumps(error_body(status, error_type, message)).encode()})

        async def observed(message: Message) -> None:
            if outcome.answered_early and not outcome.sending_early:
                return  # the handler's answer to a body that was refused: already answered
            if message["type"] == "http.response.start":
                outcome.status = int(message["status"])
                headers = message.get("headers", [])
                outcome.replayed = any(k.lower() == b"idempotent-replayed" for k, _ in headers)
                message = {**message, "headers": [*headers, (REQUEST_ID_HEADER, request_id)]}
            elif message["type"] == "http.response.body" and outcome.status >= 400:
                outcome.peek(message.get("body", b""))
            await send(message)

        try:
            principal = await self._authenticate(scope)
        except NotAuthorizedError as e:
            await answer(401, "NotAuthorizedException", str(e), _challenge(scope, str(e)))
            return
        if principal is not None:
            scope["state"]["principal"] = principal
            outcome.principal = principal.name
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _refuse(outcome, answer, limit, declared)
            return

        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            if outcome.answered_early:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    await _refuse(outcome, answer, limit, None)
                    return {"type": "http.disconnect"}
            return message

        # Table loads and commits, the most frequent requests of every engine and writer, are
        # answered without the router.
        load = self.loads.target(scope) if principal is not None else None
        commit = self.commits.target(scope) if principal is not None and load is None else None
        try:
            if load is not None and principal is not None:
                outcome.route = LOAD_ROUTE
                await self.loads.answer(scope, limited_receive, observed, principal, load)
            elif commit is not None and principal is not None:
                outcome.route = COMMIT_ROUTE
                await self.commits.answer(scope, limited_receive, observed, principal, commit, self.app)
            else:
                await self.app(scope, limited_receive, observed)
        except Exception:
            if outcome.answered_early:
                return  # the handler failed on the disconnect it was shown: the 413 is the answer
            outcome.status = outcome.status if outcome.status >= 500 else 500
            outcome.error_type = "ServerErrorException"
            raise

    async def _authenticate(self, scope: Scope) -> Principal | None:
        """The caller, verified once; None on a path that needs no token."""
        path: str = scope["path"]
        if path.startswith("/v1/"):
            if path in PUBLIC_PATHS:
                return None
        elif path != METRICS_PATH or not self.service.settings.metrics_auth_required:
            return None
        header = _authorization(scope)
        fetch = self.service.auth.key_fetch(header)
        if fetch is not None:
            await anyio.to_thread.run_sync(fetch)
        return self.service.auth.authenticate(header)

    def _record(self, scope: Scope, outcome: _Outcome, elapsed: float) -> None:
        method = outcome.method
        routed = getattr(scope.get("route"), "path", None)  # set by the router when it routed the request
        route = routed.replace("{plan_id}", "{plan-id}") if isinstance(routed, str) \
            else outcome.route or self.routes.template(method, outcome.path)
        self.metrics.observe(method, route, outcome.status, elapsed)
        if outcome.replayed:
            prefix = _PREFIX.match(outcome.path)
            if prefix and prefix.group(1) in self.service.catalogs:
                self.service.stats.inc(IDEMPOTENT_REPLAYS, prefix.group(1))
        error = outcome.error() if outcome.status >= 400 else None
        if error is not None:
            level = logging.ERROR if outcome.status >= 500 else logging.WARNING
            logger.log(level, "request %s: %s %s -> %d %s (principal %s)", outcome.request_id, method,
                       outcome.path, outcome.status, error, outcome.principal)
        if not self.service.settings.access_log or not access_logger.isEnabledFor(logging.INFO):
            return
        line: dict[str, Any] = {
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "request_id": outcome.request_id,
            "principal": outcome.principal,
            "method": method,
            "route": route,
            "status": outcome.status,
            "latency_ms": round(elapsed * 1000, 3),
        }
        if error is not None:
            line["error"] = error
        if outcome.replayed:
            line["replayed"] = True
        text = json.dumps(line, separators=(",", ":"))
        handlers = access_logger.handlers
        if (len(handlers) == 1 and isinstance(handlers[0], BatchedLines) and handlers[0].verbatim
                and not handlers[0].filters and not access_logger.filters and not access_logger.propagate):
            # The line as the logger would write it, without a LogRecord (its creation, the
            # caller's frame looked up, the handler's lock: a few percent of a load's CPU).
            handlers[0].take(text)
        else:
            access_logger.info("%s", text)


async def _refuse(outcome: _Outcome, answer: Answer, limit: int, declared: int | None) -> None:
    size = f"{declared} bytes" if declared is not None else f"more than {limit} bytes"
    outcome.answered_early = outcome.sending_early = True
    try:
        await answer(413, "RequestTooLargeException",
                     f"the request body is {size}; this server accepts at most {limit} (server.max-request-bytes)",
                     "Bearer")
    finally:
        outcome.sending_early = False


def _authorization(scope: Scope) -> str | None:
    return next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"authorization"), None)


def _challenge(scope: Scope, message: str) -> str:
    """RFC 6750 3.1: no error code when the request had no credentials, ``invalid_token`` when
    the token it had was refused."""
    header = (_authorization(scope) or "").strip()
    if not header.lower().startswith("bearer ") or not header[7:].strip():
        return "Bearer"
    text = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "'" if c == '"' else " " for c in message)
    return f'Bearer error="invalid_token", error_description="{text}"'


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers", []):
        if key == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


# The access log's format: each line its message alone (a JSON object).
MESSAGE_ONLY = logging.Formatter("%(message)s")


class BatchedLines(logging.Handler):
    """A handler that keeps formatted lines in memory and writes them to a stream from a thread
    of its own, every ``interval`` seconds, all at once.

    A queue's handler wakes its writer thread for every line: in the profile of loads that
    hand-off was a third of the service's CPU (``QueueHandler.enqueue``), as each wake-up makes
    the two threads trade the GIL. Appending to a deque wakes nobody; the writer comes by on its
    own, so a line reaches the stream within ``interval`` of its request.
    """

    def __init__(self, stream: Any, interval: float = 0.05) -> None:
        super().__init__()
        self.stream = stream
        self.interval = interval
        self._lines: collections.deque[str] = collections.deque()
        self._thread = threading.Thread(target=self._run, name="access-log", daemon=True)
        self._thread.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._lines.append(self.format(record))
        except Exception:
            self.handleError(record)

    @property
    def verbatim(self) -> bool:
        """Whether a record is written as its message alone (so :meth:`take` may skip the record)."""
        return self.formatter is MESSAGE_ONLY and self.level <= logging.INFO

    def take(self, line: str) -> None:
        """Write ``line`` as a record of that message would be, without making the record."""
        self._lines.append(line)

    def flush(self) -> None:
        lines = []
        while True:
            try:
                lines.append(self._lines.popleft())
            except IndexError:  # empty (another flush may have taken the last line)
                break
        if lines:
            self.stream.write("\n".join(lines) + "\n")
            self.stream.flush()

    def _run(self) -> None:
        while True:
            time.sleep(self.interval)
            self.flush()

    def close(self) -> None:
        # The writer goes on: logging's configuration by uvicorn closes every handler there is
        # (dictConfig), and this one is still attached to its logger after that.
        self.flush()
        super().close()


def configure_access_log() -> None:
    """Send the access log to stderr as bare JSON lines (not through the CLI's text format),
    written by a thread of its own (:class:`BatchedLines`): a request leaves its line in memory
    and goes on."""
    import atexit
    import sys

    if any(isinstance(h, BatchedLines) for h in access_logger.handlers):
        return
    handler = BatchedLines(sys.stderr)
    handler.setFormatter(MESSAGE_ONLY)
    atexit.register(handler.close)  # what is kept is written before the process ends
    access_logger.addHandler(handler)
    access_logger.setLevel(logging.INFO)
    access_logger.propagate = False


__all__ = ["MESSAGE_ONLY", "METRICS_PATH", "PUBLIC_PATHS", "REQUEST_ID_HEADER", "BatchedLines", "Envelope",
           "RouteTable",
           "configure_access_log", "request_id_of"]
