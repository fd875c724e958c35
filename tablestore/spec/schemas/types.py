"""Iceberg data types (format/spec.md, "Schemas and Data Types").

Types are immutable values. Primitive types serialize to their spec string (``"int"``,
``"decimal(10,2)"``, ``"fixed[16]"``); nested types to the spec's JSON objects. A parser for
SQL type names (``bigint``, ``array<string>``) serves the Python API and the SQL layer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tablestore.errors import SchemaError, UnsupportedError


class IcebergType:
    """Base of all types."""

    is_primitive: bool = False
    is_nested: bool = False

    def to_json(self) -> Any:
        raise NotImplementedError

    def __str__(self) -> str:
        return str(self.to_json())


class PrimitiveType(IcebergType):
    is_primitive = True
    name: str = ""

    def to_json(self) -> Any:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))


class BooleanType(PrimitiveType):
    name = "boolean"


class IntegerType(PrimitiveType):
    name = "int"


class LongType(PrimitiveType):
    name = "long"


class FloatType(PrimitiveType):
    name = "float"


class DoubleType(PrimitiveType):
    name = "double"


class DateType(PrimitiveType):
    name = "date"


class TimeType(PrimitiveType):
    name = "time"


class TimestampType(PrimitiveType):
    """Microseconds since the epoch, without a time zone."""

    name = "timestamp"


class TimestamptzType(PrimitiveType):
    """Microseconds since the epoch, stored in UTC."""

    name = "timestamptz"


class TimestampNanoType(PrimitiveType):
    """v3: nanoseconds since the epoch, without a time zone."""

    name = "timestamp_ns"


class TimestamptzNanoType(PrimitiveType):
    """v3: nanoseconds since the epoch, stored in UTC."""

    name = "timestamptz_ns"


class StringType(PrimitiveType):
    name = "string"


class UUIDType(PrimitiveType):
    name = "uuid"


class BinaryType(PrimitiveType):
    name = "binary"


class UnknownType(PrimitiveType):
    """v3: a column of only nulls whose type is not yet known."""

    name = "unknown"


@dataclass(frozen=True, eq=True)
class FixedType(PrimitiveType):
    length: int = 0

    def to_json(self) -> Any:
        return f"fixed[{self.length}]"

    def __repr__(self) -> str:
        return f"FixedType({self.length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FixedType) and other.length == self.length

    def __hash__(self) -> int:
        return hash(("fixed", self.length))


@dataclass(frozen=True, eq=True)
class DecimalType(PrimitiveType):
    precision: int = 38
    scale: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.precision <= 38:
            raise SchemaError(f"decimal precision must be between 1 and 38, got {self.precision}")
        if not 0 <= self.scale <= self.precision:
            raise SchemaError(
                f"decimal scale must be between 0 and the precision {self.precision}, got {self.scale}"
            )

    def to_json(self) -> Any:
        return f"decimal({self.precision}, {self.scale})"

    def __repr__(self) -> str:
        return f"DecimalType({self.precision}, {self.scale})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, DecimalType)
            and other.precision == self.precision
            and other.scale == self.scale
        )

    def __hash__(self) -> int:
        return hash(("decimal", self.precision, self.scale))


@dataclass(frozen=True)
class NestedField:
    """A field of a struct, with its id. ``required`` fields may not hold nulls."""

    field_id: int
    name: str
    field_type: IcebergType
    required: bool = False
    doc: str | None = None
    initial_default: Any = None
    write_default: Any = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.field_id,
            "name": self.name,
            "required": self.required,
            "type": self.field_type.to_json(),
        }
        if self.doc is not None:
            out["doc"] = self.doc
        if self.initial_default is not None:
            out["initial-default"] = self.initial_default
        if self.write_default is not None:
            out["write-default"] = self.write_default
        return out

    @staticmethod
    def from_json(obj: dict[str, Any]) -> NestedField:
        return NestedField(
            field_id=int(obj["id"]),
            name=obj["name"],
            field_type=type_from_json(obj["type"]),
            required=bool(obj.get("required", False)),
            doc=obj.get("doc"),
            initial_default=obj.get("initial-default"),
            write_default=obj.get("write-default"),
        )

@dataclass(frozen=True)
class StructType(IcebergType):
    fields: tuple[NestedField, ...] = field(default_factory=tuple)
    is_nested = True

    def __init__(self, *fields: NestedField) -> None:
        object.__setattr__(self, "fields", tuple(fields))

    def to_json(self) -> Any:
        return {"type": "struct", "fields": [f.to_json() for f in self.fields]}

    def __str__(self) -> str:
        return "struct<" + ", ".join(f"{f.name}: {f.field_type}" for f in self.fields) + ">"

    def __hash__(self) -> int:
        return hash(self.fields)


@dataclass(frozen=True)
class ListType(IcebergType):
    element_id: int
    element_type: IcebergType
    element_required: bool = False
    is_nested = True

    @property
    def element_field(self) -> NestedField:
        return NestedField(self.element_id, "element", self.element_type, self.element_required)

    def to_json(self) -> Any:
        return {
            "type": "list",
            "element-id": self.element_id,
            "element": self.element_type.to_json(),
            "element-required": self.element_required,
        }

    def __str__(self) -> str:
        return f"list<{self.element_type}>"


@dataclass(frozen=True)
class MapType(IcebergType):
    key_id: int
    key_type: IcebergType
    value_id: int
    value_type: IcebergType
    value_required: bool = False
    is_nested = True

    @property
    def key_field(self) -> NestedField:
        return NestedField(self.key_id, "key", self.key_type, True)

    @property
    def value_field(self) -> NestedField:
        return NestedField(self.value_id, "value", self.value_type, self.value_required)

    def to_json(self) -> Any:
        return {
            "type": "map",
            "key-id": self.key_id,
            "key": self.key_type.to_json(),
            "value-id": self.value_id,
            "value": self.value_type.to_json(),
            "value-required": self.value_required,
        }

    def __str__(self) -> str:
        return f"map<{self.key_type}, {self.value_type}>"


_SIMPLE: dict[str, IcebergType] = {
    t.name: t
    for t in (
        BooleanType(),
        IntegerType(),
        LongType(),
        FloatType(),
        DoubleType(),
        DateType(),
        TimeType(),
        TimestampType(),
        TimestamptzType(),
        TimestampNanoType(),
        TimestamptzNanoType(),
        StringType(),
        UUIDType(),
        BinaryType(),
        UnknownType(),
    )
}
_DECIMAL = re.compile(r"^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_FIXED = re.compile(r"^fixed\s*\[\s*(\d+)\s*\]$")


def type_from_json(obj: Any) -> IcebergType:
    """Parse a type as it appears in table metadata JSON."""
    if isinstance(obj, str):
        simple = _SIMPLE.get(obj)
        if simple is not None:
            return simple
        if m := _DECIMAL.match(obj):
            return DecimalType(int(m.group(1)), int(m.group(2)))
        if m := _FIXED.match(obj):
            return FixedType(int(m.group(1)))
        if obj == "variant" or obj.startswith(("geometry", "geography")):
            raise UnsupportedError(
                f"column type {obj} (format v3) is not supported by tablestore, which cannot read or write its "
                "values; read the table with an engine that supports it (Java Iceberg, Spark 4)"
            )
        raise SchemaError(f"unknown Iceberg type {obj!r}")
    if isinstance(obj, dict):
        kind = obj.get("type")
        if kind == "struct":
            return StructType(*(NestedField.from_json(f) for f in obj["fields"]))
        if kind == "list":
            return ListType(
                int(obj["element-id"]),
                type_from_json(obj["element"]),
                bool(obj.get("element-required", False)),
            )
        if kind == "map":
            return MapType(
                int(obj["key-id"]),
                type_from_json(obj["key"]),
                int(obj["value-id"]),
                type_from_json(obj["value"]),
                bool(obj.get("value-required", False)),
            )
    raise SchemaError(f"unknown Iceberg type {obj!r}")


# SQL names (Spark, Hive, Trino spellings) of the primitive types.
_SQL_NAMES: dict[str, IcebergType] = {
    "boolean": BooleanType(),
    "bool": BooleanType(),
    "int": IntegerType(),
    "integer": IntegerType(),
    "tinyint": IntegerType(),
    "smallint": IntegerType(),
    "bigint": LongType(),
    "long": LongType(),
    "float": FloatType(),
    "real": FloatType(),
    "double": DoubleType(),
    "double precision": DoubleType(),
    "date": DateType(),
    "time": TimeType(),
    "timestamp": TimestampType(),
    "timestamp_ntz": TimestampType(),
    "timestamp without time zone": TimestampType(),
    "timestamptz": TimestamptzType(),
    "timestamp_ltz": TimestamptzType(),
    "timestamp with time zone": TimestamptzType(),
    "timestamp_ns": TimestampNanoType(),
    "timestamptz_ns": TimestamptzNanoType(),
    "string": StringType(),
    "varchar": StringType(),
    "char": StringType(),
    "text": StringType(),
    "uuid": UUIDType(),
    "binary": BinaryType(),
    "varbinary": BinaryType(),
    "bytes": BinaryType(),
    "decimal": DecimalType(10, 0),
    "numeric": DecimalType(10, 0),
    "unknown": UnknownType(),  # v3; Spark calls a column of only NULLs void
    "void": UnknownType(),
}


class _IdSource:
    """Hands out field ids for nested types parsed from SQL; the schema reassigns them."""

    def __init__(self, start: int = 1) -> None:
        self.next_id = start

    def __call__(self) -> int:
        value = self.next_id
        self.next_id += 1
        return value


def parse_sql_type(text: str, next_id: _IdSource | None = None) -> IcebergType:
    """Parse a SQL type name: ``bigint``, ``decimal(12,2)``, ``array<string>``, ``struct<a:int>``.

    Nested types get provisional field ids counting from 1; callers that add them to a schema
    reassign fresh ids.
    """
    ids = next_id or _IdSource()
    parser = _SqlTypeParser(text, ids)
    result = parser.parse_type()
    parser.expect_end()
    return result


class _SqlTypeParser:
    _TOKEN = re.compile(r"\s*(<|>|,|:|\(|\)|\[|\]|`[^`]*`|[A-Za-z_][A-Za-z0-9_ ]*?(?=\s*[<>,:()\[\]]|\s*$)|\d+)")

    def __init__(self, text: str, ids: _IdSource) -> None:
        self.text = text
        self.ids = ids
        self.tokens: list[str] = []
        pos = 0
        stripped = text.strip()
        while pos < len(stripped):
            m = self._TOKEN.match(stripped, pos)
            if not m or m.end() == pos:
                raise SchemaError(f"cannot parse type {text!r} near position {pos}")
            self.tokens.append(m.group(1).strip())
            pos = m.end()
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise SchemaError(f"type {self.text!r} ends too early")
        self.pos += 1
        return tok

    def expect(self, tok: str) -> None:
        got = self.take()
        if got != tok:
            raise SchemaError(f"in type {self.text!r}: expected {tok!r}, found {got!r}")

    def expect_end(self) -> None:
        if self.peek() is not None:
            raise SchemaError(f"in type {self.text!r}: unexpected {self.peek()!r}")

    def parse_type(self) -> IcebergType:
        name = " ".join(self.take().lower().split())
        if name in ("array", "list"):
            self.expect("<")
            element_id = self.ids()
            element = self.parse_type()
            self.expect(">")
            return ListType(element_id, element, False)
        if name == "map":
            self.expect("<")
            key_id = self.ids()
            value_id = self.ids()
            key = self.parse_type()
            self.expect(",")
            value = self.parse_type()
            self.expect(">")
            return MapType(key_id, key, value_id, value, False)
        if name == "struct":
            self.expect("<")
            fields: list[NestedField] = []
            while self.peek() != ">":
                field_name = self.take().strip("`")
                if self.peek() == ":":
                    self.take()
                field_id = self.ids()
                field_type = self.parse_type()
                fields.append(NestedField(field_id, field_name, field_type, False))
                if self.peek() == ",":
                    self.take()
            self.expect(">")
            return StructType(*fields)
        if name in ("decimal", "numeric") and self.peek() == "(":
            self.take()
            precision = int(self.take())
            scale = 0
            if self.peek() == ",":
                self.take()
                scale = int(self.take())
            self.expect(")")
            return DecimalType(precision, scale)
        if name in ("fixed", "binary") and self.peek() in ("(", "["):
            close = ")" if self.take() == "(" else "]"
            length = int(self.take())
            self.expect(close)
            return FixedType(length)
        if name in ("varchar", "char") and self.peek() == "(":
            self.take()
            self.take()
            self.expect(")")
            return StringType()
        simple = _SQL_NAMES.get(name)
        if simple is None:
            raise SchemaError(
                f"unknown type {name!r} in {self.text!r}; use a Spark SQL type such as int, bigint, "
                "double, decimal(p,s), string, date, timestamp, array<...>, map<...> or struct<...>"
            )
        return simple


def sql_type_name(t: IcebergType) -> str:
    """The Spark SQL spelling of a type, for DESCRIBE and SHOW CREATE TABLE."""
    if isinstance(t, IntegerType):
        return "int"
    if isinstance(t, LongType):
        return "bigint"
    if isinstance(t, DecimalType):
        return f"decimal({t.precision},{t.scale})"
    if isinstance(t, FixedType):
        return f"binary({t.length})"
    if isinstance(t, TimestampType):
        return "timestamp_ntz"
    if isinstance(t, TimestamptzType):
        return "timestamp"
    if isinstance(t, ListType):
        return f"array<{sql_type_name(t.element_type)}>"
    if isinstance(t, MapType):
        return f"map<{sql_type_name(t.key_type)},{sql_type_name(t.value_type)}>"
    if isinstance(t, StructType):
        return "struct<" + ",".join(f"{f.name}:{sql_type_name(f.field_type)}" for f in t.fields) + ">"
    return str(t)


def is_promotion_allowed(old: IcebergType, new: IcebergType) -> bool:
    """Iceberg's metadata-only type promotions: int→long, float→double, decimal widening."""
    if old == new:
        return True
    if isinstance(old, IntegerType) and isinstance(new, LongType):
        return True
    if isinstance(old, FloatType) and isinstance(new, DoubleType):
        return True
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        return new.scale == old.scale and new.precision >= old.precision
    return False
