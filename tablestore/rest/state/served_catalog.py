"""The SQL catalog as the service runs it: cached metadata files and one-statement commits.

Metadata files are immutable (a commit writes a new one and swaps the pointer), so a parsed
file can be kept under its location for as long as anyone asks for it (and its JSON, as the
responses embed it). The service also remembers where each table pointed when it last loaded
or committed it. On PostgreSQL a commit starts from that remembered state: it checks the
requirements, writes the next metadata file and compare-and-swaps the row with a single
UPDATE (``compare_and_swap.swap_pointers``, the statement every commit of the SQL catalog makes). The
swap only succeeds if the row still points at the remembered location, and the file there is the
one cached, so a success means the commit was checked against the table's current state, exactly
as in ``SqlCatalog.commit_table``.

A swap that loses is retried on the server, as Iceberg's ``CatalogHandlers.commit`` does: the
new file is deleted, the table's current row is read, the requirements are checked again on it,
the updates applied to it, and the swap made again, up to ``COMMIT_ATTEMPTS`` attempts within
``COMMIT_RETRY_SECONDS`` (with a short jittered pause after the second loss in a row). The
client gets a 409 only when a requirement fails on the current state, or when every attempt
lost its race. Each attempt stages the commit once: one metadata file written. Within one
process, commits to the same table wait for each other (``_commit_locks``) instead of racing:
a commit that loses its race has written a metadata file for nothing, and 16 writers on one
table lost most of theirs. Another replica's or another catalog's commits still race with
ours through the compare-and-swap, which is what the retries are for. A multi-table transaction
retries the same way: every table reloaded, every requirement checked again, all swapped in
one database transaction.

A commit so costs one round trip to PostgreSQL, where a plain SqlCatalog's pings the pooled
connection, reads the row in one transaction, pings again and swaps it in another, each a
BEGIN, a statement and a COMMIT (psycopg2 sends each on its own). Pooled connections are not
pinged but checked locally for having been closed by the server (``_drop_if_closed_by_server``);
the lookup of the row that every load makes is repeated once if its connection turns out dead,
and a swap whose connection fails mid-way is reported as of unknown state, as before. The
envelope's table loads read the row with :meth:`ServedSqlCatalog.pointer` instead, on the event
loop (:mod:`tablestore.rest.state.async_pointers`), and finish with :meth:`ServedSqlCatalog.load_at`. Every
statement still runs at READ COMMITTED and every swap is durable when acknowledged. On SQLite
(a local file: no round trips to save) a commit is the one attempt on the current row.

The envelope's table commits (:mod:`tablestore.rest.routes.table_commits`) try
:meth:`ServedSqlCatalog.commit_on_loop` first: on PostgreSQL, a commit to a table whose state
the service last saw and whose commit lock is free is made on the event loop in one attempt,
its swap sent over an asynchronous connection; anything else (a lost swap included) is made by
:meth:`ServedSqlCatalog.commit_table` in a worker thread, as above.

``stats`` counts what ``/metrics`` reports of a catalog (:mod:`tablestore.rest.state.stats`): commits
and conflicts by kind (each commit counted once, however many attempts it took), retries (each
attempt after a commit's first, including a register with overwrite) and metadata cache hits.
"""

from __future__ import annotations

import random
import select as select_module
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from sqlalchemy import Connection, Engine, bindparam, create_engine, event, select
from sqlalchemy.exc import DBAPIError, DisconnectionError

from tablestore.catalog.base import metadata_file_missing, read_metadata_file
from tablestore.catalog.compare_and_swap import SWAP_POINTER, PointerMovedError, PointerSwap, swap_pointers
from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.catalog.sql_tables import ICEBERG_TABLES
from tablestore.errors import (
    CommitConflictError,
    CommitFailedError,
    CommitStateUnknownError,
    NoSuchTableError,
    TableAlreadyExistsError,
    TableStoreError,
)
from tablestore.names import Identifier, IdentifierLike, identifier_str
from tablestore.rest.state.async_pointers import (
    AsyncStatement,
    StatementNotSentError,
    StatementOutcomeUnknownError,
    StatementRefusedError,
)
from tablestore.rest.state.metadata_cache import DEFAULT_CACHE_BYTES, MetadataCache
from tablestore.rest.state.stats import CACHE_HITS, CACHE_MISSES, COMMIT_CONFLICTS, COMMIT_RETRIES, COMMITS, Stats
from tablestore.spec.metadata.update_models import AssertCreate

