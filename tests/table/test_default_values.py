"""Default values on format v3 tables through the Python API (spec "Default values").

``add_column(..., default=)`` sets ``initial-default`` and ``write-default`` without rewriting
a data file; rows written before read the initial default; a write that leaves the column out
stores the write default; ``set_default``/``drop_default`` change the write default only. On
v2 tables a NOT NULL column or a default is refused as before, saying that v3 allows it. The
``unknown`` type is stored in no data file. On SQLite and over REST: the defaults travel through
the service's schema updates (PostgreSQL stores the same pointer as SQLite).
"""

from __future__ import annotations

import datetime
import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tablestore.catalog.base import Catalog
from tablestore.errors import SchemaError, SchemaEvolutionError
from tablestore.table import Table
from tests.conftest import OVER_REST

pytestmark = OVER_REST


def _files(table: Table) -> list[str]:
    return sorted(table.inspect.data_files().column("file_path").to_pylist())


def _v2_with_rows_upgraded(catalog: Catalog) -> Table:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", pa.schema([("id", pa.int64()), ("point", pa.struct([("x", pa.int32())]))]))
    table.append(pa.table({"id": [1, 2], "point": [{"x": 1}, None]},
                          schema=pa.schema([("id", pa.int64()), ("point", pa.struct([("x", pa.int32())]))])))
    table = table.refresh()
    with pytest.raises(SchemaEvolutionError, match=r"cannot add column 'n' as NOT NULL: .* upgrade the table to "
                                                   r"format version 3 .*NOT NULL DEFAULT <value> without rewriting"):
        table.update_schema().add_column("n", "int", required=True, default=0).commit()
    assert table.refresh().metadata_location == table.metadata_location  # nothing committed
    table.update_properties({"format-version": "3"})
    return table.refresh()


def test_added_columns_with_defaults_rewrite_nothing_and_old_rows_read_the_initial_default(catalog: Catalog) -> None:
    table = _v2_with_rows_upgraded(catalog)
    before = _files(table)
    with table.update_schema() as u:
        u.add_column("n", "int", required=True, default=0)
        u.add_column("s", "string", default="x")
        u.add_column("amount", "decimal(9,2)", default="1.25")
        u.add_column("day", "date", default="2024-02-29")
        u.add_column("point.y", "bigint", default=7)
    table = table.refresh()
    assert _files(table) == before  # metadata only
    raw = json.loads(table.io.new_input(table.metadata_location).read())
    current = next(s for s in raw["schemas"] if s["schema-id"] == raw["current-schema-id"])
    n = next(f for f in current["fields"] if f["name"] == "n")
    assert (n["required"], n["initial-default"], n["write-default"]) == (True, 0, 0)
    assert next(f for f in current["fields"] if f["name"] == "amount")["initial-default"] == "1.25"
    assert next(f for f in current["fields"] if f["name"] == "day")["initial-default"] == "2024-02-29"

    old = [{"id": 1, "point": {"x": 1, "y": 7}, "n": 0, "s": "x", "amount": Decimal("1.25"),
            "day": datetime.date(2024, 2, 29)},
           {"id": 2, "point": None, "n": 0, "s": "x", "amount": Decimal("1.25"), "day": datetime.date(2024, 2, 29)}]
    assert table.scan().to_arrow().sort_by("id").to_pylist() == old
    assert table.scan(filter="n = 0 AND s = 'x'", columns=["id"]).to_arrow().sort_by("id").to_pylist() == [
        {"id": 1}, {"id": 2}]

    # A write that leaves columns out stores their write-default; SET DEFAULT changes it for
    # later writes only, DROP DEFAULT makes a nullable column NULL again.
    table.append(pa.table({"id": [3]}))
    with table.refresh().update_schema() as u:
        u.set_default("n", 5)
        u.drop_default("s")
    table = table.refresh()
    f = table.schema().find_field("n")
    assert (f.initial_default, f.write_default) == (0, 5)
    table.append(pa.table({"id": [4], "s": ["given"]}))
    table.append(pa.table({"id": [5]}))
    got = table.refresh().scan(columns=["id", "n", "s", "point"]).to_arrow().sort_by("id").to_pylist()
    assert got == [
        {"id": 1, "n": 0, "s": "x", "point": {"x": 1, "y": 7}},
        {"id": 2, "n": 0, "s": "x", "point": None},
        {"id": 3, "n": 0, "s": "x", "point": None},
        {"id": 4, "n": 5, "s": "given", "point": None},
        {"id": 5, "n": 5, "s": None, "point": None},
    ]

    # A NOT NULL column whose write-default is dropped must be given.
    with table.refresh().update_schema() as u:
        u.drop_default("n")
    table = table.refresh()
    with pytest.raises(SchemaError, match="the data has no column 'n', which the table requires and which has no "
                                          "default; add it"):
        table.append(pa.table({"id": [6]}))
    assert table.refresh().metadata_location == table.metadata_location


def test_an_unknown_column_is_in_no_data_file_reads_null_and_can_become_a_real_type(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.u", pa.schema([("id", pa.int64())]), properties={"format-version": "3"})
    with table.update_schema() as u:
        u.add_column("later", "unknown")
    with pytest.raises(SchemaEvolutionError, match="cannot add column 'never' as NOT NULL without a default"):
        table.refresh().update_schema().add_column("never", "unknown", required=True)
    table = table.refresh()
    table.append(pa.table({"id": [1]}))
    table = table.refresh()
    (path,) = _files(table)
    with table.io.new_input(path).open() as f:
        assert pq.read_schema(f).names == ["id"]
    assert table.scan().to_arrow().to_pylist() == [{"id": 1, "later": None}]
    assert table.scan().to_arrow().schema.field("later").type == pa.null()

    with table.update_schema() as u:
        u.widen("later", "string")  # v3: unknown promotes to any type in metadata
    table = table.refresh()
    assert _files(table) == [path]
    table.append(pa.table({"id": [2], "later": ["now"]}))
    assert table.refresh().scan().to_arrow().sort_by("id").to_pylist() == [
        {"id": 1, "later": None}, {"id": 2, "later": "now"}]
