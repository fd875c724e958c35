"""Metadata tables: a table's snapshots, history, files, manifests, partitions, ... as Arrow.

Each method returns a ``pyarrow.Table`` with the columns of Java Iceberg's metadata table of the
same name, in the same order and with the Arrow equivalents of the types Spark shows
(``SELECT * FROM db.t.files``), so tools and tests can use either interchangeably:

    >>> import pyarrow as pa, tablestore, tempfile
    >>> wh = tempfile.mkdtemp()
    >>> catalog = tablestore.load_catalog("local", type="sql", uri=f"sqlite:///{wh}/catalog.db", warehouse=wh)
    >>> catalog.create_namespace("db")
    >>> table = catalog.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
    >>> _ = table.append(pa.table({"id": [1, 2, 3]}))
    >>> table.inspect.snapshots().column("operation").to_pylist()
    ['append']
    >>> table.inspect.files().column("record_count").to_pylist()
    [3]

Type mapping (Spark → Arrow): int → int32, bigint → int64, timestamp → timestamp[us, UTC],
timestamp_ntz → timestamp[us], date → date32, binary → binary, array → list, map → map.
Partition values and metric bounds are external values of their Iceberg type (``day`` gives a
date, ``hour`` an int as Java types it, identity on a timestamp a timestamp). UUIDs are strings,
as Spark shows them.

Beyond Java: :meth:`TableInspector.schemas` lists the schema versions (Java has no such table).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from tablestore.spec.manifests.manifest import (
    DataFile,
    DataFileContent,
    FieldSummary,
    ManifestContent,
    ManifestEntry,
    ManifestFile,
    inherit_first_row_ids,
    read_manifest,
    read_manifest_list,
)
from tablestore.spec.metadata.table_metadata import MetadataLogEntry, Snapshot, TableMetadata
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.partitioning.transforms import Transform
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.schema import Schema, primitive_to_arrow
from tablestore.spec.schemas.types import IcebergType, NestedField, StructType, UUIDType, sql_type_name
from tablestore.table.read.deletion_vectors import is_deletion_vector, read_deletion_vector, referenced_data_file
from tablestore.table.read.scan import select_snapshot

if TYPE_CHECKING:
    from tablestore.table import Table

__all__ = ["TableInspector"]

# Spark's TimestampType is an instant with microsecond precision.
_TIMESTAMP = pa.timestamp("us", tz="UTC")
_INT_LONG_MAP = pa.map_(pa.int32(), pa.int64())
_INT_BINARY_MAP = pa.map_(pa.int32(), pa.binary())


# -- values and types --------------------------------------------------------------------------


def _arrow_type(t: IcebergType) -> pa.DataType:
    """The Arrow type of a partition value or metric bound, as Spark shows it."""
    if isinstance(t, UUIDType):
        return pa.string()  # Spark has no UUID type; Iceberg's Spark integration uses strings
    if isinstance(t, StructType):
        return pa.struct([pa.field(f.name, _arrow_type(f.field_type)) for f in t.fields])
    return primitive_to_arrow(t)


def _external(t: IcebergType, value: Any) -> Any:
    """An internal value (days, micros, ...) as the Python value Arrow takes for ``_arrow_type(t)``."""
    if value is None:
        return None
    if isinstance(t, UUIDType):
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(bytes=bytes(value)))
    return conversions.to_python(t, value)


def _micros(ms: int | None) -> int | None:
    return None if ms is None else ms * 1000


def _items(mapping: dict[int, Any] | None) -> list[tuple[int, Any]] | None:
    return None if mapping is None else list(mapping.items())


def _table(fields: list[pa.Field], rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


def _f(name: str, t: pa.DataType) -> pa.Field:
    return pa.field(name, t)


# -- the unified partition type ----------------------------------------------------------------


class _PartitionType:
    """Java's ``Partitioning.partitionType(table)``: the partition fields of every spec, by field id.

    Metadata tables show one partition struct for files of all specs. A field keeps the name it
    has in the newest spec that has it; fields are ordered by field id; a file's tuple is
    coerced into the struct by field id, with null for fields its spec lacks.
    """

    def __init__(self, metadata: TableMetadata) -> None:
        # The current schema last, so that its types win when a source column was promoted.
        others = [s for s in metadata.schemas if s.schema_id != metadata.current_schema_id]
        self.schemas = [*others, metadata.schema()]
        self.spec_types: dict[int, StructType] = {
            spec.spec_id: spec.partition_type_for(self.schemas) for spec in metadata.partition_specs
        }
        by_id: dict[int, NestedField] = {}
        for spec_id in sorted(self.spec_types, reverse=True):
            for f in self.spec_types[spec_id].fields:
                by_id.setdefault(f.field_id, f)
        self.struct = StructType(*(by_id[i] for i in sorted(by_id)))
        self.arrow = _arrow_type(self.struct)
        position = {f.field_id: i for i, f in enumerate(self.struct.fields)}
        self._positions = {
            spec_id: [position[f.field_id] for f in t.fields] for spec_id, t in self.spec_types.items()
        }

    @property
    def empty(self) -> bool:
        # Java drops the partition column rather than show an empty struct.
        return not self.struct.fields

    def key(self, spec_id: int, values: tuple[Any, ...]) -> tuple[Any, ...]:
        """The file's partition tuple in the unified struct (internal values)."""
        out: list[Any] = [None] * len(self.struct.fields)
        for pos, value in zip(self._positions.get(spec_id, []), values, strict=False):
            out[pos] = value
        return tuple(out)

    def to_dict(self, key: tuple[Any, ...]) -> dict[str, Any]:
        return {f.name: _external(f.field_type, v) for f, v in zip(self.struct.fields, key, strict=True)}


