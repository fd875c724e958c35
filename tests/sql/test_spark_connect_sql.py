"""SQL writes and streamed queries through Spark Connect (tests/sql/spark_connect_sql_cases.py).

The cases run in a pytest process of their own: PySpark refuses to start a Connect session in a
process that holds a classic one (``SESSION_ALREADY_EXIST``), and earlier modules of the suite
leave one in this process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
CASES = Path(__file__).with_name("spark_connect_sql_cases.py")


def test_sql_writes_and_streamed_queries_through_spark_connect(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         "--basetemp", str(tmp_path / "cases"), str(CASES)],
        cwd=REPO, capture_output=True, text=True, timeout=800,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    # Every case ran and passed: none was skipped or deselected.
    assert summary.startswith("6 passed"), summary
