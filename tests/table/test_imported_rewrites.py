"""Rewrites of tables whose files carry no Parquet field ids (registered by MSCK REPAIR or
``import_files``/add_files), after a column rename: compaction, DELETE, UPDATE and a column
merge must find every column through the table's name mapping and keep every value, and
pyiceberg must read the result the same. On SQLite; the import itself over REST too (on the REST
leg the Hive tree lies under the service's warehouse: by default the service refuses table
locations outside it), as is that refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable

from tablestore.catalog.base import Catalog
from tablestore.errors import ValidationError
from tablestore.spec.schemas.name_mapping import DEFAULT_NAME_MAPPING, NameMapping
from tablestore.table import Table
from tablestore.table.ops.external import create_external_table, repair_table
from tablestore.table.ops.import_files import import_files
from tests.conftest import OVER_REST, CatalogTarget

SCHEMA = pa.schema([("id", pa.int64()), ("user", pa.string()), ("cnt", pa.int32()), ("country", pa.string())])
DATA = pa.table({
    "id": list(range(1, 9)),
    "user": [f"u{i}" for i in range(1, 9)],
    "cnt": pa.array([i * 10 for i in range(1, 9)], pa.int32()),
    "country": ["de", "fr"] * 4,
}, schema=SCHEMA)


def original_rows() -> list[dict[str, Any]]:
    """DATA with the renamed columns' new names (user -> name, cnt -> clicks)."""
    return [{"id": r["id"], "name": r["user"], "clicks": r["cnt"], "country": r["country"]} for r in DATA.to_pylist()]


@pytest.fixture
def catalog(catalog: Catalog) -> Catalog:
    """The test's catalog (``tests/table/conftest.py``) with the namespace ``db``."""
    catalog.create_namespace("db")
    return catalog


@pytest.fixture
def ext_root(catalog_target: CatalogTarget, tmp_path: Path) -> Path:
    """Where the other tool's files go. The REST service refuses a table location outside its
    warehouse unless ``server.allow-external-locations`` is set (see
    ``test_the_service_refuses_an_external_table_outside_its_warehouse``), so on the ``rest`` leg
    the Hive tree lies under the service's warehouse; elsewhere outside the catalog's."""
    if catalog_target.kind == "rest":
        return Path(catalog_target.warehouse.location) / "ext"
    return tmp_path / "ext"


def has_field_ids(path: str) -> bool:
    schema = pq.read_schema(path.removeprefix("file://"))
    return any(b"PARQUET:field_id" in (f.metadata or {}) for f in schema)


def imported_table(catalog: Catalog, root: Path, how: str) -> Table:
    """A table over plain pyarrow files (no field ids), two rows per file, then two columns renamed."""
    if how == "msck":
        # Hive layout: country=de/, country=fr/, two files each; MSCK REPAIR registers them.
        ds.write_dataset(DATA, root, format="parquet", max_rows_per_file=2, max_rows_per_group=2,
                         partitioning=ds.partitioning(pa.schema([("country", pa.string())]), flavor="hive"))
        table = create_external_table(catalog, "db.t", SCHEMA, ["country"], str(root))
        repair_table(table)
    else:
        # add_files: a table created as usual, with files written elsewhere by another tool.
        root.mkdir(parents=True)
        paths = []
        for i in range(0, DATA.num_rows, 2):
            paths.append(str(root / f"part-{i}.parquet"))
            pq.write_table(DATA.slice(i, 2), paths[-1])
        table = catalog.create_table("db.t", schema=SCHEMA)
        import_files(table, paths)
    files = [t.file.file_path for t in table.scan().plan_files()]
    assert len(files) == 4 and not any(has_field_ids(p) for p in files)
    with table.update_schema() as update:
        update.rename_column("user", "name")
        update.rename_column("cnt", "clicks")
    assert rows(table) == original_rows()
    return table


