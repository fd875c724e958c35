"""Streaming partitioned writers: rows arrive as Arrow batches, files leave as DataFiles.

Three writers, as in Iceberg's Spark and Flink sinks, and one that picks among them:

- :class:`SinglePartitionWriter`: every row goes to one partition (an unpartitioned table, a
  static partition, or input that so far held one partition). One open file, rolled at the
  target file size (``write.target-file-size-bytes``).
- :class:`ClusteredWriter` ("grouped"): input clustered by partition, so one file is open at
  a time; a partition's file is closed when the next partition starts.
- :class:`FanoutWriter`: input in any order. Every partition seen keeps a buffer and an open
  file; when the buffers and open files outgrow the memory budget
  (``write.fanout.memory-budget-bytes``, default 256 MiB) it flushes the largest buffers to
  their files, and past that closes (rolls) the least recently used files.

:class:`PartitionedWriter` chooses automatically. It starts as a single-partition writer,
becomes clustered when a second partition arrives in its own run, and becomes fanout when the
input turns out not to be clustered (a partition comes back after another one started, or one
batch interleaves partitions). Detecting this costs one pass over each batch's partition
codes, which routing needs anyway. The table property ``write.spark.fanout.enabled=true``
(Iceberg's name) starts in fanout mode; ``write.distribution-mode`` (``none``, ``hash``,
``range``) is Iceberg's hint of how the input was distributed: ``hash`` and ``range`` promise
clustered input, so a violation is then a plain switch to fanout with a warning instead of
silence.

Writers never commit; :meth:`close` returns the DataFiles for a snapshot producer.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tablestore.errors import ValidationError
from tablestore.spec.manifest import DataFile, DataFileContent, FileFormat
from tablestore.spec.types import IcebergType
from tablestore.table.metrics import collect_metrics, float_nan_counts, metrics_modes
from tablestore.table.write import (
    WriteContext,
    _combine,
    _group_codes,
    _is_constant,
    _partition_tuple,
    _runs,
    dictionary_columns,
    int_property,
    partition_keys,
)

log = logging.getLogger(__name__)

FANOUT_BUDGET_PROPERTY = "write.fanout.memory-budget-bytes"
DEFAULT_FANOUT_BUDGET = 256 * 1024 * 1024
FANOUT_ENABLED_PROPERTY = "write.spark.fanout.enabled"
DISTRIBUTION_MODE_PROPERTY = "write.distribution-mode"
DISTRIBUTION_MODES = ("none", "hash", "range")
# What an open file costs besides its buffered rows: the Parquet writer's encoders and footer
# builder, and for S3 the multipart part that the output stream fills before it uploads.
LOCAL_OPEN_FILE_OVERHEAD = 256 * 1024
REMOTE_OPEN_FILE_OVERHEAD = 10 * 1024 * 1024


class WriterKind(enum.StrEnum):
    SINGLE = "single"
    CLUSTERED = "clustered"
    FANOUT = "fanout"


def open_file_overhead(location: str) -> int:
    return LOCAL_OPEN_FILE_OVERHEAD if "://" not in location or location.startswith("file:") \
        else REMOTE_OPEN_FILE_OVERHEAD


def fanout_budget(properties: dict[str, str]) -> int:
    return int_property(properties, FANOUT_BUDGET_PROPERTY, DEFAULT_FANOUT_BUDGET)


def distribution_mode(properties: dict[str, str]) -> str:
    mode = properties.get(DISTRIBUTION_MODE_PROPERTY, "none").strip().lower()
    if mode not in DISTRIBUTION_MODES:
        raise ValidationError(
            f"table property {DISTRIBUTION_MODE_PROPERTY}={mode!r} is not supported; use none, hash or range"
        )
    return mode


def fanout_forced(properties: dict[str, str]) -> bool:
    raw = properties.get(FANOUT_ENABLED_PROPERTY, "false").strip().lower()
    if raw not in ("true", "false"):
        raise ValidationError(f"table property {FANOUT_ENABLED_PROPERTY}={raw!r} must be true or false")
    return raw == "true"


# -- one partition's files ---------------------------------------------------------------------


class RollingFileWriter:
    """Writes row groups of one partition into Parquet files, starting a new file whenever the
    current one reaches the target size. At most one file is open."""

    def __init__(self, ctx: WriteContext, partition: tuple[Any, ...], task_id: int = 0) -> None:
        self.ctx = ctx
        self.partition = partition
        self.task_id = task_id
        self.partition_path = ctx.spec.partition_path(partition, ctx.schema) if ctx.spec.fields else ""
        self.files: list[DataFile] = []
        self._writer: pq.ParquetWriter | None = None
        self._stream: Any = None
        self._path = ""
        self._nan_counts: dict[int, int] = {}
        self._use_dictionary: bool | list[str] | None = None

    @property
    def is_open(self) -> bool:
        return self._writer is not None

    def write(self, rows: pa.Table) -> None:
        """Write ``rows`` as one row group (callers buffer to the row-group size)."""
        if rows.num_rows == 0:
            return
        if self._writer is None:
            self._open(rows)
        assert self._writer is not None
        self._writer.write_table(rows, row_group_size=rows.num_rows)
        for fid, count in float_nan_counts(rows, self.ctx.schema).items():
            self._nan_counts[fid] = self._nan_counts.get(fid, 0) + count
        if self._stream.tell() >= self.ctx.target_file_size:
            self.close_file()

    def _open(self, rows: pa.Table) -> None:
        if self._use_dictionary is None:
            # Decided once per partition from the first rows: the same data keeps its shape.
            self._use_dictionary = dictionary_columns(rows, self.ctx.schema, rows.num_rows)
        self._path = self.ctx.new_file_path(self.partition_path, self.task_id)
        self._stream = self.ctx.io.new_output(self._path).create(overwrite=False)
        try:
            self._writer = pq.ParquetWriter(
                self._stream,
                rows.schema,
                compression=self.ctx.codec,
                compression_level=self.ctx.compression_level,
                write_statistics=True,
                use_compliant_nested_type=True,
                store_decimal_as_integer=True,  # the spec's Parquet mapping of decimals
                use_dictionary=self._use_dictionary,
            )
        except BaseException:
            self._stream.close()
            raise
        self._nan_counts = {}

    def close_file(self) -> None:
        """Finish the open file (if any) and describe it as a DataFile."""
        writer, stream = self._writer, self._stream
        if writer is None:
            return
        self._writer, self._stream = None, None
        try:
            writer.close()
            metadata = writer.writer.metadata
            size = stream.tell()
        finally:
            stream.close()
        metrics = collect_metrics(metadata, self.ctx.schema, metrics_modes(self.ctx.schema, self.ctx.properties),
                                  self._nan_counts)
        self.files.append(DataFile(
            content=DataFileContent.DATA,
            file_path=self._path,
            file_format=FileFormat.PARQUET,
            partition=self.partition,
            record_count=metrics.record_count,
            file_size_in_bytes=size,
            column_sizes=metrics.column_sizes,
            value_counts=metrics.value_counts,
            null_value_counts=metrics.null_value_counts,
            nan_value_counts=metrics.nan_value_counts,
            lower_bounds=metrics.lower_bounds,
            upper_bounds=metrics.upper_bounds,
            split_offsets=metrics.split_offsets,
            spec_id=self.ctx.spec.spec_id,
        ))

    def abandon(self) -> list[str]:
        """Close without describing; returns every path written (for cleanup after a failure)."""
        paths = [f.file_path for f in self.files]
        if self._writer is not None:
            paths.append(self._path)
            with contextlib.suppress(Exception):  # the file is being thrown away anyway
                self._writer.close()
            self._stream.close()
            self._writer, self._stream = None, None
        return paths


@dataclass
class _PartitionBuffer:
    """Rows of one partition waiting to become a row group, and the files they go to."""

    files: RollingFileWriter
    batches: list[pa.Table] = field(default_factory=list)
    buffered: int = 0
    last_write: int = 0

    @property
    def partition(self) -> tuple[Any, ...]:
        return self.files.partition

    def add(self, rows: pa.Table) -> None:
        self.batches.append(rows)
        self.buffered += rows.nbytes

    def flush(self) -> int:
        """Write the buffer as one row group; returns the bytes freed."""
        if not self.batches:
            return 0
        freed = self.buffered
        rows = pa.concat_tables(self.batches) if len(self.batches) > 1 else self.batches[0]
        self.batches, self.buffered = [], 0
        self.files.write(rows)
        return freed


@dataclass
class WriterStats:
    """What a writer did: for tests, benchmarks and logs."""

    kind: WriterKind
    transitions: list[WriterKind] = field(default_factory=list)
    budget_flushes: int = 0  # buffers written early because the budget was reached
    budget_rolls: int = 0  # files closed early because open files outgrew the budget
    peak_accounted_bytes: int = 0  # the largest buffered + open-file estimate seen


class _NotClustered(Exception):
    """The input broke the clustering the current writer relies on."""


def _row_group_limit(ctx: WriteContext) -> int:
    # A file never needs a row group bigger than itself.
    return max(1, min(ctx.row_group_bytes, ctx.target_file_size))


# -- the three writers ---------------------------------------------------------------------


class SinglePartitionWriter:
    """All rows into one partition: one buffer, one open file, rolled at the target size."""

    kind = WriterKind.SINGLE

    def __init__(self, ctx: WriteContext, partition: tuple[Any, ...] = (), task_id: int = 0) -> None:
        self.ctx = ctx
        self.limit = _row_group_limit(ctx)
        self.current = _PartitionBuffer(RollingFileWriter(ctx, partition, task_id))

    def write_partition(self, partition: tuple[Any, ...], rows: pa.Table) -> None:
        if partition != self.current.partition:
            raise _NotClustered(partition)
        self._add(rows)

    def _add(self, rows: pa.Table) -> None:
        self.current.add(rows)
        if self.current.buffered >= self.limit:
            self.current.flush()

    def close(self) -> list[DataFile]:
        self.current.flush()
        self.current.files.close_file()
        return list(self.current.files.files)

    def abandon(self) -> list[str]:
        return self.current.files.abandon()


class ClusteredWriter:
    """Input clustered by partition: one open file at a time, closed when its partition ends.

    A partition that comes back after its file was closed breaks the assumption; the writer
    raises :class:`_NotClustered` (PartitionedWriter then hands over to a FanoutWriter).
    """

    kind = WriterKind.CLUSTERED

    def __init__(self, ctx: WriteContext, task_id: int = 0, current: _PartitionBuffer | None = None) -> None:
        self.ctx = ctx
        self.task_id = task_id
        self.limit = _row_group_limit(ctx)
        self.current = current
        self.closed: set[tuple[Any, ...]] = set()
        self.files: list[DataFile] = []

    def write_partition(self, partition: tuple[Any, ...], rows: pa.Table) -> None:
        if self.current is None or partition != self.current.partition:
            if partition in self.closed:
                raise _NotClustered(partition)
            self._finish_current()
            self.current = _PartitionBuffer(RollingFileWriter(self.ctx, partition, self.task_id))
        self.current.add(rows)
        if self.current.buffered >= self.limit:
            self.current.flush()

    def _finish_current(self) -> None:
        if self.current is not None:
            self.current.flush()
            self.current.files.close_file()
            self.files.extend(self.current.files.files)
            self.closed.add(self.current.partition)
            self.current = None

    def close(self) -> list[DataFile]:
        self._finish_current()
        return list(self.files)

    def abandon(self) -> list[str]:
        paths = [f.file_path for f in self.files]
        if self.current is not None:
            paths.extend(self.current.files.abandon())
        return paths


class FanoutWriter:
    """Input in any order: a buffer and an open file per partition, within a memory budget.

    Accounted memory is the buffered Arrow bytes plus an estimate per open file. Past the
    budget, the largest buffers are written out (as row groups of their open files) until the
    buffers take at most half the budget; if the open files alone still take more than half,
    the least recently written ones are closed, and their partitions start new files when rows
    come again.
    """

    kind = WriterKind.FANOUT

    def __init__(self, ctx: WriteContext, task_id: int = 0, budget: int | None = None,
                 stats: WriterStats | None = None) -> None:
        self.ctx = ctx
        self.task_id = task_id
        self.budget = budget if budget is not None else fanout_budget(ctx.properties)
        self.limit = min(_row_group_limit(ctx), max(1, self.budget // 2))
        self.overhead = open_file_overhead(ctx.data_location)
        self.open: dict[tuple[Any, ...], _PartitionBuffer] = {}
        self.buffered = 0
        self.files: list[DataFile] = []
        self.stats = stats or WriterStats(WriterKind.FANOUT)
        self._clock = itertools.count(1)

    def adopt(self, part: _PartitionBuffer) -> None:
        self.open[part.partition] = part
        self.buffered += part.buffered

    @property
    def open_files(self) -> int:
        return sum(1 for p in self.open.values() if p.files.is_open)

    def accounted(self) -> int:
        return self.buffered + self.open_files * self.overhead

    def write_partition(self, partition: tuple[Any, ...], rows: pa.Table) -> None:
        if rows.get_total_buffer_size() > 2 * rows.nbytes + 4096:
            # A slice keeps its whole parent batch alive, which the budget would not see: copy.
            rows = rows.take(pa.array(np.arange(rows.num_rows)))
        part = self.open.get(partition)
        if part is None:
            part = self.open[partition] = _PartitionBuffer(RollingFileWriter(self.ctx, partition, self.task_id))
        part.add(rows)
        part.last_write = next(self._clock)
        self.buffered += rows.nbytes
        if part.buffered >= self.limit:
            self.buffered -= part.flush()
        accounted = self.accounted()
        self.stats.peak_accounted_bytes = max(self.stats.peak_accounted_bytes, accounted)
        if accounted > self.budget:
            self._relieve()

    def _relieve(self) -> None:
        half = self.budget // 2
        for part in sorted(self.open.values(), key=lambda p: p.buffered, reverse=True):
            if self.buffered <= half or part.buffered == 0:
                break
            self.buffered -= part.flush()
            self.stats.budget_flushes += 1
        if self.open_files * self.overhead > half:
            for part in sorted(self.open.values(), key=lambda p: p.last_write):
                if self.open_files * self.overhead <= half:
                    break
                if part.files.is_open:
                    self.buffered -= part.flush()
                    part.files.close_file()
                    self.stats.budget_rolls += 1

    def close(self) -> list[DataFile]:
        for part in self.open.values():
            self.buffered -= part.flush()
            part.files.close_file()
            self.files.extend(part.files.files)
        self.open = {}
        return list(self.files)

    def abandon(self) -> list[str]:
        paths = [f.file_path for f in self.files]
        for part in self.open.values():
            paths.extend(part.files.abandon())
        return paths


# -- routing and the automatic choice -------------------------------------------------------


def route_batch(
    ctx: WriteContext, result_types: list[IcebergType], data: pa.Table
) -> tuple[list[tuple[tuple[Any, ...], pa.Table]], bool]:
    """The batch's rows by partition, and whether the batch is clustered (each partition in one
    contiguous run). Clustered batches are returned in input order as zero-copy slices;
    otherwise the partitions are gathered (copied) in order of first appearance.
    """
    keys = [_combine(k) for k in partition_keys(ctx.spec, ctx.schema, data)]
    if all(_is_constant(k) for k in keys):
        return [(_partition_tuple(keys, 0, result_types), data)], True
    grouped = _group_codes(keys)
    if grouped is None:  # a key type without dictionary encoding: fall back to sorting
        from tablestore.table.write import split_by_partition

        return [(p.partition, p.rows) for p in split_by_partition(ctx.spec, ctx.schema, data)], False
    codes, _ = grouped
    starts, ends = _runs(codes)
    run_codes = codes[starts]
    _, first_run = np.unique(run_codes, return_index=True)
    if len(first_run) == len(run_codes):
        return [
            (_partition_tuple(keys, int(s), result_types), data.slice(int(s), int(e - s)))
            for s, e in zip(starts, ends, strict=True)
        ], True
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    group_starts, group_ends = _runs(sorted_codes)
    # Groups in order of their first row in the batch, so output follows input.
    firsts = order[group_starts]
    out = []
    for g in np.argsort(firsts, kind="stable"):
        indices = pa.array(order[group_starts[g]:group_ends[g]])
        out.append((_partition_tuple(keys, int(firsts[g]), result_types), data.take(indices)))
    return out, False


class PartitionedWriter:
    """The writer a write path uses: routes batches by partition and picks the writer.

    ``partition`` names a static partition: every row goes there and no keys are computed.
    ``kind`` forces a writer (tests, or a caller that knows its input); otherwise the table
    properties and the input decide (see the module docstring).
    """

    def __init__(self, ctx: WriteContext, task_id: int = 0, partition: tuple[Any, ...] | None = None,
                 kind: WriterKind | None = None) -> None:
        self.ctx = ctx
        self.task_id = task_id
        self.static = partition is not None or ctx.spec.is_unpartitioned()
        self.mode = distribution_mode(ctx.properties)
        fanout_budget(ctx.properties)  # a bad budget fails before any file is written
        self.result_types = [f.field_type for f in ctx.spec.partition_type(ctx.schema).fields]
        forced = kind if kind is not None else (WriterKind.FANOUT if fanout_forced(ctx.properties) else None)
        if self.static and forced not in (None, WriterKind.SINGLE):
            forced = None  # one partition needs no routing
        self.forced = forced
        self.stats = WriterStats(WriterKind.SINGLE)
        self.rows = 0
        self._writer: SinglePartitionWriter | ClusteredWriter | FanoutWriter | None = None
        if self.static:
            self._set(SinglePartitionWriter(ctx, partition or (), task_id))
        elif forced == WriterKind.FANOUT:
            self._set(FanoutWriter(ctx, task_id, stats=self.stats))
        elif forced == WriterKind.CLUSTERED:
            self._set(ClusteredWriter(ctx, task_id))

    @property
    def kind(self) -> WriterKind:
        return self.stats.kind

    def _set(self, writer: SinglePartitionWriter | ClusteredWriter | FanoutWriter) -> None:
        self.stats.transitions.append(writer.kind)
        self._writer = writer
        self.stats.kind = writer.kind

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        data = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        if data.num_rows == 0:
            return
        self.rows += data.num_rows
        if self.static:
            assert isinstance(self._writer, SinglePartitionWriter)
            self._writer._add(data)
            return
        parts, clustered = route_batch(self.ctx, self.result_types, data)
        if self.forced == WriterKind.SINGLE and (len(parts) > 1 or (
                self._writer is not None and parts[0][0] != self._writer.current.partition)):  # type: ignore[union-attr]
            raise ValidationError("the single-partition writer was asked for, but the input holds rows of "
                                  "several partitions; let the writer choose")
        if self._writer is None:
            if len(parts) == 1:
                self._set(SinglePartitionWriter(self.ctx, parts[0][0], self.task_id))
            elif clustered:
                self._set(ClusteredWriter(self.ctx, self.task_id))
            else:
                self._set(FanoutWriter(self.ctx, self.task_id, stats=self.stats))
        if not clustered and not isinstance(self._writer, FanoutWriter):
            self._to_fanout()
        for partition, rows in parts:
            try:
                self._writer.write_partition(partition, rows)  # type: ignore[union-attr]
            except _NotClustered:
                if isinstance(self._writer, SinglePartitionWriter) and self.forced != WriterKind.SINGLE:
                    self._set(ClusteredWriter(self.ctx, self.task_id, self._writer.current))
                else:
                    self._to_fanout()
                self._writer.write_partition(partition, rows)  # type: ignore[union-attr]

    def _to_fanout(self) -> None:
        current = self._writer
        if self.forced in (WriterKind.SINGLE, WriterKind.CLUSTERED):
            raise ValidationError(
                f"the input is not clustered by partition, which the {self.forced} writer needs; "
                "sort or repartition it by the partition columns, or let the writer choose"
            )
        if self.mode in ("hash", "range"):
            log.warning("%s=%s, yet the input of this write task is not clustered by partition; "
                        "writing it with the fanout writer", DISTRIBUTION_MODE_PROPERTY, self.mode)
        fanout = FanoutWriter(self.ctx, self.task_id, stats=self.stats)
        if isinstance(current, SinglePartitionWriter):
            fanout.adopt(current.current)
        elif isinstance(current, ClusteredWriter):
            fanout.files.extend(current.files)
            if current.current is not None:
                fanout.adopt(current.current)
        self._set(fanout)

    def close(self) -> list[DataFile]:
        return self._writer.close() if self._writer is not None else []

    def abandon(self) -> list[str]:
        """Close every open file after a failure; returns every path this writer wrote."""
        return self._writer.abandon() if self._writer is not None else []


def write_batches(ctx: WriteContext, batches: Iterable[pa.RecordBatch | pa.Table], task_id: int = 0,
                  partition: tuple[Any, ...] | None = None) -> tuple[list[DataFile], WriterStats]:
    """Write a stream of conformed batches with the automatically chosen writer.

    On failure, every file written so far is deleted before the error propagates.
    """
    writer = PartitionedWriter(ctx, task_id, partition)
    try:
        for batch in batches:
            writer.write(batch)
        files = writer.close()
    except BaseException:
        for path in writer.abandon():
            with contextlib.suppress(OSError):  # best effort: remove_orphan_files catches the rest
                ctx.io.delete(path)
        raise
    return files, writer.stats


__all__ = [
    "DEFAULT_FANOUT_BUDGET",
    "FANOUT_BUDGET_PROPERTY",
    "ClusteredWriter",
    "FanoutWriter",
    "PartitionedWriter",
    "RollingFileWriter",
    "SinglePartitionWriter",
    "WriterKind",
    "WriterStats",
    "route_batch",
    "write_batches",
]
