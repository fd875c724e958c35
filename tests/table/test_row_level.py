"""Row-level DELETE, UPDATE and MERGE through the Python API on the local engine, in both modes, on
SQLite; the concurrent writers (conflicts and isolation levels) on every catalog of the matrix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

from tablestore.catalog.base import Catalog
from tablestore.errors import CommitConflictError, SchemaError, ValidationError
from tablestore.spec.manifests.manifest import DataFile, ManifestContent, read_manifest, snapshot_manifests
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import LongType, NestedField, StringType
from tablestore.table import Table
from tests.conftest import ON_THE_CATALOG_MATRIX

MODES = ["copy-on-write", "merge-on-read"]


@pytest.fixture
def db(catalog: Catalog) -> Catalog:
    """The test's catalog (``tests/table/conftest.py``) with the namespace ``db``."""
    catalog.create_namespace("db")
    return catalog


def _mode_properties(mode: str, isolation: str | None = None) -> dict[str, str]:
    props = {f"write.{op}.mode": mode for op in ("delete", "update", "merge")}
    if isolation:
        props.update({f"write.{op}.isolation-level": isolation for op in ("delete", "update", "merge")})
    return props


def _users(catalog: Any, mode: str, name: str = "user", isolation: str | None = None,
           format_version: int = 2) -> Table:
    table = catalog.create_table(
        f"db.{name}", schema=pa.schema([("id", pa.int64()), ("name", pa.string()), ("region", pa.string())]),
        partition_by=["region"],
        properties={**_mode_properties(mode, isolation), "format-version": str(format_version)},
    )
    table.append(pa.table({"id": pa.array(range(1, 21), pa.int64()), "name": [f"n{i}" for i in range(1, 21)],
                           "region": ["eu" if i % 2 else "us" for i in range(1, 21)]}))
    return table


def _rows(table: Table) -> list[tuple[Any, ...]]:
    data = table.scan().to_arrow()
    return sorted(zip(*(data.column(n).to_pylist() for n in data.column_names), strict=True))


def _pyiceberg_rows(table: Table) -> list[tuple[Any, ...]]:
    data = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
    return sorted(zip(*(data.column(n).to_pylist() for n in data.column_names), strict=True))


def _delete_manifest_files(table: Table) -> list[DataFile]:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    out: list[DataFile] = []
    for m in snapshot_manifests(table.io, snapshot):
        if m.content == ManifestContent.DELETES:
            out.extend(e.data_file for e in read_manifest(table.io, m))
    return out


@pytest.mark.parametrize("mode", MODES)
def test_design_statements_give_equal_results_and_counts_in_both_modes(db: Catalog, mode: str) -> None:
    table = _users(db, mode)
    assert table.delete("id = -1") == 0
    assert table.update({"name": "'u1'"}, "id > 10") == 10
    assert table.delete("id > 17") == 3
    expected = sorted([(i, f"n{i}", "eu" if i % 2 else "us") for i in range(1, 11)]
                      + [(i, "u1", "eu" if i % 2 else "us") for i in range(11, 18)])
    assert _rows(table) == expected
    assert _pyiceberg_rows(table) == expected


def test_merge_on_read_writes_position_delete_files_copy_on_write_rewrites(db: Catalog) -> None:
    catalog = db
    mor = _users(catalog, "merge-on-read", "mor")
    cow = _users(catalog, "copy-on-write", "cow")
    for table in (mor, cow):
        assert table.delete("id IN (3, 4)") == 2
    summary = mor.current_snapshot().summary  # type: ignore[union-attr]
    assert summary["operation"] == "delete"
    assert summary["added-position-deletes"] == "2"
    assert summary["added-delete-files"] == "2"
    assert "added-data-files" not in summary
    deletes = _delete_manifest_files(mor)
    assert sorted(f.content.value for f in deletes) == [1, 1]
    assert all(f.record_count == 1 for f in deletes)
    summary = cow.current_snapshot().summary  # type: ignore[union-attr]
    assert summary["operation"] == "overwrite"
    assert summary["deleted-data-files"] == "2" and summary["added-data-files"] == "2"
    assert "added-delete-files" not in summary
    assert _rows(mor) == _rows(cow) == _pyiceberg_rows(mor)


