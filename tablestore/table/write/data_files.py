"""Writing data files: split rows by partition, write Parquet with field ids, roll at a target
size, and describe each file as a DataFile with its metrics.

Writers never commit. They return DataFiles; a snapshot producer puts them into manifests.
"""

from __future__ import annotations

import datetime
import itertools
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tablestore.errors import ValidationError
from tablestore.io.fileio import FileIO
from tablestore.names import to_location_uri
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.metadata.table_metadata import int_property
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.schema import Schema, parquet_write_schema, without_unknown_columns
from tablestore.spec.schemas.types import DateType, IcebergType
from tablestore.table.write.metrics import collect_metrics, float_nan_counts, metrics_modes, parquet_leaf_paths

DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024
DEFAULT_ROW_GROUP_BYTES = 128 * 1024 * 1024
DEFAULT_CODEC = "zstd"
# pyarrow's dictionary page limit: past it, a column chunk falls back to plain encoding.
DICTIONARY_PAGE_LIMIT = 1024 * 1024
_DICTIONARY_SAMPLE = 8192
# Below this many rows a column is not sampled for its distinct values: it is small whatever
# its encoding, and a fanout write of many small partitions would pay the sampling per column
# of each.
_DISTINCT_CHECK_ROWS = 8192
_EPOCH = datetime.date(1970, 1, 1)


def positive_int_property(properties: dict[str, str], key: str, default: int) -> int:
    value = int_property(properties, key)
    if value is None:
        return default
    if value <= 0:
        raise ValidationError(f"table property {key}={properties[key]!r} must be positive")
    return value


