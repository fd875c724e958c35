"""One JSON line per request, and the request metrics: the service's outermost middleware.

For every HTTP request, refused ones included (the request guard's 401 and 413, the
idempotency store's replays, the router's 404 and 405, a handler's 500):

- the request id: the client's ``X-Request-ID`` if it sent a sane one (1 to 128 letters, digits
  and ``._:+/=-``), else a new one; the request guard answers it as ``X-Request-ID``;
- ``tablestore_http_requests_total`` and ``tablestore_http_request_duration_seconds`` by route
  template (:mod:`tablestore.rest.metrics`), and idempotent replays;
- a line on the ``tablestore.access`` logger at INFO (``server.access-log``; ``serve`` sends it
  to stderr alone, as bare JSON)::

    {"ts":"2025-05-04T10:11:12.345Z","request_id":"5d4c7242587841df","principal":"etl","method":"GET",
     "route":"/v1/{prefix}/namespaces/{namespace}/tables/{table}","status":404,"latency_ms":3.1,
     "error":"NoSuchTableException"}

  ``error`` (the error type of the answer's body) only on 4xx and 5xx; ``replayed: true`` on an
  Idempotency-Key replay. The principal is the name of the token's owner (``-`` when none was
  checked or it failed). Nothing a client sent is logged but the method and the request id: no
  path (names could be anything; the route template says which endpoint), no query string, no
  header, no body, so no token, secret, credential or signed URL can reach the log.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from starlette.routing import BaseRoute, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tablestore.rest.access import Service
from tablestore.rest.metrics import UNMATCHED, ServiceMetrics
from tablestore.rest.stats import IDEMPOTENT_REPLAYS

logger = logging.getLogger("tablestore.access")

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:+/=-]{1,128}")
_ERROR_BODY_PEEK = 4096
_PREFIX = re.compile(r"^/v1/([^/]+)/")


def request_id_of(scope: Scope) -> str:
    """The client's X-Request-ID if it is a sane id, else a new one."""
    for key, value in scope.get("headers", []):
        if key == b"x-request-id":
            text = value.decode("latin-1").strip()
            if _REQUEST_ID.fullmatch(text):
                return text
            break
    return uuid.uuid4().hex[:16]


class RouteTable:
    """The route templates of an app, matched against a request's path and method.

    For the answers made before routing (the request guard's 401 and 413, the idempotency
    store's replays and refusals), which have no route in their scope; a routed request's route
    is read from its scope. Built on first use, when every route is in place.
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


def _error_type(body: bytes) -> str | None:
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and isinstance(error.get("type"), str):
            return str(error["type"])
        if isinstance(error, str):  # OAuth2's error answers
            return error
    return None


class AccessLog:
    """ASGI middleware; see the module docstring."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute], service: Service, metrics: ServiceMetrics) -> None:
        self.app = app
        self.routes = RouteTable(routes)
        self.service = service
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        state = scope.setdefault("state", {})
        state["request_id"] = request_id_of(scope)
        status = 0
        replayed = False
        body = b""

        async def observed(message: Message) -> None:
            nonlocal status, replayed, body
            if message["type"] == "http.response.start":
                status = int(message["status"])
                replayed = any(k.lower() == b"idempotent-replayed" for k, _ in message.get("headers", []))
            elif message["type"] == "http.response.body" and status >= 400 and len(body) < _ERROR_BODY_PEEK:
                body += message.get("body", b"")[: _ERROR_BODY_PEEK - len(body)]
            await send(message)

        self.metrics.in_progress.inc()
        try:
            await self.app(scope, receive, observed)
        finally:
            self.metrics.in_progress.dec()
            if status == 0:
                status = 500  # failed before answering; the client got nothing or the server's 500
            elapsed = time.perf_counter() - started
            self._record(scope, state, status, replayed, body, elapsed)

    def _record(self, scope: Scope, state: dict[str, Any], status: int, replayed: bool, body: bytes,
                elapsed: float) -> None:
        method = str(scope["method"])
        routed = getattr(scope.get("route"), "path", None)  # set by the router when it routed the request
        route = routed.replace("{plan_id}", "{plan-id}") if isinstance(routed, str) \
            else self.routes.template(method, str(scope.get("path", "")))
        self.metrics.observe(method, route, status, elapsed)
        if replayed:
            prefix = _PREFIX.match(str(scope.get("path", "")))
            if prefix and prefix.group(1) in self.service.catalogs:
                self.service.stats.inc(IDEMPOTENT_REPLAYS, prefix.group(1))
        if not self.service.settings.access_log or not logger.isEnabledFor(logging.INFO):
            return
        line: dict[str, Any] = {
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "request_id": state.get("request_id"),
            "principal": str(state.get("principal", "-")),
            "method": method,
            "route": route,
            "status": status,
            "latency_ms": round(elapsed * 1000, 3),
        }
        if status >= 400:
            line["error"] = _error_type(body) or "-"
        if replayed:
            line["replayed"] = True
        logger.info("%s", json.dumps(line, separators=(",", ":")))


def configure_access_log() -> None:
    """Send the access log to stderr as bare JSON lines (not through the CLI's text format)."""
    import sys

    if any(getattr(h, "_tablestore_access", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler._tablestore_access = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


__all__ = ["AccessLog", "RouteTable", "configure_access_log", "request_id_of"]
