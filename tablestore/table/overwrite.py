"""Overwrites: rows matching a filter, or whole partitions, replaced by new rows in one snapshot.

Files whose rows all match are dropped; files where only some rows match are rewritten without
them. The snapshot is validated against the commits made since the overwrite read the table
(:mod:`tablestore.table.update.validation`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from tablestore.spec.evaluators import to_arrow_expression
from tablestore.spec.expressions import AlwaysFalse, AlwaysTrue, BoundExpression, Expression, bind, to_expression
from tablestore.spec.manifest import DataFile
from tablestore.spec.metadata import Snapshot
from tablestore.spec.schema import Schema
from tablestore.table.conform import conform_to_schema, downcast_ns_requested, to_arrow_table
from tablestore.table.file_rows import read_file_rows, rewrite_schema
from tablestore.table.scan import FileTask, plan_files
from tablestore.table.update.snapshot import OverwriteFiles, since
from tablestore.table.update.validation import no_new_data_files, no_new_data_matching
from tablestore.table.write import WriteContext, write_data_files

if TYPE_CHECKING:
    from tablestore.table import Table


def write_context(table: Table) -> WriteContext:
    return WriteContext(table.io, table.location, table.schema(), table.spec(), table.properties)


def overwrite_producer(table: Table, data: Any, filter: str | Expression | None,
                       snapshot_properties: dict[str, str] | None) -> OverwriteFiles:
    """The snapshot that replaces the rows matching ``filter`` (every row when None) with ``data``.

    It fails with CommitConflictError if a concurrent commit added rows that match the filter
    after this overwrite read the table.
    """
    bound = bind(table.schema(), to_expression(filter))
    rows = conform_to_schema(to_arrow_table(data), table.schema(), downcast_ns_requested(table.metadata.properties))
    deleted, rewritten, scan_snapshot = plan_delete(table, bound)
    added = write_data_files(write_context(table), rows, table.engine.map) if rows.num_rows else []
    return OverwriteFiles(
        table, deleted, [*rewritten, *added], "overwrite", since(scan_snapshot),
        checks=[no_new_data_matching(bound, "filter of this operation")],
        snapshot_properties=snapshot_properties,
    )


def replace_partitions_producer(table: Table, data: Any,
                                snapshot_properties: dict[str, str] | None) -> OverwriteFiles:
    """Dynamic partition overwrite: the snapshot that replaces exactly the partitions ``data``
    has rows in. Files of the current spec in those partitions are dropped; other partitions,
    and files of older specs, stay. A concurrent commit that adds files to a replaced partition
    makes it fail with CommitConflictError."""
    rows = conform_to_schema(to_arrow_table(data), table.schema(), downcast_ns_requested(table.metadata.properties))
    added = write_data_files(write_context(table), rows, table.engine.map) if rows.num_rows else []
    spec_id = table.spec().spec_id
    targets = {tuple(f.partition) for f in added}
    snapshot = table.current_snapshot()
    tasks = plan_files(table.io, table.metadata, snapshot, table.schema(), AlwaysTrue(), table.engine)
    deleted = [t.file for t in tasks if t.file.spec_id == spec_id and tuple(t.file.partition) in targets]
    conflicts = no_new_data_files(
        lambda f: f.spec_id == spec_id and tuple(f.partition) in targets,
        lambda f: f"a concurrent commit added {f.file_path} to a partition this overwrite replaces; re-run it",
    )
    return OverwriteFiles(
        table, deleted, added, "overwrite", since(snapshot), checks=[conflicts],
        snapshot_properties={"replace-partitions": "true", **(snapshot_properties or {})},
    )


def plan_delete(table: Table, bound: BoundExpression) -> tuple[list[DataFile], list[DataFile], Snapshot | None]:
    """Files to drop and the rewritten remainders of partially matching files."""
    snapshot = table.current_snapshot()
    if snapshot is None or isinstance(bound, AlwaysFalse):
        return [], [], snapshot
    schema = table.schema()
    tasks = plan_files(table.io, table.metadata, snapshot, schema, bound, table.engine)
    if isinstance(bound, AlwaysTrue):
        return [t.file for t in tasks], [], snapshot
    # The remainders are moved rows: on v3 they keep their lineage.
    file_schema = rewrite_schema(schema, table.metadata.format_version)
    ctx = WriteContext(table.io, table.location, file_schema, table.spec(), table.properties)
    properties = table.properties

    def rewrite(task: FileTask) -> tuple[DataFile, list[DataFile]] | None:
        spec = table.metadata.spec_for(task.spec_id)
        everything = read_file_rows(table.io, properties, task.file, task.delete_files, spec, schema, file_schema,
                                    task.data_sequence_number)
        kept = rows_not_matching(everything, bound, schema)
        if kept.num_rows == everything.num_rows and not task.delete_files:
            return None
        if kept.num_rows == 0:
            return task.file, []
        # Already on an engine thread: write this file's remainder inline.
        serial = lambda fn, items: [fn(i) for i in items]  # noqa: E731
        return task.file, write_data_files(ctx, conform_to_schema(kept, file_schema), serial)

    deleted: list[DataFile] = []
    rewritten: list[DataFile] = []
    for outcome in table.engine.map(rewrite, tasks):
        if outcome is not None:
            deleted.append(outcome[0])
            rewritten.extend(outcome[1])
    return deleted, rewritten, snapshot


def rows_not_matching(table: pa.Table, bound: BoundExpression, schema: Schema) -> pa.Table:
    """Rows for which the filter is not true (false or unknown), so NULL comparisons keep rows."""
    expr = to_arrow_expression(bound, schema)
    matches = ds.dataset(table).to_table(columns={"__m": expr}).column("__m")
    return table.filter(pc.invert(pc.fill_null(matches, False)))