@dataclass
class WriteContext:
    """What every file of one write shares: where, with which schema and spec, named how."""

    io: FileIO
    location: str
    schema: Schema
    spec: PartitionSpec
    properties: dict[str, str]
    write_uuid: str = field(default_factory=lambda: str(uuid.uuid4()))
    _counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def data_location(self) -> str:
        custom = self.properties.get("write.data.path")
        return (to_location_uri(custom) if custom else f"{to_location_uri(self.location.rstrip('/'))}/data").rstrip("/")

    def new_file_path(self, partition_path: str, task_id: int = 0) -> str:
        n = next(self._counter)
        name = f"{task_id:05d}-{n}-{self.write_uuid}-{n:05d}.parquet"
        if partition_path:
            return f"{self.data_location}/{partition_path}/{name}"
        return f"{self.data_location}/{name}"

    @property
    def target_file_size(self) -> int:
        return positive_int_property(self.properties, "write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE)

    @property
    def row_group_bytes(self) -> int:
        return positive_int_property(self.properties, "write.parquet.row-group-size-bytes", DEFAULT_ROW_GROUP_BYTES)

    @property
    def codec(self) -> str:
        codec = self.properties.get("write.parquet.compression-codec", DEFAULT_CODEC).lower()
        if codec == "uncompressed":
            return "none"
        if codec not in ("zstd", "snappy", "gzip", "lz4", "brotli", "none"):
            raise ValidationError(
                f"write.parquet.compression-codec={codec!r} is not supported; use zstd, snappy, gzip, "
                "lz4, brotli or uncompressed"
            )
        return codec

    @property
    def compression_level(self) -> int | None:
        raw = self.properties.get("write.parquet.compression-level")
        return int(raw) if raw else None


@dataclass(frozen=True)
class PartitionSlice:
    """Rows of one partition, with the partition tuple (internal values).

    The rows are ``source`` itself, or the rows of ``source`` at ``indices``; they are gathered
    when a write task asks for them, so partitions are gathered in parallel, each in its task.
    """

    partition: tuple[Any, ...]
    source: pa.Table
    indices: pa.Array | None = None

    @property
    def num_rows(self) -> int:
        return self.source.num_rows if self.indices is None else len(self.indices)

    @property
    def rows(self) -> pa.Table:
        return self.source if self.indices is None else self.source.take(self.indices)


def partition_keys(spec: PartitionSpec, schema: Schema, data: pa.Table) -> list[pa.Array]:
    """The partition fields' values of every row, computed by their transforms."""
    keys = []
    for pf in spec.fields:
        source = _column_by_id(data, schema, pf.source_id)
        keys.append(pf.transform.apply_arrow(source))
    return keys


def _column_by_id(data: pa.Table, schema: Schema, field_id: int) -> pa.ChunkedArray | pa.Array:
    if not schema.has_field(field_id):
        raise ValidationError(f"partition source field {field_id} is not in the table schema")
    # The path is walked by field id, not by splitting the dotted name: a column may have a dot
    # in its own name ("dot.ted").
    parts: list[str] = []
    current: int | None = field_id
    while current is not None:
        parts.append(schema.find_field(current).name)
        current = schema.parent_id(current)
    parts.reverse()
    column: Any = data.column(parts[0])
    for part in parts[1:]:
        column = pc.struct_field(column, part)
    return column


def split_by_partition(spec: PartitionSpec, schema: Schema, data: pa.Table) -> list[PartitionSlice]:
    """Group rows by partition, in ascending order of the partition tuples (nulls last).

    Rows keep their order within a partition. Input that is already clustered (every partition
    in one contiguous run) is sliced without a copy; otherwise each partition is gathered by its
    write task from a stable sort of one integer group code per row.
    """
    if not spec.fields or data.num_rows == 0:
        return [PartitionSlice((), data)] if data.num_rows else []
    result_types = [f.field_type for f in spec.partition_type(schema).fields]
    keys = [single_chunk(k) for k in partition_keys(spec, schema, data)]
    if all(is_constant(k) for k in keys):
        return [PartitionSlice(partition_tuple(keys, 0, result_types), data)]
    grouped = group_codes(keys)
    if grouped is None:
        return _split_by_sorting(keys, result_types, data)
    codes, cardinality = grouped
    # Counting the runs first spares unclustered input (a run per row or so) the arrays of
    # every run's offsets: this split runs before any write task starts, so it is serial time.
    runs = int(np.count_nonzero(codes[1:] != codes[:-1])) + 1
    if runs <= cardinality:
        starts, ends = value_runs(codes)
        run_codes = codes[starts]
        if len(np.unique(run_codes)) == len(run_codes):
            # Clustered: each partition is one run already.
            return [
                PartitionSlice(partition_tuple(keys, int(starts[i]), result_types),
                               data.slice(int(starts[i]), int(ends[i] - starts[i])))
                for i in np.argsort(run_codes, kind="stable")
            ]
    order = pc.sort_indices(pa.array(codes))  # stable
    order_np = order.to_numpy()
    if cardinality <= max(len(codes), 1 << 16):
        # Few codes: each partition's offsets in the sorted order are the running sum of the
        # codes' counts, with no gather of the codes into sorted order.
        counts = np.bincount(codes, minlength=cardinality)
        counts = counts[counts > 0]
        ends = np.cumsum(counts)
        starts = ends - counts
    else:
        starts, ends = value_runs(codes[order_np])
    return [
        PartitionSlice(partition_tuple(keys, int(order_np[start]), result_types), data,
                       order.slice(int(start), int(end - start)))
        for start, end in zip(starts, ends, strict=True)
    ]


def value_runs(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end offsets of the runs of equal values."""
    change = np.flatnonzero(codes[1:] != codes[:-1]) + 1
    return np.concatenate(([0], change)), np.concatenate((change, [len(codes)]))


def group_codes(keys: list[pa.Array]) -> tuple[np.ndarray, int] | None:
    """One int64 per row that orders rows as their partition tuples do (nulls last), and an
    upper bound of the number of distinct codes.

    Each key is dictionary-encoded (nulls as an entry); its code is the rank of the row's value
    among the distinct values, and the codes of several keys combine lexicographically.
    None when a key type cannot be dictionary-encoded.
    """
    combined: np.ndarray | None = None
    cardinality = 1
    for key in keys:
        dense = dense_integer_codes(key)
        if dense is not None:
            codes, size = dense
        else:
            try:
                encoded = pc.dictionary_encode(key, null_encoding="encode")
            except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
                return None
            dictionary = encoded.dictionary
            rank = np.empty(len(dictionary), dtype=np.int64)
            rank[pc.sort_indices(dictionary).to_numpy()] = np.arange(len(dictionary), dtype=np.int64)
            codes = rank[encoded.indices.to_numpy(zero_copy_only=False)]
            size = max(1, len(dictionary))
        if combined is None:
            combined = codes
        else:
            if cardinality * size >= 2**62:
                combined = np.unique(combined, return_inverse=True)[1].astype(np.int64).reshape(-1)
                cardinality = int(combined.max()) + 1
            combined = combined * size + codes
        cardinality *= size
    assert combined is not None
    return combined, cardinality


def dense_integer_codes(key: pa.Array) -> tuple[np.ndarray, int] | None:
    """For an integer (or date) key of a narrow range, the codes :func:`group_codes` wants
    without hashing: each value's offset from the smallest, nulls one past the largest; and
    the number of codes. None for other keys, or a range wider than the rows (or 65,536).

    The time transforms and buckets give such keys; hashing them (``dictionary_encode``) and
    ranking the dictionary cost several times this subtraction, before any write task starts.
    """
    t = key.type
    if not (pa.types.is_signed_integer(t) or pa.types.is_date32(t)
            or (pa.types.is_unsigned_integer(t) and t.bit_width <= 32)):
        return None
    if key.null_count == len(key):
        return np.zeros(len(key), dtype=np.int64), 1
    bounds = pc.min_max(key.view(pa.int32()) if pa.types.is_date32(t) else key)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    span = high - low + 1
    if span > max(len(key), 1 << 16):
        return None
    values = key.view(pa.int32()) if pa.types.is_date32(t) else key
    if not key.null_count:
        codes = values.to_numpy().astype(np.int64)
        codes -= low
        return codes, span
    codes = pc.fill_null(values, low).to_numpy().astype(np.int64)
    codes -= low
    codes[key.is_null().to_numpy(zero_copy_only=False)] = span  # nulls last
    return codes, span + 1


def _split_by_sorting(keys: list[pa.Array], result_types: list[IcebergType], data: pa.Table) -> list[PartitionSlice]:
    """Group rows by sorting on the key columns (for key types dictionary encoding lacks)."""
    names = [f"k{i}" for i in range(len(keys))]
    key_table = pa.table(dict(zip(names, keys, strict=True)))
    order = pc.sort_indices(key_table, sort_keys=[(n, "ascending") for n in names])
    key_table = key_table.take(order)
    change = None
    for name in names:
        column = single_chunk(key_table.column(name))
        prev, nxt = column.slice(0, len(column) - 1), column.slice(1)
        differs = pc.fill_null(pc.not_equal(prev, nxt), True)
        both_null = pc.and_(pc.is_null(prev), pc.is_null(nxt))
        differs = pc.and_not(differs, both_null)
        change = differs if change is None else pc.or_(change, differs)
    assert change is not None
    boundaries = [0, *(pc.indices_nonzero(change).to_numpy() + 1).tolist(), data.num_rows]
    sorted_keys = [single_chunk(key_table.column(n)) for n in names]
    return [
        PartitionSlice(partition_tuple(sorted_keys, start, result_types), data, order.slice(start, end - start))
        for start, end in itertools.pairwise(boundaries)
    ]


def single_chunk(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        return array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    return array


def is_constant(array: pa.Array) -> bool:
    if array.null_count:
        return array.null_count == len(array)
    if pa.types.is_boolean(array.type) or pa.types.is_integer(array.type) or pa.types.is_date(array.type) \
            or pa.types.is_floating(array.type) or pa.types.is_decimal(array.type) or pa.types.is_timestamp(array.type):
        bounds = pc.min_max(array)
        return bool(bounds["min"] == bounds["max"])
    return len(pc.unique(array)) == 1


def partition_tuple(keys: list[pa.Array], row: int, result_types: list[IcebergType]) -> tuple[Any, ...]:
    return tuple(internal_value(t, k[row].as_py()) for k, t in zip(keys, result_types, strict=True))


def internal_value(t: IcebergType, value: Any) -> Any:
    """A transform result as the spec's internal value (dates are days since the epoch)."""
    if value is None:
        return None
    if isinstance(t, DateType) and isinstance(value, datetime.date):
        return (value - _EPOCH).days
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return conversions.from_python(t, value)
    return value


def write_partition(ctx: WriteContext, part: PartitionSlice, task_id: int = 0) -> list[DataFile]:
    """Write the rows of one partition into as many files as the target size needs."""
    partition_path = ctx.spec.partition_path(part.partition, ctx.schema) if ctx.spec.fields else ""
    if part.num_rows == 0:
        return []
    rows = part.rows
    bytes_per_row = max(1.0, rows.nbytes / rows.num_rows)
    row_group_rows = max(1, int(ctx.row_group_bytes / bytes_per_row))
    modes = metrics_modes(ctx.schema, ctx.properties)
    use_dictionary = dictionary_columns(rows, ctx.schema, row_group_rows)
    rows = without_unknown_columns(rows, ctx.schema)
    file_schema = parquet_write_schema(rows.schema, ctx.schema)  # uuids annotated as the spec asks
    if file_schema is not rows.schema:
        rows = rows.cast(file_schema)
    files: list[DataFile] = []
    offset = 0
    while offset < rows.num_rows:
        path = ctx.new_file_path(partition_path, task_id)
        stream = ctx.io.new_output(path).create(overwrite=False)
        written_rows = 0
        try:
            writer = pq.ParquetWriter(
                stream,
                rows.schema,
                compression=ctx.codec,
                compression_level=ctx.compression_level,
                write_statistics=True,
                use_compliant_nested_type=True,
                # The spec's Parquet mapping: decimal(P <= 9) as INT32, P <= 18 as INT64.
                store_decimal_as_integer=True,
                use_dictionary=use_dictionary,
            )
            while offset < rows.num_rows:
                chunk = rows.slice(offset, row_group_rows)
                writer.write_table(chunk, row_group_size=row_group_rows)
                offset += chunk.num_rows
                written_rows += chunk.num_rows
                if stream.tell() >= ctx.target_file_size:
                    break
            writer.close()
            metadata = writer.writer.metadata
            size = stream.tell()
        finally:
            stream.close()
        written = rows.slice(offset - written_rows, written_rows)
        metrics = collect_metrics(metadata, ctx.schema, modes, float_nan_counts(written, ctx.schema))
        files.append(metrics.data_file(path, part.partition, size, ctx.spec.spec_id))
    return files


def dictionary_columns(rows: pa.Table, schema: Schema, row_group_rows: int) -> bool | list[str]:
    """Which columns to dictionary-encode: all (True) but the top-level columns whose values are
    mostly distinct, or whose dictionary would overflow the dictionary page anyway.

    A column whose dictionary outgrows the page falls back to plain encoding, after hashing
    every value up to that point and writing a dictionary page nobody needs: slower and
    bigger than plain from the start. Distinct values per row group are estimated from an
    evenly spaced sample (by its repeats, as in the birthday problem).
    """
    n = rows.num_rows
    # One evenly spaced sample of row positions serves every column.
    sample_at = pa.array(np.arange(0, n, max(1, n // _DICTIONARY_SAMPLE), dtype=np.int64)[:_DICTIONARY_SAMPLE]) \
        if n >= _DISTINCT_CHECK_ROWS else None
    disabled = {
        name for name in rows.column_names
        if _dictionary_overflows(rows.column(name), row_group_rows, sample_at)
    }
    if not disabled:
        return True
    return [path for path in parquet_leaf_paths(schema) if path.split(".", 1)[0] not in disabled]


def _dictionary_overflows(column: pa.ChunkedArray, row_group_rows: int, sample_at: pa.Array | None) -> bool:
    t = column.type
    if pa.types.is_boolean(t) or not (
        pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_temporal(t)
        or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
        or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
    ):
        return False
    n = len(column)
    if n == 0:
        return False
    variable = pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
        or pa.types.is_large_binary(t)
    if n < _DISTINCT_CHECK_ROWS or sample_at is None:
        return False  # a few rows: whatever the encoding, the column is small
    sample = column.take(sample_at)
    sampled = len(sample) - sample.null_count
    if sampled == 0:
        return False
    # unique() counts null as a value where count_distinct does not; it is about twice as fast
    # (this runs for every column of every file written).
    distinct = len(sample.unique()) - (1 if sample.null_count else 0)
    if 2 * distinct <= sampled:
        return False  # values repeat: a small dictionary
    # Mostly distinct values: a dictionary stores each of them once more and an index per row
    # besides, even when it fits the page (Trino's copy of the same rows came out a third smaller
    # without: bench/trino_speed.py).
    if 4 * distinct > 3 * sampled:
        return True
    most = min(n, row_group_rows) * (column.nbytes / n if variable else _stored_width(t))
    if most <= DICTIONARY_PAGE_LIMIT:
        return False
    valid_rows = min(n, row_group_rows) * sampled / len(sample)
    repeats = sampled - distinct
    estimate = valid_rows if repeats == 0 else min(valid_rows, sampled * sampled / (2 * repeats))
    width = 4 + float(pc.mean(pc.binary_length(sample)).as_py() or 0) if variable else _stored_width(t)
    return estimate * width > DICTIONARY_PAGE_LIMIT


def _stored_width(t: pa.DataType) -> float:
    """Bytes of one value in a Parquet dictionary page (decimals as INT32/INT64 up to 18 digits)."""
    if pa.types.is_decimal(t):
        return 4 if t.precision <= 9 else 8 if t.precision <= 18 else 16
    return t.bit_width / 8


def write_data_files(
    ctx: WriteContext,
    data: pa.Table,
    run: Callable[[Callable[[Any], list[DataFile]], list[Any]], list[list[DataFile]]],
) -> list[DataFile]:
    """Split by partition and write each partition as a task of the engine (``run`` maps tasks)."""
    parts = split_by_partition(ctx.spec, ctx.schema, data)
    indexed = list(enumerate(parts))
    results = run(lambda item: write_partition(ctx, item[1], item[0]), indexed)
    return [f for files in results for f in files]

