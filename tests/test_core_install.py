"""The core install: `pip install .` without extras gives a working table store.

A fresh virtual environment gets the project with no extras (uv, from its cache or PyPI), then
imports tablestore, writes and reads a table in it, and finds none of the extras' packages: no
PySpark, Dagster, Great Expectations or Selenium. The `tablestore` command installed there
names the extra a command needs instead of failing with an ImportError.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Packages of the extras and the dev group that the core install must not bring.
NOT_IN_CORE = ("pyspark", "dagster", "great_expectations", "selenium", "fastapi", "uvicorn", "fastavro", "pandas")


def uv_command() -> list[str]:
    """uv on PATH, else the uv module of the Python that `make install` uses (the Makefile's)."""
    found = shutil.which("uv")
    if found:
        return [found]
    python3 = shutil.which("python3")
    if python3 and subprocess.run([python3, "-m", "uv", "--version"], capture_output=True).returncode == 0:
        return [python3, "-m", "uv"]
    raise AssertionError("uv is not installed; install it with: python3 -m pip install uv (make install does)")


def run(command: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def test_pip_install_without_extras_runs_a_table_round_trip_without_spark_dagster_gx_or_selenium(
    tmp_path: Path,
) -> None:
    uv = uv_command()
    venv = tmp_path / "venv"
    run([*uv, "venv", "--quiet", "--python", sys.executable, str(venv)], tmp_path)
    python = venv / "bin" / "python"
    # A copy of the sources: the install builds a wheel and must not depend on the worktree's
    # state (its .venv, build leftovers); `pip install .` of a checkout is what a user runs.
    source = tmp_path / "src"
    shutil.copytree(ROOT / "tablestore", source / "tablestore", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    run([*uv, "pip", "install", "--quiet", "--python", str(python), "."], source)

    script = textwrap.dedent(f"""
        import importlib.util
        import sys

        import pyarrow as pa
        import tablestore

        catalog = tablestore.load_catalog("t", uri="sqlite:///{tmp_path}/c.db", warehouse="{tmp_path}/wh")
        catalog.create_namespace("db")
        table = catalog.create_table("db.t", pa.schema([("id", pa.int64()), ("v", pa.string())]))
        table.append(pa.table({{"id": [1, 2, 3], "v": ["a", "b", "c"]}}))
        table.append(pa.table({{"id": [4], "v": ["d"]}}))
        reloaded = catalog.load_table("db.t")
        print(sorted(reloaded.scan().to_arrow().to_pylist(), key=lambda r: r["id"]))
        print(reloaded.scan(filter="id >= 3").to_arrow().num_rows)
        print(len(reloaded.snapshots()))
        print([name for name in {NOT_IN_CORE!r} if importlib.util.find_spec(name) is not None])
        print(tablestore.__file__)
    """)
    done = run([str(python), "-c", script], tmp_path)
    rows, filtered, snapshots, present, location = done.stdout.strip().splitlines()
    assert rows == "[{'id': 1, 'v': 'a'}, {'id': 2, 'v': 'b'}, {'id': 3, 'v': 'c'}, {'id': 4, 'v': 'd'}]"
    assert filtered == "2"
    assert snapshots == "2"
    assert present == "[]"
    # The installed copy ran, not the worktree's.
    assert location.startswith(str(venv))

    # The command that needs Spark names the extra to install; so does the catalog service.
    command = venv / "bin" / "tablestore"
    sql = subprocess.run([str(command), "sql", "-e", "SELECT 1"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert sql.returncode == 1
    assert "pip install 'tablestore[spark]'" in sql.stderr, sql.stderr
    serve = subprocess.run([str(command), "catalog", "serve"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120)
    assert serve.returncode == 1
    assert "pip install 'tablestore[service]'" in serve.stderr, serve.stderr
    # Table administration is the core's: it runs.
    describe = run([str(command), "table", "describe", "db.t", "--format", "csv", "--config", str(config(tmp_path))],
                   tmp_path, timeout=120)
    assert "id" in describe.stdout and "bigint" in describe.stdout, describe.stdout


def config(tmp_path: Path) -> Path:
    path = tmp_path / "tablestore.yaml"
    path.write_text(f"catalogs:\n  - name: t\n    type: sql\n    uri: sqlite:///{tmp_path}/c.db\n"
                    f"    warehouse: {tmp_path}/wh\n")
    return path
