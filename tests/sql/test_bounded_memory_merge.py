"""A SQL MERGE under a capped Spark driver: tasks write the files, the client's memory stays flat.

The issue's full size is 1M keys into 10M rows (run by hand: docs/row-level-operations.md); here
the same statement runs at a size that takes well under two minutes. The job runs in a process of
its own (tests/sql/bounded_merge_job.py) because driver memory is fixed when its JVM starts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
ROWS, KEYS = 300_000, 100_000
# Each source row carries this many bytes more: the changed rows (about 70 MB) outgrow
# spark.driver.maxResultSize=64m, so collecting them to the driver, as row-level SQL once did,
# fails the statement.
PAD = 700
# The bound on the client's growth while the statement runs.
MAX_RSS_GROWTH = 300 * 1024 * 1024


def test_merge_of_many_keys_succeeds_under_a_capped_driver_with_flat_client_memory(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tests.sql.bounded_merge_job", str(tmp_path), str(ROWS), str(KEYS), str(PAD)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    matched = outcome["expected_matched"]
    assert matched == KEYS // 2
    # num_affected_rows, num_updated_rows, num_deleted_rows, num_inserted_rows
    assert outcome["result"] == [KEYS, matched, 0, KEYS - matched]
    assert outcome["count"] == outcome["distinct"] == ROWS + KEYS - matched
    assert outcome["merged"] == KEYS
    assert outcome["rss_peak"] - outcome["rss_before"] < MAX_RSS_GROWTH, outcome
