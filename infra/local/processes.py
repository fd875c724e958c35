"""Child processes of the local topology: started with a log file, told to die with their
parent (Linux ``PR_SET_PDEATHSIG``), waited for until ready, stopped by their own id."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def die_with_parent() -> None:
    # Runs in the child between fork and exec: SIGTERM it when its parent dies.
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def spawn(argv: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None,
          cwd: Path | None = None) -> subprocess.Popen[bytes]:
    log = open(log_path, "ab")  # noqa: SIM115 - handed to the child, closed below
    try:
        return subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, env=dict(env) if env else None,
                                cwd=cwd, preexec_fn=die_with_parent)
    finally:
        log.close()


def stop_process(proc: subprocess.Popen[bytes], timeout_s: float = 15.0) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout_s)


def kill_process(proc: subprocess.Popen[bytes], timeout_s: float = 15.0) -> None:
    """SIGKILL: no clean shutdown."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=timeout_s)


def child_pids(pid: int) -> list[int]:
    """The ids of ``pid``'s direct children (from /proc)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # The command name may hold spaces and parentheses: the fields follow the last ')'.
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(stat.parent.name))
    return children


def kill_pids(pids: Sequence[int], timeout_s: float = 15.0) -> None:
    """SIGKILL each process (not ours to wait for) and wait until every one is gone."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {list(pids)} survived SIGKILL for {timeout_s:.0f} s")
        time.sleep(0.1)
    # Give init a moment to reap them (it may never, in a container whose init does not).
    reaped_by = time.monotonic() + 5
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < reaped_by:
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    # A killed process that is not our child lingers as a zombie until its parent reaps it.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def http_ok(url: str, headers: Mapping[str, str] | None = None) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=dict(headers or {})), timeout=3) as r:
            return 200 <= r.status < 300
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def wait_until(ready: Callable[[], bool], what: str, proc: subprocess.Popen[bytes] | None, log_path: Path | None,
               timeout_s: float = 120.0) -> None:
    """Poll ``ready`` until it answers True; fail with the log's tail if the process dies or time runs out."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        tail = log_path.read_text(errors="replace")[-4000:] if log_path and log_path.exists() else ""
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{tail}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} was not ready after {timeout_s:.0f} s:\n{tail}")
        time.sleep(0.3)
