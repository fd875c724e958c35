"""The REST spec's expression JSON: written from bound filters, read back to the same filter, and
read as pyiceberg writes it."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tablestore.errors import FilterError
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.expression_json import expression_from_json, expression_to_json
from tablestore.spec.expressions.expression_parser import to_expression
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    NestedField,
    StringType,
)

SCHEMA = Schema((
    NestedField(1, "id", LongType(), False),
    NestedField(2, "day", DateType(), False),
    NestedField(3, "price", DecimalType(9, 2), False),
    NestedField(4, "blob", BinaryType(), False),
    NestedField(5, "name", StringType(), False),
    NestedField(6, "score", DoubleType(), False),
))


@pytest.mark.parametrize("text", [
    "id > 7 AND day = DATE '2024-01-02'",
    "price >= 1.50 OR name LIKE 'ab%'",
    "id IN (1, 5, 9) AND NOT (name IS NULL)",
    "id NOT IN (2, 3) AND isnan(score)",
    "name NOT LIKE 'x%' OR score < 0.5",
])
def test_a_bound_filter_written_as_json_reads_back_to_the_same_filter(text: str) -> None:
    bound = bind(SCHEMA, to_expression(text))
    written = expression_to_json(bound)
    assert bind(SCHEMA, expression_from_json(written, SCHEMA)) == bound


def test_values_are_the_specs_json_forms() -> None:
    bound = bind(SCHEMA, to_expression("day = DATE '2024-01-02' AND price = 1.5"))
    assert expression_to_json(bound) == {
        "type": "and",
        "left": {"type": "eq", "term": "day", "value": "2024-01-02"},
        "right": {"type": "eq", "term": "price", "value": "1.50"},
    }
    blob = bind(SCHEMA, expression_from_json({"type": "eq", "term": "blob", "value": "78797A"}, SCHEMA))
    assert expression_to_json(blob) == {"type": "eq", "term": "blob", "value": "78797A"}
    assert blob.literal == b"xyz"  # type: ignore[attr-defined]
    price = expression_from_json({"type": "lt", "term": "price", "value": "2.25"}, SCHEMA)
    assert price.literal == Decimal("2.25")  # type: ignore[attr-defined]
    assert expression_to_json(bind(SCHEMA, to_expression(None))) is True


def test_pyicebergs_json_binds_to_the_filter_it_means() -> None:
    # As pyiceberg 0.12 writes `And(EqualTo("day", date(2024, 1, 2)), Not(IsNull("name")))`.
    sent = {"type": "and", "left": {"term": "day", "type": "eq", "value": "2024-01-02"},
            "right": {"type": "not", "child": {"term": "name", "type": "is-null"}}}
    assert bind(SCHEMA, expression_from_json(sent, SCHEMA)) == bind(
        SCHEMA, to_expression("day = DATE '2024-01-02' AND name IS NOT NULL"))
    assert bind(SCHEMA, expression_from_json({"type": "in", "term": {"type": "reference", "term": "id"},
                                              "values": [1, 2]}, SCHEMA)) == bind(SCHEMA, to_expression("id IN (1, 2)"))


@pytest.mark.parametrize(("obj", "words"), [
    ({"type": "between", "term": "id"}, "unknown filter type 'between'"),
    ({"type": "eq", "term": "id"}, "needs a 'value'"),
    ({"type": "in", "term": "id", "values": 3}, "needs a list of 'values'"),
    ({"type": "and", "left": True}, "needs 'right'"),
    ({"type": "eq", "term": {"type": "transform", "transform": "day", "term": "day"}, "value": 1}, "transform"),
    ({"type": "eq", "term": "blob", "value": "zz"}, "not hexadecimal"),
    (42, "true, false or an object"),
])
def test_malformed_json_is_a_filter_error_naming_the_part(obj: object, words: str) -> None:
    with pytest.raises(FilterError, match=words):
        expression_from_json(obj, SCHEMA)
