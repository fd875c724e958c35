"""Sort orders: building from ORDER BY-style terms, defaults and JSON."""

from __future__ import annotations

import json

import pytest
from pyiceberg.table.sorting import SortOrder as PyIcebergSortOrder

from tablestore.errors import UnsupportedError, ValidationError
from tablestore.spec.partitioning.sort_order import (
    UNSORTED_ORDER,
    NullOrder,
    SortDirection,
    SortField,
    SortOrder,
    build_sort_order,
)
from tablestore.spec.partitioning.transforms import BucketTransform, DayTransform, IdentityTransform, TruncateTransform
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import DoubleType, ListType, LongType, NestedField, StringType, TimestamptzType

SCHEMA = Schema(
    (
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "ts", TimestamptzType()),
        NestedField(3, "name", StringType()),
        NestedField(4, "score", DoubleType()),
        NestedField(5, "tags", ListType(6, StringType())),
    )
)


def test_build_sort_order() -> None:
    order = build_sort_order(
        SCHEMA,
        ["id", "ts DESC NULLS LAST", "day(ts)", "bucket(16, id) desc", "truncate(name, 3) ASC NULLS LAST",
         "score desc nulls first"],
    )
    assert order.order_id == 1
    assert order.fields == (
        SortField(1, IdentityTransform(), SortDirection.ASC, NullOrder.NULLS_FIRST),
        SortField(2, IdentityTransform(), SortDirection.DESC, NullOrder.NULLS_LAST),
        SortField(2, DayTransform(), SortDirection.ASC, NullOrder.NULLS_FIRST),
        SortField(1, BucketTransform(16), SortDirection.DESC, NullOrder.NULLS_LAST),
        SortField(3, TruncateTransform(3), SortDirection.ASC, NullOrder.NULLS_LAST),
        SortField(4, IdentityTransform(), SortDirection.DESC, NullOrder.NULLS_FIRST),
    )
    assert build_sort_order(SCHEMA, "id DESC, ts", order_id=7).order_id == 7
    assert build_sort_order(SCHEMA, []) is UNSORTED_ORDER
    assert build_sort_order(SCHEMA, None).is_unsorted()


def test_defaults_and_normalization() -> None:
    assert SortField(1).null_order == NullOrder.NULLS_FIRST
    assert SortField(1, direction="desc").null_order == NullOrder.NULLS_LAST  # type: ignore[arg-type]
    field = SortField(1, DayTransform(), "DESC", "nulls_first")  # type: ignore[arg-type]
    assert field.direction is SortDirection.DESC and field.null_order is NullOrder.NULLS_FIRST
    assert not field.ascending and field.nulls_first
    with pytest.raises(ValidationError, match="unknown sort direction 'up'"):
        SortField(1, direction="up")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="unknown null order 'nulls-middle'"):
        SortField(1, null_order="nulls-middle")  # type: ignore[arg-type]


def test_json_round_trip_and_pyiceberg() -> None:
    order = build_sort_order(SCHEMA, ["id", "bucket(4, name) DESC NULLS LAST"], order_id=3)
    obj = order.to_json()
    assert obj == {
        "order-id": 3,
        "fields": [
            {"transform": "identity", "source-id": 1, "direction": "asc", "null-order": "nulls-first"},
            {"transform": "bucket[4]", "source-id": 3, "direction": "desc", "null-order": "nulls-last"},
        ],
    }
    assert SortOrder.from_json(json.loads(json.dumps(obj))) == order
    theirs = PyIcebergSortOrder.model_validate_json(json.dumps(obj))
    assert SortOrder.from_json(json.loads(theirs.model_dump_json())) == order
    assert UNSORTED_ORDER.to_json() == {"order-id": 0, "fields": []}
    assert SortOrder.from_json({"order-id": 0, "fields": []}) == UNSORTED_ORDER
    unknown = SortOrder.from_json({"order-id": 1, "fields": [
        {"transform": "zorder", "source-ids": [1], "direction": "asc", "null-order": "nulls-first"}]})
    assert str(unknown.fields[0].transform) == "zorder"
    with pytest.raises(UnsupportedError, match="multi-argument"):
        SortOrder.from_json({"order-id": 1, "fields": [
            {"transform": "zorder", "source-ids": [1, 2], "direction": "asc", "null-order": "nulls-first"}]})


@pytest.mark.parametrize(
    ("exprs", "message"),
    [
        (["nope"], "unknown column 'nope' in sort expression 'nope'; the columns are: id, ts, name, score"),
        (["bucket(4, score)"], "cannot apply bucket to column 'score' of type double"),
        (["id SIDEWAYS"], "unexpected 'SIDEWAYS' in sort expression 'id SIDEWAYS'"),
        (["id NULLS"], "unexpected 'NULLS'"),
        (["tags"], "column 'tags' in sort expression 'tags' is a list<string>"),
    ],
)
def test_errors(exprs: list[str], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        build_sort_order(SCHEMA, exprs)
    assert message in str(info.value)


def test_order_id_rules_and_validate() -> None:
    with pytest.raises(ValidationError, match="id 0 is reserved"):
        SortOrder(0, (SortField(1),))
    with pytest.raises(ValidationError, match="has no fields"):
        SortOrder(2, ())
    with pytest.raises(ValidationError, match="id 0 is reserved"):
        build_sort_order(SCHEMA, ["id"], order_id=0)
    order = build_sort_order(SCHEMA, ["day(ts)"])
    order.validate(SCHEMA)
    with pytest.raises(ValidationError, match="not in the schema"):
        order.validate(Schema((NestedField(1, "id", LongType()),)))
    with pytest.raises(ValidationError, match="cannot apply day to column 'ts' of type string"):
        order.validate(Schema((NestedField(2, "ts", StringType()),)))