# -- readable metrics --------------------------------------------------------------------------

_METRIC_COUNTS = ("column_size", "value_count", "null_value_count", "nan_value_count")


class _ReadableMetrics:
    """Java's ``readable_metrics``: per primitive column (by full name, sorted), its metrics with
    the bounds decoded to the column's type, from the current schema."""

    def __init__(self, schema: Schema) -> None:
        self.columns = sorted(
            ((name, f) for name, f in schema.all_fields() if f.field_type.is_primitive), key=lambda c: c[0]
        )
        self.arrow = pa.struct([
            pa.field(name, pa.struct(
                [pa.field(c, pa.int64()) for c in _METRIC_COUNTS]
                + [pa.field("lower_bound", _arrow_type(f.field_type)),
                   pa.field("upper_bound", _arrow_type(f.field_type))]
            ))
            for name, f in self.columns
        ])

    def row(self, df: DataFile) -> dict[str, Any]:
        maps = (df.column_sizes, df.value_counts, df.null_value_counts, df.nan_value_counts)
        out = {}
        for name, f in self.columns:
            metrics: dict[str, Any] = {c: (m or {}).get(f.field_id) for c, m in zip(_METRIC_COUNTS, maps, strict=True)}
            for key, bounds in (("lower_bound", df.lower_bounds), ("upper_bound", df.upper_bounds)):
                raw = (bounds or {}).get(f.field_id)
                value = None if raw is None else conversions.from_bytes(f.field_type, raw)
                metrics[key] = _external(f.field_type, value)
            out[name] = metrics
        return out


# -- data file rows ----------------------------------------------------------------------------


def _data_file_fields(partitions: _PartitionType) -> list[pa.Field]:
    head = [_f("content", pa.int32()), _f("file_path", pa.string()), _f("file_format", pa.string()),
            _f("spec_id", pa.int32())]
    if not partitions.empty:
        head.append(_f("partition", partitions.arrow))
    return [
        *head,
        _f("record_count", pa.int64()),
        _f("file_size_in_bytes", pa.int64()),
        _f("column_sizes", _INT_LONG_MAP),
        _f("value_counts", _INT_LONG_MAP),
        _f("null_value_counts", _INT_LONG_MAP),
        _f("nan_value_counts", _INT_LONG_MAP),
        _f("lower_bounds", _INT_BINARY_MAP),
        _f("upper_bounds", _INT_BINARY_MAP),
        _f("key_metadata", pa.binary()),
        _f("split_offsets", pa.list_(pa.int64())),
        _f("equality_ids", pa.list_(pa.int32())),
        _f("sort_order_id", pa.int32()),
        # Format v3 columns, which Java 1.10 shows for every table (null before v3).
        _f("first_row_id", pa.int64()),
        _f("referenced_data_file", pa.string()),
        _f("content_offset", pa.int64()),
        _f("content_size_in_bytes", pa.int64()),
    ]


