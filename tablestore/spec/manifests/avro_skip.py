"""Regular expressions that step over encoded Avro values (the filtered manifest decoder's fast path).

A selective scan rejects most manifest entries on their partition, and the rest of a rejected
entry (counts, bounds, split offsets: a few hundred bytes of varints and short byte strings) must
still be stepped over to find the next entry; Avro records carry no lengths. Stepping in generated
Python costs a bytecode per byte-ish decision. Here an Avro schema becomes one regular
expression that matches exactly one encoded value, so the C regex engine does the stepping with
a single ``match`` call per run of fields.

Avro varints are self-delimiting (``[\\x80-\\xff]*[\\x00-\\x7f]``) and every union branch, array
block count and byte-string length starts with a distinct byte, so the expressions are
deterministic and fail fast. Regular expressions cannot count, so counted things are spelled out
as alternations up to a bound: byte strings of at most ``MAX_BYTES`` bytes (bounds are truncated
to 16 bytes by default) and array blocks of at most ``MAX_ITEMS`` items. A value past a bound
makes the match fail, and the caller falls back to the generated Python skip for that record.
"""

from __future__ import annotations

import re
from typing import Any

from tablestore.spec.manifests.avro_names import PRIMITIVES, NamedTypes, type_name, unwrap

MAX_BYTES = 16
MAX_ITEMS = 16
VARINT = rb"[\x80-\xff]*+[\x00-\x7f]"


def _byte(value: int) -> bytes:
    return re.escape(bytes([value]))


def _counted(count: int, item: bytes) -> bytes:
    # Atomic groups: the encoding is unambiguous, so the engine need not keep backtracking points.
    return b"" if count == 0 else item if count == 1 else b"(?>%s){%d}" % (item, count)


# The zigzag varint of a length n < 64 is the single byte 2n.
_BYTES = b"(?>" + b"|".join(_byte(2 * n) + _counted(n, b".") for n in range(MAX_BYTES + 1)) + b")"


def skip_pattern(schema: Any, named: NamedTypes, ns: str | None) -> bytes | None:
    """A pattern matching one encoded value of ``schema``, or None for what it cannot express
    (unions past 63 branches, unknown types)."""
    schema = unwrap(schema)
    kind = type_name(schema)
    if kind in ("int", "long"):
        return VARINT
    if kind == "enum":
        named.register(schema, ns)
        return VARINT
    if kind == "null":
        return b""
    if kind == "boolean":
        return b"."
    if kind == "float":
        return b".{4}"
    if kind == "double":
        return b".{8}"
    if kind == "fixed":
        named.register(schema, ns)
        return b".{%d}" % int(schema["size"])
    if kind in ("bytes", "string"):
        return _BYTES
    if kind == "union":
        if len(schema) > 63:
            return None
        branches = []
        for i, branch in enumerate(schema):
            pattern = skip_pattern(branch, named, ns)
            if pattern is None:
                return None
            branches.append(_byte(2 * i) + pattern)
        return b"(?:" + b"|".join(branches) + b")"
    if kind in ("array", "map"):
        if kind == "map":
            values = skip_pattern(schema["values"], named, ns)
            item = None if values is None else _BYTES + values
        else:
            item = skip_pattern(schema["items"], named, ns)
        if item is None:
            return None
        # Blocks of 1..MAX_ITEMS items (the count byte picks the branch), then the 0 that ends the array.
        blocks = b"|".join(_byte(2 * n) + _counted(n, item) for n in range(1, MAX_ITEMS + 1))
        return b"(?:" + blocks + b")*\x00"
    if kind == "record":
        inner = named.register(schema, ns)
        parts = []
        for f in schema.get("fields", []):
            pattern = skip_pattern(f["type"], named, inner)
            if pattern is None:
                return None
            parts.append(pattern)
        return b"".join(parts)
    if isinstance(schema, str) and schema not in PRIMITIVES:
        return skip_pattern(named.resolve(schema, ns), named, ns)
    return None


def long_string(schema: Any) -> bool:
    """A field that is itself a string or bytes (a file path, say) is usually longer than the
    pattern's bound: such fields are stepped over in Python, which costs one varint."""
    return type_name(unwrap(schema)) in ("string", "bytes")


def compile_skip(patterns: list[bytes]) -> Any:
    """The ``match`` of the concatenation of ``patterns`` (``.`` matches any byte)."""
    return re.compile(b"".join(patterns), re.DOTALL).match
