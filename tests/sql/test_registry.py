"""The SQL session's dispatch: every statement the parser makes has a handler in the registry,
a statement without one is refused by name, the handlers never import the session (type-only
imports counted too, which lint-imports leaves out), and SET keeps typed session options."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grimp
import pytest

from tablestore.errors import ValidationError
from tablestore.sql.options import SessionOptions
from tablestore.sql.parse import parser  # noqa: F401  (imports every parse module: every statement type)
from tablestore.sql.parse import statements as st
from tablestore.sql.run.registry import HANDLERS
from tablestore.sql.session import SqlSession
from tests.lakehouse_config import lakehouse_config, sqlite_catalog
from tests.sql.conftest import rows


def _statement_types() -> set[type[st.Statement]]:
    found: set[type[st.Statement]] = set()
    todo = list(st.Statement.__subclasses__())
    while todo:
        kind = todo.pop()
        if kind.__module__.startswith("tablestore.sql.") and kind not in found:
            found.add(kind)
            todo.extend(kind.__subclasses__())
    return found


def test_every_statement_type_of_the_parser_has_exactly_one_handler() -> None:
    kinds = HANDLERS.kinds()
    assert len(kinds) == len(set(kinds))
    assert set(kinds) == _statement_types()
    assert len(kinds) == 41


@dataclass(frozen=True)
class Unknown(st.Statement):
    pass


def test_a_statement_type_without_a_handler_is_refused_by_name(tmp_path: Path) -> None:
    session = SqlSession(lakehouse_config(tmp_path, sqlite_catalog(tmp_path, "cat")))
    with pytest.raises(ValidationError, match=r"statement Unknown \(tests\.sql\.test_registry\) is not supported "
                                              r"yet: no handler is registered for it in tablestore\.sql\.run\.registry"):
        session.execute_statement(Unknown("FROB"))


def test_no_module_of_the_sql_layer_imports_the_session_and_none_is_in_a_cycle() -> None:
    graph = grimp.build_graph("tablestore", exclude_type_checking_imports=False)
    sql = {m for m in graph.modules if m.startswith("tablestore.sql.")}
    assert {m for m in graph.find_modules_that_directly_import("tablestore.sql.session") if m in sql} == set()
    imports = {m: {i for i in graph.find_modules_directly_imported_by(m) if i in sql} for m in sql}
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError(f"import cycle: {' -> '.join([*path[path.index(module):], module])}")
        if module in done:
            return
        for imported in sorted(imports[module]):
            visit(imported, [*path, module])
        done.add(module)

    for module in sorted(sql):
        visit(module, [])


def test_set_keeps_typed_options_with_the_same_keys_values_and_errors(tmp_path: Path) -> None:
    session = SqlSession(lakehouse_config(tmp_path, sqlite_catalog(tmp_path, "cat")))
    assert rows(session, "SET") == []
    assert rows(session, "SET tablestore.insert-overwrite.mode") == [["tablestore.insert-overwrite.mode",
                                                                      "<undefined>"]]
    assert rows(session, "SET tablestore.insert-overwrite.mode=STATIC") == [["tablestore.insert-overwrite.mode",
                                                                             "static"]]
    assert rows(session, "SET spark.sql.sources.partitionOverwriteMode=dynamic; SET my.key = 'a b'") == [
        ["my.key", "a b"]]
    assert rows(session, "SET") == [["my.key", "a b"], ["spark.sql.sources.partitionOverwriteMode", "dynamic"],
                                    ["tablestore.insert-overwrite.mode", "static"]]
    options = session.session_options
    assert (options.insert_overwrite_mode, options.partition_overwrite_mode, options.others) == (
        "static", "dynamic", {"my.key": "a b"})
    assert options.overwrite_mode() == "static"  # tablestore's option wins over Spark's
    with pytest.raises(ValidationError, match=r"spark.sql.sources.partitionOverwriteMode must be 'dynamic' or "
                                              r"'static', got 'sometimes'"):
        session.execute("SET spark.sql.sources.partitionOverwriteMode=sometimes")
    assert options.partition_overwrite_mode == "dynamic"
    options.reset("tablestore.insert-overwrite.mode")
    assert options.overwrite_mode() == "dynamic"
    options.reset()
    assert options == SessionOptions()
    assert session.runtime_mode == "batch"
    session.runtime_mode = "streaming"
    assert options.runtime_mode == "streaming"
