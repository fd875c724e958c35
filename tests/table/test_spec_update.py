"""Partition evolution through ``table.update_spec()``: Java's field id and naming rules, the
day -> hour rollover with reads and pruning across specs, and the Java oracle and pyiceberg
reading an evolved table. On SQLite; the spec ids the service assigns also over REST, the rollover
on S3 too, and a write that races a spec change on every catalog of the matrix."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from tablestore.errors import ValidationError
from tablestore.spec.partitioning.transforms import DayTransform, HourTransform
from tests import oracle
from tests.conftest import ON_EVERY_STORAGE, ON_THE_CATALOG_MATRIX, OVER_REST
from tests.values import oracle_rows

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string()), ("ts", pa.timestamp("us")), ("c", pa.string())])


@pytest.fixture
def db(catalog: tablestore.Catalog) -> tablestore.Catalog:
    """The test's catalog (``tests/table/conftest.py``) with the namespace ``db``."""
    catalog.create_namespace("db")
    return catalog


def spec_fields(table: tablestore.Table) -> list[tuple[str, int, str, int]]:
    return [(f.name, f.field_id, str(f.transform), f.source_id) for f in table.spec().fields]


# The sequence below was run through Spark's ALTER TABLE ... PARTITION FIELD on Java Iceberg 1.10
# (the oracle); ``test_oracle_evolves_specs_as_we_do`` repeats the comparison live.
JAVA_SEQUENCE: list[tuple[str, tuple[Any, ...]]] = [
    ("add", ("bucket(16, id)",)),
    ("add", ("truncate(4, s)",)),
    ("replace", ("days(ts)", "hours(ts)")),
    ("remove", ("id_bucket_16",)),
    ("add", ("bucket(16, id)",)),
    ("add", ("c",)),
    ("remove", ("c",)),
    ("add", ("c", "cc")),
    ("replace", ("hours(ts)", "days(ts)")),
]
JAVA_SQL = [
    "ALTER TABLE ref.db.t ADD PARTITION FIELD bucket(16, id)",
    "ALTER TABLE ref.db.t ADD PARTITION FIELD truncate(4, s)",
    "ALTER TABLE ref.db.t REPLACE PARTITION FIELD days(ts) WITH hours(ts)",
    "ALTER TABLE ref.db.t DROP PARTITION FIELD id_bucket_16",
    "ALTER TABLE ref.db.t ADD PARTITION FIELD bucket(16, id)",
    "ALTER TABLE ref.db.t ADD PARTITION FIELD c",
    "ALTER TABLE ref.db.t DROP PARTITION FIELD c",
    "ALTER TABLE ref.db.t ADD PARTITION FIELD c AS cc",
    "ALTER TABLE ref.db.t REPLACE PARTITION FIELD hours(ts) WITH days(ts)",
]


def run_sequence(table: tablestore.Table) -> list[dict[str, Any]]:
    """Apply JAVA_SEQUENCE one commit at a time; the specs and default spec id after each."""
    states = []
    for op, args in JAVA_SEQUENCE:
        with table.update_spec() as u:
            if op == "add":
                u.add_field(args[0], name=args[1] if len(args) > 1 else None)
            elif op == "remove":
                u.remove_field(args[0])
            else:
                u.replace_field(args[0], args[1])
        states.append(spec_state(table.metadata.to_json()))
    return states


def spec_state(md: dict[str, Any]) -> dict[str, Any]:
    return {
        "default": md["default-spec-id"],
        "last": md["last-partition-id"],
        "specs": [[(f["name"], f["field-id"], f["transform"], f["source-id"]) for f in s["fields"]]
                  for s in md["partition-specs"]],
    }


