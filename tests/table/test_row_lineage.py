"""Row lineage on format v3 tables (format/spec.md, "Row Lineage"): ``_row_id`` and
``_last_updated_sequence_number`` read as the spec inherits them, and kept by every rewrite.

The tables live in a SQLite catalog of their own: what is proved happens in data and manifest
files, which the catalog takes no part in.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.errors import SchemaError
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.expression_parser import to_expression
from tablestore.spec.expressions.expression_tree import AlwaysTrue
from tablestore.spec.schemas.row_lineage import LAST_UPDATED_SEQUENCE_NUMBER, ROW_ID, with_row_lineage
from tablestore.spec.schemas.schema import PARQUET_FIELD_ID
from tablestore.table import Table
from tablestore.table.ops.partitions import drop_partitions, rename_partition
from tablestore.table.read.data_files import RowGroupRange, read_task_table
from tablestore.table.read.scan import plan_appended_files

LINEAGE = ["_row_id", "_last_updated_sequence_number"]
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    catalog = SqlCatalog("lineage", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    return catalog


def rows(ids: list[int], prefix: str = "v") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{prefix}{i}" for i in ids]})


def lineage_by_id(table: Table, **scan: Any) -> dict[int, tuple[int | None, int | None]]:
    """id -> (_row_id, _last_updated_sequence_number) as a tablestore scan reads them."""
    data = table.refresh().scan(columns=["id", *LINEAGE], **scan).to_arrow().to_pylist()
    return {r["id"]: (r["_row_id"], r["_last_updated_sequence_number"]) for r in data}


def seq(table: Table) -> int:
    snapshot = table.refresh().current_snapshot()
    assert snapshot is not None
    return snapshot.sequence_number


def test_row_ids_inherit_from_first_row_id_and_position_and_sequence_numbers_from_the_file(
    catalog: SqlCatalog,
) -> None:
    table = catalog.create_table("db.t", SCHEMA, partition_by=["v"], format_version=3)
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "a"]}))
    table.append(pa.table({"id": pa.array([4, 5], pa.int64()), "v": ["b", "b"]}))
    # Snapshot 1 reserved ids 0-2 (partition a's file first: ids 0, 1; then b's: 2); snapshot 2 ids 3-4.
    files = {f["partition"]["v"] if f["first_row_id"] < 3 else "b2": f["first_row_id"]
             for f in table.inspect.data_files().to_pylist()}
    assert files == {"a": 0, "b": 2, "b2": 3}
    expected = {1: (0, 1), 3: (1, 1), 2: (2, 1), 4: (3, 2), 5: (4, 2)}
    assert lineage_by_id(table) == expected
    # A partition filter skips partition a's file, whose rows still count for b's ids; a column
    # filter (rows dropped after their positions are known) gives each row its own id.
    assert lineage_by_id(table, filter="v = 'b'") == {2: (2, 1), 4: (3, 2), 5: (4, 2)}
    assert lineage_by_id(table, filter="id >= 3") == {3: (1, 1), 4: (3, 2), 5: (4, 2)}
    # An incremental append scan's tasks carry the same inherited ids, partition-filtered too.
    md = table.refresh().metadata
    schema = table.schema()
    appended = plan_appended_files(table.io, md, md.snapshots[0].snapshot_id, md.snapshots[1].snapshot_id, schema,
                                   bind(schema, to_expression("v = 'b'")), table.engine)
    assert [t.file.first_row_id for t in appended] == [3]
    # The columns come in the caller's order, next to the table's; SELECT * style scans omit them.
    assert table.scan(columns=["_last_updated_sequence_number", "id"]).to_arrow().column_names == [
        "_last_updated_sequence_number", "id"]
    assert table.scan().to_arrow().column_names == ["id", "v"]


def test_a_split_of_a_file_counts_row_ids_from_the_start_of_the_file(catalog: SqlCatalog) -> None:
    table = catalog.create_table("db.split", SCHEMA, format_version=3,
                                 properties={"write.parquet.row-group-size-bytes": "1"})
    table.append(pa.concat_tables([rows([i]) for i in range(5)]))
    (task,) = table.scan().plan_files()
    assert pq.ParquetFile(task.file.file_path.removeprefix("file://")).metadata.num_row_groups == 5
    schema = table.schema()
    projected = with_row_lineage(schema)
    third_on = read_task_table(table.io, task.file, (), table.spec(), schema, projected, AlwaysTrue(),
                               row_groups=RowGroupRange(2, 5, 5), data_sequence_number=task.data_sequence_number)
    assert third_on.select(["id", *LINEAGE]).to_pylist() == [
        {"id": i, "_row_id": i, "_last_updated_sequence_number": 1} for i in (2, 3, 4)]


def test_rows_written_before_an_upgrade_read_null_until_a_v3_snapshot_assigns_ids(catalog: SqlCatalog) -> None:
    table = catalog.create_table("db.up", SCHEMA)
    table.append(rows([1, 2]))
    assert lineage_by_id(table) == {1: (None, None), 2: (None, None)}
    table.update_properties({"format-version": "3"})
    assert lineage_by_id(table) == {1: (None, None), 2: (None, None)}  # old snapshots keep no ids
    table.append(rows([3]))
    # The new manifest comes first in the list (id 0), the old one gets 1-2; the old rows keep
    # their file's data sequence number.
    assert lineage_by_id(table) == {3: (0, 2), 1: (1, 1), 2: (2, 1)}


def test_every_rewrite_keeps_moved_rows_ids_and_gives_updated_rows_a_new_sequence_number(
    catalog: SqlCatalog,
) -> None:
    table = catalog.create_table("db.rw", SCHEMA, format_version=3)
    table.append(rows([1, 2, 3]))
    table.append(rows([4, 5]))
    state = {1: (0, 1), 2: (1, 1), 3: (2, 1), 4: (3, 2), 5: (4, 2)}
    assert lineage_by_id(table) == state

    table.delete("id = 1")  # copy-on-write: 2 and 3 move to a new file unchanged
    del state[1]
    assert lineage_by_id(table) == state

    table.update({"v": "'two'"}, "id = 2")  # 2 is modified, 3 moves with it
    state[2] = (1, seq(table))
    assert lineage_by_id(table) == state

    table.overwrite(rows([10]), filter="id = 5")  # 4 moves; 10 is new
    del state[5]
    after = lineage_by_id(table)
    new_id, new_seq = after.pop(10)
    assert new_seq == seq(table) and new_id is not None and new_id >= 5
    assert after == state

    table.maintenance().rewrite_data_files(options={"rewrite-all": "true"})  # compaction
    state[10] = (new_id, new_seq)
    assert lineage_by_id(table) == state
    assert len(table.scan().plan_files()) == 1

    table.merge_columns(pa.table({"id": pa.array([3], pa.int64()), "score": pa.array([0.5])}), on="id")
    state[3] = (2, seq(table))  # the merge gave row 3 a value: modified
    assert lineage_by_id(table) == state

    table.update_columns(rows([4], "new"), on="id", columns=["v"])
    state[4] = (3, seq(table))
    assert lineage_by_id(table) == state

    source = pa.table({"id": pa.array([2, 99], pa.int64()), "v": ["m2", "m99"], "score": pa.array([None, 1.0])})
    table.merge(source, on="t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute()
    merged = lineage_by_id(table)
    inserted_id, inserted_seq = merged.pop(99)
    state[2] = (1, seq(table))
    assert merged == state and inserted_seq == seq(table)
    assert inserted_id is not None and inserted_id not in {i for i, _ in state.values()}
    assert sorted(table.scan(columns=["id", "v"]).to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 2, "v": "m2"}, {"id": 3, "v": "v3"}, {"id": 4, "v": "new4"}, {"id": 10, "v": "v10"},
        {"id": 99, "v": "m99"}]

    # The moved rows' values are written into the files (reserved field ids), updated rows' sequence
    # numbers as null; the files still read by field id, so no reader sees extra columns.
    (task,) = [t for t in table.scan().plan_files() if t.file.record_count > 1]
    written = pq.read_table(task.file.file_path.removeprefix("file://"))
    ids = {f.name: int(f.metadata[PARQUET_FIELD_ID]) for f in written.schema if f.metadata}
    assert ids["_row_id"] == ROW_ID.field_id == 2147483540
    assert ids["_last_updated_sequence_number"] == LAST_UPDATED_SEQUENCE_NUMBER.field_id == 2147483539
    stored = {r["id"]: (r["_row_id"], r["_last_updated_sequence_number"]) for r in written.to_pylist()}
    assert stored[2] == (1, None) and stored[3][0] == 2


def test_merge_on_read_update_and_merge_give_new_row_versions_their_old_row_id(catalog: SqlCatalog) -> None:
    # Merge-on-read masks the old row with a deletion vector and writes its new version to a new
    # file: the spec has the new version keep the row's _row_id, with a new sequence number.
    mor = {f"write.{op}.mode": "merge-on-read" for op in ("delete", "update", "merge")}
    table = catalog.create_table("db.mor", SCHEMA, format_version=3, properties=mor)
    table.append(rows([1, 2, 3]))
    state = {1: (0, 1), 2: (1, 1), 3: (2, 1)}
    assert lineage_by_id(table) == state

    table.update({"v": "'two'"}, "id = 2")
    state[2] = (1, seq(table))
    assert lineage_by_id(table) == state

    source = pa.table({"id": pa.array([3, 7], pa.int64()), "v": ["m3", "m7"]})
    table.merge(source, on="t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute()
    merged = lineage_by_id(table)
    inserted_id, inserted_seq = merged.pop(7)
    state[3] = (2, seq(table))
    assert merged == state and inserted_seq == seq(table)
    assert inserted_id is not None and inserted_id not in {i for i, _ in state.values()}
    # The original file is untouched: rows 2 and 3 are masked there by one deletion vector.
    (original,) = [t for t in table.scan().plan_files() if t.file.record_count == 3]
    assert [(d.file_format, d.record_count) for d in original.delete_files] == [("PUFFIN", 2)]
    assert sorted(table.scan(columns=["id", "v"]).to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": "v1"}, {"id": 2, "v": "two"}, {"id": 3, "v": "m3"}, {"id": 7, "v": "m7"}]


def test_a_v2_table_never_writes_lineage_columns_and_a_clashing_column_name_is_refused(catalog: SqlCatalog) -> None:
    table = catalog.create_table("db.v2", SCHEMA)
    table.append(rows([1, 2]))
    table.delete("id = 1")
    (task,) = table.scan().plan_files()
    assert pq.read_schema(task.file.file_path.removeprefix("file://")).names == ["id", "v"]
    clash = catalog.create_table("db.clash", pa.schema([("id", pa.int64()), ("_row_id", pa.int64())]),
                                 format_version=3)
    clash.append(pa.table({"id": pa.array([1, 2], pa.int64()), "_row_id": pa.array([7, 8], pa.int64())}))
    # The table's own column wins in a scan; a rewrite cannot keep lineage next to it.
    assert clash.scan(columns=["_row_id"]).to_arrow().column("_row_id").to_pylist() == [7, 8]
    with pytest.raises(SchemaError, match="name of a row lineage metadata column"):
        clash.delete("id = 1")
    assert clash.refresh().scan().count() == 2


def test_partition_drops_renames_and_type_rewrites_keep_row_ids(catalog: SqlCatalog) -> None:
    schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("n", pa.int32())])
    table = catalog.create_table("db.parts", schema, partition_by=["p"], format_version=3)
    table.append(pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "p": ["a", "b", "c", "c"],
                           "n": pa.array([10, 20, 30, 40], pa.int32())}))
    before = lineage_by_id(table)
    assert sorted(before.values()) == [(0, 1), (1, 1), (2, 1), (3, 1)]

    drop_partitions(table, [[("p", "a")]])  # a whole file: nothing moves
    rename_partition(table.refresh(), [("p", "b")], [("p", "z")])  # row 2 moves with a new value
    after = lineage_by_id(table)
    assert after == {2: (before[2][0], seq(table)), 3: before[3], 4: before[4]}

    table.update_schema().widen("n", "double").commit()  # rewrites every file: values converted
    converted = lineage_by_id(table)
    assert {i: r for i, (r, _) in converted.items()} == {i: r for i, (r, _) in after.items()}
    assert {s for _, s in converted.values()} == {seq(table)}
    assert table.scan(columns=["id", "n"]).to_arrow().sort_by("id").column("n").to_pylist() == [20.0, 30.0, 40.0]


def test_rewriting_and_expiring_manifests_keeps_every_files_first_row_id(catalog: SqlCatalog) -> None:
    table = catalog.create_table("db.manifests", SCHEMA, partition_by=["v"], format_version=3)
    for batch in ([1, 2], [3], [4, 5, 6]):
        table.append(rows(batch))
    before_ids = lineage_by_id(table)
    before_files = {f["file_path"]: f["first_row_id"] for f in table.inspect.data_files().to_pylist()}
    assert len(table.inspect.manifests().to_pylist()) == 3
    next_row_id = table.metadata.next_row_id
    assert next_row_id == 6
    table.maintenance().rewrite_manifests()
    table.refresh()
    assert len(table.inspect.manifests().to_pylist()) == 1
    # The one new manifest took a new id range for its (existing) rows, but every file carries
    # its old first_row_id explicitly, so no row's id changed.
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.first_row_id == next_row_id
    assert table.metadata.next_row_id == next_row_id + 6
    assert {f["file_path"]: f["first_row_id"] for f in table.inspect.data_files().to_pylist()} == before_files
    assert lineage_by_id(table) == before_ids
    table.maintenance().expire_snapshots(older_than=datetime.datetime.now(datetime.UTC), retain_last=1)
    assert len(table.refresh().metadata.snapshots) == 1
    assert lineage_by_id(table) == before_ids
