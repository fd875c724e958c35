"""The SQL catalog as the service runs it: with a cache of parsed metadata files.

Metadata files are immutable (a commit writes a new one and swaps the pointer), so a parsed
file can be kept under its location for as long as anyone asks for it: the catalog row is still
read on every load and commit, only the file read and JSON parse are saved. The file a commit
has just written is cached too, so the next commit on that table reads nothing but the row.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tablestore.catalog import IdentifierLike, read_metadata_file
from tablestore.catalog.sql import SqlCatalog

if TYPE_CHECKING:
    from tablestore.spec.metadata import TableMetadata
    from tablestore.spec.updates import TableRequirement, TableUpdate

CACHE_ENTRIES = 512


class ServedSqlCatalog(SqlCatalog):
    """A SqlCatalog whose parsed metadata files are cached by location (an LRU, thread-safe)."""

    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        self._metadata_cache: OrderedDict[str, TableMetadata] = OrderedDict()
        self._cache_lock = threading.Lock()

    def _cached(self, location: str) -> TableMetadata | None:
        with self._cache_lock:
            found = self._metadata_cache.get(location)
            if found is not None:
                self._metadata_cache.move_to_end(location)
            return found

    def _cache(self, location: str, metadata: TableMetadata) -> None:
        with self._cache_lock:
            self._metadata_cache[location] = metadata
            self._metadata_cache.move_to_end(location)
            while len(self._metadata_cache) > CACHE_ENTRIES:
                self._metadata_cache.popitem(last=False)

    def load_table_metadata(self, identifier: IdentifierLike) -> tuple[str, TableMetadata]:
        ident = self._table_ident(identifier)
        location = self._current_location(ident)
        metadata = self._cached(location)
        if metadata is None:
            metadata = read_metadata_file(self.io, location)
            self._cache(location, metadata)
        return location, metadata

    def commit_table(
        self, identifier: IdentifierLike, requirements: Sequence[TableRequirement], updates: Sequence[TableUpdate]
    ) -> tuple[str, TableMetadata]:
        location, metadata = super().commit_table(identifier, requirements, updates)
        self._cache(location, metadata)
        return location, metadata


__all__ = ["ServedSqlCatalog"]
