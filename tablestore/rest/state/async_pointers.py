"""The pointer lookup of a table load, made on the event loop without blocking it.

A load's only database work is one indexed read of the table's row (its metadata location). Run
on a worker thread, as a synchronous SQLAlchemy call must be, it costs a thread hand-off each way
(the largest own cost of a load in the profile: ``Condition.notify``, 28% of the service's
samples), and under the GIL the two threads take turns. Run inline on the event loop, it would
stop every other request for the database's round trip, and for as long as an unreachable
database makes a connection attempt wait.

So the statement goes over psycopg2's asynchronous connections (``async_=1``), whose sockets the
event loop watches (``add_reader``/``add_writer``) like any other: the loop serves other requests
while PostgreSQL answers, and no thread is involved. The connections are kept in a small pool of
their own (asynchronous connections are always in autocommit, which a single read needs anyway:
it sees its own READ COMMITTED snapshot, as the synchronous lookup does). A pooled connection
that PostgreSQL closed meanwhile fails its statement; the read is then made once more on a new
connection, as the synchronous lookup does.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

import psycopg2
import psycopg2.extensions
from sqlalchemy import Engine
from sqlalchemy.sql import Select

# Idle connections kept; more concurrent loads than this open connections that are closed after.
MAX_IDLE = 8
STATEMENT_NAME = "tablestore_table_pointer"


class AsyncPointerReader:
    """One read statement (a table's row) over asynchronous psycopg2 connections."""

    def __init__(self, engine: Engine, statement: Select[Any], max_idle: int = MAX_IDLE) -> None:
        args, kwargs = engine.dialect.create_connect_args(engine.url)
        self._connect_args: tuple[list[Any], dict[str, Any]] = (list(args), dict(kwargs))
        compiled = statement.compile(dialect=engine.dialect)
        text = str(compiled)
        # Prepared once per connection: PostgreSQL then skips parsing and planning the statement
        # on each load, which is part of the answer's wait.
        self._names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", text)))
        numbered = re.sub(r"%\((\w+)\)s", lambda m: f"${self._names.index(m.group(1)) + 1}", text)
        self._prepare = f"PREPARE {STATEMENT_NAME} AS {numbered}"
        self._execute = f"EXECUTE {STATEMENT_NAME} ({', '.join('%s' for _ in self._names)})"
        # The statement's own constants (a type filter's values), beside the parameters given.
        self._defaults = {k: v for k, v in compiled.params.items() if v is not None}
        self._idle: list[Any] = []
        self._max_idle = max_idle

    async def fetch_value(self, params: Mapping[str, Any]) -> tuple[bool, Any]:
        """(whether a row was found, its first column)."""
        given = {**self._defaults, **params}
        values = [given[name] for name in self._names]
        for attempt in range(2):
            pooled = bool(self._idle)
            conn = self._idle.pop() if pooled else await self._connect()
            try:
                cursor = conn.cursor()
                cursor.execute(self._execute, values)
                await _ready(conn)
                row = cursor.fetchone()
                cursor.close()
            except (psycopg2.OperationalError, psycopg2.InterfaceError):
                conn.close()
                if attempt or not pooled:
                    raise
                continue  # a pooled connection the server had closed: once more on a new one
            except BaseException:
                conn.close()  # cancelled or failed mid-statement: its state is unknown
                raise
            if len(self._idle) < self._max_idle:
                self._idle.append(conn)
            else:
                conn.close()
            return (row is not None), (row[0] if row is not None else None)
        raise AssertionError("unreachable")

    async def _connect(self) -> Any:
        args, kwargs = self._connect_args
        conn = psycopg2.connect(*args, **kwargs, async_=1)
        try:
            await _ready(conn)
            cursor = conn.cursor()
            cursor.execute(self._prepare)
            await _ready(conn)
            cursor.close()
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()


async def _ready(conn: Any) -> None:
    """Wait on the event loop until ``conn``'s pending work is done (psycopg2's poll protocol)."""
    loop = asyncio.get_running_loop()
    fd = conn.fileno()
    while True:
        state = conn.poll()
        if state == psycopg2.extensions.POLL_OK:
            return
        waiter: asyncio.Future[None] = loop.create_future()
        if state == psycopg2.extensions.POLL_READ:
            loop.add_reader(fd, _wake, waiter)
            try:
                await waiter
            finally:
                loop.remove_reader(fd)
        elif state == psycopg2.extensions.POLL_WRITE:
            loop.add_writer(fd, _wake, waiter)
            try:
                await waiter
            finally:
                loop.remove_writer(fd)
        else:
            raise psycopg2.OperationalError(f"unexpected poll state {state}")


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


__all__ = ["MAX_IDLE", "STATEMENT_NAME", "AsyncPointerReader"]
