"""Table metadata, snapshots and refs (format/spec.md, "Table Metadata", "Snapshots").

``TableMetadata`` is an immutable value: commits build a new one with ``updates.apply_updates``.
JSON is read for format versions 1, 2 and 3 and written the way Java's ``TableMetadataParser``
writes it (including ``current-snapshot-id: -1`` when there is no snapshot, which every reader
accepts). Fields this module does not model are kept in ``extra`` and written back unchanged, so
rewriting another engine's metadata does not lose them.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic_core import to_json

try:
    import orjson as _orjson
except ImportError:  # the core runs without it (pydantic-core writes the JSON then)
    _orjson = None  # type: ignore[assignment]

from tablestore.errors import CorruptMetadataError, NoSuchSnapshotError, SchemaError, ValidationError
from tablestore.spec.partitioning.partition_spec import PartitionField, PartitionSpec
from tablestore.spec.partitioning.sort_order import SortField, SortOrder
from tablestore.spec.schemas.schema import (
    DEFAULT_FORMAT_VERSION,
    IdCounter,
    Schema,
    assign_fresh_ids,
    check_format_version_types,
)

MAIN_BRANCH = "main"
#: Snapshot summary properties of write-audit-publish: a staged snapshot's ``wap.id``, the
#: published copy's ``published-wap-id``, and a cherry-picked copy's ``source-snapshot-id``.
WAP_ID_PROPERTY = "wap.id"
PUBLISHED_WAP_ID_PROPERTY = "published-wap-id"
SOURCE_SNAPSHOT_ID_PROPERTY = "source-snapshot-id"
SUPPORTED_READ_VERSIONS = (1, 2, 3)
SUPPORTED_WRITE_VERSIONS = (1, 2, 3)
# The first version with row lineage: its tables track next-row-id from creation or upgrade.
ROW_LINEAGE_VERSION = 3
INITIAL_SEQUENCE_NUMBER = 0
PARTITION_FIELD_ID_START = 1000
METADATA_PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"
METADATA_PREVIOUS_VERSIONS_MAX_DEFAULT = 100
# Table properties that configure the table itself and are not stored as properties.
RESERVED_PROPERTIES = ("format-version",)


class Operation(StrEnum):
    APPEND = "append"
    REPLACE = "replace"
    OVERWRITE = "overwrite"
    DELETE = "delete"

def now_ms() -> int:
    return time.time_ns() // 1_000_000


def new_snapshot_id() -> int:
    """A random positive 63-bit snapshot id, derived from a uuid4 as Java does."""
    u = uuid.uuid4().int
    return ((u >> 64) ^ (u & 0xFFFF_FFFF_FFFF_FFFF)) & 0x7FFF_FFFF_FFFF_FFFF


def int_property(properties: Mapping[str, str], key: str) -> int | None:
    """The integer value of the table property ``key``, None when it is not set; ValidationError
    naming the property when its value is no integer."""
    raw = properties.get(key)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValidationError(
            f"table property {key}={raw!r} must be an integer; fix it with ALTER TABLE ... SET TBLPROPERTIES"
        ) from None


def _format_ms(ms: int) -> str:
    stamp = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- small JSON helpers --------------------------------------------------------------------------


def _get(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    """A required JSON field of the expected type, or CorruptMetadataError naming it."""
    if key not in obj or obj[key] is None:
        raise CorruptMetadataError(f"{what} is missing the required field {key!r}")
    value = obj[key]
    if not _is_kind(value, kind):
        raise CorruptMetadataError(f"{what} field {key!r} has the wrong type: {value!r}")
    return value


def _opt(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = obj.get(key)
    if value is not None and not _is_kind(value, kind):
        raise CorruptMetadataError(f"{what} field {key!r} has the wrong type: {value!r}")
    return value


def _is_kind(value: Any, kind: type | tuple[type, ...]) -> bool:
    # bool is an int in Python but never a valid JSON number field here.
    if isinstance(value, bool) and kind is not bool:
        return False
    return isinstance(value, kind)


# -- snapshots and refs --------------------------------------------------------------------------

_SNAPSHOT_KEYS = {
    "snapshot-id", "parent-snapshot-id", "sequence-number", "timestamp-ms", "manifest-list", "manifests",
    "summary", "schema-id", "first-row-id", "added-rows",
}


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: int
    parent_snapshot_id: int | None
    sequence_number: int
    timestamp_ms: int
    manifest_list: str | None
    summary: dict[str, str]
    schema_id: int | None = None
    first_row_id: int | None = None
    added_rows: int | None = None
    manifests: tuple[str, ...] | None = None  # v1 only: manifests embedded instead of a list file
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __hash__(self) -> int:
        # The summary is a dict; snapshot ids are unique within a table.
        return hash(self.snapshot_id)

    @property
    def operation(self) -> str | None:
        return self.summary.get("operation")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"snapshot-id": self.snapshot_id}
        if self.parent_snapshot_id is not None:
            out["parent-snapshot-id"] = self.parent_snapshot_id
        # Java omits the sequence number of v1 snapshots (always 0).
        if self.sequence_number > INITIAL_SEQUENCE_NUMBER:
            out["sequence-number"] = self.sequence_number
        out["timestamp-ms"] = self.timestamp_ms
        if self.manifest_list is not None:
            out["manifest-list"] = self.manifest_list
        elif self.manifests is not None:
            out["manifests"] = list(self.manifests)
        summary = dict(self.summary)
        if "operation" in summary:  # operation first, as Java writes it
            summary = {"operation": summary.pop("operation"), **summary}
        out["summary"] = summary
        if self.schema_id is not None:
            out["schema-id"] = self.schema_id
        if self.first_row_id is not None:
            out["first-row-id"] = self.first_row_id
        if self.added_rows is not None:
            out["added-rows"] = self.added_rows
        out.update(self.extra)
        return out

    @staticmethod
    def from_json(obj: Any) -> Snapshot:
        if not isinstance(obj, dict):
            raise CorruptMetadataError(f"a snapshot must be a JSON object, got {obj!r}")
        snapshot_id = _get(obj, "snapshot-id", int, "snapshot")
        what = f"snapshot {snapshot_id}"
        summary = _opt(obj, "summary", dict, what) or {}
        if not all(isinstance(v, str) for v in summary.values()):
            raise CorruptMetadataError(f"{what} has a summary with non-string values")
        manifests = _opt(obj, "manifests", list, what)
        manifest_list = _opt(obj, "manifest-list", str, what)
        if manifest_list is None and manifests is None:
            raise CorruptMetadataError(f"{what} has neither a manifest-list nor manifests")
        return Snapshot(
            snapshot_id=snapshot_id,
            parent_snapshot_id=_opt(obj, "parent-snapshot-id", int, what),
            sequence_number=_opt(obj, "sequence-number", int, what) or INITIAL_SEQUENCE_NUMBER,
            timestamp_ms=_get(obj, "timestamp-ms", int, what),
            manifest_list=manifest_list,
            summary=dict(summary),
            schema_id=_opt(obj, "schema-id", int, what),
            first_row_id=_opt(obj, "first-row-id", int, what),
            added_rows=_opt(obj, "added-rows", int, what),
            manifests=None if manifests is None else tuple(manifests),
            extra={k: v for k, v in obj.items() if k not in _SNAPSHOT_KEYS},
        )


@dataclass(frozen=True)
class SnapshotRef:
    snapshot_id: int
    type: str = "branch"  # "branch" | "tag"
    min_snapshots_to_keep: int | None = None
    max_snapshot_age_ms: int | None = None
    max_ref_age_ms: int | None = None

    def __post_init__(self) -> None:
        if self.type not in ("branch", "tag"):
            raise ValidationError(f"a snapshot ref is a 'branch' or a 'tag', not {self.type!r}")
        branch_only = (self.min_snapshots_to_keep, self.max_snapshot_age_ms)
        if self.type == "tag" and any(v is not None for v in branch_only):
            raise ValidationError("tags do not support min-snapshots-to-keep or max-snapshot-age-ms")
        for name in ("min_snapshots_to_keep", "max_snapshot_age_ms", "max_ref_age_ms"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValidationError(f"{name.replace('_', '-')} must be positive, got {value}")

    @property
    def is_branch(self) -> bool:
        return self.type == "branch"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"snapshot-id": self.snapshot_id, "type": self.type}
        if self.min_snapshots_to_keep is not None:
            out["min-snapshots-to-keep"] = self.min_snapshots_to_keep
        if self.max_snapshot_age_ms is not None:
            out["max-snapshot-age-ms"] = self.max_snapshot_age_ms
        if self.max_ref_age_ms is not None:
            out["max-ref-age-ms"] = self.max_ref_age_ms
        return out

    @staticmethod
    def from_json(obj: Any, name: str = "") -> SnapshotRef:
        what = f"ref {name!r}"
        if not isinstance(obj, dict):
            raise CorruptMetadataError(f"{what} must be a JSON object, got {obj!r}")
        try:
            return SnapshotRef(
                _get(obj, "snapshot-id", int, what),
                _get(obj, "type", str, what).lower(),
                _opt(obj, "min-snapshots-to-keep", int, what),
                _opt(obj, "max-snapshot-age-ms", int, what),
                _opt(obj, "max-ref-age-ms", int, what),
            )
        except ValidationError as e:
            raise CorruptMetadataError(f"invalid {what}: {e}") from e


@dataclass(frozen=True)
class SnapshotLogEntry:
    timestamp_ms: int
    snapshot_id: int

    def to_json(self) -> dict[str, Any]:
        return {"timestamp-ms": self.timestamp_ms, "snapshot-id": self.snapshot_id}


@dataclass(frozen=True)
class MetadataLogEntry:
    timestamp_ms: int
    metadata_file: str

    def to_json(self) -> dict[str, Any]:
        return {"timestamp-ms": self.timestamp_ms, "metadata-file": self.metadata_file}


# -- table metadata ------------------------------------------------------------------------------

_METADATA_KEYS = {
    "format-version", "table-uuid", "location", "last-sequence-number", "last-updated-ms", "last-column-id",
    "schema", "schemas", "current-schema-id", "partition-spec", "partition-specs", "default-spec-id",
    "last-partition-id", "properties", "current-snapshot-id", "snapshots", "snapshot-log", "metadata-log",
    "sort-orders", "default-sort-order-id", "refs", "statistics", "partition-statistics", "next-row-id",
}


@dataclass(frozen=True)
class TableMetadata:
    format_version: int
    table_uuid: str
    location: str
    last_sequence_number: int
    last_updated_ms: int
    last_column_id: int
    schemas: tuple[Schema, ...]
    current_schema_id: int
    partition_specs: tuple[PartitionSpec, ...]
    default_spec_id: int
    last_partition_id: int
    properties: dict[str, str]
    current_snapshot_id: int | None
    snapshots: tuple[Snapshot, ...]
    snapshot_log: tuple[SnapshotLogEntry, ...]
    metadata_log: tuple[MetadataLogEntry, ...]
    sort_orders: tuple[SortOrder, ...]
    default_sort_order_id: int
    refs: dict[str, SnapshotRef]
    statistics: tuple[dict[str, Any], ...] = ()
    partition_statistics: tuple[dict[str, Any], ...] = ()
    next_row_id: int | None = None  # v3 row lineage
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    # -- lookups ---------------------------------------------------------------------------
    def schema(self) -> Schema:
        found = self.schema_by_id(self.current_schema_id)
        if found is None:
            raise CorruptMetadataError(f"table metadata has no current schema {self.current_schema_id}")
        return found

    def schema_by_id(self, schema_id: int) -> Schema | None:
        return next((s for s in self.schemas if s.schema_id == schema_id), None)

    def spec(self) -> PartitionSpec:
        found = self.spec_by_id(self.default_spec_id)
        if found is None:
            raise CorruptMetadataError(f"table metadata has no default partition spec {self.default_spec_id}")
        return found

    def spec_by_id(self, spec_id: int) -> PartitionSpec | None:
        return next((s for s in self.partition_specs if s.spec_id == spec_id), None)

    def spec_for(self, spec_id: int) -> PartitionSpec:
        """The spec a data file or manifest names; its absence means the metadata is broken."""
        found = self.spec_by_id(spec_id)
        if found is None:
            raise CorruptMetadataError(f"the table metadata has no partition spec {spec_id}, which a file refers to")
        return found

    def specs(self) -> dict[int, PartitionSpec]:
        return {s.spec_id: s for s in self.partition_specs}

    def sort_order(self) -> SortOrder:
        found = self.sort_order_by_id(self.default_sort_order_id)
        if found is None:
            raise CorruptMetadataError(
                f"table metadata has no default sort order {self.default_sort_order_id}"
            )
        return found

    def sort_order_by_id(self, order_id: int) -> SortOrder | None:
        return next((o for o in self.sort_orders if o.order_id == order_id), None)

    def current_snapshot(self) -> Snapshot | None:
        return None if self.current_snapshot_id is None else self.snapshot_by_id(self.current_snapshot_id)

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot | None:
        return next((s for s in self.snapshots if s.snapshot_id == snapshot_id), None)

    def branch_head(self, branch: str) -> Snapshot | None:
        """The snapshot a write to ``branch`` builds on: the branch's head, or main's current
        snapshot when the branch does not exist yet (a first write creates it from main, as
        Java's ``SnapshotUtil.latestSnapshot`` does)."""
        ref = self.refs.get(branch)
        if branch == MAIN_BRANCH or ref is None:
            return self.current_snapshot()
        return self.snapshot_by_id(ref.snapshot_id)

    def snapshot_by_ref(self, name: str) -> Snapshot | None:
        ref = self.refs.get(name)
        return None if ref is None else self.snapshot_by_id(ref.snapshot_id)

    def ancestors_of(self, snapshot_id: int | None) -> Iterator[Snapshot]:
        """The snapshot and its ancestors, newest first, while they are still in the metadata."""
        seen: set[int] = set()
        while snapshot_id is not None and snapshot_id not in seen:
            seen.add(snapshot_id)
            snap = self.snapshot_by_id(snapshot_id)
            if snap is None:
                return
            yield snap
            snapshot_id = snap.parent_snapshot_id

    def snapshot_as_of(self, timestamp_ms: int) -> Snapshot:
        """The table's current snapshot at ``timestamp_ms``, from the snapshot log."""
        history: list[tuple[int, int]] = [(e.timestamp_ms, e.snapshot_id) for e in self.snapshot_log]
        if not history:
            # Metadata without a log (hand-written, or every entry expired): use the main lineage.
            lineage = self.ancestors_of(self.current_snapshot_id)
            history = sorted((s.timestamp_ms, s.snapshot_id) for s in lineage)
        if not history:
            raise NoSuchSnapshotError("the table has no snapshots, so it has no data as of any time")
        found: int | None = None
        for ts, snapshot_id in history:
            if ts <= timestamp_ms:
                found = snapshot_id
        if found is None:
            first = history[0][0]
            raise NoSuchSnapshotError(
                f"no snapshot at or before {_format_ms(timestamp_ms)} ({timestamp_ms} ms); "
                f"the earliest snapshot is from {_format_ms(first)} ({first} ms); older snapshots, if any, "
                "were expired"
            )
        snap = self.snapshot_by_id(found)
        if snap is None:
            raise NoSuchSnapshotError(
                f"the snapshot current at {_format_ms(timestamp_ms)} ({found}) has expired"
            )
        return snap

    def next_sequence_number(self) -> int:
        return self.last_sequence_number + 1 if self.format_version > 1 else INITIAL_SEQUENCE_NUMBER

    def property(self, key: str, default: str | None = None) -> str | None:
        return self.properties.get(key, default)

    # -- JSON --------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        v = self.format_version
        out: dict[str, Any] = {"format-version": v, "table-uuid": self.table_uuid, "location": self.location}
        if v > 1:
            out["last-sequence-number"] = self.last_sequence_number
        out["last-updated-ms"] = self.last_updated_ms
        out["last-column-id"] = self.last_column_id
        if v >= 3 and self.next_row_id is not None:
            out["next-row-id"] = self.next_row_id
        if v == 1:  # v1 readers only know the single current schema and spec
            out["schema"] = self.schema().to_json()
        out["current-schema-id"] = self.current_schema_id
        out["schemas"] = [s.to_json() for s in self.schemas]
        if v == 1:
            out["partition-spec"] = self.spec().to_json()["fields"]
        out["default-spec-id"] = self.default_spec_id
        out["partition-specs"] = [s.to_json() for s in self.partition_specs]
        out["last-partition-id"] = self.last_partition_id
        out["default-sort-order-id"] = self.default_sort_order_id
        out["sort-orders"] = [o.to_json() for o in self.sort_orders]
        out["properties"] = dict(self.properties)
        out["current-snapshot-id"] = -1 if self.current_snapshot_id is None else self.current_snapshot_id
        out["refs"] = {name: ref.to_json() for name, ref in self.refs.items()}
        out["snapshots"] = [s.to_json() for s in self.snapshots]
        out["statistics"] = [dict(s) for s in self.statistics]
        out["partition-statistics"] = [dict(s) for s in self.partition_statistics]
        out["snapshot-log"] = [e.to_json() for e in self.snapshot_log]
        out["metadata-log"] = [e.to_json() for e in self.metadata_log]
        out.update(self.extra)
        return out

    @staticmethod
    def from_json(obj: Any) -> TableMetadata:
        try:
            return _metadata_from_json(obj)
        except CorruptMetadataError:
            raise
        except (SchemaError, ValidationError, KeyError, TypeError, ValueError, AttributeError) as e:
            raise CorruptMetadataError(f"invalid table metadata: {type(e).__name__}: {e}") from e


def _metadata_from_json(obj: Any) -> TableMetadata:
    what = "table metadata"
    if not isinstance(obj, dict):
        raise CorruptMetadataError(f"table metadata must be a JSON object, got {type(obj).__name__}")
    version = _get(obj, "format-version", int, what)
    if version not in SUPPORTED_READ_VERSIONS:
        raise CorruptMetadataError(
            f"unsupported table format version {version}; tablestore reads versions 1 to 3"
        )
    v2 = version >= 2
    table_uuid = _get(obj, "table-uuid", str, what) if v2 else _opt(obj, "table-uuid", str, what)
    location = _get(obj, "location", str, what)
    last_sequence_number = _get(obj, "last-sequence-number", int, what) if v2 else INITIAL_SEQUENCE_NUMBER
    last_updated_ms = _get(obj, "last-updated-ms", int, what)
    last_column_id = _get(obj, "last-column-id", int, what)

    if "schemas" in obj or v2:
        schemas = tuple(Schema.from_json(s) for s in _get(obj, "schemas", list, what))
        current_schema_id = _get(obj, "current-schema-id", int, what)
    else:
        schemas = (Schema.from_json(_get(obj, "schema", dict, what)),)
        current_schema_id = schemas[0].schema_id
    if not any(s.schema_id == current_schema_id for s in schemas):
        raise CorruptMetadataError(f"current-schema-id {current_schema_id} is not among the schemas")

    if "partition-specs" in obj or v2:
        specs = tuple(PartitionSpec.from_json(s) for s in _get(obj, "partition-specs", list, what))
        default_spec_id = _get(obj, "default-spec-id", int, what)
    else:
        specs = (PartitionSpec.from_json({"spec-id": 0, "fields": _v1_spec_fields(
            _get(obj, "partition-spec", list, what))}),)
        default_spec_id = 0
    if not any(s.spec_id == default_spec_id for s in specs):
        raise CorruptMetadataError(f"default-spec-id {default_spec_id} is not among the partition-specs")
    last_partition_id = (_get if v2 else _opt)(obj, "last-partition-id", int, what)
    if last_partition_id is None:
        last_partition_id = max(
            (f.field_id for s in specs for f in s.fields), default=PARTITION_FIELD_ID_START - 1)

    if "sort-orders" in obj or v2:
        sort_orders = tuple(SortOrder.from_json(o) for o in _get(obj, "sort-orders", list, what))
        default_sort_order_id = _get(obj, "default-sort-order-id", int, what)
    else:
        sort_orders = (SortOrder.from_json({"order-id": 0, "fields": []}),)
        default_sort_order_id = 0
    if not any(o.order_id == default_sort_order_id for o in sort_orders):
        raise CorruptMetadataError(
            f"default-sort-order-id {default_sort_order_id} is not among the sort-orders"
        )

    properties = _opt(obj, "properties", dict, what) or {}
    if not all(isinstance(k, str) and isinstance(val, str) for k, val in properties.items()):
        raise CorruptMetadataError("table metadata properties must map strings to strings")

    snapshots = tuple(Snapshot.from_json(s) for s in (_opt(obj, "snapshots", list, what) or []))
    by_id = {s.snapshot_id for s in snapshots}
    current_snapshot_id = _opt(obj, "current-snapshot-id", int, what)
    if current_snapshot_id is not None and current_snapshot_id < 0:  # Java writes -1 for none
        current_snapshot_id = None
    if current_snapshot_id is not None and current_snapshot_id not in by_id:
        raise CorruptMetadataError(f"current-snapshot-id {current_snapshot_id} is not among the snapshots")

    refs_obj = _opt(obj, "refs", dict, what) or {}
    refs = {name: SnapshotRef.from_json(r, name) for name, r in refs_obj.items()}
    if MAIN_BRANCH not in refs and current_snapshot_id is not None:
        # Metadata from before refs existed: the current snapshot is the head of main.
        refs[MAIN_BRANCH] = SnapshotRef(current_snapshot_id, "branch")

    snapshot_log = tuple(
        SnapshotLogEntry(
            _get(e, "timestamp-ms", int, "snapshot-log entry"),
            _get(e, "snapshot-id", int, "snapshot-log entry"),
        )
        for e in (_opt(obj, "snapshot-log", list, what) or [])
    )
    metadata_log = tuple(
        MetadataLogEntry(
            _get(e, "timestamp-ms", int, "metadata-log entry"),
            _get(e, "metadata-file", str, "metadata-log entry"),
        )
        for e in (_opt(obj, "metadata-log", list, what) or [])
    )
    statistics = tuple(_stats(s, "statistics") for s in (_opt(obj, "statistics", list, what) or []))
    partition_statistics = tuple(
        _stats(s, "partition-statistics") for s in (_opt(obj, "partition-statistics", list, what) or []))

    return TableMetadata(
        format_version=version,
        table_uuid=table_uuid if table_uuid is not None else str(uuid.uuid4()),
        location=location,
        last_sequence_number=last_sequence_number,
        last_updated_ms=last_updated_ms,
        last_column_id=last_column_id,
        schemas=schemas,
        current_schema_id=current_schema_id,
        partition_specs=specs,
        default_spec_id=default_spec_id,
        last_partition_id=last_partition_id,
        properties=dict(properties),
        current_snapshot_id=current_snapshot_id,
        snapshots=snapshots,
        snapshot_log=snapshot_log,
        metadata_log=metadata_log,
        sort_orders=sort_orders,
        default_sort_order_id=default_sort_order_id,
        refs=refs,
        statistics=statistics,
        partition_statistics=partition_statistics,
        next_row_id=_opt(obj, "next-row-id", int, what),
        extra={k: val for k, val in obj.items() if k not in _METADATA_KEYS},
    )


def _v1_spec_fields(fields: list[Any]) -> list[Any]:
    # v1 specs may lack partition field ids; Java assigned them from 1000 in order.
    out = []
    for i, f in enumerate(fields):
        if not isinstance(f, dict):
            raise CorruptMetadataError(f"a partition field must be a JSON object, got {f!r}")
        out.append(f if "field-id" in f else {**f, "field-id": PARTITION_FIELD_ID_START + i})
    return out


def _stats(obj: Any, what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise CorruptMetadataError(f"a {what} entry must be a JSON object, got {obj!r}")
    _get(obj, "snapshot-id", int, f"{what} entry")
    _get(obj, "statistics-path", str, f"{what} entry")
    return dict(obj)


def parse_metadata(data: bytes) -> TableMetadata:
    """Parse a metadata file (plain or gzip-compressed JSON); CorruptMetadataError if invalid."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise CorruptMetadataError(f"metadata file is not valid gzip: {e}") from e
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, ValueError) as e:
        raise CorruptMetadataError(f"metadata file is not valid JSON: {e}") from e
    return TableMetadata.from_json(obj)


def serialize_metadata(metadata: TableMetadata) -> bytes:
    """The JSON bytes of a metadata file, indented as Java writes them (:func:`json_bytes`)."""
    return json_bytes(metadata.to_json(), indent=True)


def json_bytes(document: Any, indent: bool = False) -> bytes:
    """A JSON document's UTF-8 bytes as pydantic-core's ``to_json`` writes them (non-finite floats
    as ``NaN`` and ``Infinity``), made by orjson when it is installed (the service's extra has it).

    ``json.dumps`` with an indent runs Python's pure-Python encoder, 13x slower than pydantic-core
    on a metadata file with a full metadata log (100 entries), which the catalog service paid on
    every commit; and orjson is 4 to 5x faster again (15 against 65 us indented, 11 against 42 us
    compact, on a 13 KiB metadata file): a commit writes the file and serializes the response.
    Both write the same bytes (UTF-8 text, shortest floats, the same indentation), but orjson
    refuses integers beyond 64 bits and writes non-finite floats as ``null``: a document it
    refuses, or whose bytes hold ``null`` anywhere (metadata holds none), is pydantic-core's.
    """
    if _orjson is not None:
        try:
            data: bytes = _orjson.dumps(document, option=_orjson.OPT_INDENT_2 if indent else 0)
        except TypeError:  # orjson's JSONEncodeError: an integer beyond 64 bits, a type it does not know
            pass
        else:
            if b"null" not in data:
                return data
    return to_json(document, indent=2 if indent else None, inf_nan_mode="constants")


# -- new tables ----------------------------------------------------------------------------------


def new_table_metadata(
    schema: Schema,
    spec: PartitionSpec,
    sort_order: SortOrder,
    location: str,
    properties: dict[str, str] | None = None,
    format_version: int = DEFAULT_FORMAT_VERSION,
) -> TableMetadata:
    """Metadata of a new, empty table: fresh column ids (spec and sort order rebound by column
    name), partition field ids from 1000, a random uuid.

    A ``format-version`` property selects the format version and is not stored as a property.
    """
    props = {str(k): str(v) for k, v in (properties or {}).items()}
    if "format-version" in props:
        try:
            format_version = int(props.pop("format-version"))
        except ValueError as e:
            raise ValidationError(f"table property format-version must be 1, 2 or 3, got {e}") from e
    if format_version not in SUPPORTED_WRITE_VERSIONS:
        raise ValidationError(f"tablestore creates tables of format version 1, 2 or 3, not {format_version}")
    check_format_version_types(schema, format_version)

    fresh_struct = assign_fresh_ids(schema, IdCounter(0))
    fresh_ids: dict[int, int] = {}
    fresh = Schema(fresh_struct.fields, 0)
    for name, f in schema.all_fields():
        new_id = fresh.find_field_id(name)
        if new_id is not None:
            fresh_ids[f.field_id] = new_id
    identifier_ids = tuple(fresh_ids[i] for i in schema.identifier_field_ids)
    fresh = Schema(fresh_struct.fields, 0, identifier_ids)

    def rebind(source_id: int, what: str) -> int:
        if source_id not in fresh_ids:
            raise ValidationError(f"{what} refers to column id {source_id}, which is not in the schema")
        return fresh_ids[source_id]

    fresh_spec = PartitionSpec(0, tuple(
        PartitionField(rebind(f.source_id, f"partition field {f.name!r}"), PARTITION_FIELD_ID_START + i,
                       f.transform, f.name)
        for i, f in enumerate(spec.fields)
    ))
    sort_fields = tuple(
        SortField(rebind(f.source_id, "sort field"), f.transform, f.direction, f.null_order)
        for f in sort_order.fields
    )
    # Order id 0 is reserved for the unsorted order; the first real order gets 1 (as in Java).
    fresh_order = SortOrder(1 if sort_fields else 0, sort_fields)

    return TableMetadata(
        format_version=format_version,
        table_uuid=str(uuid.uuid4()),
        location=location.rstrip("/"),
        last_sequence_number=INITIAL_SEQUENCE_NUMBER,
        last_updated_ms=now_ms(),
        last_column_id=fresh.highest_field_id(),
        schemas=(fresh,),
        current_schema_id=0,
        partition_specs=(fresh_spec,),
        default_spec_id=0,
        last_partition_id=PARTITION_FIELD_ID_START - 1 + len(fresh_spec.fields),
        properties=props,
        current_snapshot_id=None,
        snapshots=(),
        snapshot_log=(),
        metadata_log=(),
        sort_orders=(fresh_order,),
        default_sort_order_id=fresh_order.order_id,
        refs={},
        next_row_id=0 if format_version >= ROW_LINEAGE_VERSION else None,
    )
