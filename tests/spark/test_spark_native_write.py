"""``write_dataframe``: Spark's own Parquet writer with field ids, then one tablestore commit.

The fast path must produce what the data source produces (rows, metrics, one commit), be read
identically by pyiceberg and Java, fall back to the data source when it does not apply, and
leave the table and its data directory unchanged when the Spark job fails.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tablestore.catalog.base import Catalog
from tablestore.config import LakehouseConfig, SparkConfig, SqlCatalogConfig
from tablestore.spec.manifests.manifest import DataFile
from tablestore.table import Table
from tests.values import oracle_rows

pytestmark = pytest.mark.spark


from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from tablestore.spark import spark_session  # noqa: E402
from tablestore.spark.commit import WRITE_ID_PROPERTY  # noqa: E402
from tablestore.spark.native.native_write import write_dataframe  # noqa: E402

# Every type Spark's Parquet writer stores exactly as Iceberg does.
NATIVE = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("b", pa.bool_()),
    ("i", pa.int32()),
    ("f", pa.float32()),
    ("d", pa.float64()),
    ("dec", pa.decimal128(12, 3)),
    ("small", pa.decimal128(5, 2)),
    ("dt", pa.date32()),
    ("ts", pa.timestamp("us")),
    ("tstz", pa.timestamp("us", tz="UTC")),
    ("s", pa.string()),
    ("bin", pa.binary()),
    ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])),
])


def native_rows(start: int, n: int) -> pa.Table:
    rows: dict[str, list[Any]] = {name: [] for name in NATIVE.names}
    for k in range(start, start + n):
        null = k % 5 == 2
        rows["id"].append(k)
        rows["b"].append(None if null else k % 2 == 0)
        rows["i"].append(None if null else k * 3 - 40)
        rows["f"].append(None if null else float("nan") if k % 7 == 3 else k / 4)
        rows["d"].append(None if null else float("nan") if k % 11 == 4 else k * 1.5 - 7)
        rows["dec"].append(None if null else decimal.Decimal(k * 1234 - 9000) / 1000)
        rows["small"].append(None if null else decimal.Decimal(k * 7) / 100)
        rows["dt"].append(None if null else datetime.date(2024, 2, 27) + datetime.timedelta(days=k))
        rows["ts"].append(None if null else datetime.datetime(2024, 3, 30, 23) + datetime.timedelta(hours=k, microseconds=k))
        rows["tstz"].append(None if null else datetime.datetime(2024, 10, 27, tzinfo=datetime.UTC)
                            + datetime.timedelta(minutes=97 * k))
        rows["s"].append(None if null else f"s-{k:03d}-äö")
        rows["bin"].append(None if null else bytes(range(k % 6)))
        rows["st"].append(None if null else {"x": k, "y": None if k % 3 else "y"})
    return pa.table(rows, schema=NATIVE)


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> LakehouseConfig:
    root = tmp_path_factory.mktemp("native-lake")
    catalog = SqlCatalogConfig(name="lake", properties={"uri": f"sqlite:///{root}/catalog.db", "warehouse": str(root / "wh")}, default_database="db")
    return LakehouseConfig(default_catalog="lake", catalogs={"lake": catalog}, spark=SparkConfig(master="local[2]", conf={"spark.sql.shuffle.partitions": "4"}))


@pytest.fixture(scope="module")
def catalog(config: LakehouseConfig) -> Iterator[Catalog]:
    cat = config.catalogs["lake"].load()
    cat.create_namespace("db")
    try:
        yield cat
    finally:
        cat.close()


@pytest.fixture(scope="module")
def spark(config: LakehouseConfig) -> Iterator[SparkSession]:
    session = spark_session(config, app_name="tablestore-native-write-tests")
    try:
        yield session
    finally:
        session.stop()


def data_files(table: Table) -> list[DataFile]:
    return sorted((t.file for t in table.scan().plan_files()), key=lambda f: f.file_path)


def leftover_files(table: Table) -> set[Path]:
    return {p for p in (Path(table.location.removeprefix("file://")) / "data").rglob("*") if p.is_file()}


def test_native_write_gives_the_rows_and_metrics_of_the_data_source(
    catalog: Catalog, config: LakehouseConfig, spark: SparkSession
) -> None:
    source = catalog.create_table("db.native_src", schema=NATIVE)
    source.append(native_rows(0, 60))
    by_source = catalog.create_table("db.by_source", schema=NATIVE)
    by_native = catalog.create_table("db.by_native", schema=NATIVE)
    df = spark.read.format("tablestore").load("db.native_src").coalesce(1)

    df.write.format("tablestore").mode("append").save("db.by_source")
    outcome = write_dataframe(df, "db.by_native", config=config)
    assert outcome.path == "native", outcome
    by_source.refresh()
    by_native.refresh()

    expected = oracle_rows(native_rows(0, 60))
    assert oracle_rows(by_native.scan().to_arrow()) == expected
    assert oracle_rows(by_source.scan().to_arrow()) == expected
    snapshot = by_native.current_snapshot()
    assert snapshot is not None and len(by_native.snapshots()) == 1
    assert snapshot.summary["operation"] == "append" and snapshot.summary["added-records"] == "60"
    assert WRITE_ID_PROPERTY in snapshot.summary

    # The same metrics as tablestore's own writer: counts, NaN counts, bounds without NaN.
    [ours], [native] = data_files(by_source), data_files(by_native)
    assert native.record_count == ours.record_count == 60
    assert native.value_counts == ours.value_counts
    assert native.null_value_counts == ours.null_value_counts
    assert native.nan_value_counts == ours.nan_value_counts
    assert native.nan_value_counts is not None and native.nan_value_counts[4] > 0
    assert native.lower_bounds == ours.lower_bounds
    assert native.upper_bounds == ours.upper_bounds
    assert native.split_offsets and native.file_path.endswith(".parquet")

    # Spark wrote the files with the table's field ids, and nothing else is in the data directory.
    parquet_schema = pq.read_schema(native.file_path)
    ids = {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in parquet_schema}
    assert ids == {f.name: f.field_id for f in by_native.schema().fields}
    assert native.file_path.startswith("file:///")  # a full URI, as the spec asks
    assert leftover_files(by_native) == {Path(native.file_path.removeprefix("file://"))}

    from pyiceberg.table import StaticTable

    assert oracle_rows(StaticTable.from_metadata(by_native.metadata_location).scan().to_arrow()) == expected


def test_native_append_then_overwrite_make_one_commit_each(
    catalog: Catalog, config: LakehouseConfig, spark: SparkSession
) -> None:
    table = catalog.create_table("db.native_writes", schema=NATIVE)
    table.append(native_rows(0, 10))
    staged = catalog.create_table("db.native_staged", schema=NATIVE)
    staged.append(native_rows(100, 50))
    df = spark.read.format("tablestore").load("db.native_staged")

    assert write_dataframe(df.repartition(3), "lake.db.native_writes", config=config).path == "native"
    table.refresh()
    assert len(table.snapshots()) == 2
    assert len(data_files(table)) == 1 + 3
    assert oracle_rows(table.scan().to_arrow()) == oracle_rows(pa.concat_tables([native_rows(0, 10), native_rows(100, 50)]))

    assert write_dataframe(df.filter("id < 120"), "db.native_writes", "overwrite", config=config).path == "native"
    table.refresh()
    current = table.current_snapshot()
    assert current is not None and current.summary["operation"] == "overwrite"
    assert current.summary["deleted-records"] == "60"
    assert oracle_rows(table.scan().to_arrow()) == oracle_rows(native_rows(100, 20))

    # An empty DataFrame adds no data file (Spark writes one without rows; it is dropped).
    files_before = data_files(table)
    assert write_dataframe(df.filter("id < 0"), "db.native_writes", config=config).path == "native"
    table.refresh()
    assert data_files(table) == files_before
    assert not [p for p in leftover_files(table) if pq.read_metadata(p).num_rows == 0]


def test_writes_the_fast_path_cannot_take_go_through_the_data_source(
    catalog: Catalog, config: LakehouseConfig, spark: SparkSession
) -> None:
    partitioned = catalog.create_table("db.native_part", schema=NATIVE, partition_by=["bucket(2, id)"])
    timed = catalog.create_table("db.native_time", schema=pa.schema([("id", pa.int64()), ("tm", pa.time64("us"))]))
    df = spark.createDataFrame(native_rows(0, 12).to_pylist(), schema=spark.read.format("tablestore")
                               .load("db.native_part").schema)

    outcome = write_dataframe(df, "db.native_part", config=config)
    assert (outcome.path, outcome.reason) == ("data-source", "the table is partitioned")
    partitioned.refresh()
    assert oracle_rows(partitioned.scan().to_arrow()) == oracle_rows(native_rows(0, 12))

    # Spark has no TIME type: microseconds in a bigint, which only the data source converts.
    outcome = write_dataframe(spark.range(3).withColumn("tm", F.col("id") * 1_000_000), "db.native_time", config=config)
    assert outcome.path == "data-source"
    timed.refresh()
    assert timed.scan().to_arrow().column("tm").to_pylist() == [
        datetime.time(0, 0, 0), datetime.time(0, 0, 1), datetime.time(0, 0, 2)
    ]
    # A column the table lacks: the data source's error, nothing written.
    strict = catalog.create_table("db.native_strict", schema=NATIVE)
    with pytest.raises(Exception, match="bogus"):
        write_dataframe(spark.range(2).withColumn("bogus", F.lit("x")), "db.native_strict", config=config)
    strict.refresh()
    assert strict.current_snapshot() is None and not leftover_files(strict)


def test_failed_native_job_leaves_the_table_and_its_data_directory_unchanged(
    catalog: Catalog, config: LakehouseConfig, spark: SparkSession
) -> None:
    table = catalog.create_table("db.native_failing", schema=NATIVE)
    table.append(native_rows(0, 5))
    before_location, before_files = table.metadata_location, leftover_files(table)
    staged = catalog.create_table("db.native_failing_src", schema=NATIVE)
    staged.append(native_rows(1000, 400))
    # Partition 0 finishes; partition 1 fails after some of its rows: the job aborts.
    df = spark.read.format("tablestore").load("db.native_failing_src").repartitionByRange(2, "id")
    boom = F.when(F.col("id") == 1390, F.raise_error(F.lit("boom"))).otherwise(F.col("s"))
    with pytest.raises(Exception, match="boom"):
        write_dataframe(df.withColumn("s", boom), "db.native_failing", config=config)

    table.refresh()
    assert table.metadata_location == before_location
    assert oracle_rows(table.scan().to_arrow()) == oracle_rows(native_rows(0, 5))
    assert leftover_files(table) == before_files
    assert not [p for p in (Path(table.location.removeprefix("file://")) / "data").iterdir() if p.is_dir()]


@pytest.mark.oracle
def test_natively_written_tables_read_identically_by_java(
    catalog: Catalog, config: LakehouseConfig, spark: SparkSession
) -> None:
    from tests import oracle

    source = catalog.create_table("db.native_oracle_src", schema=NATIVE)
    source.append(native_rows(0, 40))
    table = catalog.create_table("db.native_oracle", schema=NATIVE)
    df = spark.read.format("tablestore").load("db.native_oracle_src")
    assert write_dataframe(df.filter("id < 25"), "db.native_oracle", config=config).path == "native"
    assert write_dataframe(df.filter("id >= 20"), "db.native_oracle", config=config).path == "native"
    table.refresh()

    batch = oracle.OracleBatch()
    job = batch.read(table.metadata_location)
    results = batch.run()
    ours = oracle_rows(table.scan().to_arrow())
    assert len(ours) == 25 + 20
    assert oracle.check(results[job])["rows"] == ours


def test_row_level_sql_sees_every_row_of_files_written_from_a_computed_dataframe(
    catalog: Catalog, config: LakehouseConfig, spark: SparkSession
) -> None:
    """A DataFrame whose columns are computed (Spark collapses the field-id projection into its
    own) once lost every field id: Spark's id-matching reader then read the files as NULL, and
    UPDATE, DELETE with a subquery and MERGE missed every row (MERGE inserted duplicates)."""
    from tablestore.sql.session import SqlSession

    catalog.create_table("db.computed", schema=pa.schema([("id", pa.int64()), ("s", pa.string()), ("g", pa.int64())]))
    df = spark.range(0, 4000).selectExpr("id", "concat('r', id) AS s", "id % 1000 AS g")
    assert write_dataframe(df, "db.computed", config=config).path == "native"
    table = catalog.load_table("db.computed")
    for data_file in data_files(table):
        ids = {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in pq.read_schema(data_file.file_path)}
        assert ids == {"id": 1, "s": 2, "g": 3}

    session = SqlSession(config, spark=spark)
    assert session.execute_one("UPDATE db.computed SET g = g + 1 WHERE g < 500").affected == 2000
    session.execute("CREATE TABLE db.computed_keys (id BIGINT, s STRING, g BIGINT)")
    session.execute("INSERT INTO db.computed_keys VALUES (3, 'new', -1), (3999, 'new', -1), (5000, 'new', -1)")
    deleted = session.execute_one("DELETE FROM db.computed WHERE s IN (SELECT concat('r', id) FROM range(0, 4000, 2))")
    assert deleted.affected == 2000
    merged = session.execute_one(
        "MERGE INTO db.computed t USING (SELECT id, s, g FROM db.computed_keys) k ON t.id = k.id "
        "WHEN MATCHED THEN UPDATE SET s = k.s WHEN NOT MATCHED THEN INSERT *")
    assert merged.rows == [[3, 2, 0, 1]]
    rows = session.execute("SELECT count(*), count(DISTINCT id), sum(g), count_if(s = 'new') FROM db.computed")[-1]
    expected_g = sum(i % 1000 + (1 if i % 1000 < 500 else 0) for i in range(1, 4000, 2)) - 1
    assert rows.rows == [[2001, 2001, expected_g, 3]]
