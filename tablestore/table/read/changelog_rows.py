"""What a changelog does with its raw rows: carry-overs removed, updates paired, net changes.

A changelog's raw rows are DELETEs (rows live before a snapshot and not after it) and INSERTs
(the reverse), each with its snapshot's ``_change_ordinal`` and ``_commit_snapshot_id``. Iceberg's
Spark procedure ``create_changelog_view`` then works on them in three ways, which this module
does on Arrow tables with vectorised group codes (no per-row Python), so the Python API and the
Spark tasks of the SQL procedure give the same rows:

- :func:`remove_carryovers` (Java's ``RemoveCarryoverIterator``): a DELETE and an INSERT of
  identical values in the same snapshot cancel out. Copy-on-write rewrites produce them for
  every row they carry over unchanged.
- :func:`compute_updates` (``ComputeUpdateIterator``): after that, a DELETE and an INSERT of the
  same key in the same snapshot become ``UPDATE_BEFORE``/``UPDATE_AFTER``. The key is the
  identifier columns, or on format v3 the row lineage ``_row_id``, which an update keeps.
- :func:`net_changes` (``RemoveNetCarryoverIterator``): across the whole range, a row's changes
  collapse to its net change, with Java's choice of which row of a run survives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablestore.errors import ValidationError

CHANGE_TYPE = "_change_type"
CHANGE_ORDINAL = "_change_ordinal"
COMMIT_SNAPSHOT_ID = "_commit_snapshot_id"
CHANGELOG_COLUMNS = (CHANGE_TYPE, CHANGE_ORDINAL, COMMIT_SNAPSHOT_ID)
#: Row lineage's ``_row_id``, carried through a v3 changelog to pair updates without a key.
ROW_ID_COLUMN = "_row_id"

INSERT = "INSERT"
DELETE = "DELETE"
UPDATE_BEFORE = "UPDATE_BEFORE"
UPDATE_AFTER = "UPDATE_AFTER"

CHANGELOG_FIELDS = (
    pa.field(CHANGE_TYPE, pa.string(), nullable=False),
    pa.field(CHANGE_ORDINAL, pa.int32(), nullable=False),
    pa.field(COMMIT_SNAPSHOT_ID, pa.int64(), nullable=False),
)


def column_codes(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Dense int64 codes of a column's values: equal values (nulls too) get equal codes."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(array) == 0:
        return np.zeros(0, dtype=np.int64)
    try:
        encoded = pc.dictionary_encode(array, null_encoding="encode")
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
        # Nested values (structs, lists, maps) have no hash kernel: compare their Python values.
        encoded = pc.dictionary_encode(pa.array([repr(v) for v in array.to_pylist()], pa.string()))
    return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)


def group_codes(table: pa.Table, columns: Sequence[str], extra: Sequence[np.ndarray] = ()) -> np.ndarray:
    """Dense int64 group ids of the rows of ``table`` by the values of ``columns`` (and ``extra`` codes)."""
    n = table.num_rows
    codes = np.zeros(n, dtype=np.int64)
    if n == 0:
        return codes
    for part in [*(column_codes(table.column(c)) for c in columns), *extra]:
        part = np.asarray(part, dtype=np.int64)
        width = int(part.max()) + 1
        # Both codes are dense (< n), so the product stays far below 2**63.
        _, codes = np.unique(codes * width + part, return_inverse=True)
        codes = codes.astype(np.int64).reshape(-1)
    return codes


def _ranks(groups: np.ndarray) -> np.ndarray:
    """Each row's rank among the rows of its group, in row order."""
    n = len(groups)
    order = np.argsort(groups, kind="stable")
    sorted_groups = groups[order]
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]]) if n else np.zeros(0, np.int64)
    lengths = np.diff(np.r_[starts, n])
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = np.arange(n) - np.repeat(starts, lengths)
    return ranks


def _types(changes: pa.Table) -> np.ndarray:
    return np.asarray(changes.column(CHANGE_TYPE).to_numpy(zero_copy_only=False), dtype=object)


def _ordinals(changes: pa.Table) -> np.ndarray:
    return np.asarray(changes.column(CHANGE_ORDINAL).to_numpy(zero_copy_only=False), dtype=np.int64)


def _dense(codes: np.ndarray) -> np.ndarray:
    return np.unique(codes, return_inverse=True)[1].astype(np.int64).reshape(-1)


def remove_carryovers(changes: pa.Table, value_columns: Sequence[str]) -> pa.Table:
    """``changes`` without the DELETE/INSERT pairs of identical values in the same snapshot.

    Rows are grouped one column at a time, and a group left with only DELETEs or only INSERTs
    drops out at once: an update differs from its old version in some column, so its rows stop
    being compared there and the later columns are never encoded for them."""
    n = changes.num_rows
    if n == 0:
        return changes
    is_delete = _types(changes) == DELETE
    if is_delete.all() or not is_delete.any():
        return changes
    candidates = np.arange(n)
    groups = _dense(_ordinals(changes))
    deleting = is_delete
    for name in value_columns:
        column = changes.column(name)
        part = column_codes(column if len(candidates) == n else column.take(pa.array(candidates)))
        groups = _dense(groups * (int(part.max()) + 1) + part)
        count = int(groups.max()) + 1
        mixed = (np.bincount(groups[deleting], minlength=count) > 0) & \
            (np.bincount(groups[~deleting], minlength=count) > 0)
        still = mixed[groups]
        if not still.all():
            candidates, groups, deleting = candidates[still], _dense(groups[still]), deleting[still]
        if len(candidates) == 0:
            return changes
    count = int(groups.max()) + 1
    deletes = np.bincount(groups[deleting], minlength=count)
    inserts = np.bincount(groups[~deleting], minlength=count)
    ranks = _ranks(groups * 2 + (~deleting))
    survive = np.where(deleting, ranks >= inserts[groups], ranks >= deletes[groups])
    keep = np.ones(n, dtype=bool)
    keep[candidates] = survive
    return changes if keep.all() else changes.filter(pa.array(keep))


