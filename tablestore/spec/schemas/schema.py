"""Schemas: a struct of fields with ids, and their conversion to and from Arrow.

Every column, nested or not, is identified by its field id; names are only labels. Data files
carry the ids (Parquet ``field_id``), so reads project by id and survive renames.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from tablestore.errors import SchemaError, ValidationError
from tablestore.spec.schemas.defaults import INITIAL, check_defaults, default_value
from tablestore.spec.schemas.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

# The format version of a new table, unless it chooses one (here: it decides what an Arrow
# nanosecond timestamp becomes; spec.metadata re-exports it).
DEFAULT_FORMAT_VERSION = 2
PARQUET_FIELD_ID = b"PARQUET:field_id"


@dataclass(frozen=True)
class Schema:
    """A table schema: top-level fields, a schema id and the identifier (primary key) fields."""

    fields: tuple[NestedField, ...]
    schema_id: int = 0
    identifier_field_ids: tuple[int, ...] = ()
    _by_id: dict[int, NestedField] = field(default_factory=dict, compare=False, repr=False)
    _by_name: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    _parents: dict[int, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        object.__setattr__(self, "identifier_field_ids", tuple(self.identifier_field_ids))
        for f, path, parent in _walk(self.fields, (), None):
            if f.field_id in self._by_id:
                raise SchemaError(f"field id {f.field_id} is used twice (by {path[-1]!r})")
            self._by_id[f.field_id] = f
            self._by_name[".".join(path)] = f.field_id
            if parent is not None:
                self._parents[f.field_id] = parent

    # -- lookups ---------------------------------------------------------------------------
    @property
    def struct(self) -> StructType:
        return StructType(*self.fields)

    def find_field(self, name_or_id: str | int, case_sensitive: bool = True) -> NestedField:
        """The field with that id or dotted name; raises SchemaError naming the columns."""
        if isinstance(name_or_id, int):
            found = self._by_id.get(name_or_id)
            if found is None:
                raise SchemaError(f"no field with id {name_or_id} in the schema")
            return found
        field_id = self.find_field_id(name_or_id, case_sensitive)
        if field_id is None:
            raise SchemaError(
                f"unknown column {name_or_id!r}; the columns are: {', '.join(self.column_names)}"
            )
        return self._by_id[field_id]

    def find_field_id(self, name: str, case_sensitive: bool = True) -> int | None:
        found = self._by_name.get(name)
        if found is None and not case_sensitive:
            lowered = name.lower()
            for key, value in self._by_name.items():
                if key.lower() == lowered:
                    return value
        return found

    def find_column_name(self, field_id: int) -> str | None:
        for name, fid in self._by_name.items():
            if fid == field_id:
                return name
        return None

    def find_type(self, name_or_id: str | int) -> IcebergType:
        return self.find_field(name_or_id).field_type

    def has_field(self, field_id: int) -> bool:
        return field_id in self._by_id

    def parent_id(self, field_id: int) -> int | None:
        return self._parents.get(field_id)

    @property
    def column_names(self) -> list[str]:
        return [f.name for f in self.fields]

    @property
    def field_ids(self) -> set[int]:
        return set(self._by_id)

    def all_fields(self) -> Iterator[tuple[str, NestedField]]:
        """Every field, nested ones included, with its dotted name, in depth-first order."""
        for f, path, _ in _walk(self.fields, (), None):
            yield ".".join(path), f

    def highest_field_id(self) -> int:
        return max(self._by_id, default=0)

    def select(self, names: list[str], case_sensitive: bool = True) -> Schema:
        """A schema of the named top-level or nested columns, in the table's field order."""
        wanted = {self.find_field(n, case_sensitive).field_id for n in names}
        return Schema(_prune(self.fields, wanted, self), self.schema_id)

    def with_id(self, schema_id: int) -> Schema:
        return Schema(self.fields, schema_id, self.identifier_field_ids)

    # -- JSON --------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "struct",
            "schema-id": self.schema_id,
            "fields": [f.to_json() for f in self.fields],
        }
        if self.identifier_field_ids:
            out["identifier-field-ids"] = list(self.identifier_field_ids)
        return out

    @staticmethod
    def from_json(obj: dict[str, Any]) -> Schema:
        return Schema(
            tuple(NestedField.from_json(f) for f in obj["fields"]),
            int(obj.get("schema-id", 0)),
            tuple(obj.get("identifier-field-ids") or ()),
        )

    def __str__(self) -> str:
        lines = ["table {"]
        for name, f in self.all_fields():
            opt = "required" if f.required else "optional"
            lines.append(f"  {f.field_id}: {name}: {opt} {f.field_type}")
        lines.append("}")
        return "\n".join(lines)

    def as_arrow(self) -> pa.Schema:
        return schema_to_arrow(self)


