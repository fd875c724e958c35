"""The write and read fast paths give the same rows as the plain ones.

Writes group rows by one integer code per row and gather each partition in its task; reads
read the filter's columns first, gather the others at the matching rows, and read
dictionary-encoded strings as dictionaries. These tests pin what must not change: partitions,
their order and the order of rows in them; the rows and types a filtered scan returns; and the
Parquet layout choices (decimals as integers, dictionaries only where they fit).
"""

from __future__ import annotations

import datetime
import decimal
import itertools
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tablestore
from tablestore.spec.partitioning.partition_spec import build_partition_spec
from tablestore.table.write.conform import conform_to_schema
from tablestore.table.write.data_files import dense_integer_codes, group_codes, split_by_partition

SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("ts", pa.timestamp("us")),
    ("country", pa.string()),
    ("uniq", pa.string()),
    ("cat", pa.int32()),
    ("dec", pa.decimal128(10, 2)),
    ("b", pa.bool_()),
    ("s", pa.struct([("x", pa.int32()), ("y", pa.string())])),
    ("l", pa.list_(pa.string())),
])


def _rows(n: int, seed: int) -> pa.Table:
    rng = random.Random(seed)

    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.15 else value

    return pa.Table.from_pylist([
        {
            "id": i,
            "ts": datetime.datetime(2024, 1, 1) + datetime.timedelta(hours=rng.randrange(-100, 200)),
            "country": maybe(rng.choice(["de", "fr", "nl", "dk", "deutsch"])),
            "uniq": maybe(f"u{rng.random()}-{i}"),
            "cat": maybe(rng.randrange(5)),
            "dec": maybe(decimal.Decimal(rng.randrange(-500, 500)) / 100),
            "b": maybe(rng.random() < 0.5),
            "s": maybe({"x": maybe(rng.randrange(3)), "y": maybe(rng.choice(["a", "b"]))}),
            "l": maybe([rng.choice(["p", "q"]) for _ in range(rng.randrange(3))]),
        }
        for i in range(n)
    ], schema=SCHEMA)


