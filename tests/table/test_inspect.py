"""Metadata tables (``table.inspect``): concrete values, and equality with Java Iceberg's metadata
tables for the same metadata file (tables tablestore writes and a table Java writes). The
inspector reads metadata files, so the concrete values are checked on SQLite, and the history,
refs and metadata log, which the service writes into the metadata it commits, over REST too; the
comparison with Java in one Spark batch per module."""

from __future__ import annotations

import datetime
import glob
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from tablestore.catalog.base import Catalog
from tablestore.errors import NoSuchSnapshotError
from tablestore.spec.metadata.update_models import (
    AddPartitionSpecUpdate,
    AddSchemaUpdate,
    SetCurrentSchemaUpdate,
    SetDefaultSpecUpdate,
    SetSnapshotRefUpdate,
)
from tablestore.spec.partitioning.partition_spec import build_partition_spec
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import LongType, NestedField, StringType
from tablestore.table import Table
from tablestore.table.update.transaction import FixedChange
from tests import oracle
from tests.conftest import OVER_REST
from tests.values import oracle_rows

NAMES = ("snapshots", "history", "files", "data_files", "delete_files", "manifests", "entries",
         "partitions", "refs", "metadata_log_entries")
FILE_COLUMNS = [
    "content", "file_path", "file_format", "spec_id", "partition", "record_count", "file_size_in_bytes",
    "column_sizes", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds", "upper_bounds",
    "key_metadata", "split_offsets", "equality_ids", "sort_order_id", "first_row_id", "referenced_data_file",
    "content_offset", "content_size_in_bytes", "readable_metrics",
]
SCHEMA = pa.schema([("id", pa.int64()), ("country", pa.string()), ("ts", pa.timestamp("us")), ("x", pa.float64())])
UTC = datetime.UTC


def _catalog(path: Path) -> Catalog:
    path.mkdir(parents=True, exist_ok=True)
    return tablestore.load_catalog("inspect", type="sql", uri=f"sqlite:///{path}/catalog.db", warehouse=str(path))


def _rows(ids: list[int], country: str | None, day: int, hour: int = 0) -> pa.Table:
    ts = datetime.datetime(2024, 1, day, hour)
    return pa.table({"id": ids, "country": [country] * len(ids), "ts": [ts] * len(ids),
                     "x": [float(i) for i in ids]}, schema=SCHEMA)


def _evolve_spec(table: Table, fields: list[str]) -> None:
    # No partition-evolution API on Table yet: commit the spec updates directly.
    spec_id = max(s.spec_id for s in table.metadata.partition_specs) + 1
    spec = build_partition_spec(table.schema(), fields, spec_id=spec_id,
                                last_partition_id=table.metadata.last_partition_id)
    table.transaction().add_change(FixedChange([], [AddPartitionSpecUpdate(spec=spec), SetDefaultSpecUpdate(spec_id=spec_id)])).commit_transaction()


def _evolved_table(catalog: Catalog) -> Table:
    """day(ts) with two appends; then hour(ts), country with appends, an overwrite, a null-only
    partition, and a tag on the first snapshot."""
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", schema=SCHEMA, partition_by=["day(ts)"])
    table.append(_rows([1, 2, 3], "de", 1))
    table.append(_rows([4, 5], "fr", 2))
    _evolve_spec(table, ["hour(ts)", "country"])
    table.append(_rows([6, 7], "de", 3, 5))
    table.overwrite(_rows([8], "it", 4, 1), filter="id = 4")
    table.append(_rows([9], None, 5, 2))
    first = table.snapshots()[0].snapshot_id
    table.transaction().add_change(FixedChange([], [SetSnapshotRefUpdate(ref_name="first", snapshot_id=first, type="tag", max_ref_age_ms=86_400_000)])).commit_transaction()
    return table


NESTED = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])),
    ("lst", pa.list_(pa.int64())),
    ("mp", pa.map_(pa.string(), pa.float64())),
    ("dec", pa.decimal128(10, 2)),
    ("d", pa.date32()),
])


