"""Data files written by Spark tasks, described to the driver: the write half of every SQL write.

    written = write_files(typed_for_table(table, df, names), table_target(table, config_json))
    commit_written(table, written, FilesCommit(OVERWRITE, filter=...))

``write_files`` runs one Spark job over a DataFrame already typed for the table
(:mod:`~tablestore.spark.table_types`): each task streams its Arrow batches through
:func:`~tablestore.spark.write_task.write_task` (the task the data source runs too:
partitioned writers, fan-out within the memory budget, rolling at the target file size) and
returns one small row, the JSON descriptions of its files (:mod:`tablestore.spec.manifests.content_file_json`)
and where it ran. Only those rows reach the driver and the client, whatever the size of the data,
as in Iceberg's ``SparkWrite`` (tasks send ``DataFile`` messages, the driver commits once). The
caller then makes exactly one commit with the operation its statement calls for, through
:func:`commit_written`: an append, an overwrite by filter, a dynamic partition overwrite
(:func:`tablestore.spark.commit.commit_files`).

Why ``mapInArrow`` and not the data source's writer. The Python data source commits in a Python
worker of the driver, with no way to hand the files back to the caller, and an overwrite's commit
must plan row-level changes on the caller's table object. ``mapInArrow`` plus ``collect`` of
one row per task is a plain DataFrame API, so the same code runs through Spark Connect.

Failure. A task that fails deletes its own files (``write_task``). When the job fails, the
files of the tasks that had succeeded are in no message the driver received: every file of a
write carries the write's id in its name (``<partition>-<n>-<write id>-<attempt>-<n>.parquet``,
as Iceberg names files by operation id), so the driver lists the table's data location and
deletes the write's files. That listing happens only on failure. A commit that is refused
deletes the files too (:func:`~tablestore.spark.commit.commit_files`), unless its outcome
is unknown.

Where the files were written is recorded in the snapshot summary (:meth:`WrittenFiles.summary`):
``tablestore.write.tasks`` (the Spark tasks that wrote files), ``tablestore.write.executors`` and
``tablestore.write.hosts`` (where they ran) and ``tablestore.write.spark-stage``.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tablestore.io import FileIO, load_file_io
from tablestore.io.cleanup import deleted_unless_sent
from tablestore.spark.commit import WRITE_ID_PROPERTY, FilesCommit, commit_files, writer_identity
from tablestore.spark.write_task import (
    WriteTarget,
    check_write_schema,
    delete_quietly,
    described_write_task,
)
from tablestore.spec.manifests.content_file_json import content_file_from_json
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.partitioning.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from tablestore.spec.schemas.types import IcebergType, StructType
from tablestore.table.write.data_files import WriteContext

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from tablestore.spark.commit import Committed
    from tablestore.table import CommitIdentity, Table

log = logging.getLogger(__name__)

SUMMARY_PREFIX = "tablestore.write."
_RESULT_SCHEMA = "written string"
# A write Spark estimates at most this big runs as one task and writes one file.
SMALL_WRITE_BYTES = 8 * 1024 * 1024
_STATISTICS = re.compile(r"Statistics\(sizeInBytes=([0-9.]+) ?([KMGTPE]?i?B)")
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50, "EiB": 2**60}


@dataclass(frozen=True)
class TaskWrite:
    """What one Spark task wrote and where it ran."""

    files: list[DataFile]
    rows: int
    stage: int
    partition: int
    attempt: int
    executor: str
    host: str
    pid: int


@dataclass(frozen=True)
class WrittenFiles:
    """The files of one Spark write, not yet committed, and the tasks that wrote them."""

    write_id: str
    tasks: list[TaskWrite]

    @property
    def files(self) -> list[DataFile]:
        return [f for t in self.tasks for f in t.files]

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tasks)

    def summary(self) -> dict[str, str]:
        """Snapshot summary properties recording where the files were written."""
        return writers_summary((f"{t.stage}.{t.partition}", t.executor, t.host, t.stage)
                               for t in self.tasks if t.files)


def writers_summary(tasks: Iterable[tuple[str, str, str, int]]) -> dict[str, str]:
    """The snapshot summary properties of every Spark write (SQL writes and row-level
    statements alike), from the (task, executor, host, stage) of each task that wrote files."""
    writing = list(tasks)
    return {
        f"{SUMMARY_PREFIX}tasks": str(len({task for task, _, _, _ in writing})),
        f"{SUMMARY_PREFIX}executors": ",".join(sorted({executor for _, executor, _, _ in writing})),
        f"{SUMMARY_PREFIX}hosts": ",".join(sorted({host for _, _, host, _ in writing})),
        f"{SUMMARY_PREFIX}spark-stage": ",".join(str(s) for s in sorted({stage for _, _, _, stage in writing})),
    }


def table_target(table: Table, config_json: str, snapshot_properties: dict[str, str] | None = None) -> WriteTarget:
    """The write target of a loaded table: its catalog is reached again from ``config_json``."""
    snapshot = table.current_snapshot()
    return WriteTarget(
        config_json=config_json,
        catalog_name=table.catalog.name,
        identifier=tuple(table.identifier),
        location=table.location.rstrip("/"),
        io_properties=dict(table.io.properties),
        schema_json=json.dumps(table.schema().to_json()),
        spec_json=json.dumps(table.spec().to_json()),
        properties=dict(table.properties),
        base_snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
        snapshot_properties=dict(snapshot_properties or {}),
    )


def _task_write(obj: dict[str, object], partition_types: dict[int, StructType],
                column_types: dict[int, IcebergType]) -> TaskWrite:
    files = obj["files"]
    assert isinstance(files, list)
    return TaskWrite(
        files=[content_file_from_json(f, partition_types, column_types) for f in files],
        rows=int(str(obj["rows"])), stage=int(str(obj["stage"])), partition=int(str(obj["partition"])),
        attempt=int(str(obj["attempt"])), executor=str(obj["executor"]), host=str(obj["host"]),
        pid=int(str(obj["pid"])),
    )


def _partition_key(df: DataFrame, column: str, transform: Transform) -> Column | None:
    """A Spark expression equal for rows of the same partition value (finer is allowed)."""
    from pyspark.sql import functions as F

    if column.split(".", 1)[0] not in df.columns:
        return None  # a column the write leaves to its default: one value, nothing to cluster by
    col = F.col(".".join(f"`{part}`" for part in column.split(".")))
    if isinstance(transform, IdentityTransform | BucketTransform):
        return col  # Spark has no Iceberg bucket function: each bucket is a union of source values
    if isinstance(transform, TruncateTransform):
        kind = type(df.select(col).schema.fields[0].dataType).__name__
        if kind in ("StringType", "BinaryType"):
            return F.substring(col, 1, transform.width)
        return col - F.pmod(col, F.lit(transform.width)) if kind in ("IntegerType", "LongType") else col
    for unit, cls in (("year", YearTransform), ("month", MonthTransform), ("day", DayTransform),
                      ("hour", HourTransform)):
        if isinstance(transform, cls):
            return F.date_trunc(unit, col.cast("timestamp"))
    return None  # void and unknown transforms: no partition value to cluster by


def clustered_by_partition(df: DataFrame, target: WriteTarget) -> DataFrame:
    """``df`` with the rows of a partition brought to the same task, as Iceberg's Spark writes
    request for a partitioned table (``write.distribution-mode=hash``): one file per partition
    instead of one per task and partition. Spark's REBALANCE (adaptive query execution) joins
    small partitions and splits a skewed one, so a big partition does not land on one task."""
    schema, spec = target.schema(), target.spec()
    if not spec.fields or target.properties.get("write.distribution-mode", "hash").lower() == "none":
        return df
    keys: dict[str, Column] = {}
    for i, f in enumerate(spec.fields):
        column = schema.find_column_name(f.source_id)
        key = _partition_key(df, column, f.transform) if column else None
        if key is not None:
            keys[f"__tablestore_partition_{i}"] = key
    if not keys:
        return df
    names = list(keys)
    # REBALANCE takes column names only: the keys become columns for the shuffle, then go.
    return df.withColumns(keys).hint("rebalance", *names).drop(*names)


def estimated_size(df: DataFrame) -> int | None:
    """Spark's estimate of the bytes ``df`` produces (an upper bound for most plans), or None.

    Read from the cost plan that ``explain(mode="cost")`` prints: the one public way to Spark's
    statistics, the same text in classic Spark and through Spark Connect.
    """
    text = io.StringIO()
    try:
        with contextlib.redirect_stdout(text):
            df.explain(mode="cost")
    except Exception:  # an explain this client cannot give: no estimate, no harm
        return None
    match = _STATISTICS.search(text.getvalue())
    if match is None:
        return None
    return int(float(match.group(1)) * _UNITS.get(match.group(2), 1))


def distributed_for_write(df: DataFrame, target: WriteTarget) -> DataFrame:
    """``df`` laid out for the write: a small result in one task (one file, not one per input
    partition: an ``INSERT ... VALUES`` gets one file), a partitioned table's rows clustered."""
    size = estimated_size(df)
    if size is not None and size <= SMALL_WRITE_BYTES:
        return df.repartition(1)
    return clustered_by_partition(df, target)


