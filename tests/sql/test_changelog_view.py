"""``CALL cat.system.create_changelog_view(...)``: Iceberg's arguments and result, a view the
session's later statements read, computed by Spark tasks, on tables with delete files too."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tablestore.errors import ValidationError
from tablestore.sql.session import SqlSession
from tablestore.table import Table

pytestmark = pytest.mark.spark


def _table(session: SqlSession, properties: str) -> tuple[Table, list[int]]:
    session.execute_one(f"CREATE TABLE db.t (id bigint, v string) TBLPROPERTIES ({properties})")
    catalog, identifier = session.manager.resolve_table(("db", "t"))
    table = catalog.load_table(identifier)
    table.append(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}))
    table.update({"v": "'B'"}, "id = 2")
    table.delete("id = 3")
    table.append(pa.table({"id": [4], "v": ["d"]}))
    return table, [s.snapshot_id for s in table.refresh().snapshots()]


def _view(session: SqlSession, name: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in session.execute_one(f"SELECT * FROM {name}").rows)


def test_a_changelog_view_with_updates_on_a_merge_on_read_v3_table(session: SqlSession) -> None:
    table, (s1, s2, s3, s4) = _table(session, "'format-version'='3', 'write.delete.mode'='merge-on-read', "
                                              "'write.update.mode'='merge-on-read'")
    result = session.execute_one(
        "CALL cat.system.create_changelog_view(table => 'db.t', options => map('start-snapshot-id', "
        f"'{s1}', 'end-snapshot-id', '{s4}'), compute_updates => true, identifier_columns => array('id'), "
        "net_changes => false, changelog_view => 'v')")
    assert (result.columns, result.rows) == (["changelog_view"], [["v"]])
    view = _view(session, "v")
    assert view == sorted([(2, "b", "UPDATE_BEFORE", 0, s2), (2, "B", "UPDATE_AFTER", 0, s2),
                           (3, "c", "DELETE", 1, s3), (4, "d", "INSERT", 2, s4)])
    # The same rows as the Python API; the view joins like any relation of the session.
    ours = table.changes(from_snapshot=s1, identifier_columns=["id"]).to_arrow()
    assert sorted(tuple(r.values()) for r in ours.to_pylist()) == view
    joined = session.execute_one("SELECT c._change_type, t.v FROM v c JOIN db.t t ON c.id = t.id "
                                 "WHERE c._change_type = 'UPDATE_AFTER'").rows
    assert joined == [["UPDATE_AFTER", "B"]]


def test_defaults_the_view_name_net_changes_and_timestamps(session: SqlSession) -> None:
    table, (s1, _s2, _s3, s4) = _table(session, "'write.delete.mode'='copy-on-write'")
    assert session.execute_one("CALL cat.system.create_changelog_view('db.t')").rows == [["t_changes"]]
    assert len(_view(session, "t_changes")) == 7  # 3 inserts, update as delete + insert, delete, insert
    first = table.snapshot_by_id(s1)
    assert first is not None
    session.execute_one("CALL cat.system.create_changelog_view(table => 'db.t', options => map('start-timestamp', "
                        f"'{first.timestamp_ms}'), net_changes => true, changelog_view => 'net')")
    assert [r[:3] for r in _view(session, "net")] == [(2, "B", "INSERT"), (2, "b", "DELETE"), (3, "c", "DELETE"),
                                                       (4, "d", "INSERT")]
    assert s4 == table.refresh().current_snapshot().snapshot_id  # type: ignore[union-attr]


def test_bad_arguments_are_refused_naming_the_fix(session: SqlSession) -> None:
    _table(session, "'write.delete.mode'='copy-on-write'")
    with pytest.raises(ValidationError, match="unknown option.*start-snapshot"):
        session.execute_one("CALL cat.system.create_changelog_view(table => 'db.t', options => map('from', '1'))")
    with pytest.raises(ValidationError, match="identifier column.*nope"):
        session.execute_one("CALL cat.system.create_changelog_view(table => 'db.t', "
                            "identifier_columns => array('nope'))")
    with pytest.raises(ValidationError, match="cannot compute updates.*identifier_columns"):
        session.execute_one("CALL cat.system.create_changelog_view(table => 'db.t', compute_updates => true)")
