"""The service's outermost layer: who is asking, how much they send, and a log of every failure.

For each HTTP request, before any handler or body parser runs:

1. It gets a request id (answered as ``X-Request-ID``), so a client's report can be found in the log:
   the one the access log chose (:mod:`tablestore.rest.access_log`), else a new one.
2. Requests under ``/v1/`` (the token endpoint excepted: it is how clients log in) are
   authenticated from their ``Authorization`` header alone. A caller without a valid token gets
   401 before a byte of its body is read, so a stranger's body costs nothing to parse or hold.
   A refused token is answered with RFC 6750's challenge, ``WWW-Authenticate: Bearer
   error="invalid_token", error_description="..."``; a missing one with ``Bearer`` alone. The
   keys of an external OIDC issuer, when they must be fetched, are fetched in a worker thread.
3. A body longer than ``server.max-request-bytes`` is refused with 413: at once when its
   ``Content-Length`` says so, else as soon as the bytes read pass the limit. The handler then
   sees a disconnected client, and the connection is closed after the answer, so the rest of
   the body is never buffered.
4. Every answer of 400 or more is logged once, at WARNING (5xx at ERROR), with the request id,
   method, path, status, the error type of the body and the principal's name. Never a header,
   a query string or a body: they may hold tokens and secrets.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tablestore.errors import NotAuthorizedError
from tablestore.rest.access import Service
from tablestore.rest.errors import error_body

logger = logging.getLogger(__name__)

REQUEST_ID_HEADER = b"x-request-id"
# Paths outside authentication: clients get their token here, and the API's own documents.
PUBLIC_PATHS = frozenset({"/v1/oauth/tokens"})
# How much of an error body is kept to find its type (error bodies are a few hundred bytes).
_ERROR_BODY_PEEK = 4096


class RequestGuard:
    """ASGI middleware; see the module docstring."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        request_id = state.get("request_id") or uuid.uuid4().hex[:16]
        state["request_id"] = request_id
        outcome = _Outcome(request_id, scope["method"], scope["path"])
        limit = self.service.settings.max_request_bytes

        async def answer(status: int, error_type: str, message: str, challenge: str = "Bearer") -> None:
            # Connection: close, so that uvicorn does not read the unread rest of the body.
            headers = {"content-type": "application/json", "connection": "close"}
            if status == 401:
                headers["www-authenticate"] = challenge
            await send_logged({"type": "http.response.start", "status": status,
                               "headers": [(k.encode(), v.encode()) for k, v in headers.items()]})
            await send_logged({"type": "http.response.body",
                               "body": json.dumps(error_body(status, error_type, message)).encode()})

        async def send_logged(message: Message) -> None:
            if outcome.answered_early and not outcome.sending_early:
                return  # the handler's answer to a body that was refused: already answered
            if message["type"] == "http.response.start":
                outcome.status = int(message["status"])
                message = {**message, "headers": [*message.get("headers", []),
                                                  (REQUEST_ID_HEADER, request_id.encode())]}
            elif message["type"] == "http.response.body" and outcome.status >= 400:
                outcome.peek(message.get("body", b""))
            await send(message)

        try:
            principal = await self._authenticate(scope)
        except NotAuthorizedError as e:
            await answer(401, "NotAuthorizedException", str(e), _challenge(scope, str(e)))
            outcome.log()
            return
        outcome.principal = state["principal"] = principal
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await self._refuse(outcome, answer, limit, declared)
            outcome.log()
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
                    await self._refuse(outcome, answer, limit, None)
                    return {"type": "http.disconnect"}
            return message

        try:
            await self.app(scope, limited_receive, send_logged)
        except Exception:
            if outcome.answered_early:
                # The handler failed on the disconnect it was shown: the 413 is the answer.
                outcome.log()
                return
            outcome.status = outcome.status if outcome.status >= 500 else 500
            outcome.error_type = "ServerErrorException"
            outcome.log()
            raise
        outcome.log()

    async def _refuse(self, outcome: _Outcome, answer: Any, limit: int, declared: int | None) -> None:
        size = f"{declared} bytes" if declared is not None else f"more than {limit} bytes"
        outcome.answered_early = outcome.sending_early = True
        try:
            await answer(413, "RequestTooLargeException",
                         f"the request body is {size}; this server accepts at most {limit} "
                         "(server.max-request-bytes)")
        finally:
            outcome.sending_early = False

    async def _authenticate(self, scope: Scope) -> str:
        path: str = scope["path"]
        if not path.startswith("/v1/") or path in PUBLIC_PATHS:
            return "-"
        header = _authorization(scope)
        fetch = self.service.auth.key_fetch(header)
        if fetch is not None:
            await anyio.to_thread.run_sync(fetch)
        return self.service.auth.authenticate(header).name


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


class _Outcome:
    """What is logged of one request."""

    def __init__(self, request_id: str, method: str, path: str) -> None:
        self.request_id = request_id
        self.method = method
        self.path = path
        self.status = 0
        self.error_type = "-"
        self.principal = "-"
        self.answered_early = False
        self.sending_early = False
        self._body = b""

    def peek(self, chunk: bytes) -> None:
        if len(self._body) < _ERROR_BODY_PEEK:
            self._body += chunk[: _ERROR_BODY_PEEK - len(self._body)]

    def _type(self) -> str:
        try:
            body = json.loads(self._body)
        except ValueError:
            return self.error_type
        if isinstance(body, dict):
            error = body.get("error")
            if isinstance(error, dict) and isinstance(error.get("type"), str):
                return str(error["type"])
            if isinstance(error, str):  # OAuth2's error answers
                return error
        return self.error_type

    def log(self) -> None:
        if self.status < 400:
            return
        level = logging.ERROR if self.status >= 500 else logging.WARNING
        logger.log(level, "request %s: %s %s -> %d %s (principal %s)", self.request_id, self.method, self.path,
                   self.status, self._type(), self.principal)


__all__ = ["PUBLIC_PATHS", "REQUEST_ID_HEADER", "RequestGuard"]
