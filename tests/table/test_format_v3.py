"""Format v3 tables on tablestore's side: created as v3, upgraded from v2, v3 metadata written.

Snapshot producers assign row ids: every snapshot of a v3 table records its first-row-id
(the table's next-row-id on the attempt that lands) and added-rows, and the carried files
keep the ids they had.
"""

from __future__ import annotations

import itertools
import json
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

from tablestore.catalog.base import Catalog
from tablestore.config import parse_config
from tablestore.errors import UnsupportedError, ValidationError
from tablestore.spec.manifests.manifest import read_manifest_list
from tablestore.sql.session import SqlSession
from tablestore.table import Table
from tests.conftest import OVER_REST

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])})


def metadata_json(catalog: Catalog, name: str) -> dict:
    table = catalog.load_table(name)
    return json.loads(table.io.new_input(table.metadata_location).read())


@OVER_REST  # the service writes the v3 metadata
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


@OVER_REST  # the service applies the upgrade
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
    # The first snapshot after the upgrade gives the old manifest (and so its file) ids too.
    table.append(pa.table({"id": pa.array([4], pa.int64()), "name": pa.array(["d"])}))
    md = catalog.load_table("up.t").metadata
    snap = md.current_snapshot()
    assert snap is not None and (snap.first_row_id, snap.added_rows, md.next_row_id) == (0, 4, 4)
    assert sorted(live_row_ids(catalog.load_table("up.t")).values()) == [(0, 1), (1, 3)]


def live_row_ids(table: Table) -> dict[str, tuple[int, int]]:
    """Each live data file's (inherited first_row_id, record_count), by the ids' order."""
    files = table.inspect.data_files().to_pylist()
    return {f["file_path"]: (f["first_row_id"], f["record_count"]) for f in files}


@OVER_REST  # the service advances next-row-id
def test_appends_overwrites_and_deletes_commit_on_v3_with_row_ids_from_next_row_id(catalog: Catalog) -> None:
    catalog.create_namespace("w")
    table = catalog.create_table("w.t", ROWS.schema, format_version=3)
    table.append(ROWS)
    first = catalog.load_table("w.t").metadata
    snap = first.current_snapshot()
    assert snap is not None and (snap.first_row_id, snap.added_rows, first.next_row_id) == (0, 3, 3)
    written = metadata_json(catalog, "w.t")
    assert written["next-row-id"] == 3
    assert (written["snapshots"][0]["first-row-id"], written["snapshots"][0]["added-rows"]) == (0, 3)
    (manifest,) = read_manifest_list(table.io, snap.manifest_list)  # type: ignore[arg-type]
    assert manifest.first_row_id == 0
    assert list(live_row_ids(table.refresh()).values()) == [(0, 3)]

    # A writer holding the table before that append loses its first attempt; its retry takes
    # its row ids from the refreshed next-row-id, so the two appends' ids do not overlap.
    stale = catalog.load_table("w.t")
    table.append(pa.table({"id": pa.array([4, 5], pa.int64()), "name": pa.array(["d", "e"])}))
    stale.append(pa.table({"id": pa.array([6], pa.int64()), "name": pa.array(["f"])}))
    md = catalog.load_table("w.t").metadata
    assert [(s.first_row_id, s.added_rows) for s in md.snapshots] == [(0, 3), (3, 2), (5, 1)]
    assert md.next_row_id == 6
    ids = sorted(live_row_ids(catalog.load_table("w.t")).values())
    assert ids == [(0, 3), (3, 2), (5, 1)]

    # An overwrite by filter rewrites the first file; the carried files keep their ids, and
    # the rewritten manifest's new range covers its existing rows too (spec, "First Row ID Assignment").
    table = catalog.load_table("w.t")
    table.delete("id = 1")
    md = catalog.load_table("w.t").metadata
    last = md.current_snapshot()
    assert last is not None and last.first_row_id == 6 and md.next_row_id == 6 + (last.added_rows or 0)
    after = live_row_ids(catalog.load_table("w.t"))
    assert (3, 2) in after.values() and (5, 1) in after.values()
    assert sorted(catalog.load_table("w.t").scan().to_arrow().column("id").to_pylist()) == [2, 3, 4, 5, 6]
    # Every live file's id range is disjoint from every other's.
    ranges = sorted(after.values())
    assert all(a + n <= b for (a, n), (b, _) in itertools.pairwise(ranges))
    # pyiceberg reads the v3 table we wrote.
    assert sorted(StaticTable.from_metadata(catalog.load_table("w.t").metadata_location)
                  .scan().to_arrow().column("id").to_pylist()) == [2, 3, 4, 5, 6]


def test_rewrite_position_deletes_on_v3_is_refused_as_it_would_add_position_delete_files(catalog: Catalog) -> None:
    """Merge-on-read on v3 writes deletion vectors (tests/table/test_deletion_vector_writes.py);
    what would still add a Parquet position delete file to a v3 table is refused, unchanged."""
    from tablestore.maintenance.compaction import rewrite_position_deletes

    catalog.create_namespace("m")
    table = catalog.create_table("m.t", ROWS.schema, properties={"write.delete.mode": "merge-on-read"})
    table.append(ROWS)
    table.delete("id = 1")
    table.delete("id = 2")
    catalog.load_table("m.t").update_properties({"format-version": "3"})
    reloaded = catalog.load_table("m.t")
    before = reloaded.metadata_location
    with pytest.raises(UnsupportedError, match="format v3 table: it would add a position delete file"):
        rewrite_position_deletes(reloaded, options={"rewrite-all": "true"})
    reloaded = catalog.load_table("m.t")
    assert reloaded.metadata_location == before
    assert sorted(reloaded.scan().to_arrow().column("id").to_pylist()) == [3]


def test_a_catalogs_table_default_format_version_makes_new_tables_v3(tmp_path: Path) -> None:
    """Iceberg's catalog properties ``table-default.<key>`` (unless the table sets it) and
    ``table-override.<key>`` (always), from the YAML config: v3 as the catalog's default."""
    config = parse_config(textwrap.dedent(f"""
        default-catalog: lake
        catalogs:
          - name: lake
            type: sql
            uri: sqlite:///{tmp_path}/c.db
            warehouse: {tmp_path}/wh
            table-default.format-version: 3
            table-default.owner: data-team
            table-override.write.delete.mode: copy-on-write
    """), source=str(tmp_path / "tablestore.yaml"))
    catalog = config.catalog("lake").load()
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", ROWS.schema, properties={"write.delete.mode": "merge-on-read"})
    assert (table.metadata.format_version, table.metadata.next_row_id) == (3, 0)
    assert table.properties == {"owner": "data-team", "write.delete.mode": "copy-on-write"}
    table.append(ROWS)  # and it takes rows
    assert catalog.load_table("db.t").metadata.next_row_id == 3
    # A table that asks for v2 gets it.
    assert catalog.create_table("db.v2", ROWS.schema, format_version=2).metadata.format_version == 2
    session = SqlSession(config)
    session.execute("CREATE TABLE db.sql_made (id BIGINT)")
    assert catalog.load_table("db.sql_made").metadata.format_version == 3
