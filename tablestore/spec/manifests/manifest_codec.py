"""A small, fast Avro object-container codec for manifests and manifest lists.

Manifests are decoded on the scan-planning hot path and a manifest entry holds half a dozen
int-keyed maps (arrays of key/value records in Avro). Generic Avro readers build one Python
object per map item and dispatch on the schema per value; fastavro takes 100+ µs per entry
for a ten-column table. Here, each schema is compiled once into straight-line Python source
(varint fast paths inlined, ``logicalType: map`` arrays decoded straight into dicts), which is
several times faster. The encoder is generated the same way.

Logical types are ignored: values stay raw (int days, int micros, unscaled-decimal bytes,
16-byte uuids), which is what Iceberg's internal representation needs anyway.

The generated code is debuggable: each function is compiled under a file name of its own,
``<avro decoder NAME HASH>`` (NAME: the record's name, HASH: of its schema), whose source is
registered in ``linecache``, so a traceback through it shows the generated line that failed;
``codec_source(schema)`` returns that source.
"""

from __future__ import annotations

import bz2
import hashlib
import json
import linecache
import lzma
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from tablestore.errors import CorruptMetadataError, ValidationError
from tablestore.spec.manifests import avro_skip
from tablestore.spec.manifests.avro_names import PRIMITIVES, AvroSchema, NamedTypes, full_name, type_name, unwrap

Decoder = Callable[[bytes, int], list[Any]]
Encoder = Callable[[bytearray, Any], None]

_MAGIC = b"Obj\x01"
_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")
# Uncompressed bytes per block; Java's Avro writer uses a similar sync interval.
BLOCK_SIZE = 64 * 1024


# -- varints -------------------------------------------------------------------------------------


def _varint_tail(buf: bytes, pos: int, first: int) -> tuple[int, int]:
    """Finish a varint whose first byte (``first``, >= 0x80) was already consumed."""
    n = first & 0x7F
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, pos
        shift += 7


def read_long(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    pos += 1
    n, pos = (b, pos) if b < 0x80 else _varint_tail(buf, pos, b)
    return (n >> 1) ^ -(n & 1), pos


def _varint_bytes(n: int) -> bytes:
    """The varint of an already zigzag-encoded (non-negative) value."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def write_long(out: bytearray, value: int) -> None:
    n = (value << 1) ^ (value >> 63)
    if n < 0x80:
        out.append(n)
    else:
        out += _varint_bytes(n)


# -- schema compilation --------------------------------------------------------------------------


class _Source:
    """Accumulates generated source with unique variable names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.counter = 0
        self.consts: dict[str, Any] = {}
        self.counters: list[str] = []  # locals set to 0 at the top of the generated function

    def var(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self, value: Any) -> str:
        name = self.var("c")
        self.consts[name] = value
        return name

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)


def _map_pair(schema: dict[str, Any]) -> bool:
    """Iceberg's int-keyed map: an array of two-field records marked ``logicalType: map``."""
    items = unwrap(schema.get("items"))
    return (
        schema.get("logicalType") == "map"
        and isinstance(items, dict)
        and items.get("type") == "record"
        and len(items.get("fields", [])) == 2
    )


