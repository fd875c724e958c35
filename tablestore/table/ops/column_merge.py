"""Column merges: add columns to (merge) or update columns of a table's rows from a keyed
source, one fragment at a time, committed once.

The rule of a partial update: a present non-null new value wins; an absent or NULL new value
keeps the old one (``null_policy="overwrite"`` is Lance's rule: a matched NULL overwrites).
A fragment no source row matches is left as it is: its file lacks the new columns' field
ids, so they read NULL, as the merge asks.

Each task gets only the source rows that can match its fragment: grouped by a binary search
over the fragments' key ranges when they are disjoint, else sorted by the first key and sliced
by the fragment's key bounds (:meth:`MergePlan.slices`), or, for a Spark DataFrame source on
the Spark engine, staged per fragment or tagged in the JVM and shuffled to the task that owns
it (:mod:`tablestore.spark.tasks.column_merge_tasks`).

A fragment (:class:`Fragment`) is one data file with its delete files. It is planned on the
driver, pickled to a task, rewritten there with new or updated columns and comes back as a new
fragment that records the one it replaces. :func:`commit_fragments` puts every rewritten
fragment, and the schema with the new columns, into one metadata commit.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tablestore.engine.local import LocalEngine
from tablestore.engine.protocols import FragmentRewriter
from tablestore.engine.sources import dataframe_source
from tablestore.errors import SchemaError, ValidationError
from tablestore.io.fileio import FileIO
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.expression_parser import to_expression
from tablestore.spec.expressions.expression_tree import Expression
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.metadata.table_metadata import Snapshot, TableMetadata
from tablestore.spec.metadata.update_models import (
    AddSchemaUpdate,
    AssertCurrentSchemaId,
    AssertLastAssignedFieldId,
    SetCurrentSchemaUpdate,
)
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.row_lineage import ROW_LINEAGE_FIELDS, ROW_LINEAGE_IDS, mark_updated
from tablestore.spec.schemas.schema import PARQUET_FIELD_ID, IdCounter, Schema, arrow_type_to_iceberg, type_to_arrow
from tablestore.spec.schemas.types import IntegerType, LongType, NestedField
from tablestore.table.read.file_rows import read_file_rows, rewrite_schema
from tablestore.table.read.scan import plan_files
from tablestore.table.update.column_fragments import CommitFragments
from tablestore.table.update.identity import CommitIdentity
from tablestore.table.update.transaction import FixedChange, Transaction, commit_snapshot
from tablestore.table.write.conform import conform_to_schema, downcast_ns_requested, to_arrow_table
from tablestore.table.write.data_files import PartitionSlice, WriteContext, write_partition

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
        schema = self.schema if self.replaces is not None else self.context.table_schema
        return read_file_rows(self.context.io, self.context.properties, self.file, self.delete_files, self.spec, schema)

    def merge_columns(
        self, source: Any, on: str | list[str], columns: list[str] | None = None, duplicates: str = "error",
    ) -> Fragment:
        """This fragment's rows left-joined with ``source`` on the key: new columns, NULL where
        no source row matches. Returns the rewritten fragment (uncommitted)."""
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
    snapshot = table.current_snapshot()  # the head of the table's branch
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
    snapshot = table.current_snapshot()  # the head of the table's branch
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
    commit_id: str | CommitIdentity | None = None,
) -> Snapshot | None:
    """Commit rewritten fragments (and their new columns) in one snapshot; None if none. The
    commit owns the fragments' files: deleted only when it is known not to have landed."""
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
    return commit_snapshot(producer, commit_id)


def commit_schema_only(table: Table, context: FragmentContext, schema: Schema) -> None:
    """New columns that no fragment received: only the schema changes (every row reads NULL)."""
    Transaction(table).add_change(FixedChange(
        [AssertCurrentSchemaId(current_schema_id=context.table_schema.schema_id),
         AssertLastAssignedFieldId(last_assigned_field_id=context.last_column_id)],
        [AddSchemaUpdate(schema_=schema, last_column_id=schema.highest_field_id()),
         SetCurrentSchemaUpdate(schema_id=-1)],
    )).commit_transaction()


MODES = ("merge", "update")
NULL_POLICIES = ("keep", "overwrite")
DUPLICATES = ("error", "first", "last")
# A rewritten fragment stays one file, whatever the table's target file size.
_ONE_FILE = str(2**62)


