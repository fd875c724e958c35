"""CALL system.merge_columns under a capped Spark driver: Spark tasks read the source and write the
fragments, so a source larger than the driver's result cap, and than the client's allowed
growth, merges with the client's memory flat. The job runs in a process of its own
(tests/sql/bounded_column_merge_job.py) because driver memory is fixed when its JVM starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
ROWS, PAD = 200_000, 2_000
# The bound on the client's growth while the statement runs.
MAX_RSS_GROWTH = 300 * 1024 * 1024
MAX_RESULT_SIZE = 64 * 1024 * 1024


def test_column_merge_from_a_source_larger_than_the_driver_holds_keeps_client_memory_flat(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.sql.bounded_column_merge_job", str(tmp_path), str(ROWS), str(PAD)],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    # The source's feature column alone is several times the driver's result cap and more than
    # the client may grow by: collected to the driver (or read by the client, as the procedure
    # once did) it fails the cap or the bound below.
    assert outcome["source_bytes"] > max(5 * MAX_RESULT_SIZE, MAX_RSS_GROWTH), outcome
    assert outcome["result"] >= 2  # both of the table's files were rewritten
    assert outcome["checks"] == [ROWS, ROWS, ROWS]
    summary = outcome["summary"]
    assert summary["column-merge"] == "merge" and int(summary["tablestore.write.tasks"]) >= 1
    assert summary["tablestore.write.executors"] == "driver"
    assert outcome["rss_peak"] - outcome["rss_before"] < MAX_RSS_GROWTH, outcome
    print(f"merge of {outcome['source_bytes'] / 2**20:.0f} MiB of features: {outcome['seconds']} s, client RSS "
          f"{(outcome['rss_peak'] - outcome['rss_before']) / 2**20:+.1f} MiB")
