"""Schema evolution as pure functions of a schema: add, drop, rename, retype, move, document.

Every change keeps field ids: a renamed column keeps its id (old files read by id), a dropped
column's id is never reused, and an added column gets a fresh id above the table's last column
id (so old files, which never held that id, read NULL). Nothing here touches a table; the
builder in :mod:`tablestore.table.update.schema` applies these to the current schema and
commits the result.

The limits (each a :class:`SchemaEvolutionError` naming the column and what to do instead):
adding a required column, changing, dropping or renaming an identifier (primary key) column,
changing the type of or dropping a column a current partition field uses, narrowing a type,
a duplicate or empty name, and dropping the last column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from tablestore.errors import SchemaError, SchemaEvolutionError
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.partitioning.sort_order import SortOrder
from tablestore.spec.partitioning.transforms import IdentityTransform
from tablestore.spec.schemas import defaults
from tablestore.spec.schemas.defaults import DEFAULTS_FORMAT_VERSION
from tablestore.spec.schemas.schema import Schema, assign_fresh_ids
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
    PrimitiveType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
    is_promotion_allowed,
    parse_sql_type,
    sql_type_name,
)

CAST_MODE_PROPERTY = "tablestore.schema.cast-mode"


class CastMode(StrEnum):
    """How a type change that Iceberg cannot do in metadata converts existing values."""

    IMPLICIT = "implicit"  # only conversions no one would argue about, by rewrite
    STRICT = "strict"  # explicit casts too; a value that does not convert fails the statement
    NULL_ON_ERROR = "null-on-error"  # explicit casts too; a value that does not convert becomes NULL

    @staticmethod
    def from_properties(properties: dict[str, str]) -> CastMode:
        raw = properties.get(CAST_MODE_PROPERTY, CastMode.IMPLICIT.value)
        try:
            return CastMode(raw.strip().lower())
        except ValueError:
            raise SchemaEvolutionError(
                f"table property {CAST_MODE_PROPERTY}={raw!r} is not a cast mode; use one of "
                f"{', '.join(m.value for m in CastMode)}"
            ) from None


class TypeChange(StrEnum):
    """What a type change costs: nothing, metadata only, or rewriting the files of old type."""

    NONE = "none"
    PROMOTION = "promotion"
    REWRITE = "rewrite"


_INTEGRAL = IntegerType | LongType
_TIMESTAMPS = TimestampType | TimestamptzType | TimestampNanoType | TimestamptzNanoType


def _rank(t: IcebergType) -> int | None:
    """Position on the numeric ladder; a move down the ladder loses values (narrowing)."""
    order: tuple[type, ...] = (IntegerType, LongType, DecimalType, FloatType, DoubleType)
    for i, cls in enumerate(order):
        if isinstance(t, cls):
            return i
    return None


def is_narrowing(old: IcebergType, new: IcebergType) -> bool:
    """A change that can lose values: to a smaller number, a coarser time, fewer decimal digits."""
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        return new.precision - new.scale < old.precision - old.scale or new.scale < old.scale
    if isinstance(old, FloatType | DoubleType) and isinstance(new, _INTEGRAL | DecimalType):
        return True
    if isinstance(old, DecimalType) and isinstance(new, _INTEGRAL):
        return True
    old_rank, new_rank = _rank(old), _rank(new)
    if old_rank is not None and new_rank is not None:
        return new_rank < old_rank
    if isinstance(old, _TIMESTAMPS) and isinstance(new, DateType | TimeType):
        return True
    if isinstance(old, TimestampNanoType | TimestamptzNanoType) and isinstance(new, TimestampType | TimestamptzType):
        return True
    if isinstance(old, FixedType) and isinstance(new, FixedType):
        return new.length != old.length
    return False


def is_implicit_conversion(old: IcebergType, new: IcebergType) -> bool:
    """The conversions beyond Iceberg's promotions that a user expects without asking: int or
    bigint to double, any primitive to string, date to timestamp. Done by rewriting files."""
    if isinstance(old, _INTEGRAL) and isinstance(new, DoubleType):
        return True
    if isinstance(new, StringType) and isinstance(old, PrimitiveType) \
            and not isinstance(old, BinaryType | FixedType | StringType):
        return True
    return isinstance(old, DateType) and isinstance(new, TimestampType | TimestamptzType)


def _castable(old: IcebergType, new: IcebergType) -> bool:
    """Explicit casts the strict and null-on-error modes allow (besides the implicit ones)."""
    if isinstance(old, StringType):
        return isinstance(new, PrimitiveType) and not isinstance(new, FixedType | UUIDType)
    if isinstance(old, BooleanType):
        return isinstance(new, _INTEGRAL | StringType)
    if _rank(old) is not None and _rank(new) is not None:
        return True
    if isinstance(old, BinaryType):
        return isinstance(new, StringType)
    return isinstance(old, _TIMESTAMPS) and isinstance(new, _TIMESTAMPS)


def is_v3_promotion(old: IcebergType, new: IcebergType) -> bool:
    """The promotions format v3 adds: ``unknown`` to any primitive type, ``date`` to ``timestamp``
    and ``timestamp_ns`` (not to the ``tz`` types: a date is no point in time)."""
    if isinstance(old, UnknownType):
        return new.is_primitive and not isinstance(new, UnknownType)
    return isinstance(old, DateType) and isinstance(new, TimestampType | TimestampNanoType)


def classify_type_change(name: str, old: IcebergType, new: IcebergType, mode: CastMode,
                         format_version: int = 2) -> TypeChange:
    """Whether ``old`` may become ``new`` under ``mode`` and at what cost; raises otherwise.

    From ``format_version`` 3 on, ``date`` to ``timestamp``/``timestamp_ns`` and ``unknown`` to
    anything are promotions (metadata only); before, date to timestamp is a rewrite.
    """
    if old == new:
        return TypeChange.NONE
    if format_version >= 3 and is_v3_promotion(old, new):
        return TypeChange.PROMOTION
    if isinstance(old, UnknownType):
        raise SchemaEvolutionError(
            f"cannot change column {name!r} from unknown to {sql_type_name(new)}"
            + (": only to a primitive type; drop the column and add it again" if format_version >= 3
               else ": unknown needs format version 3")
        )
    if old.is_nested or new.is_nested:
        raise SchemaEvolutionError(
            f"cannot change column {name!r} from {sql_type_name(old)} to {sql_type_name(new)}: only primitive "
            "types change; change the nested fields one by one (for example ALTER COLUMN s.x TYPE bigint)"
        )
    if is_promotion_allowed(old, new):
        return TypeChange.PROMOTION
    if is_narrowing(old, new):
        raise SchemaEvolutionError(
            f"cannot change column {name!r} from {sql_type_name(old)} to {sql_type_name(new)}: that narrows the "
            "type and could lose values; add a new column of the narrower type and fill it with an INSERT OVERWRITE"
        )
    if is_implicit_conversion(old, new):
        return TypeChange.REWRITE
    if mode is not CastMode.IMPLICIT and _castable(old, new):
        return TypeChange.REWRITE
    hint = (
        f"set the table property {CAST_MODE_PROPERTY} to 'strict' or 'null-on-error' to allow explicit casts"
        if mode is CastMode.IMPLICIT and _castable(old, new)
        else "add a new column and fill it instead"
    )
    raise SchemaEvolutionError(
        f"cannot change column {name!r} from {sql_type_name(old)} to {sql_type_name(new)}: "
        f"not a type promotion nor an implicit conversion; {hint}"
    )


def as_type(t: IcebergType | str) -> IcebergType:
    if isinstance(t, IcebergType):
        return t
    if not isinstance(t, str) or not t.strip():
        raise SchemaEvolutionError(f"{t!r} is not a type; give a type such as 'bigint' or 'decimal(12,2)'")
    try:
        return parse_sql_type(t)
    except SchemaError as e:
        raise SchemaEvolutionError(str(e)) from None


# -- rebuilding the tree of fields -------------------------------------------------------------

Fields = tuple[NestedField, ...]


def _rebuild_type(t: IcebergType, holder_id: int, fn: Callable[[int | None, Fields], Fields]) -> IcebergType:
    if isinstance(t, StructType):
        return StructType(*_rebuild(fn(holder_id, t.fields), fn))
    if isinstance(t, ListType):
        (element,) = _rebuild((t.element_field,), fn)
        return ListType(element.field_id, element.field_type, element.required)
    if isinstance(t, MapType):
        key, value = _rebuild((t.key_field, t.value_field), fn)
        return MapType(key.field_id, key.field_type, value.field_id, value.field_type, value.required)
    return t


def _rebuild(fields: Fields, fn: Callable[[int | None, Fields], Fields]) -> Fields:
    return tuple(replace(f, field_type=_rebuild_type(f.field_type, f.field_id, fn)) for f in fields)


def edit_children(schema: Schema, parent_id: int | None, edit: Callable[[Fields], Fields]) -> Fields:
    """The schema's fields with ``edit`` applied to the children of ``parent_id`` (None: top level)."""

    def fn(holder: int | None, children: Fields) -> Fields:
        return edit(children) if holder == parent_id else children

    return _rebuild(fn(None, schema.fields), fn)


