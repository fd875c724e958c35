"""External Hive-style tables: an Iceberg table over an existing ``k=v/...`` tree of Parquet files.

The table's location is the tree's root; its metadata goes to ``<location>/metadata`` and
its new data files (INSERT) to ``<location>/k=v/...``, next to the existing ones. The table
property ``EXTERNAL=TRUE`` marks it, as Hive and Spark mark external tables, and
``schema.name-mapping.default`` lets every Iceberg reader match the files' columns by name.

Creating the table registers nothing (as in Hive and Spark, where partitions appear in the
metastore only through MSCK REPAIR or ADD PARTITION). :func:`repair_table` registers what
appeared on storage and removes what vanished, and :func:`add_partitions` registers the files
of one partition from any location. Both copy no data and make one commit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tablestore.errors import AlreadyExistsError, ValidationError
from tablestore.names import normalize_location
from tablestore.spec.schemas.name_mapping import DEFAULT_NAME_MAPPING, NameMapping
from tablestore.spec.schemas.schema import Schema, to_schema
from tablestore.table.ops.import_files import (
    FileToRegister,
    PartitionColumn,
    data_files_for,
    format_partition,
    hive_partition_columns,
    hive_partition_path,
    is_hidden,
    partition_from_path,
    partition_from_values,
    registered_files,
)
from tablestore.table.update.register import RegisterFiles
from tablestore.table.update.transaction import commit_snapshot

if TYPE_CHECKING:
    from tablestore.catalog.base import Catalog
    from tablestore.io.fileio import FileInfo
    from tablestore.spec.manifests.manifest import DataFile
    from tablestore.spec.metadata.table_metadata import Snapshot
    from tablestore.table import Table

EXTERNAL_PROPERTY = "EXTERNAL"
REPAIR_MODES = ("add", "drop", "sync")


def is_external(properties: Mapping[str, str]) -> bool:
    return str(properties.get(EXTERNAL_PROPERTY, "")).strip().upper() == "TRUE"


def create_external_table(
    catalog: Catalog,
    identifier: tuple[str, ...] | str,
    schema: Any,
    partition_columns: Sequence[str],
    location: str,
    properties: Mapping[str, str] | None = None,
) -> Table:
    """Create an external table over ``location``, partitioned by the columns named (identity).

    ``schema`` holds every column, the partition columns included. No file is registered yet:
    run :func:`repair_table` (``MSCK REPAIR TABLE``) for that.
    """
    table_schema: Schema = to_schema(schema)
    location = normalize_location(location)
    existing = [f for f in catalog.io.list_prefix(f"{location}/metadata") if f.path.endswith(".metadata.json")]
    if existing:
        raise AlreadyExistsError(
            f"{location} already holds an Iceberg table ({existing[-1].path}); register it with "
            "catalog.register_table instead of creating an external table over it"
        )
    props = {str(k): str(v) for k, v in (properties or {}).items()}
    props[EXTERNAL_PROPERTY] = "TRUE"
    props.setdefault(DEFAULT_NAME_MAPPING, NameMapping.from_schema(table_schema).to_json())
    # New rows land in the same k=v tree as the existing files, as Hive writes them.
    props.setdefault("write.data.path", location)
    return catalog.create_table(identifier, schema=table_schema, partition_by=list(partition_columns) or None,
                                properties=props, location=location)


def require_external(table: Table, operation: str) -> None:
    if not is_external(table.properties):
        raise ValidationError(
            f"{operation} registers files found on storage, so it runs on external tables only, and "
            f"{table.name} is a managed table (its files are tracked by Iceberg metadata); create the "
            "table with CREATE EXTERNAL TABLE ... LOCATION, or set TBLPROPERTIES ('EXTERNAL'='TRUE')"
        )


@dataclass(frozen=True)
class RepairResult:
    """What one MSCK REPAIR or ADD PARTITION did; ``snapshot`` is None when nothing changed."""

    partitions_added: int = 0
    partitions_dropped: int = 0
    files_added: int = 0
    files_removed: int = 0
    snapshot: Snapshot | None = None


def _partitions(files: Sequence[DataFile] | Any) -> set[tuple[int, tuple[Any, ...]]]:
    return {(f.spec_id, tuple(f.partition)) for f in files}


def list_table_files(table: Table) -> dict[str, FileInfo]:
    """Visible files under the table location, by path: not metadata, not ``_``/``.`` names."""
    location = table.location
    metadata_dir = table.metadata_dir.rstrip("/") + "/"
    out = {}
    for info in table.io.list_prefix(location):
        if info.path.startswith(metadata_dir):
            continue
        if is_hidden(info.path[len(location) + 1:]):
            continue
        out[info.path] = info
    return out


def repair_table(table: Table, mode: str = "add") -> RepairResult:
    """``MSCK REPAIR TABLE``: register files that appeared under the location, drop vanished ones.

    - ``add``: every visible file under the location that the table does not track yet is
      registered, with its partition from its ``k=v`` directories. Iceberg tracks files, not
      directories, so new files in partitions already known are registered too.
    - ``drop``: tracked files that no longer exist are removed from the metadata (nothing is
      deleted on storage): whole partitions whose directories vanished, and single files.
    - ``sync``: both.

    One commit (none when nothing changed); ``partitions_added`` counts partitions that had no
    file before, ``partitions_dropped`` partitions that have none after. A non-Parquet file or
    a directory value that does not convert to its column's type is an error, and nothing is
    committed.
    """
    mode = mode.strip().lower()
    if mode not in REPAIR_MODES:
        raise ValidationError(f"unknown repair mode {mode!r}; use ADD, DROP or SYNC PARTITIONS")
    require_external(table, "MSCK REPAIR TABLE")
    table.refresh()
    spec = table.spec()
    columns = hive_partition_columns(spec, table.schema(), table.name)
    known = registered_files(table)
    listed = list_table_files(table)
    added: list[DataFile] = []
    removed: list[DataFile] = []
    if mode in ("add", "sync"):
        location = table.location + "/"
        todo = [
            FileToRegister(path, info.size, partition_from_path(columns, path[len(location):], path))
            for path, info in sorted(listed.items()) if path not in known
        ]
        added = data_files_for(table, todo)
    if mode in ("drop", "sync"):
        removed = _vanished(table, known, listed)
    return _commit(table, known, added, removed)


def _vanished(table: Table, known: dict[str, DataFile], listed: dict[str, FileInfo]) -> list[DataFile]:
    location = table.location + "/"
    gone = [f for path, f in known.items() if path.startswith(location) and path not in listed]
    # Files registered from other locations (ADD PARTITION ... LOCATION) are looked up one by one.
    elsewhere = [f for path, f in known.items() if not path.startswith(location)]
    exists = table.engine.map(lambda f: table.io.new_input(f.file_path).exists(), elsewhere)
    gone.extend(f for f, present in zip(elsewhere, exists, strict=True) if not present)
    return gone


def _commit(table: Table, known: dict[str, DataFile], added: list[DataFile], removed: list[DataFile]) -> RepairResult:
    before = _partitions(known.values())
    removed_paths = {f.file_path for f in removed}
    after = _partitions([f for path, f in known.items() if path not in removed_paths]) | _partitions(added)
    result = RepairResult(
        partitions_added=len(_partitions(added) - before),
        partitions_dropped=len(before - after),
        files_added=len(added),
        files_removed=len(removed),
    )
    if not added and not removed:
        return result
    snapshot = commit_snapshot(RegisterFiles(table, added, removed))
    return RepairResult(result.partitions_added, result.partitions_dropped, result.files_added,
                        result.files_removed, snapshot)


@dataclass(frozen=True)
class PartitionToAdd:
    """``PARTITION (k='v', ...) [LOCATION 'path']``: values as text; None is a null value."""

    values: Mapping[str, str | None]
    location: str | None = None


def add_partitions(table: Table, partitions: Sequence[PartitionToAdd], if_not_exists: bool = False) -> RepairResult:
    """``ALTER TABLE t ADD PARTITION (...) LOCATION '...'``: register the Parquet files under each
    location with the partition values given (the directory names do not matter).

    Without a location, the partition's directory under the table location (``k=v/k2=v2``) is
    used. A partition that already has files is an error unless ``if_not_exists``; a location
    without Parquet files is an error (Iceberg has no empty partitions). One commit for all.
    """
    require_external(table, "ALTER TABLE ... ADD PARTITION")
    table.refresh()
    spec = table.spec()
    if not spec.fields:
        raise ValidationError(f"table {table.name} is not partitioned; ADD PARTITION needs a partitioned table")
    columns = hive_partition_columns(spec, table.schema(), table.name)
    known = registered_files(table)
    existing = {tuple(f.partition) for f in known.values() if f.spec_id == spec.spec_id}
    todo: list[FileToRegister] = []
    chosen: set[tuple[Any, ...]] = set()
    for item in partitions:
        where = f"ADD PARTITION ({', '.join(f'{k}={v!r}' for k, v in item.values.items())})"
        partition = partition_from_values(columns, item.values, where)
        if partition in chosen:
            raise ValidationError(f"{where}: the partition is listed twice")
        chosen.add(partition)
        if partition in existing:
            if if_not_exists:
                continue
            raise AlreadyExistsError(
                f"partition ({format_partition(columns, partition)}) of table {table.name} already exists; "
                "use ADD IF NOT EXISTS PARTITION to skip it, or MSCK REPAIR TABLE to register new files"
            )
        location = normalize_location(item.location) if item.location else \
            f"{table.location}/{hive_partition_path(columns, partition)}"
        todo.extend(_partition_files(table, location, partition, known, columns, where))
    added = data_files_for(table, todo)
    return _commit(table, known, added, [])


def _partition_files(
    table: Table,
    location: str,
    partition: tuple[Any, ...],
    known: dict[str, DataFile],
    columns: Sequence[PartitionColumn],
    where: str,
) -> list[FileToRegister]:
    files = [
        info for info in table.io.list_prefix(location)
        if not is_hidden(info.path[len(location):]) and not info.path.startswith(table.metadata_dir + "/")
    ]
    if not files:
        raise ValidationError(
            f"{where}: there are no data files under {location}; Iceberg tables have no empty partitions, "
            "so write the partition's Parquet files first (or check the LOCATION)"
        )
    for info in files:
        if info.path in known:
            raise ValidationError(
                f"{where}: {info.path} is already registered in table {table.name} "
                f"(in partition {format_partition(columns, tuple(known[info.path].partition))})"
            )
    return [FileToRegister(info.path, info.size, partition) for info in files]
