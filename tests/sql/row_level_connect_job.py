"""Row-level SQL through a Spark Connect server, in a process of its own.

    python -m tests.sql.row_level_connect_job sc://HOST:PORT ROOT

A Python process cannot hold a Connect session beside a classic one (Spark refuses with
SESSION_ALREADY_EXIST), and other test modules leave theirs running, so the client runs here.
It prints one JSON line: per write mode, the counts of UPDATE, DELETE with a subquery and MERGE,
and the table's counts after them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tablestore.config import LakehouseConfig, SparkConfig, SqlCatalogConfig
from tablestore.spark import spark_session
from tablestore.sql.session import SqlSession

MODES = ["copy-on-write", "merge-on-read"]


def main(url: str, root: Path) -> dict[str, object]:
    catalog = SqlCatalogConfig(name="lake", properties={"uri": f"sqlite:///{root}/catalog.db", "warehouse": str(root / "wh")}, default_database="db")
    config = LakehouseConfig(default_catalog="lake", catalogs={"lake": catalog}, spark=SparkConfig(master=url, conf={}))
    spark = spark_session(config, app_name="tablestore-row-level-connect")
    session = SqlSession(config, spark=spark)
    session.execute("CREATE DATABASE db")
    out: dict[str, object] = {"jvm": getattr(spark, "_jvm", None) is not None}
    for mode in MODES:
        table = f"db.t_{mode.replace('-', '_')}"
        props = ", ".join(f"'write.{op}.mode'='{mode}'" for op in ("delete", "update", "merge"))
        session.execute(f"CREATE TABLE {table} (id BIGINT, s STRING) TBLPROPERTIES ({props})")
        session.execute(f"INSERT INTO {table} SELECT id, concat('r', id) FROM range(0, 1000)")
        updated = session.execute_one(f"UPDATE {table} SET s = 'u' WHERE id < 100").affected
        deleted = session.execute_one(f"DELETE FROM {table} WHERE id IN (SELECT id FROM range(100, 200))").affected
        merged = session.execute_one(
            f"MERGE INTO {table} t USING (SELECT id * 2 AS id, 'm' AS s FROM range(400, 600)) k ON t.id = k.id "
            "WHEN MATCHED THEN UPDATE SET s = k.s WHEN NOT MATCHED THEN INSERT *").rows
        counts = session.execute_one(f"SELECT count(*), count(DISTINCT id), count_if(s = 'u'), count_if(s = 'm'), "
                                     f"count_if(id BETWEEN 100 AND 199) FROM {table}").rows
        out[mode] = {"updated": updated, "deleted": deleted, "merged": merged, "counts": counts}
    spark.stop()
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]))))
