"""UUID columns (issue 22, defect 4): written as the spec says, created from Arrow's uuid type,
read back as before.

The spec stores a uuid as Parquet ``FIXED_LEN_BYTE_ARRAY(16)`` annotated with the ``UUID``
logical type (Java adds it); a ``fixed[16]`` column has the same physical type and no annotation.
Arrow's canonical uuid extension type (``pa.uuid()``) is an Iceberg uuid, as pyiceberg maps it.
tablestore reads uuids as their 16 bytes (``fixed_size_binary(16)``), as it always has: a scan's
schema is the same whoever wrote the file, and pyarrow's compute kernels do not take the extension
type (no comparison, no join), so a filter or equality delete on it would not run.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tablestore
from tablestore.spec.expressions.expression_tree import EqualTo
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import FixedType, ListType, LongType, NestedField, StructType, UUIDType
from tablestore.table import Table

U1, U2, U3 = uuid.UUID(int=5), uuid.UUID(int=2**127 + 9), uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")

# A uuid at the top, in a struct and in a list, and a fixed[16] that must stay unannotated.
SCHEMA = Schema((
    NestedField(1, "id", LongType(), True),
    NestedField(2, "u", UUIDType()),
    NestedField(3, "fx", FixedType(16)),
    NestedField(4, "st", StructType(NestedField(6, "u", UUIDType()))),
    NestedField(5, "lst", ListType(7, UUIDType())),
))


def rows() -> pa.Table:
    b16 = pa.binary(16)
    return pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "u": pa.array([U1.bytes, None, U3.bytes], b16),
        "fx": pa.array([b"f" * 16, b"g" * 16, None], b16),
        "st": pa.array([{"u": U2.bytes}, None, {"u": None}], pa.struct([("u", b16)])),
        "lst": pa.array([[U1.bytes, U2.bytes], [], None], pa.list_(b16)),
    })


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[tablestore.Catalog]:
    cat = tablestore.load_catalog("u", type="sql", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    yield cat
    cat.close()


def data_files(table: Table) -> list[str]:
    return [task.file.file_path for task in table.scan().plan_files()]


def local(path: str) -> str:
    return path.removeprefix("file://")


def leaf_annotations(path: str) -> dict[str, tuple[str, int, str]]:
    """Each leaf column of a Parquet file: (physical type, length, logical type)."""
    schema = pq.ParquetFile(local(path)).schema
    out = {}
    for i in range(len(schema)):
        column = schema.column(i)
        out[column.path] = (column.physical_type, column.length, column.logical_type.type)
    return out


EXPECTED_LEAVES = {
    "u": ("FIXED_LEN_BYTE_ARRAY", 16, "UUID"),
    "fx": ("FIXED_LEN_BYTE_ARRAY", 16, "NONE"),
    "st.u": ("FIXED_LEN_BYTE_ARRAY", 16, "UUID"),
    "lst.list.element": ("FIXED_LEN_BYTE_ARRAY", 16, "UUID"),
}


@pytest.mark.parametrize("shape", ["table", "stream"])
def test_uuid_columns_are_written_with_the_parquet_uuid_logical_type_and_fixed_stays_plain(
        catalog: tablestore.Catalog, shape: str) -> None:
    table = catalog.create_table("db.t", schema=SCHEMA)
    data = rows()
    # A table goes through the partition-split writer, a stream through the streaming writers.
    table.append(data if shape == "table" else pa.RecordBatchReader.from_batches(data.schema, data.to_batches()))
    files = data_files(table.refresh())
    assert files
    for path in files:
        leaves = leaf_annotations(path)
        assert {k: v for k, v in leaves.items() if k != "id"} == EXPECTED_LEAVES, path


def test_uuids_read_back_as_their_16_bytes_and_filter_and_delete_by_value(catalog: tablestore.Catalog) -> None:
    table = catalog.create_table("db.t", schema=SCHEMA)
    table.append(rows())
    read = table.refresh().scan().to_arrow().sort_by("id")
    assert read.schema.field("u").type == pa.binary(16)
    assert read.schema.field("st").type == pa.struct([pa.field("u", pa.binary(16))])
    assert read.column("u").to_pylist() == [U1.bytes, None, U3.bytes]
    assert read.column("lst").to_pylist() == [[U1.bytes, U2.bytes], [], None]
    assert read.column("fx").to_pylist() == [b"f" * 16, b"g" * 16, None]
    # A filter on the uuid column itself (pyarrow has no kernel for the extension type).
    assert table.scan(filter=EqualTo("u", U3)).to_arrow().column("id").to_pylist() == [3]
    table.delete(EqualTo("u", U1))
    assert sorted(table.refresh().scan().to_arrow().column("id").to_pylist()) == [2, 3]


def test_duckdb_reads_our_uuid_data_files_as_uuid(catalog: tablestore.Catalog, tmp_path: Path) -> None:
    """DuckDB's Parquet reader types a column UUID only from the logical type (else BLOB)."""
    from tests.interop.readers import duckdb_connect

    table = catalog.create_table("db.t", schema=SCHEMA)
    table.append(rows())
    (path,) = data_files(table.refresh())
    con = duckdb_connect(tmp_path / "ext")
    try:
        types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE SELECT u, fx, st, lst "
                                 "FROM read_parquet(?))", [local(path)]).fetchall())
        assert types == {"u": "UUID", "fx": "BLOB", "st": "STRUCT(u UUID)", "lst": "UUID[]"}
        assert con.execute("SELECT id, u::VARCHAR FROM read_parquet(?) ORDER BY id", [local(path)]).fetchall() == [
            (1, str(U1)), (2, None), (3, str(U3))]
    finally:
        con.close()


def test_create_table_maps_the_arrow_uuid_extension_type_to_iceberg_uuid(catalog: tablestore.Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("u", pa.uuid()),
                        pa.field("us", pa.list_(pa.uuid())), pa.field("fx", pa.binary(16))])
    table = catalog.create_table("db.t", schema=schema)
    created = table.schema()
    assert created.find_field("u").field_type == UUIDType()
    us = created.find_field("us").field_type
    assert isinstance(us, ListType) and us.element_type == UUIDType()
    assert created.find_field("fx").field_type == FixedType(16)
    # Rows given with the extension type are written and read back as the same 16 bytes.
    u = pa.ExtensionArray.from_storage(pa.uuid(), pa.array([U2.bytes, None], pa.binary(16)))
    us_values = pa.array([[U1.bytes], None], pa.list_(pa.binary(16))).cast(pa.list_(pa.uuid()))
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "u": u, "us": us_values,
                           "fx": pa.array([b"x" * 16, None], pa.binary(16))}, schema=schema))
    read = table.refresh().scan().to_arrow().sort_by("id")
    assert read.column("u").to_pylist() == [U2.bytes, None]
    assert read.column("us").to_pylist() == [[U1.bytes], None]
    (path,) = data_files(table)
    assert leaf_annotations(path)["u"] == ("FIXED_LEN_BYTE_ARRAY", 16, "UUID")


def test_erasure_by_a_uuid_column_is_verified_in_the_uuid_annotated_files(catalog: tablestore.Catalog) -> None:
    """Verification reads the raw files, whose stored Arrow schema has the uuid extension type."""
    table = catalog.create_table("db.t", schema=SCHEMA)
    table.append(rows())
    report = tablestore.erase(catalog, "db.t", "u", "REQ-U", values=[U1])
    assert report.verified and report.residue == [] and report.rows_removed == 1
    assert sorted(table.refresh().scan().to_arrow().column("id").to_pylist()) == [2, 3]
