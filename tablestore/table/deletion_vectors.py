"""Reading deletion vectors (DVs) of v3 tables: one ``deletion-vector-v1`` blob per data file.

A DV's manifest entry is a position delete (content 1) in Puffin format whose
``referenced_data_file`` names its one data file and whose ``content_offset`` and
``content_size_in_bytes`` locate the blob inside the Puffin file, so a reader fetches exactly
those bytes and never the footer (format/spec.md, "Deletion Vectors").
"""

from __future__ import annotations

import numpy as np

from tablestore.errors import CorruptMetadataError
from tablestore.io import FileIO
from tablestore.spec.deletion_vector import deserialize_positions, positions_array
from tablestore.spec.manifest import DataFile, DataFileContent, FileFormat


def is_deletion_vector(delete_file: DataFile) -> bool:
    return delete_file.content == DataFileContent.POSITION_DELETES and delete_file.file_format == FileFormat.PUFFIN


def read_deletion_vector(io: FileIO, dv: DataFile, data_path: str) -> np.ndarray:
    """The deleted positions (sorted int64) that the DV ``dv`` holds for the data file ``data_path``."""
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
    return positions_array(positions)
