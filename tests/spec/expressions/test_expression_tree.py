"""The filter expression trees: construction, simplification, NOT push-down, binding.

Bound predicates themselves are tested in test_bound_predicates.py, SQL text in test_expression_text.py.
"""

from __future__ import annotations

import pickle
import uuid
from decimal import Decimal

import pytest

from tablestore.errors import FilterError
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.bound_predicates import (
    BoundEqualTo,
    BoundGreaterThan,
    BoundGreaterThanOrEqual,
    BoundIn,
    BoundIsNaN,
    BoundIsNull,
    BoundNotEqualTo,
    BoundNotIn,
    BoundNotNaN,
    BoundNotNull,
    BoundStartsWith,
    referenced_field_ids,
)
from tablestore.spec.expressions.expression_parser import parse_filter, to_expression
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
    Reference,
    StartsWith,
    referenced_names,
    rewrite_not,
)
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)

SCHEMA = Schema((
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "i", IntegerType()),
    NestedField(3, "f", FloatType()),
    NestedField(4, "d", DateType()),
    NestedField(5, "ts", TimestamptzType()),
    NestedField(6, "s", StringType()),
    NestedField(7, "dec", DecimalType(9, 2)),
    NestedField(8, "st", StructType(
        NestedField(9, "a", IntegerType(), required=True),
        NestedField(10, "b", StringType()),
    )),
    NestedField(11, "tags", ListType(12, StringType())),
    NestedField(13, "u", UUIDType()),
    NestedField(14, "flag", BooleanType()),
    NestedField(15, "req", StructType(NestedField(16, "x", DoubleType(), required=True)), required=True),
    NestedField(17, "t", TimestampType()),
))

A = EqualTo("a", 1)
B = GreaterThan("b", 2)
C = IsNull("c")


def b(text: str) -> BooleanExpression:
    return bind(SCHEMA, parse_filter(text))


# -- construction and simplification ---------------------------------------------------------


def test_and_or_simplify_constants() -> None:
    assert And(AlwaysTrue(), A) is A
    assert And(A, AlwaysTrue()) is A
    assert And(AlwaysFalse(), A) == AlwaysFalse()
    assert And(A, AlwaysFalse()) == AlwaysFalse()
    assert Or(AlwaysTrue(), A) == AlwaysTrue()
    assert Or(A, AlwaysTrue()) == AlwaysTrue()
    assert Or(AlwaysFalse(), A) is A
    assert Or(A, AlwaysFalse()) is A
    assert And(A, A) is A
    assert Or(B, B) is B
    assert AlwaysTrue() is AlwaysTrue()


def test_not_simplifies() -> None:
    assert Not(AlwaysTrue()) == AlwaysFalse()
    assert Not(AlwaysFalse()) == AlwaysTrue()
    assert Not(Not(A)) is A
    assert isinstance(Not(A), Not)
    assert Not(A).child is A


def test_variadic_and_or_nest_left() -> None:
    assert And(A, B, C) == And(And(A, B), C)
    assert Or(A, B, C) == Or(Or(A, B), C)
    node = And(A, B)
    assert isinstance(node, And)
    assert node.left is A and node.right is B


def test_operators() -> None:
    both, either, negated = A & B, A | B, ~A
    assert both == And(A, B)
    assert either == Or(A, B)
    assert negated == Not(A)


def test_non_expression_arguments_are_rejected() -> None:
    with pytest.raises(FilterError, match="expected a filter expression"):
        And(A, "b > 1")  # type: ignore[arg-type]
    with pytest.raises(FilterError, match="column name"):
        EqualTo(5, 1)  # type: ignore[arg-type]
    with pytest.raises(FilterError, match="collection"):
        In("a", "abc")


def test_equality_and_hashing() -> None:
    assert EqualTo("a", 1) == EqualTo(Reference("a"), 1)
    assert EqualTo("a", 1) != EqualTo("a", 2)
    assert EqualTo("a", 1) != NotEqualTo("a", 1)
    assert EqualTo("a", 1) != EqualTo("a", True)  # bool is not the number 1
    assert In("a", [1, 2, 3]) == In("a", [3, 2, 1, 1])
    assert In("a", [1, 2]) != NotIn("a", [1, 2])
    assert EqualTo("f", float("nan")) == EqualTo("f", float("nan"))
    assert len({EqualTo("a", 1), EqualTo("a", 1), In("a", [1, 2]), In("a", [2, 1])}) == 2
    assert IsNull("a") == IsNull("a") and IsNull("a") != NotNull("a")


def test_in_keeps_first_occurrence_order() -> None:
    assert In("a", [3, 1, 3, 2]).values == (3, 1, 2)


