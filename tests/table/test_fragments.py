"""Fragments: listing, the schema a file was written with, pickling, lineage, and committing
rewritten fragments in one snapshot with validation against concurrent changes. On SQLite; the
concurrent changes on every catalog of the matrix."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tablestore.catalog.base import Catalog
from tablestore.errors import CommitConflictError, SchemaError, ValidationError
from tablestore.spec.metadata.update_models import (
    AddSchemaUpdate,
    AssertCurrentSchemaId,
    SetCurrentSchemaUpdate,
)
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import NestedField, StringType
from tablestore.table import Table
from tablestore.table.ops.column_merge import LINEAGE_KEY, Fragment
from tablestore.table.update.transaction import FixedChange
from tests.conftest import ON_THE_CATALOG_MATRIX


@pytest.fixture
def db(catalog: Catalog) -> Catalog:
    """The test's catalog (``tests/table/conftest.py``) with the namespace ``db``."""
    catalog.create_namespace("db")
    return catalog


def users(lo: int, hi: int, country: str = "de") -> pa.Table:
    ids = list(range(lo, hi + 1))
    return pa.table({"user_id": pa.array(ids, pa.int64()), "name": [f"u{i}" for i in ids],
                     "country": [country] * len(ids)})


@pytest.fixture
def table(db: Catalog) -> Table:
    t = db.create_table("db.users", schema=users(1, 1).schema, partition_by=["country"])
    t.append(users(1, 100, "de"))
    t.append(users(101, 200, "fr"))
    return t


def test_fragments_list_files_with_partition_count_and_written_schema(table: Table) -> None:
    fragments = table.fragments()
    assert sorted((f.partition, f.record_count) for f in fragments) == [(("de",), 100), (("fr",), 100)]
    assert {f.id for f in fragments} == {t.file.file_path for t in table.scan().plan_files()}
    assert all(f.schema.schema_id == 0 and f.delete_files == () and f.lineage is None for f in fragments)
    assert [f.partition for f in table.fragments(filter="country = 'fr'")] == [("fr",)]


def test_fragment_schema_is_the_one_its_file_was_written_with(table: Table) -> None:
    evolved = Schema((*table.schema().fields, NestedField(4, "email", StringType(), False)), 1)
    table.transaction().add_change(FixedChange([AssertCurrentSchemaId(current_schema_id=0)], [AddSchemaUpdate(schema_=evolved, last_column_id=4), SetCurrentSchemaUpdate(schema_id=-1)])).commit_transaction()
    table.append(pa.table({"user_id": pa.array([300], pa.int64()), "name": ["x"], "country": ["nl"],
                           "email": ["x@y"]}))
    by_partition = {f.partition: f.schema.schema_id for f in table.fragments()}
    assert by_partition == {("de",): 0, ("fr",): 0, ("nl",): 1}


def test_fragments_pickle_and_merge_after_the_round_trip(table: Table) -> None:
    fragments = pickle.loads(pickle.dumps(table.fragments(filter="country = 'de'")))
    assert isinstance(fragments[0], Fragment) and fragments[0].record_count == 100
    source = pa.table({"user_id": pa.array([5, 6], pa.int64()), "segment": ["a", "b"]})
    merged = pickle.loads(pickle.dumps(fragments[0].merge_columns(source, on="user_id")))
    assert merged.replaces == fragments[0].id == merged.lineage
    assert merged.record_count == 100 and merged.schema.find_field("segment").field_id == 4


def test_a_merged_fragment_records_the_fragment_it_replaces(table: Table) -> None:
    (de,) = table.fragments(filter="country = 'de'")
    merged = de.merge_columns(pa.table({"user_id": [1, 2], "segment": ["a", "b"]}), on="user_id")
    fs, path = table.io.filesystem_for(merged.id)
    with fs.open_input_file(path) as f:
        assert pq.read_schema(f).metadata[LINEAGE_KEY.encode()] == de.id.encode()
    rows = merged.to_arrow()
    assert rows.column_names == ["user_id", "name", "country", "segment"]
    assert rows.slice(0, 3).column("segment").to_pylist() == ["a", "b", None]
    table.commit_fragments([merged])
    (after,) = table.fragments(filter="country = 'de'")
    assert after.id == merged.id and after.lineage == de.id and after.schema.schema_id == 1


