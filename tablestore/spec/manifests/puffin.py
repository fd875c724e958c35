"""Puffin files (format/puffin-spec.md): blobs with a JSON footer that describes them.

Layout: ``Magic Blob1 ... BlobN Footer``, the footer being
``Magic FooterPayload FooterPayloadSize Flags Magic`` with the payload a UTF-8 JSON
``FileMetadata`` object (``blobs``: a list of ``BlobMetadata``; ``properties``). The 4-byte
integers of the footer are little-endian and signed. This module is pure: it turns bytes into
models and back; reading a file (or only its footer, or one blob by offset) is the caller's I/O.

Compression: we write blobs and footers uncompressed (``deletion-vector-v1`` must not be
compressed, and an uncompressed footer is readable by everyone). Reading a compressed footer or
blob fails with an error naming the codec, rather than guessing.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

from tablestore.errors import CorruptMetadataError, UnsupportedError

MAGIC = b"PFA1"
# Footer trailer after the payload: payload size (int32 LE), flags (4 bytes), magic.
_TRAILER = struct.Struct("<i4s4s")
FOOTER_STRUCT_LENGTH = _TRAILER.size  # 12
FLAG_FOOTER_COMPRESSED = 0x01  # byte 0, bit 0
CREATED_BY = "created-by"


@dataclass(frozen=True)
class BlobMetadata:
    """One entry of the footer's ``blobs`` list."""

    type: str
    fields: tuple[int, ...]
    snapshot_id: int
    sequence_number: int
    offset: int
    length: int
    compression_codec: str | None = None
    properties: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        # Key order as Java's FileMetadataParser writes it.
        out: dict[str, Any] = {
            "type": self.type, "fields": list(self.fields), "snapshot-id": self.snapshot_id,
            "sequence-number": self.sequence_number, "offset": self.offset, "length": self.length,
        }
        if self.compression_codec is not None:
            out["compression-codec"] = self.compression_codec
        if self.properties:
            out["properties"] = dict(self.properties)
        return out

    @staticmethod
    def from_json(obj: Any) -> BlobMetadata:
        if not isinstance(obj, dict):
            raise CorruptMetadataError(f"a Puffin blob metadata entry must be a JSON object, got {obj!r}")
        for key in ("type", "fields", "snapshot-id", "sequence-number", "offset", "length"):
            if key not in obj:
                raise CorruptMetadataError(f"Puffin blob metadata is missing the required field {key!r}: {obj!r}")
        fields = obj["fields"]
        props = obj.get("properties") or {}
        if not isinstance(fields, list) or not all(isinstance(f, int) for f in fields):
            raise CorruptMetadataError(f"Puffin blob field 'fields' must be a list of ints, got {fields!r}")
        if not isinstance(props, dict) or not all(isinstance(v, str) for v in props.values()):
            raise CorruptMetadataError(f"Puffin blob properties must map strings to strings, got {props!r}")
        for key in ("snapshot-id", "sequence-number", "offset", "length"):
            if not isinstance(obj[key], int) or isinstance(obj[key], bool):
                raise CorruptMetadataError(f"Puffin blob field {key!r} must be a long, got {obj[key]!r}")
        return BlobMetadata(
            type=str(obj["type"]), fields=tuple(fields), snapshot_id=obj["snapshot-id"],
            sequence_number=obj["sequence-number"], offset=obj["offset"], length=obj["length"],
            compression_codec=obj.get("compression-codec"), properties=dict(props),
        )


@dataclass(frozen=True)
class PuffinFooter:
    """The parsed footer: the blobs' metadata and the file's properties."""

    blobs: tuple[BlobMetadata, ...]
    properties: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"blobs": [b.to_json() for b in self.blobs]}
        if self.properties:
            out["properties"] = dict(self.properties)
        return out


@dataclass(frozen=True)
class Blob:
    """A blob to write: its payload and the metadata the writer cannot compute itself."""

    type: str
    data: bytes
    fields: tuple[int, ...] = ()
    snapshot_id: int = -1
    sequence_number: int = -1
    properties: dict[str, str] = field(default_factory=dict)