def _walk(
    fields: tuple[NestedField, ...], prefix: tuple[str, ...], parent: int | None
) -> Iterator[tuple[NestedField, tuple[str, ...], int | None]]:
    for f in fields:
        path = (*prefix, f.name)
        yield f, path, parent
        yield from _walk_type(f.field_type, path, f.field_id)


def _walk_type(
    t: IcebergType, path: tuple[str, ...], parent: int
) -> Iterator[tuple[NestedField, tuple[str, ...], int | None]]:
    if isinstance(t, StructType):
        yield from _walk(t.fields, path, parent)
    elif isinstance(t, ListType):
        yield from _walk((t.element_field,), path, parent)
    elif isinstance(t, MapType):
        yield from _walk((t.key_field, t.value_field), path, parent)


def _prune(fields: tuple[NestedField, ...], wanted: set[int], schema: Schema) -> tuple[NestedField, ...]:
    out = []
    for f in fields:
        if f.field_id in wanted:
            out.append(f)
        elif isinstance(f.field_type, StructType):
            inner = _prune(f.field_type.fields, wanted, schema)
            if inner:
                out.append(replace(f, field_type=StructType(*inner)))
    return tuple(out)


# -- assigning ids ---------------------------------------------------------------------------


def assign_fresh_ids(schema_or_type: StructType | Schema, next_id: Callable[[], int]) -> StructType:
    """A copy of the type whose fields get ids from ``next_id``, in breadth-first order."""
    struct = schema_or_type.struct if isinstance(schema_or_type, Schema) else schema_or_type
    return _reassign_struct(struct, next_id)


def _reassign_struct(struct: StructType, next_id: Callable[[], int]) -> StructType:
    ids = [next_id() for _ in struct.fields]
    return StructType(
        *(
            NestedField(i, f.name, _reassign(f.field_type, next_id), f.required, f.doc,
                        f.initial_default, f.write_default)
            for i, f in zip(ids, struct.fields, strict=True)
        )
    )


def _reassign(t: IcebergType, next_id: Callable[[], int]) -> IcebergType:
    if isinstance(t, StructType):
        return _reassign_struct(t, next_id)
    if isinstance(t, ListType):
        element_id = next_id()
        return ListType(element_id, _reassign(t.element_type, next_id), t.element_required)
    if isinstance(t, MapType):
        key_id = next_id()
        value_id = next_id()
        return MapType(
            key_id, _reassign(t.key_type, next_id), value_id, _reassign(t.value_type, next_id),
            t.value_required,
        )
    return t


class IdCounter:
    def __init__(self, last: int = 0) -> None:
        self.last = last

    def __call__(self) -> int:
        self.last += 1
        return self.last


# -- Arrow -----------------------------------------------------------------------------------


def primitive_to_arrow(t: IcebergType) -> pa.DataType:
    if isinstance(t, BooleanType):
        return pa.bool_()
    if isinstance(t, IntegerType):
        return pa.int32()
    if isinstance(t, LongType):
        return pa.int64()
    if isinstance(t, FloatType):
        return pa.float32()
    if isinstance(t, DoubleType):
        return pa.float64()
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, DateType):
        return pa.date32()
    if isinstance(t, TimeType):
        return pa.time64("us")
    if isinstance(t, TimestampType):
        return pa.timestamp("us")
    if isinstance(t, TimestamptzType):
        return pa.timestamp("us", tz="UTC")
    if isinstance(t, TimestampNanoType):
        return pa.timestamp("ns")
    if isinstance(t, TimestamptzNanoType):
        return pa.timestamp("ns", tz="UTC")
    if isinstance(t, StringType):
        return pa.string()
    if isinstance(t, UUIDType):
        return pa.binary(16)
    if isinstance(t, FixedType):
        return pa.binary(t.length)
    if isinstance(t, BinaryType):
        return pa.binary()
    if isinstance(t, UnknownType):
        return pa.null()
    raise SchemaError(f"no Arrow type for {t}")


def type_to_arrow(t: IcebergType) -> pa.DataType:
    if isinstance(t, StructType):
        return pa.struct([field_to_arrow(f) for f in t.fields])
    if isinstance(t, ListType):
        return pa.list_(field_to_arrow(t.element_field))
    if isinstance(t, MapType):
        return pa.map_(field_to_arrow(t.key_field), field_to_arrow(t.value_field))
    return primitive_to_arrow(t)


def field_to_arrow(f: NestedField) -> pa.Field:
    metadata = {PARQUET_FIELD_ID: str(f.field_id).encode()}
    if f.doc:
        metadata[b"doc"] = f.doc.encode()
    return pa.field(f.name, type_to_arrow(f.field_type), nullable=not f.required, metadata=metadata)


