"""Views and functions in the SQL catalog, on SQLite and PostgreSQL, local and S3 warehouses."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, inspect, text

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.errors import (
    AlreadyExistsError,
    CommitConflictError,
    FunctionAlreadyExistsError,
    InvalidNameError,
    NamespaceNotEmptyError,
    NoSuchFunctionError,
    NoSuchNamespaceError,
    NoSuchTableError,
    NoSuchViewError,
    TableAlreadyExistsError,
    UnsupportedError,
    ViewAlreadyExistsError,
)
from tablestore.spec.metadata.view import parse_view_metadata
from tests.conftest import SQL_CATALOG_LEGS, Warehouse

TABLE_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("country", pa.string())])
VIEW_SCHEMA = pa.schema([pa.field("country", pa.string()), pa.field("n", pa.int64(), nullable=False)])
VIEW_SQL = "SELECT country, count(*) AS n FROM orders GROUP BY country"
METADATA_FILE = re.compile(r"(\d{5})-[0-9a-f-]{36}\.metadata\.json")


def _uri(catalog: SqlCatalog) -> str:
    return catalog.engine.url.render_as_string(hide_password=False)


def _restarted(catalog: SqlCatalog, warehouse: Warehouse) -> SqlCatalog:
    """A new catalog object (own engine) on the same database, as after a process restart."""
    return SqlCatalog(catalog.name, uri=_uri(catalog), warehouse=warehouse.location, **warehouse.properties)


def _rows(uri: str, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    engine = create_engine(uri)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql), params)]
    finally:
        engine.dispose()


def _create_view(catalog: SqlCatalog, name: str = "db.by_country", **kwargs: Any) -> Any:
    args: dict[str, Any] = {
        "sql": VIEW_SQL, "schema": VIEW_SCHEMA, "default_catalog": "lake", "default_namespace": ("db",),
    }
    args.update(kwargs)
    return catalog.create_view(name, **args)


# -- views ---------------------------------------------------------------------------------------------


@SQL_CATALOG_LEGS
def test_create_and_load_view_survives_restart(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    catalog.create_namespace("db")
    view = _create_view(catalog, properties={"owner": "ana"}, comment="orders per country")

    expected_dir = f"{catalog.warehouse}/db/by_country/metadata/"
    assert view.metadata_location.startswith(expected_dir)
    match = METADATA_FILE.fullmatch(view.metadata_location.removeprefix(expected_dir))
    assert match is not None and match.group(1) == "00000"
    assert catalog.io.new_input(view.metadata_location).exists()

    with _restarted(catalog, warehouse) as again:
        loaded = again.load_view("db.by_country")
        assert loaded.identifier == ("db", "by_country")
        assert loaded.metadata_location == view.metadata_location
        assert loaded.metadata == view.metadata
        assert loaded.sql == VIEW_SQL and loaded.dialect == "spark"
        assert [(f.name, str(f.field_type), f.required) for f in loaded.schema.fields] == [
            ("country", "string", False), ("n", "long", True)
        ]
        assert loaded.default_catalog == "lake" and loaded.default_namespace == ("db",)
        assert loaded.properties == {"owner": "ana", "comment": "orders per country"}
        assert loaded.comment == "orders per country"
        assert loaded.version.summary == {"engine-name": "tablestore"}
        assert loaded.metadata.location == f"{catalog.warehouse}/db/by_country"
        assert again.view_exists("db.by_country") and again.view_exists(("db", "by_country"))
        assert again.list_views("db") == [("db", "by_country")]

    # The file on storage is the metadata (what any Iceberg reader would parse).
    on_disk = parse_view_metadata(catalog.io.new_input(view.metadata_location).read())
    assert on_disk == view.metadata


@SQL_CATALOG_LEGS
def test_view_is_a_jdbc_view_row(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    view = _create_view(catalog)
    rows = _rows(
        _uri(catalog),
        "SELECT table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type "
        "FROM iceberg_tables WHERE catalog_name = :c",
        c=catalog.name,
    )
    assert rows == [("db", "by_country", view.metadata_location, None, "VIEW")]


@SQL_CATALOG_LEGS
def test_replace_creates_a_new_version(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    catalog.create_namespace("db")
    first = _create_view(catalog)
    new_schema = pa.schema([pa.field("country", pa.string())])
    second = _create_view(catalog, sql="SELECT DISTINCT country FROM orders", schema=new_schema,
                          replace=True, properties={"owner": "bo"})

    assert METADATA_FILE.fullmatch(second.metadata_location.rsplit("/", 1)[1]).group(1) == "00001"  # type: ignore[union-attr]
    assert second.metadata.view_uuid == first.metadata.view_uuid
    assert [v.version_id for v in second.metadata.versions] == [1, 2]
    assert second.metadata.current_version_id == 2
    assert [e.version_id for e in second.metadata.version_log] == [1, 2]
    assert second.metadata.version_by_id(1).sql_representation().sql == VIEW_SQL
    assert [s.schema_id for s in second.metadata.schemas] == [0, 1]

    rows = _rows(_uri(catalog), "SELECT metadata_location, previous_metadata_location FROM iceberg_tables "
                 "WHERE catalog_name = :c", c=catalog.name)
    assert rows == [(second.metadata_location, first.metadata_location)]

    with _restarted(catalog, warehouse) as again:
        loaded = again.load_view("db.by_country")
        assert loaded.sql == "SELECT DISTINCT country FROM orders"
        assert loaded.schema.column_names == ["country"]
        assert loaded.properties == {"owner": "bo"}

    # Replacing with the same definition writes nothing and returns the current view.
    files = catalog.io.list_prefix(f"{catalog.warehouse}/db/by_country/metadata")
    same = _create_view(catalog, sql="SELECT DISTINCT country FROM orders", schema=new_schema, replace=True)
    assert same.metadata_location == second.metadata_location
    assert len(catalog.io.list_prefix(f"{catalog.warehouse}/db/by_country/metadata")) == len(files) == 2


@SQL_CATALOG_LEGS
def test_replace_of_a_missing_view_creates_it(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    view = _create_view(catalog, replace=True)
    assert view.metadata.current_version_id == 1
    assert catalog.list_views("db") == [("db", "by_country")]


@SQL_CATALOG_LEGS
def test_create_existing_view_without_replace_fails(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    first = _create_view(catalog)
    with pytest.raises(ViewAlreadyExistsError, match=r"^View already exists: db\.by_country \(use replace"):
        _create_view(catalog, sql="SELECT 1 AS n")
    assert catalog.load_view("db.by_country").metadata_location == first.metadata_location


@SQL_CATALOG_LEGS
def test_concurrent_replaces_all_land_as_versions(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    catalog.create_namespace("db")
    _create_view(catalog)
    writers = [_restarted(catalog, warehouse) for _ in range(4)]
    errors: list[BaseException] = []

    def replace(i: int) -> None:
        try:
            _create_view(writers[i], sql=f"SELECT {i} AS n", replace=True)
        except BaseException as e:  # reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=replace, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w in writers:
        w.close()
    assert errors == []
    metadata = catalog.load_view("db.by_country").metadata
    assert sorted(v.version_id for v in metadata.versions) == [1, 2, 3, 4, 5]
    sqls = {metadata.version_by_id(i).sql_representation().sql for i in range(2, 6)}  # type: ignore[union-attr]
    assert sqls == {f"SELECT {i} AS n" for i in range(4)}


@SQL_CATALOG_LEGS
def test_swap_loses_to_another_writer(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    view = _create_view(catalog)
    with pytest.raises(CommitConflictError, match="changed by another commit"):
        catalog._swap_view_entry(("db", "by_country"), "/elsewhere/00000-x.metadata.json", "/new")
    assert catalog.load_view("db.by_country").metadata_location == view.metadata_location
    with pytest.raises(NoSuchViewError):
        catalog._swap_view_entry(("db", "gone"), view.metadata_location, "/new")


@SQL_CATALOG_LEGS
def test_view_errors(catalog: SqlCatalog) -> None:
    with pytest.raises(NoSuchNamespaceError, match=r"^Namespace does not exist: nope \(cannot create view nope\.v"):
        _create_view(catalog, "nope.v")
    catalog.create_namespace("db")
    with pytest.raises(NoSuchViewError, match=r"^View does not exist: db\.missing$"):
        catalog.load_view("db.missing")
    with pytest.raises(InvalidNameError):
        _create_view(catalog, "db.a/b")
    with pytest.raises(InvalidNameError, match="has no namespace"):
        catalog.load_view("v")
    assert not catalog.view_exists("db.missing")
    assert catalog.list_views("db") == []


# -- tables and views share names ----------------------------------------------------------------------


@SQL_CATALOG_LEGS
def test_tables_and_views_share_names(catalog: SqlCatalog) -> None:
    catalog.create_namespace("db")
    catalog.create_table("db.orders", TABLE_SCHEMA)
    _create_view(catalog)

    with pytest.raises(ViewAlreadyExistsError, match=r"^Table with same name already exists: db\.orders"):
        _create_view(catalog, "db.orders")
    with pytest.raises(ViewAlreadyExistsError, match=r"^Table with same name already exists: db\.orders"):
        _create_view(catalog, "db.orders", replace=True)  # replace never turns a table into a view
    with pytest.raises(TableAlreadyExistsError, match=r"^View with same name already exists: db\.by_country"):
        catalog.create_table("db.by_country", TABLE_SCHEMA)
    with pytest.raises(AlreadyExistsError, match=r"^Cannot rename db\.orders to db\.by_country\. View already exists$"):
        catalog.rename_table("db.orders", "db.by_country")
    with pytest.raises(ViewAlreadyExistsError, match=r"^Cannot rename db\.by_country to db\.orders\. Table already exists$"):
        catalog.rename_view("db.by_country", "db.orders")

    assert catalog.list_tables("db") == [("db", "orders")]
    assert catalog.list_views("db") == [("db", "by_country")]
    assert catalog.table_exists("db.orders") and not catalog.view_exists("db.orders")
    assert catalog.view_exists("db.by_country") and not catalog.table_exists("db.by_country")
    with pytest.raises(NoSuchTableError, match=r"\(it is a view\)"):
        catalog.load_table("db.by_country")
    with pytest.raises(NoSuchViewError, match=r"\(it is a table\)"):
        catalog.load_view("db.orders")
    with pytest.raises(NoSuchViewError):
        catalog.drop_view("db.orders")
    with pytest.raises(NoSuchTableError):
        catalog.drop_table("db.by_country")
    # Both survived the attempts.
    assert catalog.load_table("db.orders").identifier == ("db", "orders")
    assert catalog.load_view("db.by_country").sql == VIEW_SQL


@SQL_CATALOG_LEGS
def test_pyiceberg_lists_no_views_as_tables(catalog: SqlCatalog) -> None:
    from pyiceberg.catalog.sql import SqlCatalog as PySqlCatalog
    from pyiceberg.exceptions import NoSuchTableError as PyNoSuchTableError

    catalog.create_namespace("db")
    catalog.create_table("db.orders", TABLE_SCHEMA)
    _create_view(catalog)
    theirs = PySqlCatalog(catalog.name, uri=_uri(catalog), warehouse=catalog.warehouse or "")
    try:
        assert theirs.list_tables("db") == [("db", "orders")]
        assert not theirs.table_exists("db.by_country")
        with pytest.raises(PyNoSuchTableError):
            theirs.load_table("db.by_country")
    finally:
        theirs.engine.dispose()


# -- drop and rename -----------------------------------------------------------------------------------


@SQL_CATALOG_LEGS
def test_drop_and_rename_view(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    catalog.create_namespace("db")
    catalog.create_namespace("archive")
    view = _create_view(catalog)

    renamed = catalog.rename_view("db.by_country", "archive.countries")
    assert renamed.identifier == ("archive", "countries")
    assert renamed.metadata_location == view.metadata_location  # files stay where they are
    assert catalog.list_views("db") == [] and catalog.list_views("archive") == [("archive", "countries")]
    with _restarted(catalog, warehouse) as again:
        assert again.load_view("archive.countries").sql == VIEW_SQL
        assert not again.view_exists("db.by_country")

    _create_view(catalog, "db.other")
    with pytest.raises(ViewAlreadyExistsError, match=r"^Cannot rename db\.other to archive\.countries\. View already exists$"):
        catalog.rename_view("db.other", "archive.countries")
    with pytest.raises(NoSuchNamespaceError, match=r"^Namespace does not exist: nope \(cannot rename db\.other to nope\.other"):
        catalog.rename_view("db.other", "nope.other")
    with pytest.raises(NoSuchViewError, match=r"^View does not exist: db\.ghost$"):
        catalog.rename_view("db.ghost", "db.ghost2")

    catalog.drop_view("archive.countries")
    assert not catalog.view_exists("archive.countries")
    with pytest.raises(NoSuchViewError):
        catalog.drop_view("archive.countries")
    # As Java's catalogs do, dropping a view leaves its metadata files.
    assert catalog.io.new_input(view.metadata_location).exists()
    # The name is free again, for a table too.
    catalog.create_table("archive.countries", TABLE_SCHEMA)


@SQL_CATALOG_LEGS
def test_drop_namespace_counts_views_and_functions(catalog: SqlCatalog) -> None:
    catalog.create_namespace("views_only")
    _create_view(catalog, "views_only.v")
    with pytest.raises(NamespaceNotEmptyError, match=r"^Namespace views_only is not empty\. It has 1 view\(s\) \(views_only.v\)"):
        catalog.drop_namespace("views_only")

    catalog.create_namespace("functions_only")
    catalog.create_function("functions_only.f", "udfs.double")
    with pytest.raises(NamespaceNotEmptyError, match=r"^Namespace functions_only is not empty\. It has 1 function\(s\) \(functions_only.f\)"):
        catalog.drop_namespace("functions_only")

    catalog.create_namespace("mixed")
    catalog.create_table("mixed.t", TABLE_SCHEMA)
    _create_view(catalog, "mixed.v")
    catalog.create_function("mixed.f", "udfs.double")
    with pytest.raises(NamespaceNotEmptyError, match=r"1 table\(s\), 1 view\(s\), 1 function\(s\)"):
        catalog.drop_namespace("mixed")

    catalog.drop_view("views_only.v")
    catalog.drop_namespace("views_only")
    catalog.drop_function("functions_only.f")
    catalog.drop_namespace("functions_only")
    assert catalog.list_namespaces() == [("mixed",)]


# -- functions -----------------------------------------------------------------------------------------


@SQL_CATALOG_LEGS
def test_functions_survive_restart(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    catalog.create_namespace("db")
    created = catalog.create_function("db.double_it", "udfs.math.double", "bigint", properties={"owner": "ana"})
    assert created.identifier == ("db", "double_it")
    catalog.create_function(("db", "as_text"), "udfs.text.as_text")

    with _restarted(catalog, warehouse) as again:
        loaded = again.load_function("db.double_it")
        assert loaded == created
        assert (loaded.class_name, loaded.return_type, loaded.properties) == (
            "udfs.math.double", "bigint", {"owner": "ana"}
        )
        assert again.load_function("db.as_text").return_type is None
        assert again.list_functions("db") == [("db", "as_text"), ("db", "double_it")]
        assert again.function_exists("db.as_text") and not again.function_exists("db.nope")


@SQL_CATALOG_LEGS
def test_function_replace_and_errors(catalog: SqlCatalog) -> None:
    with pytest.raises(NoSuchNamespaceError, match=r"cannot create function nope\.f"):
        catalog.create_function("nope.f", "udfs.f")
    catalog.create_namespace("db")
    first = catalog.create_function("db.f", "udfs.f", "int")
    with pytest.raises(FunctionAlreadyExistsError, match=r"function db\.f already exists"):
        catalog.create_function("db.f", "udfs.g")
    assert catalog.load_function("db.f") == first

    replaced = catalog.create_function("db.f", "udfs.g", None, replace=True, properties={"v": "2"})
    loaded = catalog.load_function("db.f")
    assert loaded == replaced
    assert (loaded.class_name, loaded.return_type, loaded.properties) == ("udfs.g", None, {"v": "2"})
    assert loaded.created_ms >= first.created_ms
    assert catalog.list_functions("db") == [("db", "f")]

    with pytest.raises(ValueError, match="needs the name of the class"):
        catalog.create_function("db.g", " ")
    with pytest.raises(InvalidNameError, match="has no namespace"):
        catalog.create_function("g", "udfs.g")

    catalog.drop_function("db.f")
    assert not catalog.function_exists("db.f")
    with pytest.raises(NoSuchFunctionError, match=r"function db\.f does not exist"):
        catalog.drop_function("db.f")
    with pytest.raises(NoSuchFunctionError):
        catalog.load_function("db.f")
    # Functions do not take table or view names, nor the other way round.
    catalog.create_table("db.same", TABLE_SCHEMA)
    catalog.create_function("db.same", "udfs.same")
    assert catalog.list_tables("db") == [("db", "same")] and catalog.list_functions("db") == [("db", "same")]


@SQL_CATALOG_LEGS
def test_functions_are_isolated_by_catalog_name(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    other = SqlCatalog("other_" + catalog.name, uri=_uri(catalog), warehouse=warehouse.location,
                       **warehouse.properties)
    try:
        for c in (catalog, other):
            c.create_namespace("db")
        catalog.create_function("db.f", "udfs.f")
        _create_view(catalog, "db.v")
        assert other.list_functions("db") == [] and not other.function_exists("db.f")
        assert other.list_views("db") == []
        other.create_function("db.f", "udfs.other")
        assert catalog.load_function("db.f").class_name == "udfs.f"
    finally:
        other.close()


def test_functions_table_is_created_with_the_first_function(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'c.db'}"
    catalog = SqlCatalog("c", uri=uri, warehouse=str(tmp_path / "wh"))
    try:
        catalog.create_namespace("db")
        # A database shared with other JDBC clients gains no table until functions are used.
        assert catalog.list_functions("db") == [] and not catalog.function_exists("db.f")
        with pytest.raises(NoSuchFunctionError):
            catalog.drop_function("db.f")
        catalog.drop_namespace("db")
        engine = create_engine(uri)
        assert not inspect(engine).has_table("tablestore_functions")
        catalog.create_namespace("db")
        catalog.create_function("db.f", "udfs.f", "string", properties={"a": "1"})
        assert inspect(engine).has_table("tablestore_functions")
        engine.dispose()
        rows = _rows(uri, "SELECT catalog_name, function_namespace, function_name, class_name, return_type, "
                     "properties FROM tablestore_functions")
        assert rows == [("c", "db", "f", "udfs.f", "string", '{"a": "1"}')]
    finally:
        catalog.close()


# -- an old database without iceberg_type --------------------------------------------------------------


def test_v0_database_cannot_hold_views(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'v0.db'}"
    engine = create_engine(uri)
    with engine.begin() as conn:
        conn.execute(text(
            "CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, "
            "table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL, "
            "metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), "
            "PRIMARY KEY (catalog_name, table_namespace, table_name))"
        ))
    engine.dispose()
    catalog = SqlCatalog("old", uri=uri, warehouse=str(tmp_path / "wh"))
    try:
        catalog.create_namespace("db")
        catalog.create_table("db.t", TABLE_SCHEMA)
        assert catalog.list_views("db") == [] and not catalog.view_exists("db.t")
        with pytest.raises(UnsupportedError, match="ADD COLUMN iceberg_type"):
            _create_view(catalog, "db.v")
        # Nothing was left behind: no row, no metadata file.
        assert _rows(uri, "SELECT table_name FROM iceberg_tables") == [("t",)]
        assert list((tmp_path / "wh" / "db" / "v").rglob("*.json")) == []
        # Functions need no iceberg_type and work here too.
        catalog.create_function("db.f", "udfs.f")
        assert catalog.list_functions("db") == [("db", "f")]
    finally:
        catalog.close()