def rows(table: Table) -> list[dict[str, Any]]:
    return sorted(table.refresh().scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def pyiceberg_rows(table: Table) -> list[dict[str, Any]]:
    theirs = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
    return sorted(theirs.to_pylist(), key=lambda r: r["id"])


@OVER_REST
@pytest.mark.parametrize("how", ["msck", "add_files"])
def test_import_keeps_the_name_mapping_so_a_rename_reads_old_files(catalog: Catalog, ext_root: Path,
                                                                   how: str) -> None:
    table = imported_table(catalog, ext_root, how)
    mapping = NameMapping.from_json(table.properties[DEFAULT_NAME_MAPPING])
    assert {f.field_id: f.names[0] for f in mapping.fields} == {1: "id", 2: "user", 3: "cnt", 4: "country"}
    assert pyiceberg_rows(table) == original_rows()


@pytest.mark.parametrize("how", ["msck", "add_files"])
def test_compaction_keeps_every_value(catalog: Catalog, ext_root: Path, how: str) -> None:
    table = imported_table(catalog, ext_root, how)
    result = table.maintenance().rewrite_data_files(options={"rewrite-all": "true"})
    assert result.rewritten_data_files_count == 4
    files = [t.file.file_path for t in table.refresh().scan().plan_files()]
    assert len(files) == (2 if how == "msck" else 1)  # one per partition
    assert all(has_field_ids(p) for p in files)  # rewritten files carry the ids: no mapping needed
    assert rows(table) == original_rows()
    assert pyiceberg_rows(table) == original_rows()


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
@pytest.mark.parametrize("how", ["msck", "add_files"])
def test_delete_by_a_renamed_column_keeps_the_other_rows(catalog: Catalog, ext_root: Path, how: str,
                                                         mode: str) -> None:
    table = imported_table(catalog, ext_root, how)
    table.update_properties({"write.delete.mode": mode})
    assert table.delete("clicks = 30") == 1
    expected = [r for r in original_rows() if r["clicks"] != 30]
    assert rows(table) == expected
    assert pyiceberg_rows(table) == expected


@pytest.mark.parametrize("how", ["msck", "add_files"])
def test_update_of_a_renamed_column_keeps_every_value(catalog: Catalog, ext_root: Path, how: str) -> None:
    table = imported_table(catalog, ext_root, how)
    assert table.update({"clicks": "clicks + 1"}, "name IN ('u1', 'u4')") == 2
    expected = [{**r, "clicks": r["clicks"] + (1 if r["name"] in ("u1", "u4") else 0)} for r in original_rows()]
    assert rows(table) == expected
    assert pyiceberg_rows(table) == expected


@pytest.mark.parametrize("how", ["msck", "add_files"])
def test_column_merge_keeps_every_value(catalog: Catalog, ext_root: Path, how: str) -> None:
    table = imported_table(catalog, ext_root, how)
    table.merge_columns(pa.table({"id": [2, 3, 8], "tier": ["gold", "silver", "gold"]}), on="id")
    tiers = {2: "gold", 3: "silver", 8: "gold"}
    expected = [{**r, "tier": tiers.get(r["id"])} for r in original_rows()]
    assert rows(table) == expected
    assert pyiceberg_rows(table) == expected


def test_partition_rename_moves_every_value(catalog: Catalog, ext_root: Path) -> None:
    from tablestore.table.ops.partitions import rename_partition

    table = imported_table(catalog, ext_root, "msck")
    assert rename_partition(table, [("country", "de")], [("country", "at")]) == 4
    expected = [{**r, "country": "at" if r["country"] == "de" else r["country"]} for r in original_rows()]
    assert rows(table) == expected
    assert pyiceberg_rows(table) == expected


def test_files_written_after_a_rename_match_by_the_new_name(catalog: Catalog, ext_root: Path,
                                                            tmp_path: Path) -> None:
    table = imported_table(catalog, ext_root, "add_files")
    mapping = NameMapping.from_json(table.properties[DEFAULT_NAME_MAPPING])
    assert [(f.field_id, list(f.names)) for f in mapping.fields] == [
        (1, ["id"]), (2, ["user", "name"]), (3, ["cnt", "clicks"]), (4, ["country"])]
    # Another tool writes a file with the columns' new names (and no field ids).
    later = tmp_path / "later.parquet"
    pq.write_table(pa.table({"id": [9], "name": ["u9"], "clicks": pa.array([90], pa.int32()), "country": ["nl"]}),
                   later)
    import_files(table, [str(later)])
    expected = [*original_rows(), {"id": 9, "name": "u9", "clicks": 90, "country": "nl"}]
    assert rows(table) == expected
    assert pyiceberg_rows(table) == expected


@pytest.mark.parametrize("catalog_target", ["rest"], indirect=True)
def test_the_service_refuses_an_external_table_outside_its_warehouse(catalog: Catalog, tmp_path: Path) -> None:
    """The matrix's REST leg runs the service with its default settings: a table location outside
    the warehouse is refused before anything is committed (the SQL catalogs accept it)."""
    with pytest.raises(ValidationError, match=r"table location '.*/outside' is outside the warehouse .*; put it "
                       r"under the warehouse \(or set server.allow-external-locations: true\)"):
        create_external_table(catalog, "db.t", SCHEMA, ["country"], str(tmp_path / "outside"))
    assert catalog.list_tables("db") == []
