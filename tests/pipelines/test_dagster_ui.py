"""The Dagster UI of ``make dagster``, driven by headless Chromium (Debian's ``chromium`` and
``chromium-driver``, installed from Debian when missing): launch a materialization of one asset
from the asset's page and watch the run reach Success in the UI."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pipelines.dagster_ui import chromium, materialize_in_ui
from tests.services import free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
# The cheapest asset: it writes the requests file, no Spark.
ASSET_PATH = "landing/erasure_requests"


def graphql(url: str, query: str) -> dict[str, Any]:
    request = urllib.request.Request(f"{url}/graphql", data=json.dumps({"query": query}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["data"]


@pytest.fixture(scope="module")
def dagster_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``dagster dev`` as ``make dagster`` starts it (embedded settings), on loopback, a free
    port, a fresh DAGSTER_HOME and LAKEHOUSE_ROOT."""
    home = tmp_path_factory.mktemp("dagster-home")
    root = tmp_path_factory.mktemp("lakehouse")
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "LAKEHOUSE_ROOT": str(root), "LAKEHOUSE_ENV": "embedded"}
    env.pop("LAKEHOUSE_SETTINGS", None)
    log_path = home / "dagster-dev.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "dagster"), "dev", "-m", "pipelines.definitions",
             "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 420  # the code server imports Spark and GX: slow on a busy machine
        while True:
            try:
                with urllib.request.urlopen(f"{url}/server_info", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dagster dev did not start:\n{log_path.read_text()[-4000:]}")
            time.sleep(1)
        yield url, root
    finally:
        # dagster dev shuts its webserver, daemon and code server down on SIGTERM; a busy
        # machine may make that slow, and nothing of it may outlive the test.
        os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


def test_materialize_an_asset_from_the_dagster_ui_and_see_the_run_succeed(
        dagster_ui: tuple[str, Path], browser: Any, tmp_path: Path) -> None:
    url, root = dagster_ui
    run_id, status, page = materialize_in_ui(browser, url, ASSET_PATH, tmp_path / "dagster-run.png")
    assert status == "Success", page[:2000]
    # The same run, through the GraphQL API the UI reads.
    run = graphql(url, f'{{ runOrError(runId: "{run_id}") {{ ... on Run {{ status assetSelection {{ path }} }} }} }}')
    assert run["runOrError"] == {"status": "SUCCESS", "assetSelection": [{"path": ASSET_PATH.split("/")}]}
    # And the asset did its work in the lakehouse the UI was started on.
    (requests,) = (root / "landing" / "erasure_requests").glob("*.jsonl")
    assert sorted(json.loads(line)["user_id"] for line in requests.read_text().splitlines()) == [7, 42, 101]