def edit_field(schema: Schema, field_id: int, edit: Callable[[NestedField], NestedField | None]) -> Fields:
    """The schema's fields with the field ``field_id`` replaced by ``edit(field)`` (None drops it)."""

    def fn(_holder: int | None, children: Fields) -> Fields:
        out = []
        for f in children:
            if f.field_id == field_id:
                edited = edit(f)
                if edited is not None:
                    out.append(edited)
            else:
                out.append(f)
        return tuple(out)

    return _rebuild(fn(None, schema.fields), fn)


def _ids_under(f: NestedField) -> set[int]:
    return {f.field_id} | {nested.field_id for _, nested in Schema((f,)).all_fields()}


@dataclass(frozen=True)
class TypeChangeRecord:
    field_id: int
    old: IcebergType
    new: IcebergType
    cost: TypeChange


class SchemaEvolution:
    """Applies changes one by one to a working copy of a schema, checking each against the limits.

    ``last_column_id`` is the table's last assigned id (new columns count up from it); ``spec``
    is the current partition spec, whose source columns may be renamed but not retyped or dropped.
    """

    def __init__(self, base: Schema, last_column_id: int, spec: PartitionSpec | None = None,
                 cast_mode: CastMode = CastMode.IMPLICIT, case_sensitive: bool = True,
                 sort_orders: tuple[SortOrder, ...] = (), specs: tuple[PartitionSpec, ...] = (),
                 format_version: int = 2) -> None:
        self.base = base
        # Default values (and so NOT NULL columns added to a table with rows) need format v3.
        self.format_version = format_version
        # Java rebuilds every partition spec against the current schema when it loads a table
        # and refuses a column named like a partition field (unless it is that identity field's
        # source): such a name would make the table unreadable there.
        self.partition_names = {
            pf.name.lower(): (pf.name, pf.source_id if isinstance(pf.transform, IdentityTransform) else None)
            for s in (*specs, *([spec] if spec is not None else [])) for pf in s.fields
        }
        # Java binds every sort order to the current schema when it loads a table: a sort field
        # whose column is gone (or whose transform no longer fits) makes the table unreadable.
        self.sort_fields = [f for order in sort_orders for f in order.fields]
        self.schema = base
        self.last_column_id = max(last_column_id, base.highest_field_id())
        self.spec = spec
        self.cast_mode = cast_mode
        self.case_sensitive = case_sensitive
        self.type_changes: dict[int, TypeChangeRecord] = {}

    # -- lookups ----------------------------------------------------------------------------
    def _find(self, name: str | tuple[str, ...], what: str = "column") -> NestedField:
        dotted = name if isinstance(name, str) else ".".join(name)
        if not dotted:
            raise SchemaEvolutionError(f"the {what} name is empty; name a column")
        field_id = self.schema.find_field_id(dotted, self.case_sensitive)
        if field_id is None:
            raise SchemaEvolutionError(
                f"{what} {dotted!r} does not exist; the columns are: "
                f"{', '.join(n for n, _ in self.schema.all_fields())}"
            )
        return self.schema.find_field(field_id)

    def name_of(self, field_id: int) -> str:
        return self.schema.find_column_name(field_id) or str(field_id)

    def _partition_sources(self) -> dict[int, str]:
        if self.spec is None:
            return {}
        return {pf.source_id: pf.name for pf in self.spec.fields}

    def _check_not_identifier(self, f: NestedField, action: str) -> None:
        ids = _ids_under(f) & set(self.schema.identifier_field_ids)
        if ids:
            key = ", ".join(self.name_of(i) for i in sorted(ids))
            raise SchemaEvolutionError(
                f"cannot {action} column {self.name_of(f.field_id)!r}: it is part of the table's identifier "
                f"fields (primary key: {key}); run DROP IDENTIFIER FIELDS {key} first"
            )

    def _check_not_partition_source(self, f: NestedField, action: str) -> None:
        sources = self._partition_sources()
        hit = sorted(_ids_under(f) & set(sources))
        if hit:
            raise SchemaEvolutionError(
                f"cannot {action} column {self.name_of(f.field_id)!r}: the partition field "
                f"{sources[hit[0]]!r} uses it; change the partitioning first (ALTER TABLE ... DROP PARTITION FIELD)"
            )

    def _check_not_sort_source(self, f: NestedField, new_type: IcebergType | None) -> None:
        ids = _ids_under(f)
        for sf in self.sort_fields:
            if sf.source_id in ids and (new_type is None or not sf.transform.can_transform(new_type)):
                action = "drop" if new_type is None else f"change to {sql_type_name(new_type)}"
                raise SchemaEvolutionError(
                    f"cannot {action} column {self.name_of(f.field_id)!r}: a sort order of the table uses it "
                    f"({sf.transform}); change the table's sort order first"
                )

    def _check_new_name(self, parent_id: int | None, name: str, ignore_id: int | None = None) -> None:
        if not name or not name.strip():
            raise SchemaEvolutionError("a column name may not be empty; give the column a name")
        siblings = self._children(parent_id)
        for s in siblings:
            if s.field_id != ignore_id and s.name.lower() == name.lower():
                where = f" in {self.name_of(parent_id)!r}" if parent_id is not None else ""
                raise SchemaEvolutionError(
                    f"a column named {s.name!r} exists already{where}; choose another name or drop it first"
                )
        taken = self.partition_names.get(name.lower()) if parent_id is None else None
        if taken is not None and (ignore_id is None or taken[1] != ignore_id):
            raise SchemaEvolutionError(
                f"cannot name a column {name!r}: the table has a partition field named {taken[0]!r}, and Iceberg "
                "readers refuse a column of a partition field's name; choose another name"
            )

    def _children(self, parent_id: int | None) -> Fields:
        if parent_id is None:
            return self.schema.fields
        t = self.schema.find_field(parent_id).field_type
        if not isinstance(t, StructType):
            raise SchemaEvolutionError(
                f"{self.name_of(parent_id)!r} is a {sql_type_name(t)}, not a struct; nested columns can only be "
                "added to structs (for a list of structs use 'name.element', for map values 'name.value')"
            )
        return t.fields

    def _set(self, fields: Fields, identifier_ids: tuple[int, ...] | None = None) -> None:
        ids = self.schema.identifier_field_ids if identifier_ids is None else identifier_ids
        self.schema = Schema(fields, self.schema.schema_id, ids)

    # -- changes ----------------------------------------------------------------------------
    def add_column(self, name: str | tuple[str, ...], field_type: IcebergType | str, doc: str | None = None,
                   required: bool = False, first: bool = False, after: str | None = None,
                   default: Any = None) -> int:
        """Add a column; a dotted name (or a tuple) adds a field to a struct. Returns its id.

        ``default`` (format v3) becomes the column's ``initial-default``, which the rows already
        in the table read, and its ``write-default``. A ``required`` column needs one.
        """
        path = tuple(name.split(".")) if isinstance(name, str) else tuple(name)
        dotted = ".".join(path)
        if any(not part.strip() for part in path) or not path:
            raise SchemaEvolutionError(f"column name {dotted!r} is empty or has an empty part")
        if self.format_version < DEFAULTS_FORMAT_VERSION and (required or default is not None):
            what = "as NOT NULL: the rows already in the table have no value for it" if required else \
                "with a default value: format version 2 readers would read NULL for the rows already in the table"
            raise SchemaEvolutionError(
                f"cannot add column {dotted!r} {what}; add it as a nullable column without a default, or upgrade "
                f"the table to format version 3 (ALTER TABLE ... SET TBLPROPERTIES ('format-version'='3')), "
                f"which allows ADD COLUMN {path[-1]} ... NOT NULL DEFAULT <value> without rewriting data "
                f"(this table is format version {self.format_version})"
            )
        if required and default is None:
            raise SchemaEvolutionError(
                f"cannot add column {dotted!r} as NOT NULL without a default: the rows already in the table "
                f"have no value for it; give it one (ADD COLUMN {path[-1]} ... NOT NULL DEFAULT <value>) or add "
                "it as a nullable column"
            )
        parent_id = self._find(path[:-1], "parent column").field_id if len(path) > 1 else None
        if parent_id is not None:
            parent = self.schema.find_field(parent_id)
            if isinstance(parent.field_type, ListType | MapType):
                # Spark names the struct inside a list or map by its element or value.
                inner = parent.field_type.element_field if isinstance(parent.field_type, ListType) \
                    else parent.field_type.value_field
                parent_id = inner.field_id
        leaf = path[-1]
        self._check_new_name(parent_id, leaf)
        t = as_type(field_type)

        def next_id() -> int:
            self.last_column_id += 1
            return self.last_column_id

        try:
            default_json = defaults.default_json(t, default, dotted)
        except SchemaError as e:
            raise SchemaEvolutionError(str(e)) from None
        if required and isinstance(t, StructType):
            raise SchemaEvolutionError(
                f"cannot add struct column {dotted!r} as NOT NULL: add it nullable and give its fields defaults"
            )
        # The column's id first, then its nested fields' ids, as Iceberg assigns them.
        new_field = assign_fresh_ids(
            StructType(NestedField(0, leaf, t, required, doc, default_json, default_json)), next_id
        ).fields[0]
        new_id = new_field.field_id

        def add(children: Fields) -> Fields:
            if first:
                return (new_field, *children)
            if after is not None:
                index = self._sibling_index(children, after, parent_id)
                return (*children[:index + 1], new_field, *children[index + 1:])
            return (*children, new_field)

        self._set(edit_children(self.schema, parent_id, add))
        return new_id

    def _sibling_index(self, children: Fields, name: str, parent_id: int | None) -> int:
        leaf = name.split(".")[-1] if parent_id is not None and "." in name else name
        for i, c in enumerate(children):
            if c.name == leaf or (not self.case_sensitive and c.name.lower() == leaf.lower()):
                return i
        where = f"in {self.name_of(parent_id)!r}" if parent_id is not None else "at the top level"
        raise SchemaEvolutionError(
            f"cannot place a column next to {name!r}: no such column {where}; the columns there are: "
            f"{', '.join(c.name for c in children)}"
        )

    def drop_column(self, name: str) -> None:
        f = self._find(name)
        self._check_not_identifier(f, "drop")
        self._check_not_partition_source(f, "drop")
        self._check_not_sort_source(f, None)
        parent = self.schema.parent_id(f.field_id)
        if parent is None and len(self.schema.fields) == 1:
            raise SchemaEvolutionError(
                f"cannot drop {f.name!r}, the table's last column; add another column first or drop the table"
            )
        if parent is not None:
            holder = self.schema.find_field(parent)
            if not isinstance(holder.field_type, StructType):
                raise SchemaEvolutionError(
                    f"cannot drop {name!r}: it is the element, key or value of {self.name_of(parent)!r}; "
                    "drop that column instead"
                )
            if len(holder.field_type.fields) == 1:
                raise SchemaEvolutionError(
                    f"cannot drop {name!r}, the last field of struct {self.name_of(parent)!r}; drop the struct instead"
                )
        self.type_changes.pop(f.field_id, None)
        self._set(edit_field(self.schema, f.field_id, lambda _: None))

    def rename_column(self, name: str, new_name: str) -> None:
        f = self._find(name)
        self._check_not_identifier(f, "rename")
        if f.name == new_name:
            return
        self._check_new_name(self.schema.parent_id(f.field_id), new_name, ignore_id=f.field_id)
        self._set(edit_field(self.schema, f.field_id, lambda old: replace(old, name=new_name)))

    def update_column_type(self, name: str, field_type: IcebergType | str) -> TypeChange:
        """Change a column's type: a promotion in metadata, or a conversion done by rewrite."""
        f = self._find(name)
        new = as_type(field_type)
        original = self.base.find_field(f.field_id).field_type if self.base.has_field(f.field_id) else f.field_type
        cost = classify_type_change(self.name_of(f.field_id), original, new, self.cast_mode, self.format_version)
        if f.field_type == new:
            return cost
        if cost is TypeChange.REWRITE and defaults.has_defaults(f):
            raise SchemaEvolutionError(
                f"cannot convert column {name!r} from {sql_type_name(original)} to {sql_type_name(new)}: it has a "
                "default value, and a conversion by rewrite would change what it means; add a new column of type "
                f"{sql_type_name(new)} with its own default and fill it instead"
            )
        self._check_not_identifier(f, "change the type of")
        self._check_not_partition_source(f, "change the type of")
        self._check_not_sort_source(f, new)
        if cost is TypeChange.REWRITE and self.schema.parent_id(f.field_id) is not None:
            raise SchemaEvolutionError(
                f"cannot convert nested column {name!r} from {sql_type_name(original)} to {sql_type_name(new)}: "
                "only top-level columns are converted by rewriting files; Iceberg promotions (int to bigint, "
                "float to double, wider decimals) work on nested fields"
            )
        if cost is TypeChange.NONE or not self.base.has_field(f.field_id):
            self.type_changes.pop(f.field_id, None)  # no data holds a column added in this change
        else:
            self.type_changes[f.field_id] = TypeChangeRecord(f.field_id, original, new, cost)
        def retyped(old: NestedField) -> NestedField:
            # A promotion keeps the defaults' meaning (a date default becomes that day's midnight).
            return replace(old, field_type=new,
                           initial_default=defaults.promote_default(old.initial_default, old.field_type, new),
                           write_default=defaults.promote_default(old.write_default, old.field_type, new))

        self._set(edit_field(self.schema, f.field_id, retyped))
        return cost

    def update_doc(self, name: str, doc: str | None) -> None:
        f = self._find(name)
        self._set(edit_field(self.schema, f.field_id, lambda old: replace(old, doc=doc or None)))

    def set_default(self, name: str, value: Any) -> None:
        """``ALTER COLUMN c SET DEFAULT v`` (None: ``DROP DEFAULT``): the ``write-default`` only.

        Rows already written keep what they read: the ``initial-default`` never changes.
        """
        f = self._find(name)
        column = self.name_of(f.field_id)
        if self.format_version < DEFAULTS_FORMAT_VERSION:
            raise SchemaEvolutionError(
                f"cannot set a default for column {column!r}: default values need table format version 3 and "
                f"this table is format version {self.format_version}; upgrade it first (ALTER TABLE ... SET "
                "TBLPROPERTIES ('format-version'='3'))"
            )
        try:
            raw = defaults.default_json(f.field_type, value, column)
        except SchemaError as e:
            raise SchemaEvolutionError(str(e)) from None
        self._set(edit_field(self.schema, f.field_id, lambda old: replace(old, write_default=raw)))

    def make_optional(self, name: str) -> None:
        f = self._find(name)
        if not f.required:
            return
        self._check_not_identifier(f, "make optional")
        self._set(edit_field(self.schema, f.field_id, lambda old: replace(old, required=False)))

    def move(self, name: str, first: bool = False, after: str | None = None, before: str | None = None) -> None:
        f = self._find(name)
        parent_id = self.schema.parent_id(f.field_id)
        if parent_id is not None and not isinstance(self.schema.find_field(parent_id).field_type, StructType):
            raise SchemaEvolutionError(f"cannot move {name!r}: only struct fields and columns have an order")
        ref = after if after is not None else before
        other_id: int | None = None
        if not first:
            if ref is None:
                raise SchemaEvolutionError(f"say where to move {name!r}: first, after a column or before one")
            sibling = f"{self.name_of(parent_id)}.{ref}" if parent_id is not None else ref
            if self.schema.find_field_id(sibling, self.case_sensitive) is not None:
                ref = sibling  # a sibling's bare name, as Spark writes it
            other = self._find(ref, "reference column")
            other_id = other.field_id
            if other.field_id == f.field_id:
                raise SchemaEvolutionError(f"cannot move {name!r} next to itself; name another column")
            if self.schema.parent_id(other.field_id) != parent_id:
                raise SchemaEvolutionError(
                    f"cannot move {name!r} next to {ref!r}: they are not in the same struct; columns move only "
                    "among their siblings"
                )

        def reorder(children: Fields) -> Fields:
            moving = next(c for c in children if c.field_id == f.field_id)
            rest = tuple(c for c in children if c.field_id != f.field_id)
            if first:
                return (moving, *rest)
            target = next(i for i, c in enumerate(rest) if c.field_id == other_id)
            index = target + 1 if after is not None else target
            return (*rest[:index], moving, *rest[index:])

        self._set(edit_children(self.schema, parent_id, reorder))

    def set_identifier_fields(self, names: list[str]) -> None:
        ids = []
        for name in names:
            f = self._find(name)
            _check_identifier_candidate(self.schema, f, self.name_of(f.field_id))
            if f.field_id not in ids:
                ids.append(f.field_id)
        self._set(self.schema.fields, tuple(ids))

    def drop_identifier_fields(self, names: list[str]) -> None:
        current = list(self.schema.identifier_field_ids)
        for name in names:
            f = self._find(name)
            if f.field_id not in current:
                key = ", ".join(self.name_of(i) for i in current) or "none"
                raise SchemaEvolutionError(
                    f"column {self.name_of(f.field_id)!r} is not an identifier field (the identifier fields: {key})"
                )
            current.remove(f.field_id)
        self._set(self.schema.fields, tuple(current))

    # -- the outcome ------------------------------------------------------------------------
    def result(self, spec: PartitionSpec | None = None) -> Schema:
        """The evolved schema, checked once more against ``spec`` (the spec current at commit)."""
        check_partition_sources(self.base, self.schema, spec if spec is not None else self.spec)
        return self.schema

    def rewrites(self) -> list[TypeChangeRecord]:
        return [r for r in self.type_changes.values() if r.cost is TypeChange.REWRITE]


