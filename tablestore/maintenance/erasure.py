"""Verified erasure (GDPR "right to be forgotten") of subjects' rows from one or more tables.

For each table, in order:

1. delete the subjects' rows (``column IN values``) with position deletes;
2. rewrite every live data file that has delete files, applying them, each in its own partition
   spec (an erasure does not move old files to a newer spec), and drop the delete files that
   then apply to nothing: rows merely masked by position or equality deletes are physically
   gone, and no delete file (an equality delete holds the values) is left;
3. rewrite the manifests, so no manifest keeps entries (and column bounds) of removed files;
4. expire every snapshot but the current one, overriding the retention properties;
5. remove unreferenced files written before the erasure started (the erasure's own garbage);
6. verify: read every Parquet file under the table location, live or not, with plain pyarrow;
   find the column by field id (files without it cannot hold it) and count rows whose value is
   one of the subjects'. Any such file is residue, and the erasure is reported as failed.

Steps 1 and 2 run on the head of every branch, main first: a branch in flight (the audit
branch of a write-audit-publish) would otherwise publish the subjects' rows back. The report
names every ref an erasure touched. Tags pin old snapshots and never move, so an erasure refuses
to run while a table has tags unless ``remove_refs=True``, which drops them.

The outcome is appended to an audit table (``<namespace>.erasure_audit`` by default).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tablestore.errors import TableStoreError, ValidationError
from tablestore.maintenance.compaction import rewrite_data_files, rewrite_manifests
from tablestore.maintenance.expire import Progress, expire_snapshots
from tablestore.maintenance.orphans import list_table_files, remove_orphan_files
from tablestore.spec.expressions.expression_tree import In
from tablestore.spec.metadata.table_metadata import MAIN_BRANCH, TableMetadata
from tablestore.spec.metadata.update_models import (
    AssertTableUUID,
    RemoveSnapshotRefUpdate,
    TableRequirement,
    TableUpdate,
)
from tablestore.spec.schemas.schema import type_to_arrow
from tablestore.table.ops.row_level import MERGE_ON_READ, delete_rows

if TYPE_CHECKING:
    from tablestore.catalog.base import Catalog
    from tablestore.io.fileio import FileIO
    from tablestore.table import Table

AUDIT_SCHEMA = pa.schema([
    pa.field("request_id", pa.string(), nullable=False),
    pa.field("tables", pa.list_(pa.string())),
    pa.field("column_name", pa.string()),
    pa.field("subjects", pa.int64()),
    pa.field("rows_removed", pa.int64()),
    pa.field("files_rewritten", pa.int64()),
    pa.field("files_removed", pa.int64()),
    pa.field("verified", pa.bool_()),
    pa.field("residue", pa.list_(pa.string())),
    pa.field("erased_at", pa.timestamp("us", tz="UTC")),
])


class ErasureVerificationError(TableStoreError):
    """Rows of erased subjects are still in files under a table location."""

    def __init__(self, message: str, report: ErasureReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class TableErasure:
    table: str
    rows_removed: int = 0
    files_rewritten: int = 0
    files_removed: int = 0
    files_verified: int = 0
    residue: list[str] = field(default_factory=list)
    #: Branches whose head the erasure changed and tags it removed, as "branch:name"/"tag:name".
    refs_touched: list[str] = field(default_factory=list)


@dataclass
class ErasureReport:
    request_id: str
    column: str
    subjects: int
    tables: list[TableErasure]
    erased_at: datetime.datetime
    audit_table: str | None
    timings_s: dict[str, float] = field(default_factory=dict)

    @property
    def rows_removed(self) -> int:
        return sum(t.rows_removed for t in self.tables)

    @property
    def files_rewritten(self) -> int:
        return sum(t.files_rewritten for t in self.tables)

    @property
    def files_removed(self) -> int:
        return sum(t.files_removed for t in self.tables)

    @property
    def residue(self) -> list[str]:
        return [r for t in self.tables for r in t.residue]

    @property
    def verified(self) -> bool:
        return not self.residue


def subject_values(catalog: Catalog, column: str, values: Iterable[Any] | None, values_from: str | None,
                   request_id: str) -> list[Any]:
    """The values to erase, given inline or read from a requests table."""
    if (values is None) == (values_from is None):
        raise ValidationError("give the subjects either as values or as values_from (a table), not both")
    if values is not None:
        out = list(values)
    else:
        requests = catalog.load_table(str(values_from))
        names = [f.name for f in requests.schema().fields]
        if column in names:
            name = column
        elif len([n for n in names if n != "request_id"]) == 1:
            name = next(n for n in names if n != "request_id")
        else:
            raise ValidationError(
                f"{values_from} has no column {column!r}; its columns are {', '.join(names)}: name the "
                "subjects' column like the erased column"
            )
        # A requests table with a request_id column holds many requests: take this one's rows.
        where = f"request_id = '{request_id}'" if "request_id" in names and name != "request_id" else None
        rows = requests.scan(filter=where, columns=[name]).to_arrow()
        out = [v for v in rows.column(name).to_pylist() if v is not None]
    if not out:
        raise ValidationError("there are no subjects to erase (the value list is empty)")
    return out


def _typed_values(table: Table, column: str, values: Sequence[Any]) -> tuple[int, list[Any]]:
    schema = table.schema()
    field_ = schema.find_field(column)
    arrow_type = type_to_arrow(field_.field_type)
    try:
        typed = pa.array(values).cast(arrow_type) if not isinstance(values, pa.Array) else values.cast(arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise ValidationError(
            f"the subjects' values do not fit column {column!r} of {table.name} ({field_.field_type}): {e}"
        ) from None
    return field_.field_id, sorted(set(typed.to_pylist()), key=repr)


def _columns_with_id(schema: pa.Schema, field_id: int) -> list[list[str]]:
    """Paths (struct nesting) of the columns carrying ``field_id`` in a Parquet file's schema."""
    found: list[list[str]] = []

    def walk(fields: Iterable[pa.Field], prefix: list[str]) -> None:
        for f in fields:
            meta = f.metadata or {}
            if meta.get(b"PARQUET:field_id") == str(field_id).encode():
                found.append([*prefix, f.name])
            elif pa.types.is_struct(f.type):
                walk(list(f.type), [*prefix, f.name])

    walk(schema, [])
    return found


