"""Overwrites after a partition evolution replace exactly the rows of the touched partitions of the
current spec, in files of every spec; the Java reference and DuckDB read the same rows.

The repro of issue 19: a table partitioned by days(ts) with rows at 10:00, 10:59:59 and 11:00 on
2026-01-01, rolled over to hours(ts); a dynamic overwrite of one row at 10:30 replaces the 10:00
and 10:59:59 rows and keeps 11:00. Java Iceberg's ReplacePartitions keeps all three.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from tablestore.errors import CommitConflictError
from tablestore.table.ops.overwrite import overwrite_producer, replace_partitions_producer
from tablestore.table.update.transaction import commit_snapshot
from tests import oracle
from tests.interop.readers import duckdb_connect, duckdb_read
from tests.values import oracle_rows

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us"))])
D = datetime.datetime
MODES = ("copy-on-write", "merge-on-read")


def rows(*pairs: tuple[int, D]) -> pa.Table:
    return pa.table({"id": [p[0] for p in pairs], "ts": [p[1] for p in pairs]}, schema=SCHEMA)


def ids(table: tablestore.Table) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def rolled_over(tmp_path: Path, mode: str, name: str = "t", old: str = "days(ts)",
                new: str = "hours(ts)", format_version: int = 2) -> tablestore.Table:
    """The repro's table: day-spec files for 2026-01-01 (10:00, 10:59:59, 11:00) and 2026-01-02,
    then the spec replaced."""
    catalog = tablestore.load_catalog("c", type="sql", uri=f"sqlite:///{tmp_path}/c.db", warehouse=str(tmp_path / "wh"))
    if not catalog.namespace_exists("db"):
        catalog.create_namespace("db")
    table = catalog.create_table(f"db.{name}", schema=SCHEMA, partition_by=[old],
                                 properties={"write.delete.mode": mode, "format-version": str(format_version)})
    table.append(rows((1, D(2026, 1, 1, 10)), (2, D(2026, 1, 1, 10, 59, 59)), (3, D(2026, 1, 1, 11)),
                      (4, D(2026, 1, 2, 10, 30))))
    with table.update_spec() as u:
        u.replace_field(old, new)
    return table


@pytest.mark.parametrize(("mode", "format_version"), [(m, 2) for m in MODES] + [("merge-on-read", 3)])
def test_dynamic_overwrite_after_rollover_replaces_exactly_the_rows_of_the_hour(tmp_path: Path, mode: str,
                                                                             format_version: int) -> None:
    # On v3, merge-on-read marks the rows in a deletion vector.
    table = rolled_over(tmp_path, mode, format_version=format_version)
    assert table.metadata.format_version == format_version
    before = len(table.snapshots())
    snapshot = table.replace_partitions(rows((9, D(2026, 1, 1, 10, 30))))
    assert len(table.snapshots()) == before + 1
    assert table.scan().to_arrow().sort_by("id").to_pylist() == [
        {"id": 3, "ts": D(2026, 1, 1, 11)}, {"id": 4, "ts": D(2026, 1, 2, 10, 30)}, {"id": 9, "ts": D(2026, 1, 1, 10, 30)}]
    s = snapshot.summary
    assert (s["operation"], s["replace-partitions"], s["added-records"]) == ("overwrite", "true", "1" if
                                                                             mode == "merge-on-read" else "2")
    if mode == "merge-on-read":
        # The day file stays; its two rows of hour 10 are marked in one position delete file.
        assert (s["added-position-deletes"], s.get("deleted-data-files")) == ("2", None)
    else:
        # The day file is rewritten without them: the 11:00 row moves to a file of the hour spec.
        assert (s["deleted-data-files"], s["deleted-records"], s.get("added-delete-files")) == ("1", "3", None)
    # The other day's file was neither read nor changed.
    day2 = [t.file for t in table.scan().plan_files() if t.file.spec_id == 0]
    assert [f.record_count for f in day2 if f.partition[0] == (D(2026, 1, 2) - D(1970, 1, 1)).days] == [1]


def test_old_spec_files_wholly_inside_the_replaced_partitions_are_dropped_unread(tmp_path: Path) -> None:
    # By partition: hourly files of a table rolled back to days lie inside the replaced day.
    coarser = rolled_over(tmp_path, "merge-on-read", "hours_to_days", old="hours(ts)", new="days(ts)")
    snapshot = coarser.replace_partitions(rows((9, D(2026, 1, 1, 23))))
    assert (snapshot.summary["deleted-data-files"], snapshot.summary["deleted-records"]) == ("2", "3")
    assert "added-delete-files" not in snapshot.summary
    assert ids(coarser) == [4, 9]
    # By column bounds: a day file whose rows all lie in the replaced hour (10:00 to 10:59:59).
    table = rolled_over(tmp_path, "merge-on-read", "bounds")
    table.delete("id = 3")  # leaves the day file with rows of hour 10 only, and a delete file
    with table.update_spec() as u:
        u.replace_field("hours(ts)", "days(ts)")
    table.append(rows((5, D(2026, 1, 3, 7)), (6, D(2026, 1, 3, 7, 40))))  # a day file, both rows in hour 7
    with table.update_spec() as u:
        u.replace_field("days(ts)", "hours(ts)")
    snapshot = table.replace_partitions(rows((7, D(2026, 1, 3, 7, 5)), (8, D(2026, 1, 1, 10, 5))))
    assert (snapshot.summary["deleted-data-files"], snapshot.summary["deleted-records"]) == ("2", "5")
    assert "added-delete-files" not in snapshot.summary
    assert ids(table) == [4, 7, 8]


@pytest.mark.parametrize("mode", MODES)
def test_overwrite_by_filter_across_specs_follows_write_delete_mode(tmp_path: Path, mode: str) -> None:
    table = rolled_over(tmp_path, mode)
    snapshot = table.overwrite(rows((9, D(2026, 1, 1, 10, 30))),
                               filter="ts >= '2026-01-01 10:00:00' AND ts < '2026-01-01 11:00:00'")
    assert ids(table) == [3, 4, 9]
    if mode == "merge-on-read":
        assert (snapshot.summary["added-position-deletes"], snapshot.summary.get("deleted-data-files")) == ("2", None)
    else:
        assert (snapshot.summary["deleted-data-files"], snapshot.summary.get("added-delete-files")) == ("1", None)
    # A filter that covers a whole file's bounds drops it without reading it.
    snapshot = table.overwrite(rows(), filter="ts >= '2026-01-02 00:00:00'")
    assert (snapshot.summary["deleted-data-files"], snapshot.summary["deleted-records"]) == ("1", "1")
    assert ids(table) == [3, 9]


def test_concurrent_changes_to_the_replaced_rows_make_the_overwrite_fail(tmp_path: Path) -> None:
    table = rolled_over(tmp_path, "merge-on-read")
    # Rows added in the replaced hour after the overwrite read the table.
    producer = replace_partitions_producer(table, rows((9, D(2026, 1, 1, 10, 30))), None)
    table.append(rows((10, D(2026, 1, 1, 10, 45))))
    with pytest.raises(CommitConflictError, match="may hold rows of a partition this overwrite replaces"):
        commit_snapshot(producer)
    # A concurrent delete in the straddling day file: both would change its rows.
    producer = replace_partitions_producer(table.refresh(), rows((9, D(2026, 1, 1, 10, 30))), None)
    table.delete("id = 3")
    with pytest.raises(CommitConflictError, match="delete file"):
        commit_snapshot(producer)
    # Appends elsewhere do not conflict: the overwrite rebases onto them.
    producer = overwrite_producer(table.refresh(), rows((11, D(2026, 1, 1, 10, 30))),
                                  "ts >= '2026-01-01 10:00:00' AND ts < '2026-01-01 11:00:00'", None)
    table.append(rows((12, D(2026, 1, 5, 1))))
    commit_snapshot(producer)
    assert ids(table.refresh()) == [4, 11, 12]


@pytest.mark.oracle
def test_java_and_duckdb_read_the_rows_of_the_overwrite_across_specs(tmp_path: Path) -> None:
    tables = {mode: rolled_over(tmp_path, mode, mode.replace("-", "_")) for mode in MODES}
    for table in tables.values():
        table.replace_partitions(rows((9, D(2026, 1, 1, 10, 30))))
    expected = oracle_rows(rows((3, D(2026, 1, 1, 11)), (4, D(2026, 1, 2, 10, 30)), (9, D(2026, 1, 1, 10, 30))))
    batch = oracle.OracleBatch(warehouse=str(tmp_path / "ref"))
    reads = {mode: batch.read(t.metadata_location) for mode, t in tables.items()}
    # Java Iceberg's own dynamic overwrite of the repro, for the difference the docs state.
    java = batch.sql(
        "SET spark.sql.sources.partitionOverwriteMode=dynamic",
        "CREATE TABLE ref.db.t (id BIGINT, ts TIMESTAMP_NTZ) USING iceberg PARTITIONED BY (days(ts))",
        "INSERT INTO ref.db.t VALUES (1, TIMESTAMP_NTZ'2026-01-01 10:00:00'), (2, TIMESTAMP_NTZ'2026-01-01 10:59:59'), "
        "(3, TIMESTAMP_NTZ'2026-01-01 11:00:00'), (4, TIMESTAMP_NTZ'2026-01-02 10:30:00')",
        "ALTER TABLE ref.db.t REPLACE PARTITION FIELD days(ts) WITH hours(ts)",
        "INSERT OVERWRITE ref.db.t VALUES (9, TIMESTAMP_NTZ'2026-01-01 10:30:00')",
        "SELECT id FROM ref.db.t ORDER BY id",
    )
    results = batch.run()
    con = duckdb_connect(tmp_path / "duckdb-extensions")
    for mode, table in tables.items():
        assert oracle_rows(table.scan().to_arrow()) == expected, mode
        assert oracle.check(results[reads[mode]])["rows"] == expected, mode
        snapshot = table.current_snapshot()
        assert snapshot is not None
        duck: Any = duckdb_read(con, table.metadata_location, snapshot.snapshot_id)
        assert oracle_rows(duck) == expected, mode
    # Java keeps the day file's rows of the replaced hour (ReplacePartitions drops current-spec files only).
    assert oracle.check(results[java])["rows"] == [[1], [2], [3], [4], [9]]
