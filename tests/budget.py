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

from collections import defaultdict

import pytest

BUDGET_S = 2400.0
SLOWEST = 5

_seconds: defaultdict[str, float] = defaultdict(float)
_tests: defaultdict[str, set[str]] = defaultdict(set)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = report.nodeid.split("::", 1)[0]
    _seconds[module] += report.duration
    _tests[module].add(report.nodeid)


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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _seconds:
        return
    terminalreporter.section("time budget (tests/budget.py)")
    for line in summary(_seconds, _tests):
        terminalreporter.write_line(line)
