"""One way into a commit: every table commit of the project is a Transaction's.

``Transaction.commit_transaction`` is the only caller of the retry loop, and the retry loop is
the only caller of a catalog's ``commit_table`` outside the catalogs and the REST service (which
implement it). Expiry and erasure, which remove snapshots rather than add one, commit through a
Transaction too. Every file Spark writes is committed by one function,
``spark/commit.py``'s ``commit_files``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Where commit_table is implemented and served, not entered.
IMPLEMENTERS = ("tablestore/catalog/", "tablestore/rest/")


def calls_of(names: set[str], *packages: str) -> list[tuple[str, str]]:
    found = []
    for package in packages:
        root = ROOT / package
        for path in [root] if root.is_file() else sorted(root.rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(), relative)):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                if name in names:
                    found.append((relative, name))
    return found


def test_one_retry_loop_entered_by_the_transaction_alone() -> None:
    calls = calls_of({"commit_with_retries", "commit_table"}, "tablestore", "pipelines", "quality")
    outside = [c for c in calls if not c[0].startswith(IMPLEMENTERS)]
    assert outside == [
        ("tablestore/table/update/retry.py", "commit_table"),
        ("tablestore/table/update/transaction.py", "commit_with_retries"),
    ]


def test_expire_and_erasure_commit_through_a_transaction() -> None:
    for module in ("tablestore/maintenance/expire.py", "tablestore/maintenance/erasure.py"):
        source = (ROOT / module).read_text()
        assert ".transaction().change_metadata(stage).commit_transaction()" in source, module
        assert "commit_with_retries" not in source, module


def test_files_written_by_spark_are_committed_by_one_function() -> None:
    # SQL's INSERT, CTAS and RTAS, the data source (and its native Parquet path) and the streaming
    # sink: none of them opens a transaction or calls the Table API's file commits itself.
    commits = {"transaction", "append_files", "overwrite_files", "replace_partitions_files", "replace_files",
               "commit_snapshot", "commit_transaction"}
    calls = calls_of(commits, "tablestore/sql", "tablestore/spark/datasource/source_write.py",
                     "tablestore/spark/datasource/stream.py", "tablestore/spark/tasks/write_files.py",
                     "tablestore/spark/native/native_write.py", "tablestore/spark/commit.py")
    assert sorted(calls) == [
        ("tablestore/spark/commit.py", "append_files"),
        ("tablestore/spark/commit.py", "commit_transaction"),
        ("tablestore/spark/commit.py", "overwrite_files"),
        ("tablestore/spark/commit.py", "replace_files"),
        ("tablestore/spark/commit.py", "replace_partitions_files"),
        ("tablestore/spark/commit.py", "transaction"),
    ]
