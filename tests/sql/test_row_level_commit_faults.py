"""Spark SQL's DELETE, UPDATE and MERGE on a ``rest`` catalog whose commit answers get lost (issue 44).

The statements run as ``tablestore sql`` runs them (a :class:`SqlSession`, Spark tasks writing the
files) against the catalog service behind :class:`tests.faults.FaultProxy`, a gateway that
forwards the commit and answers 502: the commit landed, the client never heard. Each statement
must come back as landed, with the after rows, and a retry with the same
``SET tablestore.commit-id`` must change nothing. A retried UPDATE after the catalog went away
mid-commit (the outcome unknown, the snapshot id named) applies once.

The smaller set of the fault matrix (tests/table/test_commit_faults.py has every write kind on
every catalog): one Spark session, one shared catalog service, one proxy.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import yaml

import tablestore
from tablestore.config import load_config
from tablestore.errors import CommitStateUnknownError
from tablestore.sql.session import SqlSession
from tests.faults import FaultProxy
from tests.services import WRITE_TOKEN, RestService

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("n", pa.int64())])
START = [(i, 0) for i in range(6)]

# statement (on table {t}), the rows after it
STATEMENTS = {
    "del": ("DELETE FROM lake.db.{t} WHERE id IN (SELECT v FROM VALUES (0), (1) AS s(v))",
            [(i, 0) for i in range(2, 6)]),
    "upd": ("UPDATE lake.db.{t} SET n = n + 1 WHERE id IN (SELECT v FROM VALUES (0), (1) AS s(v))",
            [(i, 1 if i < 2 else 0) for i in range(6)]),
    "mrg": ("MERGE INTO lake.db.{t} t USING (SELECT * FROM VALUES (1, 10), (50, 5) AS s(id, n)) s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET n = s.n WHEN NOT MATCHED THEN INSERT (id, n) VALUES (s.id, s.n)",
            sorted([(i, 10 if i == 1 else 0) for i in range(6)] + [(50, 5)])),
}


def rows(table: tablestore.Table) -> list[tuple[int, int]]:
    data = table.refresh().scan().to_arrow()
    return sorted(zip(data.column("id").to_pylist(), data.column("n").to_pylist(), strict=True))


def test_spark_sql_row_level_statements_survive_a_lost_commit_answer_and_retry_once(
        served_catalog: RestService, tmp_path: Path, spark: object) -> None:
    proxy = FaultProxy(served_catalog.uri)
    clean = tablestore.load_catalog("rest", type="rest", uri=served_catalog.uri, token=WRITE_TOKEN)
    config = tmp_path / "tablestore.yaml"
    config.write_text(yaml.safe_dump({"default-catalog": "lake", "catalogs": [
        {"name": "lake", "type": "rest", "uri": proxy.uri, "token": WRITE_TOKEN}]}))
    try:
        clean.create_namespace("db")
        tables = {}
        for name in [*STATEMENTS, "retry"]:
            # Merge-on-read for MERGE (position deletes), copy-on-write for the others.
            mode = "merge-on-read" if name == "mrg" else "copy-on-write"
            tables[name] = clean.create_table(f"db.{name}", schema=SCHEMA, properties={
                "write.delete.mode": mode, "write.update.mode": mode, "write.merge.mode": mode})
            tables[name].append(pa.table({"id": [i for i, _ in START], "n": [n for _, n in START]}, SCHEMA))
        session = SqlSession(load_config(config), spark=spark)  # type: ignore[arg-type]
        for name, (statement, after) in STATEMENTS.items():
            session.execute(f"SET tablestore.commit-id = 'sql-{name}'")
            proxy.arm("lost")
            session.execute(statement.format(t=name))  # landed; the 502 is resolved by a reload
            assert rows(tables[name]) == after, name
            snapshots = len(tables[name].snapshots())
            session.execute(statement.format(t=name))  # the retry: the landed commit is found
            assert rows(tables[name]) == after, f"{name}: the retry applied again"
            assert len(tables[name].refresh().snapshots()) == snapshots, name
        assert proxy.commits_faulted == len(STATEMENTS)

        # The catalog goes away after the UPDATE's commit was sent: nobody can tell the outcome.
        update = "UPDATE lake.db.retry SET n = n + 1 WHERE id < 3"
        session.execute("SET tablestore.commit-id = 'sql-retried-update'")
        proxy.arm("down")
        with pytest.raises(CommitStateUnknownError) as lost:
            session.execute(update)
        proxy.up()
        assert lost.value.snapshot_id is not None and str(lost.value.snapshot_id) in str(lost.value)
        assert tables["retry"].refresh().metadata.snapshot_by_id(lost.value.snapshot_id) is not None
        session.execute(update)  # the job retried with the same commit id
        assert rows(tables["retry"]) == [(i, 1 if i < 3 else 0) for i in range(6)]  # n + 1 once
    finally:
        proxy.close()
        clean.close()
        served_catalog.reset()
