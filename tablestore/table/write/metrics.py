"""Column metrics of a written Parquet file, as Iceberg stores them in manifests.

The Parquet footer already holds per-row-group counts and min/max statistics, so metrics cost
nothing to collect: they are folded from the footer, keyed by field id, and bounds are encoded
with the spec's single-value binary form. Bounds of strings and binaries are truncated as
``write.metadata.metrics.default`` says (Iceberg's default ``truncate(16)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tablestore.errors import ValidationError
from tablestore.spec.manifests.manifest import DataFile, DataFileContent, FileFormat
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import (
    BinaryType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    StringType,
    StructType,
)

DEFAULT_METRICS_MODE = "truncate(16)"
_TRUNCATE = re.compile(r"^truncate\((\d+)\)$")


@dataclass(frozen=True)
class MetricsMode:
    """none: no metrics; counts: counts only; truncate(n) / full: counts and bounds."""

    kind: str
    length: int = 0

    @staticmethod
    def parse(text: str) -> MetricsMode:
        value = text.strip().lower()
        if value in ("none", "counts", "full"):
            return MetricsMode(value)
        if m := _TRUNCATE.match(value):
            length = int(m.group(1))
            if length <= 0:
                raise ValidationError(f"metrics mode {text!r}: the truncate length must be positive")
            return MetricsMode("truncate", length)
        raise ValidationError(
            f"unknown metrics mode {text!r}; use none, counts, truncate(N) or full"
        )


def metrics_modes(schema: Schema, properties: dict[str, str]) -> dict[int, MetricsMode]:
    """The metrics mode of every leaf column, from the table properties."""
    default = MetricsMode.parse(properties.get("write.metadata.metrics.default", DEFAULT_METRICS_MODE))
    modes: dict[int, MetricsMode] = {}
    for name, f in schema.all_fields():
        override = properties.get(f"write.metadata.metrics.column.{name}")
        modes[f.field_id] = MetricsMode.parse(override) if override else default
    return modes


@dataclass
class FileMetrics:
    record_count: int
    column_sizes: dict[int, int] = field(default_factory=dict)
    value_counts: dict[int, int] = field(default_factory=dict)
    null_value_counts: dict[int, int] = field(default_factory=dict)
    nan_value_counts: dict[int, int] = field(default_factory=dict)
    lower_bounds: dict[int, bytes] = field(default_factory=dict)
    upper_bounds: dict[int, bytes] = field(default_factory=dict)
    split_offsets: list[int] = field(default_factory=list)

    def data_file(self, path: str, partition: tuple[Any, ...], file_size_in_bytes: int, spec_id: int) -> DataFile:
        """The manifest entry's DataFile of the Parquet data file these metrics describe."""
        return DataFile(
            content=DataFileContent.DATA,
            file_path=path,
            file_format=FileFormat.PARQUET,
            partition=partition,
            record_count=self.record_count,
            file_size_in_bytes=file_size_in_bytes,
            column_sizes=self.column_sizes,
            value_counts=self.value_counts,
            null_value_counts=self.null_value_counts,
            nan_value_counts=self.nan_value_counts,
            lower_bounds=self.lower_bounds,
            upper_bounds=self.upper_bounds,
            split_offsets=self.split_offsets,
            spec_id=spec_id,
        )


@dataclass(frozen=True)
class _Leaf:
    field: NestedField
    in_repeated: bool


def parquet_leaf_paths(schema: Schema) -> dict[str, _Leaf]:
    """Map the Parquet column paths that pyarrow writes to the schema's leaf fields."""
    leaves: dict[str, _Leaf] = {}

    def visit(f: NestedField, path: str, repeated: bool) -> None:
        t = f.field_type
        if isinstance(t, StructType):
            for child in t.fields:
                visit(child, f"{path}.{child.name}", repeated)
        elif isinstance(t, ListType):
            visit(t.element_field, f"{path}.list.element", True)
        elif isinstance(t, MapType):
            visit(t.key_field, f"{path}.key_value.key", True)
            visit(t.value_field, f"{path}.key_value.value", True)
        else:
            leaves[path] = _Leaf(f, repeated)

    for top in schema.fields:
        visit(top, top.name, False)
    return leaves


