"""Overwrites of files written elsewhere (by Spark tasks, for SQL INSERT OVERWRITE): the same
replacement and the same conflict validation as overwrites of rows, against the table as the
write loaded it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tablestore.errors import CommitConflictError
from tablestore.table.ops.overwrite import overwrite_files_producer, replace_partitions_files_producer
from tablestore.table.update.transaction import commit_snapshot
from tests.table.test_overwrite_across_specs import D, ids, rolled_over, rows


def test_dynamic_overwrite_of_written_files_replaces_the_rows_of_their_partitions(tmp_path: Path) -> None:
    table = rolled_over(tmp_path, "copy-on-write")
    files = table.write_files(rows((10, D(2026, 1, 1, 10, 30))))
    commit_snapshot(replace_partitions_files_producer(table, files, {"k": "v"}))
    table.refresh()
    # The 10:00 hour is replaced in the day file (rewritten without 1 and 2); 11:00 and day 2 stay.
    assert ids(table) == [3, 4, 10]
    assert table.current_snapshot().summary["k"] == "v"  # type: ignore[union-attr]


def test_overwrite_by_filter_of_written_files(tmp_path: Path) -> None:
    table = rolled_over(tmp_path, "merge-on-read")
    files = table.write_files(rows((20, D(2026, 1, 2, 1))))
    commit_snapshot(overwrite_files_producer(table, files, "ts >= TIMESTAMP '2026-01-02 00:00:00'", None))
    table.refresh()
    assert ids(table) == [1, 2, 3, 20]


@pytest.mark.parametrize("kind", ["dynamic", "filter"])
def test_a_commit_since_the_write_loaded_the_table_is_a_conflict(tmp_path: Path, kind: str) -> None:
    stale = rolled_over(tmp_path, "copy-on-write")
    files = stale.write_files(rows((30, D(2026, 1, 1, 10, 15))))
    # Another writer adds a row to the hour being replaced after the write loaded the table.
    stale.catalog.load_table("db.t").append(rows((31, D(2026, 1, 1, 10, 45))))
    producer = (replace_partitions_files_producer(stale, files, None) if kind == "dynamic"
                else overwrite_files_producer(stale, files, "ts < TIMESTAMP '2026-01-01 11:00:00'", None))
    with pytest.raises(CommitConflictError):
        commit_snapshot(producer)
    assert 31 in ids(stale.catalog.load_table("db.t"))