def _gen_read(
    src: _Source, schema: AvroSchema, target: str, indent: int, named: NamedTypes, ns: str | None
) -> None:
    """Emit code that decodes one value of ``schema`` from ``buf`` at ``pos`` into ``target``."""
    schema = unwrap(schema)
    kind = type_name(schema)
    e = src.emit
    if kind in ("int", "long"):
        # One- and two-byte varints (values up to +-8191) are decoded inline.
        e(indent, "b = buf[pos]; pos += 1")
        e(indent, "if b < 128: n = b")
        e(indent, "else:")
        e(indent + 1, "c = buf[pos]; pos += 1")
        e(indent + 1, "if c < 128: n = (b & 127) | (c << 7)")
        e(indent + 1, "else: n, pos = _varint_tail(buf, pos - 1, b)")
        e(indent, f"{target} = (n >> 1) ^ -(n & 1)")
    elif kind == "null":
        e(indent, f"{target} = None")
    elif kind == "boolean":
        e(indent, f"{target} = buf[pos] != 0; pos += 1")
    elif kind == "float":
        e(indent, f"{target} = _FLOAT.unpack_from(buf, pos)[0]; pos += 4")
    elif kind == "double":
        e(indent, f"{target} = _DOUBLE.unpack_from(buf, pos)[0]; pos += 8")
    elif kind in ("bytes", "string"):
        size = src.var("n")
        _gen_read(src, "long", size, indent, named, ns)
        decode = ".decode('utf-8')" if kind == "string" else ""
        e(indent, f"{target} = buf[pos:pos + {size}]{decode}; pos += {size}")
    elif kind == "fixed":
        named.register(schema, ns)
        width = int(schema["size"])
        e(indent, f"{target} = buf[pos:pos + {width}]; pos += {width}")
    elif kind == "enum":
        named.register(schema, ns)
        symbols = src.const(tuple(schema["symbols"]))
        idx = src.var("i")
        _gen_read(src, "long", idx, indent, named, ns)
        e(indent, f"{target} = {symbols}[{idx}]")
    elif kind == "union":
        if len(schema) > 63:
            raise CorruptMetadataError("Avro unions of more than 63 branches are not supported")
        # The branch index of a small union is a one-byte varint: 2 * index after zigzag.
        idx = src.var("u")
        e(indent, f"{idx} = buf[pos]; pos += 1")
        for i, branch in enumerate(schema):
            e(indent, f"{'if' if i == 0 else 'elif'} {idx} == {2 * i}:")
            _gen_read(src, branch, target, indent + 1, named, ns)
        e(indent, f"else: raise _Corrupt('invalid union branch byte %d' % {idx})")
    elif kind in ("array", "map"):
        count, item = src.var("n"), src.var("x")
        pair = kind == "array" and _map_pair(schema)
        e(indent, f"{target} = {{}}" if pair or kind == "map" else f"{target} = []")
        e(indent, "while True:")
        _gen_read(src, "long", count, indent + 1, named, ns)
        e(indent + 1, f"if {count} == 0: break")
        e(indent + 1, f"if {count} < 0:")
        e(indent + 2, f"{count} = -{count}")
        _gen_read(src, "long", src.var("s"), indent + 2, named, ns)  # block size in bytes
        e(indent + 1, f"for _ in range({count}):")
        if pair:
            rec = unwrap(schema["items"])
            named.register(rec, ns)
            key, value = src.var("k"), src.var("w")
            _gen_read(src, rec["fields"][0]["type"], key, indent + 2, named, ns)
            _gen_read(src, rec["fields"][1]["type"], value, indent + 2, named, ns)
            e(indent + 2, f"{target}[{key}] = {value}")
        elif kind == "map":
            key = src.var("k")
            _gen_read(src, "string", key, indent + 2, named, ns)
            _gen_read(src, schema["values"], item, indent + 2, named, ns)
            e(indent + 2, f"{target}[{key}] = {item}")
        else:
            _gen_read(src, schema["items"], item, indent + 2, named, ns)
            e(indent + 2, f"{target}.append({item})")
    elif kind == "record":
        inner_ns = named.register(schema, ns)
        full, _ = full_name(schema, ns)
        if full in named.active:
            raise CorruptMetadataError(f"recursive Avro record {full!r} is not supported in manifests")
        named.active.add(full)
        parts = []
        for f in schema.get("fields", []):
            value = src.var()
            _gen_read(src, f["type"], value, indent, named, inner_ns)
            parts.append(f"{f['name']!r}: {value}")
        named.active.discard(full)
        e(indent, f"{target} = {{{', '.join(parts)}}}")
    elif isinstance(schema, str) and schema not in PRIMITIVES:
        _gen_read(src, named.resolve(schema, ns), target, indent, named, ns)
    else:
        raise CorruptMetadataError(f"unsupported Avro type {kind!r}")


