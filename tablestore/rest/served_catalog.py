"""The SQL catalog as the service runs it: cached metadata files and one-statement commits.

Metadata files are immutable (a commit writes a new one and swaps the pointer), so a parsed
file can be kept under its location for as long as anyone asks for it (and its JSON, as the
responses embed it). The service also remembers where each table pointed when it last loaded
or committed it. On PostgreSQL a commit starts from that remembered state: it checks the
requirements, writes the next metadata file and compare-and-swaps the row with a single
UPDATE. The swap only succeeds if the row still points at the remembered location, and the file
there is the one cached, so a success means the commit was checked against the table's current
state, exactly as in ``SqlCatalog.commit_table``. If another writer moved the table meanwhile,
the new file is deleted and the same is done once more from the current row. Anything else (a
requirement that fails, a create, a second lost race) takes the ordinary path, which decides.

A commit so costs one round trip to PostgreSQL, where the ordinary path pings the pooled
connection, reads the row in one transaction, pings again and swaps it in another, each a
BEGIN, a statement and a COMMIT (psycopg2 sends each on its own). Pooled connections are not
pinged but checked locally for having been closed by the server (``_drop_if_closed_by_server``);
the lookup of the row that every load makes is repeated once if its connection turns out dead,
and a swap whose connection fails mid-way is reported as of unknown state, as before. Every
statement still runs at READ COMMITTED and every swap is durable when acknowledged. On SQLite
(a local file: no round trips to save) commits take the ordinary path.
"""

from __future__ import annotations

import json
import select as select_module
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, Update, bindparam, create_engine, event, select, update
from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError, SQLAlchemyError

from tablestore.catalog import read_metadata_file
from tablestore.catalog.sql import ICEBERG_TABLES, SqlCatalog
from tablestore.errors import (
    CommitConflictError,
    CommitFailedError,
    CommitStateUnknownError,
    NoSuchTableError,
    TableAlreadyExistsError,
    TableStoreError,
)
from tablestore.names import Identifier, IdentifierLike, identifier_str

if TYPE_CHECKING:
    from tablestore.spec.metadata import TableMetadata
    from tablestore.spec.updates import TableRequirement, TableUpdate
    from tablestore.table import Table

