"""Hive-style partition management on an Iceberg table: list, describe, drop and rename partitions.

A partition is named as in Hive's ``PARTITION (k='v', ...)``: ``k`` is a partition field name
(``country``, ``ts_day``, ``ts_hour``) or a column with an identity partition, and ``'v'`` is the
value as ``SHOW PARTITIONS`` prints it (``2024-05-03`` for a day, ``2024-05-03-13`` for an hour).
Names may come from any spec of the table, so partitions written before a partition evolution
can still be named.

A file matches a partition by its partition tuple when its spec has the field (or an identity
on the same column, or a finer time field: an hourly file lies in one day). Such files are
dropped or moved whole from metadata. Files whose spec cannot tell are read, and only their
matching rows are dropped or moved: the rest is rewritten. Each operation is one commit.

    >>> import pyarrow as pa, tablestore, tempfile
    >>> wh = tempfile.mkdtemp()
    >>> catalog = tablestore.load_catalog("local", type="sql", uri=f"sqlite:///{wh}/catalog.db", warehouse=wh)
    >>> catalog.create_namespace("db")
    >>> t = catalog.create_table("db.t", schema=pa.schema([("id", pa.int64()), ("country", pa.string())]),
    ...                          partition_by=["country"])
    >>> _ = t.append(pa.table({"id": [1, 2, 3], "country": ["de", "fr", "de"]}))
    >>> partition_names(t)
    ['country=de', 'country=fr']
    >>> drop_partitions(t, [[("country", "de")]]).deleted_rows
    2
    >>> partition_names(t)
    ['country=fr']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tablestore.errors import NoSuchPartitionError, PartitionAlreadyExistsError, ValidationError
from tablestore.spec.expressions.expression_tree import AlwaysTrue
from tablestore.spec.manifests.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    read_manifest,
    snapshot_manifests,
)
from tablestore.spec.partitioning.partition_spec import PartitionField, PartitionSpec
from tablestore.spec.partitioning.transforms import (
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    VoidTransform,
    YearTransform,
)
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.row_lineage import mark_updated
from tablestore.spec.schemas.schema import Schema, type_to_arrow
from tablestore.spec.schemas.types import DateType, IcebergType, TimestampNanoType, TimestamptzNanoType
from tablestore.table.read.file_rows import read_file_rows, rewrite_schema
from tablestore.table.read.scan import FileTask, plan_files
from tablestore.table.update.snapshot import OverwriteFiles
from tablestore.table.update.transaction import commit_snapshot
from tablestore.table.update.validation import Check, no_new_data_files
from tablestore.table.write.conform import conform_to_schema
from tablestore.table.write.data_files import WriteContext, split_by_partition, write_data_files

if TYPE_CHECKING:
    from tablestore.table import Table

__all__ = [
    "HIVE_DEFAULT_PARTITION", "DropResult", "PartitionKey", "PartitionStats", "drop_partitions", "hive_escape",
    "partition_names", "partition_stats", "rename_partition", "resolve_partition",
]

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
PartitionValues = Sequence[tuple[str, str | None]]
"""``PARTITION (k='v', k2='v2')`` as pairs of name and value text (None: a null value)."""

# Time transforms from finest to coarsest: a file of a finer one lies in one partition of a coarser one.
_TIME_RANK = {"hour": 0, "day": 1, "month": 2, "year": 3}
_YES, _NO, _UNKNOWN = "yes", "no", "unknown"


# -- naming partitions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionKey:
    """One ``k='v'`` of a partition spec, resolved: a transform of a column and its internal value."""

    name: str
    source_id: int
    transform: Transform
    value: Any
    text: str | None

    @property
    def column_key(self) -> bool:
        return isinstance(self.transform, IdentityTransform)


def _all_fields(table: Table) -> list[PartitionField]:
    """Partition fields of every spec, the current spec first, then newest to oldest."""
    specs = [table.spec(), *sorted(table.metadata.partition_specs, key=lambda s: -s.spec_id)]
    return [f for s in specs for f in s.fields if not isinstance(f.transform, VoidTransform)]


def partition_field_names(table: Table) -> list[str]:
    names: list[str] = []
    for f in _all_fields(table):
        if f.name not in names:
            names.append(f.name)
    return names


def resolve_partition(table: Table, values: PartitionValues) -> list[PartitionKey]:
    """Resolve ``PARTITION (k='v', ...)``; ValidationError for unknown names, repeats or bad values."""
    schema = table.schema()
    fields = _all_fields(table)
    keys: list[PartitionKey] = []
    seen: set[str] = set()
    for name, text in values:
        field = next((f for f in fields if f.name == name), None) or next(
            (f for f in fields if f.name.lower() == name.lower()), None)
        if field is None:
            column_id = schema.find_field_id(name, case_sensitive=False)
            field = next((f for f in fields if f.source_id == column_id and isinstance(f.transform, IdentityTransform)),
                         None) if column_id is not None else None
        if field is None:
            raise ValidationError(
                f"PARTITION ({name}=...) names neither a partition field nor a partition column of {table.name}; "
                f"its partition fields are: {', '.join(partition_field_names(table)) or 'none (it is unpartitioned)'}"
            )
        if field.name in seen:
            raise ValidationError(f"PARTITION names {field.name!r} twice")
        seen.add(field.name)
        keys.append(PartitionKey(field.name, field.source_id, field.transform,
                                 _partition_value(schema, field, name, text), text))
    return keys


def _partition_value(schema: Schema, field: PartitionField, name: str, text: str | None) -> Any:
    if text is None or text == HIVE_DEFAULT_PARTITION:
        return None
    source = schema.find_type(field.source_id)
    t = field.transform
    try:
        if isinstance(t, HourTransform | MonthTransform | YearTransform):
            return _time_value(t, text)
        result = t.result_type(source)
        return conversions.from_python(result, text)
    except (ValidationError, ValueError) as e:
        expected = {"hour": "'yyyy-MM-dd-HH'", "month": "'yyyy-MM'", "year": "'yyyy'", "day": "'yyyy-MM-dd'"}.get(
            str(t), f"a {t.result_type(source)} value")
        raise ValidationError(
            f"partition value {text!r} for {name!r} is not valid: expected {expected} ({e})"
        ) from None


def _time_value(t: Transform, text: str) -> int:
    if re.fullmatch(r"-?\d+", text) and not isinstance(t, YearTransform):
        return int(text)  # the internal value, as metadata tables show hours and months
    if isinstance(t, HourTransform) and (m := re.fullmatch(r"(\d{4}-\d{2}-\d{2})-(\d{2})", text)):
        days = conversions.from_python(DateType(), m.group(1))
        return int(days) * 24 + int(m.group(2))
    if isinstance(t, MonthTransform) and (m := re.fullmatch(r"(\d{4})-(\d{2})", text)):
        return (int(m.group(1)) - 1970) * 12 + int(m.group(2)) - 1
    if isinstance(t, YearTransform) and re.fullmatch(r"\d{4}", text):
        return int(text) - 1970
    raise ValidationError(f"cannot read {text!r} as a {t} partition value")


# -- matching files ---------------------------------------------------------------------------------


def _representative(transform: Transform, value: int, source: IcebergType) -> Any:
    """A source value inside the time partition ``value`` (its first instant)."""
    name = str(transform)
    per_second = 1_000_000_000 if isinstance(source, TimestampNanoType | TimestamptzNanoType) else 1_000_000
    if name == "hour":
        return value * 3600 * per_second
    if name == "day":
        days = value
    elif name == "month":
        days = int(conversions.from_python(DateType(), f"{1970 + value // 12:04d}-{value % 12 + 1:02d}-01"))
    else:
        days = int(conversions.from_python(DateType(), f"{1970 + value:04d}-01-01"))
    return days if isinstance(source, DateType) else days * 86400 * per_second


def _key_status(key: PartitionKey, spec: PartitionSpec, partition: tuple[Any, ...], schema: Schema) -> str:
    source = schema.find_type(key.source_id)
    fallback = _UNKNOWN
    for f, value in zip(spec.fields, partition, strict=False):
        if f.source_id != key.source_id or isinstance(f.transform, VoidTransform):
            continue
        if str(f.transform) == str(key.transform):
            return _YES if value == key.value else _NO
        derived: Any = _UNKNOWN
        if isinstance(f.transform, IdentityTransform):
            derived = key.transform.apply(value, source)
        elif (str(f.transform) in _TIME_RANK and str(key.transform) in _TIME_RANK
              and _TIME_RANK[str(f.transform)] < _TIME_RANK[str(key.transform)]):
            derived = None if value is None else key.transform.apply(
                _representative(f.transform, value, source), source)
        elif (str(f.transform) in _TIME_RANK and str(key.transform) in _TIME_RANK
              and key.value is not None and value is not None
              and f.transform.apply(_representative(key.transform, key.value, source), source) != value):
            # A finer partition lies in one coarser one: a day file cannot hold another day's hour.
            return _NO
        if derived is not _UNKNOWN:
            fallback = _YES if derived == key.value else _NO
    return fallback


def partition_status(keys: Sequence[PartitionKey], spec: PartitionSpec, partition: tuple[Any, ...],
                     schema: Schema) -> str:
    """Whether every row of a file in ``partition`` of ``spec`` is in the partition (yes), none (no),
    or the spec cannot tell (unknown)."""
    statuses = [_key_status(k, spec, partition, schema) for k in keys]
    if _NO in statuses:
        return _NO
    return _YES if all(s == _YES for s in statuses) else _UNKNOWN


def _split_rows(rows: pa.Table, keys_list: Sequence[Sequence[PartitionKey]],
                schema: Schema) -> tuple[list[pa.Table], list[pa.Table], list[int]]:
    """Rows in any of the partitions, the other rows, and how many rows each partition got."""
    all_keys: list[tuple[int, str]] = []
    for keys in keys_list:
        for k in keys:
            if (k.source_id, str(k.transform)) not in all_keys:
                all_keys.append((k.source_id, str(k.transform)))
    transforms = {(k.source_id, str(k.transform)): k.transform for keys in keys_list for k in keys}
    spec = PartitionSpec(0, tuple(PartitionField(sid, 1000 + i, transforms[(sid, t)], f"k{i}")
                                  for i, (sid, t) in enumerate(all_keys)))
    matched: list[pa.Table] = []
    others: list[pa.Table] = []
    counts = [0] * len(keys_list)
    for part in split_by_partition(spec, schema, rows):
        values = dict(zip(all_keys, part.partition, strict=True))
        hit = next((i for i, keys in enumerate(keys_list)
                    if all(values[(k.source_id, str(k.transform))] == k.value for k in keys)), None)
        if hit is None:
            others.append(part.rows)
        else:
            counts[hit] += part.num_rows
            matched.append(part.rows)
    return matched, others, counts


def _file_schema(table: Table) -> Schema:
    # Rows these operations move keep their lineage on v3.
    return rewrite_schema(table.schema(), table.metadata.format_version)


def _read_all(table: Table, task: FileTask) -> pa.Table:
    schema = table.schema()
    spec = table.metadata.spec_for(task.spec_id)
    file_schema = _file_schema(table)
    rows = read_file_rows(table.io, table.properties, task.file, task.delete_files, spec, schema, file_schema,
                          task.data_sequence_number)
    return conform_to_schema(rows, file_schema)


def _write_moved(table: Table, rows: pa.Table) -> list[DataFile]:
    ctx = table.write_context()
    ctx = WriteContext(ctx.io, ctx.location, _file_schema(table), ctx.spec, ctx.properties)
    return write_data_files(ctx, rows, table.engine.map)


# -- listing and statistics -------------------------------------------------------------------------


_HIVE_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(1, 32)}


def hive_escape(text: str) -> str:
    """Hive's ``FileUtils.escapePathName``: what SHOW PARTITIONS prints for names and values."""
    return "".join(f"%{ord(ch):02X}" if ch in _HIVE_ESCAPED else ch for ch in text)