def default_array(f: NestedField, length: int, kind: str = INITIAL) -> pa.Array:
    """``length`` copies of the field's ``initial-default`` (or ``write-default``), in its Arrow
    type: nulls when it has none."""
    target = type_to_arrow(f.field_type)
    value = default_value(f, kind)
    if value is None:
        return pa.nulls(length, target)
    if isinstance(f.field_type, StructType):
        children = [default_array(child, length, kind) for child in f.field_type.fields]
        return pa.StructArray.from_arrays(children, fields=list(target))
    if isinstance(value, uuid.UUID):
        value = value.bytes
    return pa.repeat(pa.scalar(value, target), length)


def schema_to_arrow(schema: Schema | StructType) -> pa.Schema:
    fields = schema.fields
    return pa.schema([field_to_arrow(f) for f in fields])


def parquet_write_schema(arrow_schema: pa.Schema, schema: Schema) -> pa.Schema:
    """The Arrow schema to write a Parquet data file of ``schema`` with.

    tablestore holds uuid values as ``fixed_size_binary(16)``; the spec stores them as
    ``FIXED_LEN_BYTE_ARRAY(16)`` annotated with the ``UUID`` logical type, which pyarrow writes
    for Arrow's uuid extension type. So uuid fields (found by field id, at any depth) get that
    type here, and every other field keeps its own: a ``fixed[16]`` column stays unannotated.
    Returns ``arrow_schema`` itself when it holds no uuid.
    """
    uuids = {f.field_id for _, f in schema.all_fields() if isinstance(f.field_type, UUIDType)}
    if not uuids:
        return arrow_schema
    fields = [_annotate_uuid(f, uuids) for f in arrow_schema]
    return pa.schema(fields, metadata=arrow_schema.metadata)


def without_unknown_columns(rows: pa.Table, schema: Schema) -> pa.Table:
    """``rows`` without the top-level columns of type ``unknown``: the spec stores them in no
    data file (readers fill them with NULL, since files never hold their id)."""
    unknown = [f.name for f in schema.fields if isinstance(f.field_type, UnknownType) and f.name in rows.column_names]
    return rows.drop_columns(unknown) if unknown else rows


def _annotate_uuid(f: pa.Field, uuids: set[int]) -> pa.Field:
    t = f.type
    if pa.types.is_fixed_size_binary(t) and t.byte_width == 16:
        fid = f.metadata.get(PARQUET_FIELD_ID) if f.metadata else None
        return f.with_type(pa.uuid()) if fid is not None and int(fid) in uuids else f
    if pa.types.is_struct(t):
        return f.with_type(pa.struct([_annotate_uuid(t.field(i), uuids) for i in range(t.num_fields)]))
    if pa.types.is_list(t):
        return f.with_type(pa.list_(_annotate_uuid(t.value_field, uuids)))
    if pa.types.is_large_list(t):
        return f.with_type(pa.large_list(_annotate_uuid(t.value_field, uuids)))
    if pa.types.is_map(t):
        return f.with_type(pa.map_(_annotate_uuid(t.key_field, uuids), _annotate_uuid(t.item_field, uuids),
                                   keys_sorted=t.keys_sorted))
    return f


def storage_schema(arrow_schema: pa.Schema) -> pa.Schema:
    """``arrow_schema`` with every extension type (at any depth) replaced by its storage type.

    pyarrow restores Arrow's uuid extension type when it reads a Parquet file whose stored
    Arrow schema has it (ours, pyiceberg's); tablestore reads uuids as their 16 bytes.
    """
    return pa.schema([_storage_field(f) for f in arrow_schema], metadata=arrow_schema.metadata)


def _storage_field(f: pa.Field) -> pa.Field:
    t = f.type
    if isinstance(t, pa.BaseExtensionType):
        return _storage_field(f.with_type(t.storage_type))
    if pa.types.is_struct(t):
        return f.with_type(pa.struct([_storage_field(t.field(i)) for i in range(t.num_fields)]))
    if pa.types.is_list(t):
        return f.with_type(pa.list_(_storage_field(t.value_field)))
    if pa.types.is_large_list(t):
        return f.with_type(pa.large_list(_storage_field(t.value_field)))
    if pa.types.is_map(t):
        return f.with_type(pa.map_(_storage_field(t.key_field), _storage_field(t.item_field),
                                   keys_sorted=t.keys_sorted))
    return f


# Types the spec adds in format version 3 ("unknown" needs a v3 table too). Java refuses them
# in older tables when it builds the metadata, and readers fail on them there (DuckDB:
# "Unrecognized primitive type: timestamptz_ns"; iceberg-rust: "not supported until v3").
V3_TYPES: tuple[type[IcebergType], ...] = (TimestampNanoType, TimestamptzNanoType, UnknownType)