def _gen_skip(src: _Source, schema: AvroSchema, indent: int, named: NamedTypes, ns: str | None) -> None:
    """Emit code that steps ``pos`` over one value of ``schema`` without building it."""
    schema = unwrap(schema)
    kind = type_name(schema)
    e = src.emit
    if kind in ("int", "long", "enum"):
        if kind == "enum":
            named.register(schema, ns)
        e(indent, "while buf[pos] >= 128: pos += 1")
        e(indent, "pos += 1")
    elif kind in ("null",):
        pass
    elif kind == "boolean":
        e(indent, "pos += 1")
    elif kind == "float":
        e(indent, "pos += 4")
    elif kind == "double":
        e(indent, "pos += 8")
    elif kind in ("bytes", "string"):
        size = src.var("n")
        _gen_read(src, "long", size, indent, named, ns)
        e(indent, f"pos += {size}")
    elif kind == "fixed":
        named.register(schema, ns)
        e(indent, f"pos += {int(schema['size'])}")
    elif kind == "union":
        if len(schema) > 63:
            raise CorruptMetadataError("Avro unions of more than 63 branches are not supported")
        idx = src.var("u")
        e(indent, f"{idx} = buf[pos]; pos += 1")
        branches = [(i, b) for i, b in enumerate(schema) if type_name(unwrap(b)) != "null"]
        for n, (i, branch) in enumerate(branches):
            e(indent, f"{'if' if n == 0 else 'elif'} {idx} == {2 * i}:")
            _gen_skip(src, branch, indent + 1, named, ns)
    elif kind in ("array", "map"):
        count = src.var("n")
        e(indent, "while True:")
        _gen_read(src, "long", count, indent + 1, named, ns)
        e(indent + 1, f"if {count} == 0: break")
        e(indent + 1, f"if {count} < 0:")
        size = src.var("s")
        _gen_read(src, "long", size, indent + 2, named, ns)
        e(indent + 2, f"pos += {size}; continue")  # a block with its byte size: jump over it
        varints = _varints_per_item(schema, named, ns) if kind == "array" else None
        if varints is not None:
            # One regex match steps over every varint of the block (map<int, long> counts).
            e(indent + 1, f"k = {count} * {varints}")
            e(indent + 1, "pos = (_RUNS[k] if k < 64 else _varint_run(k))(buf, pos).end()")
            return
        e(indent + 1, f"for _ in range({count}):")
        if kind == "map":
            _gen_skip(src, "string", indent + 2, named, ns)
            _gen_skip(src, schema["values"], indent + 2, named, ns)
        else:
            _gen_skip(src, schema["items"], indent + 2, named, ns)
    elif kind == "record":
        inner_ns = named.register(schema, ns)
        for f in schema.get("fields", []):
            _gen_skip(src, f["type"], indent, named, inner_ns)
    elif isinstance(schema, str) and schema not in PRIMITIVES:
        _gen_skip(src, named.resolve(schema, ns), indent, named, ns)
    else:
        raise CorruptMetadataError(f"unsupported Avro type {kind!r}")


FilteredDecoder = Callable[[bytes, int, Callable[[Any], bool], dict[Any, bool]], list[Any]]
_VARINT_RUNS: dict[int, re.Pattern[bytes]] = {}


def _varint_run(count: int) -> Callable[[bytes, int], re.Match[bytes]]:
    """``match(buf, pos)`` of a pattern spanning ``count`` varints (its ``end()`` is past them;
    a truncated block makes it None, and ``.end()`` then raises AttributeError)."""
    pattern = _VARINT_RUNS.get(count)
    if pattern is None:
        pattern = _VARINT_RUNS[count] = re.compile(rb"(?:[\x80-\xff]*[\x00-\x7f]){%d}" % count)
    return pattern.match  # type: ignore[return-value]


_RUNS = [_varint_run(k) for k in range(64)]


def _varints_per_item(schema: dict[str, Any], named: NamedTypes, ns: str | None) -> int | None:
    """How many varints one item of an array is, when its items are ints, longs or records of them."""
    item = unwrap(schema.get("items"))
    if isinstance(item, str) and item not in PRIMITIVES:
        item = named.resolve(item, ns)
    kind = type_name(item)
    if kind in ("int", "long"):
        return 1
    if kind == "record" and all(type_name(unwrap(f["type"])) in ("int", "long") for f in item.get("fields", [])):
        named.register(item, ns)
        return len(item.get("fields", []))
    return None


