"""The Spark engine: the ``tablestore`` data source (reads, writes, pushdown, time travel,
failed jobs), SparkEngine.map, and interop of Spark-written tables with pyiceberg and Java.

One local Spark session serves the whole module (starting one takes 10-30 s).
"""

from __future__ import annotations

import datetime
import decimal
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tablestore.catalog_manager import CatalogManager
from tablestore.spec.metadata.update_models import (
    AddSchemaUpdate,
    AssertCurrentSchemaId,
    SetCurrentSchemaUpdate,
    SetSnapshotRefUpdate,
    TableUpdate,
)
from tablestore.spec.schemas.schema import Schema, arrow_to_schema
from tablestore.spec.schemas.types import NestedField, StringType
from tablestore.table import Table
from tests.spark.conftest import Lake
from tests.values import oracle_rows

pytestmark = pytest.mark.spark

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import datasource as sds  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from tablestore.spark import (  # noqa: E402
    SparkEngine,
    register_table_view,
)
from tablestore.spark.commit import WRITE_ID_PROPERTY  # noqa: E402
from tablestore.spark.convert import filter_to_expression  # noqa: E402
from tablestore.spark.options import parse_name, quote_name  # noqa: E402
from tablestore.table.update.transaction import FixedChange  # noqa: E402


def read(spark: SparkSession, name: str, **options: Any) -> DataFrame:
    reader = spark.read.format("tablestore")
    for key, value in options.items():
        reader = reader.option(key.replace("_", "-"), str(value))
    return reader.load(name)


def rows_of(table: pa.Table) -> list[list[Any]]:
    """Rows in a canonical order and form (NaN comparable, bytes as hex): see tests.values."""
    return oracle_rows(table)


def spark_rows(df: DataFrame) -> list[list[Any]]:
    return oracle_rows(df.toArrow())


# -- data ------------------------------------------------------------------------------------------

EVENTS = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("country", pa.string()),
    ("ts", pa.timestamp("us")),
    ("amount", pa.decimal128(10, 2)),
    ("score", pa.float64()),
])
COUNTRIES = ["de", "fr", "nl", "us"]


def events(start: int, n: int) -> pa.Table:
    return pa.table({
        "id": pa.array(range(start, start + n), pa.int64()),
        "country": [None if i % 13 == 5 else COUNTRIES[i % 4] for i in range(start, start + n)],
        "ts": [datetime.datetime(2024, 1, 1) + datetime.timedelta(hours=7 * i) for i in range(start, start + n)],
        "amount": [decimal.Decimal(i * 37 % 1000) / 10 for i in range(start, start + n)],
        "score": [float("nan") if i % 17 == 3 else i * 0.25 for i in range(start, start + n)],
    }, schema=EVENTS)


# Every type the data source maps, including the ones Spark has no type for (time, uuid, fixed).
ALL_TYPES = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("b", pa.bool_()),
    ("i", pa.int32()),
    ("f", pa.float32()),
    ("d", pa.float64()),
    ("dec", pa.decimal128(12, 3)),
    ("dt", pa.date32()),
    ("tm", pa.time64("us")),
    ("ts", pa.timestamp("us")),
    ("tstz", pa.timestamp("us", tz="UTC")),
    ("s", pa.string()),
    ("u", pa.binary(16)),
    ("fx", pa.binary(3)),
    ("bin", pa.binary()),
    ("st", pa.struct([("x", pa.int32()), ("t", pa.time64("us")), ("y", pa.string())])),
    ("lst", pa.list_(pa.int64())),
    ("mp", pa.map_(pa.string(), pa.float64())),
])