if TYPE_CHECKING:
    import pyarrow as pa

    from tablestore.spec.metadata.table_metadata import TableMetadata
    from tablestore.spec.metadata.update_models import TableRequirement, TableUpdate
    from tablestore.spec.partitioning.partition_spec import PartitionSpec
    from tablestore.spec.partitioning.sort_order import SortOrder
    from tablestore.spec.schemas.schema import Schema
    from tablestore.table import Table

T = TypeVar("T")

# Tables whose last seen pointer is kept (a commit's starting point): a location string each.
POINTER_ENTRIES = 65536
# Registering over a table that other writers keep moving: tries of the compare-and-swap.
OVERWRITE_ATTEMPTS = 5
# A commit whose swap keeps losing: its attempts and the time they may take. Iceberg's
# CatalogHandlers makes 5 attempts (4 retries) within 30 minutes with pauses from 100 ms; a
# swap here is one statement, so the pauses are shorter and the budget is a client's timeout.
COMMIT_ATTEMPTS = 8
COMMIT_RETRY_SECONDS = 10.0
COMMIT_PAUSE_SECONDS = (0.002, 0.2)  # the first and the longest pause between lost races
# Connections kept open for the swaps of concurrent commits (SQLAlchemy keeps 5 by default, so
# 16 writers on 16 tables opened and closed a PostgreSQL connection for most commits: psycopg2's
# connect was 11% of the service's samples). More are opened when needed and closed after.
SWAP_POOL_SIZE = 16
# Commits to one table queue on one of these locks (tables hashed onto them): a fixed number,
# so that no lock is ever created or forgotten per table.
COMMIT_LOCKS = 256


