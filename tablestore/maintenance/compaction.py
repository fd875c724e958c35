"""rewrite_data_files (compaction), rewrite_position_deletes and rewrite_manifests.

Compaction groups the current snapshot's files by partition, picks files that are too small,
too large or carry too many deletes (Iceberg's bin-pack options), reads each group with its
deletes applied, optionally sorts it, writes it as files of the target size and commits the
swap as one ``replace`` snapshot. Groups run as tasks of the table's engine (threads locally,
Spark tasks on Spark).

Concurrency: appends committed meanwhile do not conflict (the rewrite is rebuilt on top of
them). A concurrent commit that removed an input file, or added position deletes that may
point into an input file, fails the rewrite with CommitConflictError naming the files:
committing it would resurrect deleted rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tablestore.errors import UnsupportedError, ValidationError
from tablestore.io.cleanup import delete_files, deleted_unless_sent
from tablestore.maintenance.expire import Progress
from tablestore.option_values import flag
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.expression_parser import to_expression
from tablestore.spec.expressions.expression_tree import AlwaysTrue
from tablestore.spec.manifests.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntryStatus,
    ManifestFile,
    read_manifest,
    snapshot_manifests,
)
from tablestore.spec.metadata.table_metadata import Snapshot
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.schemas.schema import schema_to_arrow
from tablestore.table import CommitIdentity
from tablestore.table.ops.position_deletes import write_position_deletes
from tablestore.table.read.deletion_vectors import delete_file_key
from tablestore.table.read.file_rows import read_file_rows, rewrite_schema
from tablestore.table.read.scan import FileTask, plan_files
from tablestore.table.write.conform import conform_to_schema
from tablestore.table.write.data_files import WriteContext, write_data_files

if TYPE_CHECKING:
    from tablestore.table import Table

MAX_INT = 2**31 - 1


@dataclass
class RewriteDataResult:
    rewritten_data_files_count: int = 0
    added_data_files_count: int = 0
    rewritten_bytes_count: int = 0
    failed_data_files_count: int = 0
    removed_delete_files_count: int = 0
    rewritten_paths: tuple[str, ...] = ()
    #: The snapshot of an earlier run with the same commit id (nothing was rewritten now).
    applied_before: int | None = None


@dataclass
class RewriteDeletesResult:
    rewritten_delete_files_count: int = 0
    added_delete_files_count: int = 0
    rewritten_bytes_count: int = 0
    added_bytes_count: int = 0


@dataclass
class RewriteManifestsResult:
    rewritten_manifests_count: int = 0
    added_manifests_count: int = 0


def _option(options: dict[str, Any], key: str, default: int) -> int:
    raw = options.get(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise ValidationError(f"option {key}={raw!r} must be an integer") from None


_KNOWN_OPTIONS = {
    "min-input-files", "target-file-size-bytes", "min-file-size-bytes", "max-file-size-bytes", "rewrite-all",
    "delete-file-threshold", "max-file-group-size-bytes", "remove-dangling-deletes", "partial-progress.enabled",
    "max-concurrent-file-group-rewrites", "use-starting-sequence-number",
}


def parse_sort_order(table: Table, sort_order: str | None) -> list[tuple[str, str, str]]:
    """``'id DESC NULLS LAST, name'`` -> [(column, order, null placement)] for pyarrow."""
    schema = table.schema()
    if sort_order is None:
        keys = []
        for f in table.metadata.sort_order().fields:
            if str(f.transform) != "identity":
                raise ValidationError(
                    f"the table's sort order uses {f.transform}({schema.find_column_name(f.source_id)}); "
                    "compaction sorts by plain columns only: pass sort_order => 'col ASC, ...'"
                )
            name = schema.find_column_name(f.source_id)
            keys.append((str(name), "ascending" if f.ascending else "descending",
                         "at_start" if f.nulls_first else "at_end"))
        if not keys:
            raise ValidationError("strategy 'sort' needs a sort_order or a table with a sort order")
        return keys
    keys = []
    for part in sort_order.split(","):
        words = part.split()
        if not words:
            continue
        name = words[0]
        if schema.find_field_id(name) is None:
            raise ValidationError(f"sort_order column {name!r} is not in the table; the columns are "
                                  f"{', '.join(f.name for f in schema.fields)}")
        rest = [w.upper() for w in words[1:]]
        direction = "descending" if "DESC" in rest else "ascending"
        nulls = "at_start" if "FIRST" in rest or (direction == "descending" and "LAST" not in rest) else "at_end"
        keys.append((name, direction, nulls))
    if not keys:
        raise ValidationError(f"sort_order {sort_order!r} names no column")
    return keys


def rewrite_data_files(
    table: Table,
    strategy: str = "binpack",
    sort_order: str | None = None,
    where: str | None = None,
    options: dict[str, Any] | None = None,
    select: Callable[[FileTask], bool] | None = None,
    progress: Progress | None = None,
    keep_spec: bool = False,
    commit_id: str | CommitIdentity | None = None,
) -> RewriteDataResult:
    """Compact the current snapshot's data files; see the module docstring. ``commit_id``: a
    retried compaction whose first commit landed returns at once (``applied_before`` names it).

    The output is written in the table's current partition spec, as Iceberg does, unless
    ``keep_spec``: then each group is written in the spec of its input files, so a rewrite that
    only removes rows (the verified erasure) leaves the table's partition layout as it was."""
    options = {str(k).lower(): v for k, v in (options or {}).items()}
    unknown = sorted(set(options) - _KNOWN_OPTIONS)
    if unknown:
        raise ValidationError(f"unknown rewrite_data_files option(s) {', '.join(unknown)}; "
                              f"the options are {', '.join(sorted(_KNOWN_OPTIONS))}")
    strategy = strategy.lower()
    if strategy not in ("binpack", "sort"):
        raise ValidationError(f"strategy must be 'binpack' or 'sort', got {strategy!r}")
    sort_keys = parse_sort_order(table, sort_order) if strategy == "sort" else []
    table.refresh()
    ctx = table.write_context()
    target = _option(options, "target-file-size-bytes", ctx.target_file_size)
    min_size = _option(options, "min-file-size-bytes", int(target * 0.75))
    max_size = _option(options, "max-file-size-bytes", int(target * 1.8))
    min_input = _option(options, "min-input-files", 5)
    delete_threshold = _option(options, "delete-file-threshold", MAX_INT)
    group_bytes = _option(options, "max-file-group-size-bytes", 100 * 1024**3)
    rewrite_all = flag(options, "rewrite-all", kind="option") or select is not None
    if target <= 0 or min_input < 1:
        raise ValidationError("target-file-size-bytes and min-input-files must be positive")
    ctx = WriteContext(ctx.io, ctx.location, ctx.schema, ctx.spec, {**ctx.properties,
                                                                   "write.target-file-size-bytes": str(target)})

    snapshot = table.current_snapshot()
    result = RewriteDataResult()
    identity = CommitIdentity.of(commit_id)
    earlier = identity.applied(table.metadata, table.branch) if identity is not None else None
    if earlier is not None:  # a retry of a compaction that landed: rewrite nothing again
        result.applied_before = earlier.snapshot_id
        return result
    if snapshot is None:
        return result
    schema = table.schema()
    bound = bind(schema, to_expression(where)) if where else AlwaysTrue()
    tasks = plan_files(table.io, table.metadata, snapshot, schema, bound, table.engine)
    by_partition: dict[tuple[int, tuple[Any, ...]], list[FileTask]] = {}
    for t in tasks:
        by_partition.setdefault((t.spec_id, tuple(t.file.partition)), []).append(t)

    groups: list[list[FileTask]] = []
    for _, members in sorted(by_partition.items(), key=lambda kv: repr(kv[0])):
        if select is not None:
            chosen = [t for t in members if select(t)]
        else:
            chosen = [t for t in members if rewrite_all or t.length < min_size or t.length > max_size
                      or len(t.delete_files) >= delete_threshold]
        if not chosen:
            continue
        total = sum(t.length for t in chosen)
        worth = (rewrite_all or len(chosen) >= min_input or (len(chosen) > 1 and total > target)
                 or any(t.length > max_size or len(t.delete_files) >= delete_threshold for t in chosen))
        if not worth:
            continue
        chosen.sort(key=lambda t: -t.length)
        current: list[FileTask] = []
        size = 0
        for t in chosen:
            if current and size + t.length > group_bytes:
                groups.append(current)
                current, size = [], 0
            current.append(t)
            size += t.length
        groups.append(current)
    if not groups:
        if flag(options, "remove-dangling-deletes", kind="option") or select is not None:
            result.removed_delete_files_count = remove_dangling_deletes(table)
        return result

    io, specs, properties = table.io, {s.spec_id: s for s in table.metadata.partition_specs}, table.properties

    def output_spec(group: list[FileTask]) -> PartitionSpec:
        # Groups are per (spec, partition); an old spec whose source columns were dropped since
        # cannot be written, and its files move to the current spec.
        spec = specs[group[0].spec_id]
        if keep_spec and all(schema.has_field(f.source_id) for f in spec.fields):
            return spec
        return ctx.spec

    # Compaction moves rows without changing them: on v3 they keep their lineage.
    file_schema = rewrite_schema(schema, table.metadata.format_version)

    def rewrite_group(group: list[FileTask]) -> list[DataFile]:
        parts = [read_file_rows(io, properties, t.file, t.delete_files, specs[t.spec_id], schema, file_schema,
                                t.data_sequence_number) for t in group]
        rows = pa.concat_tables(parts) if parts else schema_empty(file_schema)
        if sort_keys and rows.num_rows:
            order = pc.sort_indices(rows, sort_keys=sort_keys)
            rows = rows.take(order)
        if rows.num_rows == 0:
            return []
        serial = lambda fn, items: [fn(i) for i in items]  # noqa: E731
        # A context per group: on Spark each task gets its own copy of the captured context, and
        # copies would hand out the same file names.
        group_ctx = WriteContext(ctx.io, ctx.location, file_schema, output_spec(group), ctx.properties)
        return write_data_files(group_ctx, conform_to_schema(rows, file_schema), serial)

    outputs: list[list[DataFile]] = []
    done = 0
    # Engine tasks in batches so a progress bar can follow along.
    batch = max(1, len(groups) // 20) if progress is not None else len(groups)
    for start in range(0, len(groups), batch):
        outputs.extend(table.engine.map(rewrite_group, groups[start:start + batch]))
        done += len(groups[start:start + batch])
        if progress is not None:
            progress("rewrite", done, len(groups))
    inputs = [t.file for g in groups for t in g]
    added = [f for files in outputs for f in files]
    input_paths = {f.file_path for f in inputs}

    # Once the rewrite is in the transaction, the transaction owns its files: deleted only when
    # the commit is known not to have landed (tablestore.table.update.commit_outcome).
    with deleted_unless_sent(lambda: delete_files(table.io, [f.file_path for f in added])):
        transaction = table.transaction(commit_id).rewrite_files(
            inputs, added, snapshot, {"compaction": strategy}, position_deletes_conflict="this compaction rewrites")
    transaction.commit_transaction()
    if transaction.applied_before is not None:
        result.applied_before = transaction.applied_before.snapshot_id
        return result
    result.rewritten_data_files_count = len(inputs)
    result.added_data_files_count = len(added)
    result.rewritten_bytes_count = sum(f.file_size_in_bytes for f in inputs)
    result.rewritten_paths = tuple(sorted(input_paths))
    if flag(options, "remove-dangling-deletes", kind="option") or select is not None:
        result.removed_delete_files_count = remove_dangling_deletes(table)
    return result


def schema_empty(schema: Any) -> pa.Table:
    return schema_to_arrow(schema).empty_table()


def live_delete_files(table: Table, snapshot: Snapshot) -> list[tuple[DataFile, int]]:
    out = []
    for m in snapshot_manifests(table.io, snapshot):
        if m.content != ManifestContent.DELETES:
            continue
        for e in read_manifest(table.io, m, specs=table.specs()):
            if e.status != ManifestEntryStatus.DELETED:
                out.append((e.data_file, e.sequence_number or 0))
    return out


def remove_dangling_deletes(table: Table) -> int:
    """Remove delete files that apply to no live data file any more; returns how many."""
    table.refresh()
    snapshot = table.current_snapshot()
    if snapshot is None:
        return 0
    tasks = plan_files(table.io, table.metadata, snapshot, table.schema(), AlwaysTrue(), table.engine)
    # By path and, for DVs, offset: a Puffin file may hold a used DV and a dangling one.
    used = {delete_file_key(d) for t in tasks for d in t.delete_files}
    dangling = [f for f, _ in live_delete_files(table, snapshot) if delete_file_key(f) not in used]
    if not dangling:
        return 0
    table.transaction().rewrite_files(dangling, [], snapshot,
                                      {"dangling-deletes-removed": str(len(dangling))}).commit_transaction()
    return len(dangling)


def rewrite_position_deletes(
    table: Table, options: dict[str, Any] | None = None, progress: Progress | None = None,
) -> RewriteDeletesResult:
    """Merge each partition's position delete files into one, dropping rows of files gone.

    Not on a format v3 table: it would add a Parquet position delete file, which the spec
    forbids there. A v3 table's old position deletes are merged into each data file's deletion
    vector by its next delete, or removed with the rows by ``rewrite_data_files``.
    """
    if table.metadata.format_version >= 3:
        raise UnsupportedError(
            f"rewrite_position_deletes does not apply to {table.name}, a format v3 table: it would add a "
            "position delete file, which v3 forbids; the next merge-on-read delete of a data file merges its "
            "position deletes into a deletion vector, and rewrite_data_files removes them with the rows"
        )
    options = {str(k).lower(): v for k, v in (options or {}).items()}
    min_input = _option(options, "min-input-files", 5)
    rewrite_all = flag(options, "rewrite-all", kind="option")
    table.refresh()
    snapshot = table.current_snapshot()
    result = RewriteDeletesResult()
    if snapshot is None:
        return result
    tasks = plan_files(table.io, table.metadata, snapshot, table.schema(), AlwaysTrue(), table.engine)
    live_paths = {t.file.file_path for t in tasks}
    used = {d.file_path for t in tasks for d in t.delete_files}
    groups: dict[tuple[int, tuple[Any, ...]], list[DataFile]] = {}
    dropped: list[DataFile] = []
    for f, _ in live_delete_files(table, snapshot):
        if f.content != DataFileContent.POSITION_DELETES or f.file_format != FileFormat.PARQUET:
            continue
        if f.file_path not in used:
            dropped.append(f)  # dangling: points only at files no longer live
            continue
        groups.setdefault((f.spec_id, tuple(f.partition)), []).append(f)
    chosen = {k: v for k, v in groups.items() if rewrite_all or len(v) >= min_input}
    ctx = table.write_context()
    io = table.io
    specs = {s.spec_id: s for s in table.metadata.partition_specs}
    schema = table.schema()

    def merge(item: tuple[tuple[int, tuple[Any, ...]], list[DataFile]]) -> DataFile | None:
        (spec_id, partition), files = item
        tables = []
        for f in files:
            fs, path = io.filesystem_for(f.file_path)
            t = pq.read_table(fs.open_input_file(path))
            tables.append(t.select([0, 1]).rename_columns(["file_path", "pos"]))
        rows = pa.concat_tables(tables)
        rows = rows.filter(pc.is_in(rows.column("file_path"), pa.array(sorted(live_paths), pa.string())))
        if rows.num_rows == 0:
            return None
        rows = rows.take(pc.sort_indices(rows, sort_keys=[("file_path", "ascending"), ("pos", "ascending")]))
        spec = specs[spec_id]
        part_path = spec.partition_path(partition, schema) if spec.fields else ""
        name = f"{uuid.uuid4()}-deletes.parquet"
        out_path = f"{ctx.data_location}/{part_path}/{name}" if part_path else f"{ctx.data_location}/{name}"
        return write_position_deletes(io, out_path, rows, spec_id, partition)

    merged = table.engine.map(merge, list(chosen.items()))
    if progress is not None:
        progress("rewrite-deletes", len(chosen), len(chosen))
    added = [f for f in merged if f is not None]
    inputs = [f for v in chosen.values() for f in v] + dropped
    if not inputs:
        return result
    table.transaction().rewrite_files(inputs, added, snapshot,
                                      {"position-deletes-rewritten": "true"}).commit_transaction()
    result.rewritten_delete_files_count = len(inputs)
    result.added_delete_files_count = len(added)
    result.rewritten_bytes_count = sum(f.file_size_in_bytes for f in inputs)
    result.added_bytes_count = sum(f.file_size_in_bytes for f in added)
    return result


def rewrite_manifests(table: Table, spec_id: int | None = None) -> RewriteManifestsResult:
    """Cluster the data manifests by partition into manifests of the target size, in one commit."""
    table.refresh()
    if table.current_snapshot() is None:
        return RewriteManifestsResult()
    target_bytes = _option(table.properties, "commit.manifest.target-size-bytes", 8 * 1024 * 1024)

    def per_manifest(manifests: list[ManifestFile]) -> int:
        entries = sum((m.added_files_count or 0) + (m.existing_files_count or 0) for m in manifests)
        size = sum(m.manifest_length for m in manifests)
        return int(target_bytes / max(1.0, size / max(1, entries)))

    transaction = table.transaction()
    rewrite = transaction.rewrite_manifests(per_manifest, spec_id)
    transaction.commit_transaction()
    return RewriteManifestsResult(rewrite.rewritten, rewrite.added)
