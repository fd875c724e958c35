"""Crash safety: the service is SIGKILLed while 8 clients commit; after a restart every
acknowledged commit is there, every other one is there in full or not at all, and every table
loads and reads."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pyarrow as pa

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.errors import TableStoreError
from tests.rest.conftest import CATALOG, RestService

SCHEMA = pa.schema([pa.field("client", pa.int64()), pa.field("seq", pa.int64()), pa.field("row", pa.int64())])
CLIENTS = 8
TABLES = ("crash.a", "crash.b")
ROWS_PER_COMMIT = 3


def test_sigkill_during_concurrent_commits_loses_no_acknowledged_commit(fresh_rest_service: RestService) -> None:
    service = fresh_rest_service
    setup = service.client()
    setup.create_namespace("crash")
    for name in TABLES:
        setup.create_table(name, SCHEMA)
    setup.close()

    acknowledged: set[tuple[int, int]] = set()
    attempted: set[tuple[int, int]] = set()
    lock = threading.Lock()
    stop = threading.Event()

    def client(index: int) -> None:
        catalog = service.client()
        table_name = TABLES[index % len(TABLES)]
        seq = 0
        try:
            while not stop.is_set():
                with lock:
                    attempted.add((index, seq))
                rows = pa.table({"client": [index] * ROWS_PER_COMMIT, "seq": [seq] * ROWS_PER_COMMIT,
                                 "row": list(range(ROWS_PER_COMMIT))}, schema=SCHEMA)
                catalog.load_table(table_name).append(rows)
                with lock:
                    acknowledged.add((index, seq))
                seq += 1
        except TableStoreError:
            pass  # the service died under this client: the commit in flight is unacknowledged
        finally:
            catalog.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while len(acknowledged) < 3 * CLIENTS and time.monotonic() < deadline:
        time.sleep(0.05)
    service.kill()
    stop.set()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert len(acknowledged) >= 3 * CLIENTS
    assert attempted - acknowledged, "the kill should have caught commits in flight"

    service.start()
    rest = service.client()
    direct = SqlCatalog(CATALOG, **service.direct_properties())
    py = service.pyiceberg()
    try:
        found: Counter[tuple[int, int]] = Counter()
        for name in TABLES:
            rows = rest.load_table(name).scan().to_arrow()
            assert rows.sort_by("client").equals(direct.load_table(name).scan().to_arrow().sort_by("client"))
            assert py.load_table(name).scan().to_arrow().num_rows == rows.num_rows
            found.update(zip(rows.column("client").to_pylist(), rows.column("seq").to_pylist(), strict=True))
            # Every snapshot's manifest list and manifests are readable: history is intact.
            for snapshot in direct.load_table(name).metadata.snapshots:
                assert direct.load_table(name).scan(snapshot_id=snapshot.snapshot_id).to_arrow() is not None
        for commit in acknowledged:
            assert found[commit] == ROWS_PER_COMMIT, commit
        for commit, count in found.items():
            assert commit in attempted and count == ROWS_PER_COMMIT, (commit, count)
        # And the service takes commits again.
        rest.load_table(TABLES[0]).append(pa.table({"client": [99], "seq": [0], "row": [0]}, schema=SCHEMA))
    finally:
        rest.close()
        direct.close()