def all_types(start: int, n: int) -> pa.Table:
    rows: dict[str, list[Any]] = {name: [] for name in ALL_TYPES.names}
    for k in range(start, start + n):
        null = k % 5 == 2
        rows["id"].append(k)
        rows["b"].append(None if null else k % 2 == 0)
        rows["i"].append(None if null else k * 3 - 40)
        rows["f"].append(None if null else k / 4)
        rows["d"].append(None if null else k * 1.5 - 7)
        rows["dec"].append(None if null else decimal.Decimal(k * 1234 - 9000) / 1000)
        rows["dt"].append(None if null else datetime.date(2024, 2, 27) + datetime.timedelta(days=k))
        rows["tm"].append(None if null else datetime.time(k % 24, k % 60, 1, k))
        # Across the DST changes of Europe, which must not matter: timestamps are UTC.
        ts = datetime.datetime(2024, 3, 30, 23) + datetime.timedelta(hours=k, microseconds=k)
        tstz = datetime.datetime(2024, 10, 27, tzinfo=datetime.UTC) + datetime.timedelta(minutes=97 * k)
        rows["ts"].append(None if null else ts)
        rows["tstz"].append(None if null else tstz)
        rows["s"].append(None if null else f"s-{k:03d}-äö")
        rows["u"].append(None if null else uuid.UUID(int=k * 7919 + 1).bytes)
        rows["fx"].append(None if null else bytes([k % 256, 7, 9]))
        rows["bin"].append(None if null else bytes(range(k % 6)))
        rows["st"].append(None if null else {"x": k, "t": datetime.time(1, 2, 3), "y": None if k % 3 else "y"})
        rows["lst"].append(None if null else list(range(k % 4)))
        rows["mp"].append(None if null else [(f"k{j}", j * 0.5) for j in range(k % 3)])
    return pa.table(rows, schema=ALL_TYPES)


# -- conversions (no Spark session needed) -----------------------------------------------------------


FILTER_SCHEMA = arrow_to_schema(pa.schema([
    ("id", pa.int64()), ("s", pa.string()), ("b", pa.binary()), ("tm", pa.time64("us")),
    ("ts", pa.timestamp("us", tz="UTC")), ("st", pa.struct([("x", pa.int32())])), ("l", pa.list_(pa.int32())),
]))
UTC_2024 = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)


@pytest.mark.parametrize(("spark_filter", "expected"), [
    (sds.EqualTo(("s",), "a"), "s = 'a'"),
    (sds.IsNotNull(("s",)), "s IS NOT NULL"),
    (sds.Not(sds.In(("id",), (1, 2))), "NOT id IN (1, 2)"),
    # <=> is never unknown, so its negation keeps NULL rows: "not null and equal" does that.
    (sds.EqualNullSafe(("id",), 3), "id IS NOT NULL AND id = 3"),
    (sds.EqualNullSafe(("id",), None), "id IS NULL"),
    (sds.StringStartsWith(("s",), "x%"), r"s LIKE 'x\\%%'"),
    (sds.LessThan(("ts",), UTC_2024), "ts < TIMESTAMP '2024-01-01 00:00:00+00:00'"),
    (sds.EqualTo(("st", "x"), 3), "st.x = 3"),
    (sds.EqualTo(("b",), b"x"), "b = X'78'"),
    # Left to Spark: a NULL among IN values, order on bytes, remapped types, non-struct nesting,
    # unknown columns, values that do not fit the column, and what has no tablestore predicate.
    (sds.In(("id",), (1, None)), None),
    (sds.GreaterThan(("b",), b"x"), None),
    (sds.EqualTo(("tm",), 5), None),
    (sds.EqualTo(("st",), 3), None),
    (sds.EqualTo(("nope",), 3), None),
    (sds.GreaterThan(("id",), "zz"), None),
    (sds.StringEndsWith(("s",), "x"), None),
    (sds.StringContains(("s",), "x"), None),
])
def test_spark_filters_convert_to_expressions_of_the_same_meaning(spark_filter: Any, expected: str | None) -> None:
    converted = filter_to_expression(spark_filter, FILTER_SCHEMA)
    assert (str(converted) if converted is not None else None) == expected


@pytest.mark.parametrize(("text", "parts"), [
    ("t", ("t",)),
    ("cat.db.t", ("cat", "db", "t")),
    ("`my db`.`t.1`", ("my db", "t.1")),
    ("db.`a``b`", ("db", "a`b")),
])
def test_table_names_parse_with_backtick_quoting(text: str, parts: tuple[str, ...]) -> None:
    assert parse_name(text) == parts
    assert parse_name(quote_name(parts)) == parts


# -- writes and reads ------------------------------------------------------------------------------