def test_str_is_sql() -> None:
    expr = And(EqualTo("a", 1), Or(GreaterThan("b", 2), IsNull("c")))
    assert str(expr) == "a = 1 AND (b > 2 OR c IS NULL)"
    assert str(Or(And(A, B), C)) == "(a = 1 AND b > 2) OR c IS NULL"
    assert str(And(And(A, B), C)) == "a = 1 AND b > 2 AND c IS NULL"
    assert str(Not(Or(A, B))) == "NOT (a = 1 OR b > 2)"
    assert str(Not(A)) == "NOT a = 1"
    assert str(In("x", ["p", "q's"])) == "x IN ('p', 'q\\'s')"
    assert str(NotIn("x", [1, None])) == "x NOT IN (1, NULL)"
    assert str(StartsWith("s", "a_b%")) == "s LIKE 'a\\\\_b\\\\%%'"
    assert str(NotStartsWith("s", "ab")) == "s NOT LIKE 'ab%'"
    assert str(IsNaN("f")) == "isnan(f)"
    assert str(NotNaN("f")) == "NOT isnan(f)"
    assert str(LessThanOrEqual("a.b c", Decimal("1.50"))) == "a.`b c` <= 1.50"
    assert str(EqualTo("select", True)) == "`select` = TRUE"
    assert str(GreaterThanOrEqual("d", __import__("datetime").date(2024, 1, 2))) == "d >= DATE '2024-01-02'"
    assert str(EqualTo("x", b"\x01\xff")) == "x = X'01ff'"
    assert str(AlwaysTrue()) == "TRUE" and str(AlwaysFalse()) == "FALSE"


@pytest.mark.parametrize(
    "expr",
    [
        And(EqualTo("a", 1), Or(GreaterThan("b", 2), IsNull("c"))),
        Or(And(A, B), Not(And(A, C))),
        In("x", ["p", "it's", "back\\slash"]),
        NotIn("x", [1, 2, None]),
        StartsWith("s", "50%_off\\"),
        NotStartsWith("s", "ab"),
        EqualTo("a.b c", Decimal("-1.25")),
        LessThan("d", __import__("datetime").date(1969, 12, 31)),
        GreaterThan("ts", __import__("datetime").datetime(2024, 1, 2, 3, 4, 5, 6)),
        EqualTo("bin", b"\x00\x10"),
        IsNaN("f") | NotNaN("g"),
        NotNull("x") & EqualTo("select", False),
    ],
)
def test_str_parses_back(expr: BooleanExpression) -> None:
    assert parse_filter(str(expr)) == expr


def test_repr_evaluates_back() -> None:
    expr = And(EqualTo("a", 1), Or(In("b", [1, 2]), Not(StartsWith("s", "x"))))
    assert eval(repr(expr)) == expr
    assert repr(IsNull("c")) == "IsNull('c')"
    assert repr(AlwaysTrue()) == "AlwaysTrue()"


def test_pickle_round_trip() -> None:
    expr = And(EqualTo("a", 1), Or(In("b", [1, 2]), Not(StartsWith("s", "x"))))
    assert pickle.loads(pickle.dumps(expr)) == expr
    bound = b("i > 3 and s like 'a%'")
    assert pickle.loads(pickle.dumps(bound)) == bound


# -- NOT push-down ---------------------------------------------------------------------------


def test_rewrite_not_pushes_down_to_complements() -> None:
    expr = Not(And(EqualTo("a", 1), Or(LessThan("b", 2), IsNull("c"))))
    assert rewrite_not(expr) == Or(NotEqualTo("a", 1), And(GreaterThanOrEqual("b", 2), NotNull("c")))
    assert rewrite_not(Not(In("a", [1]))) == NotIn("a", [1])
    assert rewrite_not(Not(IsNaN("f"))) == NotNaN("f")
    assert rewrite_not(Not(StartsWith("s", "x"))) == NotStartsWith("s", "x")
    assert rewrite_not(Not(GreaterThan("a", 1))) == LessThanOrEqual("a", 1)
    assert rewrite_not(Not(Not(A))) is A
    assert rewrite_not(And(A, Not(B))) == And(A, LessThanOrEqual("b", 2))


def test_negation_is_an_involution() -> None:
    for pred in (EqualTo("a", 1), LessThan("a", 1), LessThanOrEqual("a", 1), In("a", [1]), IsNull("a"),
                 IsNaN("a"), StartsWith("a", "x")):
        assert pred.negate().negate() == pred
        assert pred.negate() != pred


# -- binding ---------------------------------------------------------------------------------


