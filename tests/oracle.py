"""The Java reference implementation of Iceberg (../shared/iceberg-oracle), from tests.

Each start of a JVM costs about 10 seconds, so jobs are batched, and every batch of a test
session goes to one long-lived JVM (``tests/oracle_batch.py --serve``), each in a new Spark
session of it; the JVM is started again if it died, and after ``BATCHES_PER_JVM`` batches.
"""

from __future__ import annotations

import atexit
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
        return _SERVER.run({"warehouse": self.warehouse, "jobs": self.jobs})


# A bound on what one JVM accumulates (classes, cached metadata of the sessions it served).
BATCHES_PER_JVM = 60


class _BatchServer:
    """The session's one oracle JVM: batches in on its stdin, job lines out on its stdout."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.stderr: Any = None
        self.served = 0

    def _start(self) -> subprocess.Popen[str]:
        self.stop()
        env = {**os.environ, "ICEBERG_ORACLE_DIR": str(ORACLE_DIR), "ICEBERG_ORACLE_HOME": str(ORACLE_HOME),
               "PYSPARK_PYTHON": str(ORACLE_HOME / "venv" / "bin" / "python")}
        # stderr to a file: the JVM's log must never fill a pipe no one reads.
        self.stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115 (open as long as the JVM runs)
        process = subprocess.Popen(
            [str(ORACLE_HOME / "venv" / "bin" / "python"), str(Path(__file__).with_name("oracle_batch.py")), "--serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env)
        self.process, self.served = process, 0
        self._until(lambda line: line.get("ready") is True)
        return process

    def _stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        self.stderr.seek(0)
        return str(self.stderr.read())[-4000:]

    def _until(self, done: Any) -> list[dict[str, Any]]:
        """The JSON lines of the JVM's stdout up to the one ``done`` accepts (not included)."""
        assert self.process is not None and self.process.stdout is not None
        lines: list[dict[str, Any]] = []
        while True:
            line = self.process.stdout.readline()
            if not line:
                code, tail = self.process.poll(), self._stderr_tail()
                self.stop()
                raise OracleError(f"oracle failed (exit {code}):\n{tail}")
            if not line.startswith("{"):
                continue
            parsed = json.loads(line)
            if done(parsed):
                return lines
            lines.append(parsed)

    def run(self, batch: dict[str, Any]) -> list[dict[str, Any]]:
        if self.process is None or self.process.poll() is not None or self.served >= BATCHES_PER_JVM:
            self._start()
        assert self.process is not None and self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(batch) + "\n")
            self.process.stdin.flush()
            results = self._until(lambda line: line.get("batch-done") is True)
        except BaseException:
            # Interrupted (a test's timeout, say): the rest of this batch's answer would be
            # read as the next batch's, so this JVM goes.
            self.stop()
            raise
        self.served += 1
        if len(results) != len(batch["jobs"]):
            raise OracleError(f"oracle answered {len(results)} of {len(batch['jobs'])} jobs:\n{self._stderr_tail()}")
        return results

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                assert self.process.stdin is not None
                self.process.stdin.close()
                try:
                    self.process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=30)
            self.process = None
        if self.stderr is not None:
            self.stderr.close()
            self.stderr = None


_SERVER = _BatchServer()
atexit.register(_SERVER.stop)


def check(result: dict[str, Any]) -> dict[str, Any]:
    if "error" in result:
        raise OracleError(result["error"])
    return result
