"""Row-level DELETE and UPDATE: planning, the per-file work, and the one commit.

The plan is Iceberg's (and Spark's) for row-level commands:

1. Plan the files the condition may touch, at the current snapshot (the scan's snapshot, which
   travels to the commit for validation).
2. Push-down: a file with no delete files whose partition values and column bounds prove that
   every row matches is dropped in metadata only (DELETE).
3. Every other candidate file is read with its row positions and its existing deletes applied;
   the condition selects the affected rows. Then, by the table's mode for the operation
   (``write.delete.mode``, ``write.update.mode``, ``write.merge.mode``):

   - ``copy-on-write`` (the default, as in Iceberg): the file is replaced by a rewrite without
     the deleted rows and with the updated ones;
   - ``merge-on-read``: a position delete file (format v2) or the file's deletion vector (v3:
     one per data file, holding its earlier deletes too) marks the affected rows, and updated
     rows go to new data files. A file whose every live row is affected is dropped instead.

4. One :class:`~tablestore.table.update.snapshot.RowDelta` commit, validated under the table's
   isolation level (``write.<op>.isolation-level``: ``serializable`` or ``snapshot``).

The per-file work runs on the table's engine (threads, or Spark executors): it takes only plain
data (:class:`RowLevelContext`, :class:`~tablestore.table.read.scan.FileTask`).
"""

from __future__ import annotations

import enum
import itertools
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablestore.errors import SchemaError, ValidationError
from tablestore.io.cleanup import delete_files, deleted_unless_sent
from tablestore.io.fileio import FileIO
from tablestore.spec.expressions.arrow_filter import to_arrow_expression
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.bound_predicates import (
    BoundLiteralPredicate,
    BoundPredicate,
    BoundSetPredicate,
    referenced_field_ids,
)
from tablestore.spec.expressions.evaluators import decode_bound, test_value
from tablestore.spec.expressions.expression_parser import to_expression
from tablestore.spec.expressions.expression_text import format_literal
from tablestore.spec.expressions.expression_tree import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    BoundExpression,
    Expression,
    Or,
)
from tablestore.spec.manifests.manifest import DataFile, DataFileContent
from tablestore.spec.metadata.table_metadata import Snapshot
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.partitioning.transforms import IdentityTransform
from tablestore.spec.schemas.row_lineage import ROW_ID, mark_updated, with_row_lineage
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import DateType, DecimalType, IntegerType, LongType, TimestampType, TimestamptzType
from tablestore.table.ops.position_deletes import (
    delete_file_path,
    merged_previous_deletes,
    write_deletion_vector,
    write_file_position_deletes,
)
from tablestore.table.ops.row_expressions import ArrowEvaluator, parse_expression
from tablestore.table.read.data_files import equality_matches, read_position_deletes
from tablestore.table.read.file_rows import read_file_rows
from tablestore.table.read.scan import FileTask, plan_files
from tablestore.table.update.identity import CommitIdentity
from tablestore.table.update.snapshot import RowDelta
from tablestore.table.update.transaction import Transaction, commit_snapshot
from tablestore.table.update.validation import isolation_level, row_level_checks
from tablestore.table.write.conform import conform_to_schema
from tablestore.table.write.data_files import WriteContext, write_data_files

if TYPE_CHECKING:
    from tablestore.table import Table

COPY_ON_WRITE = "copy-on-write"
MERGE_ON_READ = "merge-on-read"
MODES = (COPY_ON_WRITE, MERGE_ON_READ)


class RowLevelOperation(enum.StrEnum):
    """The kind of a row-level change: it picks ``write.<kind>.mode`` and the isolation level."""

    DELETE = "delete"
    UPDATE = "update"
    MERGE = "merge"


OPERATIONS = tuple(RowLevelOperation)


def write_mode(properties: Mapping[str, str], operation: str) -> str:
    """The table's ``write.<operation>.mode`` (copy-on-write when unset, as in Iceberg)."""
    key = f"write.{operation}.mode"
    mode = properties.get(key, COPY_ON_WRITE).strip().lower()
    if mode not in MODES:
        raise ValidationError(f"table property {key}={mode!r} must be copy-on-write or merge-on-read")
    return mode


