"""Name mappings: how data files written without Iceberg field ids map onto a table's fields.

Files written by Hive, plain pyarrow or Spark without Iceberg carry column names but no field
ids. Iceberg readers then look the names up in the table property
``schema.name-mapping.default``, a JSON list of ``{"field-id": 1, "names": ["id"], "fields": [...]}``
(spec: "Column Projection"). Nested children are listed under ``fields``: a struct's by their
names, a list's element as ``element``, a map's ``key`` and ``value``.

    >>> from tablestore.spec.schemas.types import LongType, NestedField
    >>> from tablestore.spec.schemas.schema import PARQUET_FIELD_ID, Schema
    >>> mapping = NameMapping.from_schema(Schema((NestedField(1, "id", LongType()),)))
    >>> mapping.to_json()
    '[{"field-id": 1, "names": ["id"]}]'
    >>> mapping.find("ID").field_id
    1
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tablestore.errors import SchemaError
from tablestore.spec.schemas.schema import PARQUET_FIELD_ID, Schema
from tablestore.spec.schemas.types import IcebergType, ListType, MapType, NestedField, StructType

DEFAULT_NAME_MAPPING = "schema.name-mapping.default"


@dataclass(frozen=True)
class MappedField:
    """One entry: the names a field went by, its id (None: read as missing) and its children."""

    names: tuple[str, ...]
    field_id: int | None = None
    fields: tuple[MappedField, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.field_id is not None:
            out["field-id"] = self.field_id
        out["names"] = list(self.names)
        if self.fields:
            out["fields"] = [f.to_json() for f in self.fields]
        return out

    @staticmethod
    def from_json(obj: Any) -> MappedField:
        if not isinstance(obj, dict) or not isinstance(obj.get("names"), list):
            raise SchemaError(f"a name mapping entry needs a list of names, got {obj!r}")
        field_id = obj.get("field-id")
        if field_id is not None and (isinstance(field_id, bool) or not isinstance(field_id, int)):
            raise SchemaError(f"a name mapping field-id must be an integer, got {field_id!r}")
        children = obj.get("fields") or []
        return MappedField(tuple(str(n) for n in obj["names"]), field_id,
                           tuple(MappedField.from_json(c) for c in children))

    def child(self, name: str) -> MappedField | None:
        return _find(self.fields, name)


@dataclass(frozen=True)
class NameMapping:
    fields: tuple[MappedField, ...]

    @staticmethod
    def from_schema(schema: Schema) -> NameMapping:
        """The mapping that matches each field by its current name (what Java's MappingUtil creates)."""
        return NameMapping(tuple(_mapped(f) for f in schema.fields))

    def to_json(self) -> str:
        return json.dumps([f.to_json() for f in self.fields])

    @staticmethod
    def from_json(text: str) -> NameMapping:
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise SchemaError(f"the table property {DEFAULT_NAME_MAPPING} is not valid JSON: {e}") from None
        if not isinstance(obj, list):
            raise SchemaError(f"the table property {DEFAULT_NAME_MAPPING} must be a JSON list of fields")
        return NameMapping(tuple(MappedField.from_json(o) for o in obj))

    def find(self, name: str) -> MappedField | None:
        """The top-level entry for a file column name: exact first, then ignoring case (as Hive)."""
        return _find(self.fields, name)


def name_mapping_of(properties: dict[str, str], schema: Schema) -> NameMapping:
    """The table's name mapping, or the one its current schema implies when it has none."""
    text = properties.get(DEFAULT_NAME_MAPPING)
    return NameMapping.from_json(text) if text else NameMapping.from_schema(schema)


def _find(fields: Iterable[MappedField], name: str) -> MappedField | None:
    fields = tuple(fields)
    for f in fields:
        if name in f.names:
            return f
    lowered = name.lower()
    for f in fields:
        if any(n.lower() == lowered for n in f.names):
            return f
    return None


def _mapped(f: NestedField) -> MappedField:
    return MappedField((f.name,), f.field_id, _children(f.field_type))


def _children(t: IcebergType) -> tuple[MappedField, ...]:
    if isinstance(t, StructType):
        return tuple(_mapped(c) for c in t.fields)
    if isinstance(t, ListType):
        return (MappedField(("element",), t.element_id, _children(t.element_type)),)
    if isinstance(t, MapType):
        return (MappedField(("key",), t.key_id, _children(t.key_type)),
                MappedField(("value",), t.value_id, _children(t.value_type)))
    return ()


def apply_name_mapping(physical: pa.Schema, mapping: NameMapping) -> pa.Schema:
    """A file's Arrow schema with the mapped field ids set on every field (nested ones too).

    Fields the mapping does not know keep no id, so readers treat them as absent.
    """
    return pa.schema([_annotate(f, mapping.find(f.name)) for f in physical], metadata=physical.metadata)


def _annotate(f: pa.Field, entry: MappedField | None) -> pa.Field:
    if entry is None:
        return f
    metadata = dict(f.metadata or {})
    if entry.field_id is not None:
        metadata[PARQUET_FIELD_ID] = str(entry.field_id).encode()
    return f.with_type(_annotate_type(f.type, entry)).with_metadata(metadata)


def _annotate_type(t: pa.DataType, entry: MappedField) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([_annotate(t.field(i), entry.child(t.field(i).name)) for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return pa.list_(_annotate(t.value_field, entry.child("element")))
    if pa.types.is_large_list(t):
        return pa.large_list(_annotate(t.value_field, entry.child("element")))
    if pa.types.is_map(t):
        key = _annotate(t.key_field, entry.child("key"))
        item = _annotate(t.item_field, entry.child("value"))
        return pa.map_(key, item, keys_sorted=t.keys_sorted)
    return t


def update_mapping(mapping: NameMapping, base: Schema, new: Schema) -> NameMapping:
    """The mapping after the schema change from ``base`` to ``new``, as Java's
    ``MappingUtil.update`` and pyiceberg's ``update_mapping`` make it: a renamed field gains its
    new name and keeps the old ones (files written before the rename carry those); a field
    added to a struct gets an entry; a name a renamed or added field takes is removed from the
    other entries of its struct (an entry left without names goes), so a name maps to one field;
    entries of dropped fields stay."""
    before = {f.field_id: f for f, _ in _walk(base.fields, -1)}
    owners = {owner for _, owner in _walk_owners(base.fields)}  # lists' elements, maps' keys and values
    renames: dict[int, str] = {}
    adds: dict[int, list[NestedField]] = {}
    for field, parent in _walk(new.fields, -1):
        if field.field_id in before:
            if before[field.field_id].name != field.name:
                renames[field.field_id] = field.name
        elif parent == -1 or parent in before or parent in owners:  # the top of an added subtree
            adds.setdefault(parent, []).append(field)
    if not renames and not adds:
        return mapping
    return NameMapping(_updated_fields(mapping.fields, -1, renames, adds))


def _walk(fields: Iterable[NestedField], parent: int) -> Iterable[tuple[NestedField, int]]:
    """Every struct field with the id of the struct's owner (-1 for the schema's own fields; a
    list's element or a map's key or value owns a struct inside it)."""
    for f in fields:
        yield f, parent
        yield from _walk_type(f.field_type, f.field_id)


def _walk_owners(fields: Iterable[NestedField]) -> Iterable[tuple[IcebergType, int]]:
    """Every list element's, map key's and map value's type with its id."""
    for f in fields:
        yield from _owners_in(f.field_type)


def _owners_in(t: IcebergType) -> Iterable[tuple[IcebergType, int]]:
    if isinstance(t, StructType):
        yield from _walk_owners(t.fields)
    elif isinstance(t, ListType):
        yield t.element_type, t.element_id
        yield from _owners_in(t.element_type)
    elif isinstance(t, MapType):
        for sub, sub_id in ((t.key_type, t.key_id), (t.value_type, t.value_id)):
            yield sub, sub_id
            yield from _owners_in(sub)


def _walk_type(t: IcebergType, owner: int) -> Iterable[tuple[NestedField, int]]:
    if isinstance(t, StructType):
        yield from _walk(t.fields, owner)
    elif isinstance(t, ListType):
        yield from _walk_type(t.element_type, t.element_id)
    elif isinstance(t, MapType):
        yield from _walk_type(t.key_type, t.key_id)
        yield from _walk_type(t.value_type, t.value_id)


def _updated_fields(
    entries: tuple[MappedField, ...], owner: int, renames: dict[int, str], adds: dict[int, list[NestedField]],
) -> tuple[MappedField, ...]:
    updated = [_updated_entry(e, renames, adds) for e in entries]
    taken = {renames[e.field_id]: e.field_id for e in updated if e.field_id is not None and e.field_id in renames}
    updated = _without_names(updated, taken)
    added = adds.get(owner, [])
    if added:
        updated = _without_names(updated, {f.name: f.field_id for f in added}) + [_mapped(f) for f in added]
    return tuple(updated)


def _updated_entry(entry: MappedField, renames: dict[int, str], adds: dict[int, list[NestedField]]) -> MappedField:
    if entry.field_id is None:
        return entry
    names = entry.names
    new_name = renames.get(entry.field_id)
    if new_name is not None and new_name not in names:
        names = (*names, new_name)
    return MappedField(names, entry.field_id, _updated_fields(entry.fields, entry.field_id, renames, adds))


def _without_names(entries: list[MappedField], taken: dict[str, int]) -> list[MappedField]:
    out = []
    for e in entries:
        names = tuple(n for n in e.names if taken.get(n, e.field_id) == e.field_id)
        if names:
            out.append(MappedField(names, e.field_id, e.fields) if names != e.names else e)
    return out