CACHE_ENTRIES = 512
# Registering over a table that other writers keep moving: tries of the compare-and-swap.
OVERWRITE_ATTEMPTS = 5


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
        self._metadata_cache: OrderedDict[str, TableMetadata] = OrderedDict()
        self._pointers: OrderedDict[Identifier, str] = OrderedDict()
        self._cache_lock = threading.Lock()
        # psycopg2 opens a transaction with a separate BEGIN round trip; single statements need
        # none. SQLite keeps the transactions (BEGIN IMMEDIATE orders its writers; no round trips).
        self._autocommit: Engine | None = None
        self._lookups: Engine = self.engine
        if self.engine.dialect.name == "postgresql":
            self._autocommit = create_engine(self.engine.url, isolation_level="AUTOCOMMIT")
            event.listen(self._autocommit, "checkout", _drop_if_closed_by_server)
            # The pointer lookup of every load and commit. A connection that died unnoticed
            # is found by the lookup itself, which is then made once more on a new one (a
            # read is safe to repeat).
            self._lookups = create_engine(self.engine.url, isolation_level="AUTOCOMMIT")
            event.listen(self._lookups, "checkout", _drop_if_closed_by_server)
        t = ICEBERG_TABLES.c
        key = [t.catalog_name == bindparam("catalog"), t.table_namespace == bindparam("namespace"),
               t.table_name == bindparam("table")]
        # Built once: building and cache-keying a statement per request costs more CPU than
        # PostgreSQL spends running it.
        self._lookup_statement = select(t.metadata_location).where(*key, *self._table_filter())
        self._swap_statement: Update = (
            update(ICEBERG_TABLES)
            .where(*key, t.metadata_location == bindparam("base"))
            .values(metadata_location=bindparam("new"), previous_metadata_location=bindparam("base"))
        )
        self._bodies: OrderedDict[str, bytes] = OrderedDict()

    def close(self) -> None:
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
        with self._cache_lock:
            found = self._metadata_cache.get(location)
            if found is not None:
                self._metadata_cache.move_to_end(location)
            return found

    def _remember(self, ident: Identifier | None, location: str, metadata: TableMetadata) -> None:
        with self._cache_lock:
            self._metadata_cache[location] = metadata
            self._metadata_cache.move_to_end(location)
            while len(self._metadata_cache) > CACHE_ENTRIES:
                self._metadata_cache.popitem(last=False)
            if ident is not None:
                self._pointers[ident] = location
                self._pointers.move_to_end(ident)
                while len(self._pointers) > CACHE_ENTRIES:
                    self._pointers.popitem(last=False)

    def _last_seen(self, ident: Identifier) -> tuple[str, TableMetadata] | None:
        with self._cache_lock:
            location = self._pointers.get(ident)
            metadata = self._metadata_cache.get(location) if location is not None else None
        return (location, metadata) if location is not None and metadata is not None else None

    def metadata_json(self, location: str, metadata: TableMetadata) -> bytes:
        """The JSON of the metadata file at ``location``, as the REST responses embed it
        (serialized once per file: metadata files never change)."""
        with self._cache_lock:
            body = self._bodies.get(location)
            if body is not None:
                self._bodies.move_to_end(location)
                return body
        body = json.dumps(metadata.to_json(), separators=(",", ":")).encode("utf-8")
        with self._cache_lock:
            self._bodies[location] = body
            while len(self._bodies) > CACHE_ENTRIES:
                self._bodies.popitem(last=False)
        return body

    def _forget(self, ident: Identifier) -> None:
        with self._cache_lock:
            self._pointers.pop(ident, None)

    # -- loads and commits -----------------------------------------------------------------------
    def load_table_metadata(self, identifier: IdentifierLike) -> tuple[str, TableMetadata]:
        ident = self._table_ident(identifier)
        location = self._current_location(ident)
        metadata = self._cached(location)
        if metadata is None:
            metadata = read_metadata_file(self.io, location)
        self._remember(ident, location, metadata)
        return location, metadata

    def register_table_overwrite(self, identifier: IdentifierLike, metadata_location: str) -> Table:
        """Register a table by its metadata file, replacing the pointer of an existing table of
        that name (the REST spec's ``overwrite``; the previous location is kept, as on commit)."""
        ident = self._table_ident(identifier)
        metadata = read_metadata_file(self.io, metadata_location)
        for _ in range(OVERWRITE_ATTEMPTS):
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
                return table
            with self._write() as conn:
                swapped = conn.execute(
                    update(ICEBERG_TABLES)
                    .where(*self._table_key(ident), *self._table_filter(), ICEBERG_TABLES.c.metadata_location == base)
                    .values(metadata_location=metadata_location, previous_metadata_location=base)
                ).rowcount == 1
            if swapped:
                self._remember(ident, metadata_location, metadata)
                return self._make_table(ident, metadata_location, metadata)
        raise CommitConflictError(
            f"cannot register table {identifier_str(ident)}: other writers kept changing it; retry"
        )

    def commit_table(
        self, identifier: IdentifierLike, requirements: Sequence[TableRequirement], updates: Sequence[TableUpdate]
    ) -> tuple[str, TableMetadata]:
        ident = self._table_ident(identifier)
        committed: tuple[str, TableMetadata] | None = None
        if self._autocommit is not None:
            last_seen = self._last_seen(ident)
            if last_seen is not None:
                committed = self._swap_from(ident, last_seen, requirements, updates)
            if committed is None:
                # Not seen yet, or another writer moved the table since: the current state.
                try:
                    current = self.load_table_metadata(ident)
                except NoSuchTableError:
                    current = None  # a create (assert-create) or the error: the ordinary path's
                if current is not None:
                    committed = self._swap_from(ident, current, requirements, updates, fresh=True)
        if committed is None:
            # SQLite (a local file: no round trips to save), failed requirements (to be told
            # against the table's current state), creates, and commits that lost a race.
            self._forget(ident)
            committed = super().commit_table(ident, requirements, updates)
        self._remember(ident, *committed)
        return committed

    def _swap_from(
        self,
        ident: Identifier,
        base: tuple[str, TableMetadata],
        requirements: Sequence[TableRequirement],
        updates: Sequence[TableUpdate],
        fresh: bool = False,
    ) -> tuple[str, TableMetadata] | None:
        """The commit made on ``base`` with one compare-and-swap UPDATE, or None if the ordinary
        path must decide (``fresh``: ``base`` was just read from the catalog)."""
        assert self._autocommit is not None
        try:
            staged = self._new_metadata(ident, base, requirements, updates)
        except TableStoreError:
            # A failed requirement or update may be the stale state's fault: judged afresh.
            return None
        if staged is None:
            # A commit that changes nothing: the state it was checked on is current, or is
            # confirmed by the ordinary path.
            return base if fresh else None
        new_location, new_metadata = staged
        io = self.table_io(new_metadata)
        name = identifier_str(ident)
        params = {**self._key_params(ident), "base": base[0], "new": new_location}
        try:
            conn = self._autocommit.connect()  # a connection the database closed is replaced here
        except SQLAlchemyError as e:
            io.delete(new_location)
            raise CommitFailedError(
                f"commit to table {name} failed, nothing was committed: cannot reach the catalog database "
                f"({type(e).__name__})"
            ) from e
        try:
            with conn:
                swapped = conn.execute(self._swap_statement, params).rowcount == 1
        except SQLAlchemyError as e:
            if isinstance(e, OperationalError) or (isinstance(e, DBAPIError) and e.connection_invalidated):
                # The statement may have reached the database and committed.
                raise CommitStateUnknownError(
                    f"commit to table {name} may or may not have been applied (the database connection "
                    f"failed); reload the table to check. New metadata: {new_location}"
                ) from e
            io.delete(new_location)
            raise CommitFailedError(
                f"commit to table {name} failed, nothing was committed: "
                f"{type(e).__name__}: {getattr(e, 'orig', None) or e}"
            ) from e
        if not swapped:
            io.delete(new_location)
            return None
        return new_location, new_metadata


__all__ = ["ServedSqlCatalog"]
