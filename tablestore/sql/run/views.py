"""Views and functions: CREATE and DROP VIEW (a view's query is resolved in Spark before it is
stored), CREATE, DROP and DESCRIBE FUNCTION (Python functions registered as Spark UDFs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from tablestore.errors import AlreadyExistsError, NoSuchViewError, TableAlreadyExistsError, ValidationError
from tablestore.sql.parse import statements as st
from tablestore.sql.plan.planner import load_python_function
from tablestore.sql.result import StatementResult

if TYPE_CHECKING:
    from tablestore.sql.context import SessionContext


def create_view(context: SessionContext, s: st.CreateView) -> StatementResult:
    catalog, identifier = context.manager.resolve_table(s.name)
    if catalog.table_exists(identifier):
        raise TableAlreadyExistsError(f"{'.'.join(identifier)} is a table; a view cannot replace it")
    if catalog.view_exists(identifier):
        if s.if_not_exists:
            return StatementResult()
        if not s.or_replace:
            raise AlreadyExistsError(f"view {'.'.join(identifier)} already exists; use CREATE OR REPLACE VIEW")
    # Resolves every name now, so a broken view is never stored.
    df = context.planner().dataframe(s.query, s.query_tokens)
    arrow_schema = df.limit(0).toArrow().schema  # no rows: only the schema
    if s.columns:
        if len(s.columns) != len(arrow_schema):
            raise ValidationError(
                f"the view lists {len(s.columns)} columns but its query returns {len(arrow_schema)}"
            )
        arrow_schema = pa.schema([
            f.with_name(name).with_metadata({b"doc": doc.encode()} if doc else None)
            for f, (name, doc) in zip(arrow_schema, s.columns, strict=True)
        ])
    properties = dict(s.properties)
    catalog.create_view(
        identifier, sql=s.query, schema=arrow_schema, default_catalog=context.manager.current_catalog,
        default_namespace=context.manager.current_namespace, properties=properties,
        replace=s.or_replace, comment=s.comment,
    )
    return StatementResult()


def drop_view(context: SessionContext, s: st.DropView) -> StatementResult:
    catalog, identifier = context.manager.resolve_table(s.name)
    if not catalog.view_exists(identifier):
        if catalog.table_exists(identifier):
            raise ValidationError(f"{'.'.join(identifier)} is a table; use DROP TABLE")
        if s.if_exists:
            return StatementResult()
        raise NoSuchViewError(f"view {catalog.name}.{'.'.join(identifier)} does not exist; use DROP VIEW IF EXISTS")
    catalog.drop_view(identifier)
    return StatementResult()


def create_function(context: SessionContext, s: st.CreateFunction) -> StatementResult:
    catalog, identifier = context.manager.resolve_table(s.name)
    if catalog.function_exists(identifier):
        if s.if_not_exists:
            return StatementResult()
        if not s.or_replace:
            raise AlreadyExistsError(
                f"function {'.'.join(identifier)} already exists; use CREATE OR REPLACE FUNCTION"
            )
    load_python_function(s.class_name)  # fail now, not at first use
    catalog.create_function(identifier, s.class_name, s.return_type, replace=s.or_replace)
    return StatementResult()


def drop_function(context: SessionContext, s: st.DropFunction) -> StatementResult:
    catalog, identifier = context.manager.resolve_table(s.name)
    if not catalog.function_exists(identifier) and s.if_exists:
        return StatementResult()
    catalog.drop_function(identifier)
    return StatementResult()


def describe_function(context: SessionContext, s: st.DescribeFunction) -> StatementResult:
    catalog, identifier = context.manager.resolve_table(s.name)
    f = catalog.load_function(identifier)
    rows = [["Function", f"{catalog.name}.{'.'.join(identifier)}"], ["Class", f.class_name],
            ["Returns", f.return_type or "string"]]
    if s.extended:
        rows.extend([k, v] for k, v in sorted(f.properties.items()))
    return StatementResult(["function_desc", "value"], rows)
