"""parse_filter: SQL text (Spark dialect) to filter expressions."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from tablestore.errors import FilterError
from tablestore.spec.expressions.expression_parser import parse_filter
from tablestore.spec.expressions.expression_tree import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    StartsWith,
)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("id = 5", EqualTo("id", 5)),
        ("id == 5", EqualTo("id", 5)),
        ("id != 5", NotEqualTo("id", 5)),
        ("id <> 5", NotEqualTo("id", 5)),
        ("id < 5", LessThan("id", 5)),
        ("id <= 5", LessThanOrEqual("id", 5)),
        ("id > 5", GreaterThan("id", 5)),
        ("id >= 5", GreaterThanOrEqual("id", 5)),
        ("5 < id", GreaterThan("id", 5)),
        ("5 <= id", GreaterThanOrEqual("id", 5)),
        ("5 > id", LessThan("id", 5)),
        ("5 >= id", LessThanOrEqual("id", 5)),
        ("5 = id", EqualTo("id", 5)),
        ("5 != id", NotEqualTo("id", 5)),
        ("id = -5", EqualTo("id", -5)),
        ("id > -(3)", GreaterThan("id", -3)),
        ("id = +5", EqualTo("id", 5)),
        ("x = 1.25", EqualTo("x", Decimal("1.25"))),
        ("x = -1.25", EqualTo("x", Decimal("-1.25"))),
        ("x = 1.5e3", EqualTo("x", 1500.0)),
        ("x = 12345678901234567890", EqualTo("x", 12345678901234567890)),
        ("name = 'abc'", EqualTo("name", "abc")),
        ("name = 'it\\'s'", EqualTo("name", "it's")),
        ("name = 'it' 's'", EqualTo("name", "its")),
        ("name = ''", EqualTo("name", "")),
        ("flag = TRUE", EqualTo("flag", True)),
        ("flag = false", EqualTo("flag", False)),
        ("flag", EqualTo("flag", True)),
        ("NOT flag", NotEqualTo("flag", True)),
        ("b = X'00ff'", EqualTo("b", b"\x00\xff")),
        ("d = DATE '2024-01-31'", EqualTo("d", dt.date(2024, 1, 31))),
        ("d >= CAST('2024-01-31' AS DATE)", GreaterThanOrEqual("d", dt.date(2024, 1, 31))),
        ("ts < TIMESTAMP '2024-01-31 10:00:00'", LessThan("ts", dt.datetime(2024, 1, 31, 10))),
        ("ts < TIMESTAMP '2024-01-31T10:00:00.5'", LessThan("ts", dt.datetime(2024, 1, 31, 10, 0, 0, 500000))),
        ("ts < CAST('2024-01-31 10:00:00' AS TIMESTAMP)", LessThan("ts", dt.datetime(2024, 1, 31, 10))),
        (
            "ts < TIMESTAMP '2024-01-31 10:00:00+02:00'",
            LessThan("ts", dt.datetime(2024, 1, 31, 10, tzinfo=dt.timezone(dt.timedelta(hours=2)))),
        ),
        ("d = '2024-01-31'", EqualTo("d", "2024-01-31")),
        ("x IN (1, 2, 3)", In("x", [1, 2, 3])),
        ("x IN ('a')", In("x", ["a"])),
        ("x NOT IN (1, 2)", NotIn("x", [1, 2])),
        ("NOT x IN (1, 2)", NotIn("x", [1, 2])),
        ("x IN (1, NULL)", In("x", [1, None])),
        ("x IS NULL", IsNull("x")),
        ("x IS NOT NULL", NotNull("x")),
        ("NOT x IS NULL", NotNull("x")),
        ("isnull(x)", IsNull("x")),
        ("isnotnull(x)", NotNull("x")),
        ("x IS TRUE", And(NotNull("x"), EqualTo("x", True))),
        ("x BETWEEN 1 AND 3", And(GreaterThanOrEqual("x", 1), LessThanOrEqual("x", 3))),
        ("x NOT BETWEEN 1 AND 3", Not(And(GreaterThanOrEqual("x", 1), LessThanOrEqual("x", 3)))),
        ("s LIKE 'abc%'", StartsWith("s", "abc")),
        ("s LIKE 'abc%%'", StartsWith("s", "abc")),
        ("s LIKE '%'", StartsWith("s", "")),
        ("s NOT LIKE 'abc%'", NotStartsWith("s", "abc")),
        ("NOT s LIKE 'abc%'", NotStartsWith("s", "abc")),
        ("s LIKE 'abc'", EqualTo("s", "abc")),
        ("s LIKE 'a\\_b%'", StartsWith("s", "a_b")),
        ("s LIKE '100\\%%'", StartsWith("s", "100%")),
        ("s LIKE '100!%%' ESCAPE '!'", StartsWith("s", "100%")),
        ("isnan(f)", IsNaN("f")),
        ("NOT isnan(f)", NotNaN("f")),
        ("TRUE", AlwaysTrue()),
        ("false", AlwaysFalse()),
        ("a = 1 AND b = 2", And(EqualTo("a", 1), EqualTo("b", 2))),
        ("a = 1 OR b = 2 AND c = 3", Or(EqualTo("a", 1), And(EqualTo("b", 2), EqualTo("c", 3)))),
        ("(a = 1 OR b = 2) AND c = 3", And(Or(EqualTo("a", 1), EqualTo("b", 2)), EqualTo("c", 3))),
        ("NOT (a = 1 OR b = 2)", Not(Or(EqualTo("a", 1), EqualTo("b", 2)))),
        ("NOT NOT a = 1", EqualTo("a", 1)),
        ("((a = 1))", EqualTo("a", 1)),
        ("a = 1 AND TRUE", EqualTo("a", 1)),
        ("a = 1 OR TRUE", AlwaysTrue()),
        ("`my col` = 1", EqualTo("my col", 1)),
        ('"my col" = 1', EqualTo("my col", 1)),
        ("`select` = 1", EqualTo("select", 1)),
        ("MixedCase = 1", EqualTo("MixedCase", 1)),
        ("a.b = 1", EqualTo("a.b", 1)),
        ("a.b.c.d.e = 1", EqualTo("a.b.c.d.e", 1)),
        ('"a"."b c" = 1', EqualTo("a.b c", 1)),
        ("`a`.`b` IS NULL", IsNull("a.b")),
        ("x = 1\n  AND\ty = 2", And(EqualTo("x", 1), EqualTo("y", 2))),
    ],
)
def test_parse(sql: str, expected: BooleanExpression) -> None:
    assert parse_filter(sql) == expected


def test_integers_stay_ints_and_decimals_exact() -> None:
    lit = parse_filter("x = 0.1")
    assert isinstance(lit, EqualTo) and lit.literal == Decimal("0.1") and isinstance(lit.literal, Decimal)
    lit = parse_filter("x = 10")
    assert isinstance(lit, EqualTo) and type(lit.literal) is int
    lit = parse_filter("x = 1e-1")
    assert isinstance(lit, EqualTo) and type(lit.literal) is float


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("x = NULL", "x IS NULL"),
        ("x != NULL", "x IS NOT NULL"),
        ("NULL = x", "x IS NULL"),
        ("x < NULL", "never true"),
        ("s LIKE 'a%b'", "only LIKE with a prefix pattern"),
        ("s LIKE '%abc'", "only LIKE with a prefix pattern"),
        ("s LIKE 'a_c%'", "only LIKE with a prefix pattern"),
        ("s NOT LIKE 'a%b%'", "only LIKE with a prefix pattern"),
        ("s ILIKE 'a%'", "only LIKE with a prefix pattern"),
        ("s RLIKE 'a.*'", "only LIKE with a prefix pattern"),
        ("s LIKE 5", "quoted pattern"),
        ("x + 1 > 2", "arithmetic is not supported in filters: x + 1"),
        ("x > y * 2", "arithmetic is not supported"),
        ("upper(s) = 'A'", "the function UPPER is not supported"),
        ("x = abs(-1)", "the function ABS is not supported"),
        ("my_udf(x)", "the function my_udf is not supported"),
        ("a = b", "comparing two columns is not supported"),
        ("x IN (1, y)", "comparing two columns"),
        ("1 = 1", "compares two values"),
        ("x IN (SELECT 1)", "subqueries are not supported"),
        ("x <=> 1", "null-safe comparison"),
        ("5", "is a value, not a condition"),
        ("x IS 5", "IS must be followed by NULL, TRUE or FALSE"),
        ("d = DATE '2024-02-30'", "'2024-02-30' is not a valid date"),
        ("ts = TIMESTAMP 'noon'", "'noon' is not a valid timestamp"),
        ("x = CAST(1 AS BIGINT)", "only CAST(... AS DATE) and CAST(... AS TIMESTAMP)"),
        ("a = 1; b = 2", "single expression"),
        ("", "empty"),
        ("   ", "empty"),
    ],
)
def test_errors_name_the_problem(sql: str, message: str) -> None:
    with pytest.raises(FilterError) as e:
        parse_filter(sql)
    assert message in str(e.value)


def test_syntax_error_has_line_and_column() -> None:
    with pytest.raises(FilterError) as e:
        parse_filter("x = 1 AND")
    assert "syntax error" in str(e.value)
    assert "line 1, column 9" in str(e.value)
    with pytest.raises(FilterError) as e:
        parse_filter("x = 1\nAND y = (2")
    assert "line 2" in str(e.value)


def test_unclosed_quote() -> None:
    with pytest.raises(FilterError, match="quote"):
        parse_filter("s = 'abc")


def test_non_string_input() -> None:
    with pytest.raises(FilterError, match="SQL text"):
        parse_filter(5)  # type: ignore[arg-type]
