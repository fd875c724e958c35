"""Shared set-up of the SQL tests.

- ``spark`` (module): the local Spark session the module's tests share. It is the one an
  earlier module started, when there is one (``getOrCreate``; starting one takes 10-30 s), and it
  is left running for the next module. A module that needs its own (``test_row_level_writers``:
  on its lake's configuration, stopped at its end) defines ``spark`` itself.
- ``catalogs``: the session's catalogs, first the default: one SQLite catalog ``cat`` whose
  default database is ``db``. A module that needs others overrides this fixture.
- ``session``: a :class:`SqlSession` on ``catalogs`` with each catalog's default database
  created. In a test marked ``spark`` it runs on the module's ``spark``; elsewhere it starts
  Spark only if a statement needs it.
- ``rows(session, sql)``: the rows of the last statement of ``sql``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tablestore.sql.session import SqlSession
from tests.lakehouse_config import SqliteCatalog, lakehouse_config, sqlite_catalog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Iterator[SparkSession]:
    from tablestore.spark import spark_session

    yield spark_session(None, app_name=f"tablestore-{request.module.__name__.rsplit('.', 1)[-1]}")


@pytest.fixture
def catalogs(tmp_path: Path) -> list[SqliteCatalog]:
    return [sqlite_catalog(tmp_path, "cat", default_database="db")]


@pytest.fixture
def session(request: pytest.FixtureRequest, tmp_path: Path, catalogs: list[SqliteCatalog]) -> SqlSession:
    spark = request.getfixturevalue("spark") if request.node.get_closest_marker("spark") else None
    s = SqlSession(lakehouse_config(tmp_path, *catalogs), spark=spark)
    databases = [f"CREATE DATABASE {c.name}.{c.default_database}" for c in catalogs if c.default_database]
    if databases:
        s.execute("; ".join(databases))
    return s


def rows(session: SqlSession, sql: str) -> list[list[Any]]:
    """The rows of the last statement of ``sql``."""
    return session.execute(sql)[-1].rows
