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

A table commit's compare-and-swap goes the same way (:meth:`AsyncStatement.write`), when the
commit can be made on the event loop (:meth:`ServedSqlCatalog.commit_on_loop`): one statement
in autocommit, whose failures say whether it can have reached the database. A write is never
repeated here: a pooled connection is looked at before it is used (anything readable on an idle
one is the server's goodbye), and a connection that fails under the statement leaves its outcome
unknown.
"""

from __future__ import annotations

import asyncio
import re
import select
from collections.abc import Mapping
from typing import Any

import psycopg2
import psycopg2.extensions
from sqlalchemy import Engine, Update
from sqlalchemy.sql import Select

# Idle connections kept; more concurrent loads than this open connections that are closed after.
MAX_IDLE = 8
STATEMENT_NAME = "tablestore_table_pointer"


class StatementNotSentError(Exception):
    """A write that cannot have reached the database: no connection to send it on."""


class StatementOutcomeUnknownError(Exception):
    """A write whose connection failed after it was sent: it may have been applied."""


class StatementRefusedError(Exception):
    """A write the database answered with an error: nothing was applied."""


class AsyncStatement:
    """One statement over asynchronous psycopg2 connections: a read (a table's row) or a write."""

    def __init__(self, engine: Engine, statement: Select[Any] | Update, max_idle: int = MAX_IDLE,
                 name: str = STATEMENT_NAME, parameter_type: str | None = None) -> None:
        args, kwargs = engine.dialect.create_connect_args(engine.url)
        self._connect_args: tuple[list[Any], dict[str, Any]] = (list(args), dict(kwargs))
        compiled = statement.compile(dialect=engine.dialect)
        text = str(compiled)
        # Prepared once per connection: PostgreSQL then skips parsing and planning the statement
        # on each load, which is part of the answer's wait.
        self._names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", text)))
        numbered = re.sub(r"%\((\w+)\)s", lambda m: f"${self._names.index(m.group(1)) + 1}", text)
        # A parameter used twice (the swap's new location: the value set, and compared) needs its
        # type named, or PostgreSQL refuses the statement as ambiguous.
        types = f" ({', '.join(parameter_type for _ in self._names)})" if parameter_type else ""
        self._prepare = f"PREPARE {name}{types} AS {numbered}"
        self._execute = f"EXECUTE {name} ({', '.join('%s' for _ in self._names)})"
        # The statement's own constants (a type filter's values), beside the parameters given.
        self._defaults = {k: v for k, v in compiled.params.items() if v is not None}
        self._idle: list[Any] = []
        self._max_idle = max_idle

    def _values(self, params: Mapping[str, Any]) -> list[Any]:
        given = {**self._defaults, **params}
        return [given[name] for name in self._names]

    def _release(self, conn: Any) -> None:
        if len(self._idle) < self._max_idle:
            self._idle.append(conn)
        else:
            conn.close()

    async def write(self, params: Mapping[str, Any]) -> int:
        """Run the statement once: the rows it changed. StatementNotSentError,
        StatementOutcomeUnknownError or StatementRefusedError when it fails."""
        values = self._values(params)
        conn = None
        while self._idle and conn is None:
            conn = self._idle.pop()
            if _closed_by_server(conn):
                conn.close()
                conn = None
        if conn is None:
            try:
                conn = await self._connect()
            except psycopg2.Error as e:
                raise StatementNotSentError(f"cannot reach the database ({type(e).__name__})") from e
        try:
            cursor = conn.cursor()
            cursor.execute(self._execute, values)
            await _ready(conn)
            count = int(cursor.rowcount)
            cursor.close()
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as e:
            conn.close()
            raise StatementOutcomeUnknownError(f"the database connection failed ({type(e).__name__})") from e
        except psycopg2.Error as e:
            conn.close()
            raise StatementRefusedError(f"{type(e).__name__}: {e}") from e
        except BaseException:
            conn.close()  # cancelled mid-statement: its state is unknown
            raise
        self._release(conn)
        return count

    async def fetch_value(self, params: Mapping[str, Any]) -> tuple[bool, Any]:
        """(whether a row was found, its first column)."""
        values = self._values(params)
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
            self._release(conn)
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


def _closed_by_server(conn: Any) -> bool:
    """Whether an idle connection was closed by the server (anything readable on it is its
    goodbye): a local system call, where a ping would be a round trip."""
    if conn.closed:
        return True
    try:
        return bool(select.select([conn.fileno()], [], [], 0)[0])
    except (OSError, ValueError):
        return True


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


__all__ = ["MAX_IDLE", "STATEMENT_NAME", "AsyncStatement", "StatementNotSentError", "StatementOutcomeUnknownError",
           "StatementRefusedError"]
