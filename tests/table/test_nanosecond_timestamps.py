"""Arrow nanosecond timestamps (pandas' default) in format version 2 and 3 tables.

``timestamp_ns`` and ``timestamptz_ns`` are format version 3 types: in a v2 table every other
reader fails (DuckDB "Unrecognized primitive type: timestamptz_ns", iceberg-rust "not supported
until v3", pyiceberg, Java). So a v2 table stores them as microsecond ``timestamp`` /
``timestamptz``: writes convert the values when none loses precision, and otherwise refuse,
naming the column and the two ways out (truncate first, or set pyiceberg's
``downcast-ns-timestamp-to-us-on-write``, which truncates). No path writes a v3 type into v2
metadata; the REST service's side is in tests/rest/test_protocol.py. In a v3 table they are
``timestamp_ns``/``timestamptz_ns``, written and read to the nanosecond, and a ``date`` column
promotes to ``timestamp_ns`` in metadata (old files keep their dates and read as midnight).
"""

from __future__ import annotations

import datetime
import importlib
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

import tablestore
from tablestore.errors import SchemaError
from tablestore.spec.metadata.update_models import AddSchemaUpdate, SetCurrentSchemaUpdate
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import LongType, NestedField, TimestamptzNanoType
from tablestore.table import Table

NANOS = pa.schema([("id", pa.int64()), ("at", pa.timestamp("ns", tz="UTC")), ("local", pa.timestamp("ns"))])


