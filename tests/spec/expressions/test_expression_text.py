"""Filters as SQL text: names quoted only where needed, literals and predicates the parser reads back."""

from __future__ import annotations

import uuid
from datetime import date, datetime, time
from decimal import Decimal

import pytest

from tablestore.spec.expressions.expression_parser import parse_filter
from tablestore.spec.expressions.expression_text import (
    format_literal,
    literal_predicate_sql,
    quote_name,
    set_predicate_sql,
    unary_predicate_sql,
)
from tablestore.spec.expressions.expression_tree import EqualTo, In, IsNaN, NotStartsWith, Reference


def test_names_are_quoted_only_when_not_plain_identifiers() -> None:
    assert quote_name("a.b") == "a.b"
    assert quote_name("a.b c") == "a.`b c`"
    assert quote_name("select") == "`select`"
    assert quote_name("we`ird") == "`we``ird`"


@pytest.mark.parametrize(
    ("value", "sql"),
    [
        (None, "NULL"),
        (True, "TRUE"),
        (7, "7"),
        (Decimal("-1.50"), "-1.50"),
        (1.5, "1.5"),
        (float("nan"), "'nan'"),
        ("it's", "'it\\'s'"),
        (datetime(2024, 1, 2, 3, 4, 5), "TIMESTAMP '2024-01-02 03:04:05'"),
        (date(2024, 1, 2), "DATE '2024-01-02'"),
        (time(10, 30), "'10:30:00'"),
        (uuid.UUID(int=1), "'00000000-0000-0000-0000-000000000001'"),
        (b"\x01\xff", "X'01ff'"),
    ],
)
def test_format_literal_writes_sql_literals(value: object, sql: str) -> None:
    assert format_literal(value) == sql


def test_predicate_sql_reads_back_as_the_same_predicate() -> None:
    term = Reference("a b")
    assert literal_predicate_sql("eq", term, 1) == "`a b` = 1"
    assert parse_filter(literal_predicate_sql("eq", term, 1)) == EqualTo("a b", 1)
    like = literal_predicate_sql("not_starts_with", term, "50%_")
    assert like == "`a b` NOT LIKE '50\\\\%\\\\_%'"
    assert parse_filter(like) == NotStartsWith("a b", "50%_")
    assert parse_filter(set_predicate_sql("in", term, [2, 1])) == In("a b", [2, 1])
    assert parse_filter(unary_predicate_sql("is_nan", term)) == IsNaN("a b")