def _gen_fast_skip(src: _Source, fields: list[tuple[AvroSchema, str | None]], indent: int, named: NamedTypes) -> None:
    """Step over consecutive fields: runs of them with one regular-expression match each (see
    ``avro_skip``), in generated Python where a match fails (a value past the patterns' bounds)
    and for plain string fields. A run whose pattern failed 32 times in a block is no longer tried
    in that block (a table whose stats are all past the bounds pays little for the attempt)."""
    run: list[tuple[AvroSchema, str | None, bytes]] = []

    def flush() -> None:
        if not run:
            return
        match, misses = src.const(avro_skip.compile_skip([p for _, _, p in run])), src.var("miss")
        src.counters.append(misses)
        m = src.var("m")
        src.emit(indent, f"{m} = {match}(buf, pos) if {misses} < 32 else None")
        src.emit(indent, f"if {m} is not None: pos = {m}.end()")
        src.emit(indent, "else:")
        src.emit(indent + 1, f"{misses} += 1")
        for schema, ns, _ in run:
            _gen_skip(src, schema, indent + 1, named, ns)
        run.clear()

    for schema, ns in fields:
        pattern = None if avro_skip.long_string(schema) else avro_skip.skip_pattern(schema, named, ns)
        if pattern is None:
            flush()
            _gen_skip(src, schema, indent, named, ns)
        else:
            run.append((schema, ns, pattern))
    flush()


def compile_filtered_decoder(schema: AvroSchema, outer: str, inner: str) -> FilteredDecoder:
    """A function ``(block, count, keep, verdicts) -> records`` that decodes the records of
    ``schema`` for which ``keep(record[outer][inner])`` is true, and steps over the others
    without building them: the manifest entries of other partitions cost a scan of their
    bytes, nothing more. A record-typed ``inner`` reaches ``keep`` as the tuple of its values;
    ``verdicts`` caches keep's answer per value (share it across blocks).

    Each record is first stepped through up to ``record[outer][inner]``, which alone is decoded;
    only a kept record is then decoded in full, from its start.
    """
    top = unwrap(schema)
    if type_name(top) != "record":
        raise CorruptMetadataError("a filtered Avro decoder needs a record schema")
    named = NamedTypes()
    top_ns = named.register(top, None)
    top_fields = top.get("fields", [])
    position = next((i for i, f in enumerate(top_fields) if f["name"] == outer), None)
    nested = unwrap(top_fields[position]["type"]) if position is not None else None
    if position is None or nested is None or type_name(nested) != "record":
        raise CorruptMetadataError(f"the Avro records have no record field {outer!r}")
    nested_ns = named.register(nested, top_ns)
    nested_fields = nested.get("fields", [])
    inner_at = next((j for j, g in enumerate(nested_fields) if g["name"] == inner), None)
    if inner_at is None:
        raise CorruptMetadataError(f"the Avro field {outer!r} has no field {inner!r}")
    src = _Source()
    e = src.emit
    e(0, "def decode(buf, count, keep, verdicts):")
    e(1, "pos = 0")
    e(1, "out = []")
    e(1, "append = out.append")
    e(1, "for _ in range(count):")
    e(2, "start = pos")
    _gen_fast_skip(src, [(f["type"], top_ns) for f in top_fields[:position]]
                   + [(g["type"], nested_ns) for g in nested_fields[:inner_at]], 2, named)
    probe = src.var("p")
    probed = unwrap(nested_fields[inner_at]["type"])
    # Verdicts are cached per encoded partition (the encoding is canonical), so a partition
    # already decided is neither decoded nor evaluated again.
    e(2, "probe_start = pos")
    _gen_fast_skip(src, [(probed, nested_ns)], 2, named)
    e(2, "verdict = verdicts.get(buf[probe_start:pos])")
    e(2, "if verdict is None:")
    e(3, "probe_end = pos")
    e(3, "pos = probe_start")
    if type_name(probed) == "record":
        # The probed record reaches keep as the tuple of its values.
        values = []
        for g in probed.get("fields", []):
            value = src.var()
            _gen_read(src, g["type"], value, 3, named, named.register(probed, nested_ns))
            values.append(value)
        e(3, f"{probe} = ({', '.join(values)}{',' if len(values) == 1 else ''})")
    else:
        _gen_read(src, probed, probe, 3, named, nested_ns)
    e(3, "if pos != probe_end: raise _Corrupt('inconsistent partition encoding')")
    e(3, f"verdict = verdicts[buf[probe_start:pos]] = bool(keep({probe}))")
    e(2, "if not verdict:")
    _gen_fast_skip(src, [(g["type"], nested_ns) for g in nested_fields[inner_at + 1:]]
                   + [(f["type"], top_ns) for f in top_fields[position + 1:]], 3, named)
    e(3, "continue")
    e(2, "pos = start")
    _gen_read(src, top, "rec", 2, NamedTypes(), None)
    e(2, "append(rec)")
    e(1, "if pos != len(buf): raise _Corrupt('block has %d trailing bytes' % (len(buf) - pos))")
    e(1, "return out")
    src.lines[1:1] = [f"    {c} = 0" for c in src.counters]
    namespace: dict[str, Any] = {
        "_varint_tail": _varint_tail, "_RUNS": _RUNS, "_varint_run": _varint_run, "_FLOAT": _FLOAT, "_DOUBLE": _DOUBLE,
        "_Corrupt": CorruptMetadataError, **src.consts,
    }
    decoder: FilteredDecoder = _load(src, namespace, "filtered decoder", [schema, outer, inner], "decode")
    return decoder


