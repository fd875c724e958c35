"""tests/budget.py: the suite's total and its slowest modules, printed at the end of a session."""

from __future__ import annotations

from pathlib import Path

from tests.budget import BUDGET_S, read_times, summary


def test_the_summary_gives_the_total_against_the_budget_and_the_slowest_modules_first() -> None:
    seconds = {"tests/a.py": 10.0, "tests/b.py": 70.0, "tests/c.py": 20.0}
    tests = {"tests/a.py": {"tests/a.py::x"}, "tests/b.py": {"tests/b.py::x", "tests/b.py::y"},
             "tests/c.py": {"tests/c.py::x"}}
    lines = summary(seconds, tests, slowest=2)
    assert lines[0] == f"tests: 4 in 3 modules, 100.0 s of test time (the budget of make test: {BUDGET_S:,.0f} s in all)"
    assert [line.split()[-3] for line in lines[1:]] == ["tests/b.py", "tests/c.py"]
    assert "70.0 s  70.0%" in lines[1] and "(2 tests)" in lines[1]


def test_the_summary_of_an_empty_session_divides_by_nothing() -> None:
    assert summary({"tests/a.py": 0.0}, {"tests/a.py": set()})[1].split()[2] == "0.0%"


def test_a_times_file_written_as_tests_finish_is_summed_by_module_and_by_test(tmp_path: Path) -> None:
    times = tmp_path / "times.tsv"
    times.write_text("tests/a.py::x\tsetup\t1.500\t1\ntests/a.py::x\tcall\t2.000\t2\n"
                     "tests/b.py::y\tcall\t0.250\t3\ntests/a.py::z\tcall\t4.000\t4\n", encoding="utf-8")
    seconds, tests, by_test = read_times(times)
    assert seconds == {"tests/a.py": 7.5, "tests/b.py": 0.25}
    assert tests == {"tests/a.py": {"tests/a.py::x", "tests/a.py::z"}, "tests/b.py": {"tests/b.py::y"}}
    assert by_test == {"tests/a.py::x": 3.5, "tests/b.py::y": 0.25, "tests/a.py::z": 4.0}
