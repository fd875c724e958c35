"""Format v3 tables on tablestore's side: created as v3, upgraded from v2, v3 metadata written.

Row-id assignment in snapshot producers is not built yet, so writing rows to a v3 table is
refused with an error that says so, and nothing is committed.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

from tablestore.catalog import Catalog
from tablestore.errors import UnsupportedError, ValidationError

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])})


def metadata_json(catalog: Catalog, name: str) -> dict:
    table = catalog.load_table(name)
    return json.loads(table.io.new_input(table.metadata_location).read())


def test_create_table_with_format_version_3_writes_v3_metadata(catalog: Catalog) -> None:
    catalog.create_namespace("v3")
    catalog.create_table("v3.by_arg", ROWS.schema, partition_by=["name"], format_version=3)
    catalog.create_table("v3.by_prop", ROWS.schema, properties={"format-version": "3", "k": "v"})
    for name in ("v3.by_arg", "v3.by_prop"):
        table = catalog.load_table(name)
        assert (table.metadata.format_version, table.metadata.next_row_id) == (3, 0)
        assert "format-version" not in table.properties
        written = metadata_json(catalog, name)
        assert (written["format-version"], written["next-row-id"]) == (3, 0)
        # pyiceberg reads the file as a v3 table.
        assert StaticTable.from_metadata(table.metadata_location).metadata.format_version == 3
    assert catalog.load_table("v3.by_prop").properties["k"] == "v"
    assert catalog.load_table("v3.by_arg").scan().to_arrow().num_rows == 0
    # v2 stays the default, without next-row-id.
    v2 = catalog.create_table("v3.default", ROWS.schema)
    assert v2.metadata.format_version == 2 and "next-row-id" not in metadata_json(catalog, "v3.default")
    with pytest.raises(ValidationError, match="contradicts"):
        catalog.create_table("v3.bad", ROWS.schema, properties={"format-version": "2"}, format_version=3)
    with pytest.raises(ValidationError, match="1, 2 or 3, not 4"):
        catalog.create_table("v3.bad", ROWS.schema, format_version=4)
    assert not catalog.table_exists("v3.bad")


def test_upgrade_v2_to_v3_keeps_snapshots_and_starts_row_ids_at_zero(catalog: Catalog) -> None:
    catalog.create_namespace("up")
    table = catalog.create_table("up.t", ROWS.schema)
    table.append(ROWS)
    before = table.refresh().metadata
    table.update_properties({"format-version": "3", "owner": "me"})
    after = catalog.load_table("up.t").metadata
    assert (after.format_version, after.next_row_id) == (3, 0)
    assert after.properties.get("owner") == "me" and "format-version" not in after.properties
    # Existing snapshots are not modified: they keep no first-row-id (spec, "Row Lineage for Upgraded Tables").
    assert after.snapshots == before.snapshots and after.snapshots[0].first_row_id is None
    assert sorted(catalog.load_table("up.t").scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
    written = metadata_json(catalog, "up.t")
    assert (written["format-version"], written["next-row-id"]) == (3, 0)
    assert "first-row-id" not in written["snapshots"][0]
    # The same version again is no change; a downgrade and removing the version are refused.
    table = catalog.load_table("up.t")
    table.update_properties({"format-version": "3"})
    assert catalog.load_table("up.t").metadata_location == table.metadata_location
    with pytest.raises(ValidationError, match="cannot downgrade a v3 table to v2"):
        table.update_properties({"format-version": "2"})
    with pytest.raises(ValidationError, match="format-version cannot be removed"):
        table.update_properties(removals=["format-version"])
    with pytest.raises(ValidationError, match="must be 1, 2 or 3"):
        table.update_properties({"format-version": "three"})


def test_writing_rows_to_a_v3_table_is_refused_until_row_ids_are_assigned(catalog: Catalog) -> None:
    catalog.create_namespace("w")
    table = catalog.create_table("w.t", ROWS.schema, format_version=3)
    with pytest.raises(UnsupportedError, match="row lineage"):
        table.append(ROWS)
    reloaded = catalog.load_table("w.t")
    assert reloaded.metadata.current_snapshot_id is None and reloaded.metadata_location == table.metadata_location
