"""The Java reference implementation reads every fixture at every snapshot as tablestore does.

Every read of both local warehouses runs in one JVM (``tests/oracle.py``; a start costs about
10 s), started in the background by ``conftest.java_reads`` at the first interop test. The oracle's build has no S3 file system (no S3FileIO, no hadoop-aws), so Java reads the
``path`` and ``file`` warehouses; the S3 warehouse holds the same tables, which the other four
readers read there.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

import pytest

from tests import oracle
from tests.interop.built import SnapshotRows, Warehouse
from tests.interop.compare import JsonRows, assert_reads_identically
from tests.interop.params import FIXTURES, LOCAL_KINDS, JavaReads

pytestmark = pytest.mark.oracle


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("kind", LOCAL_KINDS)
def test_java_reads_every_snapshot_identically(interop_warehouse: Callable[[str], Warehouse],
                                               java_reads: Future[JavaReads],
                                               kind: str, fixture: str) -> None:
    built = interop_warehouse(kind).tables[fixture]

    def read(snapshot: SnapshotRows) -> JsonRows:
        result = oracle.check(java_reads.result()[(kind, fixture, snapshot.snapshot_id)])
        return JsonRows([c["name"] for c in result["columns"]], result["rows"])

    assert_reads_identically("java", built, read)