def write_files(df: DataFrame, target: WriteTarget) -> WrittenFiles:
    """Write ``df`` (typed for the table: see :func:`tablestore.spark.table_types.typed_for_table`) as data
    files of ``target`` in Spark tasks; nothing is committed. A failed job leaves no file."""
    check_write_schema(df.schema, target)
    df = distributed_for_write(df, target)
    with deleted_unless_sent(lambda: remove_write(target)):
        # One row per task: the descriptions of its files, a few kB (capped by design: never rows).
        rows = df.mapInArrow(described_write_task(target), _RESULT_SCHEMA).collect()
    partition_type, column_types = target.types()
    spec_id = target.spec().spec_id
    tasks = [_task_write(json.loads(r[0]), {spec_id: partition_type}, column_types) for r in rows]
    return WrittenFiles(target.write_id, tasks)


def remove_write(target: WriteTarget) -> None:
    """Delete every file of the write ``target`` that a failed job left (found by the write id)."""
    io = load_file_io(target.io_properties)
    ctx = WriteContext(io, target.location, target.schema(), target.spec(), dict(target.properties))
    remove_write_files(io, ctx.data_location, target.write_id)


def remove_write_files(io: FileIO, data_location: str, write_id: str) -> None:
    """Delete every file under ``data_location`` whose name holds ``write_id``: what a failed
    Spark job of any writer (SQL writes, row-level statements, column merges) left behind."""
    try:
        listed = io.list_prefix(data_location)
    except OSError as e:  # remove_orphan_files catches whatever is left
        log.warning("could not list %s to remove the files of failed write %s: %s", data_location, write_id, e)
        return
    delete_quietly(io, [f.path for f in listed if write_id in f.path.rsplit("/", 1)[-1]])


def commit_written(table: Table, written: WrittenFiles, how: FilesCommit | None = None,
                   identity: CommitIdentity | None = None) -> Committed:
    """One snapshot of the files a SQL write's tasks wrote, as ``how`` says (None: append), marked with the write's
    id (a retry of a commit whose outcome was unknown finds it) and recording where they were
    written; the files are deleted when the commit is refused.

    ``identity`` (the session's ``tablestore.commit-id``) names the commit instead of the write id,
    which the summary still records: when the branch's history already holds it, nothing is
    committed and the files are deleted (``Committed.applied_before``)."""
    summary = written.summary()
    if identity is not None:
        summary[WRITE_ID_PROPERTY] = written.write_id
    return commit_files(table, written.files, identity or writer_identity(written.write_id), how or FilesCommit(),
                        summary, writer="the SQL statement")


__all__ = ["SUMMARY_PREFIX", "TaskWrite", "WrittenFiles", "commit_written", "remove_write", "remove_write_files",
           "table_target", "write_files", "writers_summary"]
