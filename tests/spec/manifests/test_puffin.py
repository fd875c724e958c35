"""Puffin files and ``deletion-vector-v1`` blobs, checked against the spec byte for byte.

The checks parse what our writer produces with a parser written here from the specs alone
(format/puffin-spec.md and the Roaring "portable" format: struct, zlib, no pyroaring and none of
our reading code), so a writer bug cannot hide behind a reader with the same bug. The other way
round, our reader parses a Puffin file Java Iceberg 1.10 wrote (``fixtures/java-dv-v1.puffin``:
``CREATE TABLE ... TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='merge-on-read')``,
two rows deleted from one data file, through ``../shared/iceberg-oracle/oracle sql``).
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from pyroaring import BitMap64

from tablestore.errors import CorruptMetadataError, UnsupportedError, ValidationError
from tablestore.spec.manifests.deletion_vector import (
    DELETION_VECTOR_V1,
    DeletionVectorBlob,
    deserialize_positions,
    positions_array,
    serialize_positions,
)
from tablestore.spec.manifests.puffin import Blob, footer_length, read_blob, read_footer, write_puffin

JAVA_PUFFIN = Path(__file__).parent / "fixtures" / "java-dv-v1.puffin"
JAVA_DATA_FILE = (
    "/tmp/v3probe/wh/db/t/data/part=2/00000-2-367d7e5d-f48a-4d73-9693-6fcd83c8d048-0-00002.parquet"
)

# -- an independent parser, from the specs' text ----------------------------------------------


def parse_puffin(data: bytes) -> tuple[dict, list[bytes]]:
    """(footer JSON, blob payloads) of a Puffin file, per format/puffin-spec.md."""
    assert data[:4] == bytes([0x50, 0x46, 0x41, 0x31]), "file magic"
    assert data[-4:] == b"PFA1", "footer's closing magic"
    flags = data[-8:-4]
    assert flags == b"\x00\x00\x00\x00", "flags: footer uncompressed, reserved bits zero"
    (payload_size,) = struct.unpack("<i", data[-12:-8])
    footer_start = len(data) - 12 - payload_size - 4
    assert data[footer_start: footer_start + 4] == b"PFA1", "footer's opening magic"
    footer = json.loads(data[footer_start + 4: footer_start + 4 + payload_size].decode("utf-8"))
    blobs = [data[b["offset"]: b["offset"] + b["length"]] for b in footer["blobs"]]
    # Blobs lie between the file magic and the footer.
    for b in footer["blobs"]:
        assert b["offset"] >= 4 and b["offset"] + b["length"] <= footer_start
    return footer, blobs


def parse_roaring32(buf: bytes, at: int) -> tuple[set[int], int]:
    """A 32-bit Roaring bitmap in the portable format at ``buf[at:]``: (values, end offset)."""
    (cookie,) = struct.unpack_from("<I", buf, at)
    pos = at + 4
    if cookie & 0xFFFF == 12347:  # SERIAL_COOKIE: has run containers
        size = (cookie >> 16) + 1
        run_flags = buf[pos: pos + (size + 7) // 8]
        pos += (size + 7) // 8
        has_offsets = size >= 4
    else:
        assert cookie == 12346, f"unknown roaring cookie {cookie}"
        (size,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        run_flags = bytes((size + 7) // 8)
        has_offsets = True
    header = [struct.unpack_from("<HH", buf, pos + 4 * i) for i in range(size)]
    pos += 4 * size
    if has_offsets:
        pos += 4 * size
    values: set[int] = set()
    for i, (key, card_minus_1) in enumerate(header):
        high = key << 16
        if run_flags[i // 8] >> (i % 8) & 1:
            (n_runs,) = struct.unpack_from("<H", buf, pos)
            pos += 2
            for r in range(n_runs):
                start, length = struct.unpack_from("<HH", buf, pos + 4 * r)
                values.update(high | v for v in range(start, start + length + 1))
            pos += 4 * n_runs
        elif card_minus_1 + 1 <= 4096:
            values.update(high | v for v in struct.unpack_from(f"<{card_minus_1 + 1}H", buf, pos))
            pos += 2 * (card_minus_1 + 1)
        else:
            words = struct.unpack_from("<1024Q", buf, pos)
            values.update(high | (w * 64 + b) for w, word in enumerate(words) for b in range(64) if word >> b & 1)
            pos += 8192
        assert len([v for v in values if v >> 16 == key]) == card_minus_1 + 1
    return values, pos


def parse_dv(blob: bytes) -> set[int]:
    """Deleted positions of a deletion-vector-v1 blob, per the Puffin spec's blob type."""
    (length,) = struct.unpack(">I", blob[:4])
    assert length == len(blob) - 8, "length covers magic and vector"
    assert blob[4:8] == bytes([0xD1, 0xD3, 0x39, 0x64]), "DV magic"
    (crc,) = struct.unpack(">I", blob[-4:])
    assert crc == zlib.crc32(blob[4:-4]), "CRC-32 of magic and vector, big-endian"
    vector = blob[8:-4]
    (count,) = struct.unpack_from("<Q", vector, 0)
    pos = 8
    positions: set[int] = set()
    keys = []
    for _ in range(count):
        (key,) = struct.unpack_from("<I", vector, pos)
        keys.append(key)
        low, pos = parse_roaring32(vector, pos + 4)
        positions.update((key << 32) | v for v in low)
    assert keys == sorted(keys), "bitmaps ordered by unsigned key"
    assert pos == len(vector), "nothing after the last bitmap"
    return positions


# -- tests ----------------------------------------------------------------------------------------

