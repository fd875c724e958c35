"""Fragments: one data file with its delete files, the unit of a column merge.

A fragment is planned on the driver, pickled to a task, rewritten there with new or updated
columns (:mod:`tablestore.table.ops.column_merge`) and comes back as a new fragment that records
the one it replaces. :func:`commit_fragments` puts every rewritten fragment, and the schema
with the new columns, into one metadata commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from tablestore.engine.local import LocalEngine
from tablestore.engine.sources import dataframe_source
from tablestore.errors import ValidationError
from tablestore.io import FileIO
from tablestore.spec.expressions import Expression, bind, to_expression
from tablestore.spec.manifest import DataFile
from tablestore.spec.metadata import Snapshot, TableMetadata
from tablestore.spec.partitioning import PartitionSpec
from tablestore.spec.row_lineage import ROW_LINEAGE_IDS
from tablestore.spec.schema import PARQUET_FIELD_ID, Schema
from tablestore.spec.updates import (
    AddSchemaUpdate,
    AssertCurrentSchemaId,
    AssertLastAssignedFieldId,
    SetCurrentSchemaUpdate,
)
from tablestore.table.read.scan import plan_files
from tablestore.table.update.column_fragments import CommitFragments
from tablestore.table.update.transaction import FixedChange, Transaction, commit_snapshot

if TYPE_CHECKING:
    from tablestore.table import Table

# Key-value metadata of a rewritten file: the path of the data file it replaces (lineage).
LINEAGE_KEY = "tablestore.fragment.replaces"


@dataclass(frozen=True, eq=False)
class FragmentContext:
    """What every fragment of one plan shares: where to write, and the table state it read."""

    io: FileIO
    location: str
    properties: dict[str, str]
    table_schema: Schema
    last_column_id: int
    next_schema_id: int
    snapshot_id: int | None
    format_version: int = 2


@dataclass(frozen=True, eq=False)
class Fragment:
    """One data file and the delete files that apply to it.

    ``schema`` is the schema the file was written with. ``replaces`` is the id of the fragment
    this one was rewritten from while it waits to be committed (None for a fragment of the
    table as it is); ``lineage`` is the id a committed rewrite recorded in its file.
    """

    file: DataFile
    delete_files: tuple[DataFile, ...]
    spec: PartitionSpec
    schema: Schema
    context: FragmentContext
    replaces: str | None = None
    replaced_file: DataFile | None = None
    new_columns: tuple[str, ...] = field(default=())
    lineage: str | None = None
    #: The data sequence number of the file's manifest entry (its rows' inherited
    #: ``_last_updated_sequence_number`` on a v3 table).
    data_sequence_number: int | None = None

    @property
    def id(self) -> str:
        return self.file.file_path

    @property
    def partition(self) -> tuple[Any, ...]:
        return tuple(self.file.partition)

    @property
    def record_count(self) -> int:
        return self.file.record_count

    def to_arrow(self) -> pa.Table:
        """The fragment's live rows (deletes applied) in the schema it was planned or written in."""
        from tablestore.table.read.file_rows import read_file_rows

        schema = self.schema if self.replaces is not None else self.context.table_schema
        return read_file_rows(self.context.io, self.context.properties, self.file, self.delete_files, self.spec, schema)

    def merge_columns(
        self, source: Any, on: str | list[str], columns: list[str] | None = None, duplicates: str = "error",
    ) -> Fragment:
        """This fragment's rows left-joined with ``source`` on the key: new columns, NULL where
        no source row matches. Returns the rewritten fragment (uncommitted)."""
        from tablestore.table.ops.column_merge import MergePlan, rewrite_fragment

        plan = MergePlan.build(self.context, source_columns(source), on, columns, "merge", "keep", duplicates)
        out = rewrite_fragment(self, plan, plan.prepare_source(source), force=True)
        assert out is not None
        return out

    def update_columns(
        self, source: Any, on: str | list[str], columns: list[str], null_policy: str = "keep",
        duplicates: str = "error",
    ) -> Fragment:
        """Existing ``columns`` updated from ``source``: a present non-null value wins; an absent
        or NULL one keeps the old value (``null_policy="overwrite"``: a matched NULL overwrites)."""
        from tablestore.table.ops.column_merge import MergePlan, rewrite_fragment

        plan = MergePlan.build(self.context, source_columns(source), on, columns, "update", null_policy, duplicates)
        out = rewrite_fragment(self, plan, plan.prepare_source(source), force=True)
        assert out is not None
        return out

    def __repr__(self) -> str:
        lineage = f", replaces={self.replaces!r}" if self.replaces else ""
        return f"Fragment({self.id!r}, records={self.record_count}{lineage})"


