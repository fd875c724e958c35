"""The model a changelog is checked against: the multiset difference of two full scans.

Each snapshot is read whole through the ordinary scan path (every live data file with its
deletes applied) in the ``to`` snapshot's schema; rows in ``before`` and not in ``after`` are
the DELETEs, the reverse the INSERTs. A changelog with its carry-overs removed (and, over
several snapshots, its net changes taken) must equal it row for row.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa

from tablestore.engine.local import LocalEngine
from tablestore.spec.expressions.expression_tree import AlwaysTrue
from tablestore.spec.schemas.schema import Schema
from tablestore.table import Table
from tablestore.table.read.data_files import read_task_table
from tablestore.table.read.scan import plan_files


def snapshot_rows(table: Table, snapshot_id: int | None, schema: Schema) -> pa.Table:
    """Every live row of the snapshot (none when None), read in ``schema``."""
    metadata = table.metadata
    snapshot = metadata.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
    tasks = plan_files(table.io, metadata, snapshot, schema, AlwaysTrue(), LocalEngine())
    parts = [read_task_table(table.io, t.file, t.delete_files, metadata.spec_for(t.spec_id), schema, schema,
                             AlwaysTrue(), data_sequence_number=t.data_sequence_number).cast(schema.as_arrow())
             for t in tasks]
    return pa.concat_tables(parts) if parts else schema.as_arrow().empty_table()


def _key(row: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, repr(v)) for k, v in row.items()))


def diff_model(table: Table, from_id: int | None, to_id: int) -> tuple[Counter[Any], Counter[Any]]:
    """(deleted, inserted) row multisets between the two snapshots, in ``to``'s schema."""
    to = table.metadata.snapshot_by_id(to_id)
    assert to is not None and to.schema_id is not None
    schema = table.metadata.schema_by_id(to.schema_id)
    assert schema is not None
    before = Counter(_key(r) for r in snapshot_rows(table, from_id, schema).to_pylist())
    after = Counter(_key(r) for r in snapshot_rows(table, to_id, schema).to_pylist())
    return before - after, after - before


def changelog_sides(rows: pa.Table) -> tuple[Counter[Any], Counter[Any]]:
    """(deleted, inserted) multisets of a changelog's rows; update images count as a delete and an insert."""
    deleted: Counter[Any] = Counter()
    inserted: Counter[Any] = Counter()
    meta = {"_change_type", "_change_ordinal", "_commit_snapshot_id"}
    for row in rows.to_pylist():
        values = {k: v for k, v in row.items() if k not in meta}
        if row["_change_type"] in ("DELETE", "UPDATE_BEFORE"):
            deleted[_key(values)] += 1
        else:
            inserted[_key(values)] += 1
    return deleted, inserted


def assert_matches_model(table: Table, from_id: int | None, to_id: int, **options: Any) -> pa.Table:
    """The changelog from ``from_id`` to ``to_id`` equals the diff model; returns its rows."""
    if from_id is not None and from_id == to_id:
        return pa.table({})
    rows = table.changes(from_snapshot=from_id, to_snapshot=to_id, **options).to_arrow()
    deleted, inserted = changelog_sides(rows)
    want_deleted, want_inserted = diff_model(table, from_id, to_id)
    assert deleted == want_deleted, f"DELETEs differ: extra {deleted - want_deleted}, missing {want_deleted - deleted}"
    assert inserted == want_inserted, \
        f"INSERTs differ: extra {inserted - want_inserted}, missing {want_inserted - inserted}"
    return rows