@OVER_REST
def test_update_spec_follows_java_ids_names_and_spec_reuse(db: tablestore.Catalog) -> None:
    table = db.create_table("db.t", schema=SCHEMA, partition_by=["days(ts)"])
    states = run_sequence(table)
    # Names as Java's BaseUpdatePartitionSpec gives them: id_bucket_16, s_trunc_4.
    assert states[1]["specs"][-1] == [("ts_day", 1000, "day", 3), ("id_bucket_16", 1001, "bucket[16]", 1),
                                      ("s_trunc_4", 1002, "truncate[4]", 2)]
    # v2 removes the replaced field; the new one gets a fresh id.
    assert states[2]["specs"][-1] == [("id_bucket_16", 1001, "bucket[16]", 1), ("s_trunc_4", 1002, "truncate[4]", 2),
                                      ("ts_hour", 1003, "hour", 3)]
    # Re-adding a field some older spec had recycles its id (1001).
    assert states[4]["specs"][-1] == [("s_trunc_4", 1002, "truncate[4]", 2), ("ts_hour", 1003, "hour", 3),
                                      ("id_bucket_16", 1001, "bucket[16]", 1)]
    # Removing the field just added gives back spec 5, which is reused rather than duplicated.
    assert states[6]["default"] == 5 and len(states[6]["specs"]) == 7
    # A new name means a new field id; day comes back with its old id 1000.
    assert states[7]["specs"][-1][-1] == ("cc", 1005, "identity", 4)
    assert states[8] == {
        "default": 8, "last": 1005,
        "specs": [*states[7]["specs"], [("s_trunc_4", 1002, "truncate[4]", 2), ("id_bucket_16", 1001, "bucket[16]", 1),
                                        ("cc", 1005, "identity", 4), ("ts_day", 1000, "day", 3)]],
    }


def test_v1_tables_keep_removed_fields_as_void(db: tablestore.Catalog) -> None:
    table = db.create_table("db.t", schema=SCHEMA, partition_by=["days(ts)"],
                                       properties={"format-version": "1"})
    with table.update_spec() as u:
        u.replace_field("days(ts)", "hours(ts)")
    assert spec_fields(table) == [("ts_day", 1000, "void", 3), ("ts_hour", 1001, "hour", 3)]
    # A new field whose name clashes with a void one renames the void field out of the way.
    with table.update_spec() as u:
        u.remove_field("hours(ts)")
        u.add_field("days(ts)")
    assert spec_fields(table) == [("ts_day_1000", 1000, "void", 3), ("ts_hour", 1001, "void", 3),
                                  ("ts_day", 1002, "day", 3)]


@pytest.mark.parametrize(("change", "message"), [
    (lambda u: u.add_field("days(ts)"), "already partitioned by 'days(ts)'"),
    (lambda u: u.add_field("hours(nope)"), "unknown column 'nope'"),
    (lambda u: u.add_field("hours(s)"), "cannot apply hour to column 's'"),
    (lambda u: u.remove_field("ts_hour"), "not partitioned by 'ts_hour'"),
    (lambda u: u.add_field("bucket(4, id)", name="s"), "also a column of the table"),
    (lambda u: u.add_field("hours(ts)").add_field("months(ts)"), "redundant"),
    (lambda u: u.add_field("bucket(4, id)").remove_field("bucket(4, id)"), "added in this same change"),
])
def test_bad_spec_changes_raise_and_commit_nothing(db: tablestore.Catalog, change: Any,
                                                   message: str) -> None:
    table = db.create_table("db.t", schema=SCHEMA, partition_by=["days(ts)"])
    before = table.metadata_location
    with pytest.raises(ValidationError, match=re.escape(message)), table.update_spec() as u:
        change(u)
    assert db.load_table("db.t").metadata_location == before


def test_unchanged_spec_commits_nothing(db: tablestore.Catalog) -> None:
    table = db.create_table("db.t", schema=SCHEMA, partition_by=["days(ts)"])
    before = table.metadata_location
    with table.update_spec() as u:
        u.remove_field("ts_day").add_field("days(ts)")
    assert table.metadata_location == before


MAY3 = (datetime.date(2024, 5, 3) - datetime.date(1970, 1, 1)).days


