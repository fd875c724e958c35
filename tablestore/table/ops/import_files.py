"""Registering existing Parquet files in a table, without copying them.

Each file's footer is read (never its data) and turned into an Iceberg ``DataFile``: record
count, size, split offsets, and the column metrics (sizes, value and null counts, lower and
upper bounds) keyed by field id. Files written without field ids (Hive, plain pyarrow) are
matched to the table's fields through the table's name mapping
(``schema.name-mapping.default``), which Java Iceberg and pyiceberg read too. Hive-style
partition values are not stored in the files: they come from the ``k=v`` directory names and
are recorded in the partition tuple, from which readers fill in identity-partition columns.

    import_files(table, ["/data/events/date=2024-01-02/part-0.parquet"])   # one append commit

A failed import commits nothing, and never deletes the files it was asked to register.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from tablestore.errors import SchemaError, ValidationError
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.partitioning.transforms import IdentityTransform
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.name_mapping import DEFAULT_NAME_MAPPING, MappedField, NameMapping, name_mapping_of
from tablestore.spec.schemas.schema import PARQUET_FIELD_ID, Schema, arrow_type_to_iceberg
from tablestore.spec.schemas.types import (
    FixedType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    StructType,
    TimestampType,
    TimestamptzType,
    UUIDType,
    is_promotion_allowed,
    sql_type_name,
)
from tablestore.table.update.register import RegisterFiles
from tablestore.table.update.transaction import commit_snapshot
from tablestore.table.write.metrics import collect_metrics, metrics_modes

if TYPE_CHECKING:
    from tablestore.spec.metadata.table_metadata import Snapshot
    from tablestore.table import Table

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
"""The directory value Hive (and pyarrow) write for a null partition value."""


# -- partition values ------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionColumn:
    """An identity partition field and the column it copies: what a ``k=v`` directory names."""

    name: str
    column: NestedField
    position: int


def hive_partition_columns(spec: PartitionSpec, schema: Schema, table_name: str) -> list[PartitionColumn]:
    """The partition columns of a Hive-style spec; ValidationError if a field is not identity."""
    out = []
    for position, pf in enumerate(spec.fields):
        column = schema.find_field(pf.source_id)
        if not isinstance(pf.transform, IdentityTransform):
            raise ValidationError(
                f"table {table_name} is partitioned by {pf.transform}({column.name}); files in Hive-style "
                "k=v directories can only be registered in tables partitioned by plain columns (identity)"
            )
        out.append(PartitionColumn(schema.find_column_name(pf.source_id) or column.name, column, position))
    return out


def partition_value(column: PartitionColumn, text: str | None, where: str) -> Any:
    """A partition value given as text (a directory name or a SQL literal) as an internal value."""
    if text is None or text == HIVE_DEFAULT_PARTITION:
        return None
    try:
        return conversions.from_python(column.column.field_type, text)
    except ValidationError as e:
        raise ValidationError(
            f"{where}: partition value {column.name}={text!r} is not a valid "
            f"{sql_type_name(column.column.field_type)} ({e}); fix the value or declare the partition "
            "column with a type that holds it"
        ) from None


def partition_from_values(
    columns: Sequence[PartitionColumn], values: Mapping[str, str | None], where: str
) -> tuple[Any, ...]:
    """The partition tuple for ``{column: text}``; every partition column must be given once."""
    by_name = {c.name.lower(): c for c in columns}
    out: list[Any] = [None] * len(columns)
    seen: set[str] = set()
    for key, text in values.items():
        column = by_name.get(key.lower())
        if column is None:
            raise ValidationError(
                f"{where}: {key!r} is not a partition column; the partition columns are "
                f"{', '.join(c.name for c in columns)}"
            )
        if column.name.lower() in seen:
            raise ValidationError(f"{where}: partition column {column.name!r} is given twice")
        seen.add(column.name.lower())
        out[column.position] = partition_value(column, text, where)
    missing = [c.name for c in columns if c.name.lower() not in seen]
    if missing:
        raise ValidationError(f"{where}: no value for partition column(s) {', '.join(missing)}")
    return tuple(out)


def partition_from_path(columns: Sequence[PartitionColumn], relative_path: str, where: str) -> tuple[Any, ...]:
    """The partition tuple of a file from its ``k=v/k2=v2/`` directories (URL-unescaped, as Hive writes)."""
    directories = relative_path.split("/")[:-1]
    values: dict[str, str | None] = {}
    for segment in directories:
        key, sep, raw = segment.partition("=")
        if not sep or not key:
            raise ValidationError(
                f"{where}: directory {segment!r} is not a partition directory of the form column=value "
                f"(partition columns: {', '.join(c.name for c in columns) or 'none'}); move the file, or "
                "rename the directory to start with '_' or '.' so it is skipped"
            )
        key = urllib.parse.unquote(key)
        if key.lower() in (k.lower() for k in values):
            raise ValidationError(f"{where}: partition column {key!r} appears twice in the path")
        values[key] = urllib.parse.unquote(raw)
    given = {k.lower() for k in values}
    missing = [c.name for c in columns if c.name.lower() not in given]
    if missing:
        layout = "/".join(f"{c.name}=<value>" for c in columns)
        raise ValidationError(
            f"{where}: the path has no directory for partition column(s) {', '.join(missing)}; files of this "
            f"table go in {layout}/ directories under its location"
        )
    return partition_from_values(columns, values, where)


def hive_partition_path(columns: Sequence[PartitionColumn], partition: tuple[Any, ...]) -> str:
    """``k=v/k2=v2`` for a partition tuple, escaped as pyarrow and Hive escape directory names."""
    parts = []
    for column in columns:
        value = partition[column.position]
        field_type = column.column.field_type
        text = HIVE_DEFAULT_PARTITION if value is None else str(conversions.to_python(field_type, value))
        parts.append(f"{urllib.parse.quote(column.name, safe='')}={urllib.parse.quote(text, safe='')}")
    return "/".join(parts)


def format_partition(columns: Sequence[PartitionColumn], partition: tuple[Any, ...]) -> str:
    """``k=v, k2=v2`` for messages."""
    return ", ".join(
        f"{c.name}={conversions.to_python(c.column.field_type, partition[c.position])!s}" for c in columns
    )


# -- files -----------------------------------------------------------------------------------


def is_hidden(relative_path: str) -> bool:
    """Hive and Spark skip files and directories whose names start with ``_`` or ``.`` (``_SUCCESS``, ``.crc``)."""
    return any(part.startswith(("_", ".")) for part in relative_path.split("/") if part)


def read_footer(table: Table, path: str) -> pq.FileMetaData:
    fs, fs_path = table.io.filesystem_for(path)
    try:
        with fs.open_input_file(fs_path) as f:
            return pq.read_metadata(f)
    except FileNotFoundError:
        raise ValidationError(f"cannot register {path}: the file does not exist") from None
    except (pa.ArrowInvalid, OSError) as e:
        raise ValidationError(
            f"cannot register {path}: it is not a Parquet file ({e}); tables hold Parquet files only, so "
            "move it away, or rename it to start with '_' or '.' so it is skipped"
        ) from None


def data_file_from_footer(
    table: Table,
    path: str,
    size: int,
    footer: pq.FileMetaData,
    partition: tuple[Any, ...],
    spec: PartitionSpec,
    mapping: NameMapping,
) -> DataFile:
    """The DataFile of an existing Parquet file: counts and bounds from its footer, by field id."""
    schema = table.schema()
    int96 = {footer.schema.column(i).path for i in range(footer.num_columns)
             if footer.schema.column(i).physical_type == "INT96"}
    metrics_schema = file_metrics_schema(footer.schema.to_arrow_schema(), schema, mapping, path, int96)
    metrics = collect_metrics(footer, metrics_schema, metrics_modes(schema, table.properties))
    return metrics.data_file(path, partition, size, spec.spec_id)


def file_metrics_schema(
    physical: pa.Schema, schema: Schema, mapping: NameMapping, path: str, int96: set[str] | frozenset[str] = frozenset()
) -> Schema:
    """The table's fields under the names the file uses, for the file's columns only.

    Field ids come from the file when it has them, else from the name mapping; a column the
    table does not know is left out (readers ignore it too). A column whose type cannot be read
    as the table's type is an error naming the file and the column.
    """
    fields = []
    for f in physical:
        entry = _entry_for(f, mapping.find(f.name))
        if entry is None or entry.field_id is None or not schema.has_field(entry.field_id):
            continue
        table_field = schema.find_field(entry.field_id)
        if f.name in int96 and isinstance(table_field.field_type, TimestampType | TimestamptzType):
            # Spark and Hive write timestamps as INT96 by default; Iceberg readers take them as timestamps.
            field_type: IcebergType = table_field.field_type
        else:
            field_type = _renamed(table_field.field_type, f.type, entry, path, f.name)
        fields.append(NestedField(table_field.field_id, f.name, field_type, False))
    return Schema(tuple(fields))


def _entry_for(f: pa.Field, mapped: MappedField | None) -> MappedField | None:
    """A file field's own id wins over the name mapping, as in Iceberg readers."""
    fid = _field_id(f)
    if fid is not None:
        return MappedField((f.name,), fid, _id_entries(f.type))
    return mapped


