"""Multi-table commits for the SQL catalog: all tables change, or none does.

Every table's requirements are checked and its next metadata file written first; then one
database transaction compare-and-swaps every table's row. If any row moved meanwhile the
transaction rolls back and every new file is deleted. A table whose updates change nothing
still has its row checked (and locked) in that transaction, so its requirements held at the
moment the others were committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from sqlalchemy import update
from sqlalchemy.exc import SQLAlchemyError

from tablestore.catalog import Identifier, IdentifierLike, identifier_str
from tablestore.errors import CommitConflictError, CommitFailedError, CommitStateUnknownError, ValidationError

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement, Engine
    from sqlalchemy import Table as SqlTable

    from tablestore.io import FileIO
    from tablestore.spec.metadata import TableMetadata
    from tablestore.spec.updates import TableRequirement, TableUpdate

TableChange = tuple[IdentifierLike, Sequence["TableRequirement"], Sequence["TableUpdate"]]


class SqlMultiTableCommit:
    """Mixin of SqlCatalog: ``commit_tables``."""

    if TYPE_CHECKING:
        engine: Engine
        _iceberg_tables: ClassVar[SqlTable]

        def _table_ident(self, identifier: IdentifierLike) -> Identifier: ...
        def _table_key(self, identifier: Identifier) -> list[ColumnElement[bool]]: ...
        def load_table_metadata(self, identifier: IdentifierLike) -> tuple[str, TableMetadata]: ...
        def table_io(self, metadata: TableMetadata) -> FileIO: ...
        def _new_metadata(
            self, identifier: Identifier, current: tuple[str, TableMetadata] | None,
            requirements: Sequence[TableRequirement], updates: Sequence[TableUpdate],
        ) -> tuple[str, TableMetadata] | None: ...

    def commit_tables(self, changes: Sequence[TableChange]) -> list[tuple[str, TableMetadata]]:
        """Commit to several existing tables atomically; the new (location, metadata) of each.

        CommitConflictError (nothing committed) if a requirement fails or another writer
        changed one of the tables; CommitStateUnknownError if the database failed at commit.
        """
        idents = [self._table_ident(identifier) for identifier, _, _ in changes]
        if len(set(idents)) != len(idents):
            raise ValidationError("a transaction lists the same table twice; merge its changes into one")
        staged: list[tuple[Identifier, str, str, TableMetadata, Any]] = []
        try:
            for ident, (_, requirements, updates) in zip(idents, changes, strict=True):
                base_location, base = self.load_table_metadata(ident)
                new = self._new_metadata(ident, (base_location, base), requirements, updates)
                if new is None:
                    staged.append((ident, base_location, base_location, base, None))
                else:
                    staged.append((ident, base_location, new[0], new[1], self.table_io(new[1])))
            self._swap_all(staged)
        except CommitStateUnknownError:
            raise
        except BaseException:
            for _, _, location, _, io in staged:
                if io is not None:
                    io.delete(location)
            raise
        return [(location, metadata) for _, _, location, metadata, _ in staged]

    def _swap_all(self, staged: list[tuple[Identifier, str, str, TableMetadata, Any]]) -> None:
        columns = self._iceberg_tables.c
        names = ", ".join(identifier_str(s[0]) for s in staged)
        with self.engine.connect() as conn:
            conn.execution_options(tablestore_write=True)
            transaction = conn.begin()
            try:
                for ident, base_location, new_location, _, _ in staged:
                    values: dict[str, str] = {"metadata_location": new_location}
                    if new_location != base_location:
                        values["previous_metadata_location"] = base_location
                    result = conn.execute(
                        update(self._iceberg_tables)
                        .where(*self._table_key(ident), columns.metadata_location == base_location)
                        .values(**values)
                    )
                    if result.rowcount != 1:
                        transaction.rollback()
                        raise CommitConflictError(
                            f"transaction on {names} not committed: table {identifier_str(ident)} was "
                            "changed by another commit; refresh the tables and retry"
                        )
            except SQLAlchemyError as e:
                transaction.rollback()
                raise CommitFailedError(
                    f"transaction on {names} failed, nothing was committed: {type(e).__name__}"
                ) from e
            try:
                transaction.commit()
            except SQLAlchemyError as e:
                raise CommitStateUnknownError(
                    f"transaction on {names} may or may not have been applied (the database failed "
                    "while committing); reload the tables to check"
                ) from e


__all__ = ["SqlMultiTableCommit", "TableChange"]