@dataclass
class RowLevelContext:
    """What every per-file job of one operation shares; plain data, so it ships to executors."""

    io: FileIO
    location: str
    schema: Schema
    spec: PartitionSpec
    specs: dict[int, PartitionSpec]
    properties: dict[str, str]
    mode: str
    format_version: int = 2
    #: A format v3 table: rewritten rows carry their row lineage (``_row_id`` and
    #: ``_last_updated_sequence_number``) into the new files.
    lineage: bool = False
    #: Put in the name of every file the operation writes, when set: a Spark job that fails
    #: finds the files its tasks wrote by it and deletes them.
    write_id: str | None = None

    @staticmethod
    def of(table: Table, mode: str) -> RowLevelContext:
        return RowLevelContext(table.io, table.location, table.schema(), table.spec(), table.specs(),
                               table.properties, mode, table.metadata.format_version,
                               lineage=table.metadata.format_version >= 3)

    @property
    def file_schema(self) -> Schema:
        """The schema of the rows read whole and written: the table's, plus row lineage on v3."""
        return with_row_lineage(self.schema) if self.lineage else self.schema

    def write_context(self) -> WriteContext:
        # A fresh name prefix per job: jobs on different executors must never collide.
        name = f"{self.write_id}-{uuid.uuid4()}" if self.write_id else str(uuid.uuid4())
        return WriteContext(self.io, self.location, self.file_schema, self.spec, self.properties,
                            write_uuid=name, _counter=itertools.count(1))

    def write_rows(self, rows: pa.Table) -> list[DataFile]:
        """Write rows of the table (new rows lack the lineage columns: they read null and inherit)."""
        if rows.num_rows == 0:
            return []
        serial = lambda fn, items: [fn(i) for i in items]  # noqa: E731  (already on an engine worker)
        return write_data_files(self.write_context(), conform_to_schema(rows, self.file_schema), serial)

    def row_ids_at(self, task: FileTask, positions: np.ndarray) -> pa.Array:
        """The ``_row_id`` of the rows at ``positions`` of a data file (an updated row keeps it)."""
        ids = read_file_rows(self.io, self.properties, task.file, (), self.specs[task.spec_id], self.schema,
                             Schema((ROW_ID,)), task.data_sequence_number).column(ROW_ID.name)
        return ids.take(pa.array(positions, pa.int64())).combine_chunks()

    def delete_positions(self, task: FileTask, positions: np.ndarray, affected: int,
                         added_data: list[DataFile] | None = None) -> FileChange:
        """The change that deletes the rows at ``positions`` of the task's data file.

        v2: a Parquet position delete file of those positions. v3: the file's one deletion
        vector, holding those positions and every position it had deleted before (its DV and
        position delete files, which the change replaces); when that is every row, the data
        file is dropped instead.
        """
        spec = self.specs[task.file.spec_id]
        ctx = self.write_context()
        if self.format_version < 3:
            path = delete_file_path(ctx.data_location, spec, self.schema, task.file, write_id=self.write_id)
            delete = write_file_position_deletes(self.io, path, task.file, positions, ctx.codec)
            return FileChange(task.file, affected, added_data=added_data or [], added_deletes=[delete])
        bitmap, replaced = merged_previous_deletes(self.io, task.file, task.delete_files)
        bitmap.update(np.asarray(positions, dtype=np.int64).astype(np.uint64))
        rows = task.file.record_count
        if len(bitmap) == rows and bitmap.max() == rows - 1:
            return FileChange(task.file, affected, removed=True, added_data=added_data or [])
        path = delete_file_path(ctx.data_location, spec, self.schema, task.file, extension="puffin",
                                write_id=self.write_id)
        dv = write_deletion_vector(self.io, path, task.file, bitmap)
        return FileChange(task.file, affected, added_data=added_data or [], added_deletes=[dv],
                          removed_deletes=replaced)


@dataclass
class FileChange:
    """What one job did to one data file: rows affected and files written."""

    data_file: DataFile
    affected: int = 0
    removed: bool = False
    added_data: list[DataFile] = field(default_factory=list)
    added_deletes: list[DataFile] = field(default_factory=list)
    # Delete files the change replaces: a v3 deletion vector's predecessors for its data file.
    removed_deletes: list[DataFile] = field(default_factory=list)


# -- reading rows with their positions ---------------------------------------------------------------


