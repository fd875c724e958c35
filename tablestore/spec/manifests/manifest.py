"""Manifests and manifest lists (format/spec.md, "Manifests" and "Manifest Lists").

A manifest is an Avro file of ``manifest_entry`` records, each tracking one data or delete file
with its partition tuple and column metrics; a manifest list is an Avro file of ``manifest_file``
records, one per manifest of a snapshot, with counts and partition summaries for pruning.

Reading is on the scan-planning hot path: the Avro codec (``manifest_codec``) decodes maps
straight into dicts, entries are built with positional arguments, and entries whose partition a
caller's filter rejects are dropped before a DataFile is built for them.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from tablestore.errors import CorruptMetadataError, UnsupportedError, ValidationError
from tablestore.spec.manifests.manifest_avro import (
    FIELD_ID,
    V1_BLOCK_SIZE,
    manifest_entry_schema,
    manifest_file_schema,
    normalize_entry_schema,
    normalize_manifest_file_schema,
    partition_converters,
    partition_record,
    partition_value_writers,
)
from tablestore.spec.manifests.manifest_codec import read_header, read_records, read_schema, write_container
from tablestore.spec.schemas.conversions import to_bytes

if TYPE_CHECKING:
    from tablestore.spec.partitioning.partition_spec import PartitionSpec

# A ManifestFile written by ``write_manifest`` has no sequence number until the manifest list
# that adds it is written; Java uses the same marker.
UNASSIGNED_SEQUENCE_NUMBER = -1


class DataFileContent(IntEnum):
    DATA = 0
    POSITION_DELETES = 1
    EQUALITY_DELETES = 2


class ManifestContent(IntEnum):
    DATA = 0
    DELETES = 1


class ManifestEntryStatus(IntEnum):
    EXISTING = 0
    ADDED = 1
    DELETED = 2


class FileFormat(StrEnum):
    PARQUET = "PARQUET"
    AVRO = "AVRO"
    ORC = "ORC"
    PUFFIN = "PUFFIN"

    @classmethod
    def _missing_(cls, value: object) -> FileFormat | None:
        # Some writers store the format name in lower case.
        if isinstance(value, str):
            upper = value.upper()
            for member in cls:
                if member.value == upper:
                    return member
        return None


@dataclass(slots=True)
class DataFile:
    """A data or delete file as tracked by a manifest entry (the ``data_file`` struct)."""

    content: DataFileContent
    file_path: str
    file_format: FileFormat
    partition: tuple[Any, ...]
    record_count: int
    file_size_in_bytes: int
    column_sizes: dict[int, int] | None = None
    value_counts: dict[int, int] | None = None
    null_value_counts: dict[int, int] | None = None
    nan_value_counts: dict[int, int] | None = None
    lower_bounds: dict[int, bytes] | None = None
    upper_bounds: dict[int, bytes] | None = None
    key_metadata: bytes | None = None
    split_offsets: list[int] | None = None
    equality_ids: list[int] | None = None
    sort_order_id: int | None = None
    spec_id: int = 0
    referenced_data_file: str | None = None
    content_offset: int | None = None
    content_size_in_bytes: int | None = None
    first_row_id: int | None = None

    def __hash__(self) -> int:
        # A file path appears at most once among a snapshot's live files.
        return hash(self.file_path)


@dataclass(slots=True)
class ManifestEntry:
    status: ManifestEntryStatus
    snapshot_id: int | None
    sequence_number: int | None
    file_sequence_number: int | None
    data_file: DataFile


@dataclass(frozen=True, slots=True)
class FieldSummary:
    """Partition-field summary of a manifest; bounds use the single-value binary encoding."""

    contains_null: bool
    contains_nan: bool | None = None
    lower_bound: bytes | None = None
    upper_bound: bytes | None = None


@dataclass(slots=True)
class ManifestFile:
    manifest_path: str
    manifest_length: int
    partition_spec_id: int
    content: ManifestContent
    sequence_number: int
    min_sequence_number: int
    added_snapshot_id: int
    added_files_count: int | None
    existing_files_count: int | None
    deleted_files_count: int | None
    added_rows_count: int | None
    existing_rows_count: int | None
    deleted_rows_count: int | None
    partitions: list[FieldSummary] | None = None
    key_metadata: bytes | None = None
    first_row_id: int | None = None

    def has_added_files(self) -> bool:
        # Counts are optional in v1 manifest lists; null means "possibly some".
        return self.added_files_count is None or self.added_files_count > 0

    def has_existing_files(self) -> bool:
        return self.existing_files_count is None or self.existing_files_count > 0

    def has_deleted_files(self) -> bool:
        return self.deleted_files_count is None or self.deleted_files_count > 0


class FileIOLike(Protocol):
    """The part of ``tablestore.io.FileIO`` this module uses."""

    def new_input(self, path: str) -> Any: ...

    def new_output(self, path: str) -> Any: ...


_CONTENT = {c.value: c for c in DataFileContent}
_STATUS = {s.value: s for s in ManifestEntryStatus}
_MANIFEST_CONTENT = {c.value: c for c in ManifestContent}
_FORMATS = {f.value: f for f in FileFormat}


def _file_format(value: str) -> FileFormat:
    found = _FORMATS.get(value)
    if found is None:
        try:
            found = FileFormat(value)
        except ValueError:
            raise CorruptMetadataError(f"unknown data file format {value!r} in a manifest") from None
    return found


# -- partition summaries -----------------------------------------------------------------------


class _FieldStats:
    __slots__ = ("contains_nan", "contains_null", "field_type", "lower", "upper")

    def __init__(self, field_type: Any) -> None:
        self.field_type = field_type
        self.contains_null = False
        self.contains_nan = False
        self.lower: Any = None
        self.upper: Any = None

    def update(self, value: Any) -> None:
        if value is None:
            self.contains_null = True
        elif isinstance(value, float) and math.isnan(value):
            self.contains_nan = True
        elif self.lower is None:
            self.lower = self.upper = value
        elif value < self.lower:
            self.lower = value
        elif value > self.upper:
            self.upper = value
        elif value == 0 and isinstance(value, float):
            # The spec orders -0.0 before +0.0: a -0.0 must not be summarized by a +0.0 lower
            # bound, nor a +0.0 by a -0.0 upper bound.
            if math.copysign(1.0, value) < 0:
                if value == self.lower:
                    self.lower = value
            elif value == self.upper:
                self.upper = value

    def summary(self) -> FieldSummary:
        return FieldSummary(
            self.contains_null,
            self.contains_nan,
            None if self.lower is None else to_bytes(self.field_type, self.lower),
            None if self.upper is None else to_bytes(self.field_type, self.upper),
        )


def partition_summaries(partition_type: Any, partitions: Iterable[tuple[Any, ...]]) -> list[FieldSummary]:
    """Field summaries (null/NaN flags and bounds) over the partition tuples of a manifest."""
    stats = [_FieldStats(f.field_type) for f in partition_type.fields]
    for values in partitions:
        for s, v in zip(stats, values, strict=False):
            s.update(v)
    return [s.summary() for s in stats]


# -- writing manifests -------------------------------------------------------------------------


def write_manifest(
    io_: FileIOLike,
    path: str,
    spec: Any,
    schema: Any,
    snapshot_id: int,
    entries: Iterable[ManifestEntry],
    content: ManifestContent = ManifestContent.DATA,
    format_version: int = 2,
) -> ManifestFile:
    """Write a manifest of ``entries`` for files of ``spec`` and return its manifest-list record.

    ADDED entries get ``snapshot_id`` and a null file sequence number (inherited from the manifest
    list); their data sequence number is written only if the entry carries one (a rewrite keeping
    the original data sequence number), else it is null too. DELETED entries record
    ``snapshot_id`` as the deleting snapshot. EXISTING and DELETED entries keep their sequence
    numbers, which must be known in v2.
    """
    if format_version not in (1, 2, 3):
        raise ValidationError(f"cannot write manifests of format version {format_version}; use 1, 2 or 3")
    if format_version == 1 and content != ManifestContent.DATA:
        raise ValidationError("format version 1 tables cannot store delete files")
    partition_type = spec.partition_type(schema)
    writers = partition_value_writers(partition_type)
    names = [f["name"] for f in _partition_fields(partition_type)]
    avro_schema = manifest_entry_schema(partition_type, format_version)

    counts = {s: [0, 0] for s in ManifestEntryStatus}  # files, rows
    min_sequence_number: int | None = None
    partitions: list[tuple[Any, ...]] = []
    records: list[dict[str, Any]] = []
    for entry in entries:
        status = ManifestEntryStatus(entry.status)
        df = entry.data_file
        entry_snapshot: int | None
        if status == ManifestEntryStatus.ADDED:
            entry_snapshot, seq, file_seq = snapshot_id, entry.sequence_number, None
        else:
            entry_snapshot = snapshot_id if status == ManifestEntryStatus.DELETED else entry.snapshot_id
            seq, file_seq = entry.sequence_number, entry.file_sequence_number
            if format_version >= 2 and (seq is None or file_seq is None):
                raise ValidationError(
                    f"{status.name} manifest entry for {df.file_path} has no sequence numbers; "
                    "only ADDED entries may inherit them"
                )
        if entry_snapshot is None:
            raise ValidationError(f"manifest entry for {df.file_path} has no snapshot id")
        counts[status][0] += 1
        counts[status][1] += df.record_count
        if status != ManifestEntryStatus.DELETED and seq is not None and (
            min_sequence_number is None or seq < min_sequence_number
        ):
            min_sequence_number = seq
        if len(df.partition) != len(names):
            raise ValidationError(
                f"partition {df.partition!r} of {df.file_path} does not match spec {spec.spec_id} "
                f"with {len(names)} field(s)"
            )
        partitions.append(df.partition)
        records.append(
            _entry_record(status, entry_snapshot, seq, file_seq, df, names, writers, format_version)
        )

    meta = {
        "schema": json.dumps(schema.to_json()),
        "schema-id": str(schema.schema_id),
        "partition-spec": json.dumps(spec.to_json()["fields"]),
        "partition-spec-id": str(spec.spec_id),
        "format-version": str(format_version),
    }
    if format_version >= 2:
        meta["content"] = "deletes" if content == ManifestContent.DELETES else "data"
    data = _write_avro(avro_schema, records, meta)
    io_.new_output(path).write(data)
    return ManifestFile(
        manifest_path=path,
        manifest_length=len(data),
        partition_spec_id=spec.spec_id,
        content=ManifestContent(content),
        sequence_number=UNASSIGNED_SEQUENCE_NUMBER,
        min_sequence_number=_or_unassigned(min_sequence_number),
        added_snapshot_id=snapshot_id,
        added_files_count=counts[ManifestEntryStatus.ADDED][0],
        existing_files_count=counts[ManifestEntryStatus.EXISTING][0],
        deleted_files_count=counts[ManifestEntryStatus.DELETED][0],
        added_rows_count=counts[ManifestEntryStatus.ADDED][1],
        existing_rows_count=counts[ManifestEntryStatus.EXISTING][1],
        deleted_rows_count=counts[ManifestEntryStatus.DELETED][1],
        partitions=partition_summaries(partition_type, partitions),
        key_metadata=None,
    )


def _or_unassigned(value: int | None) -> int:
    return UNASSIGNED_SEQUENCE_NUMBER if value is None else value


def _partition_fields(partition_type: Any) -> list[dict[str, Any]]:
    fields: list[dict[str, Any]] = partition_record(partition_type)["fields"]
    return fields


def _entry_record(
    status: ManifestEntryStatus,
    snapshot_id: int,
    seq: int | None,
    file_seq: int | None,
    df: DataFile,
    names: list[str],
    writers: list[Callable[[Any], Any] | None],
    format_version: int,
) -> dict[str, Any]:
    partition = {
        name: (w(v) if w is not None and v is not None else v)
        for name, w, v in zip(names, writers, df.partition, strict=True)
    }
    data_file: dict[str, Any] = {
        "content": int(df.content),
        "file_path": df.file_path,
        "file_format": FileFormat(df.file_format).value,
        "partition": partition,
        "record_count": df.record_count,
        "file_size_in_bytes": df.file_size_in_bytes,
        "block_size_in_bytes": V1_BLOCK_SIZE,
        "column_sizes": df.column_sizes,
        "value_counts": df.value_counts,
        "null_value_counts": df.null_value_counts,
        "nan_value_counts": df.nan_value_counts,
        "lower_bounds": df.lower_bounds,
        "upper_bounds": df.upper_bounds,
        "key_metadata": df.key_metadata,
        "split_offsets": df.split_offsets,
        "equality_ids": df.equality_ids,
        "sort_order_id": df.sort_order_id,
        "referenced_data_file": df.referenced_data_file,
        "first_row_id": df.first_row_id,
        "content_offset": df.content_offset,
        "content_size_in_bytes": df.content_size_in_bytes,
    }
    record: dict[str, Any] = {"status": int(status), "snapshot_id": snapshot_id, "data_file": data_file}
    if format_version >= 2:
        record["sequence_number"] = seq
        record["file_sequence_number"] = file_seq
    return record


def _write_avro(schema: dict[str, Any], records: list[dict[str, Any]], meta: dict[str, str]) -> bytes:
    # deflate is what Java writes by default (write.avro.compression-codec=gzip).
    return write_container(schema, records, meta, codec="deflate")


# -- reading manifests -------------------------------------------------------------------------


def _open(data: bytes, what: str, normalize: Callable[[dict[str, Any]], Any]) -> tuple[list[Any], Any]:
    """The records of an Avro container, decoded with canonical field names, and whatever
    ``normalize`` returned for the schema (the partition record for manifests)."""
    _, schema = read_schema(data, what)
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise CorruptMetadataError(f"{what} does not hold Avro records")
    extra = normalize(schema)
    return read_records(data, schema, what), extra


def _partition_positions(
    record: dict[str, Any] | None, meta: dict[str, bytes], spec: PartitionSpec | None
) -> list[int | None] | None:
    """Where each field of the manifest's partition spec sits in its Avro partition struct.

    The spec says the struct's fields carry the partition field ids, and readers match them by
    id, as Java does: a writer may put the fields in another order, or more of them than the
    spec has (DuckDB does after partition evolution). The spec is the table's, by the manifest
    list's spec id; without it, the one the manifest's header names. ``None`` when the struct is
    the spec's fields in order (nothing to project), or when the struct has no field ids (an old
    writer's: read by position).
    """
    if record is None:
        return None
    struct_ids = [f.get(FIELD_ID) for f in record.get("fields", [])]
    if spec is not None:
        spec_ids = [f.field_id for f in spec.fields]
    else:
        try:
            spec_ids = [int(f["field-id"]) for f in json.loads(meta["partition-spec"])]
        except (KeyError, ValueError, TypeError):
            return None
    if struct_ids == spec_ids or not all(isinstance(i, int) for i in struct_ids):
        return None
    # A spec field the struct lacks reads as null, as in Java's projection by id.
    return [struct_ids.index(i) if i in struct_ids else None for i in spec_ids]


def read_manifest(
    io_: FileIOLike,
    manifest_file: ManifestFile,
    partition_filter: Callable[[tuple[Any, ...]], bool] | None = None,
    discard_deleted: bool = False,
    specs: Mapping[int, PartitionSpec] | None = None,
) -> list[ManifestEntry]:
    """The entries of a manifest, with snapshot ids and sequence numbers inherited per the spec.

    ``partition_filter`` drops entries whose partition tuple it rejects before anything else is
    converted; ``discard_deleted`` drops DELETED entries (scans never use them). ``specs`` are
    the table's partition specs by id: partition tuples are read by field id in the order of
    the manifest's spec (see ``_partition_positions``).
    """
    path = manifest_file.manifest_path
    data = io_.new_input(path).read()
    what = f"manifest {path}"
    meta, schema = read_schema(data, what)
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise CorruptMetadataError(f"{what} does not hold Avro records")
    partition_struct = normalize_entry_schema(schema)
    converters = partition_converters(partition_struct)
    spec = specs.get(manifest_file.partition_spec_id) if specs is not None else None
    positions = _partition_positions(partition_struct, meta, spec)
    if positions is not None:
        converters = [converters[i] if i is not None else None for i in positions]
    needs_conversion = any(c is not None for c in converters)
    keep = None
    if partition_filter is not None:
        # Decided once per distinct partition, and entries of rejected partitions are stepped
        # over undecoded: planning a selective scan costs little more than reading the bytes.
        accept = partition_filter

        def keep_partition(raw: tuple[Any, ...]) -> bool:
            if positions is not None:
                raw = tuple(raw[i] if i is not None else None for i in positions)
            value = tuple(v if c is None or v is None else c(v)
                          for c, v in zip(converters, raw, strict=True)) if needs_conversion else raw
            return bool(accept(value))

        keep = ("data_file", "partition", keep_partition)
        partition_filter = None  # applied while decoding
    try:
        records = read_records(data, schema, what, keep)
    except (KeyError, ValueError, TypeError) as e:
        raise CorruptMetadataError(f"cannot read {what}: {type(e).__name__}: {e}") from e
    manifest_seq = manifest_file.sequence_number
    manifest_snapshot = manifest_file.added_snapshot_id
    spec_id = manifest_file.partition_spec_id
    added = ManifestEntryStatus.ADDED
    out: list[ManifestEntry] = []
    append = out.append
    try:
        for rec in records:
            status = _STATUS[rec["status"]]
            if discard_deleted and status is ManifestEntryStatus.DELETED:
                continue
            df = rec["data_file"]
            raw = df["partition"]
            values = raw.values()
            if positions is not None:
                listed = list(values)
                values = [listed[i] if i is not None else None for i in positions]
            if needs_conversion:
                partition = tuple(
                    v if c is None or v is None else c(v)
                    for c, v in zip(converters, values, strict=True)
                )
            else:
                partition = tuple(values)
            if partition_filter is not None and not partition_filter(partition):
                continue
            snapshot_id = rec["snapshot_id"]
            if snapshot_id is None:
                snapshot_id = manifest_snapshot
            # v1 manifests have no sequence numbers (read as 0); in v2 only ADDED entries inherit.
            seq = rec.get("sequence_number")
            file_seq = rec.get("file_sequence_number")
            if seq is None and (manifest_seq == 0 or status is added):
                seq = manifest_seq
            if file_seq is None and (manifest_seq == 0 or status is added):
                file_seq = manifest_seq
            data_file = DataFile(
                _CONTENT[df.get("content", 0)],
                df["file_path"],
                _file_format(df["file_format"]),
                partition,
                df["record_count"],
                df["file_size_in_bytes"],
                df.get("column_sizes"),
                df.get("value_counts"),
                df.get("null_value_counts"),
                df.get("nan_value_counts"),
                df.get("lower_bounds"),
                df.get("upper_bounds"),
                df.get("key_metadata"),
                df.get("split_offsets"),
                df.get("equality_ids"),
                df.get("sort_order_id"),
                spec_id,
                df.get("referenced_data_file"),
                df.get("content_offset"),
                df.get("content_size_in_bytes"),
                df.get("first_row_id"),
            )
            append(ManifestEntry(status, snapshot_id, seq, file_seq, data_file))
    except (KeyError, ValueError, TypeError) as e:
        raise CorruptMetadataError(f"cannot read {what}: {type(e).__name__}: {e}") from e
    return out


def inherit_first_row_ids(manifest_file: ManifestFile, entries: list[ManifestEntry]) -> list[ManifestEntry]:
    """Entries with each data file's ``first_row_id`` inherited (format/spec.md, "First Row ID Inheritance").

    A null ``first_row_id`` becomes the manifest's ``first_row_id`` plus the record counts of the
    live (ADDED or EXISTING) files before it in the manifest that also had none. DELETED entries
    take no ids: the manifest list reserved ids only for added and existing rows (Java's reader
    skips them too). ``entries`` must be the manifest's whole
    entry list in file order (read without a partition filter), since skipped entries shift the
    ids of later ones. A manifest without ``first_row_id`` (written before a v3 upgrade) leaves
    every id null, and delete files never have one.
    """
    if manifest_file.first_row_id is None or manifest_file.content != ManifestContent.DATA:
        return entries
    next_id = manifest_file.first_row_id
    out = []
    for entry in entries:
        df = entry.data_file
        if df.first_row_id is None and entry.status != ManifestEntryStatus.DELETED:
            df = dataclasses.replace(df, first_row_id=next_id)
            next_id += df.record_count
            entry = ManifestEntry(entry.status, entry.snapshot_id, entry.sequence_number,
                                  entry.file_sequence_number, df)
        out.append(entry)
    return out


def read_manifest_metadata(io_: FileIOLike, path: str) -> dict[str, str]:
    """The key-value metadata of a manifest (``schema``, ``partition-spec``, ``content``, ...)."""
    meta, _ = read_header(io_.new_input(path).read(), f"manifest {path}")
    return {k: v.decode("utf-8") for k, v in meta.items() if not k.startswith("avro.")}


# -- manifest lists ----------------------------------------------------------------------------


def write_manifest_list(
    io_: FileIOLike,
    path: str,
    snapshot_id: int,
    parent_snapshot_id: int | None,
    sequence_number: int,
    manifests: Sequence[ManifestFile],
    format_version: int = 2,
    first_row_id: int | None = None,
) -> list[ManifestFile]:
    """Write the manifest list of a snapshot; returns the manifests as written.

    Manifests added by this snapshot (sequence number still unassigned) get ``sequence_number``,
    and so does their ``min_sequence_number`` if none of their entries carried one.

    In format v3 every data manifest must already have its ``first_row_id``: the snapshot
    producer assigns them with :func:`assign_first_row_ids` from the snapshot's
    ``first_row_id`` (the table's ``next-row-id``), which is written as the list's
    ``first-row-id`` metadata.
    """
    if format_version not in (1, 2, 3):
        raise ValidationError(f"cannot write manifest lists of format version {format_version}; use 1, 2 or 3")
    if format_version >= 3:
        unassigned = [m.manifest_path for m in manifests
                      if m.content == ManifestContent.DATA and m.first_row_id is None]
        if first_row_id is None or unassigned:
            raise ValidationError(
                "a snapshot of a format v3 table needs its first-row-id and a first_row_id for every data manifest "
                f"(unassigned: {unassigned[:3]}); assign them with assign_first_row_ids from the table's next-row-id"
            )
    written: list[ManifestFile] = []
    records = []
    for m in manifests:
        seq, min_seq = m.sequence_number, m.min_sequence_number
        if seq == UNASSIGNED_SEQUENCE_NUMBER or min_seq == UNASSIGNED_SEQUENCE_NUMBER:
            if m.added_snapshot_id != snapshot_id:
                raise ValidationError(
                    f"manifest {m.manifest_path} from snapshot {m.added_snapshot_id} has no sequence number; "
                    f"only manifests added by snapshot {snapshot_id} may be assigned one"
                )
            if seq == UNASSIGNED_SEQUENCE_NUMBER:
                seq = sequence_number
            if min_seq == UNASSIGNED_SEQUENCE_NUMBER:
                min_seq = sequence_number
        if format_version == 1 and m.content != ManifestContent.DATA:
            raise ValidationError("format version 1 tables cannot store delete manifests")
        final = ManifestFile(
            m.manifest_path, m.manifest_length, m.partition_spec_id, m.content, seq, min_seq,
            m.added_snapshot_id, m.added_files_count, m.existing_files_count, m.deleted_files_count,
            m.added_rows_count, m.existing_rows_count, m.deleted_rows_count, m.partitions, m.key_metadata,
            m.first_row_id,
        )
        written.append(final)
        records.append(_manifest_record(final))
    meta = {
        "snapshot-id": str(snapshot_id),
        "parent-snapshot-id": "null" if parent_snapshot_id is None else str(parent_snapshot_id),
        "format-version": str(format_version),
    }
    if format_version >= 2:
        meta["sequence-number"] = str(sequence_number)
    if format_version >= 3:
        meta["first-row-id"] = str(first_row_id)
    io_.new_output(path).write(_write_avro(manifest_file_schema(format_version), records, meta))
    return written


def assign_first_row_ids(manifests: Sequence[ManifestFile], first_row_id: int) -> tuple[list[ManifestFile], int]:
    """Give each data manifest without a ``first_row_id`` one (format/spec.md, "First Row ID Assignment").

    Starting at the snapshot's ``first_row_id``, each such manifest takes the next id and
    reserves its added and existing rows (existing files may lack ids too, in a table upgraded to
    v3). Returns the manifests and the number of ids reserved: the snapshot's ``added-rows``, by
    which the commit advances the table's ``next-row-id``.
    """
    next_id = first_row_id
    out = []
    for m in manifests:
        if m.content == ManifestContent.DATA and m.first_row_id is None:
            if m.added_rows_count is None or m.existing_rows_count is None:
                raise ValidationError(f"manifest {m.manifest_path} has no row counts, so row ids cannot be assigned")
            m = dataclasses.replace(m, first_row_id=next_id)
            next_id += m.added_rows_count + m.existing_rows_count  # type: ignore[operator]
        out.append(m)
    return out, next_id - first_row_id


def _manifest_record(m: ManifestFile) -> dict[str, Any]:
    return {
        "manifest_path": m.manifest_path,
        "manifest_length": m.manifest_length,
        "partition_spec_id": m.partition_spec_id,
        "content": int(m.content),
        "sequence_number": m.sequence_number,
        "min_sequence_number": m.min_sequence_number,
        "added_snapshot_id": m.added_snapshot_id,
        "added_files_count": m.added_files_count,
        "existing_files_count": m.existing_files_count,
        "deleted_files_count": m.deleted_files_count,
        "added_rows_count": m.added_rows_count,
        "existing_rows_count": m.existing_rows_count,
        "deleted_rows_count": m.deleted_rows_count,
        "partitions": None if m.partitions is None else [
            {"contains_null": s.contains_null, "contains_nan": s.contains_nan,
             "lower_bound": s.lower_bound, "upper_bound": s.upper_bound}
            for s in m.partitions
        ],
        "key_metadata": m.key_metadata,
        "first_row_id": m.first_row_id,
    }


def snapshot_manifests(io_: FileIOLike, snapshot: Any) -> list[ManifestFile]:
    """The manifests of a snapshot (v1 snapshots that list manifests inline are not supported)."""
    if snapshot.manifest_list is None:
        raise UnsupportedError(
            f"snapshot {snapshot.snapshot_id} lists its manifests inline (a format v1 table from an old writer); "
            "rewrite the table's manifests with a current Iceberg writer first"
        )
    return read_manifest_list(io_, snapshot.manifest_list)


def read_manifest_list(io_: FileIOLike, path: str) -> list[ManifestFile]:
    """The manifests of a manifest list; v1 lists read with content DATA and sequence numbers 0."""
    data = io_.new_input(path).read()
    what = f"manifest list {path}"
    records, _ = _open(data, what, normalize_manifest_file_schema)
    out = []
    try:
        for r in records:
            parts = r.get("partitions")
            out.append(ManifestFile(
                manifest_path=r["manifest_path"],
                manifest_length=r["manifest_length"],
                partition_spec_id=r["partition_spec_id"],
                content=_MANIFEST_CONTENT[r.get("content") or 0],
                sequence_number=r.get("sequence_number") or 0,
                min_sequence_number=r.get("min_sequence_number") or 0,
                added_snapshot_id=r["added_snapshot_id"],
                added_files_count=r.get("added_files_count"),
                existing_files_count=r.get("existing_files_count"),
                deleted_files_count=r.get("deleted_files_count"),
                added_rows_count=r.get("added_rows_count"),
                existing_rows_count=r.get("existing_rows_count"),
                deleted_rows_count=r.get("deleted_rows_count"),
                partitions=None if parts is None else [
                    FieldSummary(
                        p["contains_null"], p.get("contains_nan"), p.get("lower_bound"), p.get("upper_bound")
                    )
                    for p in parts
                ],
                key_metadata=r.get("key_metadata"),
                first_row_id=r.get("first_row_id"),
            ))
    except (KeyError, ValueError, TypeError) as e:
        raise CorruptMetadataError(f"cannot read {what}: {type(e).__name__}: {e}") from e
    return out


__all__ = [
    "UNASSIGNED_SEQUENCE_NUMBER",
    "DataFile",
    "DataFileContent",
    "FieldSummary",
    "FileFormat",
    "ManifestContent",
    "ManifestEntry",
    "ManifestEntryStatus",
    "ManifestFile",
    "partition_summaries",
    "read_manifest",
    "read_manifest_list",
    "read_manifest_metadata",
    "write_manifest",
    "write_manifest_list",
]
