"""Format v3 through SQL: CREATE TABLE ... TBLPROPERTIES ('format-version'='3') and the
Spark-style upgrade ALTER TABLE ... SET TBLPROPERTIES ('format-version'='3') (DDL, no Spark), and
merge-on-read DELETE, UPDATE and MERGE through Spark writing deletion vectors."""

from __future__ import annotations

import pytest

from tablestore.sql.session import SqlSession


def test_create_v3_table_and_upgrade_v2_with_tblproperties(session: SqlSession) -> None:
    s = session
    s.execute("CREATE TABLE t3 (id BIGINT, name STRING) TBLPROPERTIES ('format-version'='3')")
    s.execute("CREATE TABLE t2 (id BIGINT, name STRING)")
    catalog = s.manager.catalog("cat")
    assert catalog.load_table("db.t3").metadata.format_version == 3
    assert catalog.load_table("db.t2").metadata.format_version == 2
    s.execute("ALTER TABLE t2 SET TBLPROPERTIES ('format-version'='3', 'comment'='upgraded')")
    upgraded = catalog.load_table("db.t2")
    assert (upgraded.metadata.format_version, upgraded.metadata.next_row_id) == (3, 0)
    assert upgraded.properties == {"comment": "upgraded"}
    described = {row[0]: row[1] for row in s.execute("DESCRIBE TABLE EXTENDED t2")[-1].rows}
    assert described.get("Format version") == "3"


@pytest.mark.spark
def test_merge_on_read_sql_statements_on_v3_write_one_merged_dv_per_file(session: SqlSession) -> None:
    """DELETE with a subquery, UPDATE and MERGE run through Spark (rows picked by file and
    position); on a v3 table each writes the file's one DV, merged with the last one."""
    from tablestore.spec.manifests.manifest import FileFormat

    s = session
    s.execute("""
        CREATE TABLE t (id BIGINT, name STRING) TBLPROPERTIES ('format-version'='3',
            'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read',
            'write.merge.mode'='merge-on-read');
        INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e'), (6, 'f');
        CREATE TABLE gone (id BIGINT);
        INSERT INTO gone VALUES (2);
    """)
    s.execute("DELETE FROM t WHERE id IN (SELECT id FROM gone)")
    s.execute("UPDATE t SET name = upper(name) WHERE id IN (SELECT id + 1 FROM gone)")
    s.execute("""
        MERGE INTO t USING (SELECT 4 AS id, 'm' AS name UNION ALL SELECT 9, 'new') AS src ON t.id = src.id
        WHEN MATCHED THEN UPDATE SET name = src.name WHEN NOT MATCHED THEN INSERT *
    """)
    rows = s.execute("SELECT id, name FROM t ORDER BY id")[-1].rows
    assert rows == [[1, "a"], [3, "C"], [4, "m"], [5, "e"], [6, "f"], [9, "new"]]
    table = s.manager.catalog("cat").load_table("db.t")
    original = min(table.scan().plan_files(), key=lambda t: t.data_sequence_number)
    (dv,) = original.delete_files
    assert (dv.file_format, dv.record_count, dv.referenced_data_file) == (FileFormat.PUFFIN, 3, original.file.file_path)
