"""Row lineage in SQL: ``SELECT _row_id, _last_updated_sequence_number FROM t`` on a format v3
table, hidden from ``*`` as in Iceberg's Spark, and kept by UPDATE and MERGE run through Spark."""

from __future__ import annotations

from typing import Any

import pytest

from tablestore.sql.session import SqlSession

pytestmark = pytest.mark.spark


def test_lineage_columns_are_selectable_hidden_from_star_and_kept_by_update_and_merge(session: SqlSession) -> None:
    s = session
    s.execute("""
        CREATE TABLE t (id BIGINT, name STRING) TBLPROPERTIES ('format-version'='3');
        INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c');
        INSERT INTO t VALUES (4, 'd');
        CREATE TABLE other (id BIGINT, tag STRING);
        INSERT INTO other VALUES (2, 'x');
    """)

    def query(sql: str) -> tuple[list[str], list[list[Any]]]:
        result = s.execute(sql)[-1]
        return result.columns, result.rows

    assert query("SELECT id, _row_id, _last_updated_sequence_number FROM t ORDER BY id") == (
        ["id", "_row_id", "_last_updated_sequence_number"], [[1, 0, 1], [2, 1, 1], [3, 2, 1], [4, 3, 2]])
    # `*` keeps the table's columns only; the lineage columns come where they are named.
    assert query("SELECT *, _row_id FROM t WHERE _row_id >= 2 ORDER BY id") == (
        ["id", "name", "_row_id"], [[3, "c", 2], [4, "d", 3]])
    assert query("SELECT * FROM t ORDER BY id")[0] == ["id", "name"]
    assert query("SELECT t.*, o.*, t._row_id FROM t AS t JOIN other AS o ON t.id = o.id") == (
        ["id", "name", "id", "tag", "_row_id"], [[2, "b", 2, "x", 1]])

    s.execute("UPDATE t SET name = upper(name) WHERE id IN (SELECT id FROM other)")  # through Spark
    update_seq = s.manager.catalog("cat").load_table("db.t").metadata.last_sequence_number
    s.execute("""
        MERGE INTO t USING (SELECT 3 AS id, 'merged' AS name UNION ALL SELECT 9, 'new') AS src ON t.id = src.id
        WHEN MATCHED THEN UPDATE SET name = src.name WHEN NOT MATCHED THEN INSERT *
    """)
    merge_seq = s.manager.catalog("cat").load_table("db.t").metadata.last_sequence_number
    _, rows = query("SELECT id, name, _row_id, _last_updated_sequence_number FROM t ORDER BY id")
    by_id = {r[0]: r[1:] for r in rows}
    assert {i: by_id[i] for i in (1, 2, 3, 4)} == {
        1: ["a", 0, 1], 2: ["B", 1, update_seq], 3: ["merged", 2, merge_seq], 4: ["d", 3, 2]}
    assert by_id[9][0] == "new" and by_id[9][2] == merge_seq and by_id[9][1] not in (0, 1, 2, 3)
