"""The Python API: its round trip (create, append, scan, load, list, drop) on every catalog of the
matrix (SQLite, PostgreSQL, REST) and storage (local disk, s3://); names on every catalog; an
overwrite on both storages; the table layer's logic (pruning, time travel, sequence numbers, bad
input) on SQLite."""

from __future__ import annotations

import datetime
import time
import uuid

import pyarrow as pa
import pytest

import tablestore
from tablestore.errors import (
    FilterError,
    InvalidNameError,
    NoSuchSnapshotError,
    NoSuchTableError,
    SchemaError,
)
from tablestore.spec.manifests.manifest import read_manifest, read_manifest_list
from tests.conftest import ON_EVERY_CATALOG_AND_STORAGE, ON_EVERY_STORAGE, ON_THE_CATALOG_MATRIX, CatalogTarget

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("ts", pa.timestamp("us")),
    ("country", pa.string()),
    ("amount", pa.float64()),
])

CORRUPT = b'{"format-version": 2, "table-uuid": '


def events(ids: range, country: str | list[str] = "de", day: int = 1) -> pa.Table:
    countries = [country] * len(ids) if isinstance(country, str) else [country[i % len(country)] for i in range(len(ids))]
    return pa.table({
        "id": pa.array(list(ids), pa.int64()),
        "ts": pa.array([datetime.datetime(2024, 5, day, i % 24) for i in range(len(ids))], pa.timestamp("us")),
        "country": countries,
        "amount": [float(i) for i in ids],
    }, schema=SCHEMA)


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


@pytest.fixture
def table(catalog: tablestore.Catalog) -> tablestore.Table:
    catalog.create_namespace("db")
    return catalog.create_table("db.events", schema=SCHEMA, partition_by=["day(ts)", "country", "bucket(4, id)"])


@ON_EVERY_CATALOG_AND_STORAGE
def test_append_then_scan_returns_rows_with_filter_and_projection(table: tablestore.Table) -> None:
    snapshot = table.append(events(range(0, 50), ["de", "fr"]))
    assert snapshot.summary["operation"] == "append"
    assert snapshot.summary["added-records"] == "50"
    assert snapshot.summary["total-records"] == "50"
    table.append(events(range(50, 80), "nl", day=2))
    result = table.scan(filter="id > 5 AND country = 'de'", columns=["id", "ts"]).to_arrow()
    assert result.column_names == ["id", "ts"]
    assert ids(result) == [i for i in range(6, 50) if i % 2 == 0]
    assert table.scan().to_arrow().num_rows == 80
    assert table.scan(filter="country = 'nl'").to_pandas()["id"].tolist() == list(range(50, 80)) or \
        sorted(table.scan(filter="country = 'nl'").to_pandas()["id"].tolist()) == list(range(50, 80))
    reader = table.scan(filter="id < 10").to_arrow_batch_reader()
    assert ids(reader.read_all()) == list(range(10))


def test_scan_prunes_files_by_partition_and_bounds(table: tablestore.Table) -> None:
    table.append(events(range(0, 40), ["de", "fr"], day=1))
    table.append(events(range(40, 80), ["de", "fr"], day=2))
    all_files = table.scan().plan_files()
    day2_de = table.scan(filter="ts >= '2024-05-02' AND country = 'de'").plan_files()
    assert 0 < len(day2_de) < len(all_files)
    assert all(t.file.partition[1] == "de" for t in day2_de)
    by_id = table.scan(filter="id = 41").plan_files()
    assert len(by_id) == 1


@ON_EVERY_STORAGE
def test_overwrite_by_filter_replaces_only_matching_rows(table: tablestore.Table) -> None:
    table.append(events(range(0, 20), ["de", "fr"]))
    snapshot = table.overwrite(events(range(100, 103), "de"), filter="country = 'de'")
    assert snapshot.summary["operation"] == "overwrite"
    assert snapshot.summary["deleted-records"] == "10"
    now = table.scan().to_arrow()
    assert ids(now) == sorted([i for i in range(20) if i % 2 == 1] + [100, 101, 102])
    # A filter that cuts through files rewrites them without the matching rows.
    table.overwrite(events(range(200, 201), "fr"), filter="id < 5")
    assert ids(table.scan().to_arrow()) == sorted([i for i in range(5, 20) if i % 2 == 1] + [100, 101, 102, 200])


def test_time_travel_by_snapshot_id_and_timestamp(table: tablestore.Table) -> None:
    first = table.append(events(range(0, 10)))
    time.sleep(0.01)
    between = datetime.datetime.now(datetime.UTC)
    time.sleep(0.01)
    table.append(events(range(10, 25)))
    assert table.scan(snapshot_id=first.snapshot_id).to_arrow().num_rows == 10
    assert table.scan(as_of_timestamp=between).to_arrow().num_rows == 10
    assert table.scan().to_arrow().num_rows == 25
    with pytest.raises(NoSuchSnapshotError, match="no snapshot 42"):
        table.scan(snapshot_id=42)
    with pytest.raises(NoSuchSnapshotError):
        table.scan(as_of_timestamp=datetime.datetime(2000, 1, 1))