@pytest.mark.parametrize("mode", MODES)
def test_deleting_whole_partitions_writes_no_data_or_delete_file(db: Catalog, mode: str) -> None:
    table = _users(db, mode)
    assert table.delete("region = 'us'") == 10
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary["operation"] == "delete"
    assert summary["deleted-data-files"] == "1" and summary["deleted-records"] == "10"
    assert "added-data-files" not in summary and "added-delete-files" not in summary
    assert [r[0] for r in _rows(table)] == list(range(1, 21, 2))


def test_a_range_covering_whole_files_by_bounds_is_dropped_in_metadata(db: Catalog) -> None:
    table = _users(db, "merge-on-read")
    assert table.delete("id >= 1 AND region = 'eu'") == 10
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert "added-delete-files" not in summary and summary["deleted-data-files"] == "1"


@pytest.mark.parametrize("mode", MODES)
def test_update_with_expressions_and_a_second_update_on_top_of_deletes(db: Catalog, mode: str) -> None:
    table = _users(db, mode)
    assert table.delete("id = 5") == 1
    assert table.update({"name": "upper(name) || '-' || CAST(id * 2 AS STRING)"}, "id <= 6") == 5
    assert table.update({"name": "CASE WHEN id % 2 = 0 THEN lower(name) ELSE name END"}, "region = 'us'") == 10
    rows = {r[0]: r[1] for r in _rows(table)}
    assert rows[1] == "N1-2" and rows[2] == "n2-4" and rows[6] == "n6-12" and rows[7] == "n7"
    assert 5 not in rows and len(rows) == 19
    assert sorted(_pyiceberg_rows(table)) == _rows(table)


def test_updating_the_partition_column_moves_rows(db: Catalog) -> None:
    table = _users(db, "merge-on-read")
    assert table.update({"region": "'apac'"}, "id IN (1, 2)") == 2
    assert [r for r in _rows(table) if r[2] == "apac"] == [(1, "n1", "apac"), (2, "n2", "apac")]
    assert table.scan(filter="region = 'apac'").to_arrow().num_rows == 2


@pytest.mark.parametrize("mode", MODES)
def test_merge_updates_deletes_and_inserts_with_counts(db: Catalog, mode: str) -> None:
    table = _users(db, mode)
    source = pa.table({"id": pa.array([1, 2, 3, 100, 101], pa.int64()), "name": ["a", "b", "drop", "new", "skip"],
                       "region": ["eu", "us", "eu", "eu", "us"]})
    result = (table.merge(source, on="t.id = s.id")
              .when_matched_delete("s.name = 'drop'")
              .when_matched_update({"name": "concat(s.name, '!')"})
              .when_not_matched_insert_all("s.name <> 'skip'")
              .execute())
    assert (result.updated, result.deleted, result.inserted, result.affected) == (2, 1, 1, 4)
    rows = {r[0]: r for r in _rows(table)}
    assert rows[1] == (1, "a!", "eu") and rows[2] == (2, "b!", "us") and 3 not in rows
    assert rows[100] == (100, "new", "eu") and 101 not in rows and len(rows) == 20
    assert _pyiceberg_rows(table) == _rows(table)


def test_merge_with_several_source_rows_for_one_target_row_fails_and_commits_nothing(db: Catalog) -> None:
    table = _users(db, "merge-on-read")
    before = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    source = pa.table({"id": pa.array([1, 1], pa.int64()), "name": ["a", "b"]})
    with pytest.raises(ValidationError, match="several rows of the source"):
        table.merge(source, on="t.id = s.id").when_matched_update({"name": "s.name"}).execute()
    assert table.refresh().current_snapshot().snapshot_id == before  # type: ignore[union-attr]


def test_merge_on_an_integer_key_never_matches_null_keys(db: Catalog) -> None:
    # The one-integer-key path matches by binary search over the sorted source keys.
    table = db.create_table("db.nullable_keys", schema=pa.schema([("k", pa.int64()), ("v", pa.string())]))
    table.append(pa.table({"k": pa.array([None, 1, 5, 9], pa.int64()), "v": ["n", "a", "b", "c"]}))
    source = pa.table({"k": pa.array([9, None, 0, 1], pa.int64()), "v": ["C", "N", "Z", "A"]})
    result = table.merge(source, on="t.k = s.k").when_matched_update_all().when_not_matched_insert_all().execute()
    assert (result.updated, result.inserted) == (2, 2)
    assert sorted(table.scan().to_arrow().to_pylist(), key=lambda r: (r["k"] is None, r["k"] or 0, r["v"])) == [
        {"k": 0, "v": "Z"}, {"k": 1, "v": "A"}, {"k": 5, "v": "b"}, {"k": 9, "v": "C"},
        {"k": None, "v": "N"}, {"k": None, "v": "n"}]


