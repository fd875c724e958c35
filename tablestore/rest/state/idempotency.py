"""The REST spec's ``Idempotency-Key``: a retried mutation replays its first response.

A client that sends a commit, create, drop or rename and loses the response (a dropped
connection, a timeout) cannot tell whether it landed. With an ``Idempotency-Key`` header (a
UUID, the spec asks for UUIDv7) it sends the same request again with the same key, and the
service answers the first response instead of running the operation twice.

The keys live in the served catalog's own database (table ``tablestore_idempotency_keys``,
next to ``iceberg_tables``), so a restarted service, or a second instance behind the same
database, replays too. Per the spec, 2xx and 4xx responses are final and replayed; a 5xx is
not stored, so a retry runs the operation again. A key comes with a fingerprint of the request
(method, path, query, body and the caller): the same key on a different request is refused
with 422, and a retry that arrives while the first request still runs waits for it.

Keys are kept for the advertised lifetime (``idempotency-key-lifetime`` in ``/v1/config``)
plus a grace period, then purged.

Each key records the replica that runs its request (``owner``, see
:mod:`tablestore.rest.state.replicas`). A key still running whose replica stopped beating its heartbeat
(it was killed) is abandoned: a retry, on any replica, takes it over at once. The response is
recorded just after the operation, in its own database transaction, so a replica killed between
the two (a window of one UPDATE) leaves the operation done and its response unrecorded. For a
table commit the retry that takes the key over finds out: the metadata files of a request with
a key are named after it, and if one of them is among the table's metadata files the commit
landed and its response is answered (``landed``). Other operations run again: a multi-table
transaction or a create then answers 409, as a double apply is refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import anyio
from sqlalchemy import (
    Engine,
    delete,
    inspect,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from tablestore.names import metadata_file_uuid
from tablestore.rest.errors import error_body
from tablestore.rest.service_tables import IDEMPOTENCY_KEYS, create_service_table
from tablestore.rest.state.replicas import keyed_uuid

logger = logging.getLogger(__name__)

HEADER = "idempotency-key"
REPLAYED_HEADER = "idempotent-replayed"
DEFAULT_LIFETIME_S = 1800
GRACE_S = 300  # kept beyond the advertised lifetime, for clock skew and slow retries
# A key still marked running after this long belonged to a request that died with its
# service: a retry may run the operation again.
ABANDONED_AFTER_S = 120
WAIT_FOR_FIRST_S = 20.0  # how long a retry waits for the first request still running
PURGE_EVERY_S = 60.0

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_K = IDEMPOTENCY_KEYS.c

# Mutations under /v1/{prefix}/: everything POSTed or DELETEd but metrics reports.
_MUTATION = re.compile(r"^/v1/(?P<prefix>[^/]+)/.+$")
# Scan planning changes nothing: a retried plan (or fetch, or cancel) just runs again, so its
# key is accepted and not recorded (a plan's response can be megabytes).
_NOT_RECORDED = re.compile(r"/(metrics|plan|tasks|plan/[^/]+)$")


def iso_duration(seconds: int) -> str:
    """``seconds`` as an ISO-8601 duration (1800 -> PT30M), as the spec's config field wants."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return "PT" + (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "") + \
        (f"{secs}S" if secs or seconds == 0 else "")