def read_live_rows(
    ctx: RowLevelContext, task: FileTask, columns: set[int] | None = None, with_row_id: bool = False,
) -> tuple[pa.Table, np.ndarray]:
    """The live rows of a data file (its deletes applied), and their positions.

    ``columns`` (field ids) narrows the read to what a condition needs; the columns of equality
    deletes are read too, to apply them. Whole rows carry their row lineage on a v3 table;
    narrowed ones only ``_row_id``, and only ``with_row_id`` (rows an update writes anew).
    """
    spec = ctx.specs[task.spec_id]
    projected = ctx.file_schema  # whole rows are read to be written again: with their lineage on v3
    if columns is not None:
        wanted = set(columns)
        for delete in task.delete_files:
            wanted.update(delete.equality_ids or [])
        lineage = (ROW_ID,) if ctx.lineage and with_row_id else ()
        projected = Schema((*(f for f in ctx.schema.fields if f.field_id in wanted), *lineage), ctx.schema.schema_id)
    rows = read_file_rows(ctx.io, ctx.properties, task.file, (), spec, ctx.schema, projected,
                          task.data_sequence_number)
    positions = np.arange(rows.num_rows, dtype=np.int64)
    if not task.delete_files:
        return rows, positions
    keep = np.ones(rows.num_rows, dtype=bool)
    fields = {f.field_id: pa.field(f.name, pa.null()) for f in projected.fields}
    for delete in task.delete_files:
        if delete.content == DataFileContent.POSITION_DELETES:
            deleted = read_position_deletes(ctx.io, delete, task.file.file_path)
            keep[deleted[deleted < rows.num_rows]] = False
        else:
            keep &= ~equality_matches(ctx.io, rows, delete, fields, ctx.schema)
    if keep.all():
        return rows, positions
    return rows.filter(pa.array(keep)), positions[keep]


def condition_mask(rows: pa.Table, bound: BoundExpression, schema: Schema) -> pa.Array:
    """True where the condition is true (false and unknown rows are not affected)."""
    if isinstance(bound, AlwaysTrue):
        return pa.array(np.ones(rows.num_rows, dtype=bool))
    import pyarrow.dataset as ds

    expr = to_arrow_expression(bound, schema)
    matches = ds.dataset(rows).to_table(columns={"__m": expr}).column("__m")
    return pc.fill_null(matches.combine_chunks(), False)


# -- push-down: files that match as a whole ------------------------------------------------------------

EXACT_BOUND_TYPES = (IntegerType, LongType, DateType, TimestampType, TimestamptzType, DecimalType)


def all_rows_match(bound: BooleanExpression, task: FileTask, spec: PartitionSpec) -> bool:
    """Whether partition values and column bounds prove that every row of the file matches.

    Only exact bounds count: identity partition values, and the bounds of integer, date,
    timestamp and decimal columns (string bounds may be truncated, floats may hold NaN).
    """
    if task.delete_files or task.file.record_count is None or task.file.record_count < 0:
        return False
    identity = {pf.source_id: value for pf, value in zip(spec.fields, task.file.partition, strict=False)
                if isinstance(pf.transform, IdentityTransform)}
    return _strict(bound, task.file, identity)


def _strict(expr: BooleanExpression, f: DataFile, identity: dict[int, Any]) -> bool:
    if isinstance(expr, AlwaysTrue):
        return True
    if isinstance(expr, AlwaysFalse):
        return False
    if isinstance(expr, And):
        return _strict(expr.left, f, identity) and _strict(expr.right, f, identity)
    if isinstance(expr, Or):
        return _strict(expr.left, f, identity) or _strict(expr.right, f, identity)
    if not isinstance(expr, BoundPredicate):
        return False
    fid = expr.field_id
    if fid in identity:
        return test_value(expr, identity[fid])
    t = expr.field.field_type
    values = (f.value_counts or {}).get(fid)
    nulls = (f.null_value_counts or {}).get(fid)
    if values is None or nulls is None or values != f.record_count:
        return False
    if expr.op == "is_null":
        return nulls == values
    if expr.op == "not_null":
        return nulls == 0
    if nulls != 0 or not isinstance(t, EXACT_BOUND_TYPES):
        return False
    lower = decode_bound(t, (f.lower_bounds or {}).get(fid))
    upper = decode_bound(t, (f.upper_bounds or {}).get(fid))
    if lower is None or upper is None:
        return False
    if isinstance(expr, BoundSetPredicate):
        if expr.op == "in":
            return bool(lower == upper and lower in expr.literals)
        return all(v < lower or v > upper for v in expr.literals)
    if not isinstance(expr, BoundLiteralPredicate):
        return False
    lit = expr.literal
    checks: dict[str, Callable[[], bool]] = {
        "lt": lambda: bool(upper < lit), "lt_eq": lambda: bool(upper <= lit),
        "gt": lambda: bool(lower > lit), "gt_eq": lambda: bool(lower >= lit),
        "eq": lambda: bool(lower == upper == lit), "not_eq": lambda: bool(lit < lower or lit > upper),
    }
    check = checks.get(expr.op)
    return check() if check is not None else False