def _id_entries(t: pa.DataType) -> tuple[MappedField, ...]:
    """Children entries from the field ids a file's nested types carry."""
    children: list[pa.Field] = []
    if pa.types.is_struct(t):
        children = [t.field(i) for i in range(t.num_fields)]
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        children = [t.value_field.with_name("element")]
    elif pa.types.is_map(t):
        children = [t.key_field.with_name("key"), t.item_field.with_name("value")]
    return tuple(MappedField((c.name,), _field_id(c), _id_entries(c.type)) for c in children)


def _field_id(f: pa.Field) -> int | None:
    if f.metadata and PARQUET_FIELD_ID in f.metadata:
        return int(f.metadata[PARQUET_FIELD_ID])
    return None


def _renamed(t: IcebergType, arrow: pa.DataType, entry: MappedField, path: str, name: str) -> IcebergType:
    if pa.types.is_dictionary(arrow):
        arrow = arrow.value_type
    if isinstance(t, StructType) and pa.types.is_struct(arrow):
        by_id = {c.field_id: c for c in t.fields}
        children = []
        for i in range(arrow.num_fields):
            child = arrow.field(i)
            sub = entry.child(child.name)
            if sub is None or sub.field_id not in by_id:
                continue
            table_child = by_id[sub.field_id]
            children.append(NestedField(table_child.field_id, child.name,
                                        _renamed(table_child.field_type, child.type, sub, path,
                                                 f"{name}.{child.name}"), False))
        return StructType(*children)
    if isinstance(t, ListType) and (pa.types.is_list(arrow) or pa.types.is_large_list(arrow)):
        sub = entry.child("element")
        element = t.element_type if sub is None else _renamed(t.element_type, arrow.value_type, sub, path,
                                                              f"{name}.element")
        return ListType(t.element_id, element, t.element_required)
    if isinstance(t, MapType) and pa.types.is_map(arrow):
        key_entry, value_entry = entry.child("key"), entry.child("value")
        key = t.key_type if key_entry is None else _renamed(t.key_type, arrow.key_type, key_entry, path,
                                                            f"{name}.key")
        value = t.value_type if value_entry is None else _renamed(t.value_type, arrow.item_type, value_entry,
                                                                  path, f"{name}.value")
        return MapType(t.key_id, key, t.value_id, value, t.value_required)
    _check_readable(t, arrow, path, name)
    return t


