"""Type changes that Iceberg cannot make in metadata, done by rewriting data files.

Iceberg readers (Java, Trino, Spark, pyiceberg) convert only int to long, float to double and
wider decimals when they read an old file; a file whose column is an int cannot be read as a
double or a string. So for every other conversion, each live data file whose physical type for a
changed column is not already the new type is read (deletes applied), its column is cast, and a
new file is written under the new schema. The old files are replaced by the new ones in the same
commit that sets the new schema: no Iceberg reader ever sees the new schema with an old file.

Files that never held the column (it was added later) or already hold the new type stay as
they are. The per-file work runs on the table's engine (local threads or Spark executors).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from tablestore.errors import SchemaEvolutionError
from tablestore.io.fileio import FileIO
from tablestore.spec.expressions.expression_tree import AlwaysTrue
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.metadata.schema_evolution import CastMode, TypeChangeRecord, is_implicit_conversion
from tablestore.spec.metadata.table_metadata import TableMetadata
from tablestore.spec.schemas.row_lineage import mark_updated
from tablestore.spec.schemas.schema import Schema, storage_schema, type_to_arrow
from tablestore.spec.schemas.types import IcebergType, NestedField, StringType, UUIDType, sql_type_name
from tablestore.table.read.file_rows import rewrite_schema
from tablestore.table.read.scan import FileTask, plan_files
from tablestore.table.update.snapshot import OverwriteFiles
from tablestore.table.update.validation import no_new_data_files
from tablestore.table.write.conform import conform_to_schema
from tablestore.table.write.data_files import WriteContext, write_data_files

if TYPE_CHECKING:
    from tablestore.table import Table


@dataclass(frozen=True)
class _Failure:
    """A value a strict cast could not convert; returned, not raised, so every file written by
    the other tasks can be deleted before the statement fails."""

    message: str


def physical_type(io: FileIO, data_file: DataFile, field_id: int) -> pa.DataType | None:
    """The Arrow type a data file stores for a top-level field id, None if it lacks the field."""
    from tablestore.table.read.data_files import parquet_field_id, parquet_format

    fs, path = io.filesystem_for(data_file.file_path)
    physical = storage_schema(parquet_format().make_fragment(path, filesystem=fs).physical_schema)
    for f in physical:
        if parquet_field_id(f) == field_id:
            return f.type
    return None


def cast_column(column: pa.ChunkedArray, old: IcebergType, new: IcebergType, mode: CastMode,
                name: str) -> pa.ChunkedArray | _Failure:
    """``column`` (of type ``old``) as ``new``: implicit conversions never fail; explicit casts
    fail (strict) or give NULL (null-on-error) for values that do not convert."""
    target = type_to_arrow(new)
    if isinstance(new, StringType) and isinstance(old, UUIDType):
        import uuid

        return pa.chunked_array([pa.array(
            [None if v is None else str(uuid.UUID(bytes=v)) for v in column.to_pylist()], pa.string())])
    if is_implicit_conversion(old, new):
        # int64 to double may round above 2**53, as Spark's implicit cast does.
        converted = pc.cast(column, target, safe=False)
        if isinstance(new, StringType) and (pa.types.is_timestamp(column.type) or pa.types.is_time(column.type)):
            converted = _trim_fraction(converted)
        return converted
    try:
        return pc.cast(column, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        if mode is CastMode.NULL_ON_ERROR:
            return _cast_each(column, target)
        bad = _first_unconvertible(column, target)
        return _Failure(
            f"cannot convert column {name!r} from {sql_type_name(old)} to {sql_type_name(new)}: the value "
            f"{bad!r} does not convert ({e}); nothing was changed. Fix or delete such rows, or set the table "
            "property tablestore.schema.cast-mode to 'null-on-error' to turn them into NULL"
        )


def _trim_fraction(text: pa.ChunkedArray) -> pa.ChunkedArray:
    """``2024-01-02 03:04:05.120000Z`` as Spark writes it: ``2024-01-02 03:04:05.12`` (UTC)."""
    text = pc.replace_substring_regex(text, pattern=r"Z$", replacement="")
    text = pc.replace_substring_regex(text, pattern=r"0+$", replacement="")
    return pc.replace_substring_regex(text, pattern=r"\.$", replacement="")


def _cast_one(value: object, source: pa.DataType, target: pa.DataType) -> object:
    try:
        return pc.cast(pa.array([value], source), target, safe=True)[0].as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return _UNCONVERTIBLE


_UNCONVERTIBLE = object()


def _cast_each(column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    values = []
    for v in column.to_pylist():
        converted = None if v is None else _cast_one(v, column.type, target)
        values.append(None if converted is _UNCONVERTIBLE else converted)
    return pa.chunked_array([pa.array(values, target)])


def _first_unconvertible(column: pa.ChunkedArray, target: pa.DataType) -> object:
    for v in column.to_pylist():
        if v is not None and _cast_one(v, column.type, target) is _UNCONVERTIBLE:
            return v
    return None


def _bridge_schema(new: Schema, changes: list[TypeChangeRecord]) -> Schema:
    """The new schema with the converted columns still at their old types: what a file is read as."""
    old_types = {c.field_id: c.old for c in changes}
    fields = tuple(
        NestedField(f.field_id, f.name, old_types[f.field_id], f.required, f.doc)
        if f.field_id in old_types else f
        for f in new.fields
    )
    return Schema(fields, new.schema_id, new.identifier_field_ids)


@dataclass(frozen=True)
class _Converter:
    """Converts one file task; plain data only, so Spark can ship it to the executors."""

    io: FileIO
    base: TableMetadata
    new: Schema
    bridge: Schema
    changes: tuple[TypeChangeRecord, ...]
    mode: CastMode
    ctx: WriteContext

    def __call__(self, task: FileTask) -> tuple[DataFile, list[DataFile]] | _Failure | None:
        from tablestore.table.read.file_rows import read_file_rows

        stale = False
        for change in self.changes:
            found = physical_type(self.io, task.file, change.field_id)
            if found is not None and not found.equals(type_to_arrow(change.new)):
                stale = True
        if not stale:
            return None
        spec = self.base.spec_for(task.spec_id)
        # On v3 the converted rows keep their _row_id; their values changed, so their sequence
        # number is nulled (it inherits this commit's).
        version = self.base.format_version
        rows = read_file_rows(self.io, self.base.properties, task.file, task.delete_files, spec, self.bridge,
                              rewrite_schema(self.bridge, version), task.data_sequence_number)
        rows = mark_updated(rows)
        for change in self.changes:
            name = self.new.find_column_name(change.field_id)
            assert name is not None
            index = rows.column_names.index(name)
            cast = cast_column(rows.column(index), change.old, change.new, self.mode, name)
            if isinstance(cast, _Failure):
                return cast
            rows = rows.set_column(index, pa.field(name, cast.type), cast)
        if rows.num_rows == 0:
            return task.file, []
        serial = lambda fn, items: [fn(i) for i in items]  # noqa: E731  (already on an engine worker)
        return task.file, write_data_files(self.ctx, conform_to_schema(rows, self.ctx.schema), serial)


def plan_type_rewrite(table: Table, base: TableMetadata, new: Schema, changes: list[TypeChangeRecord],
                      mode: CastMode) -> OverwriteFiles | None:
    """Rewrite the files holding old types; the snapshot that swaps them in, to be committed with
    the new schema in one transaction. None when no live file holds an old type."""
    snapshot = base.current_snapshot()
    tasks = plan_files(table.io, base, snapshot, base.schema(), AlwaysTrue(), table.engine)
    ctx = WriteContext(table.io, table.location, rewrite_schema(new, base.format_version), base.spec(),
                       dict(base.properties))
    convert = _Converter(table.io, base, new, _bridge_schema(new, changes), tuple(changes), mode, ctx)
    outcomes = table.engine.map(convert, tasks)
    done = [o for o in outcomes if isinstance(o, tuple)]
    failures = [o for o in outcomes if isinstance(o, _Failure)]
    if failures:
        for _, written in done:
            for f in written:
                with contextlib.suppress(OSError):  # best effort; remove_orphan_files finds it
                    table.io.delete(f.file_path)
        raise SchemaEvolutionError(failures[0].message)
    if not done:
        return None
    deleted = [old for old, _ in done]
    added = [f for _, written in done for f in written]
    described = ", ".join(
        f"{new.find_column_name(c.field_id)}: {sql_type_name(c.old)} -> {sql_type_name(c.new)}" for c in changes
    )
    no_new_files = no_new_data_files(
        None,
        lambda f: "a concurrent commit added data files (possibly of the old type) while the column was being "
                  "converted; run the ALTER TABLE again",
    )
    return OverwriteFiles(
        table, deleted, added, "overwrite", snapshot.snapshot_id if snapshot else None,
        checks=[no_new_files], snapshot_properties={"tablestore.schema-change": described},
    )
