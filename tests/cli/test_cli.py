"""The `tablestore` command as a user runs it: a real process, real output, real exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tablestore.config import load_config


def run(args: list[str], config: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TABLESTORE_CONFIG": str(config), "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-m", "tablestore.cli", *args], capture_output=True, text=True,
                          env=env, timeout=600)
    if check and done.returncode != 0:
        raise AssertionError(f"exit {done.returncode}: {done.stderr}")
    return done


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "tablestore.yaml"
    path.write_text(textwrap.dedent(f"""
        default-catalog: lake
        catalogs:
          - name: lake
            type: sql
            uri: sqlite:///{tmp_path}/catalog.db
            warehouse: {tmp_path}/wh
            default-database: shop
    """))
    return path


def json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_ddl_and_show_print_one_json_line_per_statement(config: Path) -> None:
    done = run(["sql", "-e", "CREATE DATABASE shop; CREATE TABLE shop.t (x INT, s STRING); SHOW TABLES IN shop",
                "--format", "json"], config)
    lines = json_lines(done.stdout)
    assert lines[0] == {"columns": [], "rows": []}
    assert lines[2] == {"columns": ["namespace", "tableName", "isTemporary"], "rows": [["shop", "t", False]]}


@pytest.mark.spark
def test_insert_reports_affected_rows_and_select_returns_them(config: Path, tmp_path: Path) -> None:
    # Two processes, each starting Spark: the views and functions the first makes live in the
    # catalog, and the second uses them.
    script = tmp_path / "load.sql"
    script.write_text("CREATE DATABASE shop;\nCREATE TABLE t (x INT, s STRING);\n"
                      "INSERT INTO t VALUES (1, 'a'), (2, NULL);\nSELECT * FROM t ORDER BY x;\n"
                      "CREATE VIEW big AS SELECT x, s FROM t WHERE x > 1;\n"
                      "CREATE FUNCTION shout AS 'tests.sql.udfs.shout' RETURNS STRING;\n")
    lines = json_lines(run(["sql", "-f", str(script), "--format", "json"], config).stdout)
    assert lines[2] == {"columns": [], "rows": [], "affected": 2}
    assert lines[3] == {"columns": ["x", "s"], "rows": [[1, "a"], [2, None]]}
    later = run(["sql", "-e", "SELECT s, x FROM t ORDER BY x; SELECT x, shout(coalesce(s, 'none')) AS loud FROM big",
                 "--format", "csv"], config).stdout
    assert later.splitlines() == ["s,x", "a,1", ",2", "x,loud", "2,NONE!"]


def test_errors_exit_non_zero_with_one_line_and_commit_nothing(config: Path) -> None:
    run(["sql", "-e", "CREATE DATABASE shop; CREATE TABLE t (x INT)"], config)
    missing = run(["sql", "-e", "DROP TABLE nothing"], config, check=False)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[0].startswith("error: table lake.shop.nothing does not exist")
    syntax = run(["sql", "-e", "CREATE TABLE u (x INT);\nCREATE TABLEZ v (y INT)"], config, check=False)
    assert syntax.returncode == 1 and "(line 2, column 8)" in syntax.stderr
    # A syntax error anywhere in the script runs nothing: u was not created.
    catalog = load_config(str(config)).catalogs["lake"].load()
    assert catalog.list_tables(("shop",)) == [("shop", "t")]
    exists = run(["sql", "-e", "CREATE TABLE t (x INT)"], config, check=False)
    assert exists.returncode == 1 and "already exists" in exists.stderr
    unknown_catalog = run(["sql", "-e", "USE nope.db"], config, check=False)
    assert unknown_catalog.returncode == 1 and "nope" in unknown_catalog.stderr