def test_merge_insert_values_and_a_residual_on_condition(db: Catalog) -> None:
    table = _users(db, "copy-on-write")
    source = pa.table({"key": pa.array([1, 2, 50], pa.int64()), "label": ["x", "y", "z"]})
    result = (table.merge(source, on="t.id = s.key AND t.region = 'eu'")
              .when_matched_update({"name": "s.label"})
              .when_not_matched_insert({"id": "s.key + 1000", "name": "upper(s.label)", "region": "'apac'"})
              .execute())
    # id 2 is in 'us', so it does not match and is inserted as 1002.
    assert (result.updated, result.inserted) == (1, 2)
    rows = {r[0]: r for r in _rows(table)}
    assert rows[1] == (1, "x", "eu") and rows[1002] == (1002, "Y", "apac") and rows[1050] == (1050, "Z", "apac")


@pytest.mark.parametrize("mode", MODES)
def test_bad_updates_give_clear_errors_and_commit_nothing(db: Catalog, mode: str) -> None:
    catalog = db
    table = _users(catalog, mode)
    before = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    with pytest.raises(SchemaError, match="name"):
        table.update({"name": "id + 1"}, "id = 1")  # a number into a string column
    with pytest.raises(SchemaError, match="id"):
        table.update({"id": "'abc'"}, "id = 1")  # text into a bigint column
    with pytest.raises(SchemaError, match="unknown column 'nope'"):
        table.update({"nope": "1"}, "id = 1")
    with pytest.raises(SchemaError, match="unknown column 'missing'"):
        table.update({"name": "missing"}, "id = 1")
    with pytest.raises(ValidationError, match="local engine does not evaluate"):
        table.update({"name": "sha1(name)"}, "id = 1")
    assert table.refresh().current_snapshot().snapshot_id == before  # type: ignore[union-attr]
    assert len(list(Path(table.location.removeprefix("file://")).rglob("*-deletes.parquet"))) == 0


def test_updating_a_primary_key_column_is_rejected(db: Catalog) -> None:
    catalog = db
    schema = Schema((NestedField(1, "id", LongType(), required=True), NestedField(2, "name", StringType())),
                    identifier_field_ids=(1,))
    table = catalog.create_table("db.pk", schema=schema)
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]},
                          schema=pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])))
    before = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    with pytest.raises(ValidationError, match="primary key"):
        table.update({"id": "id + 10"}, "id = 1")
    with pytest.raises(ValidationError, match="primary key"):
        table.merge(pa.table({"id": pa.array([1], pa.int64())}), on="t.id = s.id") \
            .when_matched_update({"id": "s.id + 1"}).execute()
    assert table.update({"name": "'z'"}, "id = 1") == 1
    assert table.refresh().current_snapshot().snapshot_id != before  # type: ignore[union-attr]


def _stale_copy(catalog: Any, name: str) -> Table:
    return catalog.load_table(f"db.{name}")


@ON_THE_CATALOG_MATRIX
@pytest.mark.parametrize("mode", MODES)
def test_concurrent_delete_of_the_same_rows_conflicts(db: Catalog, mode: str) -> None:
    catalog = db
    first = _users(catalog, mode)
    second = _stale_copy(catalog, "user")  # read the same snapshot
    assert first.delete("id IN (1, 3)") == 2
    before = first.current_snapshot().snapshot_id  # type: ignore[union-attr]
    with pytest.raises(CommitConflictError):
        second.delete("id IN (3, 5)")
    assert second.refresh().current_snapshot().snapshot_id == before  # type: ignore[union-attr]
    assert 5 in [r[0] for r in _rows(second)]


@ON_THE_CATALOG_MATRIX
def test_serializable_delete_conflicts_with_a_concurrent_append_of_matching_rows(db: Catalog) -> None:
    catalog = db
    table = _users(catalog, "merge-on-read")
    stale = _stale_copy(catalog, "user")
    table.append(pa.table({"id": pa.array([30], pa.int64()), "name": ["late"], "region": ["eu"]}))
    with pytest.raises(CommitConflictError, match="serializable"):
        stale.update({"name": "'x'"}, "region = 'eu' AND id > 15")


