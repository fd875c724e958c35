"""Deletion vectors (DVs) of v3 tables: one ``deletion-vector-v1`` blob per data file.

A DV's manifest entry is a position delete (content 1) in Puffin format whose
``referenced_data_file`` names its one data file and whose ``content_offset`` and
``content_size_in_bytes`` locate the blob inside the Puffin file, so a reader fetches exactly
those bytes and never the footer (format/spec.md, "Deletion Vectors").

Writing keeps the spec's rule of at most one DV per data file in a snapshot: a new DV holds the
file's new deletes *and* every position it already had deleted (its previous DV, its position
delete files), and the commit marks the previous DV and the file-scoped position delete files it
merged DELETED (:func:`merged_previous_deletes`).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence

import numpy as np
from pyroaring import BitMap64

from tablestore.errors import CorruptMetadataError
from tablestore.io.fileio import FileIO
from tablestore.spec.manifests.deletion_vector import DeletionVectorBlob, deserialize_positions, positions_array
from tablestore.spec.manifests.manifest import DataFile, DataFileContent, FileFormat
from tablestore.spec.manifests.puffin import CREATED_BY, write_puffin
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.types import StringType

# The field id of a position delete file's ``file_path`` column (spec: reserved field ids).
_DELETE_FILE_PATH_ID = 2147483546


def is_deletion_vector(delete_file: DataFile) -> bool:
    return delete_file.content == DataFileContent.POSITION_DELETES and delete_file.file_format == FileFormat.PUFFIN


def delete_file_key(f: DataFile) -> tuple[str, int | None]:
    """What tells a tracked file apart: its path, and for a DV also its blob's offset (one
    Puffin file holds the DVs of many data files, each with its own manifest entry)."""
    return f.file_path, f.content_offset if is_deletion_vector(f) else None


def referenced_data_file(delete_file: DataFile) -> str | None:
    """The one data file a position delete file applies to, if it is file-scoped: its
    ``referenced_data_file``, or equal lower and upper ``file_path`` bounds (Java's
    ``ContentFileUtil.referencedDataFile``)."""
    if delete_file.referenced_data_file is not None:
        return delete_file.referenced_data_file
    if delete_file.content != DataFileContent.POSITION_DELETES:
        return None
    lower = (delete_file.lower_bounds or {}).get(_DELETE_FILE_PATH_ID)
    upper = (delete_file.upper_bounds or {}).get(_DELETE_FILE_PATH_ID)
    if lower is None or lower != upper:
        return None
    return str(conversions.from_bytes(StringType(), lower))


def read_deletion_vector_bitmap(io: FileIO, dv: DataFile, data_path: str) -> BitMap64:
    """The deleted positions that the DV ``dv`` holds for the data file ``data_path``."""
    if dv.referenced_data_file != data_path:
        raise CorruptMetadataError(
            f"deletion vector in {dv.file_path} references {dv.referenced_data_file!r}, "
            f"not the data file {data_path!r} it was applied to"
        )
    if dv.content_offset is None or dv.content_size_in_bytes is None:
        raise CorruptMetadataError(
            f"deletion vector in {dv.file_path} for {data_path} has no content_offset/content_size_in_bytes; "
            "a v3 manifest entry of a DV must give both"
        )
    with io.new_input(dv.file_path).open() as f:
        blob = f.read_at(dv.content_size_in_bytes, dv.content_offset)
    if len(blob) != dv.content_size_in_bytes:
        raise CorruptMetadataError(
            f"deletion vector in {dv.file_path} at offset {dv.content_offset} should be "
            f"{dv.content_size_in_bytes} bytes, but the file ends after {len(blob)}"
        )
    positions = deserialize_positions(blob)
    if dv.record_count is not None and len(positions) != dv.record_count:
        raise CorruptMetadataError(
            f"deletion vector in {dv.file_path} for {data_path} holds {len(positions)} positions, "
            f"but its manifest entry's record_count says {dv.record_count}"
        )
    return positions


def read_deletion_vector(io: FileIO, dv: DataFile, data_path: str) -> np.ndarray:
    """The deleted positions (sorted int64) that the DV ``dv`` holds for the data file ``data_path``."""
    return positions_array(read_deletion_vector_bitmap(io, dv, data_path))


def _created_by() -> str:
    # The installed distribution's version: the package itself cannot be imported from the
    # table layer (it imports the catalogs and the session).
    try:
        return f"tablestore {importlib.metadata.version('tablestore')}"
    except importlib.metadata.PackageNotFoundError:
        return "tablestore"


def write_deletion_vectors(io: FileIO, path: str, vectors: Sequence[tuple[DataFile, BitMap64]]) -> list[DataFile]:
    """Write one Puffin file at ``path`` holding a DV for each (data file, deleted positions);
    returns the DVs' manifest entries' files, in the order given.

    Each entry is what Java's ``BaseDVFileWriter`` writes: a position delete in the data
    file's spec and partition, format PUFFIN, ``record_count`` the DV's cardinality, the
    Puffin file's size, and the blob's offset and length. DVs carry no column metrics: the
    ``referenced_data_file`` already says which data file they apply to.
    """
    if not vectors:
        raise ValueError("a deletion vector file needs at least one deletion vector")
    blobs = [DeletionVectorBlob(data_file.file_path, positions).to_blob() for data_file, positions in vectors]
    payload, footer = write_puffin(blobs, {CREATED_BY: _created_by()})
    io.new_output(path).write(payload)
    return [
        DataFile(
            content=DataFileContent.POSITION_DELETES,
            file_path=path,
            file_format=FileFormat.PUFFIN,
            partition=tuple(data_file.partition),
            record_count=len(positions),
            file_size_in_bytes=len(payload),
            spec_id=data_file.spec_id,
            referenced_data_file=data_file.file_path,
            content_offset=meta.offset,
            content_size_in_bytes=meta.length,
        )
        for (data_file, positions), meta in zip(vectors, footer.blobs, strict=True)
    ]
