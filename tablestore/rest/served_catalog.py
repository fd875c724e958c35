"""The SQL catalog as the service runs it: cached metadata files and one-statement commits.

Metadata files are immutable (a commit writes a new one and swaps the pointer), so a parsed
file can be kept under its location for as long as anyone asks for it. The service also
remembers where each table pointed when it last loaded or committed it. A commit then starts
from that remembered state: it checks the requirements, writes the next metadata file and
compare-and-swaps the row with a single UPDATE. The swap only succeeds if the row still points
at the remembered location, and the file there is the one cached, so a success means the commit
was checked against the table's current state, exactly as in ``SqlCatalog.commit_table``. When
anything differs (another writer moved the table, a requirement fails on the remembered state,
the next file name is taken, the commit changes nothing), the new file is deleted and the commit
runs the ordinary way, which reads the row and decides.

That saves the read of every commit. On PostgreSQL, reads and that swap run on autocommit
connections: one statement is one round trip, where a transaction costs a BEGIN and a COMMIT
more (psycopg2 sends each on its own). Every statement still runs at READ COMMITTED and every
swap is durable when acknowledged, as before. On SQLite (a local file: no round trips to save)
commits take the ordinary path.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlalchemy import Connection, create_engine, update
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError

from tablestore.catalog import Identifier, IdentifierLike, identifier_str, read_metadata_file
from tablestore.catalog.sql import ICEBERG_TABLES, SqlCatalog
from tablestore.errors import (
    CommitConflictError,
    CommitFailedError,
    CommitStateUnknownError,
    NoSuchTableError,
    TableAlreadyExistsError,
    TableStoreError,
)

if TYPE_CHECKING:
    from tablestore.spec.metadata import TableMetadata
    from tablestore.spec.updates import TableRequirement, TableUpdate
    from tablestore.table import Table

CACHE_ENTRIES = 512
# Registering over a table that other writers keep moving: tries of the compare-and-swap.
OVERWRITE_ATTEMPTS = 5


class ServedSqlCatalog(SqlCatalog):
    """A SqlCatalog that caches parsed metadata files and commits from the last state it saw."""

    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        self._metadata_cache: OrderedDict[str, TableMetadata] = OrderedDict()
        self._pointers: OrderedDict[Identifier, str] = OrderedDict()
        self._cache_lock = threading.Lock()
        # psycopg2 opens a transaction with a separate BEGIN round trip; single statements need
        # none. SQLite keeps the transactions (BEGIN IMMEDIATE orders its writers; no round trips).
        self._autocommit = (
            create_engine(self.engine.url, pool_pre_ping=True, isolation_level="AUTOCOMMIT")
            if self.engine.dialect.name == "postgresql" else None
        )

    def close(self) -> None:
        if self._autocommit is not None:
            self._autocommit.dispose()
        super().close()

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
        committed = self._commit_from_last_seen(ident, requirements, updates)
        if committed is None:
            self._forget(ident)
            committed = super().commit_table(ident, requirements, updates)
        self._remember(ident, *committed)
        return committed

    def _commit_from_last_seen(
        self, ident: Identifier, requirements: Sequence[TableRequirement], updates: Sequence[TableUpdate]
    ) -> tuple[str, TableMetadata] | None:
        """The commit made from the remembered state, or None if the ordinary path must decide."""
        base = self._last_seen(ident)
        if base is None or self._autocommit is None:
            # SQLite: a local file, where the read saved is cheap; its commits stay as they are.
            return None
        try:
            staged = self._new_metadata(ident, base, requirements, updates)
        except TableStoreError:
            # A failed requirement or update may be the stale state's fault: judged afresh.
            return None
        if staged is None:
            return None  # A commit that changes nothing: the ordinary path confirms the state.
        new_location, new_metadata = staged
        io = self.table_io(new_metadata)
        name = identifier_str(ident)
        statement = (
            update(ICEBERG_TABLES)
            .where(*self._table_key(ident), ICEBERG_TABLES.c.metadata_location == base[0])
            .values(metadata_location=new_location, previous_metadata_location=base[0])
        )
        try:
            conn = self._autocommit.connect()  # pings: a dead connection fails here, unsent
        except SQLAlchemyError as e:
            io.delete(new_location)
            raise CommitFailedError(
                f"commit to table {name} failed, nothing was committed: cannot reach the catalog database "
                f"({type(e).__name__})"
            ) from e
        try:
            with conn:
                swapped = conn.execute(statement).rowcount == 1
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
