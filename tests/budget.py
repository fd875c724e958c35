"""The suite's time budget, printed at the end of every pytest session (issue 48).

``make test`` must finish within ``BUDGET_S`` on a clean clone (CI stops at 90 minutes, and every
change waits for the suite's verdict). At the end of a session this prints the tests' total time
and the five slowest modules, each with its share, so a module that grew shows up in the run
that grew it. A module's time is the sum of its tests' setup, call and teardown: a session
fixture's start (a service, a JVM) counts in the first module that asks for it.
docs/testing.md says how a new test stays within the budget.

``tests/conftest.py`` imports the two hooks below, which is how pytest finds them.
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

BUDGET_S = 2400.0
SLOWEST = 5
# A file that each test's phases are appended to as they finish, when set: a run stopped before
# its end (a session's time, a machine under load) still leaves its figures, which
# ``python -m tests.budget FILE`` sums by module.
TIMES_FILE_ENV = "TABLESTORE_TEST_TIMES"

_seconds: defaultdict[str, float] = defaultdict(float)
_tests: defaultdict[str, set[str]] = defaultdict(set)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = report.nodeid.split("::", 1)[0]
    _seconds[module] += report.duration
    _tests[module].add(report.nodeid)
    path = os.environ.get(TIMES_FILE_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as times:
            times.write(f"{report.nodeid}\t{report.when}\t{report.duration:.3f}\t{time.time():.0f}\n")


def read_times(path: Path) -> tuple[dict[str, float], dict[str, set[str]], dict[str, float]]:
    """A times file's seconds by module, tests by module, and seconds by test (its phases summed)."""
    seconds: defaultdict[str, float] = defaultdict(float)
    tests: defaultdict[str, set[str]] = defaultdict(set)
    by_test: defaultdict[str, float] = defaultdict(float)
    for line in path.read_text(encoding="utf-8").splitlines():
        nodeid, _phase, duration, _at = line.split("\t")
        module = nodeid.split("::", 1)[0]
        seconds[module] += float(duration)
        tests[module].add(nodeid)
        by_test[nodeid] += float(duration)
    return seconds, tests, by_test


def summary(seconds: dict[str, float], tests: dict[str, set[str]], slowest: int = SLOWEST) -> list[str]:
    """The lines printed: the total against the budget, then the slowest modules."""
    total = sum(seconds.values())
    count = sum(len(ids) for ids in tests.values())
    lines = [f"tests: {count} in {len(seconds)} modules, {total:,.1f} s of test time "
             f"(the budget of make test: {BUDGET_S:,.0f} s in all)"]
    for module, spent in sorted(seconds.items(), key=lambda item: -item[1])[:slowest]:
        share = spent / total if total else 0.0
        lines.append(f"  {spent:8,.1f} s {share:6.1%}  {module} ({len(tests[module])} tests)")
    return lines


def main(argv: list[str]) -> int:
    """``python -m tests.budget FILE [MODULES [TESTS]]``: a times file's total, its slowest
    modules and its slowest tests (setup, call and teardown summed)."""
    if not argv:
        print(f"usage: python -m tests.budget FILE [MODULES [TESTS]] (FILE as written with {TIMES_FILE_ENV}=FILE)",
              file=sys.stderr)
        return 2
    modules, slowest_tests = (int(argv[1]) if len(argv) > 1 else 20), (int(argv[2]) if len(argv) > 2 else 40)
    seconds, tests, by_test = read_times(Path(argv[0]))
    for line in summary(seconds, tests, slowest=modules):
        print(line)
    for nodeid, spent in sorted(by_test.items(), key=lambda item: -item[1])[:slowest_tests]:
        print(f"  {spent:8,.1f} s  {nodeid}")
    return 0


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _seconds:
        return
    terminalreporter.section("time budget (tests/budget.py)")
    for line in summary(_seconds, _tests):
        terminalreporter.write_line(line)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
