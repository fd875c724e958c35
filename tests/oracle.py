"""The Java reference implementation of Iceberg (../shared/iceberg-oracle), from tests.

Jobs are batched into one JVM because each start costs about 10 seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ORACLE_DIR = Path(os.environ.get("ICEBERG_ORACLE_DIR", REPO.parent / "shared" / "iceberg-oracle"))
ORACLE_HOME = Path(
    os.environ.get("ICEBERG_ORACLE_HOME", Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "iceberg-oracle")
)


class OracleError(AssertionError):
    pass


def available() -> bool:
    return (ORACLE_DIR / "oracle").exists()


def _ensure_built() -> None:
    # Checked first, so a missing oracle fails with what to do rather than an import error in
    # the batch runner; a ready environment still needs the oracle's own modules.
    if not available():
        raise OracleError(f"the Java reference implementation is not at {ORACLE_DIR}: check out "
                          "../shared/iceberg-oracle beside the repository, or set ICEBERG_ORACLE_DIR")
    if (ORACLE_HOME / ".ready").exists():
        return
    # The first call of the tool builds its environment (a few minutes, once per machine).
    with tempfile.TemporaryDirectory() as wh:
        subprocess.run([str(ORACLE_DIR / "oracle"), "sql", wh, "-e", "SELECT 1"], check=True,
                       capture_output=True, timeout=1800)


@dataclass
class OracleBatch:
    """Collect jobs, then :meth:`run` them in one JVM; each job's result is a dict."""

    warehouse: str | None = None
    jobs: list[dict[str, Any]] = field(default_factory=list)

    def read(self, metadata: str, columns: list[str] | None = None, where: str | None = None,
             snapshot_id: int | None = None, branch: str | None = None, tag: str | None = None) -> int:
        """Java's read of the table, at a snapshot, a branch or a tag (Spark's read options)."""
        self.jobs.append({"op": "read", "metadata": metadata, "columns": columns, "where": where,
                          "snapshot_id": snapshot_id, "branch": branch, "tag": tag})
        return len(self.jobs) - 1

    def meta(self, metadata: str, name: str) -> int:
        self.jobs.append({"op": "meta", "metadata": metadata, "name": name})
        return len(self.jobs) - 1

    def sql(self, *statements: str) -> int:
        self.jobs.append({"op": "sql", "statements": list(statements)})
        return len(self.jobs) - 1

    def run(self) -> list[dict[str, Any]]:
        _ensure_built()
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"warehouse": self.warehouse, "jobs": self.jobs}, f)
            path = f.name
        env = {**os.environ, "ICEBERG_ORACLE_DIR": str(ORACLE_DIR),
               "ICEBERG_ORACLE_HOME": str(ORACLE_HOME),
               "PYSPARK_PYTHON": str(ORACLE_HOME / "venv" / "bin" / "python")}
        try:
            done = subprocess.run(
                [str(ORACLE_HOME / "venv" / "bin" / "python"), str(Path(__file__).with_name("oracle_batch.py")), path],
                capture_output=True, text=True, env=env, timeout=1800,
            )
        finally:
            os.unlink(path)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or len(lines) != len(self.jobs):
            raise OracleError(f"oracle failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
        results = [json.loads(line) for line in lines]
        return results


def check(result: dict[str, Any]) -> dict[str, Any]:
    if "error" in result:
        raise OracleError(result["error"])
    return result
