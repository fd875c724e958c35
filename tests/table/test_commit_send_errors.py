"""An error out of the catalog call that the catalog did not classify is an unknown outcome.

The catalogs turn what they understand into ``CommitConflictError`` (refused: the files go) or
``CommitStateUnknownError`` (maybe landed: the files stay). Anything else that escapes the call,
a driver's socket error or a Ctrl-C while the request is in flight, may come after the swap, so
the commit path keeps every file: the table must stay readable whatever the catalog did. The
catalog here is the real SQLite catalog; the fault is raised after its swap landed or before it
was attempted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.maintenance.orphans import remove_orphan_files


class FaultAfterSwap(SqlCatalog):
    """The SQLite catalog, raising ``fault`` once after (or before) its next commit."""

    fault: BaseException | None = None
    after_swap = True

    def commit_table(self, identifier: Any, requirements: Any, updates: Any) -> Any:
        fault, self.fault = self.fault, None
        if fault is not None and not self.after_swap:
            raise fault
        result = super().commit_table(identifier, requirements, updates)
        if fault is not None:
            raise fault
        return result


@pytest.fixture
def catalog(tmp_path: Path) -> FaultAfterSwap:
    cat = FaultAfterSwap("faulty", uri=f"sqlite:///{tmp_path}/c.db", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    return cat


ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "n": pa.array([10, 20, 30], pa.int64())})


FUTURE_MS = 2**42  # older_than for orphan removal: every file counts as old enough


def ids(catalog: FaultAfterSwap) -> list[int]:
    return sorted(catalog.load_table("db.t").scan().to_arrow().column("id").to_pylist())


def test_an_unclassified_error_after_the_swap_is_resolved_as_landed(catalog: FaultAfterSwap) -> None:
    table = catalog.create_table("db.t", schema=ROWS.schema)
    table.append(ROWS)
    catalog.fault = OSError("connection reset by peer")
    assert table.delete("id = 2") == 1  # copy-on-write: rewrites a file, the case that lost tables
    assert ids(catalog) == [1, 3]
    assert [s.summary["operation"] for s in catalog.load_table("db.t").snapshots()] == ["append", "overwrite"]


def test_an_unclassified_error_before_the_swap_sends_again_and_lands_once(catalog: FaultAfterSwap) -> None:
    table = catalog.create_table("db.t", schema=ROWS.schema)
    table.append(ROWS)
    catalog.after_swap = False
    catalog.fault = OSError("connection reset before the request left")
    assert table.update({"n": "n + 1"}, "id = 1") == 1
    fresh = catalog.load_table("db.t")
    assert sorted(fresh.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "n": 11}, {"id": 2, "n": 20}, {"id": 3, "n": 30}]
    assert [s.summary["operation"] for s in fresh.snapshots()] == ["append", "overwrite"]


def test_an_interrupt_after_the_swap_keeps_every_file(catalog: FaultAfterSwap) -> None:
    table = catalog.create_table("db.t", schema=ROWS.schema)
    table.append(ROWS)
    catalog.fault = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        table.delete("id = 3")
    # The delete landed before the interrupt: its files are the table's, all there, none orphaned.
    assert ids(catalog) == [1, 2]
    assert remove_orphan_files(catalog.load_table("db.t"), older_than=FUTURE_MS,
                               dry_run=True).orphan_file_locations == []


def test_an_interrupt_before_the_swap_keeps_the_files_for_orphan_removal(catalog: FaultAfterSwap) -> None:
    table = catalog.create_table("db.t", schema=ROWS.schema)
    table.append(ROWS)
    catalog.after_swap = False
    catalog.fault = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        table.delete("id = 3")
    fresh = catalog.load_table("db.t")
    assert ids(catalog) == [1, 2, 3] and len(fresh.snapshots()) == 1
    # Interrupted in flight, the write could not know: its files stay until orphan removal,
    # which deletes exactly those (a data file and the manifests), and the table reads the same.
    removed = remove_orphan_files(fresh, older_than=FUTURE_MS).orphan_file_locations
    assert any(p.endswith(".parquet") for p in removed) and any(p.endswith(".avro") for p in removed)
    assert ids(catalog) == [1, 2, 3]
    assert remove_orphan_files(fresh, older_than=FUTURE_MS, dry_run=True).orphan_file_locations == []
