"""A real SQLite catalog that loses its first commits to a real concurrent writer.

:class:`ContendedCatalog` is the SQL catalog itself. During each of its first ``races`` table
commits, a second catalog instance on the same database (the rival writer) commits a property
change to the same table after this catalog has read the table's pointer and before it swaps
it: the swap then finds the pointer moved and the commit fails with CommitConflictError, as it
does when two processes race. It counts the catalog commits it was asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

from tablestore.catalog.base import Catalog
from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.names import IdentifierLike
from tablestore.spec.metadata.table_metadata import TableMetadata
from tablestore.spec.metadata.update_models import TableRequirement, TableUpdate

RIVAL_PROPERTY = "test.rival-commit"


class ContendedCatalog(SqlCatalog):
    def __init__(self, name: str, rival: Catalog, races: int = 0, **properties: str) -> None:
        super().__init__(name, **properties)
        self.rival = rival
        self.races = races
        self.attempts = 0
        self.rival_commits = 0
        self._committing = False

    def commit_table(
        self,
        identifier: IdentifierLike,
        requirements: Sequence[TableRequirement],
        updates: Sequence[TableUpdate],
    ) -> tuple[str, TableMetadata]:
        self.attempts += 1
        self._committing = True
        try:
            return super().commit_table(identifier, requirements, updates)
        finally:
            self._committing = False

    def load_table_metadata(self, identifier: IdentifierLike) -> tuple[str, TableMetadata]:
        loaded = super().load_table_metadata(identifier)
        if self._committing and self.races > 0:
            # The commit has read the pointer it will swap: the rival moves it now.
            self.races -= 1
            self.rival_commits += 1
            self.rival.load_table(identifier).update_properties({RIVAL_PROPERTY: str(self.rival_commits)})
        return loaded