@ON_THE_CATALOG_MATRIX
def test_snapshot_isolation_allows_a_concurrent_append_of_matching_rows(db: Catalog) -> None:
    catalog = db
    table = _users(catalog, "merge-on-read", isolation="snapshot")
    stale = _stale_copy(catalog, "user")
    table.append(pa.table({"id": pa.array([30], pa.int64()), "name": ["late"], "region": ["eu"]}))
    assert stale.delete("region = 'eu' AND id > 15") == 2
    ids = [r[0] for r in _rows(stale)]
    assert 30 in ids and 17 not in ids and 19 not in ids


@ON_THE_CATALOG_MATRIX
@pytest.mark.parametrize("mode", MODES)
def test_a_concurrent_append_to_another_partition_does_not_conflict(db: Catalog, mode: str) -> None:
    catalog = db
    table = _users(catalog, mode)
    stale = _stale_copy(catalog, "user")
    table.append(pa.table({"id": pa.array([40], pa.int64()), "name": ["other"], "region": ["us"]}))
    assert stale.delete("region = 'eu' AND id < 6") == 3
    ids = [r[0] for r in _rows(stale)]
    assert 40 in ids and not {1, 3, 5} & set(ids)
    assert len(stale.snapshots()) == 3  # append, the concurrent append, the delete


def test_isolation_and_mode_properties_are_checked(db: Catalog) -> None:
    catalog = db
    table = _users(catalog, "copy-on-write")
    table.update_properties({"write.delete.mode": "merge-on-write"})
    with pytest.raises(ValidationError, match="write.delete.mode"):
        table.delete("id = 1")
    table.update_properties({"write.delete.mode": "merge-on-read", "write.delete.isolation-level": "strict"})
    with pytest.raises(ValidationError, match="isolation-level"):
        table.delete("id = 1")


@pytest.mark.parametrize("mode", MODES)
def test_upsert_with_update_all_and_insert_all(db: Catalog, mode: str) -> None:
    table = _users(db, mode)
    source = pa.table({"id": pa.array([2, 4, 99], pa.int64()), "name": ["two", "four", "ninety-nine"],
                       "region": ["us", "eu", "eu"]})
    result = table.merge(source, on="t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute()
    assert (result.updated, result.deleted, result.inserted) == (2, 0, 1)
    rows = {r[0]: r for r in _rows(table)}
    assert rows[2] == (2, "two", "us") and rows[4] == (4, "four", "eu") and rows[99] == (99, "ninety-nine", "eu")
    assert rows[3] == (3, "n3", "eu") and len(rows) == 21
    assert _pyiceberg_rows(table) == _rows(table)


@pytest.mark.parametrize("format_version", [2, 3])
@pytest.mark.parametrize("mode", MODES)
def test_an_upsert_that_matches_every_row_of_a_file_keeps_every_column(db: Catalog, mode: str,
                                                                      format_version: int) -> None:
    # Merge-on-read reads only the keys of a file; a file whose every row is updated is dropped
    # and its rows written anew, and those rows must be whole (they once kept only the keys).
    table = _users(db, mode, format_version=format_version)
    source = pa.table({"id": pa.array(range(1, 21, 2), pa.int64()), "name": [f"u{i}" for i in range(1, 21, 2)],
                       "region": ["eu"] * 10})
    assert table.metadata.format_version == format_version
    row_ids = table.scan(columns=["id", "_row_id"]).to_arrow().sort_by("id") if format_version == 3 else None
    result = table.merge(source, on="t.id = s.id").when_matched_update_all().execute()
    assert (result.updated, result.deleted, result.inserted) == (10, 0, 0)
    rows = _rows(table)
    assert rows == sorted([(i, f"u{i}" if i % 2 else f"n{i}", "eu" if i % 2 else "us") for i in range(1, 21)])
    assert _pyiceberg_rows(table) == rows
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary["deleted-data-files"] == "1" and "added-delete-files" not in summary
    if row_ids is not None:  # the rewritten rows keep their row ids
        assert table.scan(columns=["id", "_row_id"]).to_arrow().sort_by("id").equals(row_ids)
        assert row_ids.column("_row_id").null_count == 0
