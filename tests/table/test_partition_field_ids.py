"""Manifest partition tuples are read by partition field id, not by position.

The spec says a manifest's ``partition`` struct carries the partition field ids. DuckDB, after
partition evolution, files a delete manifest under the old spec id while its struct has the
current spec's fields (one more than that spec). Java projects the struct by field id and so
applies the delete; reading by position misreads the tuple and the deleted row comes back.
The manifest here is rewritten with fastavro, a writer independent of tablestore's codec.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa

import tablestore
from tablestore.spec.manifests.manifest import ManifestContent, read_manifest, snapshot_manifests
from tablestore.table import Table


def _rewrite_avro(path: str, change_schema: Any, change_record: Any) -> int:
    """Rewrite an Avro container in place with fastavro; returns its new length."""
    local = path.removeprefix("file://")
    with open(local, "rb") as f:
        reader = fastavro.reader(f)
        meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
        schema = json.loads(reader.metadata["avro.schema"])
        records = list(reader)
    change_schema(schema)
    with open(local, "wb") as f:
        fastavro.writer(f, fastavro.parse_schema(schema), [change_record(r) for r in records],
                        metadata=meta, codec="deflate")
    return Path(local).stat().st_size


def _partition_struct(manifest_schema: dict[str, Any]) -> dict[str, Any]:
    data_file = next(f for f in manifest_schema["fields"] if f["name"] == "data_file")["type"]
    struct: dict[str, Any] = next(f for f in data_file["fields"] if f["name"] == "partition")["type"]
    return struct


def _widen_delete_manifest(table: Table) -> None:
    """Give the delete manifest's partition struct the current spec's two fields, as DuckDB
    writes it, while the manifest list still files it under spec 0 (one field)."""
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    deletes = [m for m in snapshot_manifests(table.io, snapshot) if m.content == ManifestContent.DELETES]
    assert len(deletes) == 1 and deletes[0].partition_spec_id == 0
    manifest = deletes[0]

    def widen(schema: dict[str, Any]) -> None:
        struct = _partition_struct(schema)
        assert [f["field-id"] for f in struct["fields"]] == [1000]
        struct["fields"].append({"name": "id_bucket", "type": ["null", "int"], "default": None, "field-id": 1001})

    def add_value(record: dict[str, Any]) -> dict[str, Any]:
        record["data_file"]["partition"]["id_bucket"] = 3
        return record

    length = _rewrite_avro(manifest.manifest_path, widen, add_value)

    def new_length(record: dict[str, Any]) -> dict[str, Any]:
        if record["manifest_path"] == manifest.manifest_path:
            record["manifest_length"] = length
        return record

    _rewrite_avro(snapshot.manifest_list, lambda schema: None, new_length)


def test_delete_filed_under_an_older_spec_with_a_wider_partition_struct_stays_applied(tmp_path: Path) -> None:
    catalog = tablestore.load_catalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    table = catalog.create_table(
        "db.t", pa.schema([("id", pa.int64()), ("country", pa.string())]), partition_by=["country"],
        properties={"write.delete.mode": "merge-on-read"},
    )
    table.append(pa.table({"id": [1, 2, 3], "country": ["fr", "fr", "de"]}))
    with table.update_spec() as update:
        update.add_field("bucket(4, id)", "id_bucket")
    assert table.delete("id = 2") == 1
    table = catalog.load_table("db.t")
    assert [f.field_id for f in table.specs()[1].fields] == [1000, 1001]

    _widen_delete_manifest(table)
    table = catalog.load_table("db.t")

    # The deleted row stays hidden, with and without a filter on the partition column.
    assert table.scan().to_arrow().sort_by("id").to_pydict() == {"id": [1, 3], "country": ["fr", "de"]}
    assert table.scan(filter="country = 'fr'").to_arrow().to_pydict() == {"id": [1], "country": ["fr"]}

    # The entry reads with spec 0's tuple, by field id; the extra field is ignored.
    snapshot = table.current_snapshot()
    assert snapshot is not None
    delete_manifest = next(m for m in snapshot_manifests(table.io, snapshot) if m.content == ManifestContent.DELETES)
    entries = read_manifest(table.io, delete_manifest, specs=table.specs())
    assert [e.data_file.partition for e in entries] == [("fr",)]
    # Without the table's specs, the spec named in the manifest's own header is used.
    assert [e.data_file.partition for e in read_manifest(table.io, delete_manifest)] == [("fr",)]
    # The metadata tables read the same tuples.
    files = table.inspect.files().to_pydict()
    assert sorted(p["country"] for p in files["partition"]) == ["de", "fr", "fr"]


def test_partition_struct_in_another_order_reads_by_field_id(tmp_path: Path) -> None:
    catalog = tablestore.load_catalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    table = catalog.create_table(
        "db.t", pa.schema([("id", pa.int64()), ("country", pa.string()), ("city", pa.string())]),
        partition_by=["country", "city"],
    )
    table.append(pa.table({"id": [1, 2], "country": ["fr", "de"], "city": ["paris", "berlin"]}))
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    manifest = snapshot_manifests(table.io, snapshot)[0]

    def swap(schema: dict[str, Any]) -> None:
        struct = _partition_struct(schema)
        struct["fields"].reverse()

    length = _rewrite_avro(manifest.manifest_path, swap, lambda r: r)
    _rewrite_avro(snapshot.manifest_list, lambda s: None,
                  lambda r: {**r, "manifest_length": length} if r["manifest_path"] == manifest.manifest_path else r)
    table = catalog.load_table("db.t")
    entries = read_manifest(table.io, snapshot_manifests(table.io, snapshot)[0], specs=table.specs())
    assert sorted(e.data_file.partition for e in entries) == [("de", "berlin"), ("fr", "paris")]
    assert table.scan(filter="city = 'paris'").to_arrow().to_pydict() == {
        "id": [1], "country": ["fr"], "city": ["paris"]
    }