def test_every_type_round_trips_through_spark_reads_and_writes(lake: Lake, spark: SparkSession) -> None:
    source = lake.create("types_src", ALL_TYPES, partition_by=["bucket(4, id)"])
    source.append(all_types(0, 40))
    target = lake.create("types_dst", ALL_TYPES)

    df = read(spark, "db.types_src")
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    # Spark has no TIME, UUID or fixed type: microseconds and bytes carry them.
    assert types["tm"] == "bigint" and types["u"] == "binary" and types["fx"] == "binary"
    assert types["ts"] == "timestamp_ntz" and types["tstz"] == "timestamp"
    assert types["st"] == "struct<x:int,t:bigint,y:string>"
    assert not df.schema["id"].nullable

    by_id = {r["id"]: r.asDict(recursive=True) for r in df.collect()}
    assert len(by_id) == 40
    assert by_id[8]["tm"] == (8 * 3600 + 8 * 60 + 1) * 1_000_000 + 8
    assert by_id[8]["u"] == uuid.UUID(int=8 * 7919 + 1).bytes
    assert by_id[8]["dec"] == decimal.Decimal("0.872")
    assert by_id[8]["st"] == {"x": 8, "t": 3_723_000_000, "y": None}
    assert by_id[7]["s"] is None and by_id[7]["tm"] is None

    df.repartition(3).write.format("tablestore").mode("append").save("db.types_dst")
    target.refresh()
    assert rows_of(target.scan().to_arrow()) == rows_of(source.scan().to_arrow())


