"""The Parquet files behind a Spark DataFrame that is nothing but a scan of them.

A column merge on Spark moves every source row from the JVM to the Python tasks. For a
DataFrame that Spark computes, that transfer (rows to Arrow, through a socket) is the only way;
for a DataFrame that is a plain read of Parquet files (``spark.read.parquet(path)``, possibly
cached, possibly narrowed to some columns), the Python tasks can read the same files with
pyarrow instead, which costs a small fraction: at 10M rows the JVM transfer was about a third of
the Spark merge's CPU.

"A plain read" is decided on Spark's analyzed plan (before the cache is substituted, so a
cached DataFrame still shows its files): a ``LogicalRelation`` over a ``HadoopFsRelation`` in
Parquet format, under nothing but column selections (``Project`` of attribute references) and
aliases; no partition columns (their values live in directory names, not in the files); local
files; no Parquet field-id matching (Spark would match columns by id, pyarrow by name); no file
marked as written in the legacy hybrid calendar (Spark rebases its dates, pyarrow would not).
Each file's footer must have every wanted column under its exact name and with the Arrow type
Spark's own transfer would produce; anything else returns None and the caller uses the JVM
path, so the answer never depends on which path ran. A cached DataFrame is read from its
files, not from Spark's cache: the same rows, unless the files were changed after caching
(then Spark itself would serve stale rows until the cache is refreshed).
"""

from __future__ import annotations

import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# Spark's analyzed-plan nodes that pass a file scan's rows through unchanged.
_PASS_THROUGH = {"SubqueryAlias", "Project"}
_FIELD_ID_KEY = "parquet.field.id"
# Spark hands strings and binaries to Python as the 32-bit-offset Arrow types; a file written
# with 64-bit offsets holds the same values.
_SAME_VALUES = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}
# Files Spark 2.x (or legacy rebase mode) wrote with dates and timestamps in the hybrid Julian
# calendar: Spark rebases their values on read, pyarrow would not.
_LEGACY_CALENDAR = {b"org.apache.spark.legacyDateTime", b"org.apache.spark.legacyINT96"}


@dataclass(frozen=True)
class SourceSlice:
    """Row groups of one local Parquet file: a unit of the source a task reads."""

    path: str
    row_groups: tuple[int, ...]
    rows: int

    def read(self, columns: list[str]) -> pa.Table:
        return pq.ParquetFile(self.path).read_row_groups(list(self.row_groups), columns=columns)


def _jvm_plan(source: DataFrame) -> Any | None:
    try:
        return source._jdf.queryExecution().analyzed()
    except Exception:  # Spark Connect has no _jdf; anything unexpected: not a plain scan
        return None


def _scala_seq(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.length())]


def _file_relation(plan: Any) -> Any | None:
    """The HadoopFsRelation under pass-through nodes, or None."""
    node = plan
    while node.getClass().getSimpleName() in _PASS_THROUGH:
        if node.getClass().getSimpleName() == "Project":
            names = {e.getClass().getSimpleName() for e in _scala_seq(node.projectList())}
            if names - {"AttributeReference"}:
                return None
        node = node.child()
    if node.getClass().getSimpleName() != "LogicalRelation":
        return None
    relation = node.relation()
    if relation.getClass().getSimpleName() != "HadoopFsRelation":
        return None
    if relation.fileFormat().toString() != "Parquet" or relation.partitionSchema().length() > 0:
        return None
    return relation


def _local_path(uri: str) -> str | None:
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme not in ("file", ""):
        return None
    return urllib.parse.unquote(parsed.path)


def _comparable(t: pa.DataType) -> pa.DataType:
    return _SAME_VALUES.get(t, t)


def parquet_source_slices(
    source: DataFrame, wanted: list[tuple[str, pa.DataType]], parts: int,
) -> list[list[SourceSlice]] | None:
    """The source's rows as ``parts`` (or fewer) contiguous runs of about equal row counts, in
    file order, each a list of slices of local Parquet files (whole row groups); None unless
    ``source`` is a plain scan of files that hold every ``wanted`` column with the Arrow type
    Spark would produce."""
    plan = _jvm_plan(source)
    if plan is None:
        return None
    try:
        relation = _file_relation(plan)
        if relation is None:
            return None
        if any(_FIELD_ID_KEY in f.metadata for f in source.schema.fields):
            return None
        uris = [str(u) for u in relation.location().inputFiles()]
    except Exception:  # a plan shape this Spark version spells differently: the JVM path
        return None
    paths = [_local_path(u) for u in uris]
    if not paths or any(p is None for p in paths):
        return None
    local = [p for p in paths if p is not None]

    def footer(path: str) -> pq.FileMetaData | None:
        try:
            return pq.read_metadata(path)
        except (OSError, pa.ArrowInvalid):
            return None

    with ThreadPoolExecutor(max_workers=8) as pool:
        footers = list(pool.map(footer, local))
    groups: list[tuple[str, int, int]] = []  # (path, row group, rows) in file order
    for path, meta in zip(local, footers, strict=True):
        if meta is None or _LEGACY_CALENDAR & set(meta.metadata or {}):
            return None
        fields = {f.name: f.type for f in meta.schema.to_arrow_schema()}
        for name, arrow_type in wanted:
            if name not in fields or _comparable(fields[name]) != _comparable(arrow_type):
                return None
        groups.extend((path, i, meta.row_group(i).num_rows) for i in range(meta.num_row_groups))
    return _runs(groups, max(1, parts))


def _runs(groups: list[tuple[str, int, int]], parts: int) -> list[list[SourceSlice]]:
    """Row groups cut into ``parts`` contiguous runs by their middles' share of all rows."""
    total = sum(rows for _, _, rows in groups) or 1
    runs: list[list[SourceSlice]] = [[] for _ in range(parts)]
    seen = 0
    for path, group, rows in groups:
        run = runs[min(parts - 1, int((seen + rows / 2) * parts / total))]
        seen += rows
        if run and run[-1].path == path:
            last = run[-1]
            run[-1] = SourceSlice(path, (*last.row_groups, group), last.rows + rows)
        else:
            run.append(SourceSlice(path, (group,), rows))
    return [run for run in runs if run]
