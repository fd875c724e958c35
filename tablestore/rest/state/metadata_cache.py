"""Parsed metadata files and their JSON, kept by location and bounded by bytes.

Metadata files are immutable (a commit writes a new one and swaps the pointer), so a file read
once can be answered from memory for as long as it is asked for: its parsed
:class:`TableMetadata` (a commit's base) and its JSON serialized once (the ``metadata`` of every
LoadTableResult and commit response). The cache is bounded by the bytes of that JSON, about a
third of what the parsed object holds in memory, rather than by a count of entries: a count of
512 cycled over 1,000 tables missed every load, while 1,000 tables of a few KiB each fit in a
few MiB. Least recently used entries go first, and a table's previous file as soon as the service
sees the table move on (a commit, or a load of its new file).

Serialized by :func:`~tablestore.spec.metadata.table_metadata.json_bytes` (orjson, 4x faster
than pydantic-core's ``to_json``, which was 4x faster than ``json.dumps``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from tablestore.spec.metadata.table_metadata import TableMetadata, json_bytes

# The JSON bytes kept; the parsed objects beside them take about three times as much.
DEFAULT_CACHE_BYTES = 32 * 1024 * 1024


def metadata_json(metadata: TableMetadata) -> bytes:
    """The JSON of a metadata file as the REST responses embed it."""
    return json_bytes(metadata.to_json())


class MetadataCache:
    """Thread-safe LRU of (parsed metadata, its JSON) by metadata location, bounded by bytes."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, tuple[TableMetadata, bytes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def get(self, location: str) -> TableMetadata | None:
        with self._lock:
            found = self._entries.get(location)
            if found is None:
                return None
            self._entries.move_to_end(location)
            return found[0]

    def body(self, location: str, metadata: TableMetadata) -> bytes:
        """The JSON of the file at ``location`` (``metadata``), serialized at most once while kept."""
        with self._lock:
            found = self._entries.get(location)
            if found is not None:
                self._entries.move_to_end(location)
                return found[1]
        body = metadata_json(metadata)
        self._put(location, metadata, body)
        return body

    def put(self, location: str, metadata: TableMetadata) -> None:
        """Keep a file read or written; its JSON is made now, as its first answer needs it."""
        with self._lock:
            if location in self._entries:
                self._entries.move_to_end(location)
                return
        self._put(location, metadata, metadata_json(metadata))

    def discard(self, location: str) -> None:
        """Forget a file no table points at any more."""
        with self._lock:
            dropped = self._entries.pop(location, None)
            if dropped is not None:
                self._bytes -= len(dropped[1])

    def _put(self, location: str, metadata: TableMetadata, body: bytes) -> None:
        with self._lock:
            previous = self._entries.pop(location, None)
            if previous is not None:
                self._bytes -= len(previous[1])
            self._entries[location] = (metadata, body)
            self._bytes += len(body)
            while self._bytes > self.max_bytes and len(self._entries) > 1:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= len(dropped)


__all__ = ["DEFAULT_CACHE_BYTES", "MetadataCache", "metadata_json"]