def _hive_name(spec: PartitionSpec, partition: tuple[Any, ...], schema: Schema) -> str:
    types = spec.partition_type(schema).fields
    parts = []
    for f, t, value in zip(spec.fields, types, partition, strict=True):
        if isinstance(f.transform, VoidTransform):
            continue  # a field dropped from a v1 table holds only nulls
        human = HIVE_DEFAULT_PARTITION if value is None else f.transform.to_human_string(t.field_type, value)
        parts.append(f"{hive_escape(f.name)}={hive_escape(human)}")
    return "/".join(parts)


def _live_data_entries(table: Table) -> list[ManifestEntry]:
    snapshot = table.current_snapshot()
    if snapshot is None:
        return []
    manifests = [m for m in snapshot_manifests(table.io, snapshot) if m.content == ManifestContent.DATA]
    out: list[ManifestEntry] = []
    specs = table.specs()
    for entries in table.engine.map(lambda m: read_manifest(table.io, m, specs=specs), manifests):
        out.extend(e for e in entries if e.status != ManifestEntryStatus.DELETED
                   and e.data_file.content == DataFileContent.DATA)
    return out


def partition_names(table: Table, values: PartitionValues = ()) -> list[str]:
    """``k=v/k2=v2`` of every partition with live data files, sorted; only those in ``values``
    (a partial ``PARTITION (k='v')``) when given."""
    keys = resolve_partition(table, values) if values else []
    schema = table.schema()
    names: set[str] = set()
    for entry in _live_data_entries(table):
        df = entry.data_file
        spec = table.metadata.spec_for(df.spec_id)
        if spec.is_unpartitioned():
            continue
        if keys and partition_status(keys, spec, tuple(df.partition), schema) != _YES:
            continue
        names.add(_hive_name(spec, tuple(df.partition), schema))
    return sorted(names)


