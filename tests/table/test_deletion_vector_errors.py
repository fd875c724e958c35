"""Deletion vectors that do not match their manifest entry are refused, naming the problem.

Our own Puffin file on local disk; no other engine is needed to prove what the reader checks.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from pyroaring import BitMap64

from tablestore.errors import CorruptMetadataError
from tablestore.io import load_file_io
from tablestore.spec.manifests.deletion_vector import DeletionVectorBlob
from tablestore.spec.manifests.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus
from tablestore.spec.manifests.puffin import write_puffin
from tablestore.table.read.deletion_vectors import read_deletion_vector
from tablestore.table.read.scan import DeleteFileIndex

DATA = "file:///wh/t/data/a.parquet"


def dv_file(tmp_path: Path, positions: list[int]) -> DataFile:
    data, footer = write_puffin([DeletionVectorBlob(DATA, BitMap64(np.asarray(positions, np.uint64))).to_blob()])
    path = tmp_path / "dv.puffin"
    path.write_bytes(data)
    (meta,) = footer.blobs
    return DataFile(DataFileContent.POSITION_DELETES, str(path), FileFormat.PUFFIN, (), len(positions), len(data),
                    referenced_data_file=DATA, content_offset=meta.offset, content_size_in_bytes=meta.length)


def test_a_dv_is_read_by_offset_and_checked_against_its_entry(tmp_path: Path) -> None:
    io = load_file_io()
    dv = dv_file(tmp_path, [0, 5, 9])
    assert read_deletion_vector(io, dv, DATA).tolist() == [0, 5, 9]
    with pytest.raises(CorruptMetadataError, match="references"):
        read_deletion_vector(io, dv, "file:///wh/t/data/b.parquet")
    with pytest.raises(CorruptMetadataError, match="record_count says 4"):
        read_deletion_vector(io, dataclasses.replace(dv, record_count=4), DATA)
    with pytest.raises(CorruptMetadataError, match="length field"):
        read_deletion_vector(io, dataclasses.replace(dv, content_size_in_bytes=dv.content_size_in_bytes - 1), DATA)  # type: ignore[operator]
    with pytest.raises(CorruptMetadataError, match="content_offset"):
        read_deletion_vector(io, dataclasses.replace(dv, content_offset=None), DATA)


def test_two_live_dvs_for_one_data_file_are_refused(tmp_path: Path) -> None:
    dv = dv_file(tmp_path, [1])
    index = DeleteFileIndex()
    for copy in (dv, dataclasses.replace(dv, file_path=dv.file_path + ".2")):
        index.add(ManifestEntry(ManifestEntryStatus.ADDED, 1, 3, 3, copy))
    data_file = DataFile(DataFileContent.DATA, DATA, FileFormat.PARQUET, (), 10, 100)
    with pytest.raises(CorruptMetadataError, match="two live deletion vectors"):
        index.for_data_file(2, data_file)
