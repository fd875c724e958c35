"""Branches and tags by name in SQL (``db.t.branch_x``, ``db.t.tag_x``, ``VERSION AS OF 'x'``) and
the session's write-audit-publish options (``spark.wap.branch``, ``spark.wap.id``).

The tests without the ``spark`` mark run statements that need no Spark (a DELETE whose WHERE is a
plain filter runs in the table core); the others read and write through Spark."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tablestore.errors import NoSuchTableError, TableStoreError, ValidationError
from tablestore.sql.session import SqlSession
from tablestore.table import Table
from tests.sql.conftest import rows


def make_table(session: SqlSession, properties: str = "") -> Table:
    """``db.t (id bigint, name string)`` with rows 1 'a' and 2 'b' in two snapshots, branch ``b``
    and tag ``v1`` at the first snapshot."""
    tblproperties = f" TBLPROPERTIES ({properties})" if properties else ""
    session.execute_one(f"CREATE TABLE db.t (id bigint, name string){tblproperties}")
    catalog, identifier = session.manager.resolve_table(("db", "t"))
    table = catalog.load_table(identifier)
    table.append(pa.table({"id": pa.array([1], pa.int64()), "name": ["a"]}))
    first = table.snapshots()[0].snapshot_id
    table.append(pa.table({"id": pa.array([2], pa.int64()), "name": ["b"]}))
    session.execute(f"ALTER TABLE db.t CREATE BRANCH b AS OF VERSION {first}; "
                    f"ALTER TABLE db.t CREATE TAG v1 AS OF VERSION {first}")
    return table.refresh()


def ids(table: Table, ref: str | None = None) -> list[int]:
    return sorted(table.refresh().scan(ref=ref).to_arrow()["id"].to_pylist())


def refused(session: SqlSession, table: Table, sql: str, error: type[TableStoreError], match: str) -> None:
    before = table.refresh().metadata_location
    with pytest.raises(error, match=match):
        session.execute_one(sql)
    assert table.refresh().metadata_location == before


# -- in the table core (no Spark) -----------------------------------------------------------------
def test_delete_from_a_branch_leaves_main(session: SqlSession) -> None:
    table = make_table(session)
    main_head = table.current_snapshot()
    assert session.execute_one("DELETE FROM db.t.branch_b WHERE id = 1").affected == 1
    assert ids(table, "b") == []
    assert ids(table) == [1, 2]
    assert table.current_snapshot() == main_head


def test_a_write_to_a_missing_branch_creates_it_from_main(session: SqlSession) -> None:
    table = make_table(session)
    session.execute_one("DELETE FROM db.t.branch_new WHERE id = 2")
    assert ids(table, "new") == [1]
    assert table.refs()["new"].is_branch
    head = table.snapshot_by_id(table.refs()["new"].snapshot_id)
    assert head is not None and head.parent_snapshot_id == table.refs()["main"].snapshot_id


def test_a_tag_is_read_only(session: SqlSession) -> None:
    table = make_table(session)
    refused(session, table, "DELETE FROM db.t.tag_v1 WHERE id = 1", ValidationError,
            "cannot write to 'v1' of table db.t: it is a tag, and tags are read-only")
    refused(session, table, "DELETE FROM db.t.tag_nope WHERE id = 1", NoSuchTableError,
            "table db.t has no tag 'nope'; its branches and tags are b, main, v1")
    refused(session, table, "DELETE FROM db.t.branch_v1 WHERE id = 1", ValidationError,
            "cannot write to 'v1' of table db.t: it is a tag")


def test_a_table_named_like_a_branch_is_that_table(session: SqlSession) -> None:
    make_table(session)
    session.execute_one("CREATE DATABASE cat.db.t")
    session.execute_one("CREATE TABLE cat.db.t.branch_b (id bigint)")
    catalog, identifier = session.manager.resolve_table(("cat", "db", "t", "branch_b"))
    own = catalog.load_table(identifier)
    own.append(pa.table({"id": pa.array([7], pa.int64())}))
    assert session.execute_one("DELETE FROM cat.db.t.branch_b WHERE id = 7").affected == 1
    assert ids(own) == []


def test_wap_branch_redirects_writes_of_wap_tables_only(session: SqlSession) -> None:
    table = make_table(session, "'write.wap.enabled' = 'true'")
    session.execute_one("CREATE TABLE db.plain (id bigint)")
    catalog, identifier = session.manager.resolve_table(("db", "plain"))
    plain = catalog.load_table(identifier)
    plain.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    session.execute("SET spark.wap.branch = audit; DELETE FROM db.t WHERE id = 2; DELETE FROM db.plain WHERE id = 2")
    assert ids(table, "audit") == [1]
    assert ids(table) == [1, 2]
    assert ids(plain) == [1]  # no write.wap.enabled: the option is ignored, as in Iceberg
    refused(session, table, "DELETE FROM db.t.branch_b WHERE id = 1", ValidationError,
            "cannot write to both branch 'b' and the WAP branch 'audit' of db.t")
    session.execute_one("DELETE FROM db.t.branch_audit WHERE id = 1")  # the same branch: allowed
    assert ids(table, "audit") == []
    session.execute_one("SET spark.wap.id = w1")
    refused(session, table, "DELETE FROM db.t WHERE id = 1", ValidationError,
            r"both spark.wap.id \('w1'\) and spark.wap.branch \('audit'\) are set")
    session.execute_one("RESET spark.wap.branch")
    assert ids(table) == [1, 2]


def test_wap_id_stages_writes_that_publish_changes_publishes(session: SqlSession) -> None:
    table = make_table(session, "'write.wap.enabled' = 'true'")
    main_head = table.current_snapshot()
    session.execute("SET spark.wap.id = job-7; DELETE FROM db.t WHERE id = 1")
    table.refresh()
    assert table.current_snapshot() == main_head
    staged = table.snapshots()[-1]
    assert staged.summary.get("wap.id") == "job-7"
    assert sorted(table.scan(snapshot_id=staged.snapshot_id).to_arrow()["id"].to_pylist()) == [2]
    refused(session, table, "DELETE FROM db.t.branch_b WHERE id = 1", ValidationError,
            r"cannot write to branch 'b' of db.t while spark.wap.id \('job-7'\) stages writes")
    session.execute("RESET; CALL cat.system.publish_changes('db.t', 'job-7')")
    assert ids(table) == [2]


# -- through Spark ---------------------------------------------------------------------------------
@pytest.mark.spark
def test_select_a_branch_a_tag_and_version_as_of(session: SqlSession) -> None:
    make_table(session)
    assert rows(session, "SELECT id, name FROM db.t.branch_b") == [[1, "a"]]
    assert rows(session, "SELECT id FROM cat.db.t.tag_v1") == [[1]]
    assert rows(session, "SELECT id FROM db.t VERSION AS OF 'b'") == [[1]]
    assert rows(session, "SELECT count(*) FROM db.t") == [[2]]
    assert rows(session, "SELECT m.id FROM db.t m JOIN db.t.branch_b b ON m.id = b.id") == [[1]]
    with pytest.raises(NoSuchTableError, match="table cat.db.t has no branch 'nope'"):
        session.execute_one("SELECT * FROM db.t.branch_nope")
    with pytest.raises(ValidationError, match="'v1' of table cat.db.t is a tag, not a branch: name it tag_v1"):
        session.execute_one("SELECT * FROM db.t.branch_v1")
    with pytest.raises(ValidationError, match="time travel"):
        session.execute_one("SELECT * FROM db.t.branch_b VERSION AS OF 1")


@pytest.mark.spark
def test_insert_update_merge_on_a_branch(session: SqlSession) -> None:
    table = make_table(session)
    main_head = table.current_snapshot()
    session.execute("INSERT INTO db.t.branch_b VALUES (10, 'x'), (11, 'y')")
    assert ids(table, "b") == [1, 10, 11]
    session.execute("UPDATE db.t.branch_b SET name = upper(name) WHERE name IN ('x', 'a')")
    assert rows(session, "SELECT id, name FROM db.t.branch_b ORDER BY id") == [[1, "A"], [10, "X"], [11, "y"]]
    session.execute("CREATE TABLE db.src (id bigint, name string); INSERT INTO db.src VALUES (11, 'z'), (12, 'n')")
    session.execute("MERGE INTO db.t.branch_b t USING (SELECT * FROM db.src) s ON t.id = s.id "
                    "WHEN MATCHED THEN UPDATE SET name = s.name WHEN NOT MATCHED THEN INSERT *")
    assert rows(session, "SELECT id, name FROM db.t.branch_b ORDER BY id") == [
        [1, "A"], [10, "X"], [11, "z"], [12, "n"]]
    session.execute("INSERT OVERWRITE db.t.branch_b SELECT 5, 'five'")
    assert rows(session, "SELECT id, name FROM db.t.branch_b") == [[5, "five"]]
    assert table.refresh().current_snapshot() == main_head
    assert ids(table) == [1, 2]
    refused(session, table, "INSERT INTO db.t.tag_v1 VALUES (3, 'c')", ValidationError,
            "cannot write to 'v1' of table db.t: it is a tag, and tags are read-only")


@pytest.mark.spark
def test_wap_branch_reads_and_writes_the_branch_once_it_exists(session: SqlSession) -> None:
    table = make_table(session, "'write.wap.enabled' = 'true'")
    session.execute("SET spark.wap.branch = audit")
    assert rows(session, "SELECT count(*) FROM db.t") == [[2]]  # no branch audit yet: main
    session.execute("INSERT INTO db.t VALUES (3, 'c')")
    assert rows(session, "SELECT id FROM db.t ORDER BY id") == [[1], [2], [3]]
    assert ids(table) == [1, 2]
    session.execute("RESET spark.wap.branch")
    assert rows(session, "SELECT count(*) FROM db.t") == [[2]]
    session.execute("CALL cat.system.fast_forward('db.t', 'main', 'audit')")
    assert ids(table) == [1, 2, 3]


@pytest.mark.spark
def test_metadata_tables_at_a_ref_and_over_every_snapshot(session: SqlSession) -> None:
    table = make_table(session)
    first, second = (s.snapshot_id for s in table.snapshots())
    assert rows(session, "SELECT count(*) FROM db.t.files") == [[2]]
    assert rows(session, "SELECT count(*) FROM db.t.files VERSION AS OF 'v1'") == [[1]]
    assert rows(session, f"SELECT count(*) FROM db.t.entries VERSION AS OF {first}") == [[1]]
    assert rows(session, "SELECT count(*) FROM db.t.position_deletes") == [[0]]
    assert rows(session, "SELECT reference_snapshot_id, count(*) FROM db.t.all_manifests "
                         "GROUP BY reference_snapshot_id ORDER BY 2") == [[first, 1], [second, 2]]
    assert rows(session, "SELECT count(DISTINCT file_path) FROM db.t.all_data_files") == [[2]]
    assert rows(session, "SELECT count(*) FROM db.t.all_delete_files") == [[0]]
    assert rows(session, "SELECT count(*) FROM db.t.all_files") == [[2]]
    assert rows(session, "SELECT count(*) FROM db.t.all_entries") == [[2]]
    assert rows(session, "SELECT name, type FROM db.t.refs ORDER BY name") == [
        ["b", "BRANCH"], ["main", "BRANCH"], ["v1", "TAG"]]
    with pytest.raises(ValidationError, match="time travel is not supported on the snapshots metadata table"):
        session.execute_one("SELECT * FROM db.t.snapshots VERSION AS OF 'b'")
