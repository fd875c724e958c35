"""CatalogManager: two real SQL catalogs from one config, USE, and 1/2/3-part names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.catalog_manager import CatalogManager
from tablestore.config import parse_config
from tablestore.errors import InvalidNameError, NoSuchCatalogError, NoSuchNamespaceError, ValidationError

SCHEMA = pa.schema([pa.field("id", pa.int64())])


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[CatalogManager]:
    config = parse_config(
        """
default-catalog: main
catalogs:
  - {name: main, type: sql, uri: "sqlite:///main/catalog.db", warehouse: main/wh, default-database: sales}
  - {name: other, type: sql, uri: "sqlite:///other/catalog.db", warehouse: other/wh}
""",
        source=str(tmp_path / "tablestore.yaml"),
    )
    with CatalogManager(config) as m:
        yield m


def test_starts_at_default_catalog_and_its_default_database(manager: CatalogManager) -> None:
    assert manager.catalog_names() == ["main", "other"]
    assert (manager.current_catalog, manager.current_database) == ("main", "sales")
    assert manager.current_namespace == ("sales",)


def test_catalogs_are_created_lazily_and_cached(manager: CatalogManager, tmp_path: Path) -> None:
    other_db = tmp_path / "other" / "catalog.db"
    assert not other_db.exists()  # nothing opened the second catalog yet
    main = manager.catalog()
    assert main is manager.catalog("main")
    assert not other_db.exists()
    other = manager.catalog("other")
    assert other_db.exists()
    assert other is manager.catalog("other") and other is not main
    assert isinstance(other, SqlCatalog) and other.warehouse == f"file://{tmp_path}/other/wh"


def test_unknown_catalog_lists_the_names(manager: CatalogManager) -> None:
    with pytest.raises(NoSuchCatalogError, match=r"catalog 'nope' does not exist; the catalogs are main, other"):
        manager.catalog("nope")


def test_use(manager: CatalogManager) -> None:
    main, other = manager.catalog("main"), manager.catalog("other")
    main.create_namespace("sales")
    main.create_namespace("ops")
    other.create_namespace("default")
    other.create_namespace("raw")

    manager.use(("other",))  # a catalog name: its default database
    assert (manager.current_catalog, manager.current_database) == ("other", "default")
    manager.use(("raw",))  # a database of the current catalog
    assert (manager.current_catalog, manager.current_database) == ("other", "raw")
    manager.use(("main", "ops"))
    assert (manager.current_catalog, manager.current_database) == ("main", "ops")
    manager.use("other.raw")  # a dotted string works too
    assert (manager.current_catalog, manager.current_database) == ("other", "raw")
    manager.use(("main",))
    assert (manager.current_catalog, manager.current_database) == ("main", "sales")

    # A failed USE changes nothing.
    with pytest.raises(NoSuchNamespaceError, match="database 'raw' does not exist in catalog 'main'"):
        manager.use(("raw",))
    with pytest.raises(NoSuchCatalogError, match="catalog 'nowhere' does not exist"):
        manager.use(("nowhere", "db"))  # two parts: catalog.database
    with pytest.raises(NoSuchNamespaceError, match="'missing' does not exist in catalog 'other'"):
        manager.use(("other", "missing"))
    assert (manager.current_catalog, manager.current_database) == ("main", "sales")
    with pytest.raises(ValidationError, match="USE target is empty"):
        manager.use(())


def test_resolve_table_with_one_two_and_three_parts(manager: CatalogManager) -> None:
    main, other = manager.catalog("main"), manager.catalog("other")
    for catalog, ns in ((main, "sales"), (main, "ops"), (other, "raw"), (other, "default")):
        catalog.create_namespace(ns)

    assert manager.resolve_table("t") == (main, ("sales", "t"))
    assert manager.resolve_table(("ops", "t")) == (main, ("ops", "t"))
    assert manager.resolve_table("other.raw.t") == (other, ("raw", "t"))
    assert manager.resolve_table(("other", "a", "b", "t")) == (other, ("a", "b", "t"))
    # Two parts are always database.table, even when the first part names a catalog.
    assert manager.resolve_table("other.t") == (main, ("other", "t"))

    # Tables created through resolved names land in the right catalog and database.
    for name in ("t1", "ops.t2", "other.raw.t3"):
        catalog, identifier = manager.resolve_table(name)
        catalog.create_table(identifier, SCHEMA)
    assert main.list_tables("sales") == [("sales", "t1")]
    assert main.list_tables("ops") == [("ops", "t2")]
    assert other.list_tables("raw") == [("raw", "t3")]

    manager.use("other.raw")
    catalog, identifier = manager.resolve_table("t3")
    assert (catalog, identifier) == (other, ("raw", "t3"))
    assert catalog.load_table(identifier).identifier == ("raw", "t3")
    assert manager.resolve_table("sales.t1") == (other, ("sales", "t1"))  # now relative to `other`
    assert manager.resolve_table("main.sales.t1")[0] is main

    with pytest.raises(NoSuchCatalogError, match="catalog 'nope' does not exist"):
        manager.resolve_table("nope.db.t")
    with pytest.raises(InvalidNameError):
        manager.resolve_table(("db", ""))
    with pytest.raises(ValidationError, match="table name is empty"):
        manager.resolve_table("")


def test_resolve_namespace(manager: CatalogManager) -> None:
    main, other = manager.catalog("main"), manager.catalog("other")
    assert manager.resolve_namespace("db") == (main, ("db",))
    assert manager.resolve_namespace("other.db") == (other, ("db",))
    assert manager.resolve_namespace(("other", "a", "b")) == (other, ("a", "b"))
    # The first part is not a catalog: a nested namespace of the current catalog.
    assert manager.resolve_namespace("a.b") == (main, ("a", "b"))

    catalog, namespace = manager.resolve_namespace("other.fresh")
    catalog.create_namespace(namespace, {"comment": "made through the manager"})
    assert other.load_namespace_properties("fresh") == {"comment": "made through the manager"}
    assert not main.namespace_exists("fresh")


def test_close_closes_and_reopens(manager: CatalogManager) -> None:
    first = manager.catalog()
    first.create_namespace("sales")
    manager.close()
    again = manager.catalog()
    assert again is not first
    assert again.list_namespaces() == [("sales",)]
    assert "current_catalog='main'" in repr(manager)
