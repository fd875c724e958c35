"""Changelog scans: the rows that changed between two snapshots, as data.

    >>> import pyarrow as pa, tablestore, tempfile
    >>> wh = tempfile.mkdtemp()
    >>> catalog = tablestore.load_catalog("local", type="sql", uri=f"sqlite:///{wh}/c.db", warehouse=wh)
    >>> catalog.create_namespace("db")
    >>> table = catalog.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("v", pa.string())]))
    >>> first = table.append(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    >>> n = table.update({"v": "'c'"}, "id = 2")
    >>> rows = table.changes(from_snapshot=first.snapshot_id, identifier_columns=["id"]).to_arrow()
    >>> rows.select(["id", "v", "_change_type"]).to_pylist()  # doctest: +NORMALIZE_WHITESPACE
    [{'id': 2, 'v': 'b', '_change_type': 'UPDATE_BEFORE'}, {'id': 2, 'v': 'c', '_change_type': 'UPDATE_AFTER'}]

The rows come in the ``to`` snapshot's schema with Iceberg's changelog columns
``_change_type`` (INSERT, DELETE, UPDATE_BEFORE, UPDATE_AFTER), ``_change_ordinal`` (the
snapshot's place in the range, from 0) and ``_commit_snapshot_id``. Planning reads only the
manifests of the snapshots in the range (:mod:`.changelog_plan`); each task reads one changed
data file with the delete files that applied to it before and after (position deletes,
deletion vectors, equality deletes); the rows are then cleaned as Spark's
``create_changelog_view`` does (:mod:`.changelog_rows`). Batches stream a snapshot at a time
(the whole range with ``net_changes``), so memory follows the largest snapshot's change, not
the table.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from tablestore.errors import ValidationError
from tablestore.io.fileio import FileIO
from tablestore.spec.expressions.expression_tree import AlwaysTrue
from tablestore.spec.manifests.manifest import DataFile, DataFileContent
from tablestore.spec.metadata.table_metadata import TableMetadata
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.schemas.name_mapping import DEFAULT_NAME_MAPPING
from tablestore.spec.schemas.row_lineage import ROW_ID
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import NestedField
from tablestore.table.read.changelog_plan import ChangePlan, ChangeTask, plan_changes
from tablestore.table.read.changelog_range import SnapshotRange
from tablestore.table.read.changelog_rows import (
    CHANGE_ORDINAL,
    CHANGE_TYPE,
    CHANGELOG_FIELDS,
    COMMIT_SNAPSHOT_ID,
    DELETE,
    INSERT,
    ROW_ID_COLUMN,
    compute_updates,
    net_changes,
    remove_carryovers,
)
from tablestore.table.read.data_files import read_position_deletes, read_task_table

if TYPE_CHECKING:
    import pandas as pd

    from tablestore.engine.protocols import Engine

__all__ = ["ChangePlan", "ChangeReader", "ChangeTask", "ChangelogScan", "changelog_arrow_schema"]


def changelog_arrow_schema(schema: Schema) -> pa.Schema:
    """A changelog's columns: the table schema's, then ``_change_type``, ``_change_ordinal``,
    ``_commit_snapshot_id``."""
    return pa.schema([*schema.as_arrow(), *CHANGELOG_FIELDS])


@dataclass(frozen=True)
class ChangeReader:
    """Reads change tasks into raw change rows; picklable, so engine tasks on other workers run it.

    ``read_schema`` is the output schema plus what the reader needs besides: ``_row_id`` on
    format v3, and columns of equality deletes that the output schema dropped.
    """

    io: FileIO
    schema: Schema
    read_schema: Schema
    specs: dict[int, PartitionSpec]
    name_mapping: str | None = None

    @property
    def raw_schema(self) -> pa.Schema:
        return pa.schema([*self.read_schema.as_arrow(), *CHANGELOG_FIELDS])

    def read(self, task: ChangeTask) -> pa.Table:
        """The rows of ``task``'s data file live before and not after (DELETE), then the reverse (INSERT)."""
        spec = self.specs[task.data_file.spec_id]
        rows = read_task_table(self.io, task.data_file, (), spec, self.read_schema, self.read_schema, AlwaysTrue(),
                               self.name_mapping, data_sequence_number=task.data_sequence_number)
        before = self.live(rows, task.data_file, task.before_deletes)
        after = self.live(rows, task.data_file, task.after_deletes)
        deleted = rows.filter(pa.array(before & ~after))
        inserted = rows.filter(pa.array(after & ~before))
        parts = [self._tagged(deleted, DELETE, task), self._tagged(inserted, INSERT, task)]
        return pa.concat_tables([p for p in parts if p.num_rows] or [self.raw_schema.empty_table()])

    def _tagged(self, rows: pa.Table, change: str, task: ChangeTask) -> pa.Table:
        n = rows.num_rows
        out = rows.cast(self.read_schema.as_arrow()) if not rows.schema.equals(self.read_schema.as_arrow()) else rows
        for f, values in zip(CHANGELOG_FIELDS, (pa.array([change] * n, pa.string()),
                                                pa.array(np.full(n, task.ordinal, np.int32)),
                                                pa.array(np.full(n, task.snapshot_id, np.int64))), strict=True):
            out = out.append_column(f, values)
        return out

    def live(self, rows: pa.Table, data_file: DataFile, deletes: tuple[DataFile, ...] | None) -> np.ndarray:
        """Which rows (in file order) the ``deletes`` leave live; none when the file is not live."""
        n = rows.num_rows
        if deletes is None:
            return np.zeros(n, dtype=bool)
        keep = np.ones(n, dtype=bool)
        for delete in deletes:
            if delete.content == DataFileContent.POSITION_DELETES:
                positions = read_position_deletes(self.io, delete, data_file.file_path)
                keep[positions[positions < n]] = False
            else:
                keep &= ~self.equality_matches(rows, delete)
        return keep

    def equality_matches(self, rows: pa.Table, delete: DataFile) -> np.ndarray:
        """The rows whose values of the delete's equality columns equal one of its rows (the
        scan's rule: :func:`~tablestore.table.read.data_files.equality_matches`)."""
        from tablestore.table.read.data_files import parquet_field_id, parquet_format

        ids = list(delete.equality_ids or [])
        names = [self.read_schema.find_field(i).name for i in ids if self.read_schema.has_field(i)]
        if not ids or len(names) != len(ids):
            return np.zeros(rows.num_rows, dtype=bool)
        fs, path = self.io.filesystem_for(delete.file_path)
        fragment = parquet_format().make_fragment(path, filesystem=fs)
        by_id = {parquet_field_id(f): f.name for f in fragment.physical_schema}
        deleted = fragment.to_table(columns=[by_id[i] for i in ids])
        keys = pa.table({f"k{n}": rows.column(name) for n, name in enumerate(names)}).append_column(
            "__row", pa.array(np.arange(rows.num_rows)))
        deleted = pa.table({f"k{n}": deleted.column(n).cast(keys.column(f"k{n}").type) for n in range(len(ids))})
        matched = keys.join(deleted, keys=[f"k{n}" for n in range(len(ids))], join_type="left semi")
        out = np.zeros(rows.num_rows, dtype=bool)
        out[matched.column("__row").to_numpy()] = True
        return out


