"""tablestore: an open table store in the Apache Iceberg format (v2).

    import tablestore
    catalog = tablestore.load_catalog("local", type="sql", uri="sqlite:////abs/catalog.db", warehouse="/abs/wh")
"""

from __future__ import annotations

from tablestore.catalog import Catalog, load_catalog
from tablestore.errors import TableStoreError
from tablestore.maintenance.erasure import erase
from tablestore.session import CatalogManager
from tablestore.table import Table

__version__ = "0.1.0"
__all__ = ["Catalog", "CatalogManager", "Table", "TableStoreError", "erase", "load_catalog"]