def collect_metrics(
    metadata: pq.FileMetaData,
    schema: Schema,
    modes: dict[int, MetricsMode],
    nan_counts: dict[int, int] | None = None,
) -> FileMetrics:
    """Fold a Parquet footer into Iceberg metrics for the written file."""
    leaves = parquet_leaf_paths(schema)
    out = FileMetrics(record_count=metadata.num_rows)
    mins: dict[int, Any] = {}
    maxs: dict[int, Any] = {}
    no_bounds: set[int] = set()
    for rg_index in range(metadata.num_row_groups):
        rg = metadata.row_group(rg_index)
        first = rg.column(0)
        offset = first.dictionary_page_offset or first.data_page_offset
        if offset is not None:
            out.split_offsets.append(int(offset))
        for col_index in range(rg.num_columns):
            col = rg.column(col_index)
            leaf = leaves.get(col.path_in_schema)
            if leaf is None:
                continue
            fid = leaf.field.field_id
            mode = modes.get(fid, MetricsMode("truncate", 16))
            if mode.kind == "none":
                continue
            out.column_sizes[fid] = out.column_sizes.get(fid, 0) + col.total_compressed_size
            out.value_counts[fid] = out.value_counts.get(fid, 0) + col.num_values
            stats = col.statistics
            if stats is None or not stats.has_null_count:
                no_bounds.add(fid)
                continue
            out.null_value_counts[fid] = out.null_value_counts.get(fid, 0) + stats.null_count
            if mode.kind == "counts" or leaf.in_repeated:
                continue
            if not stats.has_min_max:
                # A row group of only nulls has no bounds; that does not void the others.
                if stats.null_count != col.num_values:
                    no_bounds.add(fid)
                continue
            lo, hi = stats.min, stats.max
            if fid not in mins or lo < mins[fid]:
                mins[fid] = lo
            if fid not in maxs or hi > maxs[fid]:
                maxs[fid] = hi
    for fid, count in (nan_counts or {}).items():
        if modes.get(fid, MetricsMode("truncate", 16)).kind != "none":
            out.nan_value_counts[fid] = count
    for fid, lo in mins.items():
        if fid in no_bounds:
            continue
        f = schema.find_field(fid)
        mode = modes.get(fid, MetricsMode("truncate", 16))
        encoded = _encode_bound(f.field_type, lo, mode, upper=False)
        if encoded is not None:
            out.lower_bounds[fid] = encoded
        encoded = _encode_bound(f.field_type, maxs[fid], mode, upper=True)
        if encoded is not None:
            out.upper_bounds[fid] = encoded
    return out


def _encode_bound(t: IcebergType, value: Any, mode: MetricsMode, upper: bool) -> bytes | None:
    if isinstance(t, FloatType | DoubleType) and value != value:
        return None  # NaN is never a bound
    if isinstance(t, FixedType | BinaryType) and isinstance(value, str):
        value = value.encode("utf-8", "surrogateescape")
    internal = conversions.from_python(t, value)
    if mode.kind == "truncate" and isinstance(t, StringType | BinaryType):
        if upper:
            internal = conversions.truncate_upper_bound(t, internal, mode.length)
            if internal is None:
                return None
        else:
            internal = conversions.truncate_lower_bound(t, internal, mode.length)
    return conversions.to_bytes(t, internal)


def float_nan_counts(table: pa.Table, schema: Schema) -> dict[int, int]:
    """NaN counts of top-level float and double columns (Parquet statistics do not keep them)."""
    counts: dict[int, int] = {}
    names = set(table.column_names)
    for f in schema.fields:
        if isinstance(f.field_type, FloatType | DoubleType) and f.name in names:
            column = table.column(f.name)
            counts[f.field_id] = int(pc.sum(pc.is_nan(column)).as_py() or 0) if len(column) else 0
    return counts
