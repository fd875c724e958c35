"""The fixture tables, built once per test session in each of the three warehouses.

``interop_warehouse(kind)`` is ``path`` (a bare local path), ``file`` (a ``file://`` URI) or
``s3`` (a bucket on the loopback moto server; tests that use it carry the ``s3`` marker). Each is
built the first time a test asks for it and kept for the session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from tests import oracle
from tests.interop.built import Warehouse, build_warehouse
from tests.interop.params import LOCAL_KINDS, JavaReads
from tests.services import S3Server

Builder = Callable[[str], Warehouse]

@pytest.fixture(scope="session")
def interop_warehouse(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Builder:
    built: dict[str, Warehouse] = {}

    def get(kind: str) -> Warehouse:
        if kind not in built:
            root = tmp_path_factory.mktemp(f"interop-{kind}")
            if kind == "path":
                built[kind] = build_warehouse(kind, root, {}, str(root / "warehouse"))
            elif kind == "file":
                built[kind] = build_warehouse(kind, root, {}, (root / "warehouse").as_uri())
            elif kind == "s3":
                server: S3Server = request.getfixturevalue("s3_server")
                bucket = server.create_bucket()
                built[kind] = build_warehouse(kind, root, server.properties, f"s3://{bucket}/warehouse")
            else:
                raise ValueError(kind)
        return built[kind]

    return get


@pytest.fixture(scope="session")
def java_reads(interop_warehouse: Builder) -> Iterator[Future[JavaReads]]:
    """Java's reads of every fixture at every snapshot in both local warehouses, in one JVM.

    Keyed by (warehouse kind, fixture, snapshot id). The JVM runs in the background from the
    first interop test on, so its reads overlap the other readers' tests.
    """
    batch = oracle.OracleBatch()
    jobs: dict[tuple[str, str, int], int] = {}
    for kind in LOCAL_KINDS:
        for name, built in interop_warehouse(kind).tables.items():
            for snapshot in built.snapshots:
                jobs[(kind, name, snapshot.snapshot_id)] = batch.read(built.metadata_location,
                                                                      snapshot_id=snapshot.snapshot_id)

    def run() -> JavaReads:
        results = batch.run()
        return {key: results[job] for key, job in jobs.items()}

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="java-oracle") as pool:
        future = pool.submit(run)
        yield future
        future.exception()  # the JVM is done before the session ends, also when no test waited


@pytest.fixture(scope="session", autouse=True)
def _start_java_reads_early(request: pytest.FixtureRequest) -> None:
    """Start the JVM at the first interop test when the session will run the Java reader's tests."""
    if any(item.nodeid.startswith("tests/interop/test_java.py") for item in request.session.items):
        request.getfixturevalue("java_reads")
