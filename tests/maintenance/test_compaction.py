"""rewrite_data_files, rewrite_position_deletes and rewrite_manifests: same rows, fewer files,
validated against concurrent commits. On SQLite; bin-packing on S3 too, and the races on every
catalog of the matrix."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import tablestore
from tablestore.errors import CommitConflictError, ValidationError
from tablestore.spec.expressions.expression_tree import AlwaysTrue
from tablestore.spec.metadata.table_metadata import Snapshot
from tablestore.table.read.scan import plan_files
from tests.conftest import ON_EVERY_STORAGE, ON_THE_CATALOG_MATRIX
from tests.maintenance.helpers import SCHEMA, add_position_deletes, rows


def _small_files(catalog: tablestore.Catalog, appends: int = 8) -> tablestore.Table:
    table = catalog.create_table("db.t", schema=SCHEMA, partition_by=["country"])
    for i in range(appends):
        table.append(rows(12, i * 12))
    return table


def _ids(table: tablestore.Table) -> list[int]:
    return sorted(table.scan().to_arrow().column("user_id").to_pylist())


def _data_files(table: tablestore.Table) -> list[dict[str, Any]]:
    return [f for f in table.inspect.files().to_pylist() if f["content"] == 0]


@ON_EVERY_STORAGE
def test_binpack_compacts_each_partition_and_keeps_rows(db_catalog: tablestore.Catalog) -> None:
    table = _small_files(db_catalog)
    before = _ids(table)
    assert len(_data_files(table)) == 24

    result = table.maintenance().rewrite_data_files(options={"min-input-files": 2})

    assert result.rewritten_data_files_count == 24 and result.added_data_files_count == 3
    assert result.rewritten_bytes_count > 0
    assert _ids(table.refresh()) == before
    files = _data_files(table)
    assert sorted(f["partition"]["country"] for f in files) == ["de", "fr", "it"]
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary["operation"] == "replace"
    assert table.scan(filter="country = 'fr'").count() == 32
    # Nothing left to do: a second run rewrites nothing and commits nothing.
    assert table.maintenance().rewrite_data_files(options={"min-input-files": 2}).rewritten_data_files_count == 0
    assert table.refresh().current_snapshot() == snapshot


def test_min_input_files_and_target_size_decide_what_is_rewritten(db_catalog: tablestore.Catalog) -> None:
    table = _small_files(db_catalog, appends=3)
    assert table.maintenance().rewrite_data_files().rewritten_data_files_count == 0  # 3 < 5 files a partition
    result = table.maintenance().rewrite_data_files(
        options={"min-input-files": "3", "target-file-size-bytes": "1"})
    assert result.rewritten_data_files_count == 9
    with pytest.raises(ValidationError, match="unknown rewrite_data_files option"):
        table.maintenance().rewrite_data_files(options={"min-inputs": 2})
    with pytest.raises(ValidationError, match="strategy"):
        table.maintenance().rewrite_data_files(strategy="zorder")


def test_sort_strategy_orders_rows_within_files(db_catalog: tablestore.Catalog) -> None:
    table = _small_files(db_catalog)
    table.maintenance().rewrite_data_files("sort", sort_order="user_id DESC", options={"min-input-files": 2})
    for f in _data_files(table.refresh()):
        import pyarrow.parquet as pq

        ids = pq.read_table(table.io.filesystem_for(f["file_path"])[1]).column("user_id").to_pylist()
        assert ids == sorted(ids, reverse=True)
    with pytest.raises(ValidationError, match="not in the table"):
        table.maintenance().rewrite_data_files("sort", sort_order="nope")
    with pytest.raises(ValidationError, match="sort order"):
        table.maintenance().rewrite_data_files("sort")


def test_compaction_applies_position_deletes_and_drops_dangling_ones(db_catalog: tablestore.Catalog) -> None:
    table = _small_files(db_catalog)
    task = plan_files(table.io, table.metadata, table.current_snapshot(), table.schema(), AlwaysTrue(),
                      table.engine)[0]
    add_position_deletes(table, task.file, [0, 1])
    expected = _ids(table)
    assert len(expected) == 94

    result = table.maintenance().rewrite_data_files(options={"min-input-files": 2, "remove-dangling-deletes": "true"})

    assert result.removed_delete_files_count == 1
    assert _ids(table.refresh()) == expected
    assert all(f["content"] == 0 for f in table.inspect.files().to_pylist())


def test_rewrite_position_deletes_merges_per_partition(db_catalog: tablestore.Catalog) -> None:
    table = _small_files(db_catalog, appends=4)
    tasks = plan_files(table.io, table.metadata, table.current_snapshot(), table.schema(), AlwaysTrue(),
                       table.engine)
    de = [t for t in tasks if t.file.partition == ("de",)]
    for t in de:
        add_position_deletes(table, t.file, [0])
    expected = _ids(table)
    table.delete(f"user_id IN ({','.join(str(i) for i in range(0, 12))})")  # rewrites de's first file
    expected = [i for i in expected if i >= 12]

    result = table.maintenance().rewrite_position_deletes(options={"min-input-files": 2})

    assert result.rewritten_delete_files_count == 4 and result.added_delete_files_count == 1
    assert _ids(table.refresh()) == expected
    deletes = [f for f in table.inspect.files().to_pylist() if f["content"] == 1]
    assert len(deletes) == 1 and deletes[0]["record_count"] == 3


def test_rewrite_manifests_clusters_into_one_manifest(db_catalog: tablestore.Catalog) -> None:
    table = _small_files(db_catalog)
    assert table.inspect.manifests().num_rows == 8
    expected = _ids(table)
    result = table.maintenance().rewrite_manifests()
    assert result.rewritten_manifests_count == 8 and result.added_manifests_count == 1
    assert table.refresh().inspect.manifests().num_rows == 1
    assert _ids(table) == expected


@ON_THE_CATALOG_MATRIX
def test_concurrent_append_during_compaction_does_not_conflict(db_catalog: tablestore.Catalog) -> None:
    table = _small_files(db_catalog)
    other = db_catalog.load_table("db.t")
    appended: list[Snapshot] = []

    def append_meanwhile(stage: str, done: int, total: int) -> None:
        if done == total and not appended:  # files rewritten, commit not yet made
            appended.append(other.append(rows(5, 1000)))

    table.maintenance().rewrite_data_files(options={"min-input-files": 2}, progress=append_meanwhile)

    assert appended
    assert _ids(table.refresh()) == sorted([*range(96), *range(1000, 1005)])
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary["operation"] == "replace"


@ON_THE_CATALOG_MATRIX
def test_concurrent_delete_of_compacted_rows_conflicts_naming_the_files(db_catalog: tablestore.Catalog) -> None:
    table = _small_files(db_catalog)
    other = db_catalog.load_table("db.t")

    def delete_meanwhile(stage: str, done: int, total: int) -> None:
        if done == total:
            other.refresh().delete("user_id = 7")  # copy-on-write: removes a file being compacted

    with pytest.raises(CommitConflictError, match=r"removed 1 file\(s\) this rewrite replaces: .*\.parquet"):
        table.maintenance().rewrite_data_files(options={"min-input-files": 2}, progress=delete_meanwhile)
    assert _ids(table.refresh()) == [i for i in range(96) if i != 7]


@ON_THE_CATALOG_MATRIX
def test_concurrent_position_delete_on_compacted_file_conflicts(db_catalog: tablestore.Catalog) -> None:
    table = _small_files(db_catalog)
    other = db_catalog.load_table("db.t")
    target = plan_files(table.io, table.metadata, table.current_snapshot(), table.schema(), AlwaysTrue(),
                        table.engine)[0].file

    def delete_meanwhile(stage: str, done: int, total: int) -> None:
        if done == total:
            add_position_deletes(other.refresh(), target, [0])

    with pytest.raises(CommitConflictError, match=f"deletes rows of {target.file_path}"):
        table.maintenance().rewrite_data_files(options={"min-input-files": 2}, progress=delete_meanwhile)
    assert len(_ids(table.refresh())) == 95


def test_compaction_of_an_empty_table_is_a_no_op(db_catalog: tablestore.Catalog) -> None:
    table = db_catalog.create_table("db.e", schema=pa.schema([("a", pa.int64())]))
    assert table.maintenance().rewrite_data_files().rewritten_data_files_count == 0
    assert table.maintenance().rewrite_manifests().added_manifests_count == 0
