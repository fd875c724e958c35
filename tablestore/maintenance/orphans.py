"""remove_orphan_files: delete files under the table location that no metadata references.

Only files older than ``older_than`` (default: 3 days ago, as in Iceberg) are candidates, so a
writer that has written files but not committed them yet is never raced. Referenced are: every
snapshot's manifest list, manifests and data/delete files (any entry status), the current
metadata file and the metadata log, statistics files and the version hint.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tablestore.errors import ValidationError
from tablestore.maintenance.expire import Progress, delete_files
from tablestore.maintenance.reachable import metadata_files, normalize_path, snapshot_files
from tablestore.option_values import PointInTime, epoch_ms

if TYPE_CHECKING:
    from tablestore.io.fileio import FileInfo
    from tablestore.table import Table

DEFAULT_ORPHAN_AGE_MS = 3 * 24 * 3600 * 1000


@dataclass
class OrphanResult:
    orphan_file_locations: list[str] = field(default_factory=list)
    dry_run: bool = False


def table_prefixes(table: Table, location: str | None = None) -> list[str]:
    """Directories that hold the table's files (location plus custom data/metadata paths)."""
    if location is not None:
        return [location.rstrip("/")]
    prefixes = [table.location]
    for key in ("write.data.path", "write.metadata.path"):
        custom = table.properties.get(key)
        if custom and not normalize_path(custom).startswith(normalize_path(table.location) + "/"):
            prefixes.append(custom.rstrip("/"))
    return prefixes


def list_table_files(table: Table, location: str | None = None) -> list[FileInfo]:
    out: list[FileInfo] = []
    for prefix in table_prefixes(table, location):
        out.extend(table.io.list_prefix(prefix))
    return out


def referenced_files(table: Table, include_deleted_entries: bool = True) -> set[str]:
    """Every file the table's current metadata references, normalized.

    With ``include_deleted_entries`` (what orphan removal uses, to be conservative) files that
    a snapshot records as deleted count too; without, only files live in some snapshot.
    """
    metadata = table.metadata
    files = snapshot_files(table.io, metadata.snapshots, include_deleted_entries, run=table.engine.map)
    return files.all() | metadata_files(metadata, table.metadata_location)


def remove_orphan_files(
    table: Table,
    older_than: PointInTime | None = None,
    location: str | None = None,
    dry_run: bool = False,
    max_concurrent_deletes: int | None = None,
    progress: Progress | None = None,
) -> OrphanResult:
    """Delete (or with ``dry_run`` only list) unreferenced files older than ``older_than``."""
    threshold = epoch_ms(older_than, "older_than") if older_than is not None else None
    if threshold is None:
        threshold = int(time.time() * 1000) - DEFAULT_ORPHAN_AGE_MS
    if location is not None and not normalize_path(location).startswith(normalize_path(table.location)):
        raise ValidationError(
            f"location {location!r} is not under the table location {table.location!r}; "
            "remove_orphan_files only cleans a table's own directories"
        )
    table.refresh()
    # List before reading the metadata: a file committed in between is then referenced.
    listed = list_table_files(table, location)
    referenced = referenced_files(table.refresh())
    orphans = sorted(
        f.path for f in listed
        # An unknown age is never old enough: the file may belong to a running writer.
        if normalize_path(f.path) not in referenced and f.mtime_ms is not None and f.mtime_ms < threshold
    )
    if not dry_run:
        delete_files(table, orphans, max_concurrent_deletes, progress, "remove-orphans")
    return OrphanResult(orphans, dry_run)
