"""A purge deletes only what the table owns, and no two live tables share a location: on every
catalog kind (SQLite, PostgreSQL, the REST service), as Iceberg's ``dropAfterRenameDoesntCorruptTable``
and its Java catalogs expect."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest

from tablestore.catalog.base import Catalog
from tablestore.catalog.locations import locations_overlap
from tablestore.errors import TableStoreError
from tablestore.io import load_file_io
from tests.conftest import ON_THE_CATALOG_MATRIX, CatalogTarget

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


@pytest.fixture
def catalog(catalog_target: CatalogTarget) -> Iterator[Catalog]:
    opened = catalog_target.open()
    opened.create_namespace("ns")
    try:
        yield opened
    finally:
        opened.close()


def rows(catalog: Catalog, name: str) -> list[tuple[int, str]]:
    table = catalog.load_table(name).scan().to_arrow().sort_by("id")
    return list(zip(table["id"].to_pylist(), table["name"].to_pylist(), strict=True))


def batch(*ids: int) -> pa.Table:
    return pa.table({"id": list(ids), "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


@ON_THE_CATALOG_MATRIX  # each catalog assigns and checks locations itself
def test_purging_a_renamed_table_leaves_the_new_table_of_its_old_name_whole(
    catalog: Catalog, catalog_target: CatalogTarget
) -> None:
    io = load_file_io(catalog_target.warehouse.properties)
    old = catalog.create_table("ns.a", SCHEMA)
    old.append(batch(1, 2))
    old_files = [f.path for f in io.list_prefix(old.location)]
    catalog.rename_table("ns.a", "ns.b")

    new = catalog.create_table("ns.a", SCHEMA)
    # The default path is taken by b's files: the new table gets a location of its own.
    assert new.location != old.location
    assert new.location.startswith(old.location + "-") and len(new.location) == len(old.location) + 33
    assert not locations_overlap(new.location, old.location)
    new.append(batch(3))

    catalog.drop_table("ns.b", purge=True)

    assert not catalog.table_exists("ns.b")
    assert rows(catalog, "ns.a") == [(3, "n3")]
    # Every file b owned (metadata, manifest list, manifest, data) is gone, and only those.
    assert len(old_files) >= 4
    assert [p for p in old_files if io.new_input(p).exists()] == []
    new_table = catalog.load_table("ns.a")
    assert io.new_input(new_table.metadata_location).exists()
    new_table.append(batch(4))
    assert rows(catalog, "ns.a") == [(3, "n3"), (4, "n4")]


@ON_THE_CATALOG_MATRIX  # each catalog assigns and checks locations itself
def test_a_purge_keeps_files_its_metadata_does_not_reference(
    catalog: Catalog, catalog_target: CatalogTarget
) -> None:
    io = load_file_io(catalog_target.warehouse.properties)
    table = catalog.create_table("ns.t", SCHEMA)
    table.append(batch(1))
    stranger = f"{table.location}/data/not-ours.parquet"
    io.new_output(stranger).write(b"written by someone else")
    sibling = catalog.create_table("ns.t2", SCHEMA)  # its location shares the prefix "t"

    catalog.drop_table("ns.t", purge=True)

    remaining = [f.path.rsplit("/", 1)[-1] for f in io.list_prefix(table.location)]
    assert remaining == ["not-ours.parquet"]
    assert catalog.load_table("ns.t2").metadata_location == sibling.metadata_location
    # Once the stranger is gone too, the name gets its plain location back.
    io.delete(stranger)
    assert catalog.create_table("ns.t", SCHEMA).location == table.location


@ON_THE_CATALOG_MATRIX  # each catalog assigns and checks locations itself
def test_a_location_that_overlaps_a_live_table_is_refused_and_nothing_is_created(catalog: Catalog) -> None:
    table = catalog.create_table("ns.t", SCHEMA)
    for location, how in ((table.location, "the same"), (f"{table.location}/inner", "inside"),
                          (table.location.rsplit("/", 1)[0], "containing")):
        with pytest.raises(TableStoreError, match=r"overlaps the location .* of live table ns\.t") as refused:
            catalog.create_table("ns.other", SCHEMA, location=location)
        assert "choose a location of its own" in str(refused.value), how
        assert not catalog.table_exists("ns.other")
    # Registering the live table's metadata under a second name would make two owners.
    with pytest.raises(TableStoreError, match=r"overlaps the location .* of live table ns\.t"):
        catalog.register_table("ns.twin", table.metadata_location)
    assert not catalog.table_exists("ns.twin")
    # A sibling location that only shares a prefix of characters is its own.
    assert catalog.create_table("ns.other", SCHEMA, location=table.location + "2").location == table.location + "2"


# The SQL catalogs only: a REST client's overlaps are decided by the service's own catalog
# configuration, the same code path as the SQL catalog it serves.
@pytest.mark.parametrize("catalog_target", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
                         indirect=True)
def test_overlapping_locations_are_allowed_when_the_catalog_says_so(catalog_target: CatalogTarget) -> None:
    catalog = type(catalog_target)(
        catalog_target.kind, catalog_target.name,
        {**catalog_target.properties, "allow-overlapping-locations": "true"}, catalog_target.warehouse,
    ).open()
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", SCHEMA)
    table.append(batch(1))
    inner = catalog.create_table("ns.inner", SCHEMA, location=f"{table.location}/inner")
    inner.append(batch(2))
    catalog.drop_table("ns.t", purge=True)
    assert rows(catalog, "ns.inner") == [(2, "n2")]  # the purge still took only t's own files


def test_locations_overlap_by_path_not_by_spelling() -> None:
    assert locations_overlap("file:///w/db/t", "/w/db/t/")
    assert locations_overlap("file:/w/db", "/w/db/t")
    assert locations_overlap("s3a://b/w/t/x", "s3://b/w/t")
    assert not locations_overlap("/w/db/t", "/w/db/t2")
    assert not locations_overlap("s3://b/w/t", "s3://c/w/t")