def _data_file_row(df: DataFile, partitions: _PartitionType) -> dict[str, Any]:
    row: dict[str, Any] = {
        "content": int(df.content),
        "file_path": df.file_path,
        "file_format": str(df.file_format.value),
        "spec_id": df.spec_id,
    }
    if not partitions.empty:
        row["partition"] = partitions.to_dict(partitions.key(df.spec_id, tuple(df.partition)))
    row.update({
        "record_count": df.record_count,
        "file_size_in_bytes": df.file_size_in_bytes,
        "column_sizes": _items(df.column_sizes),
        "value_counts": _items(df.value_counts),
        "null_value_counts": _items(df.null_value_counts),
        "nan_value_counts": _items(df.nan_value_counts),
        "lower_bounds": _items(df.lower_bounds),
        "upper_bounds": _items(df.upper_bounds),
        "key_metadata": df.key_metadata,
        "split_offsets": df.split_offsets,
        "equality_ids": df.equality_ids,
        "sort_order_id": df.sort_order_id,
        "first_row_id": df.first_row_id,
        "referenced_data_file": df.referenced_data_file,
        "content_offset": df.content_offset,
        "content_size_in_bytes": df.content_size_in_bytes,
    })
    return row


# -- partitions --------------------------------------------------------------------------------


@dataclass
class _PartitionStats:
    """One row of the partitions table, accumulated as Java's ``PartitionsTable.PartitionStats``."""

    key: tuple[Any, ...]
    spec_id: int
    record_count: int = 0
    file_count: int = 0
    total_data_file_size_in_bytes: int = 0
    position_delete_record_count: int = 0
    position_delete_file_count: int = 0
    equality_delete_record_count: int = 0
    equality_delete_file_count: int = 0
    last_updated_at: int | None = None
    last_updated_snapshot_id: int | None = None

    def update(self, df: DataFile, snapshot: Snapshot | None) -> None:
        # The entry's snapshot may have expired; then it does not count as an update.
        if snapshot is not None:
            at = snapshot.timestamp_ms * 1000
            if self.last_updated_at is None or at > self.last_updated_at:
                self.last_updated_at = at
                self.last_updated_snapshot_id = snapshot.snapshot_id
        if df.content == DataFileContent.DATA:
            self.record_count += df.record_count
            self.file_count += 1
            self.total_data_file_size_in_bytes += df.file_size_in_bytes
        elif df.content == DataFileContent.POSITION_DELETES:
            self.position_delete_record_count += df.record_count
            self.position_delete_file_count += 1
        else:
            self.equality_delete_record_count += df.record_count
            self.equality_delete_file_count += 1


_PARTITION_STATS_FIELDS = [
    _f("record_count", pa.int64()),
    _f("file_count", pa.int32()),
    _f("total_data_file_size_in_bytes", pa.int64()),
    _f("position_delete_record_count", pa.int64()),
    _f("position_delete_file_count", pa.int32()),
    _f("equality_delete_record_count", pa.int64()),
    _f("equality_delete_file_count", pa.int32()),
    _f("last_updated_at", _TIMESTAMP),
    _f("last_updated_snapshot_id", pa.int64()),
]

_PARTITION_SUMMARY = pa.struct([
    _f("contains_null", pa.bool_()),
    _f("contains_nan", pa.bool_()),
    _f("lower_bound", pa.string()),
    _f("upper_bound", pa.string()),
])


def _human(transform: Transform, t: IcebergType, raw: bytes | None) -> str:
    # Java passes a missing bound through toHumanString too, which prints "null".
    return transform.to_human_string(t, None if raw is None else conversions.from_bytes(t, raw))


def _summaries(spec: PartitionSpec | None, partition_type: StructType | None,
               summaries: list[FieldSummary] | None) -> list[dict[str, Any]] | None:
    """Partition summaries with bounds as human strings (``2024-01-02``, ``2024-01-02-13``)."""
    if summaries is None or spec is None or partition_type is None:
        return None
    return [{
        "contains_null": summary.contains_null,
        "contains_nan": summary.contains_nan,
        "lower_bound": _human(field.transform, ptype.field_type, summary.lower_bound),
        "upper_bound": _human(field.transform, ptype.field_type, summary.upper_bound),
    } for field, ptype, summary in zip(spec.fields, partition_type.fields, summaries, strict=False)]


