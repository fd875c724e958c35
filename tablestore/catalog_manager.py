"""A session's catalogs: several named catalogs, a current catalog and database, and how names
resolve against them.

It sits above the catalog layer (it builds catalogs from the configuration) and below the
engines, the SQL layer and the service, which each keep one. The SQL layer keeps one
``CatalogManager`` per session. ``USE`` changes the current catalog
and database; table names of one, two or three parts resolve so:

- ``t`` → table ``t`` in the current database of the current catalog;
- ``db.t`` → table ``t`` in database ``db`` of the current catalog;
- ``cat.db.t`` → table ``t`` in database ``db`` of catalog ``cat`` (more parts: a nested
  namespace, ``cat.a.b.t``).

``USE x`` switches to catalog ``x`` if there is one (a catalog name hides a database of the same
name; ``USE cat.x`` reaches that database), else to database ``x``; ``USE x.y`` is catalog ``x``,
database ``y``. In namespace names of DDL (``CREATE DATABASE x.y``), a first part that is no
catalog makes a nested namespace of the current catalog.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from tablestore.catalog.base import Catalog
from tablestore.config import LakehouseConfig
from tablestore.errors import NoSuchCatalogError, NoSuchNamespaceError, ValidationError
from tablestore.names import Identifier, to_namespace, validate_name

NameLike = str | Sequence[str]


def _parts(name: NameLike, what: str) -> Identifier:
    if isinstance(name, str):
        parts: tuple[str, ...] = tuple(name.split(".")) if name else ()
    else:
        parts = tuple(name)
    if not parts:
        raise ValidationError(f"{what} is empty; give a name like 'db' or 'catalog.db'")
    for part in parts:
        validate_name(part, what)
    return parts


class CatalogManager:
    """The catalogs of a :class:`LakehouseConfig`, created on first use and kept open.

    The current catalog starts as the configured ``default-catalog`` and the current database
    as that catalog's ``default-database``.
    """

    def __init__(self, config: LakehouseConfig) -> None:
        self.config = config
        self._catalogs: dict[str, Catalog] = {}
        # The SQL layer and the Spark data source may ask for a catalog from several threads;
        # each catalog (with its connection pool) must still be created only once.
        self._lock = threading.Lock()
        self.current_catalog: str = config.default_catalog
        self.current_database: str = config.catalogs[config.default_catalog].default_database

    def __repr__(self) -> str:
        return (
            f"CatalogManager(catalogs={self.catalog_names()!r}, current_catalog={self.current_catalog!r}, "
            f"current_database={self.current_database!r})"
        )

    # -- catalogs --------------------------------------------------------------------------------
    def catalog_names(self) -> list[str]:
        """The configured catalog names, sorted."""
        return sorted(self.config.catalogs)

    def has_catalog(self, name: str) -> bool:
        return name in self.config.catalogs

    def catalog(self, name: str | None = None) -> Catalog:
        """The catalog ``name`` (the current one if None); NoSuchCatalogError naming the catalogs."""
        key = self.current_catalog if name is None else name
        with self._lock:
            found = self._catalogs.get(key)
            if found is None:
                if key not in self.config.catalogs:
                    raise NoSuchCatalogError(
                        f"catalog {key!r} does not exist; the catalogs are "
                        f"{', '.join(self.catalog_names())} (configured in {self.config.source})"
                    )
                found = self.config.catalogs[key].load()
                self._catalogs[key] = found
            return found

    def close(self) -> None:
        """Close the catalogs opened so far; the manager opens them again if used."""
        with self._lock:
            catalogs, self._catalogs = list(self._catalogs.values()), {}
        for catalog in catalogs:
            catalog.close()

    def __enter__(self) -> CatalogManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the current catalog and database --------------------------------------------------------
    @property
    def current_namespace(self) -> Identifier:
        """The current database as a namespace tuple (``"a.b"`` → ``("a", "b")``)."""
        return to_namespace(self.current_database)

    def use(self, parts: NameLike) -> None:
        """``USE``: ``cat`` (a catalog name: its default database), ``db`` (in the current
        catalog), or ``cat.db`` (NoSuchCatalogError if ``cat`` is no catalog; ``cat.a.b`` for a
        nested namespace). The database must exist (NoSuchNamespaceError); a catalog's default
        database is not checked, as a new catalog may not have created it yet."""
        names = _parts(parts, "USE target")
        if len(names) == 1 and self.has_catalog(names[0]):
            catalog_name = names[0]
            self.catalog(catalog_name)  # fails now, not at the next statement, if it cannot open
            self.current_catalog = catalog_name
            self.current_database = self.config.catalogs[catalog_name].default_database
            return
        namespace: Identifier
        if len(names) == 1:
            catalog, namespace = self.catalog(), names
        else:
            catalog, namespace = self.catalog(names[0]), names[1:]
        if not catalog.namespace_exists(namespace):
            raise NoSuchNamespaceError(
                f"database {'.'.join(namespace)!r} does not exist in catalog {catalog.name!r}; "
                "create it first (CREATE DATABASE)"
            )
        self.current_catalog = catalog.name
        self.current_database = ".".join(namespace)

    # -- name resolution -------------------------------------------------------------------------
    def resolve_table(self, name: NameLike) -> tuple[Catalog, Identifier]:
        """The catalog and table identifier a table (or view) name refers to.

        One part: the current database; two: ``database.table`` in the current catalog; three or
        more: ``catalog.database.table`` (NoSuchCatalogError if the first part is no catalog).
        """
        parts = _parts(name, "table name")
        if len(parts) == 1:
            return self.catalog(), (*self.current_namespace, parts[0])
        if len(parts) == 2:
            return self.catalog(), parts
        return self.catalog(parts[0]), parts[1:]

    def resolve_namespace(self, name: NameLike) -> tuple[Catalog, Identifier]:
        """The catalog and namespace a database name refers to.

        One part: a database of the current catalog; more: ``catalog.database`` when the first
        part is a catalog name, else a nested namespace of the current catalog.
        """
        parts = _parts(name, "database name")
        if len(parts) > 1 and self.has_catalog(parts[0]):
            return self.catalog(parts[0]), parts[1:]
        return self.catalog(), parts


__all__ = ["CatalogManager", "NameLike"]
