"""Bound predicates: equality, SQL text with external values, negation, make_bound, referenced ids."""

from __future__ import annotations

import datetime

import pytest

from tablestore.errors import FilterError
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.bound_predicates import (
    BoundEqualTo,
    BoundIn,
    BoundLessThanOrEqual,
    BoundNotStartsWith,
    make_bound,
    referenced_field_ids,
)
from tablestore.spec.expressions.expression_parser import parse_filter
from tablestore.spec.expressions.expression_tree import (
    AlwaysTrue,
    BooleanExpression,
    BoundReference,
)
from tests.spec.expressions.evaluator_fixtures import SCHEMA


def b(text: str) -> BooleanExpression:
    return bind(SCHEMA, parse_filter(text))


def test_bound_equality_and_str_show_values_as_users_write_them() -> None:
    assert b("i = 1") == b("i == 1")
    assert b("i = 1") != b("i = 2")
    assert b("i in (1, 2)") == b("i in (2, 1)")
    assert str(b("i in (2, 1) and ts < '2024-01-01'")) == "i IN (1, 2) AND ts < TIMESTAMP '2024-01-01 00:00:00+00:00'"
    assert str(b("lt < '2024-01-01 10:00'")) == "lt < TIMESTAMP '2024-01-01 10:00:00'"
    # Dates are held as day numbers but shown as DATE literals, IN lists sorted.
    assert str(b("d in ('2024-01-03', '2024-01-02')")) == "d IN (DATE '2024-01-02', DATE '2024-01-03')"
    assert str(b("s not like 'ab%'")) == "s NOT LIKE 'ab%'"
    assert repr(b("i = 1")) == "BoundEqualTo('i', 1, field_id=2)"


def test_bound_negate_gives_the_sql_complement() -> None:
    assert b("i < 5").negate() == b("i >= 5")
    assert isinstance(b("s like 'a%'").negate(), BoundNotStartsWith)
    assert b("i in (1, 2)").negate() == b("i not in (1, 2)")
    assert b("i is null").negate() == b("i is not null")
    assert isinstance(b("i <= 5"), BoundLessThanOrEqual)


def test_make_bound_builds_each_kind_from_its_op() -> None:
    ref = BoundReference(SCHEMA.find_field("i"), ("i",))
    eq = make_bound("eq", ref, 3)
    assert isinstance(eq, BoundEqualTo) and eq.literal == 3 and eq.field_id == 2
    members = make_bound("in", ref, [1, 2, 2])
    assert isinstance(members, BoundIn) and members.literals == frozenset({1, 2})
    assert make_bound("is_null", ref) == b("i is null")
    day = make_bound("eq", BoundReference(SCHEMA.find_field("d"), ("d",)), 19724)
    assert str(day) == f"d = DATE '{datetime.date(2024, 1, 2).isoformat()}'"


def test_referenced_field_ids_of_a_bound_filter() -> None:
    assert referenced_field_ids(b("i > 1 and (st.b = 'x' or f < 2) and id is not null")) == {2, 11, 3}
    assert referenced_field_ids(AlwaysTrue()) == set()
    with pytest.raises(FilterError, match="not bound"):
        referenced_field_ids(parse_filter("a = 1"))
