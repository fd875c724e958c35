"""``read_table`` / ``read_dataframe``: Spark's own Parquet reader over the files tablestore plans.

The native path must read exactly the rows tablestore reads (columns matched by field id across
schema evolution), read only the planned files, and fall back to the data source when Spark's
reader would read something else (delete files, files without field ids).
"""

from __future__ import annotations

import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tablestore.errors import TableStoreError
from tablestore.table import Table
from tests.spark.conftest import Lake

pytestmark = pytest.mark.spark

from pyspark.sql import DataFrame, SparkSession  # noqa: E402

from tablestore.spark.native.native_read import read_dataframe, read_table  # noqa: E402

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("a", pa.int32()),
    ("b", pa.string()),
    ("c", pa.float64()),
    ("dec", pa.decimal128(7, 2)),
    ("dt", pa.date32()),
    ("s", pa.struct([("x", pa.int32()), ("y", pa.string())])),
])


def rows(start: int, n: int) -> pa.Table:
    import datetime

    data: dict[str, list[Any]] = {
        "id": list(range(start, start + n)),
        "a": [None if k % 4 == 1 else k * 7 - 30 for k in range(start, start + n)],
        "b": [None if k % 5 == 2 else f"b{k}" for k in range(start, start + n)],
        "c": [k / 3 for k in range(start, start + n)],
        "dec": [decimal.Decimal(k * 11).scaleb(-2) for k in range(start, start + n)],
        "dt": [datetime.date(2024, 1, 1) + datetime.timedelta(days=k) for k in range(start, start + n)],
        "s": [None if k % 6 == 3 else {"x": k, "y": f"y{k}"} for k in range(start, start + n)],
    }
    return pa.table(data, schema=SCHEMA)


def spark_rows(df: DataFrame) -> list[dict[str, Any]]:
    return sorted(df.toArrow().to_pylist(), key=lambda r: r["id"])


def table_rows(table: Table, **scan: Any) -> list[dict[str, Any]]:
    return sorted(table.scan(**scan).to_arrow().to_pylist(), key=lambda r: r["id"])


def test_schema_evolution_reads_by_field_id(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("evolved", SCHEMA)
    table.append(rows(0, 20))
    first = table.current_snapshot()
    assert first is not None
    with table.update_schema() as update:
        update.rename_column("b", "name")
        update.drop_column("c")
        update.add_column("extra", "string")
        update.update_column("a", "long")
        update.rename_column("s.x", "sx")
        update.move_first("name")
    table = lake.load("evolved")
    later = pa.table({
        "name": ["n20", None], "id": [20, 21], "a": [2**40, None],
        "dec": [decimal.Decimal("1.50"), None], "dt": [None, None],
        "s": [{"sx": 5, "y": "q"}, None], "extra": ["e20", "e21"],
    })
    table.append(later.select(table.schema().column_names).cast(table.schema().as_arrow()))

    outcome = read_table(spark, "db.evolved", config=lake.config)
    assert outcome.path == "native", outcome.reason
    assert len(outcome.files) == 2
    assert outcome.df.columns == ["name", "id", "a", "dec", "dt", "s", "extra"]
    got = spark_rows(outcome.df)
    assert got == table_rows(table)
    # Columns renamed, retyped and added after the first file read right from it.
    assert got[0] == {"name": "b0", "id": 0, "a": -30, "dec": decimal.Decimal("0.00"),
                      "dt": rows(0, 1).column("dt")[0].as_py(), "s": {"sx": 0, "y": "y0"}, "extra": None}
    assert got[21]["a"] is None and got[20]["a"] == 2**40

    # Time travel reads the snapshot with its own schema.
    old = read_table(spark, "db.evolved", config=lake.config, snapshot_id=first.snapshot_id)
    assert old.path == "native" and len(old.files) == 1
    assert old.df.columns == SCHEMA.names
    assert spark_rows(old.df) == table_rows(table, snapshot_id=first.snapshot_id)


def test_partitioned_filter_reads_only_matching_files_and_rows(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("parted", pa.schema([pa.field("id", pa.int64()), ("country", pa.string()),
                                             ("v", pa.float64())]), partition_by=["country"])
    countries = ["DE", "FR", "US"]
    table.append(pa.table({"id": list(range(30)), "country": [countries[k % 3] for k in range(30)],
                           "v": [k * 1.5 for k in range(30)]}))
    table = lake.load("parted")
    text = "country = 'DE' AND id >= 9"
    outcome = read_table(spark, "db.parted", config=lake.config, filter=text)
    assert outcome.path == "native", outcome.reason
    planned = {t.file.file_path for t in table.scan(filter=text).plan_files()}
    assert set(outcome.files) == planned
    assert len(planned) == 1 and "country=DE" in next(iter(planned))
    got = spark_rows(outcome.df)
    assert got == table_rows(table, filter=text)
    assert [r["id"] for r in got] == [9, 12, 15, 18, 21, 24, 27]
    assert {r["country"] for r in got} == {"DE"}
    # No column from the `country=DE` directory name; the whole table reads right too.
    assert outcome.df.columns == ["id", "country", "v"]
    assert spark_rows(read_dataframe(spark, "db.parted", config=lake.config)) == table_rows(table)


def test_merge_on_read_deletes_fall_back(lake: Lake, spark: SparkSession) -> None:
    table = lake.create("mor", SCHEMA)
    table.update_properties({"write.delete.mode": "merge-on-read"})
    table.append(rows(0, 30))
    table = lake.load("mor")
    assert table.delete("id < 8") == 8
    table = lake.load("mor")
    assert any(t.delete_files for t in table.scan().plan_files())
    outcome = read_table(spark, "db.mor", config=lake.config)
    assert outcome.path == "data-source"
    assert "delete files" in outcome.reason
    got = spark_rows(outcome.df)
    assert got == table_rows(table)
    assert [r["id"] for r in got] == list(range(8, 30))


def test_imported_files_without_field_ids_fall_back(lake: Lake, spark: SparkSession, tmp_path: Path) -> None:
    from tablestore.table.ops.import_files import import_files

    table = lake.create("imported", pa.schema([("id", pa.int64()), ("name", pa.string())]))
    path = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "name": ["x", None, "z"]}), path)  # no field ids
    import_files(table, [str(path)])
    table = lake.load("imported")
    outcome = read_table(spark, "db.imported", config=lake.config)
    assert outcome.path == "data-source"
    assert "field ids" in outcome.reason
    assert spark_rows(outcome.df) == table_rows(table) == [
        {"id": 1, "name": "x"}, {"id": 2, "name": None}, {"id": 3, "name": "z"}]
    # The session's field-id settings leave a read whose schema has no ids matching by name.
    assert spark.conf.get("spark.sql.parquet.fieldId.read.enabled") == "true"
    assert spark_rows(spark.read.parquet(str(path))) == table_rows(table)
    assert spark_rows(spark.read.schema("name string, id bigint").parquet(str(path))) == [
        {"name": "x", "id": 1}, {"name": None, "id": 2}, {"name": "z", "id": 3}]


def test_empty_table_and_bad_filter(lake: Lake, spark: SparkSession) -> None:
    lake.create("empty", pa.schema([("id", pa.int64()), ("name", pa.string())]))
    outcome = read_table(spark, "db.empty", config=lake.config)
    assert outcome.path == "native" and outcome.files == ()
    assert outcome.df.columns == ["id", "name"] and outcome.df.count() == 0
    with pytest.raises(TableStoreError, match="nope"):
        read_table(spark, "db.empty", config=lake.config, filter="nope = 1")