def _check_readable(t: IcebergType, arrow: pa.DataType, path: str, name: str) -> None:
    try:
        file_type: IcebergType | None = arrow_type_to_iceberg(arrow, iter(range(1, 10**6)).__next__)
    except SchemaError:
        file_type = None
    readable = file_type is not None and (
        is_promotion_allowed(file_type, t) or (isinstance(t, UUIDType) and file_type == FixedType(16))
    )
    if not readable:
        shown = sql_type_name(file_type) if file_type is not None else str(arrow)
        raise ValidationError(
            f"cannot register {path}: column {name!r} is {shown} in the file but "
            f"{sql_type_name(t)} in the table; declare the column as {shown} or rewrite the file"
        )


# -- registering -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FileToRegister:
    path: str
    size: int
    partition: tuple[Any, ...]


def data_files_for(table: Table, files: Sequence[FileToRegister]) -> list[DataFile]:
    """Read the footers (in parallel on the table's engine) and describe every file."""
    spec = table.spec()
    mapping = name_mapping_of(table.properties, table.schema())

    def describe(item: FileToRegister) -> DataFile:
        footer = read_footer(table, item.path)
        return data_file_from_footer(table, item.path, item.size, footer, item.partition, spec, mapping)

    return list(table.engine.map(describe, list(files)))


