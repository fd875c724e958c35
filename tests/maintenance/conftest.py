"""Maintenance tests that exercise table behaviour (compaction, expiry, orphan files) run on the
catalog matrix: ``db_catalog`` is a fresh catalog of every kind in ``tests.conftest.CATALOGS``
(SQLite, PostgreSQL, the REST service over HTTP) with the namespace ``db``; a test that also
proves a storage chooses ``CATALOGS_ON_EVERY_STORAGE`` with an indirect parametrize of
``catalog_target``.

Tests of what one engine does with the files (Spark tasks, the Java reader, the property test's
model) keep a SQLite catalog of their own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tablestore.catalog.base import Catalog
from tests.conftest import CatalogTarget


@pytest.fixture
def db_catalog(catalog_target: CatalogTarget) -> Iterator[Catalog]:
    opened = catalog_target.open()
    try:
        opened.create_namespace("db")
        yield opened
    finally:
        opened.close()