def compile_decoder(schema: AvroSchema) -> Decoder:
    """A function ``(block, count) -> records`` decoding ``count`` records of ``schema``."""
    src = _Source()
    src.emit(0, "def decode(buf, count):")
    src.emit(1, "pos = 0")
    src.emit(1, "out = []")
    src.emit(1, "append = out.append")
    src.emit(1, "for _ in range(count):")
    _gen_read(src, schema, "rec", 2, NamedTypes(), None)
    src.emit(2, "append(rec)")
    src.emit(1, "if pos != len(buf): raise _Corrupt('block has %d trailing bytes' % (len(buf) - pos))")
    src.emit(1, "return out")
    namespace: dict[str, Any] = {
        "_varint_tail": _varint_tail, "_FLOAT": _FLOAT, "_DOUBLE": _DOUBLE, "_Corrupt": CorruptMetadataError,
        **src.consts,
    }
    decoder: Decoder = _load(src, namespace, "decoder", schema, "decode")
    return decoder


def _gen_write(
    src: _Source, schema: AvroSchema, value: str, indent: int, named: NamedTypes, ns: str | None
) -> None:
    """Emit code that appends the encoding of ``value`` (an expression) to ``out``."""
    schema = unwrap(schema)
    kind = type_name(schema)
    e = src.emit
    if kind in ("int", "long"):
        z = src.var("z")
        e(indent, f"{z} = ({value} << 1) ^ ({value} >> 63)")
        e(indent, f"if {z} < 128: out.append({z})")
        e(indent, f"else: out += _varint_bytes({z})")
    elif kind == "null":
        pass
    elif kind == "boolean":
        e(indent, f"out.append(1 if {value} else 0)")
    elif kind == "float":
        e(indent, f"out += _FLOAT.pack({value})")
    elif kind == "double":
        e(indent, f"out += _DOUBLE.pack({value})")
    elif kind in ("bytes", "string"):
        data = src.var("d")
        e(indent, f"{data} = {value}.encode('utf-8')" if kind == "string" else f"{data} = bytes({value})")
        _gen_write(src, "long", f"len({data})", indent, named, ns)
        e(indent, f"out += {data}")
    elif kind == "fixed":
        named.register(schema, ns)
        size = int(schema["size"])
        message = f"'a fixed[{size}] value has %d bytes' % len({value})"
        e(indent, f"if len({value}) != {size}: raise _Invalid({message})")
        e(indent, f"out += {value}")
    elif kind == "union":
        non_null = [i for i, b in enumerate(schema) if type_name(unwrap(b)) != "null"]
        nulls = [i for i, b in enumerate(schema) if type_name(unwrap(b)) == "null"]
        if len(non_null) > 1:
            raise CorruptMetadataError("the manifest writer only supports unions of null and one type")
        if nulls:
            e(indent, f"if {value} is None: out.append({2 * nulls[0]})")
            if non_null:
                e(indent, "else:")
        if non_null:
            inner = indent + 1 if nulls else indent
            e(inner, f"out.append({2 * non_null[0]})")
            _gen_write(src, schema[non_null[0]], value, inner, named, ns)
    elif kind == "array":
        items = src.var("a")
        e(indent, f"{items} = {value}")
        e(indent, f"if {items}:")
        _gen_write(src, "long", f"len({items})", indent + 1, named, ns)
        if _map_pair(schema):
            rec = unwrap(schema["items"])
            named.register(rec, ns)
            key, val = src.var("k"), src.var("w")
            e(indent + 1, f"for {key}, {val} in {items}.items():")
            _gen_write(src, rec["fields"][0]["type"], key, indent + 2, named, ns)
            _gen_write(src, rec["fields"][1]["type"], val, indent + 2, named, ns)
        else:
            item = src.var("x")
            e(indent + 1, f"for {item} in {items}:")
            _gen_write(src, schema["items"], item, indent + 2, named, ns)
        e(indent, "out.append(0)")
    elif kind == "map":
        items = src.var("a")
        e(indent, f"{items} = {value}")
        e(indent, f"if {items}:")
        _gen_write(src, "long", f"len({items})", indent + 1, named, ns)
        key, val = src.var("k"), src.var("w")
        e(indent + 1, f"for {key}, {val} in {items}.items():")
        _gen_write(src, "string", key, indent + 2, named, ns)
        _gen_write(src, schema["values"], val, indent + 2, named, ns)
        e(indent, "out.append(0)")
    elif kind == "record":
        inner_ns = named.register(schema, ns)
        rec = src.var("r")
        e(indent, f"{rec} = {value}")
        for f in schema.get("fields", []):
            field_value = src.var("f")
            e(indent, f"{field_value} = {rec}.get({f['name']!r})")
            _gen_write(src, f["type"], field_value, indent, named, inner_ns)
    elif isinstance(schema, str) and schema not in PRIMITIVES:
        _gen_write(src, named.resolve(schema, ns), value, indent, named, ns)
    else:
        raise CorruptMetadataError(f"the manifest writer does not support Avro type {kind!r}")