# -- applying a change to one file ---------------------------------------------------------------------


def change_file(
    ctx: RowLevelContext,
    task: FileTask,
    live: pa.Table,
    positions: np.ndarray,
    affected: np.ndarray,
    replacement: pa.Table | None = None,
) -> FileChange | None:
    """Remove the ``affected`` live rows (a boolean mask over ``live``) and add ``replacement``.

    Copy-on-write rewrites the file; merge-on-read writes a position delete file, unless every
    live row goes, when the file is dropped instead (no delete file needed).
    """
    count = int(affected.sum())
    if count == 0:
        return None
    change = FileChange(task.file, affected=count)
    new_rows = replacement if replacement is not None and replacement.num_rows else None
    if new_rows is not None:
        new_rows = mark_updated(new_rows)  # updated rows keep their _row_id, not their sequence number
    if ctx.mode != COPY_ON_WRITE and count == live.num_rows:
        # Every live row goes: drop the file rather than mark each row. ``live`` may hold only
        # the columns merge-on-read needed (a merge's keys), so the new rows are written as
        # they are, never narrowed to ``live``'s columns.
        change.removed = True
        change.added_data = ctx.write_rows(new_rows) if new_rows is not None else []
        return change
    if ctx.mode == COPY_ON_WRITE:
        kept = live.filter(pa.array(~affected))
        if new_rows is not None:
            for f in kept.schema:  # a lineage column the new rows lack reads null: it inherits
                if f.name not in new_rows.column_names:
                    new_rows = new_rows.append_column(f, pa.nulls(new_rows.num_rows, f.type))
            kept = pa.concat_tables([kept, new_rows.select(kept.column_names).cast(kept.schema)])
        change.removed = True
        change.added_data = ctx.write_rows(kept)
        return change
    return ctx.delete_positions(task, positions[affected], count,
                                added_data=ctx.write_rows(new_rows) if new_rows is not None else None)


def delete_job(ctx: RowLevelContext, bound: BoundExpression) -> Callable[[FileTask], FileChange | None]:
    def run(task: FileTask) -> FileChange | None:
        if all_rows_match(bound, task, ctx.specs[task.spec_id]):
            return FileChange(task.file, affected=task.file.record_count, removed=True)
        if ctx.mode == MERGE_ON_READ:
            # Position deletes need only the condition's columns, not whole rows.
            live, positions = read_live_rows(ctx, task, top_level_ids(ctx.schema, referenced_field_ids(bound)))
            mask = condition_mask(live, bound, ctx.schema).to_numpy(zero_copy_only=False)
            count = int(mask.sum())
            if count == 0:
                return None
            if count == live.num_rows:
                return FileChange(task.file, affected=count, removed=True)
            return ctx.delete_positions(task, positions[mask], count)
        live, positions = read_live_rows(ctx, task)
        mask = condition_mask(live, bound, ctx.schema).to_numpy(zero_copy_only=False)
        return change_file(ctx, task, live, positions, mask)

    return run


def top_level_ids(schema: Schema, ids: set[int]) -> set[int]:
    out = set()
    for fid in ids:
        current: int | None = fid
        while current is not None:
            top = current
            current = schema.parent_id(current)
        out.add(top)
    return out