# Array, run and bitmap containers, and a second 32-bit key (positions past 2^32).
POSITIONS = sorted({0, 3, 7, 65_535, 65_536, *range(100_000, 103_000), *range(200_000, 265_536, 2),
                    (1 << 32) + 5, (5 << 32) + 70_000})


def test_written_dv_puffin_file_parses_byte_for_byte_with_an_independent_parser() -> None:
    dv_a = DeletionVectorBlob("s3://bucket/t/data/a.parquet", bitmap_of(POSITIONS))
    dv_b = DeletionVectorBlob("s3://bucket/t/data/b.parquet", bitmap_of([42]))
    data, footer = write_puffin([dv_a.to_blob(), dv_b.to_blob()], {"created-by": "tablestore test"})

    parsed, blobs = parse_puffin(data)
    assert parsed == {
        "blobs": [
            {"type": "deletion-vector-v1", "fields": [2147483645], "snapshot-id": -1, "sequence-number": -1,
             "offset": 4, "length": len(blobs[0]),
             "properties": {"referenced-data-file": "s3://bucket/t/data/a.parquet",
                            "cardinality": str(len(POSITIONS))}},
            {"type": "deletion-vector-v1", "fields": [2147483645], "snapshot-id": -1, "sequence-number": -1,
             "offset": 4 + len(blobs[0]), "length": len(blobs[1]),
             "properties": {"referenced-data-file": "s3://bucket/t/data/b.parquet", "cardinality": "1"}},
        ],
        "properties": {"created-by": "tablestore test"},
    }
    assert "compression-codec" not in data.decode("latin-1")
    assert sorted(parse_dv(blobs[0])) == POSITIONS
    assert parse_dv(blobs[1]) == {42}
    # The footer's offsets are the ones the writer reports (a manifest entry's content_offset).
    assert [(b.offset, b.length) for b in footer.blobs] == [(4, len(blobs[0])), (4 + len(blobs[0]), len(blobs[1]))]


def test_dv_blob_layout_for_one_position_is_exactly_the_spec_bytes() -> None:
    blob = serialize_positions([5])
    vector = (
        struct.pack("<Q", 1)  # one 32-bit bitmap
        + struct.pack("<I", 0)  # its key
        # roaring: no-run cookie, 1 container, key 0 cardinality-1 0, offset 16, value 5
        + struct.pack("<II", 12346, 1) + struct.pack("<HH", 0, 0) + struct.pack("<I", 16) + struct.pack("<H", 5)
    )
    body = bytes([0xD1, 0xD3, 0x39, 0x64]) + vector
    assert blob == struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def test_our_reader_parses_the_dv_java_iceberg_wrote() -> None:
    data = JAVA_PUFFIN.read_bytes()
    footer = read_footer(data)
    assert footer.properties["created-by"].startswith("Apache Iceberg 1.10")
    assert len(footer.blobs) == 1
    meta = footer.blobs[0]
    assert (meta.type, meta.fields, meta.snapshot_id, meta.sequence_number) == (
        DELETION_VECTOR_V1, (2147483645,), -1, -1)
    assert (meta.offset, meta.length, meta.compression_codec) == (4, 44, None)
    assert meta.properties == {"referenced-data-file": JAVA_DATA_FILE, "cardinality": "2"}
    assert list(deserialize_positions(read_blob(data, meta))) == [1, 2]
    # Our independent parser agrees with Java's bytes too.
    _, blobs = parse_puffin(data)
    assert parse_dv(blobs[0]) == {1, 2}
    # Java's blob re-encoded by us is the same bytes: same container choice, same CRC.
    assert serialize_positions([1, 2]) == blobs[0]


def test_footer_length_from_the_trailer_alone_locates_the_footer() -> None:
    data, _ = write_puffin([Blob("apache-datasketches-theta-v1", b"\x01\x02\x03", fields=(1,))])
    length = footer_length(data[-12:])
    assert data[len(data) - length: len(data) - length + 4] == b"PFA1"
    assert read_footer(data[len(data) - length:]).blobs[0].length == 3
    assert read_blob(data, read_footer(data).blobs[0]) == b"\x01\x02\x03"


def test_positions_round_trip_through_our_reader() -> None:
    bitmap = deserialize_positions(serialize_positions(bitmap_of(POSITIONS)))
    assert positions_array(bitmap).tolist() == POSITIONS
    assert positions_array(bitmap).dtype == np.int64


def test_corrupt_dv_blobs_are_refused_naming_the_problem() -> None:
    blob = bytearray(serialize_positions([1, 2, 3]))
    bad_crc = bytes(blob[:-1]) + bytes([blob[-1] ^ 0xFF])
    with pytest.raises(CorruptMetadataError, match="CRC-32"):
        deserialize_positions(bad_crc)
    bad_magic = bytes(blob[:4]) + b"\x00" + bytes(blob[5:])
    with pytest.raises(CorruptMetadataError, match="magic"):
        deserialize_positions(bad_magic)
    with pytest.raises(CorruptMetadataError, match="content_size_in_bytes"):
        deserialize_positions(bytes(blob) + b"\x00")
    with pytest.raises(ValidationError, match="negative"):
        serialize_positions([-1])


def test_not_puffin_and_compressed_footers_are_refused() -> None:
    with pytest.raises(CorruptMetadataError, match="not a Puffin file"):
        read_footer(b"PAR1" + bytes(20) + b"PAR1")
    data, _ = write_puffin([])
    compressed = data[:-8] + b"\x01\x00\x00\x00" + b"PFA1"
    with pytest.raises(UnsupportedError, match="LZ4"):
        read_footer(compressed)
    assert read_footer(data).blobs == ()


def bitmap_of(values: list[int]) -> BitMap64:
    return BitMap64(np.asarray(values, dtype=np.uint64))