def compile_encoder(schema: AvroSchema) -> Encoder:
    """A function ``(out, record)`` appending the encoding of one record of ``schema``."""
    src = _Source()
    src.emit(0, "def encode(out, rec):")
    _gen_write(src, schema, "rec", 1, NamedTypes(), None)
    src.emit(1, "return None")

    namespace: dict[str, Any] = {
        "_varint_bytes": _varint_bytes, "_FLOAT": _FLOAT, "_DOUBLE": _DOUBLE, "_Invalid": ValidationError,
        **src.consts,
    }
    encoder: Encoder = _load(src, namespace, "encoder", schema, "encode")
    return encoder


# The source of every generated function by its file name (what tracebacks name): at most a few
# hundred, as the caches below hold at most 256 functions each.
_GENERATED: dict[str, str] = {}
_MAX_GENERATED = 1024


def _load(src: _Source, namespace: dict[str, Any], kind: str, key: Any, function: str) -> Any:
    """Compile ``src`` under a file name naming ``kind`` and the schema, with its text in
    ``linecache`` (tracebacks through the function show its lines), and return ``function``."""
    text = "\n".join(src.lines) + "\n"
    top = unwrap(key[0] if kind == "filtered decoder" else key)
    name = top.get("name", type_name(top)) if isinstance(top, dict) else type_name(top)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    filename = f"<avro {kind} {name} {digest}>"
    if len(_GENERATED) >= _MAX_GENERATED:
        for old in list(_GENERATED)[: _MAX_GENERATED // 2]:
            del _GENERATED[old]
            linecache.cache.pop(old, None)
    _GENERATED[filename] = text
    # mtime None: linecache.checkcache keeps the entry (there is no file to compare it with).
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    exec(compile(text, filename, "exec"), namespace)
    return namespace[function]


def codec_source(schema: AvroSchema, kind: str = "decoder", *, outer: str | None = None,
                 inner: str | None = None) -> str:
    """The Python source generated for ``schema``: its ``decoder`` (the default), its
    ``encoder``, or its ``filtered`` decoder on ``record[outer][inner]``. It is the text a
    traceback through the codec quotes, under the file name ``<avro KIND NAME HASH>``."""
    function: Callable[..., Any]
    if kind == "decoder":
        function = compile_decoder(schema)
    elif kind == "encoder":
        function = compile_encoder(schema)
    elif kind == "filtered":
        if outer is None or inner is None:
            raise ValueError("codec_source(schema, 'filtered', outer=..., inner=...) needs the field it filters on")
        function = compile_filtered_decoder(schema, outer, inner)
    else:
        raise ValueError(f"kind must be 'decoder', 'encoder' or 'filtered', not {kind!r}")
    return _GENERATED[function.__code__.co_filename]


_DECODERS: dict[str, Decoder] = {}
_FILTERED_DECODERS: dict[str, FilteredDecoder] = {}
_ENCODERS: dict[str, Encoder] = {}


def encoder_for(schema: AvroSchema) -> Encoder:
    """A cached encoder: compiling one costs more than encoding a commit's manifest entries,
    and the manifests of one table share a handful of schemas."""
    key = json.dumps(schema, sort_keys=True)
    found = _ENCODERS.get(key)
    if found is None:
        if len(_ENCODERS) > 256:
            _ENCODERS.clear()
        found = _ENCODERS[key] = compile_encoder(schema)
    return found


def decoder_for(schema: AvroSchema) -> Decoder:
    """A cached decoder; manifests of one table share a handful of schemas."""
    key = json.dumps(schema, sort_keys=True)
    found = _DECODERS.get(key)
    if found is None:
        if len(_DECODERS) > 256:
            _DECODERS.clear()
        found = _DECODERS[key] = compile_decoder(schema)
    return found


# -- the container file --------------------------------------------------------------------------


def read_header(data: bytes, what: str) -> tuple[dict[str, bytes], int]:
    """The metadata map of an Avro container file and the offset just past its sync marker."""
    if data[:4] != _MAGIC:
        raise CorruptMetadataError(f"{what} is not an Avro file (bad magic bytes)")
    meta: dict[str, bytes] = {}
    try:
        pos = 4
        while True:
            count, pos = read_long(data, pos)
            if count == 0:
                break
            if count < 0:
                count = -count
                _, pos = read_long(data, pos)
            for _ in range(count):
                klen, pos = read_long(data, pos)
                key = data[pos:pos + klen].decode("utf-8")
                pos += klen
                vlen, pos = read_long(data, pos)
                meta[key] = data[pos:pos + vlen]
                pos += vlen
    except (IndexError, UnicodeDecodeError) as e:
        raise CorruptMetadataError(f"{what} has a truncated or invalid Avro header") from e
    if pos + 16 > len(data):
        raise CorruptMetadataError(f"{what} has a truncated Avro header")
    return meta, pos + 16


def _decompress(codec: str, payload: bytes, what: str) -> bytes:
    if codec == "null":
        return payload
    if codec == "deflate":
        return zlib.decompress(payload, -15)
    if codec == "bzip2":
        return bz2.decompress(payload)
    if codec == "xz":
        return lzma.decompress(payload)
    if codec == "snappy":  # the block is followed by a CRC32 of the uncompressed data
        try:
            import cramjam

            return bytes(cramjam.snappy.decompress_raw(payload[:-4]))
        except ImportError:
            pass
    if codec == "zstandard":
        try:
            import zstandard

            return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(payload))
        except ImportError:
            pass
    raise CorruptMetadataError(f"{what} uses the Avro codec {codec!r}, which is not available")


