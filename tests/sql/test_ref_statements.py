"""Branching and tagging DDL (``ALTER TABLE ... CREATE|REPLACE|DROP BRANCH|TAG``) and ``RESET``:
parsing, and each statement's effect on the table's refs, with the refusals and nothing committed."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tablestore.errors import NoSuchSnapshotError, ParseError, TableStoreError, ValidationError
from tablestore.spec.metadata.table_metadata import SnapshotRef
from tablestore.sql.parse.parser import parse_statement
from tablestore.sql.parse.statements import CreateRef, DropRef, ResetOption
from tablestore.sql.session import SqlSession
from tablestore.table import Table

DAY_MS = 86_400_000


def make_table(session: SqlSession, batches: int = 2) -> Table:
    """``db.t (id bigint)`` with ``batches`` appended snapshots of one row each (ids 1, 2, ...)."""
    session.execute_one("CREATE TABLE db.t (id bigint)")
    catalog, identifier = session.manager.resolve_table(("db", "t"))
    table = catalog.load_table(identifier)
    for i in range(1, batches + 1):
        table.append(pa.table({"id": pa.array([i], pa.int64())}))
    return table


def refs(table: Table) -> dict[str, SnapshotRef]:
    return table.refresh().refs()


def refused(session: SqlSession, table: Table, sql: str, error: type[TableStoreError], match: str) -> None:
    before = table.refresh().metadata_location
    with pytest.raises(error, match=match):
        session.execute_one(sql)
    assert table.refresh().metadata_location == before


def test_parse_create_branch_with_every_option() -> None:
    s = parse_statement("ALTER TABLE db.t CREATE BRANCH `audit-branch` AS OF VERSION 1234 RETAIN 30 DAYS "
                        "WITH SNAPSHOT RETENTION 3 SNAPSHOTS 2 DAYS")
    assert s == CreateRef(s.sql, ("db", "t"), "branch", "audit-branch", True, False, False, 1234, 30 * DAY_MS, 3,
                          2 * DAY_MS)
    s = parse_statement("ALTER TABLE t CREATE OR REPLACE BRANCH b WITH SNAPSHOT RETENTION 5 HOURS")
    assert isinstance(s, CreateRef) and (s.create, s.replace, s.min_snapshots_to_keep, s.max_snapshot_age_ms) == (
        True, True, None, 5 * 3_600_000)
    s = parse_statement("ALTER TABLE t REPLACE TAG v1 AS OF VERSION 7 RETAIN 10 MINUTES")
    assert isinstance(s, CreateRef)
    assert (s.kind, s.create, s.replace, s.snapshot_id, s.max_ref_age_ms) == ("tag", False, True, 7, 600_000)
    s = parse_statement("ALTER TABLE t CREATE TAG IF NOT EXISTS v1")
    assert isinstance(s, CreateRef) and s.if_not_exists and s.kind == "tag"
    assert parse_statement("ALTER TABLE t DROP BRANCH IF EXISTS b") == DropRef(
        "ALTER TABLE t DROP BRANCH IF EXISTS b", ("t",), "branch", "b", True)
    assert parse_statement("RESET spark.wap.branch") == ResetOption("RESET spark.wap.branch", "spark.wap.branch")
    assert parse_statement("RESET") == ResetOption("RESET", None)


@pytest.mark.parametrize(("sql", "message"), [
    ("ALTER TABLE t CREATE OR REPLACE BRANCH IF NOT EXISTS b", "IF NOT EXISTS cannot go with REPLACE"),
    ("ALTER TABLE t CREATE TAG v WITH SNAPSHOT RETENTION 3 SNAPSHOTS", "unexpected 'WITH' in CREATE TAG"),
    ("ALTER TABLE t CREATE BRANCH b RETAIN 3 WEEKS", "expected DAYS, HOURS or MINUTES after 3 but found 'WEEKS'"),
    ("ALTER TABLE t CREATE BRANCH b WITH SNAPSHOT RETENTION", "expected n SNAPSHOTS and/or m DAYS"),
    ("ALTER TABLE t CREATE BRANCH b AS OF VERSION 'x'", "expected a snapshot id"),
    ("ALTER VIEW v CREATE BRANCH b", "views have no branches or tags"),
])
def test_parse_errors_point_at_the_mistake(sql: str, message: str) -> None:
    with pytest.raises(ParseError, match=message) as e:
        parse_statement(sql)
    assert e.value.line == 1


def test_create_branch_and_tag_at_the_current_or_a_given_snapshot(session: SqlSession) -> None:
    table = make_table(session)
    first, second = (s.snapshot_id for s in table.snapshots())
    session.execute("ALTER TABLE db.t CREATE BRANCH audit; "
                    f"ALTER TABLE db.t CREATE TAG `v-1` AS OF VERSION {first} RETAIN 365 DAYS; "
                    f"ALTER TABLE db.t CREATE BRANCH old AS OF VERSION {first} RETAIN 7 DAYS "
                    "WITH SNAPSHOT RETENTION 2 SNAPSHOTS 3 HOURS")
    found = refs(table)
    assert found["audit"] == SnapshotRef(second, "branch")
    assert found["v-1"] == SnapshotRef(first, "tag", max_ref_age_ms=365 * DAY_MS)
    assert found["old"] == SnapshotRef(first, "branch", 2, 3 * 3_600_000, 7 * DAY_MS)
    assert table.scan(ref="v-1").to_arrow()["id"].to_pylist() == [1]


def test_create_refuses_an_existing_name_unless_if_not_exists(session: SqlSession) -> None:
    table = make_table(session)
    first = table.snapshots()[0].snapshot_id
    session.execute_one(f"ALTER TABLE db.t CREATE TAG v1 AS OF VERSION {first}")
    refused(session, table, "ALTER TABLE db.t CREATE BRANCH v1", ValidationError,
            "cannot create branch 'v1': a tag named 'v1' already exists")
    session.execute_one("ALTER TABLE db.t CREATE TAG IF NOT EXISTS v1")  # nothing happens
    assert refs(table)["v1"].snapshot_id == first
    refused(session, table, "ALTER TABLE db.t CREATE BRANCH b AS OF VERSION 42", NoSuchSnapshotError,
            "cannot create branch 'b': the table has no snapshot 42")


def test_replace_moves_an_existing_ref_and_keeps_its_retention(session: SqlSession) -> None:
    table = make_table(session)
    first, second = (s.snapshot_id for s in table.snapshots())
    session.execute(f"ALTER TABLE db.t CREATE BRANCH b AS OF VERSION {first} WITH SNAPSHOT RETENTION 4 SNAPSHOTS; "
                    f"ALTER TABLE db.t CREATE TAG v AS OF VERSION {first}")
    session.execute(f"ALTER TABLE db.t REPLACE BRANCH b AS OF VERSION {second} RETAIN 2 DAYS; "
                    "ALTER TABLE db.t REPLACE TAG v RETAIN 1 DAYS")
    found = refs(table)
    assert found["b"] == SnapshotRef(second, "branch", min_snapshots_to_keep=4, max_ref_age_ms=2 * DAY_MS)
    assert found["v"] == SnapshotRef(second, "tag", max_ref_age_ms=DAY_MS)
    refused(session, table, "ALTER TABLE db.t REPLACE BRANCH nope", ValidationError,
            "cannot replace branch 'nope': the table has no branch 'nope'")
    refused(session, table, "ALTER TABLE db.t REPLACE BRANCH v", ValidationError,
            "cannot replace branch 'v': 'v' is a tag, not a branch")


def test_create_or_replace_creates_or_moves(session: SqlSession) -> None:
    table = make_table(session)
    first, second = (s.snapshot_id for s in table.snapshots())
    session.execute_one(f"ALTER TABLE db.t CREATE OR REPLACE TAG v AS OF VERSION {first}")
    assert refs(table)["v"].snapshot_id == first
    session.execute_one("ALTER TABLE db.t CREATE OR REPLACE TAG v")
    assert refs(table)["v"].snapshot_id == second
    session.execute_one(f"ALTER TABLE db.t CREATE OR REPLACE BRANCH b AS OF VERSION {first}")
    assert refs(table)["b"] == SnapshotRef(first, "branch")


def test_drop_branch_and_tag(session: SqlSession) -> None:
    table = make_table(session)
    session.execute("ALTER TABLE db.t CREATE BRANCH b; ALTER TABLE db.t CREATE TAG v")
    refused(session, table, "ALTER TABLE db.t DROP BRANCH v", ValidationError,
            "cannot remove branch 'v': 'v' is a tag, not a branch")
    refused(session, table, "ALTER TABLE db.t DROP TAG nope", ValidationError,
            "cannot remove tag 'nope': the table has no tag 'nope'")
    refused(session, table, "ALTER TABLE db.t DROP BRANCH main", ValidationError,
            "main is the table's current state and cannot be removed")
    session.execute("ALTER TABLE db.t DROP BRANCH b; ALTER TABLE db.t DROP TAG v; "
                    "ALTER TABLE db.t DROP TAG IF EXISTS v; ALTER TABLE db.t DROP BRANCH IF EXISTS b")
    assert sorted(refs(table)) == ["main"]


def test_a_table_without_snapshots_has_nothing_to_branch(session: SqlSession) -> None:
    table = make_table(session, batches=0)
    refused(session, table, "ALTER TABLE db.t CREATE BRANCH b", ValidationError,
            "cannot create branch 'b': the table has no snapshot yet; write to it first")
    refused(session, table, "ALTER TABLE db.t REPLACE TAG v", ValidationError,
            "cannot replace tag 'v' of db.t: main has no snapshot")


def test_reset_forgets_session_options(session: SqlSession) -> None:
    session.execute("SET spark.wap.branch = audit; SET spark.wap.id = x1; RESET spark.wap.branch")
    assert session.session_options.get("spark.wap.branch") is None
    assert session.session_options.get("spark.wap.id") == "x1"
    session.execute_one("RESET")
    assert session.session_options.items() == []
