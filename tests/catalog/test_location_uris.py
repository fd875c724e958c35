"""Locations on a local warehouse are full ``file:///`` URIs, as the spec asks, and tables with
bare-path locations (older tablestore, pyiceberg with a plain-path warehouse) stay readable.

iceberg-rust (pyiceberg-core) is the reader that proves it: it refuses a bare path ("relative URL
without a base"), where Java and pyiceberg quietly accept one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

from tablestore.catalog import load_catalog
from tablestore.io import load_file_io
from tablestore.spec.manifests.manifest import read_manifest, snapshot_manifests


def test_to_location_uri_spells_local_paths_as_file_uris(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tablestore.names import to_location_uri

    monkeypatch.chdir(tmp_path)
    assert to_location_uri("/data/lake/t") == "file:///data/lake/t"
    assert to_location_uri("warehouse/db") == f"file://{tmp_path}/warehouse/db"
    # Hadoop's spelling, as a client asked for it: kept (Java keeps it; FileIO reads it).
    assert to_location_uri("file:/data/t") == "file:/data/t"
    assert to_location_uri("file:///data/t") == "file:///data/t"
    assert to_location_uri("s3://bucket/t") == "s3://bucket/t"
    assert to_location_uri("s3a://bucket/t") == "s3a://bucket/t"


def _locations(table: object) -> list[str]:
    """Every location the table's metadata records: its own, the metadata log's, and each
    snapshot's manifest list, manifests and data and delete files."""
    from tablestore.table import Table

    assert isinstance(table, Table)
    metadata = table.metadata
    raw = json.loads(table.io.new_input(table.metadata_location).read())
    found = [table.metadata_location, raw["location"]]
    found += [entry["metadata-file"] for entry in raw.get("metadata-log", [])]
    for snapshot in metadata.snapshots:
        assert snapshot.manifest_list is not None
        found.append(snapshot.manifest_list)
        for manifest in snapshot_manifests(table.io, snapshot):
            found.append(manifest.manifest_path)
            found += [entry.data_file.file_path for entry in read_manifest(table.io, manifest)]
    return found


def test_plain_path_warehouse_writes_file_uris_that_iceberg_rust_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The default configuration's warehouse: a relative plain path.
    monkeypatch.chdir(tmp_path)
    catalog = load_catalog("lake", warehouse="warehouse")
    assert catalog.warehouse == f"file://{tmp_path}/warehouse"
    catalog.create_namespace("db")
    table = catalog.create_table(
        "db.t", pa.schema([("id", pa.int64()), ("country", pa.string())]), partition_by=["country"],
        properties={"write.delete.mode": "merge-on-read"},
    )
    table.append(pa.table({"id": [1, 2, 3], "country": ["fr", "fr", "de"]}))
    assert table.delete("id = 2") == 1  # a position delete file
    catalog.create_view("db.v", "SELECT id FROM db.t", pa.schema([("id", pa.int64())]))

    table = catalog.load_table("db.t")
    locations = _locations(table)
    assert len(locations) >= 9
    assert locations[1] == f"file://{tmp_path}/warehouse/db/t"
    assert [loc for loc in locations[2:] if not loc.startswith(f"file://{tmp_path}/warehouse/db/t/")] == []
    assert catalog.load_view("db.v").metadata_location.startswith(f"file://{tmp_path}/warehouse/db/v/metadata/")
    assert table.scan().to_arrow().sort_by("id").to_pydict() == {"id": [1, 3], "country": ["fr", "de"]}

    # iceberg-rust parses each location as a URL; a bare path fails here with "relative URL
    # without a base". It loads the metadata file and resolves the table location against it.
    from tests.interop.readers import rust_read

    assert rust_read(table.metadata_location, None).sort_by("id").to_pydict() == \
        {"id": [1, 3], "country": ["fr", "de"]}

    # pyiceberg opens the same catalog database and reads the same rows through the URIs.
    from pyiceberg.catalog.sql import SqlCatalog as PyIcebergSqlCatalog

    other = PyIcebergSqlCatalog("lake", uri=f"sqlite:///{tmp_path}/warehouse/catalog.db",
                                warehouse=f"file://{tmp_path}/warehouse")
    read = other.load_table("db.t").scan().to_arrow().sort_by("id")
    assert read.to_pydict() == {"id": [1, 3], "country": ["fr", "de"]}


def test_tables_written_with_bare_paths_stay_readable_and_writable(tmp_path: Path) -> None:
    # pyiceberg with a plain-path warehouse records bare paths everywhere (as tablestore did
    # before it wrote URIs); tablestore reads such a table and adds to it.
    from pyiceberg.catalog.sql import SqlCatalog as PyIcebergSqlCatalog

    uri = f"sqlite:///{tmp_path}/catalog.db"
    writer = PyIcebergSqlCatalog("lake", uri=uri, warehouse=str(tmp_path / "wh"))
    writer.create_namespace("db")
    written = writer.create_table("db.t", pa.schema([("id", pa.int64())]))
    written.append(pa.table({"id": [1, 2]}))
    bare = written.refresh()
    assert bare.metadata.location == str(tmp_path / "wh" / "db" / "t")
    assert next(iter(bare.scan().plan_files())).file.file_path.startswith(str(tmp_path / "wh"))
    # What tablestore used to write too, and what iceberg-rust refuses.
    from pyiceberg_core.datafusion import IcebergDataFusionTable

    with pytest.raises(Exception, match="relative URL without a base"):
        IcebergDataFusionTable(["db", "t"], bare.metadata_location, {})

    catalog = load_catalog("lake", uri=uri, warehouse=str(tmp_path / "wh"))
    table = catalog.load_table("db.t")
    assert table.scan().to_arrow().to_pydict() == {"id": [1, 2]}
    table.append(pa.table({"id": [3]}))
    table = catalog.load_table("db.t")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
    # The files added now are URIs; the old ones keep their recorded bare paths.
    paths = [task.file.file_path for task in table.scan().plan_files()]
    assert sorted(p.startswith("file://") for p in paths) == [False, True]
    assert table.metadata_location.startswith(f"file://{tmp_path}/wh/db/t/metadata/00002-")
    # And pyiceberg reads the mix back.
    assert sorted(writer.load_table("db.t").scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]


def test_file_io_reads_every_spelling_of_a_local_file(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    io = load_file_io()
    for spelling in (str(path), f"file://{path}", f"file:{path}", os.path.relpath(path)):
        assert io.new_input(spelling).read() == b"abc", spelling