def read_schema(data: bytes, what: str) -> tuple[dict[str, bytes], AvroSchema]:
    meta, _ = read_header(data, what)
    try:
        schema = json.loads(meta["avro.schema"])
    except (KeyError, ValueError) as e:
        raise CorruptMetadataError(f"{what} has no valid Avro schema in its header") from e
    return meta, schema


def iter_blocks(data: bytes, what: str) -> Iterator[tuple[bytes, int]]:
    """The decompressed data blocks of a container with their record counts."""
    meta, pos = read_header(data, what)
    sync = data[pos - 16:pos]
    codec = meta.get("avro.codec", b"null").decode("utf-8") or "null"
    end = len(data)
    while pos < end:
        try:
            count, pos = read_long(data, pos)
            size, pos = read_long(data, pos)
        except IndexError as e:
            raise CorruptMetadataError(f"{what} is truncated") from e
        payload = data[pos:pos + size]
        pos += size
        if len(payload) != size or data[pos:pos + 16] != sync:
            raise CorruptMetadataError(f"{what} is truncated or has a bad sync marker")
        pos += 16
        try:
            yield _decompress(codec, payload, what), count
        except (zlib.error, OSError, lzma.LZMAError) as e:
            raise CorruptMetadataError(f"{what} has a block that cannot be decompressed: {e}") from e


