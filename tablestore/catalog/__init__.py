"""Catalogs: where tables are found by name, and where commits are made atomic.

The interface and what every implementation shares is :mod:`tablestore.catalog.base`; the
implementations are :mod:`tablestore.catalog.sql_catalog` (the Iceberg JDBC layout in SQLite or
PostgreSQL) and :mod:`tablestore.catalog.rest` (a client of the Iceberg REST protocol). This
module holds ``load_catalog``, which chooses an implementation. Every name has one import path,
the module that defines it (``tests/test_layers.py`` checks): ``Catalog`` is imported from
``tablestore.catalog.base``, the identifier helpers from ``tablestore.names``.
"""

from __future__ import annotations

from tablestore.catalog.base import Catalog
from tablestore.errors import UnsupportedError, ValidationError


def load_catalog(name: str, **properties: str) -> Catalog:
    """The catalog described by ``properties``; ``type`` chooses the implementation.

    ``type="sql"`` (the default) is the Iceberg JDBC-compatible catalog in SQLite or PostgreSQL
    (``uri=``, ``warehouse=``); ``type="rest"`` the Iceberg REST catalog.
    """
    catalog_type = str(properties.get("type") or "sql").strip().lower()
    if catalog_type == "sql":
        # Imported here: importing a catalog (and SQLAlchemy or requests) costs only its users.
        from tablestore.catalog.sql_catalog import SqlCatalog

        return SqlCatalog(name, **properties)
    if catalog_type == "rest":
        try:
            from tablestore.catalog.rest import RestCatalog  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise UnsupportedError(
                "the REST catalog is not available in this version of tablestore"
            ) from None
        catalog: Catalog = RestCatalog(name, **properties)
        return catalog
    raise ValidationError(f"unknown catalog type {catalog_type!r}; use 'sql' or 'rest'")


__all__ = ["load_catalog"]
