"""Partition specs: how partition tuples are derived from rows (format/spec.md, "Partitioning").

:func:`build_partition_spec` turns the expressions users write (Spark's ``days(ts)``,
``bucket(16, id)``, Iceberg's ``day``, Trino's ``truncate(s, 4)``) into a spec, named and
checked as Iceberg Java's ``PartitionSpec.Builder`` does, so that tables look the same whichever
engine created them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus

from tablestore.errors import UnsupportedError, ValidationError
from tablestore.spec.partitioning.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
    parse_transform,
)
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import IcebergType, NestedField, StructType, UnknownType

PARTITION_DATA_ID_START = 1000


@dataclass(frozen=True)
class PartitionField:
    """One field of a partition tuple: ``transform`` of the column ``source_id``."""

    source_id: int
    field_id: int
    transform: Transform
    name: str

    def to_json(self) -> dict[str, Any]:
        return {
            "source-id": self.source_id,
            "field-id": self.field_id,
            "name": self.name,
            "transform": str(self.transform),
        }

    @staticmethod
    def from_json(obj: Mapping[str, Any], default_field_id: int) -> PartitionField:
        return PartitionField(
            source_id=_source_id(obj),
            # v1 metadata may omit field ids; the reference implementation numbered them from 1000.
            field_id=int(obj.get("field-id", default_field_id)),
            transform=parse_transform(str(obj["transform"]), allow_unknown=True),
            name=str(obj["name"]),
        )

    def __str__(self) -> str:
        return f"{self.field_id}: {self.name}: {self.transform}({self.source_id})"


def _source_id(obj: Mapping[str, Any]) -> int:
    if "source-id" in obj:
        return int(obj["source-id"])
    ids = obj.get("source-ids") or []
    if len(ids) == 1:
        return int(ids[0])
    raise UnsupportedError(
        f"multi-argument transforms (source-ids {ids}) are not supported: {dict(obj)}"
    )


@dataclass(frozen=True)
class PartitionSpec:
    """A spec id and its partition fields, in tuple order."""

    spec_id: int = 0
    fields: tuple[PartitionField, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))

    def is_unpartitioned(self) -> bool:
        # As Java: a spec of only void fields partitions nothing.
        return all(isinstance(f.transform, VoidTransform) for f in self.fields)

    def is_partitioned(self) -> bool:
        return not self.is_unpartitioned()

    @property
    def last_assigned_field_id(self) -> int:
        return max((f.field_id for f in self.fields), default=PARTITION_DATA_ID_START - 1)

    def fields_by_source_id(self, source_id: int) -> list[PartitionField]:
        return [f for f in self.fields if f.source_id == source_id]

    def identity_source_ids(self) -> set[int]:
        return {f.source_id for f in self.fields if isinstance(f.transform, IdentityTransform)}

    def compatible_with(self, other: PartitionSpec) -> bool:
        """Same source columns and transforms in the same order (names and ids ignored)."""
        return len(self.fields) == len(other.fields) and all(
            a.source_id == b.source_id and a.transform == b.transform
            for a, b in zip(self.fields, other.fields, strict=True)
        )

    # -- types ----------------------------------------------------------------------------------

    def partition_type(
        self, schema: Schema, source_types: Mapping[int, IcebergType] | None = None
    ) -> StructType:
        """The struct of partition tuples; its field ids are the partition field ids.

        Fields are optional, as in Java (a partition field added later is null in older files).
        When a source column was dropped from ``schema`` its type is taken from
        ``source_types``; failing that, transforms whose result does not depend on the source
        (bucket, year, month, day, hour) still get their type and the others get ``unknown``.
        """
        out = []
        for f in self.fields:
            source: IcebergType | None = None
            if schema.has_field(f.source_id):
                source = schema.find_type(f.source_id)
            elif source_types is not None:
                source = source_types.get(f.source_id)
            out.append(NestedField(f.field_id, f.name, _result_type(f.transform, source), False))
        return StructType(*out)

    def partition_type_for(self, schemas: Sequence[Schema]) -> StructType:
        """The partition type, finding each source column in any of ``schemas`` (the last wins)."""
        if not schemas:
            raise ValidationError("partition_type_for needs at least one schema")
        types: dict[int, IcebergType] = {}
        for schema in schemas:
            for _, f in schema.all_fields():
                types[f.field_id] = f.field_type
        return self.partition_type(schemas[-1], types)

    def validate(self, schema: Schema) -> None:
        """Raise ValidationError unless every field's source is in ``schema`` and fits its transform."""
        for f in self.fields:
            if not schema.has_field(f.source_id):
                raise ValidationError(
                    f"partition field {f.name!r} uses column id {f.source_id}, which is not in the schema"
                )
            source = schema.find_field(f.source_id)
            name = schema.find_column_name(f.source_id) or source.name
            _check_source(schema, source, name, f"partition field {f.name!r}")
            check_transform(f.transform, source, name, f"{f.transform}({name})")

    # -- paths ------------------------------------------------------------------------------------

    def partition_path(self, values: Sequence[Any], schema: Schema) -> str:
        """``ts_day=2024-01-02/country=de``: human strings, URL-encoded as Java's URLEncoder does."""
        if len(values) != len(self.fields):
            raise ValidationError(
                f"a partition tuple of spec {self.spec_id} has {len(self.fields)} values, got {len(values)}"
            )
        types = self.partition_type(schema).fields
        parts = []
        for f, t, value in zip(self.fields, types, values, strict=True):
            human = f.transform.to_human_string(t.field_type, value)
            parts.append(f"{_url_encode(f.name)}={_url_encode(human)}")
        return "/".join(parts)

    # -- JSON -------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {"spec-id": self.spec_id, "fields": [f.to_json() for f in self.fields]}

    @staticmethod
    def from_json(obj: Mapping[str, Any] | Sequence[Mapping[str, Any]], spec_id: int = 0) -> PartitionSpec:
        """A spec from its JSON object, or from a bare field list (v1 ``partition-spec``)."""
        if isinstance(obj, Mapping):
            spec_id = int(obj.get("spec-id", spec_id))
            raw_fields = obj.get("fields") or []
        else:
            raw_fields = obj
        return PartitionSpec(
            spec_id,
            tuple(
                PartitionField.from_json(f, PARTITION_DATA_ID_START + i)
                for i, f in enumerate(raw_fields)
            ),
        )

    def __str__(self) -> str:
        if not self.fields:
            return "[]"
        return "[\n" + "\n".join(f"  {f}" for f in self.fields) + "\n]"


