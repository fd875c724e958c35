"""Where a catalog's tables live, and which files a table owns.

Two rules keep one table's purge from destroying another (Iceberg's Java catalogs follow the
first; the second is what makes the first enough):

- A purge deletes only the files the dropped table's own metadata references: its metadata
  files and metadata log, manifest lists, manifests, data and delete files, statistics and
  Puffin files (``CatalogUtil.dropTableData`` in Java). Whatever else lies under its location
  (another table's files, a writer's uncommitted files) stays.
- No two live tables share a location: a table's location neither equals, contains nor lies
  inside another live table's. A new table whose default location is taken (a renamed table
  kept its files there, or a dropped one left them) gets a unique suffix instead; an explicit
  location that overlaps a live table's is refused unless the catalog allows overlaps.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from pyarrow.fs import FileSelector

from tablestore.maintenance.reachable import metadata_files, normalize_path, snapshot_files

if TYPE_CHECKING:
    from tablestore.io.fileio import FileIO
    from tablestore.spec.metadata.table_metadata import TableMetadata

# A catalog property: "true" lets tables share or nest locations (purge stays safe either way,
# since it deletes only referenced files; the rule keeps file listings per table meaningful).
ALLOW_OVERLAPPING_LOCATIONS = "allow-overlapping-locations"
PURGE_THREADS = 8


def _comparable(location: str) -> str:
    """One spelling per location, ending in "/" so that ``t`` is not a prefix of ``t2``."""
    return normalize_path(location).rstrip("/") + "/"


def locations_overlap(a: str, b: str) -> bool:
    """Whether two table locations are the same, or one lies inside the other."""
    first, second = _comparable(a), _comparable(b)
    return first.startswith(second) or second.startswith(first)


def overlapping(location: str, live: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (table name, location) pairs of ``live`` whose location overlaps ``location``."""
    return [(name, other) for name, other in live if locations_overlap(location, other)]


def unique_location(location: str) -> str:
    """``location`` with a random suffix, as a table's default location when the plain one is taken."""
    return f"{location.rstrip('/')}-{uuid.uuid4().hex}"


def owned_files(io: FileIO, metadata: TableMetadata, metadata_location: str, external: bool) -> set[str]:
    """Every file a purge of this table deletes, as the table's metadata names them.

    Content files are those live in some snapshot (as Java reads manifests for a purge); an
    external table's content files belong to whoever wrote them, so only its metadata goes.
    """
    files = snapshot_files(io, metadata.snapshots, include_deleted_entries=False)
    owned = metadata_files(metadata, metadata_location) | files.manifest_lists | files.manifests
    if not external:
        owned |= set(files.content_files)
    return owned


def delete_owned_files(io: FileIO, paths: Iterable[str]) -> int:
    """Delete ``paths`` (a missing file is no error: a purge may run twice); how many were asked."""
    todo = sorted(paths)
    with ThreadPoolExecutor(PURGE_THREADS) as pool:
        list(pool.map(io.delete, todo))
    return len(todo)


def remove_empty_directories(io: FileIO, location: str) -> None:
    """Remove the directories a purge left empty under a local ``location``, deepest first.

    ``os.rmdir`` refuses a directory that is not empty, so a file another writer put there
    meanwhile survives. Object stores have no directories to leave behind.
    """
    path = normalize_path(location)
    if "://" in path or not os.path.isdir(path):
        return
    for root, _dirs, _files in sorted(os.walk(path), key=lambda w: -w[0].count(os.sep)):
        with contextlib.suppress(OSError):
            os.rmdir(root)


def holds_files(io: FileIO, location: str) -> bool:
    """Whether any file lies under ``location``: empty local directories do not count, and the
    answer comes from the first file found, not a listing of them all."""
    path = normalize_path(location)
    if "://" not in path:
        return any(files for _root, _dirs, files in os.walk(path))
    fs, fs_path = io.filesystem_for(location)
    with contextlib.suppress(OSError):
        # An object store lists a "directory" only while an object lies under it.
        return bool(fs.get_file_info(FileSelector(fs_path, recursive=False, allow_not_found=True)))
    return False
