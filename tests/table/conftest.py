"""The table tests run on the catalog matrix: ``catalog`` is a fresh, empty catalog of every kind
in ``tests.conftest.CATALOGS`` (SQLite, PostgreSQL, the REST service over HTTP).

Modules that test what happens inside files (writers, the Parquet layout, readers of other
engines) rather than what a catalog sees keep a SQLite catalog of their own: the catalog takes
no part in what they prove, and running them three times would only cost time.
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
