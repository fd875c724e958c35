"""What replicas of the service share through the catalog database: who is alive, which tokens
were revoked, and which commits of a dead replica landed.

Several ``tablestore catalog serve`` processes may serve one catalog database behind a load
balancer. Everything a request leaves for a later one is in that database: idempotency keys
(:mod:`tablestore.rest.state.idempotency`), paged scan plans (:mod:`tablestore.rest.state.plan_store`) and
the tables themselves; the caches of :mod:`tablestore.rest.state.served_catalog` hold only immutable
metadata files and a hint that every commit checks with a compare-and-swap. This module adds:

* **Heartbeats.** Each replica has an id and a row in ``tablestore_service_instances``, whose
  ``heartbeat_ms`` it refreshes every ``HEARTBEAT_S``. An idempotency key still running whose
  replica has not beaten for ``DEAD_AFTER_S`` was abandoned by a replica that died: a retry on
  another replica takes it over at once rather than after ``ABANDONED_AFTER_S``.
* **Commits that landed before their replica died.** The metadata files a request with an
  ``Idempotency-Key`` writes are named after the key (the first 96 bits of their uuid are the
  key's, :func:`keyed_uuid`). A retry that takes over an abandoned key of a table commit looks
  for such a file among the table's current and previous metadata files: if one is there, the
  commit landed and the retry answers it (as the first request would have) instead of running
  it again, which the commit's requirements would refuse with 409, a "failed" commit that had
  in fact been applied.
* **Token revocation.** ``POST /v1/oauth/revoke`` (RFC 7009) records a hash of an issued token
  in ``tablestore_revoked_tokens`` until the token expires; every replica reloads the list with
  its heartbeat, so a revoked token is refused everywhere within ``HEARTBEAT_S``.

Clocks: heartbeats and expiries are compared across replicas in Unix milliseconds, so the
replicas' clocks must agree to within a few seconds (NTP).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from urllib.parse import unquote

from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from tablestore.catalog.base import read_metadata_file
from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.errors import TableStoreError
from tablestore.rest.paths import parse_identifier
from tablestore.rest.service_tables import INSTANCES, REVOKED_TOKENS, create_service_table

logger = logging.getLogger(__name__)

HEARTBEAT_S = 2.0
DEAD_AFTER_S = 10.0  # a replica silent this long is taken for dead

_I = INSTANCES.c
_R = REVOKED_TOKENS.c
_KEY_NAMESPACE = uuid.UUID("6f0c3a52-43d5-4d6b-a0b2-9a7e3c1d2f10")


def _now_ms() -> int:
    return int(time.time() * 1000)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# -- metadata files named after an idempotency key ---------------------------------------------


def _key_prefix(key: str) -> str:
    return uuid.uuid5(_KEY_NAMESPACE, key.lower()).hex[:24]


def keyed_uuid(key: str) -> Callable[[], uuid.UUID]:
    """Uuids for the metadata files of the request with Idempotency-Key ``key``: 96 bits of the
    key's, 32 random (each attempt of a commit writes a file of its own)."""
    prefix = _key_prefix(key)
    return lambda: uuid.UUID(hex=prefix + secrets.token_hex(4))


def written_for(key: str, locations: Iterable[str]) -> str | None:
    """The first of ``locations`` whose file was written by a request with ``key``."""
    prefix = _key_prefix(key)
    for location in locations:
        name = location.rsplit("/", 1)[-1]
        _, _, rest = name.partition("-")
        if rest.replace("-", "")[:24] == prefix:
            return location
    return None


_TABLE_PATH = re.compile(r"^/v1/(?P<prefix>[^/]+)/namespaces/(?P<namespace>[^/]+)/tables/(?P<table>[^/]+)$")