# -- the inspector -----------------------------------------------------------------------------


class TableInspector:
    """Metadata tables of one table, read from its current metadata (``table.inspect``).

    ``files``, ``data_files``, ``delete_files``, ``entries``, ``partitions``, ``manifests`` and
    ``position_deletes`` take an optional ``snapshot_id`` (the current snapshot by default), as
    Java's do; the ``all_*`` tables read every snapshot and take none, as in Java.
    """

    def __init__(self, table: Table) -> None:
        self._table = table

    @property
    def _metadata(self) -> TableMetadata:
        # Read on every call so the inspector follows the table across commits and refreshes.
        return self._table.metadata

    def _map(self, fn: Callable[[ManifestFile], list[ManifestEntry]],
             manifests: Iterable[ManifestFile]) -> list[list[ManifestEntry]]:
        return self._table.engine.map(fn, list(manifests))

    def _manifests(self, snapshot_id: int | None) -> list[ManifestFile]:
        snapshot = select_snapshot(self._metadata, snapshot_id)
        if snapshot is None or snapshot.manifest_list is None:
            return []
        return read_manifest_list(self._table.io, snapshot.manifest_list)

    def _entries(self, manifests: list[ManifestFile], live: bool) -> list[ManifestEntry]:
        io = self._table.io
        specs = {spec.spec_id: spec for spec in self._metadata.partition_specs}

        def read(m: ManifestFile) -> list[ManifestEntry]:
            # Data files show the first_row_id they inherit, as Java's files table does.
            return inherit_first_row_ids(m, read_manifest(io, m, discard_deleted=live, specs=specs))

        return [e for entries in self._map(read, manifests) for e in entries]

    # -- snapshots and history ------------------------------------------------------------------
    def snapshots(self) -> pa.Table:
        """Every snapshot in the metadata: committed_at, snapshot_id, parent_id, operation,
        manifest_list and the summary (without the operation, as Java shows it)."""
        fields = [_f("committed_at", _TIMESTAMP), _f("snapshot_id", pa.int64()), _f("parent_id", pa.int64()),
                  _f("operation", pa.string()), _f("manifest_list", pa.string()),
                  _f("summary", pa.map_(pa.string(), pa.string()))]
        rows = [{
            "committed_at": _micros(s.timestamp_ms),
            "snapshot_id": s.snapshot_id,
            "parent_id": s.parent_snapshot_id,
            "operation": s.operation,
            "manifest_list": s.manifest_list,
            "summary": [(k, v) for k, v in s.summary.items() if k != "operation"],
        } for s in self._metadata.snapshots]
        return _table(fields, rows)

    def history(self) -> pa.Table:
        """The snapshot log: when each snapshot became current, and whether it is still an
        ancestor of the current snapshot (false after a rollback)."""
        md = self._metadata
        ancestors = {s.snapshot_id for s in md.ancestors_of(md.current_snapshot_id)}
        fields = [_f("made_current_at", _TIMESTAMP), _f("snapshot_id", pa.int64()),
                  _f("parent_id", pa.int64()), _f("is_current_ancestor", pa.bool_())]
        rows = []
        for entry in md.snapshot_log:
            snapshot = md.snapshot_by_id(entry.snapshot_id)
            rows.append({
                "made_current_at": _micros(entry.timestamp_ms),
                "snapshot_id": entry.snapshot_id,
                "parent_id": snapshot.parent_snapshot_id if snapshot is not None else None,
                "is_current_ancestor": entry.snapshot_id in ancestors,
            })
        return _table(fields, rows)

    def refs(self) -> pa.Table:
        """Branches and tags with their retention settings; types in upper case, as Java."""
        fields = [_f("name", pa.string()), _f("type", pa.string()), _f("snapshot_id", pa.int64()),
                  _f("max_reference_age_in_ms", pa.int64()), _f("min_snapshots_to_keep", pa.int32()),
                  _f("max_snapshot_age_in_ms", pa.int64())]
        rows = [{
            "name": name,
            "type": ref.type.upper(),
            "snapshot_id": ref.snapshot_id,
            "max_reference_age_in_ms": ref.max_ref_age_ms,
            "min_snapshots_to_keep": ref.min_snapshots_to_keep,
            "max_snapshot_age_in_ms": ref.max_snapshot_age_ms,
        } for name, ref in self._metadata.refs.items()]
        return _table(fields, rows)

    def metadata_log_entries(self) -> pa.Table:
        """The previous metadata files and the current one, each with the snapshot that was
        current when it was written (from the snapshot log, as Java's ``snapshotIdAsOfTime``)."""
        md = self._metadata
        log = [*md.metadata_log, MetadataLogEntry(md.last_updated_ms, self._table.metadata_location)]
        fields = [_f("timestamp", _TIMESTAMP), _f("file", pa.string()), _f("latest_snapshot_id", pa.int64()),
                  _f("latest_schema_id", pa.int32()), _f("latest_sequence_number", pa.int64())]
        rows = []
        for entry in log:
            latest: int | None = None
            for h in md.snapshot_log:
                if h.timestamp_ms <= entry.timestamp_ms:
                    latest = h.snapshot_id
            snapshot = md.snapshot_by_id(latest) if latest is not None else None
            rows.append({
                "timestamp": _micros(entry.timestamp_ms),
                "file": entry.metadata_file,
                "latest_snapshot_id": latest,
                "latest_schema_id": snapshot.schema_id if snapshot is not None else None,
                "latest_sequence_number": snapshot.sequence_number if snapshot is not None else None,
            })
        return _table(fields, rows)

    # -- files and entries ----------------------------------------------------------------------
    def _files(self, snapshot_id: int | None, content: ManifestContent | None) -> pa.Table:
        return self._files_of([m for m in self._manifests(snapshot_id) if content is None or m.content == content])

    def _files_of(self, manifests: list[ManifestFile]) -> pa.Table:
        md = self._metadata
        partitions = _PartitionType(md)
        metrics = _ReadableMetrics(md.schema())
        rows = []
        for entry in self._entries(manifests, live=True):
            row = _data_file_row(entry.data_file, partitions)
            row["readable_metrics"] = metrics.row(entry.data_file)
            rows.append(row)
        return _table([*_data_file_fields(partitions), _f("readable_metrics", metrics.arrow)], rows)

    def files(self, snapshot_id: int | None = None) -> pa.Table:
        """The live data and delete files of the snapshot, one row per file."""
        return self._files(snapshot_id, None)

    def data_files(self, snapshot_id: int | None = None) -> pa.Table:
        """The live data files of the snapshot."""
        return self._files(snapshot_id, ManifestContent.DATA)

    def delete_files(self, snapshot_id: int | None = None) -> pa.Table:
        """The live position and equality delete files of the snapshot."""
        return self._files(snapshot_id, ManifestContent.DELETES)

    def entries(self, snapshot_id: int | None = None) -> pa.Table:
        """Every manifest entry of the snapshot's manifests, DELETED ones included (status 0
        existing, 1 added, 2 deleted), with sequence numbers as inherited."""
        return self._entries_of(self._manifests(snapshot_id))

    def _entries_of(self, manifests: list[ManifestFile]) -> pa.Table:
        md = self._metadata
        partitions = _PartitionType(md)
        metrics = _ReadableMetrics(md.schema())
        fields = [_f("status", pa.int32()), _f("snapshot_id", pa.int64()), _f("sequence_number", pa.int64()),
                  _f("file_sequence_number", pa.int64()),
                  _f("data_file", pa.struct(_data_file_fields(partitions))),
                  _f("readable_metrics", metrics.arrow)]
        rows = [{
            "status": int(e.status),
            "snapshot_id": e.snapshot_id,
            "sequence_number": e.sequence_number,
            "file_sequence_number": e.file_sequence_number,
            "data_file": _data_file_row(e.data_file, partitions),
            "readable_metrics": metrics.row(e.data_file),
        } for e in self._entries(manifests, live=False)]
        return _table(fields, rows)

    # -- manifests and partitions ---------------------------------------------------------------
    def manifests(self, snapshot_id: int | None = None) -> pa.Table:
        """The manifests of the snapshot with their file counts by content and partition
        summaries (bounds as human-readable strings)."""
        return self._manifests_of([(None, m) for m in self._manifests(snapshot_id)])

    def _manifests_of(self, manifests: list[tuple[int | None, ManifestFile]], all_snapshots: bool = False) -> pa.Table:
        """Rows of the manifests table; with ``all_snapshots``, with the snapshot each was listed
        by (``reference_snapshot_id``, Java's all_manifests)."""
        md = self._metadata
        partitions = _PartitionType(md)
        fields = [
            _f("content", pa.int32()), _f("path", pa.string()), _f("length", pa.int64()),
            _f("partition_spec_id", pa.int32()), _f("added_snapshot_id", pa.int64()),
            _f("added_data_files_count", pa.int32()), _f("existing_data_files_count", pa.int32()),
            _f("deleted_data_files_count", pa.int32()), _f("added_delete_files_count", pa.int32()),
            _f("existing_delete_files_count", pa.int32()), _f("deleted_delete_files_count", pa.int32()),
            _f("partition_summaries", pa.list_(_PARTITION_SUMMARY)),
        ]
        if all_snapshots:
            fields.append(_f("reference_snapshot_id", pa.int64()))
        rows = []
        for reference, m in manifests:
            data = m.content == ManifestContent.DATA
            counts = (m.added_files_count, m.existing_files_count, m.deleted_files_count)
            # Java reports the counts of a manifest under its content and zeros under the other.
            data_counts = counts if data else (0, 0, 0)
            delete_counts = (0, 0, 0) if data else counts
            rows.append({
                "content": int(m.content),
                "path": m.manifest_path,
                "length": m.manifest_length,
                "partition_spec_id": m.partition_spec_id,
                "added_snapshot_id": m.added_snapshot_id,
                "added_data_files_count": data_counts[0],
                "existing_data_files_count": data_counts[1],
                "deleted_data_files_count": data_counts[2],
                "added_delete_files_count": delete_counts[0],
                "existing_delete_files_count": delete_counts[1],
                "deleted_delete_files_count": delete_counts[2],
                "partition_summaries": _summaries(
                    md.spec_by_id(m.partition_spec_id), partitions.spec_types.get(m.partition_spec_id),
                    m.partitions),
            })
            if all_snapshots:
                rows[-1]["reference_snapshot_id"] = reference
        return _table(fields, rows)

    def partitions(self, snapshot_id: int | None = None) -> pa.Table:
        """Per partition (and spec) of the snapshot's live files: data record and file counts,
        data size, delete counts, and the newest snapshot that added a file there.

        An unpartitioned table gets one row without the partition and spec_id columns, as in Java.
        """
        md = self._metadata
        partitions = _PartitionType(md)
        stats: dict[tuple[int, tuple[Any, ...]], _PartitionStats] = {}
        for entry in self._entries(self._manifests(snapshot_id), live=True):
            df = entry.data_file
            key = partitions.key(df.spec_id, tuple(df.partition))
            found = stats.get((df.spec_id, key))
            if found is None:
                found = stats[(df.spec_id, key)] = _PartitionStats(key, df.spec_id)
            snapshot = md.snapshot_by_id(entry.snapshot_id) if entry.snapshot_id is not None else None
            found.update(df, snapshot)
        fields = list(_PARTITION_STATS_FIELDS)
        if not partitions.empty:
            fields = [_f("partition", partitions.arrow), _f("spec_id", pa.int32()), *fields]
        rows = []
        for s in stats.values():
            row = {f.name: getattr(s, f.name) for f in _PARTITION_STATS_FIELDS}
            if not partitions.empty:
                row.update(partition=partitions.to_dict(s.key), spec_id=s.spec_id)
            rows.append(row)
        return _table(fields, rows)

    # -- every snapshot's files, entries and manifests (Java's all_* tables) -------------------------
    def _listed_manifests(self) -> list[tuple[int, ManifestFile]]:
        """Each snapshot's manifests, with the snapshot that lists them."""
        md = self._metadata
        snapshots = [s for s in md.snapshots if s.manifest_list is not None]

        def listed(s: Snapshot) -> list[tuple[int, ManifestFile]]:
            assert s.manifest_list is not None
            return [(s.snapshot_id, m) for m in read_manifest_list(self._table.io, s.manifest_list)]

        return [pair for pairs in self._table.engine.map(listed, snapshots) for pair in pairs]

    def _all_manifests_once(self, content: ManifestContent | None = None) -> list[ManifestFile]:
        """The distinct manifests of every snapshot (by path), as Java's all_* tables read them."""
        distinct: dict[str, ManifestFile] = {}
        for _, m in self._listed_manifests():
            if content is None or m.content == content:
                distinct.setdefault(m.manifest_path, m)
        return list(distinct.values())

    def all_files(self) -> pa.Table:
        """The live data and delete files of every manifest of every snapshot; a file listed by
        several manifests has a row for each, as in Java."""
        return self._files_of(self._all_manifests_once())

    def all_data_files(self) -> pa.Table:
        """The data files of every snapshot's data manifests (Java's all_data_files)."""
        return self._files_of(self._all_manifests_once(ManifestContent.DATA))

    def all_delete_files(self) -> pa.Table:
        """The delete files of every snapshot's delete manifests (Java's all_delete_files)."""
        return self._files_of(self._all_manifests_once(ManifestContent.DELETES))

    def all_entries(self) -> pa.Table:
        """Every entry of every manifest of every snapshot, DELETED ones included (all_entries)."""
        return self._entries_of(self._all_manifests_once())

    def all_manifests(self) -> pa.Table:
        """Every snapshot's manifests, one row per snapshot and manifest, with the snapshot that
        lists it as ``reference_snapshot_id`` (Java's all_manifests)."""
        return self._manifests_of([(s, m) for s, m in self._listed_manifests()], all_snapshots=True)

    def position_deletes(self, snapshot_id: int | None = None) -> pa.Table:
        """One row per deleted position of the snapshot's live position delete files and deletion
        vectors: the data file and position, the deleted row (null: tablestore writes none), the
        partition and spec, and the delete file (with a DV's offset and size), as Java's."""
        md = self._metadata
        partitions = _PartitionType(md)
        row_type = pa.struct([pa.field(f.name, f.type) for f in md.schema().as_arrow()])
        fields = [_f("file_path", pa.string()), _f("pos", pa.int64()), _f("row", row_type)]
        if not partitions.empty:
            fields.append(_f("partition", partitions.arrow))
        fields += [_f("spec_id", pa.int32()), _f("delete_file_path", pa.string()),
                   _f("content_offset", pa.int64()), _f("content_size_in_bytes", pa.int64())]
        deletes = [e.data_file for e in self._entries(
            [m for m in self._manifests(snapshot_id) if m.content == ManifestContent.DELETES], live=True)
            if e.data_file.content == DataFileContent.POSITION_DELETES]
        io = self._table.io

        def read(f: DataFile) -> list[dict[str, Any]]:
            common: dict[str, Any] = {"row": None, "spec_id": f.spec_id, "delete_file_path": f.file_path,
                                      "content_offset": f.content_offset,
                                      "content_size_in_bytes": f.content_size_in_bytes}
            if not partitions.empty:
                common["partition"] = partitions.to_dict(partitions.key(f.spec_id, tuple(f.partition)))
            if is_deletion_vector(f):
                data_path = referenced_data_file(f)
                assert data_path is not None
                pairs = [(data_path, int(p)) for p in read_deletion_vector(io, f, data_path)]
            else:
                fs, path = io.filesystem_for(f.file_path)
                found = pq.read_table(path, filesystem=fs, columns=["file_path", "pos"])
                pairs = list(zip(found.column("file_path").to_pylist(), found.column("pos").to_pylist(),
                                 strict=True))
            return [{"file_path": p, "pos": pos, **common} for p, pos in pairs]

        rows = [r for found in self._table.engine.map(read, deletes) for r in found]
        return _table(fields, rows)

    # -- schemas (not a Java metadata table) ----------------------------------------------------
    def schemas(self) -> pa.Table:
        """The schema versions: schema_id, is_current, identifier_field_ids, ``fields`` as the
        JSON of the metadata file (with field ids) and ``schema`` as readable Spark DDL."""
        md = self._metadata
        fields = [_f("schema_id", pa.int32()), _f("is_current", pa.bool_()),
                  _f("identifier_field_ids", pa.list_(pa.int32())), _f("fields", pa.string()),
                  _f("schema", pa.string())]
        rows = [{
            "schema_id": s.schema_id,
            "is_current": s.schema_id == md.current_schema_id,
            "identifier_field_ids": list(s.identifier_field_ids),
            "fields": json.dumps(s.to_json()["fields"]),
            "schema": ", ".join(
                f"{f.name} {sql_type_name(f.field_type)}{' NOT NULL' if f.required else ''}" for f in s.fields
            ),
        } for s in md.schemas]
        return _table(fields, rows)
