"""Catalogs and databases: USE, SHOW CATALOGS | DATABASES | TABLES | VIEWS | FUNCTIONS and
CREATE, DROP, ALTER and DESCRIBE DATABASE, run as catalog calls."""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING

from tablestore.errors import NamespaceAlreadyExistsError, NoSuchNamespaceError
from tablestore.sql.parse import statements as st
from tablestore.sql.result import StatementResult

if TYPE_CHECKING:
    from tablestore.catalog.base import Catalog
    from tablestore.sql.context import SessionContext


def like(pattern: str | None, name: str) -> bool:
    """Spark's SHOW ... LIKE: ``*`` matches anything and ``|`` separates alternatives."""
    if pattern is None:
        return True
    return any(fnmatch.fnmatchcase(name.lower(), p.strip().lower()) for p in pattern.split("|"))


def use(context: SessionContext, s: st.Use) -> StatementResult:
    context.manager.use(s.name)
    return StatementResult()


def show_catalogs(context: SessionContext, s: st.ShowCatalogs) -> StatementResult:
    names = [n for n in context.manager.catalog_names() if like(s.pattern, n)]
    return StatementResult(["catalog"], [[n] for n in sorted(names)])


def show_databases(context: SessionContext, s: st.ShowDatabases) -> StatementResult:
    catalog = context.manager.catalog(s.catalog[0] if s.catalog else None)
    parent = tuple(s.catalog[1:]) if s.catalog else ()
    names = [".".join(ns) for ns in catalog.list_namespaces(parent)]
    return StatementResult(["namespace"], [[n] for n in sorted(names) if like(s.pattern, n)])


def _namespace(context: SessionContext, name: st.Name | None) -> tuple[Catalog, tuple[str, ...]]:
    if name is None:
        return context.manager.catalog(), context.manager.current_namespace
    return context.manager.resolve_namespace(name)


def show_objects(context: SessionContext, s: st.ShowObjects) -> StatementResult:
    catalog, namespace = _namespace(context, s.namespace)
    if not catalog.namespace_exists(namespace):
        raise NoSuchNamespaceError(f"database {'.'.join(namespace)!r} does not exist in catalog {catalog.name!r}")
    ns = ".".join(namespace)
    if s.kind == "tables":
        names = sorted(t[-1] for t in catalog.list_tables(namespace))
        return StatementResult(["namespace", "tableName", "isTemporary"],
                               [[ns, n, False] for n in names if like(s.pattern, n)])
    if s.kind == "views":
        names = sorted(v[-1] for v in catalog.list_views(namespace))
        return StatementResult(["namespace", "viewName", "isTemporary"],
                               [[ns, n, False] for n in names if like(s.pattern, n)])
    names = sorted(f[-1] for f in catalog.list_functions(namespace))
    return StatementResult(["function"], [[f"{catalog.name}.{ns}.{n}"] for n in names if like(s.pattern, n)])


def create_database(context: SessionContext, s: st.CreateDatabase) -> StatementResult:
    catalog, namespace = context.manager.resolve_namespace(s.name)
    properties = dict(s.properties)
    if s.comment is not None:
        properties["comment"] = s.comment
    if s.location is not None:
        properties["location"] = s.location
    if catalog.namespace_exists(namespace):
        if s.if_not_exists:
            return StatementResult()
        raise NamespaceAlreadyExistsError(
            f"database {'.'.join(namespace)!r} already exists in catalog {catalog.name!r}; "
            "use CREATE DATABASE IF NOT EXISTS"
        )
    catalog.create_namespace(namespace, properties)
    return StatementResult()


def drop_database(context: SessionContext, s: st.DropDatabase) -> StatementResult:
    catalog, namespace = context.manager.resolve_namespace(s.name)
    if not catalog.namespace_exists(namespace):
        if s.if_exists:
            return StatementResult()
        raise NoSuchNamespaceError(f"database {'.'.join(namespace)!r} does not exist in catalog {catalog.name!r}")
    if s.cascade:
        for view in catalog.list_views(namespace):
            catalog.drop_view(view)
        for function in catalog.list_functions(namespace):
            catalog.drop_function(function)
        for table in catalog.list_tables(namespace):
            catalog.drop_table(table, purge=True)
    catalog.drop_namespace(namespace)
    return StatementResult()


def alter_database(context: SessionContext, s: st.AlterDatabase) -> StatementResult:
    catalog, namespace = context.manager.resolve_namespace(s.name)
    catalog.update_namespace_properties(namespace, removals=set(s.unset_properties) or None,
                                        updates=dict(s.set_properties) or None)
    return StatementResult()


def describe_database(context: SessionContext, s: st.DescribeDatabase) -> StatementResult:
    catalog, namespace = context.manager.resolve_namespace(s.name)
    properties = catalog.load_namespace_properties(namespace)
    rows = [["Catalog Name", catalog.name], ["Namespace Name", ".".join(namespace)],
            ["Comment", properties.get("comment", "")], ["Location", properties.get("location", "")]]
    if s.extended:
        others = {k: v for k, v in properties.items() if k not in ("comment", "location")}
        rows.append(["Properties", ", ".join(f"({k},{v})" for k, v in sorted(others.items()))])
    return StatementResult(["info_name", "info_value"], rows)
