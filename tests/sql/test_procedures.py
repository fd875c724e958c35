"""CALL: parsing, argument binding and literal values, with a procedure registered by the test."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

import pytest

from tablestore.errors import ParseError, ValidationError
from tablestore.sql.parse.parser import parse_statement
from tablestore.sql.parse.statements import Call
from tablestore.sql.procedures.arguments import literal_value
from tablestore.sql.procedures.registry import Parameter, procedure
from tablestore.sql.result import StatementResult
from tablestore.sql.session import SqlSession
from tests.lakehouse_config import SqliteCatalog, sqlite_catalog


@procedure("test_echo", Parameter("table", required=True), Parameter("retain_last"), Parameter("options"))
def _echo(session: Any, catalog: Any, args: dict[str, Any]) -> StatementResult:
    return StatementResult(["catalog", "args"], [[catalog.name, repr(sorted(args.items()))]])


@pytest.fixture
def catalogs(tmp_path: Path) -> list[SqliteCatalog]:
    return [sqlite_catalog(tmp_path, "cat1"), sqlite_catalog(tmp_path, "cat2")]


def test_call_parses_named_and_positional_arguments() -> None:
    s = parse_statement("CALL cat.system.expire_snapshots(table => 'db.t', retain_last => 1)")
    assert isinstance(s, Call)
    assert s.name == ("cat", "system", "expire_snapshots")
    assert s.args == (("table", "'db.t'"), ("retain_last", "1"))
    s = parse_statement("CALL system.rewrite_manifests('db.t', map('a', 1))")
    assert isinstance(s, Call) and s.args == ((None, "'db.t'"), (None, "map('a', 1)"))
    with pytest.raises(ParseError) as e:
        parse_statement("CALL system.x(table => 'a'")
    assert e.value.line == 1


def test_literal_values() -> None:
    assert literal_value("'db.t'") == "db.t"
    assert literal_value("42") == 42
    assert literal_value("-3") == -3
    assert literal_value("1.5") == decimal.Decimal("1.5")
    assert literal_value("true") is True
    assert literal_value("NULL") is None
    assert literal_value("TIMESTAMP '2024-01-02 03:04:05'") == datetime.datetime(
        2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    assert literal_value("DATE '2024-01-02'") == datetime.date(2024, 1, 2)
    assert literal_value("array('a', 'b')") == ["a", "b"]
    assert literal_value("map('k', 'v', 'k2', 'v2')") == {"k": "v", "k2": "v2"}
    with pytest.raises(ValidationError, match="literals"):
        literal_value("a + b")


def test_call_runs_in_the_named_or_current_catalog(session: SqlSession) -> None:
    result = session.execute_one("CALL cat2.system.test_echo(table => 'db.t', retain_last => 2)")
    assert result.rows == [["cat2", repr([("retain_last", 2), ("table", "db.t")])]]
    result = session.execute_one("CALL system.test_echo('db.t', 5, map('k', 'v'))")
    assert result.rows == [["cat1", repr([("options", {"k": "v"}), ("retain_last", 5), ("table", "db.t")])]]


def test_call_errors_name_the_problem(session: SqlSession) -> None:
    with pytest.raises(ValidationError, match="unknown procedure system.nope; the procedures are .*test_echo"):
        session.execute_one("CALL system.nope()")
    with pytest.raises(ValidationError, match="has no parameter 'tabel'; its parameters are options, retain_last, table"):
        session.execute_one("CALL system.test_echo(tabel => 'x')")
    with pytest.raises(ValidationError, match="missing required argument"):
        session.execute_one("CALL system.test_echo(retain_last => 1)")
    with pytest.raises(ValidationError, match="positional argument cannot follow"):
        session.execute_one("CALL system.test_echo(table => 'x', 1)")
    with pytest.raises(ValidationError, match="namespace 'system'"):
        session.execute_one("CALL cat1.other.test_echo('x')")