def _key_groups(changes: pa.Table, key_columns: Sequence[str], extra: Sequence[np.ndarray] = ()) -> np.ndarray:
    """Group ids by key; a row with a null key is a group of its own (a row of a v3 table
    written before the upgrade has no ``_row_id``; identifier fields are never null)."""
    groups = group_codes(changes, key_columns, extra)
    nulls = np.zeros(changes.num_rows, dtype=bool)
    for name in key_columns:
        column = changes.column(name)
        if column.null_count:
            nulls |= np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if nulls.any():
        groups = groups.copy()
        groups[nulls] = int(groups.max()) + 1 + np.arange(int(nulls.sum()))
    return groups


def _pair(changes: pa.Table, groups: np.ndarray, key_names: Sequence[str]) -> pa.Table:
    """A DELETE and an INSERT of the same group become UPDATE_BEFORE/UPDATE_AFTER, placed side
    by side; more than one DELETE of a key is refused, as Java does."""
    n = changes.num_rows
    types = _types(changes)
    is_delete = types == DELETE
    count = int(groups.max()) + 1
    deletes = np.bincount(groups[is_delete], minlength=count)
    inserts = np.bincount(groups[~is_delete], minlength=count)
    if (deletes > 1).any():
        raise ValidationError(
            f"cannot compute updates: several rows share the key ({', '.join(key_names)}) in one snapshot; "
            "give identifier columns that are unique in every snapshot, or compute_updates=False"
        )
    paired = (deletes == 1) & (inserts >= 1)
    if not paired.any():
        return changes
    ranks = _ranks(groups * 2 + (~is_delete))
    before = is_delete & paired[groups]
    after = ~is_delete & paired[groups] & (ranks == 0)
    new_types = types.copy()
    new_types[before] = UPDATE_BEFORE
    new_types[after] = UPDATE_AFTER
    # Each UPDATE_AFTER goes right after its UPDATE_BEFORE; the rest keep their order.
    position = np.arange(n, dtype=np.float64)
    before_at = np.zeros(count, dtype=np.float64)
    before_at[groups[before]] = position[before]
    position[after] = before_at[groups[after]] + 0.5
    order = np.lexsort((position, _ordinals(changes)))
    index = changes.schema.get_field_index(CHANGE_TYPE)
    out = changes.set_column(index, changes.schema.field(index), pa.array(new_types, pa.string()))
    return out.take(pa.array(order))


def compute_updates(changes: pa.Table, key_columns: Sequence[str], value_columns: Sequence[str]) -> pa.Table:
    """Carry-overs removed, then a DELETE and an INSERT of one key in one snapshot paired as an update."""
    changes = remove_carryovers(changes, value_columns)
    if changes.num_rows == 0:
        return changes
    return _pair(changes, _key_groups(changes, key_columns, [_ordinals(changes)]), key_columns)


def net_changes(changes: pa.Table, value_columns: Sequence[str], key_columns: Sequence[str] | None = None) -> pa.Table:
    """Each row's net change over the whole range (Java's ``RemoveNetCarryoverIterator``).

    Rows of equal values are taken in snapshot order, DELETE before INSERT; a run that returns
    to where it began cancels, and the first row of the last unfinished run is kept as many
    times as the run is deep. With ``key_columns``, a net DELETE and INSERT of one key are then
    paired as an update (Java refuses net changes with updates; the pairing is ours).
    """
    n = changes.num_rows
    if n == 0:
        return changes
    is_insert = _types(changes) == INSERT
    groups = group_codes(changes, value_columns)
    order = np.lexsort((is_insert, _ordinals(changes), groups))
    sorted_groups = groups[order]
    steps = np.where(is_insert[order], 1, -1)
    total = np.cumsum(steps)
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    ends = np.r_[starts[1:], n] - 1
    before_start = np.r_[0, total][starts]
    depth = total - np.repeat(before_start, np.diff(np.r_[starts, n]))
    count = len(starts)
    last_zero = np.full(count, -1, dtype=np.int64)
    zeros = np.flatnonzero(depth == 0)
    np.maximum.at(last_zero, sorted_groups[zeros], zeros)
    run_start = np.where(last_zero >= 0, last_zero + 1, starts)
    net = depth[ends]
    keep = net != 0
    rows = np.repeat(order[run_start[keep]], np.abs(net[keep]))
    out = changes.take(pa.array(np.sort(rows)))
    return pair_updates(out, key_columns) if key_columns else out


def pair_updates(changes: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """A DELETE and an INSERT of one key, in any snapshots of the range, as an update (the last
    step of net changes with a key)."""
    if changes.num_rows == 0:
        return changes
    return _pair(changes, _key_groups(changes, key_columns), key_columns)
