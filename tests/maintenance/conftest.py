"""``db_catalog`` is a fresh catalog of the test's ``catalog_target`` (``tests/conftest.py``) with
the namespace ``db``: SQLite unless the test opts in (docs/testing.md, "the catalog matrix").
Compaction's races run on every catalog of the matrix (``ON_THE_CATALOG_MATRIX``), expiry with
branch retention over REST too (``OVER_REST``: the service applies the removals), and the tests
that read and delete files (bin-packing, expiry, orphan removal, erasure) on S3 too
(``ON_EVERY_STORAGE``).

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