@pytest.fixture
def local_catalog(tmp_path: Path) -> tablestore.Catalog:
    catalog = tablestore.load_catalog("fast", type="sql", uri=f"sqlite:///{tmp_path}/catalog.db",
                                      warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    return catalog


@pytest.mark.parametrize("exprs", [
    ["country"],
    ["day(ts)", "country"],
    ["bucket(4, id)", "truncate(2, country)", "b"],
    ["cat", "dec"],
    ["s.x", "s.y"],
    ["void(id)", "cat"],
])
def test_split_keeps_partition_order_and_row_order(exprs: list[str]) -> None:
    with tempfile.TemporaryDirectory() as wh:
        catalog = tablestore.load_catalog("x", type="sql", uri=f"sqlite:///{wh}/c.db", warehouse=wh)
        catalog.create_namespace("db")
        schema = catalog.create_table("db.t", schema=SCHEMA).schema()
    spec = build_partition_spec(schema, exprs)
    data = conform_to_schema(_rows(400, 1), schema)
    parts = split_by_partition(spec, schema, data)
    # Partitions come in ascending order of their tuples, nulls last, each exactly once.
    tuples = [p.partition for p in parts]
    assert len(set(tuples)) == len(tuples)
    assert tuples == sorted(tuples, key=lambda t: [(v is None, v) for v in t])
    # Every row lands in one partition, in its input order.
    ids = [i for p in parts for i in p.rows.column("id").to_pylist()]
    assert sorted(ids) == list(range(400))
    for p in parts:
        part_ids = p.rows.column("id").to_pylist()
        assert part_ids == sorted(part_ids)
    # Input already clustered by partition gives the same partitions, without gathering.
    clustered = pa.Table.from_batches(pa.concat_tables([p.rows for p in parts]).to_batches(max_chunksize=37))
    again = split_by_partition(spec, schema, clustered)
    assert [p.partition for p in again] == tuples
    assert all(p.indices is None for p in again)
    assert [p.rows.column("id").to_pylist() for p in again] == [p.rows.column("id").to_pylist() for p in parts]


@pytest.mark.parametrize("key", [
    pa.array([3, -2, None, 7, -2, 60_000], pa.int32()),  # negative values, a null, a range near 65,536
    pa.array([2**31 - 1, None, 2**31 - 2], pa.int32()),  # nulls one past the type's largest value
    pa.array([19_000, None, 18_999, 19_000], pa.date32()),
    pa.array([5, 4, 250], pa.uint8()),
    pa.array([2**62, 2**62 - 3, None], pa.int64()),
])
def test_narrow_integer_keys_get_codes_in_value_order_nulls_last(key: pa.Array) -> None:
    dense = dense_integer_codes(key)
    assert dense is not None
    codes, size = dense
    assert codes.max() < size
    values = key.to_pylist()
    order = sorted(range(len(values)), key=lambda i: (values[i] is None, values[i]))
    # Equal values share a code; codes ascend as the values do, nulls after every value.
    assert [int(codes[i]) for i in order] == sorted(int(c) for c in codes)
    for i, j in itertools.pairwise(order):
        assert (codes[i] == codes[j]) == (values[i] == values[j])
    grouped = group_codes([key])
    assert grouped is not None and list(grouped[0]) == list(codes)


def test_wide_or_other_keys_keep_the_dictionary_codes() -> None:
    assert dense_integer_codes(pa.array([0, 2**40], pa.int64())) is None  # wider than the rows and 65,536
    assert dense_integer_codes(pa.array(["a", "b"])) is None
    assert dense_integer_codes(pa.array([2**64 - 1, 0], pa.uint64())) is None
    grouped = group_codes([pa.array([2**40, None, 0, 2**40], pa.int64())])
    assert grouped is not None
    assert list(grouped[0]) == [1, 2, 0, 1]


FILTERS: list[tuple[str | None, Callable[[dict[str, Any]], bool]]] = [
    (None, lambda r: True),
    ("id < 30", lambda r: r["id"] < 30),
    ("id > 100000", lambda r: False),
    ("country = 'de'", lambda r: r["country"] == "de"),
    ("country IN ('de', 'nl')", lambda r: r["country"] in ("de", "nl")),
    ("country IS NULL", lambda r: r["country"] is None),
    ("country LIKE 'de%'", lambda r: r["country"] is not None and r["country"].startswith("de")),
    ("uniq < 'u0.5'", lambda r: r["uniq"] is not None and r["uniq"] < "u0.5"),
    ("cat = 3 OR country = 'fr'", lambda r: r["cat"] == 3 or r["country"] == "fr"),
    ("s.x = 1", lambda r: r["s"] is not None and r["s"]["x"] == 1),
    ("dec > 1.00", lambda r: r["dec"] is not None and r["dec"] > decimal.Decimal("1.00")),
    ("NOT (country = 'de')", lambda r: r["country"] is not None and r["country"] != "de"),
]


@pytest.mark.parametrize("properties", [{}, {"write.parquet.row-group-size-bytes": "4000"}])
def test_filtered_scans_return_the_matching_rows(local_catalog: tablestore.Catalog,
                                                 properties: dict[str, str]) -> None:
    table = local_catalog.create_table("db.t", schema=SCHEMA, partition_by=["cat"], properties=properties)
    source = pa.concat_tables([_rows(900, 2), _rows(60, 3)])
    table.append(source.slice(0, 900))
    table.append(source.slice(900))
    expected_rows = source.to_pylist()
    arrow_schema = table.scan().arrow_schema
    for sql, predicate in FILTERS:
        for columns in (None, ["id", "l"], ["uniq", "country"]):
            result = table.scan(filter=sql, columns=columns).to_arrow()
            names = columns or SCHEMA.names
            assert result.column_names == names
            assert result.schema.equals(pa.schema([arrow_schema.field(n) for n in names])), sql
            got = sorted(map(repr, result.to_pylist()))
            want = sorted(repr({n: r[n] for n in names}) for r in expected_rows if predicate(r))
            assert got == want, (sql, columns)


def test_parquet_layout(local_catalog: tablestore.Catalog) -> None:
    n = 200_000
    table = local_catalog.create_table("db.t", schema=pa.schema([
        ("id", pa.int64()), ("country", pa.string()), ("amount", pa.decimal128(10, 2)),
    ]))
    table.append(pa.table({
        "id": pa.array(range(n), pa.int64()),
        "country": pa.array(["de", "fr", "nl"] * (n // 3) + ["de"] * (n % 3)),
        "amount": pa.array([decimal.Decimal(i % 1000) / 100 for i in range(n)], pa.decimal128(10, 2)),
    }))
    (task,) = table.scan().plan_files()
    metadata = pq.ParquetFile(task.file.file_path.removeprefix("file://")).metadata
    columns = {metadata.row_group(0).column(i).path_in_schema: metadata.row_group(0).column(i)
               for i in range(metadata.num_columns)}
    # decimal(10, 2) is an INT64, as the spec's Parquet mapping says.
    assert columns["amount"].physical_type == "INT64"
    # All-distinct ids would overflow a dictionary page: written plain from the start.
    assert not columns["id"].has_dictionary_page
    assert columns["country"].has_dictionary_page
    assert columns["amount"].has_dictionary_page  # 1,000 distinct values fit
    assert table.scan(filter="country = 'nl' AND id < 10").to_arrow().column("id").to_pylist() == [2, 5, 8]
