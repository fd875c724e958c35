"""Iceberg's snapshot management procedures through ``CALL``: positional and named arguments,
Iceberg's result columns, and the refusals with nothing committed."""

from __future__ import annotations

import datetime
import time

import pyarrow as pa
import pytest

from tablestore.errors import NoSuchSnapshotError, TableStoreError, ValidationError
from tablestore.sql.session import SqlSession
from tablestore.table import Table


def make_table(session: SqlSession, batches: int = 3, properties: str = "") -> Table:
    """``db.t (id bigint)`` with ``batches`` appended snapshots of one row each (ids 1, 2, ...)."""
    tblproperties = f" TBLPROPERTIES ({properties})" if properties else ""
    session.execute_one(f"CREATE TABLE db.t (id bigint){tblproperties}")
    catalog, identifier = session.manager.resolve_table(("db", "t"))
    table = catalog.load_table(identifier)
    for i in range(1, batches + 1):
        if i > 1:
            time.sleep(0.005)  # snapshots apart in time, so a point between two of them exists
        table.append(pa.table({"id": pa.array([i], pa.int64())}))
    return table


def ids(table: Table, ref: str | None = None) -> list[int]:
    return sorted(table.refresh().scan(ref=ref).to_arrow()["id"].to_pylist())


def head(table: Table, ref: str = "main") -> int:
    return table.refresh().refs()[ref].snapshot_id


def refused(session: SqlSession, table: Table, sql: str, error: type[TableStoreError], match: str) -> None:
    before = table.refresh().metadata_location
    with pytest.raises(error, match=match):
        session.execute_one(sql)
    assert table.refresh().metadata_location == before


def test_rollback_to_snapshot_and_back_with_set_current_snapshot(session: SqlSession) -> None:
    table = make_table(session)
    s1, _s2, s3 = (s.snapshot_id for s in table.snapshots())
    result = session.execute_one(f"CALL cat.system.rollback_to_snapshot('db.t', {s1})")
    assert (result.columns, result.rows) == (["previous_snapshot_id", "current_snapshot_id"], [[s3, s1]])
    assert ids(table) == [1]
    refused(session, table, f"CALL cat.system.rollback_to_snapshot(table => 'db.t', snapshot_id => {s3})",
            ValidationError, f"cannot roll 'main' back to snapshot {s3}: it is not an ancestor of the branch's head")
    refused(session, table, "CALL cat.system.rollback_to_snapshot('db.t', 99)", NoSuchSnapshotError,
            "the table has no snapshot 99")
    result = session.execute_one(f"CALL system.set_current_snapshot(snapshot_id => {s3}, table => 'db.t')")
    assert result.rows == [[s1, s3]]
    assert ids(table) == [1, 2, 3]


def test_set_current_snapshot_to_a_ref(session: SqlSession) -> None:
    table = make_table(session)
    s1 = table.snapshots()[0].snapshot_id
    session.execute_one(f"ALTER TABLE db.t CREATE TAG v1 AS OF VERSION {s1}")
    result = session.execute_one("CALL cat.system.set_current_snapshot(table => 'db.t', ref => 'v1')")
    assert result.rows[0][1] == s1
    assert ids(table) == [1]
    for args, match in [("table => 'db.t'", "give either snapshot_id or ref"),
                        (f"table => 'db.t', snapshot_id => {s1}, ref => 'v1'", "give either snapshot_id or ref"),
                        ("table => 'db.t', ref => 'nope'", "the table has no branch or tag 'nope'")]:
        refused(session, table, f"CALL cat.system.set_current_snapshot({args})", ValidationError, match)


def test_rollback_to_timestamp(session: SqlSession) -> None:
    table = make_table(session)
    s1, s2, s3 = table.snapshots()
    after_s1 = datetime.datetime.fromtimestamp((s1.timestamp_ms + 1) / 1000, datetime.UTC)
    assert s2.timestamp_ms > s1.timestamp_ms + 1  # make_table keeps them apart
    literal = after_s1.strftime("%Y-%m-%d %H:%M:%S.%f")
    result = session.execute_one(f"CALL cat.system.rollback_to_timestamp('db.t', TIMESTAMP '{literal}')")
    assert result.rows == [[s3.snapshot_id, s1.snapshot_id]]
    refused(session, table, f"CALL cat.system.rollback_to_timestamp('db.t', {s1.timestamp_ms})", ValidationError,
            "the branch has no snapshot older than that")


