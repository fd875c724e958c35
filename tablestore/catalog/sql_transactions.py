"""Multi-table commits for the SQL catalog: all tables change, or none does.

Every table's requirements are checked and its next metadata file written first; then one
database transaction compare-and-swaps every table's row. If any row moved meanwhile the
transaction rolls back and every new file is deleted. A table whose updates change nothing
still has its row checked (and locked) in that transaction, so its requirements held at the
moment the others were committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tablestore.catalog.compare_and_swap import PointerSwap, pointer_moved, swap_pointers
from tablestore.errors import ValidationError
from tablestore.io.cleanup import deleted_unless_sent
from tablestore.names import Identifier, IdentifierLike, identifier_str

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from tablestore.io import FileIO
    from tablestore.spec.metadata.table_metadata import TableMetadata
    from tablestore.spec.metadata.update_models import TableRequirement, TableUpdate

TableChange = tuple[IdentifierLike, Sequence["TableRequirement"], Sequence["TableUpdate"]]


class SqlMultiTableCommit:
    """Mixin of SqlCatalog: ``commit_tables``."""

    if TYPE_CHECKING:
        name: str
        engine: Engine

        def _table_ident(self, identifier: IdentifierLike) -> Identifier: ...
        def _ns_str(self, namespace: Identifier) -> str: ...
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

        def delete_staged() -> None:
            for _, _, location, _, io in staged:
                if io is not None:
                    io.delete(location)

        # The new metadata files are deleted unless the database lost the COMMIT (they may be
        # the tables' now).
        with deleted_unless_sent(delete_staged):
            for ident, (_, requirements, updates) in zip(idents, changes, strict=True):
                base_location, base = self.load_table_metadata(ident)
                new = self._new_metadata(ident, (base_location, base), requirements, updates)
                if new is None:
                    staged.append((ident, base_location, base_location, base, None))
                else:
                    staged.append((ident, base_location, new[0], new[1], self.table_io(new[1])))
            self._swap_all(staged)
        return [(location, metadata) for _, _, location, metadata, _ in staged]

    def _swap_all(self, staged: list[tuple[Identifier, str, str, TableMetadata, Any]]) -> None:
        names = ", ".join(identifier_str(s[0]) for s in staged)
        what = f"transaction on {names}"
        swaps = [PointerSwap(self._ns_str(ident[:-1]), ident[-1], base_location, new_location)
                 for ident, base_location, new_location, _, _ in staged]
        # Always the transactional engine: several swaps are atomic only in one transaction.
        lost = swap_pointers(self.engine, self.name, swaps, what)
        if lost is not None:
            raise pointer_moved(what, "table", lost)


__all__ = ["SqlMultiTableCommit", "TableChange"]