def _check_identifier_candidate(schema: Schema, f: NestedField, name: str) -> None:
    """Iceberg's rules: a required primitive, not floating point, not inside an optional struct,
    a list or a map."""
    if not isinstance(f.field_type, PrimitiveType) or isinstance(f.field_type, FloatType | DoubleType):
        raise SchemaEvolutionError(
            f"column {name!r} ({sql_type_name(f.field_type)}) cannot be an identifier field: identifier fields are "
            "primitive and not float or double"
        )
    if not f.required:
        raise SchemaEvolutionError(
            f"column {name!r} cannot be an identifier field: it is nullable; identifier fields must be NOT NULL "
            "(create the column NOT NULL)"
        )
    parent = schema.parent_id(f.field_id)
    while parent is not None:
        holder = schema.find_field(parent)
        if not isinstance(holder.field_type, StructType) or not holder.required:
            raise SchemaEvolutionError(
                f"column {name!r} cannot be an identifier field: it is inside {holder.name!r}, which is "
                "nullable, a list or a map"
            )
        parent = schema.parent_id(parent)


def check_partition_sources(base: Schema, new: Schema, spec: PartitionSpec | None) -> None:
    """Every source column of the current partition spec still exists with its type."""
    if spec is None:
        return
    for pf in spec.fields:
        if not base.has_field(pf.source_id):
            continue
        name = base.find_column_name(pf.source_id)
        if not new.has_field(pf.source_id):
            raise SchemaEvolutionError(
                f"cannot drop column {name!r}: the partition field {pf.name!r} uses it; change the partitioning first"
            )
        if new.find_field(pf.source_id).field_type != base.find_field(pf.source_id).field_type:
            raise SchemaEvolutionError(
                f"cannot change the type of column {name!r}: the partition field {pf.name!r} uses it"
            )