def rows(day: int, hours: range, start_id: int) -> pa.Table:
    ts = [datetime.datetime(2024, 5, day, h, 30) for h in hours]
    return pa.table({"id": list(range(start_id, start_id + len(ts))), "s": [f"s{h}" for h in hours], "ts": ts,
                     "c": ["x"] * len(ts)}, schema=SCHEMA)


def rolled_over(catalog: tablestore.Catalog) -> tablestore.Table:
    """days(ts) for May 1-2, then hours(ts) for May 3."""
    table = catalog.create_table("db.rollover", schema=SCHEMA, partition_by=["days(ts)"])
    table.append(pa.concat_tables([rows(1, range(0, 24, 6), 0), rows(2, range(0, 24, 6), 100)]))
    with table.update_spec() as u:
        u.replace_field("days(ts)", "hours(ts)")
    table.append(rows(3, range(0, 4), 200))
    return table


@ON_EVERY_STORAGE
def test_day_to_hour_rollover_writes_hourly_files_and_reads_both(catalog: tablestore.Catalog) -> None:
    catalog.create_namespace("db")
    table = rolled_over(catalog)
    day_spec, hour_spec = table.metadata.partition_specs
    assert isinstance(day_spec.fields[0].transform, DayTransform)
    assert isinstance(hour_spec.fields[0].transform, HourTransform) and table.spec().spec_id == hour_spec.spec_id
    files = table.scan().plan_files()
    by_spec: dict[int, list[tuple[Any, ...]]] = {}
    for task in files:
        by_spec.setdefault(task.spec_id, []).append(tuple(task.file.partition))
    may3 = MAY3
    assert sorted(by_spec[day_spec.spec_id]) == [(may3 - 2,), (may3 - 1,)]
    assert sorted(by_spec[hour_spec.spec_id]) == [(may3 * 24 + h,) for h in range(4)]
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [*range(0, 4), *range(100, 104),
                                                                      *range(200, 204)]
    # A range over both specs returns the rows of both, and prunes files in each spec.
    both = table.scan(filter="ts >= '2024-05-02 12:00:00' AND ts < '2024-05-03 02:00:00'")
    assert sorted(tuple(t.file.partition) for t in both.plan_files()) == [(may3 - 1,), (may3 * 24,), (may3 * 24 + 1,)]
    assert sorted(both.to_arrow().column("id").to_pylist()) == [102, 103, 200, 201]
    one_hour = table.scan(filter="ts = '2024-05-03 02:30:00'").plan_files()
    assert [tuple(t.file.partition) for t in one_hour] == [(may3 * 24 + 2,)]


def test_pyiceberg_reads_the_rolled_over_table(db: tablestore.Catalog, tmp_path: Path) -> None:
    from pyiceberg.table import StaticTable

    table = rolled_over(db)
    theirs = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
    assert oracle_rows(theirs) == oracle_rows(table.scan().to_arrow())
    filtered = StaticTable.from_metadata(table.metadata_location).scan(
        row_filter="ts >= '2024-05-02T12:00:00'").to_arrow()
    assert sorted(filtered.column("id").to_pylist()) == [102, 103, 200, 201, 202, 203]


