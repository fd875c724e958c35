"""The Python daemon of tablestore's Spark sessions: pyspark's own, with the workers' imports done once.

Spark runs its tasks' Python through a daemon process that forks one worker for every task
that finds no idle worker (a worker is reused only when its task consumed its whole input; a
``limit``, a failure or a new job's concurrency starts fresh ones). The data source's steps
on the driver (creating the source, planning a read, committing a write) run under pyspark's
own daemon whatever the setting, and are not helped here. pyspark's daemon imports nothing
before it forks, so each fresh worker
imported pyspark, pyarrow, pandas and tablestore by itself: 2-3 CPU seconds per worker, most
of a small query. Worse, Spark puts its ``pyspark.zip`` first on the workers' ``PYTHONPATH``,
and a zip holds sources only, so every worker compiled pyspark from source.

This daemon (``spark.python.daemon.module``, set by :func:`tablestore.spark.spark_session`)
imports those modules once and then runs pyspark's daemon loop unchanged; the forked workers
inherit them. When the pyspark installed beside tablestore is the very version of Spark's zip,
the installed one (whose bytecode ``make install`` compiled) is preferred over the zip.

Forking after these imports is safe: they start no thread of their own but allocator and BLAS
housekeeping threads, and Arrow (since 12.0), jemalloc and OpenBLAS re-initialise themselves in
a forked child. Nothing here runs a computation before the fork.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import zipfile

# What the tasks of a tablestore job import: pyspark's worker and the modules whose functions
# its data source read and write tasks run, the Arrow and pandas layers, tablestore's tasks.
PRELOADED_MODULES = (
    "pyspark.worker",
    "pyspark.sql.worker.plan_data_source_read",
    "pyspark.sql.worker.write_into_data_source",
    "pyspark.sql.pandas.serializers",
    "pyspark.sql.datasource",
    "pyarrow.parquet",
    "pyarrow.dataset",
    "pyarrow.compute",
    "pandas",
    "tablestore.spark.datasource.source",
    "tablestore.spark.datasource.source_read",
    "tablestore.spark.datasource.source_write",
    "tablestore.spark.write_task",
    "tablestore.spark.tasks.write_files",
    "tablestore.spark.datasource.stream",
    "tablestore.spark.tasks.column_merge_tasks",
    "tablestore.table.read.data_files",
    "tablestore.table.write.data_files",
)

_VERSION = re.compile(r"""__version__[^=]*=\s*['"]([^'"]+)['"]""")


def _version(text: str) -> str | None:
    match = _VERSION.search(text)
    return match.group(1) if match else None


def _zip_pyspark_version(path: str) -> str | None:
    try:
        with zipfile.ZipFile(path) as archive:
            return _version(archive.read("pyspark/version.py").decode("utf-8"))
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


def _installed_pyspark_version(entries: list[str]) -> str | None:
    for entry in entries:
        candidate = os.path.join(entry, "pyspark", "version.py")
        if os.path.isfile(candidate):
            with open(candidate, encoding="utf-8") as handle:
                return _version(handle.read())
    return None


def prefer_installed_pyspark(path: list[str]) -> bool:
    """Move Spark's ``pyspark.zip`` behind the entries of ``path`` when they hold the same pyspark.

    Returns whether the path changed. A different installed version leaves the zip first, as
    Spark intends: the worker must match the JVM it talks to.
    """
    zips = [p for p in path if os.path.basename(p) == "pyspark.zip"]
    if not zips:
        return False
    others = [p for p in path if p not in zips]
    installed = _installed_pyspark_version([p for p in others if not p.endswith(".zip")])
    if installed is None or installed != _zip_pyspark_version(zips[0]):
        return False
    path[:] = [*others, *zips]
    return True


def preload(modules: tuple[str, ...] = PRELOADED_MODULES) -> list[str]:
    """Import ``modules``; returns those that failed (a worker that needs one reports the error)."""
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:
            failed.append(name)
    return failed


def main() -> None:
    prefer_installed_pyspark(sys.path)  # only reorders entries; no import cache to invalidate
    preload()
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