def filtered_decoder_for(schema: AvroSchema, outer: str, inner: str) -> FilteredDecoder:
    key = json.dumps([schema, outer, inner], sort_keys=True)
    found = _FILTERED_DECODERS.get(key)
    if found is None:
        if len(_FILTERED_DECODERS) > 256:
            _FILTERED_DECODERS.clear()
        found = _FILTERED_DECODERS[key] = compile_filtered_decoder(schema, outer, inner)
    return found


def read_records(
    data: bytes, schema: AvroSchema, what: str,
    keep: tuple[str, str, Callable[[Any], bool]] | None = None,
) -> list[Any]:
    """Decode every record of the container ``data`` with the (compatible) ``schema``; with
    ``keep = (outer, inner, predicate)`` only the records whose ``record[outer][inner]`` the
    predicate accepts (the others are skipped undecoded)."""
    decode: Decoder
    if keep is not None:
        filtered = filtered_decoder_for(schema, keep[0], keep[1])
        predicate = keep[2]
        verdicts: dict[Any, bool] = {}

        def decode_kept(block: bytes, count: int) -> list[Any]:
            return filtered(block, count, predicate, verdicts)

        decode = decode_kept
    else:
        decode = decoder_for(schema)
    out: list[Any] = []
    for block, count in iter_blocks(data, what):
        try:
            out.extend(decode(block, count))
        except CorruptMetadataError as e:
            raise CorruptMetadataError(f"cannot read {what}: {e}") from e
        except (IndexError, ValueError, AttributeError, struct.error, UnicodeDecodeError) as e:
            raise CorruptMetadataError(f"cannot read {what}: malformed Avro data ({type(e).__name__})") from e
    return out


def write_container(
    schema: AvroSchema, records: Iterable[Any], meta: dict[str, str], codec: str = "deflate"
) -> bytes:
    """An Avro container file of ``records``; ``meta`` is stored as the file's key-value metadata."""
    if codec not in ("null", "deflate"):
        raise CorruptMetadataError(f"the manifest writer supports the null and deflate codecs, not {codec!r}")
    encode = encoder_for(schema)
    header = {**{k: v.encode("utf-8") for k, v in meta.items()},
              "avro.schema": json.dumps(schema).encode("utf-8"), "avro.codec": codec.encode("utf-8")}
    sync = os.urandom(16)
    out = bytearray(_MAGIC)
    write_long(out, len(header))
    for key, value in header.items():
        encoded = key.encode("utf-8")
        write_long(out, len(encoded))
        out += encoded
        write_long(out, len(value))
        out += value
    write_long(out, 0)
    out += sync

    block = bytearray()
    count = 0

    def flush() -> None:
        nonlocal block, count
        if count:
            if codec == "deflate":
                compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
                payload = compressor.compress(bytes(block)) + compressor.flush()
            else:
                payload = bytes(block)
            write_long(out, count)
            write_long(out, len(payload))
            out.extend(payload)
            out.extend(sync)
        block = bytearray()
        count = 0

    for record in records:
        encode(block, record)
        count += 1
        if len(block) >= BLOCK_SIZE:
            flush()
    flush()
    return bytes(out)