@dataclass(frozen=True)
class PartitionStats:
    """Statistics of the live data files in one partition (or several, summed)."""

    partitions: tuple[str, ...]
    record_count: int
    file_count: int
    total_size_in_bytes: int
    last_updated_at_ms: int | None
    last_updated_snapshot_id: int | None


def partition_stats(table: Table, values: PartitionValues) -> PartitionStats:
    """Record count, file count, size and last update of the partition ``values`` names.

    NoSuchPartitionError when no live data file is in it.
    """
    keys = resolve_partition(table, values)
    schema = table.schema()
    names: set[str] = set()
    records = files = size = 0
    last: tuple[int, int] | None = None
    for entry in _live_data_entries(table):
        df = entry.data_file
        spec = table.metadata.spec_for(df.spec_id)
        if partition_status(keys, spec, tuple(df.partition), schema) != _YES:
            continue
        names.add(_hive_name(spec, tuple(df.partition), schema))
        records += df.record_count
        files += 1
        size += df.file_size_in_bytes
        snapshot = table.metadata.snapshot_by_id(entry.snapshot_id) if entry.snapshot_id is not None else None
        if snapshot is not None and (last is None or snapshot.timestamp_ms > last[0]):
            last = (snapshot.timestamp_ms, snapshot.snapshot_id)
    if not names:
        raise NoSuchPartitionError(
            f"{table.name} has no partition {_spec_text(values)}; SHOW PARTITIONS {table.name} lists its partitions"
        )
    return PartitionStats(tuple(sorted(names)), records, files, size,
                          last[0] if last else None, last[1] if last else None)


