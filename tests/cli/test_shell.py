"""The interactive ``tablestore sql`` shell, driven in a real terminal (tmux) as a user types.

Statements that need no Spark session keep the test quick: DDL, SHOW and DESCRIBE run on the
catalog alone.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="module", autouse=True)
def tmux() -> None:
    """tmux drives the terminal; installed from Debian when missing, like the suite's other services."""
    if shutil.which("tmux") is None:
        subprocess.run(["apt-get", "install", "-y", "tmux"], capture_output=True, timeout=600)
    assert shutil.which("tmux"), "tmux is needed to drive the shell: apt-get install tmux"


class Terminal:
    """One tmux session running a command; keys in, screen text out."""

    def __init__(self, command: str, env: dict[str, str]) -> None:
        self.name = f"tablestore-shell-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # The command's exit status is kept in the pane, so the test can assert a clean exit.
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", "200", "-y", "50",
                        f"env {exports} {command}; echo EXITED=$?; sleep 600"], check=True)

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def type(self, text: str) -> None:
        # tmux takes an argument ending in ';' as its command separator unless it is escaped.
        literal = text[:-1] + "\\;" if text.endswith(";") else text
        subprocess.run(["tmux", "send-keys", "-t", self.name, "-l", literal], check=True)

    def screen(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-J", "-S", "-200", "-t", self.name],
                              capture_output=True, text=True, check=True).stdout

    def wait_for(self, test: Callable[[str], bool], timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if test(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"the terminal never showed what was expected; it shows:\n{text}")
            time.sleep(0.2)

    def wait_text(self, needle: str, count: int = 1, timeout: float = 120) -> str:
        return self.wait_for(lambda s: s.count(needle) >= count, timeout)

    def wait_prompt(self, after: str) -> str:
        """The screen once the output of the statement ending in ``after`` is followed by a fresh,
        idle prompt. Keys typed sooner arrive while the statement runs and are echoed by the
        terminal as type-ahead (a CI run's completion test read them half-echoed), and a prompt
        count alone can be met early: the shell may draw its first prompt twice."""
        return self.wait_for(lambda s: after in s and s.split(after)[-1].rstrip().endswith("\nlake.shop>"))

    def end_with(self, key: str, attempts: int = 24) -> str:
        """Send ``key`` (Ctrl-D) until the shell has exited; the screen then. Under load a key sent
        while the prompt is drawn can be lost (CI runs waited 120 s for an exit, the prompt
        shown): the shell exits on the first key it reads, and later ones reach the idle pane."""
        for _ in range(attempts):
            self.keys(key)
            try:
                return self.wait_text("EXITED=", timeout=5)
            except AssertionError:
                continue
        return self.wait_text("EXITED=", timeout=5)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], check=False, capture_output=True)


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Callable[[], Terminal]]:
    config = tmp_path / "tablestore.yaml"
    config.write_text(textwrap.dedent(f"""
        default-catalog: lake
        catalogs:
          - name: lake
            type: sql
            uri: sqlite:///{tmp_path}/catalog.db
            warehouse: {tmp_path}/wh
            default-database: shop
    """))
    env = {
        "TABLESTORE_CONFIG": str(config),
        "TABLESTORE_HISTORY": str(tmp_path / "history"),
        "PYSPARK_PYTHON": sys.executable,
        "PATH": os.environ.get("PATH", ""),
        "TERM": "xterm-256color",
    }
    started: list[Terminal] = []

    def start() -> Terminal:
        terminal = Terminal(f"{shlex.quote(sys.executable)} -m tablestore.cli sql", env)
        started.append(terminal)
        return terminal

    try:
        yield start
    finally:
        for terminal in started:
            terminal.close()


def test_shell_runs_statements_completes_names_and_keeps_history(shell: Callable[[], Terminal], tmp_path: Path) -> None:
    term = shell()
    term.wait_text("lake.shop>")
    # A statement over two lines runs when the ';' comes.
    term.type("CREATE DATABASE shop")
    term.keys("Enter")
    term.wait_text("...")
    term.type(";")
    term.keys("Enter")
    assert "OK" in term.wait_prompt("... ;").split("... ;")[-1]
    term.type("CREATE TABLE events_2024 (id BIGINT, country STRING);")
    term.keys("Enter")
    assert "OK" in term.wait_prompt("(id BIGINT, country STRING);").split("(id BIGINT, country STRING);")[-1]

    # TAB completes a keyword, then a table name of the current database.
    term.type("DESCR")
    term.keys("Tab")
    term.wait_text("DESCRIBE")
    term.type(" events_")
    term.keys("Tab")
    term.wait_text("DESCRIBE events_2024")
    term.type(";")
    term.keys("Enter")
    screen = term.wait_for(lambda s: "country" in s.split("DESCRIBE events_2024;")[-1])
    described = screen.split("DESCRIBE events_2024;")[-1].lower()
    assert "id" in described and "string" in described

    # An error is printed and the shell goes on.
    term.type("DROP TABLE nope;")
    term.keys("Enter")
    screen = term.wait_prompt("DROP TABLE nope;")
    assert "nope" in screen.split("error:", 1)[1].splitlines()[0]
    term.type("SHOW TABLES;")
    term.keys("Enter")
    term.wait_for(lambda s: s.count("events_2024") >= 3)
    # Ctrl-D only once the next prompt reads keys: sent while the output is still being printed,
    # it can be lost between prompts (a CI run waited for the exit in vain).
    assert "row(s)" in term.wait_prompt("SHOW TABLES;").split("SHOW TABLES;")[-1]
    screen = term.end_with("C-d")
    assert "EXITED=0" in screen

    history = (tmp_path / "history").read_text()
    assert "CREATE TABLE events_2024 (id BIGINT, country STRING);" in history
    assert "SHOW TABLES;" in history

    # A second shell recalls the last statement with the Up arrow and runs it again.
    again = shell()
    again.wait_text("lake.shop>")
    again.keys("Up")
    again.wait_text("SHOW TABLES;")
    again.keys("Enter")
    again.wait_text("events_2024")
    again.type("exit")
    again.keys("Enter")
    assert "EXITED=0" in again.wait_text("EXITED=")
