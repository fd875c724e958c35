"""Incremental append scans (``plan_appended_files``): the data files the ``append`` snapshots
between two snapshots added, pruned by the filter, as Java's ``IncrementalAppendScan`` plans them.
The catalog service serves them as ``start-snapshot-id``/``end-snapshot-id`` plans."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tablestore.catalog.base import Catalog
from tablestore.engine.local import LocalEngine
from tablestore.errors import NoSuchSnapshotError, ValidationError
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.expression_parser import to_expression
from tablestore.table import Table
from tablestore.table.read.scan import plan_appended_files


def _appended(table: Table, start: int, end: int, text: str | None = None) -> list[str]:
    schema = table.schema()
    tasks = plan_appended_files(table.io, table.metadata, start, end, schema, bind(schema, to_expression(text)),
                                LocalEngine())
    return sorted(str(t.file.partition[0]) for t in tasks)


def test_an_append_scan_plans_the_files_added_by_appends_after_start_up_to_end(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", pa.schema([("id", pa.int64()), ("cat", pa.string())]), partition_by=["cat"],
                                 properties={"write.delete.mode": "merge-on-read"})
    table.append(pa.table({"id": [1, 2], "cat": ["a", "b"]}))
    table.append(pa.table({"id": [3, 4], "cat": ["c", "d"]}))
    table.delete("id = 3")  # not an append: adds no data files to the scan
    table.append(pa.table({"id": [5], "cat": ["e"]}))
    table.overwrite(pa.table({"id": [6], "cat": ["a"]}), "cat = 'a'")  # an overwrite, not an append
    first, second, deleted, third, overwritten = (s.snapshot_id for s in table.snapshots())

    assert _appended(table, first, third) == ["c", "d", "e"]
    assert _appended(table, first, overwritten) == ["c", "d", "e"]
    assert _appended(table, second, deleted) == []
    assert _appended(table, first, third, "cat = 'd' or id = 5") == ["d", "e"]

    with pytest.raises(ValidationError, match="not an ancestor"):
        _appended(table, third, second)
    with pytest.raises(NoSuchSnapshotError, match="no snapshot 42"):
        _appended(table, 42, third)


def test_table_scan_with_start_and_end_reads_the_rows_appended_in_between(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", pa.schema([("id", pa.int64()), ("cat", pa.string())]), partition_by=["cat"],
                                 properties={"write.delete.mode": "merge-on-read"})
    table.append(pa.table({"id": [1, 2], "cat": ["a", "b"]}))
    with table.update_schema() as update:
        update.add_column("score", "double")
    table.append(pa.table({"id": [3, 4], "cat": ["c", "d"], "score": [0.3, 0.4]}))
    table.delete("id = 3")  # the append scan still returns row 3: it reads appends, not deletes
    table.append(pa.table({"id": [5], "cat": ["e"], "score": [0.5]}))
    first, second, _, third = (s.snapshot_id for s in table.snapshots())

    def ids(**kwargs: object) -> list[int]:
        return sorted(table.scan(**kwargs).to_arrow().column("id").to_pylist())  # type: ignore[arg-type]

    assert ids(start_snapshot_id=first) == [3, 4, 5]  # end defaults to the current snapshot
    assert ids(start_snapshot_id=first, end_snapshot_id=second) == [3, 4]
    assert ids(start_snapshot_id=second, filter="id > 4") == [5]
    assert ids(end_snapshot_id=second) == [1, 2, 3, 4]  # no start: from the oldest snapshot on
    assert ids(start_snapshot_id=third) == []
    # Rows come in the current schema (Iceberg's incremental scan), old files reading NULL.
    rows = table.scan(end_snapshot_id=first).to_arrow().to_pylist()
    assert sorted(rows, key=lambda r: r["id"]) == [{"id": 1, "cat": "a", "score": None},
                                                    {"id": 2, "cat": "b", "score": None}]
    assert table.scan(start_snapshot_id=first, columns=["id"]).count() == 3

    with pytest.raises(ValidationError, match="do not also give snapshot_id"):
        table.scan(start_snapshot_id=first, snapshot_id=third)
    with pytest.raises(ValidationError, match="not an ancestor"):
        table.scan(start_snapshot_id=third, end_snapshot_id=first).plan_files()