@dataclass(frozen=True)
class Stored:
    """A finished request's response, as first sent."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


@dataclass(frozen=True)
class Claimed:
    """This request holds the key: run it, then ``finish`` or ``release``. ``taken_over``: from
    a request whose replica died, which may have done the operation."""

    taken_over: bool = False


class Mismatch:
    """The key was used for a different request."""


class Running:
    """The first request with this key is still running."""


Outcome = Stored | Claimed | Mismatch | Running


class IdempotencyStore:
    """The keys of one served catalog, in its database."""

    def __init__(self, engine: Engine, catalog: str, lifetime_s: int = DEFAULT_LIFETIME_S,
                 owner: str | None = None, alive: Callable[[str], bool] | None = None) -> None:
        self.engine = engine
        self.catalog = catalog
        self.lifetime_s = lifetime_s
        self.owner = owner  # this replica's id
        self.alive = alive  # whether a replica of that id still beats
        self._last_purge = 0.0
        self._purge_lock = threading.Lock()
        create_service_table(engine, IDEMPOTENCY_KEYS)
        if "owner" not in {c["name"] for c in inspect(engine).get_columns(IDEMPOTENCY_KEYS.name)}:
            # A table made before replicas recorded themselves: the column is added (once).
            try:
                with engine.begin() as conn:
                    conn.exec_driver_sql(f"ALTER TABLE {IDEMPOTENCY_KEYS.name} ADD COLUMN owner VARCHAR(36)")
            except SQLAlchemyError:
                if "owner" not in {c["name"] for c in inspect(engine).get_columns(IDEMPOTENCY_KEYS.name)}:
                    raise

    def _where(self, key: str) -> list[Any]:
        return [_K.catalog_name == self.catalog, _K.idempotency_key == key]

    def claim(self, key: str, fingerprint: str) -> Outcome:
        """Take ``key`` for a request, or say what became of the request that took it."""
        self._purge_now_and_then()
        for _ in range(3):
            now_ms = int(time.time() * 1000)
            try:
                with self.engine.begin() as conn:
                    conn.execute(IDEMPOTENCY_KEYS.insert().values(
                        catalog_name=self.catalog, idempotency_key=key, fingerprint=fingerprint, created_ms=now_ms,
                        owner=self.owner))
                return Claimed()
            except IntegrityError:
                pass  # the key is known: see below
            with self.engine.connect() as conn:
                row = conn.execute(
                    select(_K.fingerprint, _K.created_ms, _K.status, _K.headers, _K.body, _K.owner)
                    .where(*self._where(key))
                ).first()
            if row is None:
                continue  # purged or released meanwhile: claim it afresh
            expired = row.created_ms < now_ms - (self.lifetime_s + GRACE_S) * 1000
            abandoned = row.status is None and (
                row.created_ms < now_ms - ABANDONED_AFTER_S * 1000
                or (row.owner is not None and row.owner != self.owner and self.alive is not None
                    and row.fingerprint == fingerprint and not self.alive(row.owner)))
            if expired or abandoned:
                # Compare-and-swap on created_ms: of two retries, one takes it over.
                with self.engine.begin() as conn:
                    taken = conn.execute(
                        update(IDEMPOTENCY_KEYS)
                        .where(*self._where(key), _K.created_ms == row.created_ms)
                        .values(fingerprint=fingerprint, created_ms=now_ms, status=None, headers=None, body=None,
                                owner=self.owner)
                    ).rowcount == 1
                if taken:
                    if abandoned and not expired:
                        logger.warning("idempotency key of a request that did not finish taken over by a retry")
                    return Claimed(taken_over=abandoned and not expired)
                continue
            if row.fingerprint != fingerprint:
                return Mismatch()
            if row.status is None:
                return Running()
            headers = [(str(k), str(v)) for k, v in json.loads(row.headers or "[]")]
            return Stored(int(row.status), headers, bytes(row.body or b""))
        return Running()

    def finish(self, key: str, response: Stored) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                update(IDEMPOTENCY_KEYS).where(*self._where(key)).values(
                    status=response.status, headers=json.dumps(response.headers), body=response.body)
            )

    def release(self, key: str) -> None:
        """Forget a key whose request ended without a final response (5xx, an exception)."""
        with self.engine.begin() as conn:
            conn.execute(delete(IDEMPOTENCY_KEYS).where(*self._where(key), _K.status.is_(None)))

    def _purge_now_and_then(self) -> None:
        now = time.monotonic()
        with self._purge_lock:
            if now - self._last_purge < PURGE_EVERY_S:
                return
            self._last_purge = now
        cutoff = int(time.time() * 1000) - (self.lifetime_s + GRACE_S) * 1000
        with self.engine.begin() as conn:
            conn.execute(delete(IDEMPOTENCY_KEYS).where(_K.catalog_name == self.catalog, _K.created_ms < cutoff))


def fingerprint(method: str, path: str, query: bytes, body: bytes, principal: str) -> str:
    digest = hashlib.sha256()
    for part in (method.encode(), path.encode("utf-8", "surrogateescape"), query, principal.encode(), body):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def valid_key(key: str) -> bool:
    if len(key) != 36:
        return False
    try:
        uuid.UUID(key)
    except ValueError:
        return False
    return True


async def _send_json(send: Send, status: int, error_type: str, message: str) -> None:
    body = json.dumps(error_body(status, error_type, message)).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class IdempotencyMiddleware:
    """ASGI middleware: mutations with an ``Idempotency-Key`` run once, retries replay.

    ``stores`` maps a served prefix to its store. The caller is the principal the envelope
    authenticated (:mod:`tablestore.rest.envelope`), read from the request's state.
    """

    def __init__(self, app: ASGIApp, stores: dict[str, IdempotencyStore],
                 landed: Callable[[str, str, str], Stored | None] | None = None) -> None:
        self.app = app
        self.stores = stores
        # (method, path, key) -> the response of an operation a dead replica did (or None)
        self.landed = landed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "DELETE"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        key = headers.get(HEADER)
        path: str = scope["path"]
        match = _MUTATION.match(path)
        store = self.stores.get(match.group("prefix")) if match else None
        if key is None or store is None or _NOT_RECORDED.search(path):
            await self.app(scope, receive, send)
            return
        found = scope.get("state", {}).get("principal")
        if found is None:
            await self.app(scope, receive, send)  # not authenticated: the endpoint answers
            return
        principal = str(found.name)
        key = key.strip()
        if not valid_key(key):
            await _send_json(send, 400, "BadRequestException",
                             "the Idempotency-Key header must be a UUID in its 36-character form (the spec "
                             "asks for a UUIDv7, e.g. 017f22e2-79b0-7cc3-98c4-dc0c0c07398f); send a new one")
            return
        key = key.lower()
        body = await _read_body(receive)
        print_ = fingerprint(scope["method"], path, scope.get("query_string", b""), body, principal)
        outcome = await anyio.to_thread.run_sync(store.claim, key, print_)
        deadline = time.monotonic() + WAIT_FOR_FIRST_S
        while isinstance(outcome, Running) and time.monotonic() < deadline:
            await anyio.sleep(0.1)
            outcome = await anyio.to_thread.run_sync(store.claim, key, print_)
        if isinstance(outcome, Claimed) and outcome.taken_over and self.landed is not None:
            landed = await anyio.to_thread.run_sync(self.landed, scope["method"], path, key)
            if landed is not None:
                logger.warning("a retry found the operation of a replica that died done: its response is answered")
                await anyio.to_thread.run_sync(store.finish, key, landed)
                outcome = landed
        if isinstance(outcome, Stored):
            await send({"type": "http.response.start", "status": outcome.status,
                        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in outcome.headers]
                        + [(REPLAYED_HEADER.encode(), b"true")]})
            await send({"type": "http.response.body", "body": outcome.body})
            return
        if isinstance(outcome, Mismatch):
            await _send_json(send, 422, "UnprocessableEntityException",
                             "this Idempotency-Key was already used for a different request; a key names one "
                             "operation: send a new key for a new operation")
            return
        if isinstance(outcome, Running):
            # 504 is what clients read as "commit state unknown": they reload, not clean up.
            await _send_json(send, 504, "CommitStateUnknownException",
                             "the first request with this Idempotency-Key is still running; retry with the "
                             "same key later")
            return
        await self._run(scope, body, send, store, key)

    async def _run(self, scope: Scope, body: bytes, send: Send, store: IdempotencyStore, key: str) -> None:
        start: Message = {}
        chunks: list[bytes] = []

        async def replay_body() -> Message:
            return {"type": "http.request", "body": body, "more_body": False}

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        # The metadata files this request writes are named after its key (tablestore.rest.state.replicas).
        named = metadata_file_uuid.set(keyed_uuid(key)) if self.landed is not None else None
        try:
            await self.app(scope, replay_body, capture)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(store.release, key)
            raise
        finally:
            if named is not None:
                metadata_file_uuid.reset(named)
        status = int(start.get("status", 500))
        raw_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in start.get("headers", [])]
        response = Stored(status, raw_headers, b"".join(chunks))
        # Recorded before it is sent: the client may be gone, and its retry must find it.
        with anyio.CancelScope(shield=True):
            if status < 500:
                await anyio.to_thread.run_sync(store.finish, key, response)
            else:
                await anyio.to_thread.run_sync(store.release, key)
        await send({"type": "http.response.start", "status": status, "headers": start.get("headers", [])})
        await send({"type": "http.response.body", "body": response.body})


async def _read_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts)


__all__ = ["DEFAULT_LIFETIME_S", "IdempotencyMiddleware", "IdempotencyStore", "iso_duration"]