def landed_commit(catalogs: dict[str, SqlCatalog], separator: str, method: str, path: str,
                  key: str) -> tuple[int, list[tuple[str, str]], bytes] | None:
    """The response of a table commit with ``key`` that landed although its replica died before
    recording it: (status, headers, body) as the commit endpoint answers, or None."""
    match = _TABLE_PATH.match(path)
    if method != "POST" or match is None:
        return None
    catalog = catalogs.get(unquote(match.group("prefix")))
    if catalog is None:
        return None
    try:
        ident = parse_identifier(unquote(match.group("namespace")), unquote(match.group("table")),
                                 separator=separator)
        current, metadata = catalog.load_table_metadata(ident)
        found = written_for(key, [current, *reversed([e.metadata_file for e in metadata.metadata_log])])
        if found is None:
            return None
        landed = metadata if found == current else read_metadata_file(catalog.io, found)
    except (TableStoreError, OSError):
        return None
    body = json.dumps({"metadata-location": found, "metadata": landed.to_json()}, separators=(",", ":"))
    return 200, [("content-type", "application/json")], body.encode("utf-8")


# -- the replica -------------------------------------------------------------------------------


class Replica:
    """This service process among the others on the same catalog databases."""

    def __init__(self, engines: Iterable[Engine]) -> None:
        self.instance_id = str(uuid.uuid4())
        unique: dict[str, Engine] = {}
        for engine in engines:
            unique.setdefault(engine.url.render_as_string(hide_password=False), engine)
        self.engines = list(unique.values())
        self._revoked: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        started = _now_ms()
        for engine in self.engines:
            create_service_table(engine, INSTANCES)
            create_service_table(engine, REVOKED_TOKENS)
            with engine.begin() as conn:
                conn.execute(insert(INSTANCES).values(instance_id=self.instance_id, started_ms=started,
                                                      heartbeat_ms=started))
        self._reload()

    # -- liveness -------------------------------------------------------------------------------
    def alive(self, engine: Engine, instance_id: str) -> bool:
        """Whether the replica ``instance_id`` has beaten lately (this one always has)."""
        if instance_id == self.instance_id:
            return True
        with engine.connect() as conn:
            beat = conn.execute(select(_I.heartbeat_ms).where(_I.instance_id == instance_id)).scalar()
        return beat is not None and beat >= _now_ms() - DEAD_AFTER_S * 1000

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._beat, name="tablestore-heartbeat", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop beating and leave: keys this replica still holds are free for retries at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for engine in self.engines:
            try:
                with engine.begin() as conn:
                    conn.execute(delete(INSTANCES).where(_I.instance_id == self.instance_id))
            except SQLAlchemyError:
                logger.warning("could not remove this replica's heartbeat row", exc_info=True)

    def _beat(self) -> None:
        beats = 0
        while not self._stop.wait(HEARTBEAT_S):
            beats += 1
            now = _now_ms()
            for engine in self.engines:
                try:
                    with engine.begin() as conn:
                        conn.execute(update(INSTANCES).where(_I.instance_id == self.instance_id)
                                     .values(heartbeat_ms=now))
                        if beats % 30 == 0:  # now and then: the rows of long-dead replicas, expired tokens
                            conn.execute(delete(INSTANCES).where(_I.heartbeat_ms < now - 3600_000))
                            conn.execute(delete(REVOKED_TOKENS).where(_R.expires_ms < now))
                except SQLAlchemyError:
                    logger.warning("heartbeat of this replica failed", exc_info=True)
            self._reload()

    # -- revocation -----------------------------------------------------------------------------
    def _reload(self) -> None:
        now = _now_ms()
        revoked: set[str] = set()
        for engine in self.engines:
            try:
                with engine.connect() as conn:
                    revoked.update(conn.execute(select(_R.token_hash).where(_R.expires_ms >= now)).scalars())
            except SQLAlchemyError:
                logger.warning("could not read the revoked tokens", exc_info=True)
                return  # keep what was known
        if self.engines:
            self._revoked = revoked

    def revoke(self, token: str, expires_ms: int) -> None:
        """Refuse ``token`` on every replica (here at once, elsewhere within ``HEARTBEAT_S``)."""
        digest = token_hash(token)
        for engine in self.engines:
            try:
                with engine.begin() as conn:
                    conn.execute(insert(REVOKED_TOKENS).values(token_hash=digest, expires_ms=expires_ms))
            except IntegrityError:
                pass  # revoked already
        self._revoked = self._revoked | {digest}

    def is_revoked(self, token: str) -> bool:
        return bool(self._revoked) and token_hash(token) in self._revoked


__all__ = ["DEAD_AFTER_S", "HEARTBEAT_S", "Replica", "keyed_uuid", "landed_commit",
           "token_hash", "written_for"]
