"""Avro schemas by name: the type of a schema, and the named types (records, enums, fixed) a
schema defines, for later references by name. Shared by the manifest codec
(``manifest_codec``) and the skip patterns it compiles (``avro_skip``)."""

from __future__ import annotations

from typing import Any

from tablestore.errors import CorruptMetadataError

AvroSchema = Any
PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def type_name(schema: AvroSchema) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        t = schema.get("type")
        if isinstance(t, (dict, list)):  # {"type": {...}} wraps a schema
            return type_name(t)
        return str(t)
    raise CorruptMetadataError(f"invalid Avro schema {schema!r}")


def unwrap(schema: AvroSchema) -> AvroSchema:
    while isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
        schema = schema["type"]
    return schema


def full_name(schema: dict[str, Any], namespace: str | None) -> tuple[str, str | None]:
    name = schema.get("name", "")
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    ns = schema.get("namespace", namespace)
    return (f"{ns}.{name}" if ns else name), ns


class NamedTypes:
    """Named types (records, enums, fixed) seen so far, for later references by name."""

    def __init__(self) -> None:
        self.types: dict[str, AvroSchema] = {}
        self.active: set[str] = set()

    def register(self, schema: dict[str, Any], namespace: str | None) -> str | None:
        full, ns = full_name(schema, namespace)
        self.types[full] = schema
        self.types.setdefault(schema.get("name", ""), schema)
        return ns

    def resolve(self, name: str, namespace: str | None) -> AvroSchema:
        for candidate in ((f"{namespace}.{name}" if namespace and "." not in name else name), name):
            if candidate in self.types:
                return self.types[candidate]
        raise CorruptMetadataError(f"unknown Avro type name {name!r}")


__all__ = ["PRIMITIVES", "AvroSchema", "NamedTypes", "full_name", "type_name", "unwrap"]