def registered_files(table: Table) -> dict[str, DataFile]:
    """The live data files of the current snapshot, by path."""
    from tablestore.spec.expressions.expression_tree import AlwaysTrue
    from tablestore.table.read.scan import plan_files

    tasks = plan_files(table.io, table.metadata, table.current_snapshot(), table.schema(), AlwaysTrue(),
                       table.engine)
    return {t.file.file_path: t.file for t in tasks}


def import_files(
    table: Table,
    paths: Sequence[str],
    partition: Mapping[str, str | None] | None = None,
    snapshot_properties: dict[str, str] | None = None,
) -> Snapshot | None:
    """Register existing Parquet files in ``table`` with one append; the files are not copied.

    For a partitioned table the values come from ``partition`` (``{"date": "2024-01-02"}``, text
    converted to the column types) or, when it is None, from the ``k=v`` directories of each
    path (relative to the table location when the file is under it). The table must be
    partitioned by plain columns (identity) for that. Files already in the table are an error.
    Returns the new snapshot, or None when ``paths`` is empty.
    """
    if not paths:
        return None
    spec = table.spec()
    columns = hive_partition_columns(spec, table.schema(), table.name) if spec.fields else []
    known = registered_files(table)
    location = table.location + "/"
    todo: list[FileToRegister] = []
    seen: set[str] = set()
    for path in paths:
        if path in known or path in seen:
            raise ValidationError(f"{path} is already registered in table {table.name}")
        seen.add(path)
        if not columns:
            values: tuple[Any, ...] = ()
        elif partition is not None:
            values = partition_from_values(columns, partition, path)
        else:
            relative = path[len(location):] if path.startswith(location) else path.split("://", 1)[-1]
            values = _partition_from_any_path(columns, relative, path)
        todo.append(FileToRegister(path, _file_size(table, path), values))
    files = data_files_for(table, todo)
    if DEFAULT_NAME_MAPPING not in table.properties:
        # As Iceberg's add_files: record today's names, so files without field ids still map to
        # their columns (in every reader and rewrite) after a column is renamed.
        table.update_properties({DEFAULT_NAME_MAPPING: NameMapping.from_schema(table.schema()).to_json()})
    return commit_snapshot(RegisterFiles(table, files, snapshot_properties=snapshot_properties))


def _partition_from_any_path(columns: Sequence[PartitionColumn], relative: str, path: str) -> tuple[Any, ...]:
    """The partition of a file outside the table location: its last ``k=v`` directories."""
    directories = relative.split("/")[:-1]
    tail = directories[len(directories) - len(columns):] if columns else []
    return partition_from_path(columns, "/".join([*tail, relative.rsplit("/", 1)[-1]]), path)


def _file_size(table: Table, path: str) -> int:
    try:
        return table.io.new_input(path).length()
    except FileNotFoundError:
        raise ValidationError(f"cannot register {path}: the file does not exist") from None
