"""The compare-and-swap of the SQL catalog: the one statement that moves a metadata pointer.

Every commit the SQL catalog makes, of a table, a view or several tables at once, and the
service's commits and registrations over it, ends in :func:`swap_pointers`: an ``UPDATE`` of
``iceberg_tables`` that only matches while the row still points at the metadata the commit was
based on (the compare-and-swap). Its database failures are told apart here, once:

- the statement failed inside a transaction, or was refused: ``CommitFailedError``, nothing
  was committed;
- the transaction's COMMIT failed, or the connection died under a statement sent in
  autocommit mode: ``CommitStateUnknownError``, it may have been applied;
- a row no longer pointed at its base: the swap that lost is returned, nothing was applied;
  :func:`pointer_moved` is the error a caller raises for it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from sqlalchemy import Update, bindparam, case, update
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError

from tablestore.catalog.sql_tables import ICEBERG_TABLES
from tablestore.errors import CommitConflictError, CommitFailedError, CommitStateUnknownError

if TYPE_CHECKING:
    from sqlalchemy import Engine

_T = ICEBERG_TABLES.c

# Built once: building and cache-keying a statement per commit costs more CPU than PostgreSQL
# spends running it. The row's type is not matched: the base location was read from a row of
# the right type, and a table and a view never share a name (one primary key).
# A swap onto the location the row already holds (an unchanged table of a multi-table commit)
# only checks and locks the row, so it keeps the previous location as it is.
SWAP_POINTER: Update = (
    update(ICEBERG_TABLES)
    .where(
        _T.catalog_name == bindparam("catalog"),
        _T.table_namespace == bindparam("namespace"),
        _T.table_name == bindparam("table"),
        _T.metadata_location == bindparam("base"),
    )
    .values(
        metadata_location=bindparam("new"),
        previous_metadata_location=case(
            (_T.metadata_location == bindparam("new"), _T.previous_metadata_location),
            else_=_T.metadata_location,
        ),
    )
)


class PointerMovedError(CommitConflictError):
    """A swap lost its race: another writer moved the pointer since the commit read it. Unlike a
    failed requirement, the same commit may still land when made again on the current state."""


class PointerSwap(NamedTuple):
    """Point the row of ``namespace.name`` (namespace levels joined by dots, as stored) at
    ``new`` if it still points at ``base``."""

    namespace: str
    name: str
    base: str
    new: str

    @property
    def qualified_name(self) -> str:
        return f"{self.namespace}.{self.name}" if self.namespace else self.name


def swap_pointers(
    engine: Engine, catalog: str, swaps: Sequence[PointerSwap], what: str, autocommit: bool = False
) -> PointerSwap | None:
    """Make ``swaps`` in one transaction: all of them, or none. The swap that lost (its row no
    longer pointed at its base, so nothing was applied), or None when all were made.

    ``what`` names the commit in error messages ("commit to table db.t"). ``autocommit``: the
    engine runs each statement as its own transaction (PostgreSQL's autocommit, a round trip
    saved), so only a single swap is atomic on it, and a connection that fails under the
    statement leaves the outcome unknown.
    """
    if autocommit and len(swaps) != 1:
        raise ValueError("an autocommit engine makes one swap atomically, not several")
    new_locations = ", ".join(s.new for s in swaps if s.new != s.base)
    try:
        conn = engine.connect()  # a pooled connection the database closed is replaced here
    except SQLAlchemyError as e:
        raise CommitFailedError(
            f"{what} failed, nothing was committed: cannot reach the catalog database ({type(e).__name__})"
        ) from e
    with conn:
        # On SQLite this makes the transaction BEGIN IMMEDIATE (see sql_catalog.py): writers queue.
        conn.execution_options(tablestore_write=True)
        transaction = conn.begin()
        try:
            for swap in swaps:
                params = {"catalog": catalog, "namespace": swap.namespace, "table": swap.name,
                          "base": swap.base, "new": swap.new}
                if conn.execute(SWAP_POINTER, params).rowcount != 1:
                    transaction.rollback()
                    return swap
        except SQLAlchemyError as e:
            if autocommit and (
                isinstance(e, OperationalError) or (isinstance(e, DBAPIError) and e.connection_invalidated)
            ):
                # The statement may have reached the database and committed on its own.
                raise CommitStateUnknownError(
                    f"{what} may or may not have been applied (the database connection failed); "
                    f"reload to check. New metadata: {new_locations}"
                ) from e
            if transaction.is_active:
                transaction.rollback()
            raise CommitFailedError(
                f"{what} failed, nothing was committed: {type(e).__name__}: {getattr(e, 'orig', None) or e}"
            ) from e
        try:
            transaction.commit()
        except SQLAlchemyError as e:
            # A connection whose COMMIT failed is in no known state (an open transaction, a dead
            # socket): the pool must not hand it out again, or the reload that resolves the
            # outcome would fail on it.
            with contextlib.suppress(SQLAlchemyError):
                conn.invalidate()
            raise CommitStateUnknownError(
                f"{what} may or may not have been applied (the database failed while committing); "
                f"reload to check. New metadata: {new_locations}"
            ) from e
    return None


def pointer_moved(what: str, kind: str, swap: PointerSwap) -> PointerMovedError:
    """The error of a swap that lost: another writer moved the pointer since the commit read it."""
    return PointerMovedError(
        f"{what} not committed: {kind} {swap.qualified_name} was changed by another commit (it no "
        f"longer points at {swap.base}); refresh it and retry"
    )


__all__ = [
    "SWAP_POINTER",
    "PointerMovedError",
    "PointerSwap",
    "pointer_moved",
    "swap_pointers",
]