def test_bind_resolves_fields_and_converts_literals() -> None:
    bound = b("d >= '2024-01-01'")
    assert isinstance(bound, BoundGreaterThanOrEqual)
    assert bound.field == SCHEMA.find_field("d")
    assert bound.field_id == 4
    assert bound.path == ("d",)
    assert bound.literal == 19723
    ts = b("ts = TIMESTAMP '2024-01-01 10:00:00'")
    assert isinstance(ts, BoundEqualTo) and ts.literal == 1_704_103_200_000_000
    aware = b("ts = '2024-01-01T12:00:00+02:00'")
    assert isinstance(aware, BoundEqualTo) and aware.literal == 1_704_103_200_000_000
    dec = b("dec = 1.5")
    assert isinstance(dec, BoundEqualTo) and dec.literal == Decimal("1.50")
    assert str(dec.literal) == "1.50"
    u = b("u = '12345678-1234-5678-1234-567812345678'")
    assert isinstance(u, BoundEqualTo) and u.literal == uuid.UUID("12345678-1234-5678-1234-567812345678")
    s = b("s in ('x', 'y')")
    assert isinstance(s, BoundIn) and s.literals == frozenset({"x", "y"})
    assert str(b("d >= '2024-01-01'")) == "d >= DATE '2024-01-01'"


def test_bind_nested_dotted_name() -> None:
    bound = b("st.b = 'x'")
    assert isinstance(bound, BoundEqualTo)
    assert bound.field_id == 10 and bound.path == ("st", "b") and bound.name == "st.b"


def test_bind_removes_not() -> None:
    bound = b("not (s like 'ab%' or i in (1, 2, 3))")
    assert str(bound) == "s NOT LIKE 'ab%' AND i NOT IN (1, 2, 3)"
    assert isinstance(bound, And)


def test_bind_null_checks_on_required_fields() -> None:
    assert b("id is null") == AlwaysFalse()
    assert b("id is not null") == AlwaysTrue()
    assert b("req.x is null") == AlwaysFalse()  # required inside a required struct
    # A required field inside an optional struct is null when the struct is.
    assert isinstance(b("st.a is null"), BoundIsNull)
    assert isinstance(b("st.a is not null"), BoundNotNull)
    assert isinstance(b("i is null"), BoundIsNull)


def test_bind_nan_predicates() -> None:
    assert b("isnan(i)") == AlwaysFalse()
    assert b("not isnan(i)") == AlwaysTrue()
    assert isinstance(b("isnan(f)"), BoundIsNaN)
    assert isinstance(b("not isnan(f)"), BoundNotNaN)
    nan = float("nan")
    assert isinstance(bind(SCHEMA, EqualTo("f", nan)), BoundIsNaN)
    assert isinstance(b("f = 'NaN'"), BoundIsNaN)
    assert bind(SCHEMA, GreaterThan("f", nan)) == AlwaysFalse()
    assert isinstance(bind(SCHEMA, GreaterThanOrEqual("f", nan)), BoundIsNaN)
    assert isinstance(bind(SCHEMA, LessThanOrEqual("f", nan)), BoundNotNull)
    assert str(bind(SCHEMA, NotEqualTo("f", nan))) == "f IS NOT NULL AND NOT isnan(f)"
    assert str(bind(SCHEMA, In("f", [1.0, nan]))) == "f = 1.0 OR isnan(f)"
    assert str(bind(SCHEMA, NotIn("f", [1.0, nan]))) == "f != 1.0 AND NOT isnan(f)"


def test_bind_exact_comparisons_on_integers_and_decimals() -> None:
    assert b("id < 2.5") == bind(SCHEMA, LessThanOrEqual("id", 2))
    assert b("i > 2.5") == bind(SCHEMA, GreaterThanOrEqual("i", 3))
    assert b("i >= -2.5") == bind(SCHEMA, GreaterThanOrEqual("i", -2))
    assert b("i <= -2.5") == bind(SCHEMA, LessThanOrEqual("i", -3))
    assert b("i = 2.5") == AlwaysFalse()
    assert isinstance(b("i != 2.5"), BoundNotNull)
    assert b("id != 2.5") == AlwaysTrue()  # required: every row differs from 2.5
    assert isinstance(b("i = 2.0"), BoundEqualTo)
    assert isinstance(b("i < 10000000000"), BoundNotNull)
    assert b("i > 10000000000") == AlwaysFalse()
    assert b("i < -10000000000") == AlwaysFalse()
    assert isinstance(b("i = 2147483647"), BoundEqualTo)
    assert b("i = 2147483648") == AlwaysFalse()
    assert isinstance(b("id > -9223372036854775808"), BoundGreaterThan)
    assert b("id < -9223372036854775809") == AlwaysFalse()
    assert b("dec < 1.234") == bind(SCHEMA, LessThanOrEqual("dec", Decimal("1.23")))
    assert b("dec > 1.234") == bind(SCHEMA, GreaterThanOrEqual("dec", Decimal("1.24")))
    assert b("dec = 1.234") == AlwaysFalse()
    assert b("dec > 10000000") == AlwaysFalse()
    assert isinstance(b("dec < 1e300"), BoundNotNull)
    assert b("i < 1.5e0") == bind(SCHEMA, LessThanOrEqual("i", 1))
    assert bind(SCHEMA, LessThan("i", float("inf"))) == bind(SCHEMA, NotNull("i"))
    assert bind(SCHEMA, EqualTo("i", float("nan"))) == AlwaysFalse()


