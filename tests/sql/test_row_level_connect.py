"""Row-level SQL through Spark Connect, as the stack's Dagster runs use it.

The server is the stack's (``infra.spark_connect``: tablestore's daemon and settings), started
here on ``local[2]``; the client has no JVM, so the statements' files can only be written by the
server's tasks, and their descriptions are all that comes back. The client runs in a process of
its own (tests/sql/row_level_connect_job.py): Spark refuses a Connect session in a process that
holds a classic one, as earlier test modules leave.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.local.processes import die_with_parent, free_port
from infra.spark_connect import command

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
MODES = ["copy-on-write", "merge-on-read"]


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("connect") / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(command("local[2]", port), stdout=out, stderr=subprocess.STDOUT,
                                  env={**os.environ, "PYSPARK_PYTHON": sys.executable}, preexec_fn=die_with_parent)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the Spark Connect server did not start:\n{log.read_text()[-3000:]}") from None
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(60)


def test_update_delete_and_merge_run_through_spark_connect(connect_url: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tests.sql.row_level_connect_job", connect_url, str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["jvm"] is False  # a Connect client: no JVM in that process
    for mode in MODES:
        assert outcome[mode] == {"updated": 100, "deleted": 100, "merged": [[200, 100, 0, 100]],
                                 "counts": [[1000, 1000, 100, 200, 0]]}, mode
