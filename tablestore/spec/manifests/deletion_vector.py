"""Deletion vectors: the Puffin ``deletion-vector-v1`` blob (format/puffin-spec.md, format/spec.md).

A deletion vector (DV) is the set of deleted row positions of one data file. The blob is::

    length (4 bytes, big-endian)   = len(magic) + len(vector)
    magic  D1 D3 39 64
    vector                          64-bit Roaring bitmap, "portable" serialization
    crc    (4 bytes, big-endian)   = CRC-32 of magic + vector

The portable 64-bit serialization is: the number of 32-bit bitmaps (8 bytes, little-endian),
then for each, in unsigned order of its key (the position's high 32 bits), the key (4 bytes,
little-endian) and a standard 32-bit Roaring bitmap of the low 32 bits. pyroaring's
``BitMap64.serialize`` writes exactly this layout (the tests check it against a hand-written
parser), so the vector is pyroaring's bytes, run-length optimized first as Java does.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np
from pyroaring import BitMap64

from tablestore.errors import CorruptMetadataError, ValidationError
from tablestore.spec.manifests.puffin import Blob

DELETION_VECTOR_V1 = "deletion-vector-v1"
DV_MAGIC = bytes([0xD1, 0xD3, 0x39, 0x64])
REFERENCED_DATA_FILE = "referenced-data-file"
CARDINALITY = "cardinality"
# The spec's "positive 64-bit positions (the most significant bit must be 0)".
MAX_POSITION = (1 << 63) - 1
# The field id a DV blob is computed for: the reserved ``_pos`` metadata column, as Java records it.
ROW_POSITION_FIELD_ID = 2147483645


def serialize_positions(positions: np.ndarray | list[int] | BitMap64) -> bytes:
    """The ``deletion-vector-v1`` blob bytes for the given deleted row positions."""
    bitmap = positions if isinstance(positions, BitMap64) else _bitmap(positions)
    if len(bitmap) and bitmap.max() > MAX_POSITION:
        raise ValidationError(f"a deletion vector position must be below 2^63, got {bitmap.max()}")
    bitmap.run_optimize()
    vector = bitmap.serialize()
    body = DV_MAGIC + vector
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def deserialize_positions(blob: bytes) -> BitMap64:
    """The deleted positions of a ``deletion-vector-v1`` blob, checking its length, magic and CRC."""
    if len(blob) < 12:
        raise CorruptMetadataError(f"a deletion vector blob is at least 12 bytes, got {len(blob)}")
    (length,) = struct.unpack(">I", blob[:4])
    if length != len(blob) - 8:
        raise CorruptMetadataError(
            f"deletion vector length field says {length} bytes of magic and vector, but the blob holds "
            f"{len(blob) - 8}; the manifest entry's content_offset or content_size_in_bytes is wrong"
        )
    body = blob[4: 4 + length]
    if body[:4] != DV_MAGIC:
        raise CorruptMetadataError(f"deletion vector magic is {body[:4].hex()}, expected {DV_MAGIC.hex()}")
    (crc,) = struct.unpack(">I", blob[4 + length:])
    if crc != zlib.crc32(body):
        raise CorruptMetadataError(
            f"deletion vector CRC-32 is {crc:#010x} but its contents hash to {zlib.crc32(body):#010x}; "
            "the blob is corrupt"
        )
    try:
        return BitMap64.deserialize(body[4:])
    except (ValueError, OverflowError) as e:
        raise CorruptMetadataError(f"deletion vector bitmap cannot be decoded: {e}") from e


def positions_array(bitmap: BitMap64) -> np.ndarray:
    """The positions as a sorted int64 array (what the reader masks rows with)."""
    return np.fromiter(bitmap, dtype=np.int64, count=len(bitmap))


@dataclass(frozen=True)
class DeletionVectorBlob:
    """A DV ready to be written into a Puffin file, for one data file."""

    referenced_data_file: str
    positions: BitMap64

    def to_blob(self) -> Blob:
        return Blob(
            type=DELETION_VECTOR_V1,
            data=serialize_positions(self.positions),
            fields=(ROW_POSITION_FIELD_ID,),
            # The snapshot is not known when the file is written: the spec requires -1 for both.
            snapshot_id=-1,
            sequence_number=-1,
            properties={REFERENCED_DATA_FILE: self.referenced_data_file, CARDINALITY: str(len(self.positions))},
        )


def _bitmap(positions: np.ndarray | list[int]) -> BitMap64:
    array = np.asarray(positions, dtype=np.int64)
    if array.size and int(array.min()) < 0:
        raise ValidationError(f"a deletion vector position cannot be negative, got {int(array.min())}")
    return BitMap64(array.astype(np.uint64))