def test_bind_in_lists() -> None:
    bound = b("i in (1, 2.5, 1e20, 3)")
    assert isinstance(bound, BoundIn) and bound.literals == frozenset({1, 3})
    assert isinstance(b("i in (1, 2.5)"), BoundEqualTo)
    assert b("i in (2.5)") == AlwaysFalse()
    assert isinstance(b("i not in (2.5)"), BoundNotNull)
    assert isinstance(b("i not in (1, 2.5)"), BoundNotEqualTo)
    not_in = b("i not in (1, 2, 3)")
    assert isinstance(not_in, BoundNotIn) and not_in.literals == frozenset({1, 2, 3})
    assert b("i not in (1, null)") == AlwaysFalse()  # never true in SQL
    assert b("not (i in (1, null))") == AlwaysFalse()
    assert b("i in (1, null)") == bind(SCHEMA, EqualTo("i", 1))
    assert bind(SCHEMA, In("i", [])) == AlwaysFalse()


def test_bind_starts_with() -> None:
    bound = b("s like 'ab%'")
    assert isinstance(bound, BoundStartsWith) and bound.literal == "ab"
    with pytest.raises(FilterError, match="LIKE needs a string column, but 'i' has type int"):
        b("i like 'a%'")


def test_bind_boolean_and_case_insensitive() -> None:
    assert bind(SCHEMA, parse_filter("flag")) == bind(SCHEMA, EqualTo("flag", True))
    assert isinstance(b("not flag"), BoundNotEqualTo)
    bound = bind(SCHEMA, parse_filter("ID = 1 AND St.B = 'x'"), case_sensitive=False)
    assert referenced_field_ids(bound) == {1, 10}


def test_bind_errors() -> None:
    with pytest.raises(FilterError) as e:
        b("nope = 1")
    assert "unknown column 'nope'" in str(e.value)
    assert "id, i, f, d, ts, s, dec, st, st.a, st.b" in str(e.value)
    with pytest.raises(FilterError, match="unknown column 'ID'"):
        b("ID = 1")
    with pytest.raises(FilterError) as e:
        b("i = 'abc'")
    assert "column 'i' of type int" in str(e.value) and "'abc'" in str(e.value)
    with pytest.raises(FilterError, match="column 'd' of type date"):
        b("d < TIMESTAMP '2024-01-01 10:00:00'")
    with pytest.raises(FilterError, match="column 's' of type string with the value 5"):
        b("s > 5")
    with pytest.raises(FilterError, match="column 'i' of type int with the value True"):
        bind(SCHEMA, EqualTo("i", True))
    with pytest.raises(FilterError, match="list<string>"):
        b("tags = 'a'")
    with pytest.raises(FilterError, match="struct"):
        b("st = 1")
    with pytest.raises(FilterError, match="inside a list or map"):
        b("tags.element = 'a'")
    with pytest.raises(FilterError, match="IS NULL"):
        bind(SCHEMA, EqualTo("i", None))
    with pytest.raises(FilterError, match="IS NOT NULL"):
        bind(SCHEMA, NotEqualTo("i", None))


def test_bind_is_idempotent() -> None:
    bound = b("i > 1 and not (s like 'x%')")
    assert bind(SCHEMA, bound) == bound
    assert bind(SCHEMA, Not(bound)) == bind(SCHEMA, Not(parse_filter("i > 1 and not (s like 'x%')")))
    other = Schema((NestedField(99, "z", IntegerType()),))
    with pytest.raises(FilterError, match="field id 2"):
        bind(other, bound)


def test_referenced_names_of_bound_and_unbound_filters() -> None:
    assert referenced_names(b("i > 1 and (st.b = 'x' or f < 2) and id is not null")) == {"i", "st.b", "f"}
    assert referenced_names(parse_filter("a = 1 or b.c is null")) == {"a", "b.c"}
    assert referenced_names(AlwaysTrue()) == set()


def test_to_expression() -> None:
    assert to_expression(None) == AlwaysTrue()
    assert to_expression("a = 1") == EqualTo("a", 1)
    assert to_expression(A) is A
    with pytest.raises(FilterError, match="SQL text or an expression"):
        to_expression(5)  # type: ignore[arg-type]
    with pytest.raises(FilterError, match="empty"):
        to_expression("  ")
