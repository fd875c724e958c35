"""Streaming partitioned writers: rows arrive as Arrow batches, files leave as DataFiles.

Three writers, as in Iceberg's Spark and Flink sinks, and one that picks among them:

- :class:`SinglePartitionWriter`: every row goes to one partition (an unpartitioned table, a
  static partition, or input that so far held one partition). One open file, rolled at the
  target file size (``write.target-file-size-bytes``).
- :class:`ClusteredWriter` ("grouped"): input clustered by partition, so one file is open at
  a time; a partition's file is closed when the next partition starts.
- :class:`FanoutWriter`: input in any order. Every partition seen keeps a buffer and an open
  file; when the buffers and open files outgrow the memory budget
  (``write.fanout.memory-budget-bytes``, default 256 MiB) it writes every buffer out to its
  file, and past that closes (rolls) the least recently used files.

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
import ctypes
import ctypes.util
import enum
import functools
import itertools
import logging
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tablestore.errors import ValidationError
from tablestore.io.cleanup import delete_files, deleted_unless_sent
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.schemas.schema import parquet_write_schema, without_unknown_columns
from tablestore.spec.schemas.types import IcebergType
from tablestore.table.write.data_files import (
    WriteContext,
    dictionary_columns,
    group_codes,
    is_constant,
    partition_keys,
    partition_tuple,
    positive_int_property,
    single_chunk,
    split_by_partition,
    value_runs,
)
from tablestore.table.write.metrics import collect_metrics, float_nan_counts, metrics_modes

log = logging.getLogger(__name__)

FANOUT_BUDGET_PROPERTY = "write.fanout.memory-budget-bytes"
DEFAULT_FANOUT_BUDGET = 256 * 1024 * 1024
FANOUT_ENABLED_PROPERTY = "write.spark.fanout.enabled"
DISTRIBUTION_MODE_PROPERTY = "write.distribution-mode"
DISTRIBUTION_MODES = ("none", "hash", "range")
# What an open file costs besides its buffered rows, measured with pyarrow 2x on Linux: the
# Parquet writer's column encoders (dictionary memo tables, page builders) take about 12 KiB per
# column, 8 of them from Arrow's pool, plus a fixed part; for S3 add the multipart part that the
# output stream fills before it uploads. The footer grows by about a kilobyte per column chunk
# (statistics included) until the file is closed.
LOCAL_OPEN_FILE_OVERHEAD = 16 * 1024
OPEN_FILE_BYTES_PER_COLUMN = 12 * 1024
REMOTE_OPEN_FILE_OVERHEAD = 10 * 1024 * 1024
FOOTER_BYTES_PER_COLUMN_CHUNK = 1024


class WriterKind(enum.StrEnum):
    SINGLE = "single"
    CLUSTERED = "clustered"
    FANOUT = "fanout"


def open_file_overhead(location: str) -> int:
    return LOCAL_OPEN_FILE_OVERHEAD if "://" not in location or location.startswith("file:") \
        else REMOTE_OPEN_FILE_OVERHEAD


def fanout_budget(properties: dict[str, str]) -> int:
    return positive_int_property(properties, FANOUT_BUDGET_PROPERTY, DEFAULT_FANOUT_BUDGET)


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


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, looked up on the first flush rather than at import (every
    ``import tablestore`` loads this module, and ``find_library`` runs ``ldconfig``)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim  # glibc only
        return trim
    except (OSError, AttributeError):
        return None


def release_memory() -> None:
    """Hand memory freed by the writers back to the operating system: Arrow's pool keeps freed
    blocks for reuse, and so does glibc's heap (the Parquet encoders and compressors allocate
    there), so without this the process stays at its high-water mark after a flush."""
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


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
        self._file_schema: pa.Schema | None = None  # set when the file's types differ (uuids)
        self.row_groups = 0  # in the open file: its footer metadata is held until close

    @property
    def is_open(self) -> bool:
        return self._writer is not None

    def write(self, rows: pa.Table) -> None:
        """Write ``rows`` as one row group (callers buffer to the row-group size)."""
        if rows.num_rows == 0:
            return
        rows = without_unknown_columns(rows, self.ctx.schema)
        if self._writer is None:
            self._open(rows)
        assert self._writer is not None
        file_rows = rows.cast(self._file_schema) if self._file_schema is not None else rows
        self._writer.write_table(file_rows, row_group_size=rows.num_rows)
        self.row_groups += 1
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
        file_schema = parquet_write_schema(rows.schema, self.ctx.schema)
        self._file_schema = file_schema if file_schema is not rows.schema else None
        try:
            self._writer = pq.ParquetWriter(
                self._stream,
                file_schema,
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
        self.row_groups = 0
        try:
            writer.close()
            metadata = writer.writer.metadata
            size = stream.tell()
        finally:
            stream.close()
        metrics = collect_metrics(metadata, self.ctx.schema, metrics_modes(self.ctx.schema, self.ctx.properties),
                                  self._nan_counts)
        self.files.append(metrics.data_file(self._path, self.partition, size, self.ctx.spec.spec_id))

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


@dataclass(eq=False)
class _Chunk:
    """A routed batch that buffered rows point into. Its memory is the batch's, and it is freed
    when the last partition holding rows of it has written them."""

    table: pa.Table
    size: int
    refs: int = 0


@dataclass
class _PartitionBuffer:
    """Rows of one partition waiting to become a row group, and the files they go to.

    The rows are kept as (chunk, offset, length) pieces of routed batches rather than as Arrow
    slices: a thousand partitions times a dozen batches would otherwise be tens of thousands of
    small Table objects, memory that no byte count of the data sees.
    """

    files: RollingFileWriter
    pieces: list[tuple[_Chunk, int, int]] = field(default_factory=list)
    buffered: int = 0  # bytes of the rows waiting (their share of their chunks): the row-group size
    last_write: int = 0

    @property
    def partition(self) -> tuple[Any, ...]:
        return self.files.partition

    def add(self, rows: pa.Table) -> int:
        """Buffer a table of its own; returns the memory it holds."""
        # A slice holds its parent's buffers (the memory), but its row group is its own size.
        chunk = _Chunk(rows, rows.get_total_buffer_size())
        self.add_piece(chunk, 0, rows.num_rows, rows.nbytes)
        return chunk.size

    def add_piece(self, chunk: _Chunk, offset: int, length: int, nbytes: int | None = None) -> None:
        chunk.refs += 1
        self.pieces.append((chunk, offset, length))
        rows = chunk.table.num_rows
        self.buffered += nbytes if nbytes is not None else chunk.size * length // rows if rows else 0

    def held(self) -> int:
        """The memory of the chunks only this buffer holds on to."""
        return sum(c.size for c, _, _ in self.pieces if c.refs == 1)

    def flush(self) -> int:
        """Write the buffer as one row group; returns the memory freed (chunks no longer held)."""
        if not self.pieces:
            return 0
        pieces = self.pieces
        self.pieces, self.buffered = [], 0
        slices = [c.table.slice(o, n) for c, o, n in pieces]
        rows = pa.concat_tables(slices) if len(slices) > 1 else slices[0]
        del slices
        freed = 0
        for chunk, _, _ in pieces:
            chunk.refs -= 1
            if chunk.refs == 0:
                freed += chunk.size
        del pieces
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

    Accounted memory is what the buffered rows hold (the routed batches they point into, each
    counted once, by its real buffer size) plus, per open file, the Parquet writer's state and
    the footer it accumulates (see ``LOCAL_OPEN_FILE_OVERHEAD``). Past the budget every buffer
    is written out as a row group of its open file, which frees every batch, and the memory
    pool returns the freed memory to the operating system. If the open files alone then take
    more than half of the budget, the least recently written ones are closed, and their
    partitions start new files when rows come again.

    What the accounting leaves out is small and fixed: the batch being routed (and its sorted
    copy), one partition's row group while it is encoded, and the interpreter.
    """

    kind = WriterKind.FANOUT

    def __init__(self, ctx: WriteContext, task_id: int = 0, budget: int | None = None,
                 stats: WriterStats | None = None) -> None:
        self.ctx = ctx
        self.task_id = task_id
        self.budget = budget if budget is not None else fanout_budget(ctx.properties)
        self.limit = min(_row_group_limit(ctx), max(1, self.budget // 2))
        columns = max(1, sum(1 for _ in ctx.schema.all_fields()))  # nested: a little over the leaves
        self.overhead = open_file_overhead(ctx.data_location) + OPEN_FILE_BYTES_PER_COLUMN * columns
        self.footer_bytes = FOOTER_BYTES_PER_COLUMN_CHUNK * columns
        self.open: dict[tuple[Any, ...], _PartitionBuffer] = {}
        self.buffered = 0  # memory of the chunks the buffers hold
        self.files: list[DataFile] = []
        self.stats = stats or WriterStats(WriterKind.FANOUT)
        self._clock = itertools.count(1)

    def adopt(self, part: _PartitionBuffer) -> None:
        self.open[part.partition] = part
        self.buffered += part.held()

    @property
    def open_files(self) -> int:
        return sum(1 for p in self.open.values() if p.files.is_open)

    def _file_cost(self, part: _PartitionBuffer) -> int:
        """An open file's cost; a partition with rows waiting but no open file reserves one,
        because writing the rows out (when the budget is reached) opens it."""
        files = part.files
        if files.is_open:
            return self.overhead + files.row_groups * self.footer_bytes
        return self.overhead if part.pieces else 0

    def open_file_bytes(self) -> int:
        return sum(self._file_cost(p) for p in self.open.values())

    def accounted(self) -> int:
        return self.buffered + self.open_file_bytes()

    def write_partition(self, partition: tuple[Any, ...], rows: pa.Table) -> None:
        self.write_pieces(rows, [(partition, 0, rows.num_rows)])

    def write_pieces(self, table: pa.Table, pieces: list[tuple[tuple[Any, ...], int, int]]) -> None:
        """Buffer the rows ``table[offset:offset + length]`` of each ``(partition, offset, length)``."""
        size = table.get_total_buffer_size()
        if size > 2 * table.nbytes + 4096:
            # A slice of a larger table keeps all of it alive: copy the rows, so that what is
            # held is what the budget counts.
            table = table.take(pa.array(np.arange(table.num_rows)))
            size = table.get_total_buffer_size()
        chunk = _Chunk(table, size, refs=1)  # held while it is distributed
        self.buffered += chunk.size
        for partition, offset, length in pieces:
            part = self.open.get(partition)
            if part is None:
                part = self.open[partition] = _PartitionBuffer(RollingFileWriter(self.ctx, partition, self.task_id))
            part.add_piece(chunk, offset, length)
            part.last_write = next(self._clock)
            if part.buffered >= self.limit:
                self.buffered -= part.flush()
        chunk.refs -= 1
        if chunk.refs == 0:
            self.buffered -= chunk.size
        del chunk
        accounted = self.accounted()
        self.stats.peak_accounted_bytes = max(self.stats.peak_accounted_bytes, accounted)
        if accounted > self.budget:
            self._relieve()

    def _relieve(self) -> None:
        for part in self.open.values():
            if part.pieces:
                self.buffered -= part.flush()
                self.stats.budget_flushes += 1
        half = self.budget // 2
        file_bytes = self.open_file_bytes()
        if file_bytes > half:
            for part in sorted(self.open.values(), key=lambda p: p.last_write):
                if file_bytes <= half:
                    break
                if part.files.is_open:
                    file_bytes -= self._file_cost(part)
                    part.files.close_file()
                    self.stats.budget_rolls += 1
        release_memory()

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


def route_pieces(
    ctx: WriteContext, result_types: list[IcebergType], data: pa.Table
) -> tuple[pa.Table, list[tuple[tuple[Any, ...], int, int]], bool]:
    """The batch's rows by partition as ``(partition, offset, length)`` runs of a table, and
    whether the batch is clustered (each partition in one contiguous run). A clustered batch is
    its own table; otherwise the rows are gathered (one copy) in partition order, and the runs
    are listed in the order of each partition's first row in the batch.
    """
    keys = [single_chunk(k) for k in partition_keys(ctx.spec, ctx.schema, data)]
    if all(is_constant(k) for k in keys):
        return data, [(partition_tuple(keys, 0, result_types), 0, data.num_rows)], True
    grouped = group_codes(keys)
    if grouped is None:  # a key type without dictionary encoding: fall back to sorting
        parts = [(p.partition, p.rows) for p in split_by_partition(ctx.spec, ctx.schema, data)]
        table = pa.concat_tables([rows for _, rows in parts]) if parts else data
        pieces, offset = [], 0
        for partition, rows in parts:
            pieces.append((partition, offset, rows.num_rows))
            offset += rows.num_rows
        return table, pieces, False
    codes, cardinality = grouped
    # Counting the runs first spares a batch in arrival order the offsets of its every run.
    if int(np.count_nonzero(codes[1:] != codes[:-1])) + 1 <= cardinality:
        starts, ends = value_runs(codes)
        run_codes = codes[starts]
        _, first_run = np.unique(run_codes, return_index=True)
        if len(first_run) == len(run_codes):
            return data, [
                (partition_tuple(keys, int(s), result_types), int(s), int(e - s))
                for s, e in zip(starts, ends, strict=True)
            ], True
    # Arrow's stable sort of integers is several times numpy's stable sort of int64 (a merge sort).
    order = pc.sort_indices(pa.array(codes)).to_numpy()
    group_starts, group_ends = value_runs(codes[order])
    # Groups in order of their first row in the batch, so output follows input.
    firsts = order[group_starts]
    gathered = data.take(pa.array(order))
    return gathered, [
        (partition_tuple(keys, int(firsts[g]), result_types), int(group_starts[g]),
         int(group_ends[g] - group_starts[g]))
        for g in np.argsort(firsts, kind="stable")
    ], False


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
        table, pieces, clustered = route_pieces(self.ctx, self.result_types, data)
        del data  # the routed table replaces it (or is it)
        if self.forced == WriterKind.SINGLE and (len(pieces) > 1 or (
                self._writer is not None and pieces[0][0] != self._writer.current.partition)):  # type: ignore[union-attr]
            raise ValidationError("the single-partition writer was asked for, but the input holds rows of "
                                  "several partitions; let the writer choose")
        if self._writer is None:
            if len(pieces) == 1:
                self._set(SinglePartitionWriter(self.ctx, pieces[0][0], self.task_id))
            elif clustered:
                self._set(ClusteredWriter(self.ctx, self.task_id))
            else:
                self._set(FanoutWriter(self.ctx, self.task_id, stats=self.stats))
        if not clustered and not isinstance(self._writer, FanoutWriter):
            self._to_fanout()
        if isinstance(self._writer, FanoutWriter):
            self._writer.write_pieces(table, pieces)
            return
        for i, (partition, offset, length) in enumerate(pieces):
            rows = table.slice(offset, length)
            try:
                self._writer.write_partition(partition, rows)  # type: ignore[union-attr]
            except _NotClustered:
                if isinstance(self._writer, SinglePartitionWriter) and self.forced != WriterKind.SINGLE:
                    self._set(ClusteredWriter(self.ctx, self.task_id, self._writer.current))
                    self._writer.write_partition(partition, rows)
                else:
                    self._to_fanout()
                    assert isinstance(self._writer, FanoutWriter)
                    self._writer.write_pieces(table, pieces[i:])  # the rest shares one chunk
                    return

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
    with deleted_unless_sent(lambda: delete_files(ctx.io, writer.abandon())):
        for batch in batches:
            writer.write(batch)
        files = writer.close()
    return files, writer.stats


def write_data_stream(
    ctx: WriteContext, batches: Iterable[pa.RecordBatch | pa.Table], task_id: int = 0
) -> list[DataFile]:
    """Write a stream of conformed batches with bounded memory: the single-partition, clustered
    or fanout writer is chosen from the input (see :func:`write_batches`)."""
    return write_batches(ctx, batches, task_id)[0]


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
    "route_pieces",
    "write_batches",
    "write_data_stream",
]