def test_append_then_overwrite_make_one_commit_each(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("writes", EVENTS, partition_by=["country"])
    table.append(events(0, 10))
    staged = lake.create("writes_staged", EVENTS)
    staged.append(events(100, 60))
    staged.append(events(300, 20))

    read(spark, "db.writes_staged").repartition(4).write.format("tablestore").mode("append").save("lake.db.writes")
    table.refresh()
    assert len(table.snapshots()) == 2
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary["operation"] == "append"
    assert snapshot.summary["added-records"] == "80"
    assert WRITE_ID_PROPERTY in snapshot.summary
    expected = pa.concat_tables([events(0, 10), events(100, 60), events(300, 20)])
    assert rows_of(table.scan().to_arrow()) == rows_of(expected)
    assert spark_rows(read(spark, "db.writes")) == rows_of(expected)

    replacement = spark.createDataFrame(events(500, 7).to_pylist(), schema=read(spark, "db.writes").schema)
    replacement.write.format("tablestore").mode("overwrite").save("db.writes")
    table.refresh()
    assert len(table.snapshots()) == 3
    current = table.current_snapshot()
    assert current is not None and current.summary["operation"] == "overwrite"
    assert current.summary["deleted-records"] == "90"
    assert rows_of(table.scan().to_arrow()) == rows_of(events(500, 7))
    # The previous snapshot still reads the appended rows.
    assert len(table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()) == 90


def test_write_with_columns_the_table_lacks_fails_before_any_file_is_written(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("strict", EVENTS)
    df = spark.range(5).withColumn("bogus", F.lit("x"))
    with pytest.raises(Exception, match="bogus"):
        df.write.format("tablestore").mode("append").save("db.strict")
    table.refresh()
    assert table.current_snapshot() is None
    assert not list((Path(table.location.removeprefix("file://")) / "data").glob("**/*.parquet"))


def test_failed_job_leaves_the_table_unchanged(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("failing", EVENTS)
    table.append(events(0, 5))
    before_location, before_rows = table.metadata_location, rows_of(table.scan().to_arrow())
    data_dir = Path(table.location.removeprefix("file://")) / "data"
    before_files = set(data_dir.glob("*.parquet"))

    staged = lake.create("failing_src", EVENTS)
    staged.append(events(1000, 400))
    # Partition 0 finishes; partition 1 fails after some of its rows, late enough that task 0
    # has reported its files: the job aborts.
    df = read(spark, "db.failing_src").repartitionByRange(2, "id")

    @F.udf("string")
    def country_or_boom(row_id: int, country: str) -> str:
        if row_id == 1390:
            time.sleep(5)
            raise RuntimeError("boom")
        return country

    with pytest.raises(Exception, match="boom"):
        df.withColumn("country", country_or_boom("id", "country")).write.format("tablestore") \
            .mode("append").save("db.failing")

    table.refresh()
    assert table.metadata_location == before_location
    assert rows_of(table.scan().to_arrow()) == before_rows
    # abort() deleted the files of the task that succeeded (files are named
    # <partition>-<task>-<uuid>-<n>). The failed task deletes its own when its Python worker
    # sees the failure, but Spark may kill that worker first: then they are orphans, referenced
    # by no snapshot, as the data source contract allows, and remove_orphan_files clears them.
    left = set(data_dir.glob("*.parquet")) - before_files
    assert all(p.name.split("-")[1] == "1" for p in left), left
    table.maintenance().remove_orphan_files(older_than=int(time.time() * 1000) + 1000)
    assert set(data_dir.glob("*.parquet")) == before_files


# -- scans -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def partitioned(lake: Lake) -> Table:
    table = lake.create("partitioned", EVENTS, partition_by=["country"])
    for start in (0, 50, 100):
        table.append(events(start, 50))
    return table


def test_partition_filter_is_pushed_into_scan_planning(spark: SparkSession, partitioned: Table) -> None:
    full = read(spark, "db.partitioned", pushdown="true")
    full_partitions = full.rdd.getNumPartitions()
    assert full_partitions == len(partitioned.scan().plan_files()) == 15  # 3 appends x (4 countries + null)

    # A fresh DataFrame per query: see test_reused_dataframes_read_correctly_without_pushdown.
    filtered = read(spark, "db.partitioned", pushdown="true").filter("country = 'de'")
    assert filtered.rdd.getNumPartitions() == 3
    assert spark_rows(filtered) == rows_of(partitioned.scan(filter="country = 'de'").to_arrow())

    ranged = read(spark, "db.partitioned", pushdown="true").filter("country IN ('fr', 'nl') AND id >= 120")
    assert ranged.rdd.getNumPartitions() < full_partitions
    assert spark_rows(ranged) == rows_of(partitioned.scan(filter="country IN ('fr', 'nl') AND id >= 120").to_arrow())


@pytest.mark.parametrize("condition", [
    "country IS NULL",
    "country IS NOT NULL AND id < 20",
    "NOT (country = 'de')",
    "country <=> 'fr'",
    "NOT (country <=> 'fr')",
    "country LIKE 'n%'",
    "country NOT IN ('de', 'us')",
    "amount > 50.5 AND ts < TIMESTAMP_NTZ '2024-01-20 00:00:00'",
    "score >= 10 OR id = 3",
    "isnan(score)",
    "country LIKE '%e'",
    "id % 7 = 1",
])
def test_pushed_filters_return_what_spark_computes(spark: SparkSession, partitioned: Table, condition: str) -> None:
    pushed = read(spark, "db.partitioned", pushdown="true").filter(condition)
    plain = read(spark, "db.partitioned").filter(condition)
    expected = spark_rows(plain)
    assert expected, condition
    assert spark_rows(pushed) == expected


def test_reused_dataframes_read_correctly_without_pushdown(spark: SparkSession, partitioned: Table) -> None:
    # Spark 4.3 reuses the reader of a relation's last filtered scan for its later unfiltered
    # scans (and for other scans of it in the same query); without pushdown, the default,
    # every scan reads the same thing, so a DataFrame can be used again and again.
    df = read(spark, "db.partitioned")
    assert df.filter("country = 'de'").count() == 35
    assert df.count() == 150
    assert df.filter("id < 10").union(df).count() == 160


def test_columns_and_filter_options_narrow_the_relation(spark: SparkSession, partitioned: Table) -> None:
    df = read(spark, "db.partitioned", columns="score,id", filter="country = 'us' AND id < 60")
    assert df.columns == ["score", "id"]
    assert df.rdd.getNumPartitions() == 2  # the filter prunes at planning, like pushdown
    expected = partitioned.scan(filter="country = 'us' AND id < 60", columns=["score", "id"]).to_arrow()
    assert spark_rows(df) == rows_of(expected)


def add_column(table: Table, column: NestedField) -> None:
    schema = table.schema()
    evolved = Schema((*schema.fields, column), schema.schema_id + 1, schema.identifier_field_ids)
    table.transaction().add_change(FixedChange([AssertCurrentSchemaId(current_schema_id=schema.schema_id)], [AddSchemaUpdate(schema_=evolved), SetCurrentSchemaUpdate(schema_id=-1)])).commit_transaction()


def test_snapshot_id_and_as_of_timestamp_read_older_snapshots(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("travel", EVENTS)
    table.append(events(0, 10))
    first = table.current_snapshot()
    assert first is not None
    add_column(table, NestedField(table.metadata.last_column_id + 1, "note", StringType()))
    table.append(events(10, 5).append_column("note", pa.array(["n"] * 5)))
    assert read(spark, "db.travel").count() == 15
    assert "note" in read(spark, "db.travel").columns

    old = read(spark, "db.travel", snapshot_id=first.snapshot_id)
    assert old.count() == 10
    assert "note" not in old.columns  # time travel reads with the snapshot's schema
    assert read(spark, "db.travel", as_of_timestamp=first.timestamp_ms).count() == 10
    iso = datetime.datetime.fromtimestamp(first.timestamp_ms / 1000, datetime.UTC).isoformat()
    assert read(spark, "db.travel", as_of_timestamp=iso).count() == 10
    with pytest.raises(Exception, match="no snapshot"):
        read(spark, "db.travel", snapshot_id=12345).count()


def test_ref_option_reads_a_tag_a_branch_or_a_snapshot_id(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("refs", EVENTS)
    table.append(events(0, 10))
    first = table.current_snapshot()
    assert first is not None
    table.append(events(10, 5))
    second = table.current_snapshot()
    assert second is not None
    refs: list[TableUpdate] = [SetSnapshotRefUpdate(ref_name="v1", snapshot_id=first.snapshot_id, type="tag"),
                               SetSnapshotRefUpdate(ref_name="audit", snapshot_id=second.snapshot_id, type="branch")]
    table.transaction().add_change(FixedChange([], refs)).commit_transaction()
    table.append(events(15, 1))

    assert spark_rows(read(spark, "db.refs", ref="v1")) == rows_of(events(0, 10))
    assert spark_rows(read(spark, "db.refs", ref="audit")) == rows_of(events(0, 15))
    assert spark_rows(read(spark, "db.refs", ref=str(first.snapshot_id))) == rows_of(events(0, 10))
    assert read(spark, "db.refs", tag="v1").count() == 10
    assert read(spark, "db.refs").count() == 16
    with pytest.raises(Exception, match=r"no branch or tag 'v2' \(its refs: audit, main, v1\)"):
        read(spark, "db.refs", ref="v2")
    with pytest.raises(Exception, match="only one of the options ref"):
        read(spark, "db.refs", ref="v1", snapshot_id=first.snapshot_id)


def test_large_files_are_read_by_several_partitions_split_at_row_groups(lake: Lake, spark: SparkSession) -> None:
    import pyarrow.parquet as pq

    table = lake.catalog.create_table("db.split", schema=EVENTS,
                                      properties={"write.parquet.row-group-size-bytes": "8192"})
    table.append(events(0, 3000))
    table.append(events(3000, 10))  # a small file stays whole
    files = sorted((t.file for t in table.scan().plan_files()), key=lambda f: -f.record_count)
    groups = pq.ParquetFile(files[0].file_path).metadata.num_row_groups
    assert groups >= 4 and len(files[0].split_offsets or []) == groups

    whole = read(spark, "db.split")
    assert whole.rdd.getNumPartitions() == 2
    # A split size of two row groups' bytes as the table property, then one byte as the option.
    two_groups = str(files[0].split_offsets[2] - files[0].split_offsets[0])  # type: ignore[index]
    table.update_properties({"read.split.target-size": two_groups})
    split = read(spark, "db.split")
    # Splits hold whole row groups of at least that many bytes (row groups differ in size).
    assert 3 <= split.rdd.getNumPartitions() <= groups // 2 + 2
    expected = rows_of(pa.concat_tables([events(0, 3000), events(3000, 10)]))
    assert spark_rows(split) == expected
    one_each = read(spark, "db.split", split_size=1, filter="id >= 2990 OR id < 7")
    assert one_each.rdd.getNumPartitions() == groups + 1
    assert spark_rows(one_each) == rows_of(pa.concat_tables([events(0, 7), events(2990, 20)]))
    assert one_each.count() == 27


def test_register_table_view_serves_spark_sql(lake: Lake, spark: SparkSession, partitioned: Table) -> None:
    manager = CatalogManager(lake.config)
    try:
        register_table_view(spark, manager, ("db", "partitioned"), "events_view")
        got = spark.sql("SELECT country, count(*) AS n FROM events_view GROUP BY country").collect()
        assert {r["country"]: r["n"] for r in got} == {"de": 35, "fr": 35, "nl": 34, "us": 34, None: 12}
        first = partitioned.snapshots()[0]
        register_table_view(spark, manager, "lake.db.partitioned", "events_then", snapshot_id=first.snapshot_id)
        assert spark.sql("SELECT count(*) AS n FROM events_then").collect()[0]["n"] == 50
    finally:
        manager.close()


# -- the engine ------------------------------------------------------------------------------------


def test_spark_engine_map_runs_functions_on_executors_in_order(spark: SparkSession) -> None:
    engine = SparkEngine(spark)
    results = engine.map(lambda x: (x * x, os.getpid()), range(9))
    assert [r[0] for r in results] == [x * x for x in range(9)]
    assert os.getpid() not in {r[1] for r in results}  # Python workers, not this process
    assert engine.map(str, []) == []


def _task_of(x: int) -> tuple[int, int]:
    from pyspark import TaskContext

    context = TaskContext.get()
    assert context is not None
    return x, context.partitionId()


def test_spark_engine_map_runs_a_function_that_carries_data_as_one_task_per_core(spark: SparkSession) -> None:
    # Each task receives the function anew: a small one is split four tasks per core for
    # balance, one carrying 2 MB (a MERGE's source rows) one task per core.
    cores = spark.sparkContext.defaultParallelism
    engine = SparkEngine(spark)
    payload = os.urandom(2 << 20)

    def carrying(x: int) -> tuple[int, int]:
        return _task_of(x + len(payload) - len(payload))

    small, large = engine.map(_task_of, range(32)), engine.map(carrying, range(32))
    assert [r[0] for r in small] == [r[0] for r in large] == list(range(32))
    assert len({r[1] for r in small}) == min(32, cores * 4)
    assert len({r[1] for r in large}) == cores
    assert len({r[1] for r in SparkEngine(spark, max_partitions=3).map(carrying, range(32))}) == 3


def test_table_file_tasks_run_on_spark_engine(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("engine", EVENTS, partition_by=["country"]).with_engine(SparkEngine(spark))
    table.append(events(0, 40))  # write tasks run on executors, the commit here
    assert rows_of(table.scan(filter="id < 30").to_arrow()) == rows_of(events(0, 30))


# -- interop ---------------------------------------------------------------------------------------


@pytest.mark.oracle
def test_spark_written_tables_read_identically_by_pyiceberg_and_java(lake: Lake, spark: SparkSession) -> None:
    from pyiceberg.table import StaticTable

    from tests import oracle

    # The oracle's Spark 3.5 has no TIME type; the rest of ALL_TYPES.
    schema = pa.schema([f for f in ALL_TYPES if f.name not in ("tm", "st")])
    staged = lake.create("interop_src", schema)
    staged.append(all_types(0, 30).select(schema.names))
    staged.append(all_types(30, 12).select(schema.names))
    tables = {
        "plain": lake.create("interop_plain", schema),
        "partitioned": lake.create("interop_part", schema, partition_by=["day(tstz)", "bucket(3, id)"]),
    }
    df = read(spark, "db.interop_src")
    for name, table in tables.items():
        df.filter("id < 25").write.format("tablestore").mode("append").save(f"db.{table.identifier[-1]}")
        df.filter("id >= 20").write.format("tablestore").mode("append").save(f"db.{table.identifier[-1]}")
        tables[name] = table.refresh()

    batch = oracle.OracleBatch()
    jobs = {name: batch.read(t.metadata_location) for name, t in tables.items()}
    results = batch.run()
    for name, table in tables.items():
        ours = oracle_rows(table.scan().to_arrow())
        assert len(ours) == 25 + 22
        assert oracle.check(results[jobs[name]])["rows"] == ours, name
        theirs = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
        assert oracle_rows(theirs) == ours, name