def _unpartitioned_table(catalog: Catalog) -> Table:
    import decimal

    catalog.create_namespace("u")
    table = catalog.create_table("u.t", schema=NESTED)
    table.append(pa.table({
        "id": [1, 2], "st": [{"x": 1, "y": "a"}, None], "lst": [[1, 2], []], "mp": [[("k", 1.5)], None],
        "dec": [decimal.Decimal("1.25"), None], "d": [datetime.date(2024, 2, 29), None],
    }, schema=NESTED))
    table.append(pa.table({"id": [3], "st": [{"x": 7, "y": "b"}], "lst": [None], "mp": [None],
                           "dec": [decimal.Decimal("-3.50")], "d": [datetime.date(2023, 1, 1)]}, schema=NESTED))
    return table


def _by(table: pa.Table, column: str) -> dict[Any, dict[str, Any]]:
    return {row[column]: row for row in table.to_pylist()}


# -- concrete values, on every catalog of the matrix ---------------------------------------------


@OVER_REST
def test_snapshots_history_and_refs(catalog: Catalog) -> None:
    table = _evolved_table(catalog)
    snaps = table.inspect.snapshots()
    assert snaps.column_names == ["committed_at", "snapshot_id", "parent_id", "operation", "manifest_list", "summary"]
    assert snaps.schema.field("committed_at").type == pa.timestamp("us", tz="UTC")
    assert snaps.schema.field("summary").type == pa.map_(pa.string(), pa.string())
    ids = [s.snapshot_id for s in table.snapshots()]
    assert snaps.column("snapshot_id").to_pylist() == ids
    assert snaps.column("parent_id").to_pylist() == [None, *ids[:-1]]
    assert snaps.column("operation").to_pylist() == ["append", "append", "append", "overwrite", "append"]
    first = snaps.to_pylist()[0]
    summary = dict(first["summary"])
    assert "operation" not in summary
    assert summary["added-records"] == "3"
    assert summary["total-data-files"] == "1"
    ts_ms = table.snapshots()[0].timestamp_ms
    assert first["committed_at"] == datetime.datetime.fromtimestamp(ts_ms / 1000, UTC)
    assert first["manifest_list"] == table.snapshots()[0].manifest_list

    history = table.inspect.history()
    assert history.column_names == ["made_current_at", "snapshot_id", "parent_id", "is_current_ancestor"]
    assert history.column("snapshot_id").to_pylist() == ids
    assert history.column("is_current_ancestor").to_pylist() == [True] * 5

    refs = _by(table.inspect.refs(), "name")
    assert table.inspect.refs().column_names == [
        "name", "type", "snapshot_id", "max_reference_age_in_ms", "min_snapshots_to_keep", "max_snapshot_age_in_ms"]
    assert refs["main"] == {"name": "main", "type": "BRANCH", "snapshot_id": ids[-1], "max_reference_age_in_ms": None,
                            "min_snapshots_to_keep": None, "max_snapshot_age_in_ms": None}
    assert refs["first"]["type"] == "TAG"
    assert refs["first"]["snapshot_id"] == ids[0]
    assert refs["first"]["max_reference_age_in_ms"] == 86_400_000


