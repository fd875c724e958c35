"""DDL helpers: schemas from column definitions, DESCRIBE output and SHOW CREATE TABLE."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tablestore.errors import NoSuchTableError, SchemaError
from tablestore.spec.metadata.view import SQLViewRepresentation, View
from tablestore.spec.schemas.schema import IdCounter, Schema, assign_fresh_ids
from tablestore.spec.schemas.types import NestedField, StructType, parse_sql_type, sql_type_name
from tablestore.sql.parse import statements as st
from tablestore.sql.result import StatementResult

if TYPE_CHECKING:
    from tablestore.catalog.base import Catalog


def table_schema_from_columns(columns: tuple[st.ColumnDef, ...]) -> Schema:
    seen: set[str] = set()
    fields = []
    for i, column in enumerate(columns, start=1):
        if column.name.lower() in seen:
            raise SchemaError(f"column {column.name!r} is defined twice")
        seen.add(column.name.lower())
        fields.append(NestedField(i, column.name, parse_sql_type(column.type_text), column.not_null, column.comment))
    struct = assign_fresh_ids(StructType(*fields), IdCounter())
    return Schema(struct.fields)


def _quote(name: str) -> str:
    return name if name.replace("_", "").isalnum() and not name[0].isdigit() else f"`{name.replace('`', '``')}`"


def describe_table(catalog: Catalog, table: Any, extended: bool) -> StatementResult:
    schema: Schema = table.schema()
    rows: list[list[Any]] = [[f.name, sql_type_name(f.field_type), f.doc or ""] for f in schema.fields]
    spec = table.spec()
    if spec.fields:
        rows.append(["", "", ""])
        rows.append(["# Partitioning", "", ""])
        for i, pf in enumerate(spec.fields):
            source = schema.find_column_name(pf.source_id) or str(pf.source_id)
            rows.append([f"Part {i}", _transform_sql(str(pf.transform), source), ""])
    if extended:
        rows.append(["", "", ""])
        rows.append(["# Field IDs", "", ""])
        for name, f in schema.all_fields():
            rows.append([name, str(f.field_id), "required" if f.required else "optional"])
        if schema.identifier_field_ids:
            names = [schema.find_column_name(i) or str(i) for i in schema.identifier_field_ids]
            rows.append(["Identifier fields", ", ".join(names), ""])
        snapshot = table.current_snapshot()
        rows.append(["", "", ""])
        rows.append(["# Detailed Table Information", "", ""])
        rows.append(["Name", f"{catalog.name}.{'.'.join(table.identifier)}", ""])
        rows.append(["Type", "EXTERNAL" if table.properties.get("EXTERNAL", "").upper() == "TRUE" else "MANAGED", ""])
        rows.append(["Provider", "iceberg", ""])
        rows.append(["Location", table.location, ""])
        rows.append(["Metadata location", table.metadata_location, ""])
        rows.append(["Format version", str(table.metadata.format_version), ""])
        rows.append(["Current snapshot", str(snapshot.snapshot_id) if snapshot else "none", ""])
        rows.append(["Schema id", str(schema.schema_id), ""])
        rows.append(["Partition spec", str(spec.spec_id), ""])
        props = ", ".join(f"{k}={v}" for k, v in sorted(table.properties.items()))
        rows.append(["Table Properties", f"[{props}]", ""])
    return StatementResult(["col_name", "data_type", "comment"], rows)


def describe_view(catalog: Catalog, view: View, extended: bool) -> StatementResult:
    """DESCRIBE of a view: its columns; with EXTENDED, where it is and its SQL in each dialect
    (a view written by another engine describes, even when its dialect cannot run here)."""
    rows: list[list[Any]] = [[f.name, sql_type_name(f.field_type), f.doc or ""] for f in view.schema.fields]
    if extended:
        version = view.version
        rows.append(["", "", ""])
        rows.append(["# Detailed View Information", "", ""])
        rows.append(["Name", f"{catalog.name}.{'.'.join(view.identifier)}", ""])
        rows.append(["Type", "VIEW", ""])
        rows.append(["Metadata location", view.metadata_location, ""])
        rows.append(["Version", str(version.version_id), ""])
        rows.append(["Default namespace", ".".join(version.default_namespace), ""])
        for rep in version.representations:
            if isinstance(rep, SQLViewRepresentation):
                rows.append([f"View Text ({rep.dialect})", rep.sql, ""])
            else:
                rows.append([f"View representation ({rep.type})", "", ""])
    return StatementResult(["col_name", "data_type", "comment"], rows)


def _transform_sql(transform: str, source: str) -> str:
    if transform == "identity":
        return source
    if "[" in transform:
        name, arg = transform.rstrip("]").split("[")
        return f"{name}({arg}, {source})"
    plural = {"year": "years", "month": "months", "day": "days", "hour": "hours"}.get(transform, transform)
    return f"{plural}({source})"


def show_create_table(catalog: Catalog, identifier: tuple[str, ...]) -> str:
    full = ".".join(_quote(p) for p in (catalog.name, *identifier))
    if catalog.view_exists(identifier) and not catalog.table_exists(identifier):
        view = catalog.load_view(identifier)
        columns = ", ".join(_quote(n) for n in view.schema.column_names)
        lines = [f"CREATE VIEW {full} ({columns})"]
        comment = view.properties.get("comment")
        if comment:
            lines.append(f"COMMENT '{_escape(comment)}'")
        lines.append(f"AS {view.sql}")
        return "\n".join(lines)
    if not catalog.table_exists(identifier):
        raise NoSuchTableError(f"table or view {catalog.name}.{'.'.join(identifier)} does not exist")
    table = catalog.load_table(identifier)
    schema = table.schema()
    column_lines: list[str] = []
    for f in schema.fields:
        text = f"  {_quote(f.name)} {sql_type_name(f.field_type).upper()}"
        if f.required:
            text += " NOT NULL"
        if f.doc:
            text += f" COMMENT '{_escape(f.doc)}'"
        column_lines.append(text)
    lines = [f"CREATE TABLE {full} (", ",\n".join(column_lines), ")", "USING iceberg"]
    spec = table.spec()
    if spec.fields:
        terms = [_transform_sql(str(pf.transform), schema.find_column_name(pf.source_id) or "?") for pf in spec.fields]
        lines.append(f"PARTITIONED BY ({', '.join(terms)})")
    lines.append(f"LOCATION '{_escape(table.location)}'")
    props = {k: v for k, v in table.properties.items()}
    if props:
        body = ",\n".join(f"  '{_escape(k)}' = '{_escape(v)}'" for k, v in sorted(props.items()))
        lines.append(f"TBLPROPERTIES (\n{body})")
    return "\n".join(lines)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