def _names(value: str | list[str] | tuple[str, ...] | None, what: str) -> list[str] | None:
    if value is None:
        return None
    names = [v.strip() for v in value.split(",")] if isinstance(value, str) else [str(v).strip() for v in value]
    if not names or any(not n for n in names):
        raise ValidationError(f"{what} must name at least one column, without empty names; got {value!r}")
    if len(set(names)) != len(names):
        raise ValidationError(f"{what} names a column twice: {value!r}")
    return names


@dataclass(frozen=True)
class MergePlan:
    """What every task of one merge applies: keys, columns, rules and the output schema."""

    keys: tuple[str, ...]
    columns: tuple[str, ...]
    mode: str
    null_policy: str
    duplicates: str
    schema: Schema
    new_columns: tuple[str, ...]

    @staticmethod
    def build(
        context: FragmentContext,
        source: list[tuple[str, pa.DataType]],
        on: str | list[str],
        columns: str | list[str] | None,
        mode: str,
        null_policy: str = "keep",
        duplicates: str = "error",
    ) -> MergePlan:
        if mode not in MODES:
            raise ValidationError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        if null_policy not in NULL_POLICIES:
            raise ValidationError(f"null_policy must be 'keep' or 'overwrite'; got {null_policy!r}")
        if duplicates not in DUPLICATES:
            raise ValidationError(f"duplicates must be 'error', 'first' or 'last'; got {duplicates!r}")
        table = context.table_schema
        source_types = dict(source)
        keys = _names(on, "on")
        if keys is None:
            raise ValidationError("on must name the key column(s)")
        for k in keys:
            if table.find_field_id(k) is None or table.parent_id(table.find_field(k).field_id) is not None:
                raise SchemaError(f"the key column {k!r} is not a top-level column of the table; name one in `on`")
            if k not in source_types:
                raise SchemaError(f"the source has no key column {k!r}; its columns are {', '.join(source_types)}")
        wanted = _names(columns, "columns")
        if wanted is None:
            if mode == "update":
                raise ValidationError("update_columns needs the columns to update; pass columns=[...]")
            wanted = [name for name, _ in source if name not in keys]
        if not wanted:
            raise ValidationError("the source has no column besides the key; nothing to merge")
        for c in wanted:
            if c in keys:
                raise ValidationError(f"{c!r} is a key column; it cannot be merged or updated")
            if c not in source_types:
                raise SchemaError(f"the source has no column {c!r}; its columns are {', '.join(source_types)}")
            exists = table.find_field_id(c) is not None
            if mode == "merge" and exists:
                raise SchemaError(f"the table already has a column {c!r}; use update_columns to change its values")
            if mode == "update" and not exists:
                raise SchemaError(f"the table has no column {c!r}; use merge_columns to add it")
        schema = table
        if mode == "merge":
            counter = IdCounter(context.last_column_id)
            added = []
            for c in wanted:
                fid = counter()
                column_type = arrow_type_to_iceberg(source_types[c], counter, context.format_version)
                added.append(NestedField(fid, c, column_type, False))
            schema = Schema((*table.fields, *added), context.next_schema_id, table.identifier_field_ids)
        return MergePlan(tuple(keys), tuple(wanted), mode, null_policy, duplicates, schema,
                         tuple(wanted) if mode == "merge" else ())

    # -- the source --------------------------------------------------------------------------
    def prepare_source(self, source: Any, unique: bool = True) -> pa.Table:
        """The source as Arrow: keys and columns in the table's types, keys unique (unless
        ``unique`` is off: :meth:`slices` checks them per fragment)."""
        adapted = dataframe_source(source)
        if adapted is not None:  # another library's DataFrame: only the plan's columns travel
            source = adapted.to_arrow([*self.keys, *self.columns])
        return self.prepare_arrow(to_arrow_table(source), unique)

    def prepare_arrow(self, data: pa.Table, unique: bool = True) -> pa.Table:
        arrays = []
        for name in (*self.keys, *self.columns):
            target = type_to_arrow(self.schema.find_field(name).field_type)
            column = data.column(name)
            try:
                arrays.append(column if column.type.equals(target) else column.cast(target))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise SchemaError(f"the source column {name!r} ({column.type}) cannot be read as {target}: {e}") \
                    from None
        data = pa.Table.from_arrays(arrays, names=[*self.keys, *self.columns])
        return unique_keys(data, list(self.keys), self.duplicates) if unique else data

    def key_bounds(self, fragment: Fragment) -> tuple[int | None, int | None]:
        """The fragment's bounds of the first key (integer keys only; None when unknown)."""
        f = self.schema.find_field(self.keys[0])
        if not isinstance(f.field_type, IntegerType | LongType):
            return None, None
        lower = (fragment.file.lower_bounds or {}).get(f.field_id)
        upper = (fragment.file.upper_bounds or {}).get(f.field_id)
        return (
            conversions.from_bytes(f.field_type, lower) if lower is not None else None,
            conversions.from_bytes(f.field_type, upper) if upper is not None else None,
        )

    def slices(self, source: pa.Table, fragments: list[Fragment]) -> list[tuple[Fragment, SourceRows]]:
        """Each fragment with the source rows inside its key bounds (none: left out).

        ``source`` has the plan's columns in the table's types (``prepare_source(unique=False)``).
        Fragments with known, disjoint integer key ranges (a table written in key order): each
        row's fragment is found by a binary search over the ranges and the rows are grouped by
        a stable sort of those positions; the fragment's task takes its rows and checks their
        keys, so the serial part is two passes over the keys, not a sort of the source. A key
        is in at most one range, so a duplicate is found by the one task it reaches. Otherwise
        the source is sorted and sliced by each fragment's bounds, and each task checks its
        slice. Either way keys outside every range match nothing and are dropped unchecked, as
        on Spark; a source with keys of another type is checked whole, once.
        """
        if source.num_rows == 0:
            return []
        first = self.schema.find_field(self.keys[0])
        if not isinstance(first.field_type, IntegerType | LongType):
            checked = unique_keys(source, list(self.keys), self.duplicates)
            return [(f, SourceRows(checked)) for f in fragments] if checked.num_rows else []
        bounds = [self.key_bounds(f) for f in fragments]
        order = disjoint_order(bounds)
        keys = source.column(self.keys[0])
        if order is not None:
            lows = np.array([bounds[i][0] for i in order], dtype=np.int64)
            highs = np.array([bounds[i][1] for i in order], dtype=np.int64)
            rows, pos = rows_by_range(keys, lows, highs)
            if not len(rows):
                return []
            starts = np.flatnonzero(np.r_[True, pos[1:] != pos[:-1]])
            ends = np.r_[starts[1:], len(pos)]
            return [(fragments[order[int(pos[a])]], SourceRows(source, rows[a:b], checked=False))
                    for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
        source = source.filter(pc.is_valid(source.column(self.keys[0])))
        source = source.sort_by(self.keys[0])  # stable: equal keys stay in the source's order
        sorted_keys = source.column(self.keys[0]).to_numpy()
        out = []
        for fragment, (lo, hi) in zip(fragments, bounds, strict=True):
            start = 0 if lo is None else int(np.searchsorted(sorted_keys, lo, "left"))
            end = len(sorted_keys) if hi is None else int(np.searchsorted(sorted_keys, hi, "right"))
            if end > start:
                # A key's rows are adjacent, so all in any slice that holds one of them.
                out.append((fragment, SourceRows(source.slice(start, end - start), checked=False)))
        return out


@dataclass(frozen=True)
class SourceRows:
    """The source rows of one fragment: a table, or rows of it the fragment's task takes (and
    whose keys it checks) itself, so that work runs in parallel."""

    data: pa.Table
    indices: np.ndarray | None = None
    checked: bool = True

    def table(self, plan: MergePlan) -> pa.Table:
        data = self.data if self.indices is None else self.data.take(self.indices)
        return data if self.checked else unique_keys(data, list(plan.keys), plan.duplicates)

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent to another process (the Spark engine's map over an Arrow source): only this
        # fragment's rows travel, not the whole source they index.
        data = self.data if self.indices is None else self.data.take(self.indices)
        return SourceRows, (data, None, self.checked)


def rows_by_range(
    keys: pa.ChunkedArray | pa.Array, lows: np.ndarray, highs: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The rows whose key lies in one of the sorted, disjoint ranges [lows[i], highs[i]], with
    that range's position ``i``, ordered by position and, within one, by row (a stable sort:
    the source's order, which duplicates="first"/"last" resolve by). NULL keys are in none."""
    values = pc.fill_null(keys, 0).cast(pa.int64()).to_numpy()
    pos = np.searchsorted(lows, values, "right") - 1
    inside = pos >= 0
    pos = np.maximum(pos, 0)
    inside &= values <= highs[pos]
    if keys.null_count:
        inside &= pc.is_valid(keys).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(inside)
    pos = pos[rows].astype(np.int32)
    by_pos = np.argsort(pos, kind="stable")
    return rows[by_pos], pos[by_pos]


def disjoint_order(bounds: list[tuple[int | None, int | None]]) -> list[int] | None:
    """Fragment indices in key order when every range is known and no two overlap, else None."""
    if any(lo is None or hi is None for lo, hi in bounds):
        return None
    known = [(int(lo), int(hi)) for lo, hi in bounds]  # type: ignore[arg-type]
    order = sorted(range(len(known)), key=lambda i: known[i][0])
    for a, b in itertools.pairwise(order):
        if known[a][1] >= known[b][0]:
            return None
    return order


def unique_keys(data: pa.Table, keys: list[str], duplicates: str) -> pa.Table:
    """Rows with unique non-null keys: an error naming a duplicate, or its first/last row."""
    valid = None
    for k in keys:
        v = pc.is_valid(data.column(k))
        valid = v if valid is None else pc.and_(valid, v)
    if valid is not None and data.num_rows and not pc.all(valid).as_py():
        data = data.filter(valid)  # a NULL key matches no row (SQL equality)
    if data.num_rows < 2:
        return data
    if duplicates == "error":
        if len(keys) == 1 and pa.types.is_integer(data.column(keys[0]).type):
            # One integer key: a sort finds a duplicate in a fraction of a hash aggregation's
            # time, whose fixed cost dominates the small per-fragment sources of a Spark task.
            values = np.sort(data.column(keys[0]).to_numpy())
            if not (values[1:] == values[:-1]).any():
                return data
        groups = data.select(keys).group_by(keys).aggregate([([], "count_all")])
        if groups.num_rows == data.num_rows:
            return data
        dup = groups.filter(pc.greater(groups.column("count_all"), 1)).slice(0, 1).to_pylist()[0]
        shown = ", ".join(f"{k}={dup[k]!r}" for k in keys)
        raise ValidationError(
            f"the source has {dup['count_all']} rows with the key {shown}; make the keys unique or pass "
            "duplicates='first' or 'last'"
        )
    seq = pa.array(np.arange(data.num_rows, dtype=np.int64))
    with_seq = data.select(keys).append_column("__seq", seq)
    agg = "min" if duplicates == "first" else "max"
    groups = with_seq.group_by(keys, use_threads=False).aggregate([("__seq", agg)])
    if groups.num_rows == data.num_rows:
        return data
    return data.take(np.sort(groups.column(f"__seq_{agg}").to_numpy()))


def match_indices(rows: pa.Table, source: pa.Table, keys: list[str]) -> pa.Array:
    """For each row, the index of its source row with the same key (NULL where none)."""
    if len(keys) == 1:
        return pc.index_in(rows.column(keys[0]), value_set=source.column(keys[0]).combine_chunks())
    left = rows.select(keys).append_column("__row", pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    right = source.select(keys).append_column("__src", pa.array(np.arange(source.num_rows, dtype=np.int64)))
    joined = left.join(right, keys=keys, join_type="inner", use_threads=False)
    out = np.full(rows.num_rows, -1, dtype=np.int64)
    out[joined.column("__row").to_numpy()] = joined.column("__src").to_numpy()
    return pa.array(out, mask=out < 0)


def merged_rows(rows: pa.Table, source: pa.Table, plan: MergePlan, index: pa.Array) -> pa.Table:
    """The fragment's rows with the plan's columns added or updated from the matched rows."""
    matched = pc.is_valid(index)
    arrays: dict[str, Any] = {name: rows.column(name) for name in rows.column_names}
    for c in plan.columns:
        new = source.column(c).take(index)
        if plan.mode == "merge":
            arrays[c] = new
            continue
        old = rows.column(c)
        if plan.null_policy == "keep":
            arrays[c] = pc.if_else(pc.is_valid(new), new, old)
        else:
            arrays[c] = pc.if_else(matched, new, old)
    return pa.table({f.name: arrays[f.name] for f in plan.schema.fields if f.name in arrays})


def rewrite_fragment(fragment: Fragment, plan: MergePlan, source: pa.Table, force: bool = False,
                     write_uuid: str | None = None) -> Fragment | None:
    """Merge one fragment with its source rows and write it as one new file.

    Returns the new fragment, or None when no source row matched (and ``force`` is off): the
    fragment then needs no rewrite. ``write_uuid`` goes into the file's name (unique per call):
    a Spark job whose tasks name their files by its write id can find them when it fails.
    """
    context = fragment.context
    table_schema = context.table_schema
    # On v3 the rows keep their _row_id; the rows a source row matched were modified, so their
    # _last_updated_sequence_number is nulled (it inherits the merge's sequence number).
    read_schema = rewrite_schema(table_schema, context.format_version)
    write_schema = rewrite_schema(plan.schema, context.format_version)
    rows = read_file_rows(context.io, context.properties, fragment.file, fragment.delete_files, fragment.spec,
                          table_schema, read_schema, fragment.data_sequence_number)
    index = match_indices(rows, source, list(plan.keys))
    if not force and index.null_count == len(index):
        return None
    if rows.num_rows == 0:
        raise ValidationError(f"fragment {fragment.id} has no live rows; there is nothing to merge into")
    merged = merged_rows(rows, source, plan, index)
    if write_schema is not plan.schema:
        lineage = mark_updated(rows.select([f.name for f in ROW_LINEAGE_FIELDS]), pc.is_valid(index))
        for name in lineage.column_names:
            merged = merged.append_column(name, lineage.column(name))
    out = conform_to_schema(merged, write_schema, downcast_ns_requested(context.properties))
    out = out.replace_schema_metadata({LINEAGE_KEY: fragment.id})
    ctx = WriteContext(context.io, context.location, write_schema, fragment.spec,
                       {**context.properties, "write.target-file-size-bytes": _ONE_FILE})
    if write_uuid:
        ctx = replace(ctx, write_uuid=write_uuid)
    (written,) = write_partition(ctx, PartitionSlice(fragment.partition, out))
    return replace(fragment, file=written, delete_files=(), schema=plan.schema, replaces=fragment.id,
                   replaced_file=fragment.file, new_columns=plan.new_columns, lineage=fragment.id)


# -- a whole table -------------------------------------------------------------------------------


def merge_table(
    table: Table,
    source: Any,
    on: str | list[str],
    columns: str | list[str] | None,
    mode: str,
    null_policy: str = "keep",
    duplicates: str = "error",
    filter: str | Expression | None = None,
    snapshot_properties: dict[str, str] | None = None,
    commit_id: str | CommitIdentity | None = None,
) -> Snapshot | None:
    """Merge or update columns of every fragment (matching ``filter``) in one commit.

    Returns the new snapshot, or None when no fragment changed (new columns are still added to
    the schema then, reading NULL everywhere).
    """
    earlier = table.applied_commit(commit_id)
    if earlier is not None:
        return earlier  # a retry of a merge that landed: its columns exist now, merge nothing again
    fragments = list_fragments(table, filter)
    context = fragments[0].context if fragments else context_of(table)
    plan = MergePlan.build(context, source_columns(source), on, columns, mode, null_policy, duplicates)
    rewritten = run_plan(table, plan, fragments, source)
    props = {"column-merge": plan.mode, **(snapshot_properties or {})}
    if not rewritten:
        if plan.new_columns:
            commit_schema_only(table, context, plan.schema)
        return None
    return commit_fragments(table, rewritten, props, commit_id)


def rewrite_fragments(
    table: Table,
    fragments: list[Fragment],
    source: Any,
    on: str | list[str],
    columns: str | list[str] | None,
    mode: str,
    null_policy: str = "keep",
    duplicates: str = "error",
) -> list[Fragment]:
    """Rewrite planned fragments on the table's engine without committing them (for
    :meth:`Table.commit_fragments` later); fragments no source row matches are left out."""
    if not fragments:
        return []
    plan = MergePlan.build(fragments[0].context, source_columns(source), on, columns, mode, null_policy, duplicates)
    return run_plan(table, plan, fragments, source)


def run_plan(table: Table, plan: MergePlan, fragments: list[Fragment], source: Any) -> list[Fragment]:
    """One task per fragment with source rows: the engine's own merge when it takes the source
    (the Spark engine, for a Spark DataFrame), else the engine's map over (fragment, source
    slice) pairs."""
    engine = table.engine
    if isinstance(engine, FragmentRewriter) and fragments:
        rewritten = engine.rewrite_fragments(source, fragments, plan)
        if rewritten is not None:
            return rewritten
    items = plan.slices(plan.prepare_source(source, unique=False), fragments)
    results = engine.map(lambda item: rewrite_fragment(item[0], plan, item[1].table(plan)), items)
    return [r for r in results if r is not None]


__all__ = ["MergePlan", "match_indices", "merge_table", "rewrite_fragment", "rewrite_fragments", "unique_keys"]