def commit_changes(
    table: Table,
    changes: list[FileChange],
    scan_snapshot: Snapshot | None,
    operation: RowLevelOperation,
    conflict_filter: BooleanExpression | None,
    extra_data: list[DataFile] | None = None,
    snapshot_properties: dict[str, str] | None = None,
    transaction: Transaction | None = None,
    commit_id: str | CommitIdentity | None = None,
) -> Snapshot | None:
    """One RowDelta commit of every file's change (none if nothing changed); added to
    ``transaction`` instead when given (None is returned then). The files the changes wrote
    belong to the commit from here on: deleted only when it is known not to have landed (see
    :mod:`tablestore.table.update.commit_outcome`). ``commit_id``: a retried job whose first
    commit landed gets that snapshot back and applies nothing twice."""
    with deleted_unless_sent(lambda: discard(table, changes, extra_data)):
        removed = [c.data_file for c in changes if c.removed]
        referenced = [c.data_file for c in changes if c.added_deletes]
        replaced_deletes = [f for c in changes for f in c.removed_deletes]
        added = [f for c in changes for f in c.added_data] + list(extra_data or [])
        deletes = [f for c in changes for f in c.added_deletes]
        if not removed and not added and not deletes:
            return None
        checks = row_level_checks([*removed, *referenced], isolation_level(table.properties, operation),
                                  conflict_filter)
        producer = RowDelta(table, [*removed, *replaced_deletes], added, deletes,
                            scan_snapshot.snapshot_id if scan_snapshot else None, checks, snapshot_properties)
        if transaction is not None:
            transaction.add_snapshot(producer)
            return None
    return commit_snapshot(producer, commit_id)


def discard(table: Table, changes: list[FileChange], extra: list[DataFile] | None = None) -> None:
    """Delete the files an operation wrote for a change that is known not to commit."""
    delete_files(table.io, [f.file_path for c in changes for f in (*c.added_data, *c.added_deletes)]
                 + [f.file_path for f in extra or []])


def run_changes(
    table: Table,
    job: Callable[[FileTask], FileChange | None],
    tasks: list[FileTask],
    ctx: RowLevelContext,
) -> list[FileChange]:
    results = table.engine.map(job, tasks)
    return [c for c in results if c is not None]


# -- DELETE ---------------------------------------------------------------------------------------------


def delete_rows(table: Table, filter: str | Expression, snapshot_properties: dict[str, str] | None = None,
                mode: str | None = None, transaction: Transaction | None = None,
                commit_id: str | CommitIdentity | None = None) -> int:
    """DELETE FROM table WHERE filter; returns the number of deleted rows.

    ``mode`` overrides the table's ``write.delete.mode`` (the verified erasure writes position
    deletes, then rewrites each file in its own partition spec)."""
    bound = bind(table.schema(), to_expression(filter))
    snapshot = table.current_snapshot()
    if snapshot is None or isinstance(bound, AlwaysFalse):
        return 0
    if mode is not None and mode not in MODES:
        raise ValidationError(f"delete mode {mode!r} must be copy-on-write or merge-on-read")
    ctx = RowLevelContext.of(table, mode or write_mode(table.properties, RowLevelOperation.DELETE))
    tasks = plan_files(table.io, table.metadata, snapshot, ctx.schema, bound, table.engine)
    changes = run_changes(table, delete_job(ctx, bound), tasks, ctx)
    commit_changes(table, changes, snapshot, RowLevelOperation.DELETE, bound, snapshot_properties=snapshot_properties,
                   transaction=transaction, commit_id=commit_id)
    return sum(c.affected for c in changes)


# -- UPDATE ---------------------------------------------------------------------------------------------


def check_assignable(table: Table, columns: list[str]) -> list[str]:
    """The table's names of the assigned columns; unknown and identifier columns are errors."""
    schema = table.schema()
    names = []
    identifier = {schema.find_column_name(i) for i in schema.identifier_field_ids}
    for column in columns:
        fid = schema.find_field_id(column, case_sensitive=False)
        if fid is None or schema.find_column_name(fid) not in schema.column_names:
            raise SchemaError(
                f"UPDATE sets unknown column {column!r} of {table.name}; its columns are "
                f"{', '.join(schema.column_names)}"
            )
        name = schema.find_column_name(fid)
        assert name is not None
        if name in identifier:
            raise ValidationError(
                f"cannot UPDATE {name!r}: it is part of the primary key (identifier fields) of {table.name}; "
                "delete the row and insert it with the new key instead"
            )
        names.append(name)
    if len(set(names)) != len(names):
        raise ValidationError(f"UPDATE sets a column twice: {', '.join(columns)}")
    return names