def _has_field_ids(schema: pa.Schema) -> bool:
    return any(b"PARQUET:field_id" in (f.metadata or {}) for f in schema)


def residue_in_file(io: FileIO, path: str, field_id: int, column: str, values: pa.Array) -> int:
    """How many rows of the Parquet file at ``path`` hold one of ``values`` in the column."""
    fs, local = io.filesystem_for(path)
    with fs.open_input_file(local) as stream:
        reader = pq.ParquetFile(stream)
        schema = reader.schema_arrow
        paths = _columns_with_id(schema, field_id)
        if not paths and not _has_field_ids(schema) and column in schema.names:
            paths = [[column]]  # a file written without ids is read by name
        hits = 0
        for parts in paths:
            array = reader.read(columns=[parts[0]], use_threads=False).column(parts[0])
            for name in parts[1:]:
                array = pc.struct_field(array, name)
            if isinstance(array.type, pa.BaseExtensionType):  # a uuid: compute kernels take its 16 bytes
                array = array.cast(array.type.storage_type)
            try:
                probe = values.cast(array.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                probe = values
            hits += pc.sum(pc.is_in(array, value_set=probe)).as_py() or 0
        return int(hits)


def verify_table(table: Table, field_id: int, column: str, values: list[Any]) -> tuple[int, list[str]]:
    """(Parquet files read, residue as 'path: N rows') for every Parquet file under the location."""
    arrow_type = type_to_arrow(table.schema().find_field(field_id).field_type)
    probe = pa.array(values, type=arrow_type)
    files = [f.path for f in list_table_files(table) if f.path.endswith(".parquet")]
    io = table.io

    def check(path: str) -> tuple[str, int]:
        return path, residue_in_file(io, path, field_id, column, probe)

    results = table.engine.map(check, files)
    return len(files), [f"{path}: {n} row(s)" for path, n in results if n]


def _tags(metadata: TableMetadata) -> list[str]:
    return sorted(name for name, ref in metadata.refs.items() if not ref.is_branch)


def _drop_tags(table: Table) -> list[str]:
    """Remove the table's tags (they pin pre-erasure snapshots and never move); their names."""
    def stage(base: TableMetadata) -> tuple[list[TableRequirement], list[TableUpdate]]:
        # Recomputed on every attempt: a tag created meanwhile goes too.
        return [AssertTableUUID(uuid=base.table_uuid)], [RemoveSnapshotRefUpdate(ref_name=n) for n in _tags(base)]

    tags = _tags(table.refresh().metadata)
    if tags:
        table.transaction().change_metadata(stage).commit_transaction()
    return tags


def erase_table(table: Table, column: str, values: list[Any], started_ms: int, progress: Progress | None = None,
                timings: dict[str, float] | None = None) -> TableErasure:
    """Steps 1-6 of the module docstring on one table."""
    timings = timings if timings is not None else {}
    out = TableErasure(table.name)
    field_id, typed = _typed_values(table, column, values)

    def step(name: str, started: float) -> None:
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - started
        if progress is not None:
            progress(f"{table.name}: {name}", 1, 1)

    table.refresh()
    branches = sorted((n for n, r in table.metadata.refs.items() if r.is_branch),
                      key=lambda n: (n != MAIN_BRANCH, n)) or [MAIN_BRANCH]
    for branch in branches:
        on_branch = table.on_branch(branch)
        t0 = time.perf_counter()
        before = on_branch.refresh().current_snapshot()
        subjects = In(column, typed)
        # Counted from a scan: rows already masked by delete files are not "removed" by this erasure.
        removed = on_branch.scan(filter=subjects, columns=[column]).count()
        out.rows_removed += removed
        # Position deletes, whatever the table's delete mode: a copy-on-write delete would rewrite
        # the files in the current partition spec, and the rewrite below keeps each file in its own.
        delete_rows(on_branch, subjects, snapshot_properties={"erasure": "true"}, mode=MERGE_ON_READ)
        after = on_branch.refresh().current_snapshot()
        if after is not None and (before is None or after.snapshot_id != before.snapshot_id):
            out.files_rewritten += int(after.summary.get("deleted-data-files", "0"))
        step("delete", t0)

        t0 = time.perf_counter()
        rewrite = rewrite_data_files(on_branch, select=lambda task: bool(task.delete_files), keep_spec=True)
        out.files_rewritten += rewrite.rewritten_data_files_count
        rewrite_manifests(on_branch)
        if on_branch.refresh().current_snapshot() != before and branch in on_branch.metadata.refs:
            out.refs_touched.append(f"branch:{branch}")
        step("rewrite", t0)
    table.refresh()

    t0 = time.perf_counter()
    expired = expire_snapshots(table, older_than=int(time.time() * 1000) + 1, retain_last=1,
                               override_retention=True)
    orphans = remove_orphan_files(table, older_than=started_ms)
    out.files_removed = len(expired.deleted_paths) + len(orphans.orphan_file_locations)
    step("expire", t0)

    t0 = time.perf_counter()
    out.files_verified, out.residue = verify_table(table, field_id, column, typed)
    step("verify", t0)
    return out


def _audit_table(catalog: Catalog, name: str) -> Table:
    if catalog.table_exists(name):
        return catalog.load_table(name)
    try:
        return catalog.create_table(name, schema=AUDIT_SCHEMA)
    except TableStoreError:
        if catalog.table_exists(name):  # created concurrently by another erasure
            return catalog.load_table(name)
        raise


def erase(
    catalog: Catalog,
    tables: str | Sequence[str],
    column: str,
    request_id: str,
    values: Iterable[Any] | None = None,
    values_from: str | None = None,
    audit_table: str | None = None,
    remove_refs: bool = False,
    raise_on_residue: bool = True,
    progress: Progress | None = None,
    rows_deleted_before: Mapping[str, int] | None = None,
) -> ErasureReport:
    """Erase the rows whose ``column`` is one of the subjects' values from ``tables``, and prove it.

    ``rows_deleted_before`` (by table name as given in ``tables``) counts rows of these subjects
    the caller deleted for this request just before, e.g. with a SQL ``DELETE``: they are part of
    the erasure, so the report and the audit record count them.

    Raises ErasureVerificationError (after writing the audit record) if any Parquet file under
    a table location still holds such a row, unless ``raise_on_residue`` is False.
    """
    names = [tables] if isinstance(tables, str) else list(tables)
    if not names:
        raise ValidationError("name at least one table to erase from")
    if not request_id or not str(request_id).strip():
        raise ValidationError("an erasure needs a request id (it is recorded in the audit table)")
    subjects = subject_values(catalog, column, values, values_from, request_id)
    loaded = [catalog.load_table(n) for n in names]
    for t in loaded:
        t.schema().find_field(column)  # every table must have the column: fail before changing any
        _typed_values(t, column, subjects)
        pinned = _tags(t.metadata)
        if pinned and not remove_refs:
            raise ValidationError(
                f"{t.name} has tags ({', '.join(pinned)}) that keep pre-erasure snapshots readable and "
                "never move; drop them first, or pass remove_refs=True (--remove-refs) to drop them "
                "(branches are erased at their heads)"
            )
    audit_name = audit_table or f"{'.'.join(loaded[0].identifier[:-1])}.erasure_audit"
    started_ms = int(time.time() * 1000)
    erased_at = datetime.datetime.now(datetime.UTC)
    report = ErasureReport(str(request_id), column, len(subjects), [], erased_at, audit_name)
    for name, t in zip(names, loaded, strict=True):
        dropped = _drop_tags(t) if remove_refs else []
        erased = erase_table(t, column, subjects, started_ms, progress, report.timings_s)
        erased.refs_touched.extend(f"tag:{name}" for name in dropped)
        erased.rows_removed += (rows_deleted_before or {}).get(name, 0)
        report.tables.append(erased)

    audit = _audit_table(catalog, audit_name)
    audit.append(pa.table({
        "request_id": [report.request_id],
        "tables": [[t.table for t in report.tables]],
        "column_name": [column],
        "subjects": [len(subjects)],
        "rows_removed": [report.rows_removed],
        "files_rewritten": [report.files_rewritten],
        "files_removed": [report.files_removed],
        "verified": [report.verified],
        "residue": [report.residue],
        "erased_at": [erased_at],
    }, schema=AUDIT_SCHEMA))
    if not report.verified and raise_on_residue:
        raise ErasureVerificationError(
            f"erasure {report.request_id} failed verification: rows of erased subjects remain in "
            + "; ".join(report.residue[:10]) + (" and more" if len(report.residue) > 10 else ""),
            report,
        )
    return report