def _spec_text(values: PartitionValues) -> str:
    return "(" + ", ".join(f"{k}={'NULL' if v is None else repr(v)}" for k, v in values) + ")"


# -- dropping and renaming --------------------------------------------------------------------------


@dataclass(frozen=True)
class DropResult:
    deleted_rows: int
    files_removed: int
    files_rewritten: int


def _conflict_check(table: Table, keys_list: Sequence[Sequence[PartitionKey]], what: str) -> Check:
    schema = table.schema()

    def in_partitions(f: DataFile) -> bool:
        spec = table.metadata.spec_for(f.spec_id)  # the attempt's metadata: it may hold a new spec
        return any(partition_status(keys, spec, tuple(f.partition), schema) != _NO for keys in keys_list)

    return no_new_data_files(
        in_partitions,
        lambda f: f"a concurrent commit added {f.file_path} to a partition this {what} changes; re-run it",
    )


def _plan(table: Table, keys_list: Sequence[Sequence[PartitionKey]]) -> tuple[list[FileTask], list[FileTask]]:
    """Data files wholly in one of the partitions, and files that may hold some of their rows."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return [], []
    schema = table.schema()
    whole: list[FileTask] = []
    partial: list[FileTask] = []
    for task in plan_files(table.io, table.metadata, snapshot, schema, AlwaysTrue(), table.engine):
        spec = table.metadata.spec_for(task.spec_id)
        statuses = [partition_status(keys, spec, tuple(task.file.partition), schema) for keys in keys_list]
        if _YES in statuses:
            whole.append(task)
        elif _UNKNOWN in statuses:
            partial.append(task)
    return whole, partial


def drop_partitions(table: Table, partitions: Iterable[PartitionValues], if_exists: bool = False,
                    snapshot_properties: dict[str, str] | None = None) -> DropResult:
    """Delete every row of the given partitions in one commit.

    Files wholly inside a partition are removed from metadata; files that only partly are
    rewritten without its rows. A partition without rows raises NoSuchPartitionError unless
    ``if_exists``; then nothing is committed.
    """
    specs = list(partitions)
    keys_list = [resolve_partition(table, values) for values in specs]
    if not keys_list:
        return DropResult(0, 0, 0)
    schema = table.schema()
    whole, partial = _plan(table, keys_list)
    found = [False] * len(keys_list)
    spec_cache = table.metadata.specs()
    for task in whole:
        spec = spec_cache[task.spec_id]
        for i, keys in enumerate(keys_list):
            if partition_status(keys, spec, tuple(task.file.partition), schema) == _YES:
                found[i] = True

    def rewrite(task: FileTask) -> tuple[FileTask, list[pa.Table], list[int], int]:
        rows = _read_all(table, task)
        matched, others, counts = _split_rows(rows, keys_list, schema)
        return task, others, counts, sum(m.num_rows for m in matched)

    deleted: list[DataFile] = [t.file for t in whole]
    deleted_rows = sum(t.file.record_count for t in whole if not t.delete_files)
    deleted_rows += sum(_read_all(table, t).num_rows for t in whole if t.delete_files)
    remainders: list[pa.Table] = []
    rewritten = 0
    for task, others, counts, removed in table.engine.map(rewrite, partial):
        if not removed and not task.delete_files:
            continue
        if removed:
            for i, n in enumerate(counts):
                found[i] = found[i] or n > 0
        deleted.append(task.file)
        remainders.extend(others)
        deleted_rows += removed
        rewritten += 1
    missing = [values for values, hit in zip(specs, found, strict=True) if not hit]
    if missing and not if_exists:
        raise NoSuchPartitionError(
            f"{table.name} has no partition {', '.join(_spec_text(v) for v in missing)}; "
            "use DROP IF EXISTS PARTITION to ignore missing partitions"
        )
    if not deleted:
        return DropResult(0, 0, 0)
    added: list[DataFile] = []
    if remainders:
        rest = pa.concat_tables(remainders)
        if rest.num_rows:
            added = _write_moved(table, rest)
    snapshot = table.current_snapshot()
    commit_snapshot(OverwriteFiles(
        table, deleted, added, "overwrite" if added else "delete", snapshot.snapshot_id if snapshot else None,
        checks=[_conflict_check(table, keys_list, "drop")],
        snapshot_properties=snapshot_properties,
    ))
    return DropResult(deleted_rows, len(deleted) - rewritten, rewritten)


def rename_partition(table: Table, old: PartitionValues, new: PartitionValues,
                     snapshot_properties: dict[str, str] | None = None) -> int:
    """Move every row of partition ``old`` to partition ``new`` in one commit; returns the rows moved.

    Both must name the same identity partition columns; the rows get the new values of those
    columns. NoSuchPartitionError if ``old`` has no rows, PartitionAlreadyExistsError if ``new`` has.
    """
    old_keys = resolve_partition(table, old)
    new_keys = resolve_partition(table, new)
    schema = table.schema()
    for k in [*old_keys, *new_keys]:
        if not k.column_key:
            raise ValidationError(
                f"cannot rename a partition by {k.name!r}: it is {k.transform} of "
                f"{schema.find_column_name(k.source_id)}, and only identity partition columns can take new values"
            )
    if sorted(k.source_id for k in old_keys) != sorted(k.source_id for k in new_keys):
        raise ValidationError(
            f"RENAME TO PARTITION must name the same partition columns as the old partition: "
            f"{', '.join(k.name for k in old_keys)}"
        )
    if any(k.value is None for k in new_keys) and any(
        schema.find_field(k.source_id).required for k in new_keys if k.value is None
    ):
        raise ValidationError("a required partition column cannot be renamed to NULL")
    target_whole, target_partial = _plan(table, [new_keys])
    exists = bool(target_whole) or any(
        _split_rows(_read_all(table, t), [new_keys], schema)[2][0] for t in target_partial)
    if exists:
        raise PartitionAlreadyExistsError(
            f"partition {_spec_text(new)} of {table.name} already exists; drop it first or rename to another partition"
        )
    whole, partial = _plan(table, [old_keys])
    moved: list[pa.Table] = []
    remainders: list[pa.Table] = []
    deleted: list[DataFile] = []
    for task in whole:
        moved.append(_read_all(table, task))
        deleted.append(task.file)
    for task in partial:
        matched, others, _ = _split_rows(_read_all(table, task), [old_keys], schema)
        if matched:
            deleted.append(task.file)
            moved.extend(matched)
            remainders.extend(others)
    rows = pa.concat_tables(moved) if moved else None
    if rows is None or rows.num_rows == 0:
        raise NoSuchPartitionError(
            f"{table.name} has no partition {_spec_text(old)}; SHOW PARTITIONS {table.name} lists its partitions"
        )
    for k in new_keys:
        name = schema.find_column_name(k.source_id)
        t = schema.find_type(k.source_id)
        if name is None or "." in name:
            raise ValidationError(f"cannot rename a partition of the nested column {name!r}")
        top = name
        column = pa.array([k.value] * rows.num_rows, type_to_arrow(t)) if k.value is not None else pa.nulls(
            rows.num_rows, type_to_arrow(t))
        rows = rows.set_column(rows.schema.get_field_index(top), rows.schema.field(top), column)
    rows = mark_updated(rows)  # the moved rows took new values; the remainders are unchanged
    data = pa.concat_tables([rows, *remainders]) if remainders else rows
    added = _write_moved(table, data)
    snapshot = table.current_snapshot()
    commit_snapshot(OverwriteFiles(
        table, deleted, added, "overwrite", snapshot.snapshot_id if snapshot else None,
        checks=[_conflict_check(table, [old_keys, new_keys], "rename")],
        snapshot_properties=snapshot_properties,
    ))
    return rows.num_rows