def updated_rows(rows: pa.Table, values: dict[str, Any], schema: Schema) -> pa.Table:
    """``rows`` with the assigned columns replaced by ``values`` (arrays or scalars), cast to the column types.

    A value of another type is cast only where SQL's store assignment allows (conform's rules);
    anything else is a SchemaError.
    """
    out = rows
    for name, value in values.items():
        index = out.schema.get_field_index(name)
        target = out.schema.field(index)
        array = value if not isinstance(value, pa.Scalar) else pa.array([value.as_py()] * rows.num_rows, value.type)
        if array.type == pa.null():
            array = pa.nulls(rows.num_rows, target.type)
        single = pa.table({name: array})
        try:
            conformed = conform_to_schema(single, schema.select([name]))
        except SchemaError as e:
            raise SchemaError(f"UPDATE SET {name}: {e}") from None
        column = conformed.column(name)
        if not target.nullable and column.null_count:
            raise SchemaError(f"UPDATE SET {name}: the column is required but the new value is NULL")
        out = out.set_column(index, target, column.cast(target.type))
    return out


def _resolver(rows: pa.Table, table_name: str) -> Callable[[str | None, str], pa.ChunkedArray]:
    names = {n.lower(): n for n in rows.column_names}

    def resolve(qualifier: str | None, name: str) -> pa.ChunkedArray:
        if qualifier is not None and qualifier.lower() != table_name.lower():
            raise ValidationError(f"unknown table alias {qualifier!r} in {qualifier}.{name}; use {table_name}.{name}")
        found = names.get(name.lower())
        if found is None:
            raise SchemaError(f"unknown column {name!r}; the columns are {', '.join(rows.column_names)}")
        return rows.column(found)

    return resolve


def assignment_values(
    rows: pa.Table, assignments: dict[str, str], table_name: str
) -> dict[str, Any]:
    """Evaluate the SET expressions (SQL text) on ``rows``."""
    evaluator = ArrowEvaluator(_resolver(rows, table_name), rows.num_rows)
    return {name: evaluator.array(parse_expression(sql)) for name, sql in assignments.items()}