def check_format_version_types(schema: Schema | StructType, format_version: int) -> None:
    """SchemaError naming the first column whose type or default the table's format version
    lacks, a required ``unknown`` column, or an invalid default."""
    struct = schema.struct if isinstance(schema, Schema) else schema
    for name, f in Schema(struct.fields).all_fields():
        check_defaults(name, f, format_version)
        if isinstance(f.field_type, UnknownType) and f.required:
            raise SchemaError(
                f"column {name!r} has type unknown, which holds only NULL, and is NOT NULL; make it nullable"
            )
        if format_version >= 3:
            continue
        if isinstance(f.field_type, V3_TYPES):
            hint = {"timestamp_ns": "timestamp", "timestamptz_ns": "timestamptz"}.get(str(f.field_type))
            way_out = (f"use {hint} (microseconds) for it" if hint
                       else "give it a concrete type")
            raise SchemaError(
                f"column {name!r} has type {f.field_type}, which needs table format version 3, and "
                f"this table is format version {format_version}; {way_out}"
            )


def arrow_type_to_iceberg(
    t: pa.DataType, next_id: Callable[[], int], format_version: int = 3
) -> IcebergType:
    """The Iceberg type for an Arrow type; nested fields get ids from ``next_id``.

    Arrow nanosecond timestamps (pandas' default) are ``timestamp_ns``/``timestamptz_ns`` only
    from ``format_version`` 3 on; for older tables they map to the microsecond types, and
    writes convert the values without losing any (``tablestore.table.write.conform``).
    """
    def inner(child: pa.DataType) -> IcebergType:
        return arrow_type_to_iceberg(child, next_id, format_version)

    if pa.types.is_boolean(t):
        return BooleanType()
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or pa.types.is_uint8(t) \
            or pa.types.is_uint16(t):
        return IntegerType()
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return LongType()
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return FloatType()
    if pa.types.is_float64(t):
        return DoubleType()
    if pa.types.is_decimal(t):
        return DecimalType(t.precision, t.scale)
    if pa.types.is_date(t):
        return DateType()
    if pa.types.is_time(t):
        return TimeType()
    if pa.types.is_timestamp(t):
        if t.unit == "ns" and format_version >= 3:
            return TimestamptzNanoType() if t.tz else TimestampNanoType()
        return TimestamptzType() if t.tz else TimestampType()
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return StringType()
    if isinstance(t, pa.UuidType):  # Arrow's canonical uuid extension (pa.uuid()), as pyiceberg maps it
        return UUIDType()
    if pa.types.is_fixed_size_binary(t):
        return FixedType(t.byte_width)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return BinaryType()
    if pa.types.is_dictionary(t):
        return inner(t.value_type)
    if pa.types.is_struct(t):
        ids = [next_id() for _ in range(t.num_fields)]
        return StructType(
            *(
                NestedField(fid, t.field(i).name, inner(t.field(i).type),
                            not t.field(i).nullable)
                for i, fid in enumerate(ids)
            )
        )
    if pa.types.is_map(t):
        key_id, value_id = next_id(), next_id()
        return MapType(
            key_id, inner(t.key_type), value_id,
            inner(t.item_type), not t.item_field.nullable,
        )
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
            or pa.types.is_list_view(t):
        element_id = next_id()
        return ListType(element_id, inner(t.value_type),
                        not t.value_field.nullable)
    if pa.types.is_null(t):
        raise SchemaError("a column of Arrow type null has no Iceberg type; cast it to a concrete type")
    raise SchemaError(f"Arrow type {t} has no Iceberg equivalent")


def arrow_to_schema(arrow_schema: pa.Schema, schema_id: int = 0, format_version: int = 2) -> Schema:
    """A new schema for an Arrow schema: fresh ids, top-level fields first (as Iceberg assigns).

    ``format_version`` is the table's: below 3, nanosecond timestamps become microsecond ones.
    """
    counter = IdCounter()
    top_ids = [counter() for _ in arrow_schema]
    fields = tuple(
        NestedField(fid, f.name, arrow_type_to_iceberg(f.type, counter, format_version), not f.nullable)
        for fid, f in zip(top_ids, arrow_schema, strict=True)
    )
    return Schema(fields, schema_id)


def to_schema(schema: Schema | pa.Schema, properties: Mapping[str, str] | None = None) -> Schema:
    """A schema given either way: a tablestore Schema as it is, a pyarrow schema converted
    (fresh field ids, as for a new table). A new table's ``properties`` may choose its format
    version, which decides what an Arrow nanosecond timestamp becomes (microseconds below v3)."""
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, pa.Schema):
        version = str((properties or {}).get("format-version", DEFAULT_FORMAT_VERSION)).strip()
        return arrow_to_schema(schema, format_version=int(version) if version.isdigit() else DEFAULT_FORMAT_VERSION)
    raise ValidationError(
        f"schema must be a pyarrow.Schema or a tablestore Schema, got {type(schema).__name__}"
    )
