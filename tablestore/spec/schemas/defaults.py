"""Default values of fields (format v3, spec "Default values"; JSON form of Appendix D).

A field may carry an ``initial-default`` (what rows written before the field existed read) and
a ``write-default`` (what a write that does not supply the field stores). ``NestedField`` keeps
both in their JSON single-value form, exactly as the table metadata holds them, so metadata
written by another engine goes back unchanged; the functions here turn them into internal
values (:mod:`tablestore.spec.schemas.conversions`) and check them.

Rules kept here (the spec's): defaults need format version 3 (older readers ignore them and
would read NULL); ``unknown`` columns (and variant, geometry, geography, which tablestore
does not support) default to null; a struct's default is null or ``{}`` (its fields' own
defaults fill it); a required column added to an existing table needs a non-null
``initial-default``, which never changes afterwards, while ``write-default`` may.
"""

from __future__ import annotations

from typing import Any

from tablestore.errors import SchemaError, ValidationError
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.types import (
    DateType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    StructType,
    TimestampNanoType,
    TimestampType,
    UnknownType,
)

DEFAULTS_FORMAT_VERSION = 3
INITIAL = "initial-default"
WRITE = "write-default"


def default_json(field_type: IcebergType, value: Any, column: str) -> Any:
    """The JSON single-value form of a default given as a Python or SQL-literal value.

    ``value`` may be anything :func:`conversions.from_python` accepts (``0``, ``'x'``,
    ``'2024-01-02'``, ``datetime.date``, ``Decimal``); None is no default.
    """
    if value is None:
        return None
    if isinstance(field_type, UnknownType):
        raise SchemaError(f"column {column!r} has type unknown, which holds only NULL; it cannot have a default")
    if isinstance(field_type, ListType | MapType):
        raise SchemaError(
            f"column {column!r}: tablestore sets defaults on primitive columns only, not on "
            f"{field_type}; give the column no default"
        )
    if isinstance(field_type, StructType):
        if value == {}:
            return {}
        raise SchemaError(
            f"column {column!r}: the default of a struct is NULL or {{}} (its fields' own defaults fill it), "
            f"not {value!r}; set defaults on the struct's fields"
        )
    try:
        internal = conversions.from_python(field_type, value)
    except ValidationError as e:
        raise SchemaError(f"column {column!r}: the default {value!r} is not a {field_type} value: {e}") from None
    return conversions.to_json_value(field_type, internal)


def default_value(f: NestedField, kind: str = INITIAL) -> Any:
    """The internal value of a field's ``initial-default`` or ``write-default`` (None: none).

    A struct's ``{}`` becomes a dict of its fields' own defaults of the same kind.
    """
    raw = f.initial_default if kind == INITIAL else f.write_default
    if raw is None:
        return None
    if isinstance(f.field_type, StructType):
        return {child.name: default_value(child, kind) for child in f.field_type.fields}
    try:
        return conversions.from_json_value(f.field_type, raw)
    except ValidationError as e:
        raise SchemaError(f"column {f.name!r} (id {f.field_id}) has an invalid {kind} {raw!r}: {e}") from None


def has_defaults(f: NestedField) -> bool:
    return f.initial_default is not None or f.write_default is not None


def check_defaults(name: str, f: NestedField, format_version: int) -> None:
    """SchemaError if the field's defaults are not allowed or not valid for its type."""
    if not has_defaults(f):
        return
    if format_version < DEFAULTS_FORMAT_VERSION:
        raise SchemaError(
            f"column {name!r} has a default value, which needs table format version 3, and this table is "
            f"format version {format_version}; upgrade it first (ALTER TABLE ... SET TBLPROPERTIES "
            "('format-version'='3'))"
        )
    if isinstance(f.field_type, UnknownType):
        raise SchemaError(f"column {name!r} has type unknown, whose defaults must be null")
    for kind in (INITIAL, WRITE):
        raw = f.initial_default if kind == INITIAL else f.write_default
        if isinstance(f.field_type, StructType) and raw is not None and raw != {}:
            raise SchemaError(
                f"column {name!r}: a struct's {kind} must be null or {{}}, not {raw!r} (its fields carry "
                "their own defaults)"
            )
        default_value(f, kind)


def promote_default(raw: Any, old: IcebergType, new: IcebergType) -> Any:
    """A default's JSON form after a metadata-only type promotion of its column.

    int to long, float to double and wider decimals keep the JSON value; a date becomes
    midnight of that day (``date`` to ``timestamp`` or ``timestamp_ns``, format v3).
    """
    if raw is None or not isinstance(old, DateType):
        return raw
    if not isinstance(new, TimestampType | TimestampNanoType):
        return raw
    days = conversions.from_json_value(old, raw)
    per_day = conversions.NANOS_PER_DAY if isinstance(new, TimestampNanoType) else conversions.MICROS_PER_DAY
    return conversions.to_json_value(new, days * per_day)
