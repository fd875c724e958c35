"""Overwrites of files written elsewhere (by Spark tasks, for SQL INSERT OVERWRITE and the data
source's overwriting writes), through the Table API: the same replacement and the same conflict
validation as overwrites of rows, against the table as the write loaded it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tablestore.errors import CommitConflictError
from tablestore.table import CommitIdentity
from tests.table.test_overwrite_across_specs import D, ids, rolled_over, rows


def test_dynamic_overwrite_of_written_files_replaces_the_rows_of_their_partitions(tmp_path: Path) -> None:
    table = rolled_over(tmp_path, "copy-on-write")
    files = table.write_files(rows((10, D(2026, 1, 1, 10, 30))))
    snapshot = table.replace_partitions_files(files, {"k": "v"})
    table.refresh()
    # The 10:00 hour is replaced in the day file (rewritten without 1 and 2); 11:00 and day 2 stay.
    assert ids(table) == [3, 4, 10]
    assert snapshot.summary["k"] == "v"
    assert snapshot.summary["replace-partitions"] == "true"


def test_overwrite_by_filter_of_written_files(tmp_path: Path) -> None:
    table = rolled_over(tmp_path, "merge-on-read")
    files = table.write_files(rows((20, D(2026, 1, 2, 1))))
    table.overwrite_files(files, "ts >= TIMESTAMP '2026-01-02 00:00:00'")
    table.refresh()
    assert ids(table) == [1, 2, 3, 20]


@pytest.mark.parametrize("kind", ["dynamic", "filter", "whole table"])
def test_a_commit_since_the_write_loaded_the_table_is_a_conflict(tmp_path: Path, kind: str) -> None:
    stale = rolled_over(tmp_path, "copy-on-write")
    read_snapshot = stale.current_snapshot()
    assert read_snapshot is not None
    files = stale.write_files(rows((30, D(2026, 1, 1, 10, 15))))
    # Another writer adds a row to the hour being replaced after the write loaded the table.
    stale.catalog.load_table("db.t").append(rows((31, D(2026, 1, 1, 10, 45))))
    with pytest.raises(CommitConflictError):
        if kind == "dynamic":
            stale.replace_partitions_files(files)
        elif kind == "filter":
            stale.overwrite_files(files, "ts < TIMESTAMP '2026-01-01 11:00:00'")
        else:
            # Loaded afresh at commit time, as the data source's driver does: it still sees that data
            # arrived after the snapshot the write read.
            stale.catalog.load_table("db.t").replace_files(files, read_snapshot.snapshot_id)
    assert 31 in ids(stale.catalog.load_table("db.t"))


def test_replace_files_replaces_every_row_and_lands_once_per_commit_id(tmp_path: Path) -> None:
    table = rolled_over(tmp_path, "copy-on-write")
    read = table.current_snapshot()
    assert read is not None
    identity = CommitIdentity("write-1", "tablestore.write-id")
    first = table.replace_files(table.write_files(rows((40, D(2026, 1, 3)))), read.snapshot_id,
                                {"k": "v"}, commit_id=identity)
    assert ids(table.refresh()) == [40]
    assert (first.summary["operation"], first.summary["k"], first.summary["tablestore.write-id"]) == (
        "overwrite", "v", "write-1")

    # A retry of the same write finds it applied: nothing is committed, its files are deleted.
    again = table.write_files(rows((41, D(2026, 1, 3))))
    assert table.replace_files(again, first.snapshot_id, commit_id=identity).snapshot_id == first.snapshot_id
    assert ids(table.refresh()) == [40]
    assert not Path(again[0].file_path.removeprefix("file://")).exists()
