"""Which files a table's metadata references: the ground truth for every file deletion.

Maintenance deletes a file only if no retained snapshot, metadata file or statistics file
names it, so these sets are computed from the metadata the catalog has just committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tablestore.spec.manifests.manifest import (
    DataFileContent,
    ManifestEntryStatus,
    ManifestFile,
    read_manifest,
    snapshot_manifests,
)
from tablestore.spec.metadata.table_metadata import Snapshot, TableMetadata

if TYPE_CHECKING:
    from tablestore.io.fileio import FileIO


def normalize_path(path: str) -> str:
    """One spelling per file: ``file:/x``, ``file:///x`` and ``/x`` are the same local file."""
    if path.startswith("file://"):
        path = path[len("file://"):]
    elif path.startswith("file:"):
        path = path[len("file:"):]
    for alias in ("s3a://", "s3n://"):
        if path.startswith(alias):
            path = "s3://" + path[len(alias):]
    return path


@dataclass
class FileSet:
    """Files referenced by some snapshots, by kind (all paths normalized)."""

    manifest_lists: set[str] = field(default_factory=set)
    manifests: set[str] = field(default_factory=set)
    content_files: dict[str, DataFileContent] = field(default_factory=dict)  # data and delete files

    def all(self) -> set[str]:
        return self.manifest_lists | self.manifests | set(self.content_files)


def snapshot_files(
    io: FileIO,
    snapshots: Iterable[Snapshot],
    include_deleted_entries: bool,
    run: Callable[[Callable[[ManifestFile], list[tuple[str, DataFileContent]]], list[ManifestFile]],
                  list[list[tuple[str, DataFileContent]]]] | None = None,
) -> FileSet:
    """Manifest lists, manifests and content files of ``snapshots``.

    ``include_deleted_entries`` also collects files that a manifest records as DELETED (they
    were live in the parent snapshot): the candidates of an expiration need them, the retained
    set does not.
    """
    out = FileSet()
    unique: dict[str, ManifestFile] = {}
    for snapshot in snapshots:
        if snapshot.manifest_list is not None:
            out.manifest_lists.add(normalize_path(snapshot.manifest_list))
        for manifest in snapshot_manifests(io, snapshot):
            unique.setdefault(normalize_path(manifest.manifest_path), manifest)
    out.manifests = set(unique)
    to_read = list(unique.values())

    def paths(manifest: ManifestFile) -> list[tuple[str, DataFileContent]]:
        return [
            (normalize_path(e.data_file.file_path), e.data_file.content)
            for e in read_manifest(io, manifest)
            if include_deleted_entries or e.status != ManifestEntryStatus.DELETED
        ]

    results = run(paths, to_read) if run is not None else [paths(m) for m in to_read]
    for found in results:
        out.content_files.update(found)
    return out


def metadata_files(metadata: TableMetadata, metadata_location: str) -> set[str]:
    """The current metadata file, the metadata log, statistics files and the version hint."""
    out = {normalize_path(metadata_location)}
    out.update(normalize_path(e.metadata_file) for e in metadata.metadata_log)
    for stats in (*metadata.statistics, *metadata.partition_statistics):
        path = stats.get("statistics-path")
        if path:
            out.add(normalize_path(str(path)))
    directory = metadata_location.rsplit("/", 1)[0]
    out.add(normalize_path(f"{directory}/version-hint.text"))
    return out


def statistics_files(metadata: TableMetadata, snapshot_ids: set[int]) -> set[str]:
    """Statistics files that belong to the given snapshots."""
    return {
        normalize_path(str(s["statistics-path"]))
        for s in (*metadata.statistics, *metadata.partition_statistics)
        if s.get("snapshot-id") in snapshot_ids and s.get("statistics-path")
    }
