"""``catalog`` is a fresh, empty catalog of the test's ``catalog_target`` (``tests/conftest.py``):
SQLite unless the test opts in to more legs, which it does only where the catalog takes part in
the behaviour (docs/testing.md, "the catalog matrix"):

- ``ON_THE_CATALOG_MATRIX`` (SQLite, PostgreSQL, the REST service over HTTP): races, conflicts,
  retries and transactions, which each catalog decides its own way;
- ``OVER_REST`` (SQLite and the REST service): metadata updates the service applies (refs,
  schemas, specs, row ids) and the service's own checks;
- ``ON_EVERY_STORAGE`` (SQLite on local disk and on S3): what reads and writes files.

A test of the table layer's logic (scans, writers, row-level rewrites, metadata tables, column
merges) runs on SQLite alone: the catalog only stores the pointer it commits.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tablestore.catalog.base import Catalog
from tests.conftest import CatalogTarget


@pytest.fixture
def catalog(catalog_target: CatalogTarget) -> Iterator[Catalog]:
    opened = catalog_target.open()
    try:
        yield opened
    finally:
        opened.close()