def _drop_if_closed_by_server(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """Refuse a pooled connection that PostgreSQL has closed (a restart, an idle timeout).

    The service's connections are idle between statements, so anything readable on one is
    the server's goodbye (or a rare notice, costing a reconnect). Looking is a local system
    call, where the pool's usual ping is a round trip to the database on every checkout, as
    long as the one statement a commit sends.
    """
    try:
        readable = bool(select_module.select([dbapi_connection.fileno()], [], [], 0)[0])
    except (OSError, ValueError):
        readable = True
    if readable:
        raise DisconnectionError("the catalog database closed this connection")


class ServedSqlCatalog(SqlCatalog):
    """A SqlCatalog that caches parsed metadata files and commits from the last state it saw."""

    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        self.metadata_files = MetadataCache(DEFAULT_CACHE_BYTES)
        self._pointers: OrderedDict[Identifier, str] = OrderedDict()
        self._cache_lock = threading.Lock()
        # psycopg2 opens a transaction with a separate BEGIN round trip; single statements need
        # none. SQLite keeps the transactions (BEGIN IMMEDIATE orders its writers; no round trips).
        self._autocommit: Engine | None = None
        self._lookups: Engine = self.engine
        if self.engine.dialect.name == "postgresql":
            self._autocommit = create_engine(self.engine.url, isolation_level="AUTOCOMMIT", pool_size=SWAP_POOL_SIZE)
            event.listen(self._autocommit, "checkout", _drop_if_closed_by_server)
            # The pointer lookup of every load and commit. A connection that died unnoticed
            # is found by the lookup itself, which is then made once more on a new one (a
            # read is safe to repeat).
            self._lookups = create_engine(self.engine.url, isolation_level="AUTOCOMMIT")
            event.listen(self._lookups, "checkout", _drop_if_closed_by_server)
            # The pointer swap of a commit: one statement, one round trip.
            self._swap_engine = self._autocommit
            self._swap_autocommit = True
        t = ICEBERG_TABLES.c
        key = [t.catalog_name == bindparam("catalog"), t.table_namespace == bindparam("namespace"),
               t.table_name == bindparam("table")]
        # Built once: building and cache-keying a statement per request costs more CPU than
        # PostgreSQL spends running it.
        self._lookup_statement = select(t.metadata_location).where(*key, *self._table_filter())
        # The same lookup for loads answered on the event loop (tablestore.rest.state.async_pointers),
        # and the swap of commits made there (commit_on_loop).
        postgres = self.engine.dialect.name == "postgresql"
        self._async_lookups = AsyncStatement(self.engine, self._lookup_statement) if postgres else None
        self._async_swaps = AsyncStatement(self.engine, SWAP_POINTER, SWAP_POOL_SIZE, "tablestore_swap_pointer",
                                           "text") if postgres else None
        self._commit_locks = [threading.Lock() for _ in range(COMMIT_LOCKS)]
        self.stats = Stats()

    def close(self) -> None:
        for statement in (self._async_lookups, self._async_swaps):
            if statement is not None:
                statement.close()
        for engine in (self._autocommit, self._lookups):
            if engine is not None and engine is not self.engine:
                engine.dispose()
        super().close()

    def _key_params(self, ident: Identifier) -> dict[str, str]:
        return {"catalog": self.name, "namespace": self._ns_str(ident[:-1]), "table": ident[-1]}

    def _current_location(self, ident: Identifier) -> str:
        params = self._key_params(ident)
        for attempt in range(2):
            try:
                with self._lookups.connect() as conn:
                    row = conn.execute(self._lookup_statement, params).first()
                break
            except DBAPIError as e:
                if attempt or not e.connection_invalidated:
                    raise
        if row is None:
            raise self._no_such_table(ident)
        if not row[0]:
            return super()._current_location(ident)  # raises the error naming the problem
        return str(row[0])

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        if self._autocommit is None:
            with super()._read() as conn:
                yield conn
            return
        # Every read statement of the catalog sees its own READ COMMITTED snapshot in a
        # transaction too, so autocommit changes nothing but the BEGIN and COMMIT round trips.
        with self._autocommit.connect() as conn:
            yield conn

    # -- caches ----------------------------------------------------------------------------------
    def _cached(self, location: str) -> TableMetadata | None:
        found = self.metadata_files.get(location)
        self.stats.inc(CACHE_HITS if found is not None else CACHE_MISSES, "metadata")
        return found

    def _remember(self, ident: Identifier | None, location: str, metadata: TableMetadata) -> None:
        self.metadata_files.put(location, metadata)
        if ident is not None:
            with self._cache_lock:
                previous = self._pointers.get(ident)
                self._pointers[ident] = location
                self._pointers.move_to_end(ident)
                while len(self._pointers) > POINTER_ENTRIES:
                    self._pointers.popitem(last=False)
            if previous is not None and previous != location:
                # The table has moved on: nobody loads the file it pointed at before, so it leaves
                # the cache now rather than when the bytes run out (a busy table's every version
                # took the service's memory from 203 to 310 MiB in the benchmark).
                self.metadata_files.discard(previous)

    def _last_seen(self, ident: Identifier) -> tuple[str, TableMetadata] | None:
        with self._cache_lock:
            location = self._pointers.get(ident)
        metadata = self.metadata_files.get(location) if location is not None else None
        return (location, metadata) if location is not None and metadata is not None else None

    def metadata_json(self, location: str, metadata: TableMetadata) -> bytes:
        """The JSON of the metadata file at ``location``, as the REST responses embed it
        (serialized once per file while cached: metadata files never change)."""
        return self.metadata_files.body(location, metadata)

    def _forget(self, ident: Identifier) -> None:
        with self._cache_lock:
            self._pointers.pop(ident, None)

    # -- loads and commits -----------------------------------------------------------------------
    async def pointer(self, identifier: IdentifierLike) -> str | None:
        """The table's metadata location as its row holds it, read without blocking the event
        loop: None without a row, ``""`` for a row without a location. On PostgreSQL the read is
        made on the loop itself (no thread); elsewhere in a worker thread."""
        ident = self._table_ident(identifier)
        if self._async_lookups is None:
            return await anyio.to_thread.run_sync(self._pointer_row, ident)
        found, location = await self._async_lookups.fetch_value(self._key_params(ident))
        return (str(location) if location else "") if found else None

    def _pointer_row(self, ident: Identifier) -> str | None:
        with self._lookups.connect() as conn:
            row = conn.execute(self._lookup_statement, self._key_params(ident)).first()
        return None if row is None else str(row[0]) if row[0] else ""

    def answers_from_memory(self, location: str) -> bool:
        """Whether :meth:`load_at` of ``location`` needs no more than a local file system's look
        at the file: its metadata is cached and the file is not behind a network."""
        return self.metadata_files.get(location) is not None and self.io.is_local(location)

    def load_table_metadata(self, identifier: IdentifierLike) -> tuple[str, TableMetadata]:
        ident = self._table_ident(identifier)
        return self.load_at(ident, self._current_location(ident))

    def load_at(self, ident: Identifier, location: str) -> tuple[str, TableMetadata]:
        """A load of the table ``ident`` whose row points at ``location`` (just read)."""
        metadata = self._cached(location)
        if metadata is None:
            metadata = read_metadata_file(self.io, location)
        elif not self.io.new_input(location).exists():
            # A parsed file is kept, but a table whose metadata file is gone is never served
            # from it (Java reads the file on every load and fails): one look at the file, far
            # cheaper than reading and parsing it again.
            self._forget(ident)
            raise metadata_file_missing(location)
        self._remember(ident, location, metadata)
        return location, metadata

    def register_table_overwrite(self, identifier: IdentifierLike, metadata_location: str) -> Table:
        """Register a table by its metadata file, replacing the pointer of an existing table of
        that name (the REST spec's ``overwrite``; the previous location is kept, as on commit)."""
        ident = self._table_ident(identifier)
        metadata = read_metadata_file(self.io, metadata_location)
        what = f"register of table {identifier_str(ident)}"
        for attempt in range(OVERWRITE_ATTEMPTS):
            if attempt:
                self.stats.inc(COMMIT_RETRIES)
            try:
                base = self._current_location(ident)
            except NoSuchTableError:
                try:
                    table = self.register_table(ident, metadata_location)
                except TableAlreadyExistsError:
                    if not self.table_exists(ident):
                        raise  # a view of that name: a table cannot overwrite it
                    continue  # created meanwhile: overwrite it
                self._remember(ident, metadata_location, metadata)
                return table  # counted by register_table
            # Repointing a table at another live table's files would make two owners of them.
            self.check_location_free(ident, metadata.location)
            swap = PointerSwap(self._ns_str(ident[:-1]), ident[-1], base, metadata_location)
            if swap_pointers(self.engine, self.name, [swap], what) is None:
                self._remember(ident, metadata_location, metadata)
                self.stats.inc(COMMITS, "register")
                return self._make_table(ident, metadata_location, metadata)
        self.stats.inc(COMMIT_CONFLICTS, "register")
        raise CommitConflictError(
            f"cannot register table {identifier_str(ident)}: other writers kept changing it; retry"
        )

    def commit_table(
        self, identifier: IdentifierLike, requirements: Sequence[TableRequirement], updates: Sequence[TableUpdate]
    ) -> tuple[str, TableMetadata]:
        """Check the requirements, apply the updates, write the next metadata file and swap the
        pointer, made again on the current state while the swap loses and the requirements hold
        (see the module docstring). CommitConflictError when a requirement fails on the current
        state or every attempt lost its race."""
        ident = self._table_ident(identifier)
        kind = "create" if any(isinstance(r, AssertCreate) for r in requirements) else "table"
        with self._commit_lock(ident):
            try:
                committed = self._commit_with_retries(ident, requirements, updates)
            except CommitConflictError:
                self.stats.inc(COMMIT_CONFLICTS, kind)
                raise
        self.stats.inc(COMMITS, kind)
        return committed

    async def commit_on_loop(
        self, ident: Identifier, requirements: Sequence[TableRequirement], updates: Sequence[TableUpdate]
    ) -> tuple[str, TableMetadata] | None:
        """:meth:`commit_table` made on the event loop, when it can be made there in one attempt
        without waiting; None when it is not made here (nothing changed, nothing counted), and
        the caller then makes it with :meth:`commit_table` in a worker thread.

        Made here: a commit to a table whose state the service last saw, with no other commit
        to it under way, whose requirements hold on that state and whose next metadata file is
        local. The requirements are checked, the updates applied and the file written on the
        loop, as a worker thread would under the GIL, and the swap is sent over an asynchronous
        connection (:meth:`AsyncStatement.write`): no hand-off to a thread and back, which was
        a tenth of the service's samples at 16 writers on 16 tables, nor SQLAlchemy's execution
        machinery. A swap that loses is counted as a retry and made again by :meth:`commit_table`
        on the table's current row, as its own retries are.
        """
        if self._async_swaps is None or any(isinstance(r, AssertCreate) for r in requirements):
            return None
        lock = self._commit_lock(ident)
        if not lock.acquire(blocking=False):
            return None  # another commit to the table is under way: queue for it in a thread
        try:
            base = self._last_seen(ident)
            if base is None:
                return None
            try:
                staged = self._next_metadata(base, requirements, updates)
            except TableStoreError:
                return None  # judged again on the table's current row
            if staged is None or not self.table_io(staged[1]).is_local(staged[0]):
                return None  # nothing to change on a state that may be stale; a file behind the network
            try:
                self._write_next_metadata(ident, *staged)
            except TableStoreError:
                return None  # as a lost race: made again from the current row
            if not await self._swap_on_loop(ident, base[0], *staged):
                self._forget(ident)
                self.stats.inc(COMMIT_RETRIES)
                return None
            self._remember(ident, *staged)
        finally:
            lock.release()
        self.stats.inc(COMMITS, "table")
        return staged

    async def _swap_on_loop(self, ident: Identifier, base: str, location: str, metadata: TableMetadata) -> bool:
        """:meth:`_swap_staged` over the asynchronous connections, with the same outcomes."""
        assert self._async_swaps is not None
        what = f"commit to table {identifier_str(ident)}"
        io = self.table_io(metadata)
        try:
            changed = await self._async_swaps.write({**self._key_params(ident), "base": base, "new": location})
        except StatementNotSentError as e:
            io.delete(location)
            raise CommitFailedError(f"{what} failed, nothing was committed: {e}") from e
        except StatementRefusedError as e:
            io.delete(location)
            raise CommitFailedError(f"{what} failed, nothing was committed: {e}") from e
        except StatementOutcomeUnknownError as e:
            # The file may be the table's state now: it stays.
            raise CommitStateUnknownError(
                f"{what} may or may not have been applied ({e}); reload to check. New metadata: {location}"
            ) from e
        if changed != 1:
            io.delete(location)
            return False
        return True

    def commit_tables(
        self, changes: Sequence[tuple[IdentifierLike, Sequence[TableRequirement], Sequence[TableUpdate]]]
    ) -> list[tuple[str, TableMetadata]]:
        """A multi-table transaction (``SqlCatalog.commit_tables``), counted as one commit, and
        made again on every table's current state while its swap loses."""
        idents = [self._table_ident(identifier) for identifier, _, _ in changes]
        locks = sorted({self._lock_index(ident) for ident in idents})  # one order: no deadlock
        for index in locks:
            self._commit_locks[index].acquire()
        try:
            committed = self._retried(lambda: super(ServedSqlCatalog, self).commit_tables(changes))
        except CommitConflictError:
            self.stats.inc(COMMIT_CONFLICTS, "transaction")
            raise
        finally:
            for index in reversed(locks):
                self._commit_locks[index].release()
        for ident, (location, metadata) in zip(idents, committed, strict=True):
            self._remember(ident, location, metadata)
        self.stats.inc(COMMITS, "transaction")
        return committed

    def _lock_index(self, ident: Identifier) -> int:
        return hash(ident) % COMMIT_LOCKS

    def _commit_lock(self, ident: Identifier) -> threading.Lock:
        return self._commit_locks[self._lock_index(ident)]

    def _retried(self, attempt: Callable[[], T]) -> T:
        """``attempt()`` made again while it raises PointerMovedError, within the bounds."""
        deadline = time.monotonic() + COMMIT_RETRY_SECONDS
        for tries in range(1, COMMIT_ATTEMPTS + 1):
            try:
                return attempt()
            except PointerMovedError:
                if tries == COMMIT_ATTEMPTS or time.monotonic() >= deadline:
                    raise
            self.stats.inc(COMMIT_RETRIES)
            _pause(tries)
        raise AssertionError("unreachable")

    def _commit_with_retries(
        self, ident: Identifier, requirements: Sequence[TableRequirement], updates: Sequence[TableUpdate]
    ) -> tuple[str, TableMetadata]:
        deadline = time.monotonic() + COMMIT_RETRY_SECONDS
        # The state last seen may be stale: a failure on it is judged again on the current row.
        base = self._last_seen(ident) if self._swap_autocommit else None
        current = base is None
        lost = 0
        for tries in range(1, COMMIT_ATTEMPTS + 1):
            if tries > 1:
                self.stats.inc(COMMIT_RETRIES)
            if base is None:
                self._forget(ident)
                try:
                    base = self.load_table_metadata(ident)
                except NoSuchTableError:
                    if not any(isinstance(r, AssertCreate) for r in requirements):
                        raise
                    committed = self._create_by_commit(ident, requirements, updates)
                    self._remember(ident, *committed)
                    return committed
                current = True
            try:
                staged = self._new_metadata(ident, base, requirements, updates)
            except TableStoreError:
                if current:
                    raise  # a requirement failed on the current state: the client's 409
                base = None
                continue
            if staged is None:
                if current:
                    return base  # nothing to change
                base = None
                continue
            if self._swap_staged(ident, base[0], staged):
                self._remember(ident, *staged)
                return staged
            base, current = None, False
            lost += 1
            if tries == COMMIT_ATTEMPTS or time.monotonic() >= deadline:
                break
            if lost > 1:
                _pause(lost - 1)
        raise CommitConflictError(
            f"commit to table {identifier_str(ident)} not committed: other writers won the race "
            f"{lost} times in {COMMIT_ATTEMPTS} attempts; retry"
        )

    def create_table(
        self,
        identifier: IdentifierLike,
        schema: Schema | pa.Schema,
        partition_by: Sequence[str] | str | PartitionSpec | None = None,
        sort_order: SortOrder | None = None,
        properties: Mapping[str, str] | None = None,
        location: str | None = None,
        format_version: int | None = None,
    ) -> Table:
        """``Catalog.create_table``, counted as a commit of kind ``create``."""
        table = super().create_table(identifier, schema, partition_by, sort_order, properties, location,
                                     format_version)
        self.stats.inc(COMMITS, "create")
        return table

    def register_table(self, identifier: IdentifierLike, metadata_location: str) -> Table:
        """``Catalog.register_table``, counted as a commit of kind ``register``."""
        table = super().register_table(identifier, metadata_location)
        self.stats.inc(COMMITS, "register")
        return table


def _pause(losses: int) -> None:
    """A jittered, doubling pause after ``losses`` lost races in a row, so that writers that
    keep colliding spread out (Iceberg's exponential backoff, scaled to a one-statement swap)."""
    first, longest = COMMIT_PAUSE_SECONDS
    time.sleep(random.uniform(0.5, 1.0) * min(longest, first * 2 ** (losses - 1)))


__all__ = ["ServedSqlCatalog"]
