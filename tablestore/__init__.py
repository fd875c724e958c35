"""tablestore: an open table store in the Apache Iceberg format (v2).

    import tablestore
    catalog = tablestore.load_catalog("local", type="sql", uri="sqlite:////abs/catalog.db", warehouse="/abs/wh")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tablestore.catalog import load_catalog
from tablestore.catalog.base import Catalog
from tablestore.catalog_manager import CatalogManager
from tablestore.errors import TableStoreError
from tablestore.maintenance import Maintenance
from tablestore.table import Table

if TYPE_CHECKING:
    from tablestore.maintenance.erasure import ErasureReport

__version__ = "0.1.0"
# Maintenance is imported here for its side: it installs `table.maintenance()` (see Table.maintenance_actions).
__all__ = ["Catalog", "CatalogManager", "Maintenance", "Table", "TableStoreError", "erase", "load_catalog"]


def erase(catalog: Catalog, tables: str | list[str], column: str, request_id: str, **kwargs: Any) -> ErasureReport:
    """Verified erasure of subjects' rows: see :func:`tablestore.maintenance.erasure.erase`."""
    # Imported on first use: erasure's row-level delete parses SQL conditions with sqlglot,
    # which `import tablestore` (every Spark worker, every CLI start) should not pay for.
    from tablestore.maintenance.erasure import erase as erase_tables

    return erase_tables(catalog, tables, column, request_id, **kwargs)