def test_history_after_rollback_marks_snapshots_that_are_no_longer_ancestors(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", schema=SCHEMA)
    a = table.append(_rows([1], "de", 1)).snapshot_id
    b = table.append(_rows([2], "de", 1)).snapshot_id
    table.transaction().add_change(FixedChange([], [SetSnapshotRefUpdate(ref_name="main", snapshot_id=a, type="branch")])).commit_transaction()  # roll back to a
    rows = table.inspect.history().to_pylist()
    assert [(r["snapshot_id"], r["parent_id"], r["is_current_ancestor"]) for r in rows] == [
        (a, None, True), (b, a, False), (a, None, True)]


def test_files_show_one_partition_struct_across_specs(catalog: Catalog) -> None:
    table = _evolved_table(catalog)
    files = table.inspect.files()
    assert files.column_names == FILE_COLUMNS
    partition_type = files.schema.field("partition").type
    assert partition_type == pa.struct([("ts_day", pa.date32()), ("ts_hour", pa.int32()), ("country", pa.string())])
    assert files.schema.field("lower_bounds").type == pa.map_(pa.int32(), pa.binary())
    assert files.schema.field("column_sizes").type == pa.map_(pa.int32(), pa.int64())
    got = sorted(((r["spec_id"], r["partition"]["ts_day"], r["partition"]["ts_hour"], r["partition"]["country"],
                   r["record_count"]) for r in files.to_pylist()), key=str)

    def hours(day: int, hour: int) -> int:  # hour(ts) partition values: hours since the epoch
        return (datetime.datetime(2024, 1, day, hour) - datetime.datetime(1970, 1, 1)) // datetime.timedelta(hours=1)

    assert got == sorted([
        (0, datetime.date(2024, 1, 1), None, None, 3),   # day(ts) files keep their spec
        (1, None, hours(2, 0), "fr", 1),                  # id 5, rewritten by the overwrite under spec 1
        (1, None, hours(3, 5), "de", 2),
        (1, None, hours(4, 1), "it", 1),
        (1, None, hours(5, 2), None, 1),
    ], key=str)
    assert set(files.column("content").to_pylist()) == {0}
    assert set(files.column("file_format").to_pylist()) == {"PARQUET"}
    assert table.inspect.delete_files().num_rows == 0
    assert table.inspect.data_files().column("file_path").to_pylist() == files.column("file_path").to_pylist()

    first = next(r for r in files.to_pylist() if r["spec_id"] == 0)
    metrics = first["readable_metrics"]
    assert list(metrics) == ["country", "id", "ts", "x"]  # sorted by column name, as Java
    assert metrics["id"] == {"column_size": dict(first["column_sizes"])[1], "value_count": 3, "null_value_count": 0,
                             "nan_value_count": None, "lower_bound": 1, "upper_bound": 3}
    assert metrics["ts"]["lower_bound"] == datetime.datetime(2024, 1, 1)
    assert metrics["x"]["nan_value_count"] == 0
    assert dict(first["value_counts"]) == {1: 3, 2: 3, 3: 3, 4: 3}


def test_entries_keep_deleted_entries_and_sequence_numbers(catalog: Catalog) -> None:
    table = _evolved_table(catalog)
    entries = table.inspect.entries()
    assert entries.column_names == ["status", "snapshot_id", "sequence_number", "file_sequence_number", "data_file",
                                    "readable_metrics"]
    assert entries.schema.field("data_file").type.names == FILE_COLUMNS[:-1]
    overwrite = table.snapshots()[3]
    rows = entries.to_pylist()
    deleted = [r for r in rows if r["status"] == 2]
    assert len(deleted) == 1
    assert deleted[0]["snapshot_id"] == overwrite.snapshot_id
    assert deleted[0]["data_file"]["record_count"] == 2  # ids 4 and 5
    assert deleted[0]["data_file"]["partition"]["ts_day"] == datetime.date(2024, 1, 2)
    assert deleted[0]["sequence_number"] == 2  # the deleted file's data sequence number
    by_seq = sorted((r["status"], r["sequence_number"], r["file_sequence_number"]) for r in rows if r["status"] != 2)
    assert all(seq == file_seq for _, seq, file_seq in by_seq)
    assert sum(1 for r in rows if r["status"] != 2) == table.inspect.files().num_rows


def test_manifests_counts_and_human_readable_summaries(catalog: Catalog) -> None:
    table = _evolved_table(catalog)
    manifests = table.inspect.manifests()
    assert manifests.column_names == [
        "content", "path", "length", "partition_spec_id", "added_snapshot_id", "added_data_files_count",
        "existing_data_files_count", "deleted_data_files_count", "added_delete_files_count",
        "existing_delete_files_count", "deleted_delete_files_count", "partition_summaries"]
    rows = manifests.to_pylist()
    # Fast appends keep earlier manifests as they are, so each file counts as added where it was.
    assert sum(r["added_data_files_count"] for r in rows) == 5
    assert sum(r["existing_data_files_count"] for r in rows) == 0
    assert sum(r["deleted_data_files_count"] for r in rows) == 1
    assert all(r["added_delete_files_count"] == 0 for r in rows)
    summaries = {(r["partition_spec_id"], r["added_data_files_count"], r["deleted_data_files_count"]):
                 r["partition_summaries"] for r in rows}
    assert summaries[(0, 0, 1)] == [{"contains_null": False, "contains_nan": False,
                                     "lower_bound": "2024-01-02", "upper_bound": "2024-01-02"}]
    assert summaries[(1, 2, 0)] == [
        {"contains_null": False, "contains_nan": False, "lower_bound": "2024-01-02-00", "upper_bound": "2024-01-04-01"},
        {"contains_null": False, "contains_nan": False, "lower_bound": "fr", "upper_bound": "it"}]
    # A manifest whose only country is null: Java prints the missing bounds as the string "null".
    null_country = [r["partition_summaries"] for r in rows
                    if r["partition_spec_id"] == 1 and r["partition_summaries"][1]["contains_null"]]
    assert len(null_country) == 1
    assert null_country[0][1] == {"contains_null": True, "contains_nan": False, "lower_bound": "null",
                               "upper_bound": "null"}


def test_partitions_aggregate_per_spec_and_partition(catalog: Catalog) -> None:
    table = _evolved_table(catalog)
    parts = table.inspect.partitions()
    assert parts.column_names == [
        "partition", "spec_id", "record_count", "file_count", "total_data_file_size_in_bytes",
        "position_delete_record_count", "position_delete_file_count", "equality_delete_record_count",
        "equality_delete_file_count", "last_updated_at", "last_updated_snapshot_id"]
    assert parts.schema.field("last_updated_at").type == pa.timestamp("us", tz="UTC")
    rows = {(r["spec_id"], r["partition"]["ts_day"], r["partition"]["country"]): r for r in parts.to_pylist()}
    snaps = table.snapshots()
    day1 = rows[(0, datetime.date(2024, 1, 1), None)]
    assert (day1["record_count"], day1["file_count"], day1["last_updated_snapshot_id"]) == (3, 1, snaps[0].snapshot_id)
    assert day1["last_updated_at"] == datetime.datetime.fromtimestamp(snaps[0].timestamp_ms / 1000, UTC)
    sizes = {r["file_path"]: r["file_size_in_bytes"] for r in table.inspect.files().to_pylist()}
    assert sum(r["total_data_file_size_in_bytes"] for r in rows.values()) == sum(sizes.values())
    assert sum(r["record_count"] for r in rows.values()) == 8
    assert len(rows) == 5
    assert rows[(1, None, "it")]["last_updated_snapshot_id"] == snaps[3].snapshot_id
    assert all(r["position_delete_file_count"] == 0 and r["equality_delete_record_count"] == 0
               for r in rows.values())


def test_unpartitioned_table_has_no_partition_columns(catalog: Catalog) -> None:
    table = _unpartitioned_table(catalog)
    files = table.inspect.files()
    assert files.column_names == [c for c in FILE_COLUMNS if c != "partition"]
    assert "partition" not in table.inspect.entries().schema.field("data_file").type.names
    parts = table.inspect.partitions().to_pylist()
    assert len(parts) == 1
    assert "partition" not in parts[0] and "spec_id" not in parts[0]
    assert (parts[0]["record_count"], parts[0]["file_count"]) == (3, 2)
    assert all(r["partition_summaries"] == [] for r in table.inspect.manifests().to_pylist())
    # Nested columns appear in readable_metrics under their full names, bounds typed as the column.
    metrics_type = files.schema.field("readable_metrics").type
    assert metrics_type.names == ["d", "dec", "id", "lst.element", "mp.key", "mp.value", "st.x", "st.y"]
    assert metrics_type.field("dec").type.field("lower_bound").type == pa.decimal128(10, 2)
    first = next(r for r in files.to_pylist() if r["record_count"] == 2)["readable_metrics"]
    assert first["d"]["lower_bound"] == datetime.date(2024, 2, 29)
    assert first["st.x"]["null_value_count"] == 1


def test_snapshot_id_selects_an_older_snapshot(catalog: Catalog) -> None:
    table = _evolved_table(catalog)
    first = table.snapshots()[0].snapshot_id
    second = table.snapshots()[1].snapshot_id
    assert table.inspect.files(snapshot_id=first).column("record_count").to_pylist() == [3]
    assert sorted(table.inspect.data_files(snapshot_id=second).column("record_count").to_pylist()) == [2, 3]
    assert table.inspect.delete_files(snapshot_id=second).num_rows == 0
    assert table.inspect.entries(snapshot_id=first).column("status").to_pylist() == [1]
    assert table.inspect.manifests(snapshot_id=first).column("added_snapshot_id").to_pylist() == [first]
    parts = table.inspect.partitions(snapshot_id=second).to_pylist()
    assert sorted((p["partition"]["ts_day"], p["record_count"]) for p in parts) == [
        (datetime.date(2024, 1, 1), 3), (datetime.date(2024, 1, 2), 2)]
    with pytest.raises(NoSuchSnapshotError):
        table.inspect.files(snapshot_id=12345)


def test_empty_table(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", schema=SCHEMA, partition_by=["country"])
    for name in NAMES:
        result = getattr(table.inspect, name)()
        assert result.num_rows == (1 if name == "metadata_log_entries" else 0), name
    assert table.inspect.files().schema.field("partition").type == pa.struct([("country", pa.string())])
    log = table.inspect.metadata_log_entries().to_pylist()
    assert log[0]["file"] == table.metadata_location
    assert log[0]["latest_snapshot_id"] is None


@OVER_REST
def test_metadata_log_entries(catalog: Catalog) -> None:
    table = _evolved_table(catalog)
    log = table.inspect.metadata_log_entries()
    assert log.column_names == ["timestamp", "file", "latest_snapshot_id", "latest_schema_id", "latest_sequence_number"]
    rows = log.to_pylist()
    assert len(rows) == len(table.metadata.metadata_log) + 1
    assert rows[-1]["file"] == table.metadata_location
    assert rows[0]["latest_snapshot_id"] is None  # written at creation, before any snapshot
    current = table.current_snapshot()
    assert current is not None
    assert (rows[-1]["latest_snapshot_id"], rows[-1]["latest_schema_id"], rows[-1]["latest_sequence_number"]) == (
        current.snapshot_id, 0, current.sequence_number)


def test_schemas_lists_schema_versions(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", schema=pa.schema([pa.field("id", pa.int64(), nullable=False)]))
    evolved = Schema((NestedField(1, "id", LongType(), True), NestedField(2, "name", StringType())), 1)
    table.transaction().add_change(FixedChange([], [AddSchemaUpdate(schema_=evolved), SetCurrentSchemaUpdate(schema_id=-1)])).commit_transaction()
    rows = table.inspect.schemas().to_pylist()
    assert [(r["schema_id"], r["is_current"], r["schema"]) for r in rows] == [
        (0, False, "id bigint NOT NULL"), (1, True, "id bigint NOT NULL, name string")]
    assert json.loads(rows[1]["fields"])[1] == {"id": 2, "name": "name", "required": False, "type": "string"}


def test_inspector_follows_new_commits(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", schema=SCHEMA)
    inspector = table.inspect
    table.append(_rows([1], "de", 1))
    assert inspector.snapshots().num_rows == 1
    table.append(_rows([2], "de", 1))
    assert inspector.files().num_rows == 2


# -- the Java reference implementation ---------------------------------------------------------

JAVA_STATEMENTS = [
    "CREATE TABLE ref.db.j (id bigint, cat string, ts timestamp) USING iceberg PARTITIONED BY (days(ts)) "
    "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')",
    "INSERT INTO ref.db.j VALUES (1, 'a', TIMESTAMP '2024-01-01 10:00:00'), (2, 'b', TIMESTAMP '2024-01-01 11:00:00'),"
    " (3, 'a', TIMESTAMP '2024-01-02 11:00:00')",
    "ALTER TABLE ref.db.j CREATE TAG first",
    "ALTER TABLE ref.db.j ADD PARTITION FIELD cat",
    "INSERT INTO ref.db.j VALUES (4, 'c', TIMESTAMP '2024-01-03 10:00:00'), (5, 'c', TIMESTAMP '2024-01-03 12:00:00')",
    "DELETE FROM ref.db.j WHERE id = 1",
    "DELETE FROM ref.db.j WHERE id = 4",
    "ALTER TABLE ref.db.j CREATE BRANCH b1 RETAIN 7 DAYS WITH SNAPSHOT RETENTION 2 SNAPSHOTS",
]
# Metadata tables Spark can read at an older snapshot, compared with inspect(snapshot_id=...).
TIME_TRAVEL = ("files", "entries", "manifests", "partitions")


@dataclass
class OracleCase:
    table: Table
    results: dict[str, dict[str, Any]]
    time_travel: dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def oracle_cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, OracleCase]:
    """One JVM for everything: the Java table is written, then every metadata table of the three
    tables is read (the Java one by its directory, since its metadata file name is not known yet)."""
    root = tmp_path_factory.mktemp("inspect")
    catalog = _catalog(root / "ts")
    tables = {"evolved": _evolved_table(catalog), "unpartitioned": _unpartitioned_table(catalog)}
    java_dir = root / "java"
    batch = oracle.OracleBatch(warehouse=str(java_dir))
    batch.sql(*JAVA_STATEMENTS, "SELECT 1")
    jobs: dict[tuple[str, str], int] = {}
    for key, table in tables.items():
        for name in NAMES:
            jobs[key, name] = batch.meta(table.metadata_location, name)
    for name in NAMES:
        jobs["java", name] = batch.meta(str(java_dir / "db" / "j"), name)
    for name in TIME_TRAVEL:
        jobs["java-first", name] = batch.sql(f"SELECT * FROM ref.db.j.{name} VERSION AS OF 'first'")
    results = batch.run()
    oracle.check(results[0])
    catalog.create_namespace("java")
    metadata = max(glob.glob(str(java_dir / "db" / "j" / "metadata" / "v*.metadata.json")),
                   key=lambda p: int(Path(p).name[1:].split(".")[0]))
    tables["java"] = catalog.register_table("java.j", metadata)
    return {
        key: OracleCase(
            table,
            {name: oracle.check(results[jobs[key, name]]) for name in NAMES},
            {name: oracle.check(results[jobs["java-first", name]]) for name in TIME_TRAVEL} if key == "java" else {},
        )
        for key, table in tables.items()
    }


def _normalize(value: Any) -> Any:
    """Maps print as lists of [key, value] pairs in hash order: compare them sorted."""
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_normalize(v) for v in value]
        if items and all(isinstance(v, list) and len(v) == 2 for v in items):
            return sorted(items, key=lambda kv: json.dumps(kv, sort_keys=True, default=str))
        return items
    return value


def _rows_as_oracle(columns: list[str], rows: list[list[Any]]) -> list[str]:
    out = [json.dumps(_normalize(dict(zip(columns, r, strict=True))), sort_keys=True, default=str) for r in rows]
    return sorted(out)


def _compare(ours: pa.Table, theirs: dict[str, Any]) -> None:
    columns = [c["name"] for c in theirs["columns"]]
    assert ours.column_names == columns
    assert ours.num_rows == len(theirs["rows"])
    assert _rows_as_oracle(columns, oracle_rows(ours)) == _rows_as_oracle(columns, theirs["rows"])


@pytest.mark.oracle
@pytest.mark.parametrize("case", ["evolved", "unpartitioned", "java"])
@pytest.mark.parametrize("name", NAMES)
def test_metadata_tables_match_java(oracle_cases: dict[str, OracleCase], case: str, name: str) -> None:
    found = oracle_cases[case]
    # Every column, values included: snapshot ids, operations, paths, counts, partition values,
    # metrics and readable_metrics.
    _compare(getattr(found.table.inspect, name)(), found.results[name])


@pytest.mark.oracle
@pytest.mark.parametrize("name", TIME_TRAVEL)
def test_metadata_tables_at_an_older_snapshot_match_java(oracle_cases: dict[str, OracleCase], name: str) -> None:
    found = oracle_cases["java"]
    tag = found.table.metadata.refs["first"].snapshot_id
    _compare(getattr(found.table.inspect, name)(snapshot_id=tag), found.time_travel[name])


@pytest.mark.oracle
def test_java_table_with_deletes_has_concrete_values(oracle_cases: dict[str, OracleCase]) -> None:
    """Position deletes written by Java show up in delete_files, partitions and manifests."""
    table = oracle_cases["java"].table
    deletes = table.inspect.delete_files().to_pylist()
    assert sorted((d["content"], d["spec_id"], d["record_count"]) for d in deletes) == [(1, 0, 1), (1, 1, 1)]
    parts = {(p["partition"]["ts_day"], p["partition"]["cat"]): p for p in table.inspect.partitions().to_pylist()}
    assert parts[(datetime.date(2024, 1, 1), None)]["position_delete_record_count"] == 1
    assert parts[(datetime.date(2024, 1, 3), "c")]["position_delete_file_count"] == 1
    manifests = table.inspect.manifests().to_pylist()
    assert sum(m["added_delete_files_count"] for m in manifests) == 2
    refs = _by(table.inspect.refs(), "name")
    assert (refs["b1"]["max_reference_age_in_ms"], refs["b1"]["min_snapshots_to_keep"]) == (604_800_000, 2)