def _duckdb(tmp_path: Path) -> Any:
    """DuckDB with its Iceberg extension from PyPI, installed into a private directory."""
    import duckdb

    con = duckdb.connect(config={"extension_directory": str(tmp_path / "duckdb-ext"),
                                 "autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for name in ("avro", "iceberg"):
        package = importlib.import_module(f"duckdb_extension_{name}")
        path = next(Path(package.__path__[0]).glob("extensions/*/*.duckdb_extension"))
        con.execute(f"INSTALL '{path}'")
        con.execute(f"LOAD {name}")
    return con


def _table(tmp_path: Path, properties: dict[str, str] | None = None) -> Table:
    catalog = tablestore.load_catalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    return catalog.create_table("db.t", NANOS, properties=properties)


def test_a_v2_table_from_an_arrow_nanosecond_schema_stores_microseconds_every_reader_reads(tmp_path: Path) -> None:
    table = _table(tmp_path)
    assert [str(f.field_type) for f in table.schema().fields] == ["long", "timestamptz", "timestamp"]
    raw = json.loads(table.io.new_input(table.metadata_location).read())
    assert [f["type"] for f in raw["schemas"][0]["fields"]] == ["long", "timestamptz", "timestamp"]

    # pandas gives nanoseconds; whole microseconds convert without loss.
    frame = pd.DataFrame({
        "id": [1, 2],
        "at": pd.to_datetime(["2024-01-02 03:04:05.123456", "2024-06-01 00:00:00.000000"], utc=True),
        "local": pd.to_datetime(["2024-01-02 03:04:05.123456", "2024-06-01 00:00:00.000000"]),
    })
    assert str(frame["at"].dtype) == "datetime64[ns, UTC]"
    table.append(frame)
    table = table.refresh()
    got = table.scan().to_arrow().sort_by("id")
    assert got.schema.field("at").type == pa.timestamp("us", tz="UTC")
    first = datetime.datetime(2024, 1, 2, 3, 4, 5, 123456)
    assert got.column("local").to_pylist() == [first, datetime.datetime(2024, 6, 1)]
    assert got.column("at").to_pylist()[0] == first.replace(tzinfo=datetime.UTC)

    # DuckDB refused the table when it said timestamptz_ns; now it reads the same values.
    con = _duckdb(tmp_path)
    rows = con.execute(
        f'SELECT id, epoch_us("at"), epoch_us("local") FROM iceberg_scan(\'{table.metadata_location}\') ORDER BY id'
    ).fetchall()
    epoch = datetime.datetime(1970, 1, 1)
    assert rows == [(1, (first - epoch) // datetime.timedelta(microseconds=1),
                     (first - epoch) // datetime.timedelta(microseconds=1)),
                    (2, 1717200000000000, 1717200000000000)]


def test_sub_microsecond_values_are_refused_unless_the_downcast_property_is_set(tmp_path: Path) -> None:
    table = _table(tmp_path)
    precise = pa.table({"id": [1], "at": pa.array([1_700_000_000_123_456_789], pa.timestamp("ns", tz="UTC")),
                        "local": pa.array([5], pa.timestamp("ns"))}, schema=NANOS)
    with pytest.raises(SchemaError) as refused:
        table.append(precise)
    message = str(refused.value)
    assert "column 'at' holds nanosecond timestamps" in message
    assert "truncate the values to microseconds first" in message
    assert "downcast-ns-timestamp-to-us-on-write=true" in message
    assert table.refresh().current_snapshot() is None  # nothing committed

    table.update_properties({"downcast-ns-timestamp-to-us-on-write": "true"})
    table.refresh().append(precise)
    got = table.refresh().scan().to_arrow()
    assert got.column("at").cast(pa.int64()).to_pylist() == [1_700_000_000_123_456]
    assert got.column("local").cast(pa.int64()).to_pylist() == [0]


def test_no_path_adds_a_v3_type_to_a_v2_table(tmp_path: Path) -> None:
    table = _table(tmp_path)
    catalog = table.catalog
    nanos = Schema((NestedField(1, "id", LongType()), NestedField(2, "at", TimestamptzNanoType())))
    with pytest.raises(SchemaError, match=r"column 'at' has type timestamptz_ns, which needs table format "
                                          r"version 3.*use timestamptz \(microseconds\)"):
        catalog.create_table("db.u", nanos)
    assert not catalog.table_exists("db.u")
    with pytest.raises(SchemaError, match="column 'at' has type timestamptz_ns"):
        catalog.commit_table("db.t", [], [AddSchemaUpdate(schema_=nanos, last_column_id=3), SetCurrentSchemaUpdate(schema_id=-1)])
    # Schema evolution: adding a nanosecond column to a v2 table is refused, nothing committed.
    before = table.refresh().metadata_location
    with pytest.raises(SchemaError, match="column 'ns' has type timestamp_ns, which needs table format version 3"):
        table.refresh().update_schema().add_column("ns", "timestamp_ns").commit()
    assert table.refresh().metadata_location == before
    # Columns added from Arrow data become microsecond columns too.
    table.refresh().append(pa.table({"id": [1]}))
    table.refresh().merge_columns(pa.table({"id": [1], "seen": pa.array([0], pa.timestamp("ns"))}), on="id")
    assert str(table.refresh().schema().find_field("seen").field_type) == "timestamp"


def test_a_v3_table_keeps_arrow_nanosecond_timestamps_as_nanosecond_types(tmp_path: Path) -> None:
    """The v2 rule is keyed on the format version: from v3 on the nanosecond types are the spec's."""
    table = _table(tmp_path, {"format-version": "3"})
    assert table.metadata.format_version == 3
    assert [str(f.field_type) for f in table.schema().fields] == ["long", "timestamptz_ns", "timestamp_ns"]

    precise = pa.table({"id": [1, 2],
                        "at": pa.array([1_700_000_000_123_456_789, None], pa.timestamp("ns", tz="UTC")),
                        "local": pa.array([-1, 86_400_000_000_000], pa.timestamp("ns"))}, schema=NANOS)
    table.append(precise)
    table = table.refresh()
    got = table.scan().to_arrow().sort_by("id")
    assert got.schema.field("at").type == pa.timestamp("ns", tz="UTC")
    assert got.schema.field("local").type == pa.timestamp("ns")
    assert got.column("at").cast(pa.int64()).to_pylist() == [1_700_000_000_123_456_789, None]
    assert got.column("local").cast(pa.int64()).to_pylist() == [-1, 86_400_000_000_000]
    # Filters compare nanoseconds: one nanosecond past the value keeps nothing.
    assert table.scan(filter="at > '2023-11-14T22:13:20.123456789+00:00'").to_arrow().num_rows == 0
    assert table.scan(filter="at >= '2023-11-14T22:13:20.123456789+00:00'", columns=["id"]).to_arrow().to_pylist() \
        == [{"id": 1}]


def test_v3_promotes_a_date_column_to_timestamp_ns_in_metadata_and_old_dates_read_as_midnight(tmp_path: Path) -> None:
    catalog = tablestore.load_catalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    dates = pa.schema([("id", pa.int64()), ("d", pa.date32())])
    table = catalog.create_table("db.d", dates, properties={"format-version": "3"})
    table.append(pa.table({"id": [1, 2], "d": pa.array([19000, None], pa.date32())}, schema=dates))
    table = table.refresh()
    before = table.inspect.data_files().column("file_path").to_pylist()
    with table.update_schema() as u:
        u.widen("d", "timestamp_ns")
    table = table.refresh()
    assert table.inspect.data_files().column("file_path").to_pylist() == before  # no rewrite
    assert str(table.schema().find_field("d").field_type) == "timestamp_ns"
    table.append(pa.table({"id": [3], "d": pa.array([19001 * 86_400_000_000_000 + 5], pa.timestamp("ns"))}))
    table = table.refresh()
    got = table.scan().to_arrow().sort_by("id")
    assert got.schema.field("d").type == pa.timestamp("ns")
    assert got.column("d").cast(pa.int64()).to_pylist() == [19000 * 86_400_000_000_000, None,
                                                            19001 * 86_400_000_000_000 + 5]
    # The old file's bounds are 4-byte dates, read as midnight when the filter prunes files.
    assert table.scan(filter="d = '2022-01-08T00:00:00'", columns=["id"]).to_arrow().to_pylist() == [{"id": 1}]
    assert table.scan(filter="d > '2022-01-08T00:00:00'", columns=["id"]).to_arrow().to_pylist() == [{"id": 3}]
