"""``GET /healthz`` (the process answers) and ``GET /readyz`` (and its catalog databases do).

Both are open, as load balancers and orchestrators probe without tokens, and say nothing but
``ok``/``ready`` or ``unavailable``: a stranger learns neither the served catalogs nor their
databases. Which catalog failed, and why, goes to the log (once per change of state).

``/readyz`` asks each served catalog's database for one row of ``iceberg_tables`` (a cheap
query on the table every load reads): through the catalog's own connection pool on a database
server (PostgreSQL), and through a new read-only connection on a SQLite file, since a pooled
connection to a file that was deleted or moved keeps reading the old file.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import Engine, select

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.catalog.sql_tables import ICEBERG_TABLES
from tablestore.rest.access import service_of

logger = logging.getLogger(__name__)

router = APIRouter(tags=["operations"])
SQLITE_TIMEOUT_S = 2.0

_down: set[str] = set()
_down_lock = threading.Lock()


def _probe(engine: Engine) -> None:
    """One cheap query on the catalog database; raises if it cannot be answered."""
    url = engine.url
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:") \
            and not str(url.database).startswith("file:"):
        uri = f"file:{quote(str(url.database))}?mode=ro"
        file = sqlite3.connect(uri, uri=True, timeout=SQLITE_TIMEOUT_S)
        try:
            file.execute(f"SELECT 1 FROM {ICEBERG_TABLES.name} LIMIT 1").fetchall()
        finally:
            file.close()
        return
    with engine.connect() as connection:
        connection.execute(select(ICEBERG_TABLES.c.catalog_name).limit(1)).fetchall()


def _note(catalog: str, error: Exception | None) -> None:
    """Log a catalog database that stopped or started answering (not every probe)."""
    with _down_lock:
        was_down = catalog in _down
        if error is None:
            _down.discard(catalog)
        else:
            _down.add(catalog)
    if error is not None and not was_down:
        message = str(error).splitlines()[0][:300] if str(error) else ""
        logger.error("not ready: the database of catalog %s does not answer (%s: %s)", catalog,
                     type(error).__name__, message)
    elif error is None and was_down:
        logger.warning("ready: the database of catalog %s answers again", catalog)


@router.get("/healthz", include_in_schema=False)
async def healthz() -> JSONResponse:
    return JSONResponse({"status": "ok"})


@router.get("/readyz", include_in_schema=False)
def readyz(request: Request) -> JSONResponse:
    ready = True
    for name, catalog in service_of(request).catalogs.items():
        if not isinstance(catalog, SqlCatalog):
            continue
        try:
            _probe(catalog.engine)
        except Exception as e:  # any failure to answer is "not ready"
            ready = False
            _note(name, e)
        else:
            _note(name, None)
    if ready:
        return JSONResponse({"status": "ready"})
    return JSONResponse({"status": "unavailable"}, status_code=503)


__all__ = ["router"]
