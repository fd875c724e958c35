"""iceberg-rust (pyiceberg-core's DataFusion table provider) reads every fixture at every snapshot.

The provider takes no snapshot id, so each snapshot is read through the metadata file written
when it became current; that file's schema is the snapshot's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.interop.built import SnapshotRows, Warehouse
from tests.interop.compare import assert_reads_identically
from tests.interop.params import FIXTURES, KINDS, s3_access
from tests.interop.readers import rust_read


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("kind", KINDS)
def test_iceberg_rust_reads_every_snapshot_identically(request: pytest.FixtureRequest,
                                                       interop_warehouse: Callable[[str], Warehouse],
                                                       kind: str, fixture: str) -> None:
    built = interop_warehouse(kind).tables[fixture]
    s3 = s3_access(request, kind)

    def read(snapshot: SnapshotRows) -> Any:
        return rust_read(snapshot.metadata_location, s3)

    assert_reads_identically("iceberg-rust", built, read)
