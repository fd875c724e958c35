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
from tests.conftest import SQLITE_ONLY

pytestmark = SQLITE_ONLY  # planning only: no catalog differences to prove


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
