"""Interop both ways: tables tablestore writes read identically through the Java reference
implementation and pyiceberg, and tables they write read identically through tablestore."""

from __future__ import annotations

import datetime
import decimal
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import StaticTable

import tablestore
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.types import IcebergType
from tests import oracle
from tests.values import oracle_rows

pytestmark = pytest.mark.oracle

UTC = datetime.UTC
D = decimal.Decimal


def all_types_schema() -> pa.Schema:
    return pa.schema([
        pa.field("id", pa.int64(), nullable=False),
        ("b", pa.bool_()),
        ("i", pa.int32()),
        ("l", pa.int64()),
        ("f", pa.float32()),
        ("d", pa.float64()),
        ("dec", pa.decimal128(10, 2)),
        ("dt", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("tstz", pa.timestamp("us", tz="UTC")),
        ("s", pa.string()),
        ("u", pa.binary(16)),
        ("fx", pa.binary(4)),
        ("bin", pa.binary()),
        ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])),
        ("lst", pa.list_(pa.int64())),
        ("mp", pa.map_(pa.string(), pa.float64())),
    ])


def all_types_rows(start: int, n: int) -> pa.Table:
    rows: dict[str, list[Any]] = {name: [] for name in all_types_schema().names}
    for k in range(start, start + n):
        null = k % 7 == 3  # some nulls in every optional column
        rows["id"].append(k)
        rows["b"].append(None if null else k % 2 == 0)
        rows["i"].append(None if null else k * 3 - 50)
        rows["l"].append(None if null else k * 1_000_000_007 - 2**40)
        rows["f"].append(None if null else k / 4)
        rows["d"].append(None if null else (float("nan") if k % 11 == 5 else k * 1.25 - 3))
        rows["dec"].append(None if null else D(k * 137 - 400) / 100)
        rows["dt"].append(None if null else datetime.date(2023, 12, 25) + datetime.timedelta(days=k * 3))
        rows["ts"].append(None if null else datetime.datetime(2024, 1, 1, 10) + datetime.timedelta(hours=k * 7, microseconds=k))
        rows["tstz"].append(None if null else datetime.datetime(2024, 2, 28, 22, tzinfo=UTC) + datetime.timedelta(minutes=k * 97))
        rows["s"].append(None if null else f"str-{k:03d}-äé" + "x" * (k % 20))
        rows["u"].append(None if null else uuid.UUID(int=k * 7919 + 1).bytes)
        rows["fx"].append(None if null else bytes([k % 256, 1, 2, 3]))
        rows["bin"].append(None if null else bytes(range(k % 9)))
        rows["st"].append(None if null else {"x": k, "y": f"y{k}"})
        rows["lst"].append(None if null else list(range(k % 4)))
        rows["mp"].append(None if null else [(f"k{j}", j * 0.5) for j in range(k % 3)])
    return pa.table(rows, schema=all_types_schema())