@pytest.mark.oracle
def test_oracle_reads_the_rollover_and_evolves_specs_as_we_do(db: tablestore.Catalog,
                                                              tmp_path: Path) -> None:
    table = rolled_over(db)
    evolved = db.create_table("db.t", schema=SCHEMA, partition_by=["days(ts)"])
    ours = run_sequence(evolved)
    java_wh = tmp_path / "java"
    batch = oracle.OracleBatch(warehouse=str(java_wh))
    read = batch.read(table.metadata_location)
    filtered = batch.read(table.metadata_location, where="ts >= TIMESTAMP '2024-05-02 12:00:00'")
    partitions = batch.meta(table.metadata_location, "partitions")
    batch.sql(
        "CREATE TABLE ref.db.t (id bigint, s string, ts timestamp_ntz, c string) USING iceberg "
        "PARTITIONED BY (days(ts)) TBLPROPERTIES ('format-version'='2')", *JAVA_SQL)
    results = batch.run()
    assert oracle.check(results[read])["rows"] == oracle_rows(table.scan().to_arrow())
    assert [r[0] for r in oracle.check(results[filtered])["rows"]] == [102, 103, 200, 201, 202, 203]
    meta = oracle.check(results[partitions])
    names = [c["name"] for c in meta["columns"]]
    got = sorted((r[names.index("spec_id")], json.dumps(r[names.index("partition")], sort_keys=True),
                  r[names.index("record_count")]) for r in meta["rows"])
    assert got == sorted(
        [(0, json.dumps({"ts_day": d, "ts_hour": None}, sort_keys=True), 4) for d in ("2024-05-01", "2024-05-02")]
        + [(1, json.dumps({"ts_day": None, "ts_hour": MAY3 * 24 + h}, sort_keys=True), 1) for h in range(4)]
    )
    java_metadata = sorted((java_wh / "db" / "t" / "metadata").glob("v*.metadata.json"),
                           key=lambda p: int(p.name[1:].split(".")[0]))
    assert [spec_state(json.loads(p.read_text())) for p in java_metadata[1:]] == ours


def test_filtered_scan_of_1000_partitions_plans_only_matching_files(db: tablestore.Catalog) -> None:
    schema = pa.schema([("p", pa.int32()), ("v", pa.int64())])
    table = db.create_table("db.wide", schema=schema, partition_by=["p"])
    table.append(pa.table({"p": pa.array(range(1000), pa.int32()), "v": list(range(1000))}, schema=schema))
    assert len(table.scan().plan_files()) == 1000

    def planned(expr: str) -> list[tuple[int, tuple[Any, ...]]]:
        return sorted((t.spec_id, tuple(t.file.partition)) for t in table.scan(filter=expr).plan_files())

    assert planned("p = 500") == [(0, (500,))]
    assert planned("p IN (3, 700, 999)") == [(0, (3,)), (0, (700,)), (0, (999,))]
    assert planned("p >= 10 AND p < 20") == [(0, (i,)) for i in range(10, 20)]
    assert planned("v = 500") == [(0, (500,))]  # column bounds prune the rest
    # After evolving to truncate(10, p), both specs are pruned, each with its own partition values.
    with table.update_spec() as u:
        u.replace_field("p", "truncate(10, p)")
    table.append(pa.table({"p": pa.array(range(1000), pa.int32()), "v": list(range(1000, 2000))}, schema=schema))
    assert len(table.scan().plan_files()) == 1100
    assert planned("p = 505") == [(0, (505,)), (1, (500,))]
    assert sorted(table.scan(filter="p = 505").to_arrow().column("v").to_pylist()) == [505, 1505]


@ON_THE_CATALOG_MATRIX
def test_files_written_before_a_spec_change_are_committed_under_their_own_spec(
        db: tablestore.Catalog) -> None:
    table = db.create_table("db.t", schema=SCHEMA, partition_by=["days(ts)"])
    early = table.write_files(rows(1, range(0, 2), 0))  # a task of a long write, before the change
    other = db.load_table("db.t")
    with other.update_spec() as u:
        u.replace_field("days(ts)", "hours(ts)")
    late = other.write_files(rows(2, range(0, 2), 10))
    table.refresh().append_files([*early, *late])
    planned = {(t.spec_id, tuple(t.file.partition)) for t in table.scan().plan_files()}
    may1 = MAY3 - 2
    assert planned == {(0, (may1,)), (1, ((may1 + 1) * 24,)), (1, ((may1 + 1) * 24 + 1,))}
    assert sorted(table.scan(filter="ts < '2024-05-02'").to_arrow().column("id").to_pylist()) == [0, 1]