def _read_schema(metadata: TableMetadata, schema: Schema, tasks: list[ChangeTask], lineage: bool) -> Schema:
    fields: list[NestedField] = list(schema.fields)
    have = {f.field_id for f in fields}
    for task in tasks:
        for d in (*(task.before_deletes or ()), *(task.after_deletes or ())):
            for fid in d.equality_ids or ():
                if fid in have:
                    continue
                for old in reversed(metadata.schemas):
                    if any(f.field_id == fid for f in old.fields):
                        fields.append(old.find_field(fid))
                        have.add(fid)
                        break
    if lineage and ROW_ID.field_id not in have:
        fields.append(ROW_ID)
    return Schema(tuple(fields), schema.schema_id)


class ChangelogScan:
    """A lazy changelog: plan with :meth:`plan_tasks`, read with :meth:`to_batches` and friends.

    Made by :meth:`tablestore.table.Table.changes`, which resolves the range and the key.
    ``key_columns`` pair updates (None: no pairing); ``_row_id`` as the key pairs by row lineage.
    """

    def __init__(self, io: FileIO, metadata: TableMetadata, engine: Engine, snapshot_range: SnapshotRange,
                 key_columns: list[str] | None = None, net: bool = False) -> None:
        self.io = io
        self.metadata = metadata
        self.engine = engine
        self.range = snapshot_range
        self.key_columns = key_columns
        self.net = net
        end = snapshot_range.end
        schema = metadata.schema()
        if end is not None and end.schema_id is not None:
            schema = metadata.schema_by_id(end.schema_id) or schema
        #: The ``to`` snapshot's schema: the rows' columns.
        self.schema = schema
        self.value_columns = [f.name for f in schema.fields]
        self._plan: ChangePlan | None = None

    @property
    def from_snapshot_id(self) -> int | None:
        return self.range.start.snapshot_id if self.range.start is not None else None

    @property
    def to_snapshot_id(self) -> int | None:
        return self.range.end.snapshot_id if self.range.end is not None else None

    @property
    def arrow_schema(self) -> pa.Schema:
        return changelog_arrow_schema(self.schema)

    def plan(self) -> ChangePlan:
        """The tasks, with the sequence numbers of the delete files they name."""
        if self._plan is None:
            self._plan = plan_changes(self.io, self.metadata, self.range.snapshots, self.engine)
        return self._plan

    def plan_tasks(self) -> list[ChangeTask]:
        """One task per data file whose live rows a snapshot of the range changed."""
        return self.plan().tasks

    def reader(self) -> ChangeReader:
        lineage = self.key_columns == [ROW_ID_COLUMN]
        return ChangeReader(self.io, self.schema, _read_schema(self.metadata, self.schema, self.plan_tasks(), lineage),
                            {s.spec_id: s for s in self.metadata.partition_specs},
                            self.metadata.properties.get(DEFAULT_NAME_MAPPING))

    def finish(self, raw: pa.Table) -> pa.Table:
        """Raw change rows of one snapshot (of the whole range with net changes) cleaned up:
        carry-overs removed, updates paired, or net changes; in the output columns."""
        out = self.clean(raw)
        if not self.key_columns:
            # DELETEs before INSERTs within a snapshot, as a reader applying them in order needs.
            types = out.column(CHANGE_TYPE).to_numpy(zero_copy_only=False)
            ordinals = out.column(CHANGE_ORDINAL).to_numpy(zero_copy_only=False)
            out = out.take(pa.array(np.lexsort((types != DELETE, ordinals))))
        return out.select([*self.value_columns, CHANGE_TYPE, CHANGE_ORDINAL, COMMIT_SNAPSHOT_ID]).cast(
            self.arrow_schema)

    def clean(self, raw: pa.Table) -> pa.Table:
        """Carry-overs removed and updates paired, or net changes, in the raw columns. Works on
        any set of rows that holds every row of each group it decides on (a snapshot, or a
        partition of rows hashed by their values or key, as the SQL procedure's Spark tasks)."""
        if self.net:
            # Carry-overs go first, so a row's surviving change keeps the snapshot that made it
            # (Java's net iterator may keep a carried-over copy's later ordinal instead).
            out = net_changes(remove_carryovers(raw, self.value_columns), self.value_columns, self.key_columns)
        elif self.key_columns:
            out = compute_updates(raw, self.key_columns, self.value_columns)
        else:
            out = remove_carryovers(raw, self.value_columns)
        return out

    def raw_tables(self) -> Iterator[tuple[bool, list[pa.Table]]]:
        """The raw change rows: per snapshot (the whole range with net changes) a flag and tables.
        A snapshot whose tasks only add files (only INSERTs) or only remove rows (only DELETEs)
        has nothing to cancel or pair: its rows come one task at a time, flagged True, so an
        initial load of any size streams; other snapshots come whole, to be cleaned."""
        reader = self.reader()
        tasks = self.plan_tasks()
        kinds: dict[int, set[str]] = {}
        for task in tasks:
            kinds.setdefault(task.ordinal, set()).add(task.kind)
        pending: list[pa.Table] = []
        ordinal: int | None = None
        for task, rows in zip(tasks, self.engine.imap(reader.read, tasks), strict=True):
            if ordinal is not None and task.ordinal != ordinal and not self.net and pending:
                yield False, pending
                pending = []
            ordinal = task.ordinal
            if not rows.num_rows:
                continue
            if not self.net and kinds[task.ordinal] in ({"added"}, {"removed"}):
                yield True, [rows]
            else:
                pending.append(rows)
        if pending:
            yield False, pending

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The changelog's rows as record batches, in snapshot order."""
        for alone, tables in self.raw_tables():
            rows = pa.concat_tables(tables)
            if alone:
                yield from rows.select(self.arrow_schema.names).cast(self.arrow_schema).to_batches()
            else:
                yield from self.finish(rows).to_batches()

    def to_arrow_batch_reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.arrow_schema, self.to_batches())

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_batches(list(self.to_batches()), schema=self.arrow_schema)

    def to_pandas(self) -> pd.DataFrame:
        return self.to_arrow().to_pandas()


