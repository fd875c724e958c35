"""The fixture tables, built once per test session in each of the three warehouses.

``interop_warehouse(kind)`` is ``path`` (a bare local path), ``file`` (a ``file://`` URI) or
``s3`` (a bucket on the loopback MinIO server; tests that use it carry the ``s3`` marker).

The three are built in background threads from the first interop test on, and Java's batch of
reads starts as soon as both local warehouses are built: a test waits only for the warehouse it
reads, so the S3 build (mostly waiting on S3, which runs in its own process) and the JVM
overlap the other readers' tests instead of adding to them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests import oracle
from tests.interop.built import KINDS, Warehouse, build_warehouse
from tests.interop.params import LOCAL_KINDS, JavaReads
from tests.services import S3Server

Builder = Callable[[str], Warehouse]


class Warehouses:
    """Each kind of warehouse built at most once, in a background thread."""

    def __init__(self, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                 pool: ThreadPoolExecutor) -> None:
        self._request = request
        self._tmp = tmp_path_factory
        self._pool = pool
        self._builds: dict[str, Future[Warehouse]] = {}

    def start(self, kind: str) -> Future[Warehouse]:
        """Start building ``kind`` unless it was started; call from the test's thread (fixtures)."""
        if kind not in self._builds:
            root = self._tmp.mktemp(f"interop-{kind}")
            self._builds[kind] = self._pool.submit(self._build, kind, root, self._s3() if kind == "s3" else None)
        return self._builds[kind]

    def _s3(self) -> S3Server:
        # pytest's fixtures are not thread-safe: the server is started here, never in the pool.
        server: S3Server = self._request.getfixturevalue("s3_server")
        return server

    @staticmethod
    def _build(kind: str, root: Path, s3: S3Server | None) -> Warehouse:
        if kind == "path":
            return build_warehouse(kind, root, {}, str(root / "warehouse"))
        if kind == "file":
            return build_warehouse(kind, root, {}, (root / "warehouse").as_uri())
        if kind == "s3":
            assert s3 is not None
            return build_warehouse(kind, root, s3.properties, f"s3://{s3.create_bucket()}/warehouse")
        raise ValueError(kind)

    def get(self, kind: str) -> Warehouse:
        return self.start(kind).result()


@pytest.fixture(scope="session")
def interop_warehouses(request: pytest.FixtureRequest,
                       tmp_path_factory: pytest.TempPathFactory) -> Iterator[Warehouses]:
    with ThreadPoolExecutor(max_workers=len(KINDS), thread_name_prefix="interop-build") as pool:
        yield Warehouses(request, tmp_path_factory, pool)


@pytest.fixture(scope="session")
def interop_warehouse(interop_warehouses: Warehouses) -> Builder:
    return interop_warehouses.get


@pytest.fixture(scope="session")
def java_reads(interop_warehouses: Warehouses) -> Iterator[Future[JavaReads]]:
    """Java's reads of every fixture at every snapshot in both local warehouses, in one JVM.

    Keyed by (warehouse kind, fixture, snapshot id). The batch runs in the background once both
    local warehouses are built.
    """
    builds = {kind: interop_warehouses.start(kind) for kind in LOCAL_KINDS}

    def run() -> JavaReads:
        batch = oracle.OracleBatch()
        jobs: dict[tuple[str, str, int], int] = {}
        for kind, build in builds.items():
            for name, built in build.result().tables.items():
                for snapshot in built.snapshots:
                    jobs[(kind, name, snapshot.snapshot_id)] = batch.read(built.metadata_location,
                                                                          snapshot_id=snapshot.snapshot_id)
        results = batch.run()
        return {key: results[job] for key, job in jobs.items()}

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="java-oracle") as pool:
        future = pool.submit(run)
        yield future
        future.exception()  # the JVM is done before the session ends, also when no test waited


@pytest.fixture(scope="session", autouse=True)
def _start_builds_early(request: pytest.FixtureRequest, interop_warehouses: Warehouses) -> None:
    """At the first interop test, start every warehouse the session's tests read, and Java's batch."""
    interop = [item for item in request.session.items if item.nodeid.startswith("tests/interop/")]
    for kind in KINDS:
        if any(f"[{kind}-" in item.nodeid for item in interop):
            interop_warehouses.start(kind)
    if any(item.nodeid.startswith("tests/interop/test_java.py") for item in interop):
        request.getfixturevalue("java_reads")


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle, which it then keeps
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The interop tests on the S3 warehouse run after those on the local ones, in the same slots.

    The S3 build is the slowest (every file is a request to S3); run last, its tests find it built
    while the local warehouses' tests ran.
    """
    slots = [i for i, item in enumerate(items) if item.nodeid.startswith("tests/interop/")]
    interop = [items[i] for i in slots]
    ordered = [it for it in interop if "[s3-" not in it.nodeid] + [it for it in interop if "[s3-" in it.nodeid]
    for slot, item in zip(slots, ordered, strict=True):
        items[slot] = item