@ON_EVERY_CATALOG_AND_STORAGE
def test_load_list_and_drop_tables(catalog: tablestore.Catalog, table: tablestore.Table) -> None:
    table.append(events(range(3)))
    loaded = catalog.load_table("db.events")
    assert loaded.metadata_location == table.metadata_location
    assert ids(loaded.scan().to_arrow()) == [0, 1, 2]
    assert ("db", "events") in [tuple(t) for t in catalog.list_tables("db")]
    catalog.drop_table("db.events")
    with pytest.raises(NoSuchTableError):
        catalog.load_table("db.events")


def test_manifests_inherit_sequence_numbers(table: tablestore.Table) -> None:
    table.append(events(range(5)))
    table.append(events(range(5, 9)))
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.sequence_number == 2
    assert snapshot.manifest_list is not None
    manifests = read_manifest_list(table.io, snapshot.manifest_list)
    seqs = sorted(m.sequence_number for m in manifests)
    assert seqs == [1, 2]
    for m in manifests:
        for entry in read_manifest(table.io, m):
            assert entry.sequence_number == m.sequence_number
            assert entry.snapshot_id == m.added_snapshot_id


# -- bad input: a clear error, and nothing committed ------------------------------------------


def _unchanged(table: tablestore.Table, before: str) -> None:
    table.refresh()
    assert table.metadata_location == before


def test_data_that_does_not_match_the_schema_is_refused(table: tablestore.Table) -> None:
    table.append(events(range(3)))
    before = table.metadata_location
    with pytest.raises(SchemaError, match="'amount' has type string"):
        table.append(pa.table({"id": pa.array([1], pa.int64()), "amount": ["x"]}))
    with pytest.raises(SchemaError, match="columns the table does not: 'extra'"):
        table.append(events(range(1)).append_column("extra", pa.array([1])))
    with pytest.raises(SchemaError, match="requires"):
        table.append(pa.table({"amount": [1.0]}))
    with pytest.raises(SchemaError, match="required but the data has 1 null"):
        table.append(pa.table({"id": pa.array([None], pa.int64())}))
    _unchanged(table, before)
    assert table.scan().to_arrow().num_rows == 3


def test_filter_on_unknown_column_names_the_columns(table: tablestore.Table) -> None:
    table.append(events(range(3)))
    before = table.metadata_location
    with pytest.raises(FilterError, match="nope.*id, ts, country, amount"):
        table.scan(filter="nope = 1")
    with pytest.raises(FilterError, match="nope"):
        table.overwrite(events(range(1)), filter="nope > 3")
    with pytest.raises(FilterError):
        table.scan(filter="id = = 3")
    _unchanged(table, before)


@ON_THE_CATALOG_MATRIX
def test_missing_table_and_namespace(catalog: tablestore.Catalog) -> None:
    with pytest.raises(NoSuchTableError, match="db9.nothing"):
        catalog.load_table("db9.nothing")
    catalog.create_namespace("db")
    with pytest.raises(NoSuchTableError, match="db.nothing"):
        catalog.load_table("db.nothing")


@ON_THE_CATALOG_MATRIX
@pytest.mark.parametrize("name", ["db.a/b", "db...x", "db.../etc", "db.t\x00", "db.t\nx", "../db.t"])
def test_bad_names_are_refused(catalog: tablestore.Catalog, name: str) -> None:
    catalog.create_namespace("db")
    with pytest.raises(InvalidNameError):
        catalog.create_table(name, schema=SCHEMA)
    assert catalog.list_tables("db") == []


@ON_EVERY_CATALOG_AND_STORAGE
def test_corrupt_metadata_file_is_reported(catalog_target: CatalogTarget, catalog: tablestore.Catalog,
                                           table: tablestore.Table) -> None:
    from tablestore.errors import CorruptMetadataError

    table.append(events(range(3)))
    location = table.metadata_location
    with table.io.new_output(location).create(overwrite=True) as f:
        f.write(CORRUPT)
    if catalog_target.kind == "rest":
        # Not a gap: the service keeps every metadata file it has parsed, by location, because a
        # commit never rewrites one (it writes the next file and swaps the pointer); a file
        # overwritten in place behind its back is not read again, and it serves the last state.
        loaded = catalog.load_table("db.events")
        assert loaded.metadata_location == location
        assert sorted(ids(loaded.scan().to_arrow())) == [0, 1, 2]
    else:
        with pytest.raises(CorruptMetadataError, match="metadata"):
            catalog.load_table("db.events")
    # A corrupt file that the catalog has never read is reported by every catalog (over REST as
    # the protocol's CorruptMetadataException, raised again by the client).
    other = f"{table.location}/metadata/00009-{uuid.uuid4()}.metadata.json"
    with table.io.new_output(other).create() as f:
        f.write(CORRUPT)
    with pytest.raises(CorruptMetadataError, match="metadata"):
        catalog.register_table("db.registered", other)
    assert not catalog.table_exists("db.registered")