def key_columns_for(schema: Schema, format_version: int, identifier_columns: list[str] | None,
                    compute_updates: bool | None) -> list[str] | None:
    """The columns that pair updates: the given ones, else the schema's identifier fields, else on
    format v3 ``_row_id``; None when updates are not computed. Refuses columns the schema lacks."""
    if identifier_columns is not None:
        missing = [c for c in identifier_columns if schema.find_field_id(c) is None]
        if missing:
            raise ValidationError(
                f"identifier column(s) {', '.join(missing)} are not columns of the changelog's schema "
                f"(its columns: {', '.join(schema.column_names)}); name columns of the table, or leave "
                "identifier_columns out to use the table's identifier fields"
            )
        nested = [c for c in identifier_columns if schema.find_field(c).field_id not in
                  {f.field_id for f in schema.fields}]
        if nested:
            raise ValidationError(f"identifier column(s) {', '.join(nested)} are nested fields; give top-level columns")
    if compute_updates is False:
        return None
    if identifier_columns:
        return list(identifier_columns)
    if schema.identifier_field_ids:
        return [schema.find_field(i).name for i in schema.identifier_field_ids]
    if format_version >= 3:
        return [ROW_ID_COLUMN]
    if compute_updates:
        raise ValidationError(
            "cannot compute updates: the table has no identifier fields and none were given; give "
            "identifier_columns=[...] (or set the table's identifier fields), or compute_updates=False"
        )
    return None