def test_cherrypick_snapshot_and_publish_changes(session: SqlSession) -> None:
    table = make_table(session, batches=1, properties="'write.wap.enabled'='true'")
    s1 = head(table)
    staged = table.staged("w1").append(pa.table({"id": pa.array([10], pa.int64())}))
    other = table.staged("w2").append(pa.table({"id": pa.array([20], pa.int64())}))
    assert head(table) == s1
    result = session.execute_one("CALL cat.system.publish_changes('db.t', 'w1')")
    assert result.columns == ["source_snapshot_id", "current_snapshot_id"]
    assert result.rows == [[staged.snapshot_id, staged.snapshot_id]]  # a fast-forward: its parent was main's head
    assert ids(table) == [1, 10]
    result = session.execute_one(f"CALL cat.system.cherrypick_snapshot(table => 'db.t', snapshot_id => "
                                 f"{other.snapshot_id})")
    picked = head(table)
    assert picked != other.snapshot_id and result.rows == [[other.snapshot_id, picked]]
    picked_snapshot = table.snapshot_by_id(picked)
    assert picked_snapshot is not None and picked_snapshot.summary["published-wap-id"] == "w2"
    assert ids(table) == [1, 10, 20]
    refused(session, table, "CALL cat.system.publish_changes('db.t', 'w2')", ValidationError,
            "onto 'main': it was picked already, as snapshot")
    refused(session, table, "CALL cat.system.publish_changes('db.t', 'nope')", ValidationError,
            "cannot publish wap.id 'nope': table db.t has no snapshot staged with it")


def test_fast_forward(session: SqlSession) -> None:
    table = make_table(session, batches=1)
    s1 = head(table)
    session.execute_one("ALTER TABLE db.t CREATE BRANCH audit")
    table.append(pa.table({"id": pa.array([2], pa.int64())}), branch="audit")
    audit = head(table, "audit")
    result = session.execute_one("CALL cat.system.fast_forward('db.t', 'main', 'audit')")
    assert (result.columns, result.rows) == (["branch_updated", "previous_ref", "updated_ref"],
                                             [["main", s1, audit]])
    assert ids(table) == [1, 2]
    table.append(pa.table({"id": pa.array([3], pa.int64())}))  # main moves on: audit is behind
    refused(session, table, "CALL cat.system.fast_forward(table => 'db.t', branch => 'main', to => 'audit')",
            ValidationError, "is not an ancestor of 'audit''s head")
    refused(session, table, "CALL cat.system.fast_forward('db.t', 'main', 'nope')", ValidationError,
            "the table has no branch or tag 'nope'")


def test_ancestors_of(session: SqlSession) -> None:
    table = make_table(session)
    s1, s2, s3 = table.snapshots()
    result = session.execute_one("CALL cat.system.ancestors_of('db.t')")
    assert result.columns == ["snapshot_id", "timestamp"]
    assert result.rows == [[s.snapshot_id, s.timestamp_ms] for s in (s3, s2, s1)]
    assert session.execute_one(f"CALL cat.system.ancestors_of('db.t', {s2.snapshot_id})").rows == [
        [s2.snapshot_id, s2.timestamp_ms], [s1.snapshot_id, s1.timestamp_ms]]
    with pytest.raises(NoSuchSnapshotError, match="table db.t has no snapshot 5"):
        session.execute_one("CALL cat.system.ancestors_of('db.t', 5)")


def test_the_procedures_are_listed(session: SqlSession) -> None:
    with pytest.raises(ValidationError) as e:
        session.execute_one("CALL cat.system.nope()")
    for name in ("ancestors_of", "cherrypick_snapshot", "fast_forward", "publish_changes", "rollback_to_snapshot",
                 "rollback_to_timestamp", "set_current_snapshot"):
        assert name in str(e.value)