def as_sql(value: Any) -> str:
    """A Python value as a SQL literal (strings given to update() are expressions, not values)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "NULL"
    return format_literal(value)


def update_rows(
    table: Table,
    assignments: Mapping[str, Any],
    filter: str | Expression | None = None,
    snapshot_properties: dict[str, str] | None = None,
    commit_id: str | CommitIdentity | None = None,
) -> int:
    """UPDATE table SET col = expr, ... WHERE filter; returns the number of updated rows.

    Values are SQL expressions as text (``"name": "upper(name)"``, ``"name": "'u1'"``) or
    Python values (``"amount": 5``).
    """
    if not assignments:
        raise ValidationError("update() needs at least one column to set")
    names = check_assignable(table, list(assignments))
    sql = {name: as_sql(v) for name, v in zip(names, assignments.values(), strict=True)}
    schema = table.schema()
    bound = bind(schema, to_expression(filter))
    short_name = table.identifier[-1]
    # Check every expression and its type on no rows, before a file is written.
    empty = schema.as_arrow().empty_table()
    updated_rows(empty, assignment_values(empty, sql, short_name), schema)
    snapshot = table.current_snapshot()
    if snapshot is None or isinstance(bound, AlwaysFalse):
        return 0
    ctx = RowLevelContext.of(table, write_mode(table.properties, RowLevelOperation.UPDATE))
    tasks = plan_files(table.io, table.metadata, snapshot, schema, bound, table.engine)

    def run(task: FileTask) -> FileChange | None:
        live, positions = read_live_rows(ctx, task)
        mask = condition_mask(live, bound, ctx.schema)
        if not pc.any(mask).as_py():
            return None
        matched = live.filter(mask)
        new = updated_rows(matched, assignment_values(matched, sql, short_name), ctx.schema)
        return change_file(ctx, task, live, positions, mask.to_numpy(zero_copy_only=False), new)

    changes = run_changes(table, run, tasks, ctx)
    commit_changes(table, changes, snapshot, RowLevelOperation.UPDATE, bound, snapshot_properties=snapshot_properties,
                   commit_id=commit_id)
    return sum(c.affected for c in changes)


# -- applying changes that an engine (Spark SQL) selected by file and position -------------------------------


def position_change(
    ctx: RowLevelContext,
    task: FileTask,
    positions: np.ndarray,
    replacement: pa.Table | None = None,
    replaced_positions: np.ndarray | None = None,
    write_replacement: bool = False,
) -> FileChange | None:
    """The change to one data file that removes the rows at ``positions`` and puts
    ``replacement`` (their new versions, if any) in.

    Copy-on-write rewrites the file with the replacement rows; merge-on-read marks the positions
    deleted without reading the data file. There the replacement rows are written with the
    change when the table keeps row lineage (each keeps the ``_row_id`` of the row at its
    ``replaced_positions``, default ``positions``) or when ``write_replacement`` is set (an
    engine task writing its own files); otherwise the caller writes them, all files' together.
    """
    was = replaced_positions if replaced_positions is not None else positions  # in the replacement's order
    positions = np.unique(positions)
    if ctx.lineage and replacement is not None and ROW_ID.name not in replacement.column_names:
        replacement = replacement.append_column(ROW_ID.name, ctx.row_ids_at(task, was))
    if ctx.mode == COPY_ON_WRITE:
        live, live_positions = read_live_rows(ctx, task)
        mask = np.isin(live_positions, positions)
        return change_file(ctx, task, live, live_positions, mask, replacement)
    if not task.delete_files and len(positions) == task.file.record_count:
        change = FileChange(task.file, affected=len(positions), removed=True)
    else:
        change = ctx.delete_positions(task, positions, len(positions))
    if replacement is not None and replacement.num_rows and (ctx.lineage or write_replacement):
        change.added_data = ctx.write_rows(mark_updated(replacement) if ctx.lineage else replacement)
    return change


def apply_positions(
    table: Table,
    snapshot: Snapshot,
    operation: RowLevelOperation,
    deleted: dict[str, np.ndarray],
    replacements: dict[str, pa.Table] | None = None,
    inserted: pa.Table | None = None,
    conflict_filter: BooleanExpression | None = None,
    replaced_positions: dict[str, np.ndarray] | None = None,
    commit_id: str | CommitIdentity | None = None,
) -> int:
    """Delete the rows at ``deleted`` (data file path → positions), put ``replacements`` (the
    updated rows of each file) and ``inserted`` in, and commit once. Returns the rows deleted
    or replaced.

    ``replaced_positions`` are the positions the replacement rows had, in their order (default:
    ``deleted``'s, as for an UPDATE); on a v3 table each replacement row keeps the ``_row_id``
    of the row it replaces.

    Copy-on-write rewrites each file with its replacement rows; merge-on-read writes position
    deletes without reading the data file, and all new rows together.
    """
    ctx = RowLevelContext.of(table, write_mode(table.properties, operation))
    replacements = replacements or {}
    tasks = [t for t in plan_files(table.io, table.metadata, snapshot, ctx.schema, AlwaysTrue(), table.engine)
             if t.file.file_path in deleted] if deleted else []
    missing = set(deleted) - {t.file.file_path for t in tasks}
    if missing:
        raise ValidationError(f"{len(missing)} data file(s) selected for the change are not in snapshot "
                              f"{snapshot.snapshot_id} (for example {sorted(missing)[0]})")
    was = replaced_positions if replaced_positions is not None else deleted

    def run(task: FileTask) -> FileChange | None:
        path = task.file.file_path
        return position_change(ctx, task, deleted[path], replacements.get(path), was.get(path))

    mode = ctx.mode
    changes = [c for c in table.engine.map(run, tasks) if c is not None]
    extra: list[DataFile] = []
    with deleted_unless_sent(lambda: discard(table, changes)):
        moved = [] if mode == COPY_ON_WRITE or ctx.lineage else replacements.values()
        new_rows = [*moved,
                    *([inserted] if inserted is not None else [])]
        new_rows = [r for r in new_rows if r.num_rows]
        if new_rows:
            extra = ctx.write_rows(pa.concat_tables(new_rows))
    commit_changes(table, changes, snapshot, operation, conflict_filter, extra_data=extra, commit_id=commit_id)
    return sum(c.affected for c in changes)
