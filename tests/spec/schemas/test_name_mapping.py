"""A table's name mapping follows schema changes as Java Iceberg's MappingUtil.update and
pyiceberg's update_mapping make it follow them."""

from __future__ import annotations

import json
from typing import Any

from pyiceberg.schema import Schema as PyIcebergSchema
from pyiceberg.table import name_mapping as theirs

from tablestore.spec.schemas.name_mapping import NameMapping, update_mapping
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import (
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
)

BASE = Schema((
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "user", StringType()),
    NestedField(3, "old", StringType()),
    NestedField(4, "visits", ListType(5, StructType(
        NestedField(6, "day", IntegerType()),
        NestedField(7, "n", IntegerType()),
    ))),
))


def changed() -> Schema:
    """user renamed to name, old dropped and a new field named old added, a field added inside
    the list's element struct, one inside renamed, and a struct column added."""
    return Schema((
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "name", StringType()),
        NestedField(4, "visits", ListType(5, StructType(
            NestedField(6, "date", IntegerType()),
            NestedField(7, "n", IntegerType()),
            NestedField(8, "source", StringType()),
        ))),
        NestedField(9, "old", StringType()),
        NestedField(10, "address", StructType(NestedField(11, "city", StringType()))),
    ))


def as_json(mapping: NameMapping) -> list[Any]:
    return list(json.loads(mapping.to_json()))


def test_renames_add_names_adds_get_entries_and_taken_names_move() -> None:
    updated = update_mapping(NameMapping.from_schema(BASE), BASE, changed())
    assert as_json(updated) == [
        {"field-id": 1, "names": ["id"]},
        {"field-id": 2, "names": ["user", "name"]},  # files written before the rename say "user"
        # Field 3 was dropped; its only name went to the new field 9, so its entry goes.
        {"field-id": 4, "names": ["visits"], "fields": [
            {"field-id": 5, "names": ["element"], "fields": [
                {"field-id": 6, "names": ["day", "date"]},
                {"field-id": 7, "names": ["n"]},
                {"field-id": 8, "names": ["source"]},
            ]},
        ]},
        {"field-id": 9, "names": ["old"]},
        {"field-id": 10, "names": ["address"], "fields": [{"field-id": 11, "names": ["city"]}]},
    ]


def test_a_dropped_field_keeps_its_entry_while_no_one_takes_its_name() -> None:
    dropped = Schema(BASE.fields[:2] + BASE.fields[3:])
    mapping = NameMapping.from_schema(BASE)
    assert update_mapping(mapping, BASE, dropped) is mapping


def test_the_same_mapping_as_pyiceberg() -> None:
    base_theirs = PyIcebergSchema.model_validate_json(json.dumps(BASE.to_json()))
    new_theirs = PyIcebergSchema.model_validate_json(json.dumps(changed().to_json()))
    before = base_theirs._lazy_id_to_field
    updates: dict[int, Any] = {}
    adds: dict[int, list[Any]] = {}
    for field_id, field in new_theirs._lazy_id_to_field.items():
        if field_id in before:
            if before[field_id].name != field.name:
                updates[field_id] = field
            continue
        parent = new_theirs._lazy_id_to_parent.get(field_id, -1)
        if parent == -1 or parent in before:
            adds.setdefault(parent, []).append(field)
    mapping = theirs.create_mapping_from_schema(base_theirs)
    expected = json.loads(theirs.update_mapping(mapping, updates, adds).model_dump_json())
    ours = as_json(update_mapping(NameMapping.from_schema(BASE), BASE, changed()))
    assert ours == expected
