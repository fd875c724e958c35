"""Read a fixture at every snapshot through one reader and compare with tablestore's rows."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tests.interop.built import BuiltTable, SnapshotRows, describe, dump
from tests.interop.limitations import limitation
from tests.interop.rows import canonical_rows, sort_rows


@dataclass(frozen=True)
class JsonRows:
    """Rows a reader printed already in the oracle's JSON form (the Java oracle)."""

    columns: list[str]
    rows: list[list[Any]]


Read = Callable[[SnapshotRows], pa.Table | JsonRows]


def assert_reads_identically(reader: str, built: BuiltTable, read: Read) -> None:
    """Every snapshot reads as tablestore reads it, or exactly as a known limitation says."""
    assert built.snapshots, f"{built.fixture.name} has no snapshot"
    for snapshot in built.snapshots:
        what = f"{reader} reading {describe(built, snapshot)}"
        known = limitation(reader, built.fixture.name, snapshot)
        if known is not None and known.error is not None:
            try:
                read(snapshot)
            except Exception as e:  # the reader's own exception types differ; the message is asserted
                assert re.search(known.error, str(e)), f"{what}: expected the known error {known.error!r}, got {e!r}"
                continue
            raise AssertionError(f"{what}: the known limitation is gone ({known.bug}); remove it from "
                                 "tests/interop/limitations.py and docs/readers.md")
        result = read(snapshot)
        if isinstance(result, JsonRows):
            assert result.columns == snapshot.columns, what
            rows = sort_rows(result.rows)
        else:
            assert result.column_names == snapshot.columns, what
            rows = canonical_rows(result, snapshot.schema)
        if known is not None and known.wrong_rows is not None:
            wrong = known.wrong_rows(snapshot)
            assert wrong != snapshot.rows, f"{what}: the limitation's wrong rows equal the right ones"
            if rows == snapshot.rows:
                raise AssertionError(f"{what}: the known limitation is gone ({known.bug}); remove it")
            assert rows == wrong, f"{what}: neither right nor the known wrong rows: {dump(rows)}"
            continue
        assert rows == snapshot.rows, f"{what}:\n  theirs {dump(rows)}\n  ours   {dump(snapshot.rows)}"
