"""Partition management from Python (``tablestore.table.ops.partitions``): Hive names with escaping and
nulls, values of every time transform, drops that are metadata-only or rewrite, on SQLite; and a
conflict, on every catalog of the matrix."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

import tablestore
from tablestore.errors import CommitConflictError, NoSuchPartitionError, ValidationError
from tablestore.table.ops.partitions import (
    drop_partitions,
    hive_escape,
    partition_names,
    partition_stats,
    rename_partition,
    resolve_partition,
)
from tests.conftest import ON_THE_CATALOG_MATRIX


@pytest.fixture
def catalog(catalog: tablestore.Catalog) -> tablestore.Catalog:
    """The test's catalog (``tests/table/conftest.py``) with the namespace ``db``."""
    catalog.create_namespace("db")
    return catalog


def test_hive_names_escape_special_characters_and_show_nulls(catalog: tablestore.Catalog) -> None:
    table = catalog.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("k", pa.string())]),
                                 partition_by=["k"])
    table.append(pa.table({"id": [1, 2, 3, 4], "k": ["a/b=c", "x y", None, "50%"]}))
    assert partition_names(table) == ["k=50%25", "k=__HIVE_DEFAULT_PARTITION__", "k=a%2Fb%3Dc", "k=x y"]
    assert hive_escape("2024-05-01T10:00") == "2024-05-01T10%3A00"
    assert drop_partitions(table, [[("k", None)]]).deleted_rows == 1
    assert drop_partitions(table, [[("k", "a/b=c")]]).deleted_rows == 1
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [2, 4]


def test_time_partition_values_are_read_as_show_partitions_prints_them(catalog: tablestore.Catalog) -> None:
    schema = pa.schema([("ts", pa.timestamp("us"))])
    table = catalog.create_table("db.t", schema=schema, partition_by=["hours(ts)"])
    hour = (datetime.date(2024, 5, 3) - datetime.date(1970, 1, 1)).days * 24 + 13
    assert resolve_partition(table, [("ts_hour", "2024-05-03-13")])[0].value == hour
    assert resolve_partition(table, [("ts_hour", str(hour))])[0].value == hour
    with table.update_spec() as u:
        u.replace_field("hours(ts)", "months(ts)")
    with table.update_spec() as u:
        u.add_field("years(ts)")
    assert resolve_partition(table, [("ts_month", "2024-05")])[0].value == 54 * 12 + 4
    assert resolve_partition(table, [("ts_year", "2024")])[0].value == 54
    with pytest.raises(ValidationError, match="expected 'yyyy-MM-dd-HH'"):
        resolve_partition(table, [("ts_hour", "2024-05-03")])
    with pytest.raises(ValidationError, match="partition fields are: ts_month, ts_year, ts_hour"):
        resolve_partition(table, [("nope", "1")])


def test_drop_by_a_coarser_time_partition_is_metadata_only_across_specs(catalog: tablestore.Catalog) -> None:
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us"))])
    table = catalog.create_table("db.t", schema=schema, partition_by=["hours(ts)"])
    stamps = [datetime.datetime(2024, 5, d, h) for d in (1, 2) for h in (1, 23)]
    table.append(pa.table({"id": [1, 2, 3, 4], "ts": stamps}, schema=schema))
    with table.update_spec() as u:
        u.replace_field("hours(ts)", "days(ts)")
    table.append(pa.table({"id": [5, 6], "ts": [datetime.datetime(2024, 5, 1, 5), datetime.datetime(2024, 5, 2)]},
                          schema=schema))
    assert partition_names(table) == ["ts_day=2024-05-01", "ts_day=2024-05-02", "ts_hour=2024-05-01-01",
                                      "ts_hour=2024-05-01-23", "ts_hour=2024-05-02-01", "ts_hour=2024-05-02-23"]
    assert partition_names(table, [("ts_day", "2024-05-01")]) == [
        "ts_day=2024-05-01", "ts_hour=2024-05-01-01", "ts_hour=2024-05-01-23"]
    stats = partition_stats(table, [("ts_day", "2024-05-01")])
    assert (stats.record_count, stats.file_count) == (3, 3)
    result = drop_partitions(table, [[("ts_day", "2024-05-01")]])
    assert (result.deleted_rows, result.files_removed, result.files_rewritten) == (3, 3, 0)
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [3, 4, 6]


