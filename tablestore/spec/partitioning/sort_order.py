"""Sort orders (format/spec.md, "Sorting"; JSON in Appendix C).

A sort order lists (transform of a column, direction, null order); order id 0 is reserved for
the unsorted order. :func:`build_sort_order` reads SQL ``ORDER BY``-style terms such as
``"ts DESC NULLS LAST"`` or ``"day(ts)"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tablestore.errors import UnsupportedError, ValidationError
from tablestore.spec.partitioning.partition_spec import (
    check_transform,
    parse_term,
    resolve_column,
    split_expressions,
)
from tablestore.spec.partitioning.transforms import IdentityTransform, Transform, parse_transform
from tablestore.spec.schemas.schema import Schema


class SortDirection(StrEnum):
    ASC = "asc"
    DESC = "desc"


class NullOrder(StrEnum):
    NULLS_FIRST = "nulls-first"
    NULLS_LAST = "nulls-last"


def _direction(value: SortDirection | str) -> SortDirection:
    try:
        return SortDirection(str(value).strip().lower())
    except ValueError:
        raise ValidationError(f"unknown sort direction {value!r}; use 'asc' or 'desc'") from None


def _null_order(value: NullOrder | str) -> NullOrder:
    text = str(value).strip().lower().replace("_", "-").replace(" ", "-")
    try:
        return NullOrder(text)
    except ValueError:
        raise ValidationError(
            f"unknown null order {value!r}; use 'nulls-first' or 'nulls-last'"
        ) from None


@dataclass(frozen=True)
class SortField:
    """Sort by ``transform`` of column ``source_id``.

    Without a null order, nulls sort first ascending and last descending (Java's default:
    nulls are the smallest values).
    """

    source_id: int
    transform: Transform = field(default_factory=IdentityTransform)
    direction: SortDirection = SortDirection.ASC
    null_order: NullOrder | None = None

    def __post_init__(self) -> None:
        direction = _direction(self.direction)
        object.__setattr__(self, "direction", direction)
        if self.null_order is None:
            default = NullOrder.NULLS_FIRST if direction is SortDirection.ASC else NullOrder.NULLS_LAST
            object.__setattr__(self, "null_order", default)
        else:
            object.__setattr__(self, "null_order", _null_order(self.null_order))

    @property
    def ascending(self) -> bool:
        return self.direction is SortDirection.ASC

    @property
    def nulls_first(self) -> bool:
        return self.null_order is NullOrder.NULLS_FIRST

    def to_json(self) -> dict[str, Any]:
        return {
            "transform": str(self.transform),
            "source-id": self.source_id,
            "direction": str(self.direction),
            "null-order": str(self.null_order),
        }

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> SortField:
        if "source-id" in obj:
            source_id = int(obj["source-id"])
        elif len(obj.get("source-ids") or []) == 1:
            source_id = int(obj["source-ids"][0])
        else:
            raise UnsupportedError(f"multi-argument sort transforms are not supported: {dict(obj)}")
        return SortField(
            source_id,
            parse_transform(str(obj.get("transform", "identity")), allow_unknown=True),
            _direction(obj["direction"]),
            _null_order(obj["null-order"]),
        )

    def __str__(self) -> str:
        return f"{self.transform}({self.source_id}) {self.direction.upper()} {self.null_order}"


@dataclass(frozen=True)
class SortOrder:
    """An order id and its sort fields, most significant first."""

    order_id: int = 0
    fields: tuple[SortField, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        if self.order_id == 0 and self.fields:
            raise ValidationError("sort order id 0 is reserved for the unsorted order; use 1 or more")
        if self.order_id != 0 and not self.fields:
            raise ValidationError(f"sort order {self.order_id} has no fields; the unsorted order has id 0")

    def is_unsorted(self) -> bool:
        return not self.fields

    def validate(self, schema: Schema) -> None:
        """Raise ValidationError unless every field's column is in ``schema`` and fits its transform."""
        for f in self.fields:
            if not schema.has_field(f.source_id):
                raise ValidationError(
                    f"sort field {f} uses column id {f.source_id}, which is not in the schema"
                )
            name = schema.find_column_name(f.source_id) or str(f.source_id)
            field, _ = resolve_column(schema, name, str(f), "sort field")
            check_transform(f.transform, field, name, str(f))

    def to_json(self) -> dict[str, Any]:
        return {"order-id": self.order_id, "fields": [f.to_json() for f in self.fields]}

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> SortOrder:
        return SortOrder(
            int(obj.get("order-id", 0)),
            tuple(SortField.from_json(f) for f in obj.get("fields") or []),
        )

    def __str__(self) -> str:
        if not self.fields:
            return "[]"
        return "[\n" + "\n".join(f"  {f}" for f in self.fields) + "\n]"


UNSORTED_ORDER = SortOrder(0, ())


def build_sort_order(
    schema: Schema, exprs: str | Sequence[str] | None, order_id: int = 1
) -> SortOrder:
    """A sort order from terms like ``["id", "ts DESC NULLS LAST", "day(ts)", "bucket(16, id)"]``.

    No terms give :data:`UNSORTED_ORDER`. Raises ValidationError for unknown columns,
    transforms that do not fit the column's type and unparsable directions.
    """
    terms = split_expressions(exprs)
    if not terms:
        return UNSORTED_ORDER
    fields = []
    for text in terms:
        term = parse_term(text)
        field, name = resolve_column(schema, term.column, text, "sort expression")
        check_transform(term.transform, field, name, text)
        direction, null_order = _direction_words(term.rest, text)
        fields.append(SortField(field.field_id, term.transform, direction, null_order))
    return SortOrder(order_id, tuple(fields))


def _direction_words(words: list[str], text: str) -> tuple[SortDirection, NullOrder | None]:
    """``[ASC | DESC] [NULLS FIRST | NULLS LAST]`` after a sort term."""
    rest = [w.lower() for w in words]
    direction = SortDirection.ASC
    if rest and rest[0] in ("asc", "desc"):
        direction = SortDirection(rest.pop(0))
    null_order: NullOrder | None = None
    if len(rest) == 2 and rest[0] == "nulls" and rest[1] in ("first", "last"):
        null_order = NullOrder.NULLS_FIRST if rest[1] == "first" else NullOrder.NULLS_LAST
        rest = []
    if rest:
        raise ValidationError(
            f"unexpected {' '.join(words)!r} in sort expression {text!r}; write "
            "<column or transform> [ASC|DESC] [NULLS FIRST|NULLS LAST]"
        )
    return direction, null_order
