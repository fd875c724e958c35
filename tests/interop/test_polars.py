"""Polars' native Iceberg reader reads every fixture at every snapshot as tablestore does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.interop.built import SnapshotRows, Warehouse
from tests.interop.compare import assert_reads_identically
from tests.interop.params import FIXTURES, KINDS, s3_access
from tests.interop.readers import polars_read


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("kind", KINDS)
def test_polars_reads_every_snapshot_identically(request: pytest.FixtureRequest,
                                                 interop_warehouse: Callable[[str], Warehouse],
                                                 kind: str, fixture: str) -> None:
    built = interop_warehouse(kind).tables[fixture]
    s3 = s3_access(request, kind)

    def read(snapshot: SnapshotRows) -> Any:
        return polars_read(built.metadata_location, snapshot.snapshot_id, s3)

    assert_reads_identically("polars", built, read)
