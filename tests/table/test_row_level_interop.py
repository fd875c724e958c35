"""Merge-on-read interop: the Java reference reads our position deletes, and we read its own."""

from __future__ import annotations

import datetime
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

import tablestore
from tests import oracle
from tests.values import oracle_rows

pytestmark = pytest.mark.oracle

MOR = {f"write.{op}.mode": "merge-on-read" for op in ("delete", "update", "merge")}


def test_merge_on_read_tables_interoperate_with_the_java_reference(tmp_path: Path) -> None:
    catalog = tablestore.load_catalog("c", type="sql", uri=f"sqlite:///{tmp_path}/c.db", warehouse=str(tmp_path / "ours"))
    catalog.create_namespace("db")
    ours = catalog.create_table(
        "db.events", schema=pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("name", pa.string())]),
        partition_by=["day(ts)"], properties=MOR,
    )
    base = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    ours.append(pa.table({"id": pa.array(range(40), pa.int64()),
                          "ts": [base + datetime.timedelta(hours=7 * i) for i in range(40)],
                          "name": [f"n{i}" for i in range(40)]}))
    assert ours.delete("id IN (0, 5, 10, 15, 33)") == 5
    assert ours.update({"name": "upper(name)"}, "id IN (32, 34, 36, 38)") == 4
    assert ours.current_snapshot().summary["added-position-deletes"] == "4"  # type: ignore[union-attr]

    wh = tmp_path / "ref"
    batch = oracle.OracleBatch(warehouse=str(wh))
    read_ours = batch.read(ours.metadata_location)
    theirs_job = batch.sql(
        "CREATE TABLE ref.db.t (id BIGINT, ts TIMESTAMP, name STRING) USING iceberg PARTITIONED BY (days(ts)) "
        "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
        "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')",
        "INSERT INTO ref.db.t SELECT id, TIMESTAMP '2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, CAST(id * 7 AS INT)), "
        "concat('n', id) FROM range(40)",
        "DELETE FROM ref.db.t WHERE id IN (0, 5, 10, 15, 33)",
        "UPDATE ref.db.t SET name = upper(name) WHERE id IN (32, 34, 36, 38)",
        "SELECT * FROM ref.db.t",
    )
    results = batch.run()
    expected = oracle_rows(ours.scan().to_arrow())
    assert oracle.check(results[read_ours])["rows"] == expected
    assert oracle_rows(StaticTable.from_metadata(ours.metadata_location).scan().to_arrow()) == expected

    theirs_rows = oracle.check(results[theirs_job])["rows"]
    metadata = sorted((wh / "db" / "t" / "metadata").glob("v*.metadata.json"))[-1]
    registered = catalog.register_table("db.theirs", str(metadata))
    tasks = registered.scan().plan_files()
    assert any(t.delete_files for t in tasks), "the reference wrote no delete files; the test proves nothing"
    assert oracle_rows(registered.scan().to_arrow()) == theirs_rows
    assert [r[0] for r in theirs_rows] == [r[0] for r in expected]
    assert [r[2] for r in theirs_rows] == [r[2] for r in expected]