def source_columns(source: Any) -> list[tuple[str, pa.DataType]]:
    """The column names and Arrow types of a merge source of any supported kind."""
    if isinstance(source, pa.Table | pa.RecordBatch | pa.RecordBatchReader):
        return [(f.name, f.type) for f in source.schema]
    adapted = dataframe_source(source)
    if adapted is not None:
        return [(f.name, f.type) for f in adapted.arrow_schema]
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover
        pd = None
    if pd is not None and isinstance(source, pd.DataFrame):
        return [(f.name, f.type) for f in pa.Schema.from_pandas(source, preserve_index=False)]
    raise ValidationError(
        f"a merge source must be a pyarrow Table or RecordBatchReader, a pandas or a Spark DataFrame; "
        f"got {type(source).__name__}"
    )


def _footer(io: FileIO, path: str) -> tuple[set[int], str | None]:
    """The top-level field ids of a data file, and the fragment it was rewritten from."""
    fs, local = io.filesystem_for(path)
    with fs.open_input_file(local) as f:
        physical = pq.read_schema(f)
    ids = {int(f.metadata[PARQUET_FIELD_ID]) for f in physical if f.metadata and PARQUET_FIELD_ID in f.metadata}
    ids -= ROW_LINEAGE_IDS  # a v3 rewrite's _row_id columns are metadata, not part of a table schema
    lineage = (physical.metadata or {}).get(LINEAGE_KEY.encode())
    return ids, lineage.decode() if lineage is not None else None


def written_schema(metadata: TableMetadata, ids: set[int]) -> Schema:
    """The table schema a file with these top-level field ids was written with: the newest
    schema with exactly those columns, else the newest that has them all, else the current."""
    schemas = sorted(metadata.schemas, key=lambda s: s.schema_id, reverse=True)
    for s in schemas:
        if {f.field_id for f in s.fields} == ids:
            return s
    for s in schemas:
        if ids <= {f.field_id for f in s.fields}:
            return s
    return metadata.schema()


def context_of(table: Table) -> FragmentContext:
    md = table.metadata
    snapshot = md.current_snapshot()
    return FragmentContext(
        io=table.io, location=table.location, properties=dict(md.properties), table_schema=md.schema(),
        last_column_id=md.last_column_id, next_schema_id=max(s.schema_id for s in md.schemas) + 1,
        snapshot_id=snapshot.snapshot_id if snapshot else None, format_version=md.format_version,
    )


def list_fragments(table: Table, filter: str | Expression | None = None) -> list[Fragment]:
    """The fragments of the current snapshot whose files may hold rows matching ``filter``.

    Planned on the driver's threads whatever the table's engine, as Iceberg plans: a Spark job
    per manifest list and per footer costs a worker round trip each for a few bytes of work.
    """
    engine = LocalEngine()
    md = table.metadata
    snapshot = md.current_snapshot()
    if snapshot is None:
        return []
    context = context_of(table)
    bound = bind(md.schema(), to_expression(filter))
    tasks = plan_files(table.io, md, snapshot, md.schema(), bound, engine)
    io = table.io
    footers = engine.map(lambda t: _footer(io, t.file.file_path), tasks)
    return [
        Fragment(t.file, tuple(t.delete_files), md.spec_for(t.spec_id), written_schema(md, ids), context,
                 lineage=lineage, data_sequence_number=t.data_sequence_number)
        for t, (ids, lineage) in zip(tasks, footers, strict=True)
    ]


def commit_fragments(
    table: Table, fragments: list[Fragment], snapshot_properties: dict[str, str] | None = None,
) -> Snapshot | None:
    """Commit rewritten fragments (and their new columns) in one snapshot; None if none."""
    fragments = list(fragments)
    if not fragments:
        return None
    first = fragments[0]
    for f in fragments:
        if f.replaces is None:
            raise ValidationError(
                f"fragment {f.id} is not a rewrite; commit the fragments merge_columns/update_columns return"
            )
        if f.context.snapshot_id != first.context.snapshot_id or f.schema.schema_id != first.schema.schema_id \
                or f.schema.fields != first.schema.fields or f.new_columns != first.new_columns:
            raise ValidationError(
                "the fragments come from different plans or merges; commit the fragments of one merge together"
            )
    if len({f.replaces for f in fragments}) != len(fragments):
        raise ValidationError("two fragments replace the same fragment; commit one rewrite per fragment")
    context = first.context
    producer = CommitFragments(
        table, [f.replaced_file for f in fragments if f.replaced_file is not None], [f.file for f in fragments],
        context.snapshot_id, context.table_schema.schema_id, context.last_column_id,
        first.schema if first.new_columns else None, snapshot_properties,
    )
    return commit_snapshot(producer)


def commit_schema_only(table: Table, context: FragmentContext, schema: Schema) -> None:
    """New columns that no fragment received: only the schema changes (every row reads NULL)."""
    Transaction(table).add_change(FixedChange(
        [AssertCurrentSchemaId(context.table_schema.schema_id), AssertLastAssignedFieldId(context.last_column_id)],
        [AddSchemaUpdate(schema, schema.highest_field_id()), SetCurrentSchemaUpdate(-1)],
    )).commit_transaction()