UNPARTITIONED_SPEC = PartitionSpec(0, ())


def _result_type(transform: Transform, source: IcebergType | None) -> IcebergType:
    if source is not None:
        return transform.result_type(source)
    if isinstance(transform, BucketTransform | YearTransform | MonthTransform | DayTransform
                  | HourTransform):
        # The result type does not depend on the source; any accepted source type gives it.
        return transform.result_type(UnknownType())
    return UnknownType()


def _url_encode(text: str) -> str:
    # java.net.URLEncoder: keeps letters, digits and . - * _, spaces become '+'; Python's
    # quote_plus also keeps '~', which Java encodes.
    return quote_plus(text, safe="*").replace("~", "%7E")


# -- parsing partition and sort expressions ----------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<quoted>`(?:[^`]|``)*`|"(?:[^"]|"")*")
      | (?P<number>[+-]?\d+(?:\.\d*)?(?!\w))
      | (?P<word>[^\W\d][\w$]*)
      | (?P<punct>[()\[\],.])
    )""",
    re.VERBOSE,
)

_TRANSFORM_NAMES = {
    "identity": "identity",
    "year": "year", "years": "year",
    "month": "month", "months": "month",
    "day": "day", "days": "day",
    "hour": "hour", "hours": "hour",
    "bucket": "bucket",
    "truncate": "truncate",
    "void": "void",
}
_HINT = (
    "write a column, or identity(col), year(col), month(col), day(col), hour(col), "
    "bucket(N, col), truncate(W, col) or void(col)"
)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    value: str


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValidationError(f"cannot parse {text!r} at {text[pos:].strip()!r}; {_HINT}")
        kind = m.lastgroup or ""
        raw = m.group(kind)
        value = raw
        if kind == "quoted":
            quote = raw[0]
            value = raw[1:-1].replace(quote * 2, quote)
        tokens.append(_Token(kind, raw, value))
        pos = m.end()
    return tokens


@dataclass
class ParsedTerm:
    """A transform applied to a column, as written, plus the tokens that followed it."""

    transform: Transform
    column: str
    rest: list[str]
    text: str


def parse_term(text: str) -> ParsedTerm:
    """Parse ``col``, ``day(col)``, ``bucket(16, col)``, ``bucket[16](col)``, ``truncate(col, 4)``.

    Column names may be dotted (nested) and backticked. Words after the term (``AS name``,
    ``DESC NULLS LAST``) come back in ``rest``.
    """
    tokens = _tokenize(text)
    if not tokens:
        raise ValidationError(f"empty expression; {_HINT}")
    pos = 0

    def peek(offset: int = 0) -> _Token | None:
        return tokens[pos + offset] if pos + offset < len(tokens) else None

    def column() -> str:
        nonlocal pos
        parts = []
        while True:
            tok = peek()
            if tok is None or tok.kind not in ("word", "quoted"):
                raise ValidationError(f"expected a column name in {text!r}; {_HINT}")
            parts.append(tok.value)
            pos += 1
            nxt = peek()
            if nxt is None or nxt.text != ".":
                return ".".join(parts)
            pos += 1

    def expect(punct: str) -> None:
        nonlocal pos
        tok = peek()
        if tok is None or tok.text != punct:
            found = f"found {tok.text!r}" if tok else "it ends there"
            raise ValidationError(f"expected {punct!r} in {text!r} but {found}; {_HINT}")
        pos += 1

    first = tokens[0]
    nxt = peek(1)
    if first.kind == "word" and nxt is not None and nxt.text in ("(", "["):
        name = first.value.lower()
        canonical = _TRANSFORM_NAMES.get(name)
        if canonical is None:
            raise ValidationError(f"unknown transform {first.value!r} in {text!r}; {_HINT}")
        pos = 1
        numbers: list[int] = []
        columns: list[str] = []
        if nxt.text == "[":
            pos += 1
            numbers.append(_number(peek(), text))
            pos += 1
            expect("]")
        expect("(")
        while True:
            tok = peek()
            if tok is not None and tok.kind == "number":
                numbers.append(_number(tok, text))
                pos += 1
            else:
                columns.append(column())
            tok = peek()
            if tok is not None and tok.text == ",":
                pos += 1
                continue
            expect(")")
            break
        transform = _make_transform(canonical, numbers, columns, text)
        col = columns[0]
    else:
        col = column()
        transform = IdentityTransform()
    return ParsedTerm(transform, col, [t.value for t in tokens[pos:]], text)


def _number(tok: _Token | None, text: str) -> int:
    if tok is None or tok.kind != "number":
        raise ValidationError(f"expected a number in {text!r}; {_HINT}")
    if "." in tok.value:
        raise ValidationError(f"expected a whole number in {text!r}, got {tok.value}")
    return int(tok.value)


def _make_transform(name: str, numbers: list[int], columns: list[str], text: str) -> Transform:
    if len(columns) != 1:
        raise ValidationError(
            f"{name} takes exactly one column in {text!r}, got {len(columns)}; {_HINT}"
        )
    if name in ("bucket", "truncate"):
        if len(numbers) != 1:
            example = "bucket(16, id)" if name == "bucket" else "truncate(4, name)"
            raise ValidationError(f"{name} needs one number and one column, like {example}; got {text!r}")
        n = numbers[0]
        what = "number of buckets" if name == "bucket" else "width"
        if not 0 < n <= 2**31 - 1:
            raise ValidationError(f"the {what} in {text!r} must be between 1 and 2147483647, got {n}")
        return BucketTransform(n) if name == "bucket" else TruncateTransform(n)
    if numbers:
        raise ValidationError(f"{name} takes no number, got {numbers[0]} in {text!r}; {_HINT}")
    return parse_transform(name)


def _column_names(schema: Schema) -> list[str]:
    """Columns a partition or sort may use: primitives, outside lists and maps."""
    names = []
    for name, f in schema.all_fields():
        if f.field_type.is_primitive and _inside_struct_only(schema, f.field_id):
            names.append(name)
    return names


def _inside_struct_only(schema: Schema, field_id: int) -> bool:
    parent = schema.parent_id(field_id)
    while parent is not None:
        if not isinstance(schema.find_type(parent), StructType):
            return False
        parent = schema.parent_id(parent)
    return True


def resolve_column(schema: Schema, column: str, text: str, purpose: str) -> tuple[NestedField, str]:
    """The field a partition/sort expression names, and its dotted name as the schema spells it.

    Exact names win; otherwise a case-insensitive match is used (Spark resolves names
    case-insensitively).
    """
    field_id = schema.find_field_id(column)
    if field_id is None:
        field_id = schema.find_field_id(column, case_sensitive=False)
    if field_id is None:
        raise ValidationError(
            f"unknown column {column!r} in {purpose} {text!r}; the columns are: "
            f"{', '.join(_column_names(schema))}"
        )
    name = schema.find_column_name(field_id) or column
    field = schema.find_field(field_id)
    _check_source(schema, field, name, f"{purpose} {text!r}")
    return field, name


def _check_source(schema: Schema, field: NestedField, name: str, where: str) -> None:
    if not _inside_struct_only(schema, field.field_id):
        raise ValidationError(
            f"column {name!r} in {where} is inside a list or map; only primitive columns, "
            "possibly nested in structs, can be used"
        )
    if not field.field_type.is_primitive:
        hint = "only primitive columns can be used"
        if isinstance(field.field_type, StructType) and field.field_type.fields:
            hint = f"use one of its fields, like {name}.{field.field_type.fields[0].name}"
        raise ValidationError(f"column {name!r} in {where} is a {field.field_type}; {hint}")


def check_transform(transform: Transform, field: NestedField, name: str, text: str) -> None:
    if not transform.can_transform(field.field_type):
        label = re.sub(r"\[\d+\]$", "", str(transform))
        raise ValidationError(
            f"cannot apply {label} to column {name!r} of type {field.field_type} in {text!r}: "
            f"{label} applies to {transform.accepts}"
        )


def _split_top_level(text: str) -> list[str]:
    """Split ``"day(ts), bucket(16, id)"`` on the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def split_expressions(exprs: str | Sequence[str] | None) -> list[str]:
    if exprs is None:
        return []
    if isinstance(exprs, str):
        return _split_top_level(exprs)
    return [e.strip() for e in exprs if e.strip()]


