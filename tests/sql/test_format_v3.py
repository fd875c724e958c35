"""Format v3 through SQL: CREATE TABLE ... TBLPROPERTIES ('format-version'='3') and the
Spark-style upgrade ALTER TABLE ... SET TBLPROPERTIES ('format-version'='3'). DDL only: no Spark."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tablestore.config import parse_config
from tablestore.sql.session import SqlSession


def session(tmp_path: Path) -> SqlSession:
    config = parse_config(textwrap.dedent(f"""
        default-catalog: cat
        catalogs:
          - name: cat
            type: sql
            uri: sqlite:///{tmp_path}/cat.db
            warehouse: {tmp_path}/wh
            default-database: db
    """), source=str(tmp_path / "tablestore.yaml"))
    s = SqlSession(config)
    s.execute("CREATE DATABASE db")
    return s


def test_create_v3_table_and_upgrade_v2_with_tblproperties(tmp_path: Path) -> None:
    s = session(tmp_path)
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