TRANSFORM_CASES = {
    "identity": "s",
    "bucket": "bucket(16, l)",
    "truncate": "truncate(4, s)",
    "year": "year(dt)",
    "month": "month(ts)",
    "day": "day(tstz)",
    "hour": "hour(ts)",
    "void": "void(i)",
    "multi": ["day(ts)", "bucket(4, id)", "truncate(10, dec)"],
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Tables written by tablestore: unpartitioned and one per transform; appends and an overwrite."""
    root = tmp_path_factory.mktemp("interop")
    catalog = tablestore.load_catalog("t", type="sql", uri=f"sqlite:///{root}/catalog.db", warehouse=str(root / "wh"))
    catalog.create_namespace("db")
    out: dict[str, Any] = {"root": root, "catalog": catalog, "tables": {}}
    cases: dict[str, Any] = {"plain": None, **TRANSFORM_CASES}
    for name, partition in cases.items():
        by = None if partition is None else ([partition] if isinstance(partition, str) else partition)
        table = catalog.create_table(f"db.{name}", schema=all_types_schema(), partition_by=by)
        table.append(all_types_rows(0, 40))
        table.append(all_types_rows(40, 25))
        table.overwrite(all_types_rows(1000, 6), filter="id >= 30 AND id < 50")
        out["tables"][name] = table
    return out


# Spark 3.5 has no TIME type, so the oracle reads every column but those.
ORACLE_COLUMNS = [n for n in all_types_schema().names]


def _ours(table: tablestore.Table) -> list[list[Any]]:
    return oracle_rows(table.scan().to_arrow())


def test_tablestore_tables_read_identically_by_oracle_and_pyiceberg(written: dict[str, Any]) -> None:
    batch = oracle.OracleBatch()
    jobs = {name: batch.read(t.metadata_location) for name, t in written["tables"].items()}
    results = batch.run()
    for name, table in written["tables"].items():
        ours = _ours(table)
        assert len(ours) == 40 + 25 - 20 + 6
        theirs = oracle.check(results[jobs[name]])
        assert [c["name"] for c in theirs["columns"]] == ORACLE_COLUMNS
        assert {c["name"]: c["type"] for c in theirs["columns"]}["u"] == "binary"  # Spark has no UUID type
        assert theirs["rows"] == ours, f"oracle differs on table {name}"
        py = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
        assert oracle_rows(py) == ours, f"pyiceberg differs on table {name}"


def test_pyiceberg_sql_catalog_opens_our_catalog(written: dict[str, Any]) -> None:
    root = written["root"]
    theirs = SqlCatalog("t", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/wh")
    assert sorted(theirs.list_tables("db")) == sorted(("db", n) for n in written["tables"])
    table = theirs.load_table("db.bucket")
    assert table.metadata_location == written["tables"]["bucket"].metadata_location
    rows = table.scan(row_filter="id < 5").to_arrow()
    assert sorted(rows.column("id").to_pylist()) == [0, 1, 2, 3, 4]


def _bounds(file_row: dict[str, Any], key: str) -> dict[int, Any]:
    return {int(k): v for k, v in (file_row.get(key) or [])}


def test_oracle_metadata_tables_agree_with_ours(written: dict[str, Any]) -> None:
    batch = oracle.OracleBatch()
    jobs = {}
    for name, t in written["tables"].items():
        jobs[name] = (batch.meta(t.metadata_location, "files"), batch.meta(t.metadata_location, "partitions"))
    results = batch.run()
    for name, table in written["tables"].items():
        files_job, partitions_job = jobs[name]
        files = oracle.check(results[files_job])
        names = [c["name"] for c in files["columns"]]
        their_files = {r[names.index("file_path")]: dict(zip(names, r, strict=True)) for r in files["rows"]}
        our_tasks = table.scan().plan_files()
        assert set(their_files) == {t.file.file_path for t in our_tasks}
        schema = table.schema()
        for task in our_tasks:
            theirs = their_files[task.file.file_path]
            assert theirs["record_count"] == task.file.record_count
            assert theirs["value_counts"] and {int(k): v for k, v in theirs["value_counts"]} == task.file.value_counts
            assert {int(k): v for k, v in theirs["null_value_counts"]} == task.file.null_value_counts
            for key, ours in (("lower_bounds", task.file.lower_bounds), ("upper_bounds", task.file.upper_bounds)):
                their_bounds = {k: bytes.fromhex(v) for k, v in _bounds(theirs, key).items()}
                assert their_bounds == ours, f"{name}: {key} of {task.file.file_path}"
            spec = table.metadata.spec_by_id(task.file.spec_id)
            ptype = spec.partition_type(schema)
            their_partition = theirs.get("partition") or {}
            for pf, ours_value, field in zip(spec.fields, task.file.partition, ptype.fields, strict=True):
                assert _partition_json(field.field_type, ours_value) == their_partition.get(pf.name), (name, pf.name)
        partitions = oracle.check(results[partitions_job])
        pnames = [c["name"] for c in partitions["columns"]]
        total = sum(r[pnames.index("record_count")] for r in partitions["rows"])
        assert total == sum(t.file.record_count for t in our_tasks)
        assert len(partitions["rows"]) == len({tuple(t.file.partition) for t in our_tasks})


def _partition_json(t: IcebergType, value: Any) -> Any:
    """A partition value as the oracle prints it (dates ISO, decimals as strings)."""
    if value is None:
        return None
    external = conversions.to_python(t, value)
    if isinstance(external, datetime.date):
        return external.isoformat()
    if isinstance(external, decimal.Decimal):
        return str(external)
    if isinstance(external, bytes):
        return external.hex()
    return external


def test_oracle_filtered_reads_match_our_filtered_scans(written: dict[str, Any]) -> None:
    filters = ["id > 20 AND l IS NOT NULL", "s LIKE 'str-01%'", "dt >= DATE '2024-01-20'", "dec < 0.5 OR b = true"]
    batch = oracle.OracleBatch()
    table = written["tables"]["multi"]
    jobs = [batch.read(table.metadata_location, where=f) for f in filters]
    results = batch.run()
    for f, job in zip(filters, jobs, strict=True):
        ours = oracle_rows(table.scan(filter=f).to_arrow())
        assert ours, f
        assert oracle.check(results[job])["rows"] == ours, f


def test_we_read_tables_the_oracle_writes(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    batch = oracle.OracleBatch(warehouse=str(wh))
    batch.sql(
        "CREATE TABLE ref.db.events (id BIGINT, ts TIMESTAMP, name STRING, amount DECIMAL(10,2), tags ARRAY<STRING>, "
        "attrs MAP<STRING, INT>, pt STRUCT<a: INT, b: STRING>) USING iceberg PARTITIONED BY (days(ts), bucket(4, id)) "
        "TBLPROPERTIES ('format-version'='2')",
        "INSERT INTO ref.db.events VALUES (1, TIMESTAMP '2024-01-01 10:00:00', 'a', 1.50, array('x','y'), map('k', 1), named_struct('a', 1, 'b', 'q')),"
        " (2, TIMESTAMP '2024-01-02 11:00:00', 'b', NULL, array(), map(), NULL), (3, NULL, NULL, -2.25, NULL, NULL, named_struct('a', NULL, 'b', 'z'))",
        "INSERT INTO ref.db.events VALUES (4, TIMESTAMP '2024-01-02 12:30:00', 'd', 4.00, array('z'), map('a', 2, 'b', 3), named_struct('a', 4, 'b', 'w'))",
        "INSERT OVERWRITE ref.db.events SELECT * FROM ref.db.events WHERE id <> 2",
        "SELECT * FROM ref.db.events",
    )
    theirs = oracle.check(batch.run()[0])
    metadata = sorted((wh / "db" / "events" / "metadata").glob("v*.metadata.json"))[-1]
    catalog = tablestore.load_catalog("t", type="sql", uri=f"sqlite:///{tmp_path}/c.db", warehouse=str(tmp_path / "ours"))
    catalog.create_namespace("db")
    table = catalog.register_table("db.events", str(metadata))
    ours = oracle_rows(table.scan().to_arrow())
    assert [r[0] for r in ours] == [1, 3, 4]
    assert ours == theirs["rows"]
    assert oracle_rows(table.scan(filter="ts >= '2024-01-02'").to_arrow()) == [r for r in theirs["rows"] if r[0] == 4]


def test_we_read_tables_pyiceberg_writes(tmp_path: Path) -> None:
    theirs = SqlCatalog("py", uri=f"sqlite:///{tmp_path}/py.db", warehouse=f"file://{tmp_path}/wh")
    theirs.create_namespace("db")
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema as PySchema
    from pyiceberg.transforms import DayTransform, IdentityTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestampType

    schema = PySchema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "ts", TimestampType(), required=False),
        NestedField(3, "country", StringType(), required=False),
        NestedField(4, "amount", DoubleType(), required=False),
    )
    spec = PartitionSpec(PartitionField(2, 1000, DayTransform(), "ts_day"), PartitionField(3, 1001, IdentityTransform(), "country"))
    table = theirs.create_table("db.t", schema=schema, partition_spec=spec)
    data = pa.table({
        "id": pa.array(range(30), pa.int64()),
        "ts": pa.array([datetime.datetime(2024, 3, 1) + datetime.timedelta(hours=5 * i) for i in range(30)], pa.timestamp("us")),
        "country": [["de", "fr", "nl"][i % 3] for i in range(30)],
        "amount": [i * 0.5 for i in range(30)],
    })
    table.append(data)
    table.delete("country = 'nl' AND id > 20")
    with table.update_schema() as update:
        update.rename_column("amount", "value")
    table.append(pa.table({"id": pa.array([100], pa.int64()), "ts": pa.array([datetime.datetime(2024, 3, 9)], pa.timestamp("us")),
                           "country": ["de"], "value": [9.5]}))
    expected = oracle_rows(table.scan().to_arrow())
    # The same SQLite file through our catalog.
    ours = tablestore.load_catalog("py", type="sql", uri=f"sqlite:///{tmp_path}/py.db", warehouse=str(tmp_path / "wh"))
    our_table = ours.load_table("db.t")
    assert oracle_rows(our_table.scan().to_arrow()) == expected
    assert our_table.schema().column_names == ["id", "ts", "country", "value"]
    assert len(expected) == 31 - 3
    filtered = our_table.scan(filter="country = 'de' AND value > 5", columns=["id", "value"]).to_arrow()
    assert sorted(filtered.column("id").to_pylist()) == [12, 15, 18, 21, 24, 27, 100]


def test_time_and_other_scalar_types_read_identically(tmp_path: Path) -> None:
    """TIME has no Spark type (the Java oracle refuses the whole table), so pyiceberg is the reader here."""
    catalog = tablestore.load_catalog("t", type="sql", uri=f"sqlite:///{tmp_path}/c.db", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    schema = pa.schema([("id", pa.int32()), ("t", pa.time64("us")), ("u", pa.binary(16))])
    table = catalog.create_table("db.times", schema=schema, partition_by=["identity(t)"])
    data = pa.table({
        "id": pa.array([1, 2, 3], pa.int32()),
        "t": pa.array([datetime.time(0, 0), datetime.time(13, 45, 7, 123456), None], pa.time64("us")),
        "u": pa.array([uuid.UUID(int=5).bytes, None, uuid.UUID(int=2**127).bytes], pa.binary(16)),
    })
    table.append(data)
    ours = table.scan().to_arrow()
    assert ours.column("t").to_pylist() == data.column("t").to_pylist()
    theirs = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
    assert theirs.column("t").to_pylist() == data.column("t").to_pylist()
    assert oracle_rows(theirs.select(["id", "u"])) == oracle_rows(ours.select(["id", "u"]))
    assert ours.column("id").to_pylist() == [1, 2, 3]