def build_partition_spec(
    schema: Schema,
    exprs: str | Sequence[str] | None,
    spec_id: int = 0,
    last_partition_id: int = PARTITION_DATA_ID_START - 1,
) -> PartitionSpec:
    """A partition spec from expressions like ``["days(ts)", "bucket(16, id)", "country"]``.

    Fields get ids after ``last_partition_id`` and Java's default names (``ts_day``,
    ``id_bucket``, ``name_trunc``, ``col_null``; identity keeps the column name), unless
    written ``day(ts) AS d``. Raises ValidationError for unknown columns, transforms that do not
    fit the column's type, bad numbers, duplicate or clashing names and redundant fields.
    """
    fields: list[PartitionField] = []
    names: dict[str, str] = {}
    dedup: dict[tuple[int, str], str] = {}
    next_id = last_partition_id + 1
    for text in split_expressions(exprs):
        term = parse_term(text)
        alias = _alias(term)
        field, column = resolve_column(schema, term.column, text, "partition expression")
        check_transform(term.transform, field, column, text)
        name = alias if alias is not None else term.transform.default_partition_name(column)
        if not name:
            raise ValidationError(f"the partition field name in {text!r} is empty")
        clash = schema.find_field_id(name)
        if clash is not None and not (
            isinstance(term.transform, IdentityTransform) and clash == field.field_id
        ):
            raise ValidationError(
                f"partition field name {name!r} of {text!r} is also a column of the table; "
                "choose another name with AS <name>"
            )
        if name in names:
            raise ValidationError(
                f"partition field name {name!r} is used twice, by {names[name]!r} and {text!r}; "
                "give one of them another name with AS <name>"
            )
        key = (field.field_id, term.transform.dedup_name)
        if key in dedup:
            raise ValidationError(
                f"{text!r} is redundant with {dedup[key]!r}: both partition {column!r} by "
                f"{'time' if term.transform.dedup_name == 'time' else term.transform}; keep one of them"
            )
        names[name] = text
        dedup[key] = text
        fields.append(PartitionField(field.field_id, next_id, term.transform, name))
        next_id += 1
    return PartitionSpec(spec_id, tuple(fields))


def _alias(term: ParsedTerm) -> str | None:
    if not term.rest:
        return None
    if len(term.rest) == 2 and term.rest[0].lower() == "as":
        return term.rest[1]
    raise ValidationError(
        f"unexpected {' '.join(term.rest)!r} after the partition expression in {term.text!r}; "
        "only 'AS <name>' may follow it"
    )
