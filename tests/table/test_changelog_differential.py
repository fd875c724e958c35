"""Differential tests of changelog scans against the diff of two full scans
(:mod:`tests.table.changelog_model`): merge-on-read position deletes (v2), deletion vectors and
row lineage (v3), equality deletes, and seeded random histories checked at every step."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest

from tablestore.catalog.base import Catalog
from tablestore.table import Table
from tests.table.changelog_history import History, write_equality_deletes
from tests.table.changelog_model import assert_matches_model

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.string())])


def _table(catalog: Catalog, version: int, mode: str) -> Table:
    catalog.create_namespace("db")
    return catalog.create_table("db.t", SCHEMA, partition_by=["p"], properties={
        "format-version": str(version), "write.delete.mode": mode, "write.update.mode": mode,
        "write.merge.mode": mode})


def _head(table: Table) -> int:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


@pytest.mark.parametrize("version", [2, 3])
def test_merge_on_read_deletes_updates_and_merges_match_the_model(catalog: Catalog, version: int) -> None:
    table = _table(catalog, version, "merge-on-read")
    table.append(pa.table({"id": list(range(12)), "p": ["a", "b", "c"] * 4, "v": ["x"] * 12}))
    heads = [_head(table)]
    table.delete("id in (1, 5)")
    heads.append(_head(table))
    table.update({"v": "'y'"}, "id >= 6 and id <= 8")
    heads.append(_head(table))
    source = pa.table({"id": [2, 3, 40], "p": ["c", "a", "b"], "v": ["m", "m", "new"]})
    table.merge(source, "t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute()
    heads.append(_head(table))
    table.delete("id = 7")  # a second delete of a file that has one: the DV or delete file grows
    heads.append(_head(table))
    for before, after in itertools.pairwise(heads):
        rows = assert_matches_model(table, before, after)
        assert rows.num_rows > 0
    whole = assert_matches_model(table, heads[0], heads[-1], net_changes=True)
    types = sorted(whole.column("_change_type").to_pylist())
    if version == 3:  # paired by _row_id without a key: ids 2, 3, 6, 8 updated
        assert types.count("UPDATE_BEFORE") == 4 and types.count("DELETE") == 3 and types.count("INSERT") == 1


def test_equality_deletes_match_the_model_and_apply_only_to_older_rows(catalog: Catalog) -> None:
    table = _table(catalog, 2, "merge-on-read")
    table.append(pa.table({"id": [1, 2, 3, 4], "p": ["b", "c", "a", "b"], "v": ["x"] * 4}))
    start = _head(table)
    write_equality_deletes(table, [("b", 1), ("a", 3)])
    table.refresh()
    deleted = _head(table)
    rows = assert_matches_model(table, start, deleted)
    assert sorted(rows.column("id").to_pylist()) == [1, 3]
    # A re-inserted id is newer than the equality delete: it stays; a later delete by position of
    # a file with equality deletes counts only the rows those left.
    table.append(pa.table({"id": [1], "p": ["b"], "v": ["again"]}))
    table.delete("id = 4")
    table.update({"v": "'z'"}, "id = 2")
    assert_matches_model(table, deleted, _head(table))
    assert_matches_model(table, start, _head(table), net_changes=True)
    assert_matches_model(table, None, _head(table), net_changes=True)


@pytest.mark.parametrize(("version", "seed"), [(2, 7), (3, 11)])
def test_random_histories_match_the_model_at_every_step(catalog: Catalog, version: int, seed: int) -> None:
    table = _table(catalog, version, "copy-on-write")
    history = History(table, seed)
    table.append(history.rows(10))
    heads = [_head(table)]
    done = []
    for _ in range(32):
        done.append(history.step())
        table.refresh()
        if _head(table) == heads[-1]:
            continue
        heads.append(_head(table))
        try:
            assert_matches_model(table, heads[-2], heads[-1])
        except AssertionError as e:
            raise AssertionError(f"after {done}: {e}") from None
    ops = {d.split()[0] for d in done}
    assert {"append", "delete", "update", "merge", "compact", "evolve", "equality"} <= ops, ops
    assert_matches_model(table, heads[0], heads[-1], net_changes=True)
    assert_matches_model(table, None, heads[-1], net_changes=True)
    assert_matches_model(table, heads[len(heads) // 2], heads[-1], net_changes=True, compute_updates=False)