def test_drop_rewrites_files_whose_spec_cannot_tell(catalog: tablestore.Catalog) -> None:
    schema = pa.schema([("id", pa.int64()), ("c", pa.string())])
    table = catalog.create_table("db.t", schema=schema)
    table.append(pa.table({"id": [1, 2, 3], "c": ["de", "fr", "de"]}))
    with table.update_spec() as u:
        u.add_field("c")
    table.append(pa.table({"id": [4, 5], "c": ["de", "fr"]}))
    before = len(table.snapshots())
    result = drop_partitions(table, [[("c", "de")]])
    assert (result.deleted_rows, result.files_removed, result.files_rewritten) == (3, 1, 1)
    assert len(table.snapshots()) == before + 1
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [2, 5]
    with pytest.raises(NoSuchPartitionError):
        drop_partitions(table, [[("c", "de")]])
    assert drop_partitions(table, [[("c", "de")]], if_exists=True).deleted_rows == 0
    assert len(table.snapshots()) == before + 1


@ON_THE_CATALOG_MATRIX
def test_a_concurrent_append_to_a_dropped_partition_fails_the_drop(catalog: tablestore.Catalog) -> None:
    schema = pa.schema([("id", pa.int64()), ("c", pa.string())])
    table = catalog.create_table("db.t", schema=schema, partition_by=["c"])
    table.append(pa.table({"id": [1, 2], "c": ["de", "fr"]}))
    stale = catalog.load_table("db.t")
    catalog.load_table("db.t").append(pa.table({"id": [3], "c": ["de"]}))
    with pytest.raises(CommitConflictError, match="partition this drop changes"):
        drop_partitions(stale, [[("c", "de")]])
    # An append to another partition does not conflict.
    stale = catalog.load_table("db.t")
    catalog.load_table("db.t").append(pa.table({"id": [4], "c": ["fr"]}))
    drop_partitions(stale, [[("c", "de")]])
    assert sorted(catalog.load_table("db.t").scan().to_arrow().column("id").to_pylist()) == [2, 4]


def test_rename_partition_of_a_date_column(catalog: tablestore.Catalog) -> None:
    schema = pa.schema([("id", pa.int64()), ("d", pa.date32())])
    table = catalog.create_table("db.t", schema=schema, partition_by=["d"])
    table.append(pa.table({"id": [1, 2], "d": [datetime.date(2024, 1, 1), datetime.date(2024, 1, 2)]},
                          schema=schema))
    assert rename_partition(table, [("d", "2024-01-01")], [("d", "2023-12-31")]) == 1
    assert partition_names(table) == ["d=2023-12-31", "d=2024-01-02"]
    with pytest.raises(ValidationError, match="same partition columns"):
        rename_partition(table, [("d", "2023-12-31")], [])


def test_partition_source_column_with_a_dot_in_its_name_is_found_by_field_id(catalog: tablestore.Catalog) -> None:
    """A top-level column named ``a.b`` is not looked up as the field ``b`` of a struct ``a``."""
    schema = pa.schema([("id", pa.int64()), ("a.b", pa.int32())])
    table = catalog.create_table("db.dots", schema=schema, partition_by=["`a.b`", "bucket(2, `a.b`)"])
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "a.b": pa.array([7, 8], pa.int32())}, schema=schema))
    partitions = sorted(tuple(t.file.partition) for t in table.scan().plan_files())
    assert [p[0] for p in partitions] == [7, 8]
    assert sorted(table.scan(filter="`a.b` = 8").to_arrow().column("id").to_pylist()) == [2]