def test_fragments_merged_separately_commit_in_one_snapshot(table: Table) -> None:
    source = pa.table({"user_id": pa.array([7, 150], pa.int64()), "segment": ["de-7", "fr-150"]})
    merged = [f.merge_columns(source, on="user_id") for f in table.fragments()]
    before = len(table.snapshots())
    snapshot = table.commit_fragments(merged)
    assert snapshot is not None and len(table.snapshots()) == before + 1
    assert snapshot.summary["deleted-data-files"] == "2" and snapshot.summary["added-data-files"] == "2"
    assert table.schema().column_names[-1] == "segment" and snapshot.schema_id == table.metadata.current_schema_id
    rows = {r["user_id"]: r["segment"] for r in table.scan().to_arrow().to_pylist()}
    assert rows[7] == "de-7" and rows[150] == "fr-150" and rows[8] is None and len(rows) == 200


@ON_THE_CATALOG_MATRIX
def test_a_concurrent_delete_of_a_merged_fragment_fails_the_commit(table: Table) -> None:
    merged = [f.merge_columns(pa.table({"user_id": [3, 103], "segment": ["x", "y"]}), on="user_id")
              for f in table.fragments()]
    other = table.catalog.load_table("db.users")  # another writer
    assert other.delete("user_id = 104") == 1
    head = table.refresh().current_snapshot()
    with pytest.raises(CommitConflictError, match="removed by a concurrent commit"):
        table.commit_fragments(merged)
    table.refresh()
    assert table.current_snapshot() == head and "segment" not in table.schema().column_names
    for f in merged:  # the rewritten files of the failed commit are cleaned up
        assert not table.io.new_input(f.id).exists()


@ON_THE_CATALOG_MATRIX
def test_a_concurrent_append_does_not_conflict(table: Table) -> None:
    merged = [f.merge_columns(pa.table({"user_id": [3], "segment": ["x"]}), on="user_id")
              for f in table.fragments(filter="country = 'de'")]
    table.catalog.load_table("db.users").append(users(500, 509, "nl"))
    table.commit_fragments(merged)
    rows = {r["user_id"]: r["segment"] for r in table.refresh().scan().to_arrow().to_pylist()}
    assert len(rows) == 210 and rows[3] == "x" and rows[505] is None


@ON_THE_CATALOG_MATRIX
def test_a_concurrent_schema_change_fails_the_commit(table: Table) -> None:
    merged = [f.merge_columns(pa.table({"user_id": [3], "segment": ["x"]}), on="user_id")
              for f in table.fragments(filter="country = 'de'")]
    other = table.catalog.load_table("db.users")
    evolved = Schema((*other.schema().fields, NestedField(4, "email", StringType(), False)), 1)
    other.transaction().add_change(FixedChange([AssertCurrentSchemaId(current_schema_id=0)], [AddSchemaUpdate(schema_=evolved, last_column_id=4), SetCurrentSchemaUpdate(schema_id=-1)])).commit_transaction()
    with pytest.raises(CommitConflictError, match="schema changed"):
        table.commit_fragments(merged)


def test_commit_fragments_rejects_unrewritten_and_mixed_fragments(table: Table) -> None:
    fragments = table.fragments()
    with pytest.raises(ValidationError, match="is not a rewrite"):
        table.commit_fragments(fragments)
    a = fragments[0].merge_columns(pa.table({"user_id": [1], "segment": ["x"]}), on="user_id")
    b = fragments[1].merge_columns(pa.table({"user_id": [101], "tier": ["y"]}), on="user_id")
    with pytest.raises(ValidationError, match="different plans or merges"):
        table.commit_fragments([a, b])
    with pytest.raises(ValidationError, match="replace the same fragment"):
        table.commit_fragments([a, a])
    assert len(table.refresh().snapshots()) == 2


def test_fragment_merge_errors_name_the_problem(table: Table) -> None:
    (de,) = table.fragments(filter="country = 'de'")
    with pytest.raises(SchemaError, match="already has a column 'name'; use update_columns"):
        de.merge_columns(pa.table({"user_id": [1], "name": ["x"]}), on="user_id")
    with pytest.raises(SchemaError, match="has no column 'tier'; use merge_columns"):
        de.update_columns(pa.table({"user_id": [1], "tier": ["x"]}), on="user_id", columns=["tier"])
    with pytest.raises(SchemaError, match="source has no key column 'user_id'"):
        de.merge_columns(pa.table({"id": [1], "tier": ["x"]}), on="user_id")
    with pytest.raises(ValidationError, match="must be a pyarrow Table"):
        de.merge_columns([{"user_id": 1}], on="user_id")
