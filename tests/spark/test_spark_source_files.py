"""A Spark DataFrame that is a plain scan of Parquet files is read by the merge's tasks from its
files; every other DataFrame goes through the JVM, and both give the same merge."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tablestore.spark import SparkEngine
from tablestore.spark.native.native_read import read_dataframe, read_table
from tablestore.spark.native.parquet_files import SourceSlice, _runs, parquet_source_slices
from tests.spark.conftest import Lake

WANTED = [("user_id", pa.int64()), ("score", pa.float64())]


def write_source(directory: Path, files: int = 3, per_file: int = 40, row_group: int = 10) -> list[Path]:
    """Users 0..files*per_file-1 with score = id / 10, in files of ``per_file`` consecutive ids;
    the second file stores its names as large strings."""
    directory.mkdir(parents=True)
    paths = []
    for i in range(files):
        ids = list(range(i * per_file, (i + 1) * per_file))
        names = pa.array([f"n{u}" for u in ids], pa.large_string() if i == 1 else pa.string())
        path = directory / f"part-{i}.parquet"
        pq.write_table(pa.table({"user_id": pa.array(ids, pa.int64()), "score": [u / 10 for u in ids],
                                 "name": names}), path, row_group_size=row_group)
        paths.append(path)
    return paths


def covered(runs: list[list[SourceSlice]]) -> list[tuple[str, int]]:
    return [(Path(s.path).name, g) for run in runs for s in run for g in s.row_groups]


def test_a_plain_parquet_scan_is_split_into_runs_of_its_row_groups(tmp_path: Path, spark: SparkSession) -> None:
    write_source(tmp_path / "src")
    every_group = [(f"part-{f}.parquet", g) for f in range(3) for g in range(4)]
    plain = spark.read.parquet(str(tmp_path / "src"))
    cached = spark.read.parquet(str(tmp_path / "src")).cache()
    cached.count()
    for df in (plain, cached, plain.select("user_id", "score"), plain.alias("s"),
               spark.read.parquet(str(tmp_path / "src" / "part-*.parquet"))):
        runs = parquet_source_slices(df, WANTED, 4)
        assert runs is not None
        assert sorted(covered(runs)) == every_group
        assert [sum(s.rows for s in run) for run in runs] == [30, 30, 30, 30]
    # Strings stored with 64-bit offsets hold the values Spark hands over as strings.
    assert parquet_source_slices(plain, [("name", pa.string())], 2) is not None
    cached.unpersist()


def test_anything_but_a_plain_scan_goes_through_the_jvm(tmp_path: Path, spark: SparkSession, lake: Lake) -> None:
    write_source(tmp_path / "src")
    plain = spark.read.parquet(str(tmp_path / "src"))
    assert parquet_source_slices(plain.where("user_id > 3"), WANTED, 2) is None
    assert parquet_source_slices(plain.withColumn("score", F.col("score") * 2), WANTED, 2) is None
    assert parquet_source_slices(plain.union(plain), WANTED, 2) is None
    assert parquet_source_slices(spark.createDataFrame([(1, 0.5)], "user_id bigint, score double"), WANTED, 2) is None
    # A type the files do not hold, a column under another case, a column one file lacks.
    assert parquet_source_slices(plain, [("user_id", pa.int32())], 2) is None
    upper = spark.read.schema("USER_ID bigint, score double").parquet(str(tmp_path / "src"))
    assert parquet_source_slices(upper, [("USER_ID", pa.int64())], 2) is None
    pq.write_table(pa.table({"user_id": pa.array([999], pa.int64())}), tmp_path / "src" / "part-9.parquet")
    merged = spark.read.option("mergeSchema", "true").parquet(str(tmp_path / "src"))
    assert parquet_source_slices(merged, WANTED, 2) is None
    # Partition values live in directory names, not in the files.
    (tmp_path / "parted" / "day=1").mkdir(parents=True)
    pq.write_table(pa.table({"user_id": pa.array([1], pa.int64()), "score": [0.1]}),
                   tmp_path / "parted" / "day=1" / "a.parquet")
    assert parquet_source_slices(spark.read.parquet(str(tmp_path / "parted")), WANTED, 2) is None
    # Another format; a tablestore table read by field id (pyarrow would match by name).
    spark.createDataFrame([(1, 0.5)], "user_id bigint, score double").write.json(str(tmp_path / "json"))
    assert parquet_source_slices(spark.read.json(str(tmp_path / "json")), WANTED, 2) is None
    table = lake.create("scores", pa.schema(WANTED))
    table.append(pa.table({"user_id": pa.array([1], pa.int64()), "score": [0.5]}))
    native = read_dataframe(spark, "db.scores", config=lake.config)
    assert native.collect()[0]["score"] == 0.5
    assert read_table(spark, "db.scores", config=lake.config).path == "native"  # by field id
    assert parquet_source_slices(native, WANTED, 2) is None


def test_runs_are_contiguous_and_balanced_by_rows() -> None:
    groups = [("a", 0, 50), ("a", 1, 50), ("b", 0, 10), ("b", 1, 90), ("c", 0, 100)]
    runs = _runs(groups, 3)
    assert [[(s.path, s.row_groups, s.rows) for s in run] for run in runs] == [
        [("a", (0, 1), 100)],
        [("b", (0, 1), 100)],
        [("c", (0,), 100)],
    ]
    assert _runs(groups, 1) == [[SourceSlice("a", (0, 1), 100), SourceSlice("b", (0, 1), 100),
                                 SourceSlice("c", (0,), 100)]]
    assert _runs([], 4) == []


def test_a_merge_from_parquet_files_equals_the_merge_through_the_jvm(
    tmp_path: Path, spark: SparkSession, lake: Lake,
) -> None:
    write_source(tmp_path / "src", files=3, per_file=40)
    schema = pa.schema([("user_id", pa.int64()), ("name", pa.string())])
    engine = SparkEngine(spark)
    results = []
    for name, source in (("from_files", spark.read.parquet(str(tmp_path / "src")).select("user_id", "score")),
                         ("through_jvm", spark.read.parquet(str(tmp_path / "src")).where("score >= 0")
                          .select("user_id", "score"))):
        table = lake.create(name, schema)
        for lo in (0, 50, 100):  # three fragments of 50 ids; the source covers 0..119
            ids = list(range(lo, lo + 50))
            table.append(pa.table({"user_id": pa.array(ids, pa.int64()), "name": [f"u{i}" for i in ids]}))
        table.with_engine(engine).merge_columns(source, on="user_id")
        rows = sorted(table.refresh().scan().to_arrow().to_pylist(), key=lambda r: r["user_id"])
        results.append(rows)
        assert not list((Path(table.location.removeprefix("file://")) / "data").glob(".column-merge-*"))
    assert parquet_source_slices(spark.read.parquet(str(tmp_path / "src")).select("user_id", "score"),
                                 WANTED, 4) is not None
    assert results[0] == results[1]
    assert [(r["user_id"], r["score"]) for r in results[0]] == \
        [(i, i / 10 if i < 120 else None) for i in range(150)]


def test_duplicate_keys_in_the_files_are_found_or_resolved_in_file_order(
    tmp_path: Path, spark: SparkSession, lake: Lake,
) -> None:
    (tmp_path / "dups").mkdir()
    pq.write_table(pa.table({"user_id": pa.array([1, 2, 2, 3], pa.int64()), "tag": ["a", "b", "c", "d"]}),
                   tmp_path / "dups" / "one.parquet")
    source = spark.read.parquet(str(tmp_path / "dups"))
    table = lake.create("dups", pa.schema([("user_id", pa.int64())]))
    table.append(pa.table({"user_id": pa.array([1, 2, 3], pa.int64())}))
    table = table.with_engine(SparkEngine(spark))
    with pytest.raises(Exception, match="2 rows with the key user_id=2"):
        table.merge_columns(source, on="user_id")
    assert "tag" not in table.refresh().schema().column_names
    table.merge_columns(source, on="user_id", duplicates="last")
    assert sorted(table.refresh().scan().to_arrow().to_pylist(), key=lambda r: r["user_id"]) == [
        {"user_id": 1, "tag": "a"}, {"user_id": 2, "tag": "c"}, {"user_id": 3, "tag": "d"}]


def test_files_in_the_legacy_calendar_go_through_the_jvm(tmp_path: Path, spark: SparkSession) -> None:
    (tmp_path / "legacy").mkdir()
    table = pa.table({"user_id": pa.array([1], pa.int64()), "score": [0.5]})
    pq.write_table(table.replace_schema_metadata({"org.apache.spark.legacyDateTime": ""}),
                   tmp_path / "legacy" / "a.parquet")
    assert parquet_source_slices(spark.read.parquet(str(tmp_path / "legacy")), WANTED, 2) is None
    pq.write_table(table, tmp_path / "legacy" / "a.parquet")
    assert parquet_source_slices(spark.read.parquet(str(tmp_path / "legacy")), WANTED, 2) is not None