def write_puffin(blobs: list[Blob], properties: dict[str, str] | None = None) -> tuple[bytes, PuffinFooter]:
    """The bytes of a Puffin file holding ``blobs`` (uncompressed), and its footer.

    The footer's blob offsets are where each blob's payload starts in the returned bytes, which
    is what a deletion vector's manifest entry records as ``content_offset``.
    """
    parts = [MAGIC]
    position = len(MAGIC)
    metas = []
    for blob in blobs:
        metas.append(BlobMetadata(
            type=blob.type, fields=tuple(blob.fields), snapshot_id=blob.snapshot_id,
            sequence_number=blob.sequence_number, offset=position, length=len(blob.data),
            properties=dict(blob.properties),
        ))
        parts.append(blob.data)
        position += len(blob.data)
    footer = PuffinFooter(tuple(metas), dict(properties or {}))
    payload = json.dumps(footer.to_json(), separators=(",", ":")).encode("utf-8")
    parts += [MAGIC, payload, _TRAILER.pack(len(payload), bytes(4), MAGIC)]
    return b"".join(parts), footer


def footer_length(tail: bytes) -> int:
    """The whole footer's length (both magics included), from at least the file's last 12 bytes.

    Lets a reader fetch the trailer first and then exactly the footer, never the blobs.
    """
    if len(tail) < FOOTER_STRUCT_LENGTH:
        raise CorruptMetadataError("a Puffin file ends with a 12-byte footer trailer; the file is too short")
    size, _flags, magic = _TRAILER.unpack(tail[-FOOTER_STRUCT_LENGTH:])
    if magic != MAGIC:
        raise CorruptMetadataError(f"not a Puffin file: it ends with {magic!r}, not the magic {MAGIC!r}")
    if size < 0:
        raise CorruptMetadataError(f"a Puffin footer payload size cannot be negative ({size})")
    return len(MAGIC) + size + FOOTER_STRUCT_LENGTH


def read_footer(data: bytes) -> PuffinFooter:
    """Parse the footer at the end of ``data`` (the whole file, or at least its whole footer)."""
    total = footer_length(data)
    if len(data) < total:
        raise CorruptMetadataError(f"the Puffin footer is {total} bytes but only {len(data)} were given")
    footer = data[len(data) - total:]
    if footer[: len(MAGIC)] != MAGIC:
        raise CorruptMetadataError("the Puffin footer does not start with the magic PFA1")
    _, flags, _ = _TRAILER.unpack(footer[-FOOTER_STRUCT_LENGTH:])
    if flags[0] & FLAG_FOOTER_COMPRESSED:
        raise UnsupportedError("this Puffin file's footer is LZ4-compressed, which tablestore does not read yet")
    payload = footer[len(MAGIC): total - FOOTER_STRUCT_LENGTH]
    try:
        obj = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CorruptMetadataError(f"the Puffin footer payload is not UTF-8 JSON: {e}") from e
    if not isinstance(obj, dict) or not isinstance(obj.get("blobs"), list):
        raise CorruptMetadataError("the Puffin footer payload must be an object with a 'blobs' list")
    props = obj.get("properties") or {}
    if not isinstance(props, dict):
        raise CorruptMetadataError(f"Puffin file properties must be an object, got {props!r}")
    blobs = tuple(BlobMetadata.from_json(b) for b in obj["blobs"])
    return PuffinFooter(blobs, {str(k): str(v) for k, v in props.items()})


def read_blob(data: bytes, meta: BlobMetadata) -> bytes:
    """The payload of the blob ``meta`` describes, from the whole file's bytes."""
    if meta.compression_codec is not None:
        raise UnsupportedError(
            f"Puffin blob of type {meta.type!r} is compressed with {meta.compression_codec!r}, "
            "which tablestore does not read yet"
        )
    if meta.offset < len(MAGIC) or meta.offset + meta.length > len(data):
        raise CorruptMetadataError(
            f"Puffin blob at offset {meta.offset} of length {meta.length} lies outside the file ({len(data)} bytes)"
        )
    return data[meta.offset: meta.offset + meta.length]
