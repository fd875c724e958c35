"""CALL system.merge_columns / update_columns through a SQL session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tablestore.errors import SchemaError, ValidationError
from tablestore.sql.session import SqlSession
from tests.lakehouse_config import SqliteCatalog, sqlite_catalog


@pytest.fixture
def catalogs(tmp_path: Path) -> list[SqliteCatalog]:
    return [sqlite_catalog(tmp_path, "lake"), sqlite_catalog(tmp_path, "other")]


@pytest.fixture
def session(session: SqlSession) -> SqlSession:
    s = session
    s.execute("""
        CREATE DATABASE db;
        CREATE TABLE db.t (user_id bigint, name string);
        INSERT INTO db.t VALUES (1, 'a'), (2, 'b'), (3, 'c');
        INSERT INTO db.t VALUES (4, 'd'), (5, 'e');
        CREATE TABLE db.s (user_id bigint, segment string, ltv double);
        INSERT INTO db.s VALUES (1, 's1', 1.5), (4, 's4', NULL), (9, 's9', 9.0);
    """)
    return s


def rows(session: SqlSession) -> list[list[object]]:
    return session.execute_one("SELECT * FROM db.t ORDER BY user_id").rows


def test_merge_then_update_columns_by_call(session: SqlSession) -> None:
    result = session.execute_one(
        "CALL lake.system.merge_columns(table => 'db.t', source => 'db.s', on => 'user_id', columns => 'segment,ltv')")
    assert result.columns == ["rewritten_fragments", "snapshot_id"] and result.rows[0][0] == 2
    assert rows(session) == [[1, "a", "s1", 1.5], [2, "b", None, None], [3, "c", None, None],
                             [4, "d", "s4", None], [5, "e", None, None]]
    session.execute("""
        CREATE TABLE db.u (user_id bigint, segment string);
        INSERT INTO db.u VALUES (1, NULL), (2, 'n2'), (4, 'n4');
    """)
    session.execute_one("CALL system.update_columns(table => 'db.t', source => 'db.u', on => 'user_id', "
                        "columns => 'segment')")
    assert [r[2] for r in rows(session)] == ["s1", "n2", None, "n4", None]
    session.execute_one("CALL system.update_columns('db.t', 'db.u', 'user_id', 'segment', 'error', 'overwrite')")
    assert [r[2] for r in rows(session)] == [None, "n2", None, "n4", None]


def test_a_source_in_another_catalog(session: SqlSession) -> None:
    session.execute("""
        CREATE DATABASE other.db;
        CREATE TABLE other.db.x (user_id bigint, tier string);
        INSERT INTO other.db.x VALUES (3, 'gold'), (3, 'silver');
    """)
    with pytest.raises(ValidationError, match="2 rows with the key user_id=3"):
        session.execute_one("CALL system.merge_columns(table => 'db.t', source => 'other.db.x', on => 'user_id')")
    session.execute_one("CALL system.merge_columns(table => 'db.t', source => 'other.db.x', on => 'user_id', "
                        "duplicates => 'first')")
    assert [r[2] for r in rows(session)] == [None, None, "gold", None, None]


def test_procedure_errors_name_the_problem(session: SqlSession) -> None:
    with pytest.raises(ValidationError, match="missing required argument"):
        session.execute_one("CALL system.merge_columns(table => 'db.t', source => 'db.s')")
    with pytest.raises(ValidationError, match="source db.s has no column 'nope'"):
        session.execute_one("CALL system.merge_columns(table => 'db.t', source => 'db.s', on => 'user_id', "
                            "columns => 'nope')")
    with pytest.raises(ValidationError, match="update_columns needs columns"):
        session.execute_one("CALL system.update_columns(table => 'db.t', source => 'db.s', on => 'user_id')")
    with pytest.raises(SchemaError, match="has no column 'segment'; use merge_columns"):
        session.execute_one("CALL system.update_columns(table => 'db.t', source => 'db.s', on => 'user_id', "
                            "columns => 'segment')")
