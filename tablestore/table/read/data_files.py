"""Reading one file task: Parquet through pyarrow, projected by field id, evolved to the read
schema, identity-partition constants filled in, deletes applied and the residual filter applied.

Columns are found by the field ids the file carries, never by name, so renamed columns read
their old data and a dropped-then-re-added name reads NULL for old rows.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

if TYPE_CHECKING:
    import pyarrow.dataset as ds

from tablestore.errors import CorruptMetadataError, UnsupportedError
from tablestore.io.fileio import FileIO
from tablestore.spec.expressions.arrow_filter import to_arrow_expression
from tablestore.spec.expressions.bound_predicates import referenced_field_ids
from tablestore.spec.expressions.expression_tree import AlwaysTrue, BoundExpression
from tablestore.spec.manifests.manifest import DataFile, DataFileContent
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.partitioning.transforms import IdentityTransform
from tablestore.spec.schemas.name_mapping import NameMapping, apply_name_mapping
from tablestore.spec.schemas.row_lineage import (
    LAST_UPDATED_SEQUENCE_NUMBER,
    ROW_ID,
    ROW_LINEAGE_IDS,
    inherited_row_ids,
    inherited_sequence_numbers,
)
from tablestore.spec.schemas.schema import (
    PARQUET_FIELD_ID,
    Schema,
    arrow_type_to_iceberg,
    default_array,
    storage_schema,
    type_to_arrow,
)
from tablestore.spec.schemas.types import IcebergType, ListType, MapType, NestedField, StructType
from tablestore.table.read.deletion_vectors import is_deletion_vector, read_deletion_vector

# Reserved field ids of position delete files (spec: "Position Delete Files").
DELETE_FILE_PATH_ID = 2147483546
DELETE_POS_ID = 2147483545


@functools.cache
def parquet_format() -> ds.ParquetFileFormat:
    # pyarrow.dataset imports pandas (seconds); only readers pay for it, not `import tablestore`.
    import pyarrow.dataset

    return pyarrow.dataset.ParquetFileFormat()


def parquet_field_id(f: pa.Field) -> int | None:
    if f.metadata and PARQUET_FIELD_ID in f.metadata:
        return int(f.metadata[PARQUET_FIELD_ID])
    return None


def _ids_of(struct_fields: Iterable[pa.Field]) -> dict[int, pa.Field]:
    out = {}
    for f in struct_fields:
        fid = parquet_field_id(f)
        if fid is not None:
            out[fid] = f
    return out


@functools.lru_cache(maxsize=32)
def _parsed_name_mapping(text: str) -> NameMapping:
    return NameMapping.from_json(text)


def _by_name_mapping(physical: pa.Schema, table_schema: Schema, name_mapping: str | None) -> dict[int, pa.Field]:
    """Files written without field ids (imported Hive files) are matched by name, nested fields too:
    through the table's name mapping (``schema.name-mapping.default``), else by the current names."""
    mapping = _parsed_name_mapping(name_mapping) if name_mapping else NameMapping.from_schema(table_schema)
    return _ids_of(apply_name_mapping(physical, mapping))


@dataclass(frozen=True)
class RowGroupRange:
    """Row groups ``start`` to ``stop`` (exclusive) of a file planned to have ``count`` of them."""

    start: int
    stop: int
    count: int

    def indices(self, actual: int) -> list[int]:
        if actual != self.count:
            # The manifest's split offsets did not describe the file's row groups: the first
            # split reads the whole file and the others nothing, so no row is lost or doubled.
            return list(range(actual)) if self.start == 0 else []
        return list(range(self.start, self.stop))


def read_task_table(
    io: FileIO,
    data_file: DataFile,
    delete_files: tuple[DataFile, ...],
    spec: PartitionSpec,
    table_schema: Schema,
    projected: Schema,
    row_filter: BoundExpression,
    name_mapping: str | None = None,
    row_groups: RowGroupRange | None = None,
    data_sequence_number: int | None = None,
) -> pa.Table:
    """Rows of one data file, in the projected schema, after deletes and the filter.

    ``name_mapping`` is the table's ``schema.name-mapping.default`` (JSON), for files without field ids.
    ``row_groups`` reads a split of the file only (files with deletes are not split: their
    positions count from the start of the file). ``projected`` may hold the row lineage fields
    (:mod:`tablestore.spec.schemas.row_lineage`), which inherit from ``data_file.first_row_id`` and
    ``data_sequence_number`` (the file's manifest entry's).
    """
    fs, path = io.filesystem_for(data_file.file_path)
    try:
        fragment = parquet_format().make_fragment(path, filesystem=fs)
        # Extension types (the uuid that our and pyiceberg's files store) read as their storage.
        physical = storage_schema(fragment.physical_schema)
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptMetadataError(f"cannot read data file {data_file.file_path}: {e}") from None
    first_position = 0
    if row_groups is not None:
        if delete_files:
            raise ValueError("a data file with delete files is read whole, not by row groups")
        selected = row_groups.indices(fragment.metadata.num_row_groups)
        # A split's rows start at this position of the file (row lineage counts from the file's start).
        first_position = sum(fragment.metadata.row_group(i).num_rows for i in range(selected[0])) if selected else 0
        fragment = fragment.subset(row_group_ids=selected)
    file_fields = _ids_of(physical)
    if not file_fields:
        file_fields = _by_name_mapping(physical, table_schema, name_mapping)

    filter_ids = _top_level_ids(table_schema, referenced_field_ids(row_filter)) if not isinstance(
        row_filter, AlwaysTrue) else set()
    # The row lineage fields are never read as plain columns: they inherit (see _with_row_lineage).
    needed = [f for f in table_schema.fields if f.field_id not in ROW_LINEAGE_IDS
              and (f.field_id in filter_ids or projected.has_field(f.field_id))]
    read_names = [file_fields[f.field_id].name for f in needed if f.field_id in file_fields]
    lineage = [f for f in projected.fields if f.field_id in ROW_LINEAGE_IDS]
    stored_lineage = {fid: file_fields[fid].name for fid in ROW_LINEAGE_IDS if lineage and fid in file_fields}
    read_names += [n for n in stored_lineage.values() if n not in read_names]

    pushed = False
    has_deletes = bool(delete_files)
    if has_deletes:
        # Whole and in order (deletes count positions from the file's start), through the same
        # reader as files without deletes: a file with a DV on 5% of its rows costs little more.
        raw = _read_file(fs, path, fragment, read_names, [], None)
    else:
        arrow_filter = None
        # Row lineage needs each row's position in the file, so rows are filtered after reading.
        if filter_ids and filter_ids <= set(file_fields) and not lineage:
            arrow_filter = _file_filter(row_filter, physical)
        filter_names = [file_fields[f.field_id].name for f in needed
                        if f.field_id in filter_ids and f.field_id in file_fields]
        try:
            raw = _read_file(fs, path, fragment, read_names, filter_names, arrow_filter)
            pushed = arrow_filter is not None
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            if arrow_filter is None:
                raise
            raw = _read_file(fs, path, fragment, read_names, [], None)

    raw = _without_extensions(raw)
    if lineage:
        raw, file_fields = _with_row_lineage(raw, data_file, data_sequence_number, first_position,
                                             stored_lineage, file_fields)
        needed = [*needed, *lineage]
    if has_deletes:
        raw = _apply_deletes(io, raw, data_file, delete_files, file_fields, table_schema)

    constants = _identity_constants(spec, data_file.partition)
    columns = []
    fields = []
    for f in needed:
        if f.field_id in file_fields:
            source = file_fields[f.field_id]
            column = raw.column(source.name)
            if pa.types.is_nested(column.type) and not column.type.equals(source.type, check_metadata=True):
                column = column.cast(source.type)  # nested field ids from the name mapping
            column = _project_column(column, f)
        elif f.field_id in constants:
            column = pa.chunked_array(
                [pa.array([constants[f.field_id]] * raw.num_rows, type_to_arrow(f.field_type))]
            )
        else:
            # Added after the file was written: its initial-default (format v3), else NULL.
            column = pa.chunked_array([default_array(f, raw.num_rows)])
        columns.append(column)
        fields.append(pa.field(f.name, column.type, nullable=not f.required))
    table = pa.Table.from_arrays(columns, schema=pa.schema(fields)) if fields else _empty_rows(raw.num_rows)
    if filter_ids and not pushed:
        table = table.filter(to_arrow_expression(row_filter, table_schema))
    elif not filter_ids and not isinstance(row_filter, AlwaysTrue):
        # A filter that references no column (AlwaysFalse after binding) keeps nothing.
        table = table.filter(to_arrow_expression(row_filter, table_schema))
    return _select(table, projected)


def _with_row_lineage(
    raw: pa.Table,
    data_file: DataFile,
    data_sequence_number: int | None,
    first_position: int,
    stored: dict[int, str],
    file_fields: dict[int, pa.Field],
) -> tuple[pa.Table, dict[int, pa.Field]]:
    """``raw`` (every row of the file or split, in file order) with the row lineage columns as
    read (stored values, nulls inherited), and ``file_fields`` pointing the lineage ids at them."""
    positions = np.arange(first_position, first_position + raw.num_rows, dtype=np.int64)

    def column(fid: int) -> pa.ChunkedArray | None:
        return raw.column(stored[fid]) if fid in stored else None

    row_ids = inherited_row_ids(column(ROW_ID.field_id), data_file.first_row_id, positions)
    sequence_numbers = inherited_sequence_numbers(column(LAST_UPDATED_SEQUENCE_NUMBER.field_id),
                                                  data_file.first_row_id, data_sequence_number, raw.num_rows)
    fields = dict(file_fields)
    for f, values in ((ROW_ID, row_ids), (LAST_UPDATED_SEQUENCE_NUMBER, sequence_numbers)):
        name = f"__lineage_{f.field_id}"
        raw = raw.append_column(name, values)
        fields[f.field_id] = pa.field(name, pa.int64())
    return raw, fields


def _without_extensions(table: pa.Table) -> pa.Table:
    plain = storage_schema(table.schema)
    return table if plain.equals(table.schema) else table.cast(plain)


def _read_file(
    fs: Any,
    path: str,
    fragment: ds.ParquetFileFragment,
    names: list[str],
    filter_names: list[str],
    arrow_filter: pc.Expression | None,
) -> pa.Table:
    """The columns ``names`` of a data file, only the rows matching ``arrow_filter`` if given.

    With a filter, row groups are pruned by their statistics, the filter's columns are read
    first, and the other columns are read only if rows match and gathered at the matching
    positions. String and binary columns whose chunks are dictionary-encoded (with small
    dictionaries) are read as dictionaries and decoded last: decoding a dictionary is cheaper
    than Parquet's value-by-value decoding, and after a filter only the kept values are decoded.
    """
    metadata = fragment.metadata
    if arrow_filter is None:
        row_groups = [rg.id for rg in fragment.row_groups]  # a split's fragment has a subset
    else:
        row_groups = [rg.id for rg in fragment.subset(filter=arrow_filter).row_groups]
    if not names:
        return fragment.to_table(columns=[], filter=arrow_filter, use_threads=True)
    dictionary = _small_dictionary_columns(metadata, fragment.physical_schema, names)
    parquet = pq.ParquetFile(fs.open_input_file(path), metadata=metadata, read_dictionary=dictionary or None,
                             pre_buffer=True)
    if arrow_filter is None:
        return _decode_dictionaries(parquet.read_row_groups(row_groups, columns=names, use_threads=True))
    first = _decode_dictionaries(parquet.read_row_groups(row_groups, columns=filter_names, use_threads=True))
    import pyarrow.dataset

    mask = pyarrow.dataset.dataset(first).to_table(columns={"__match": arrow_filter}).column("__match")
    positions = pc.indices_nonzero(mask)
    columns = {name: first.column(name) for name in filter_names}
    whole = len(positions) == first.num_rows
    if not whole:
        columns = {name: column.take(positions) for name, column in columns.items()}
    rest_names = [n for n in names if n not in columns]
    if rest_names:
        rest = parquet.read_row_groups(row_groups if len(positions) else [], columns=rest_names, use_threads=True)
        if not whole:
            rest = rest.take(positions)
        rest = _decode_dictionaries(rest)
        columns.update((name, rest.column(name)) for name in rest_names)
    return pa.Table.from_arrays([columns[n] for n in names], names=names)


# A dictionary page bigger than this (compressed) may be one the writer gave up on, falling
# back to plain pages, which pyarrow would have to hash back into a dictionary.
_SMALL_DICTIONARY_PAGE = 64 * 1024


def _small_dictionary_columns(metadata: pq.FileMetaData, physical: pa.Schema, names: list[str]) -> list[str]:
    """Top-level string and binary columns dictionary-encoded in every row group."""
    wanted = set(names)
    candidates: dict[int, str] = {}
    for index, f in enumerate(physical):
        if f.name in wanted and (pa.types.is_string(f.type) or pa.types.is_binary(f.type)):
            candidates[index] = f.name
    if not candidates or metadata.num_row_groups == 0:
        return []
    by_path = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    out = []
    for name in candidates.values():
        column_index = by_path.get(name)
        if column_index is None:
            continue
        for rg in range(metadata.num_row_groups):
            chunk = metadata.row_group(rg).column(column_index)
            start = chunk.dictionary_page_offset
            if not chunk.has_dictionary_page or start is None \
                    or chunk.data_page_offset - start > _SMALL_DICTIONARY_PAGE:
                break
        else:
            out.append(name)
    return out


def _decode_dictionaries(table: pa.Table) -> pa.Table:
    for index, f in enumerate(table.schema):
        if pa.types.is_dictionary(f.type):
            table = table.set_column(index, f.with_type(f.type.value_type), table.column(index).cast(f.type.value_type))
    return table


def _empty_rows(n: int) -> pa.Table:
    return pa.table({"__rows": pa.nulls(n)}).drop_columns(["__rows"])


def _top_level_ids(schema: Schema, ids: set[int]) -> set[int]:
    out = set()
    for fid in ids:
        current = fid
        parent = schema.parent_id(current)
        while parent is not None:
            current = parent
            parent = schema.parent_id(current)
        out.add(current)
    return out


def _file_filter(row_filter: BoundExpression, physical: pa.Schema) -> pc.Expression | None:
    """The filter on the file's own column names, for row-group pruning inside pyarrow."""
    file_schema = schema_from_file(physical)
    if file_schema is None:
        return None
    return to_arrow_expression(row_filter, file_schema)


def schema_from_file(physical: pa.Schema) -> Schema | None:
    """Our Schema for a Parquet file's Arrow schema, keeping the file's names and ids."""
    fields = []
    for f in physical:
        fid = parquet_field_id(f)
        if fid is None:
            return None
        try:
            field_type = _iceberg_type_with_ids(f.type, arrow_type_to_iceberg)
            fields.append(NestedField(fid, f.name, field_type, not f.nullable))
        except Exception:
            return None
    try:
        return Schema(tuple(fields))
    except Exception:
        return None


def _iceberg_type_with_ids(t: pa.DataType, convert: Any) -> IcebergType:
    if pa.types.is_struct(t):
        children = []
        for i in range(t.num_fields):
            child = t.field(i)
            cid = parquet_field_id(child)
            if cid is None:
                raise ValueError("nested field without id")
            child_type = _iceberg_type_with_ids(child.type, convert)
            children.append(NestedField(cid, child.name, child_type, not child.nullable))
        return StructType(*children)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        eid = parquet_field_id(t.value_field)
        if eid is None:
            raise ValueError("list element without id")
        return ListType(eid, _iceberg_type_with_ids(t.value_type, convert), not t.value_field.nullable)
    if pa.types.is_map(t):
        kid, vid = parquet_field_id(t.key_field), parquet_field_id(t.item_field)
        if kid is None or vid is None:
            raise ValueError("map without ids")
        return MapType(kid, _iceberg_type_with_ids(t.key_type, convert), vid,
                       _iceberg_type_with_ids(t.item_type, convert), not t.item_field.nullable)
    counter = iter(range(10**9, 2 * 10**9))
    return convert(t, lambda: next(counter))


def _identity_constants(spec: PartitionSpec, partition: tuple[Any, ...]) -> dict[int, Any]:
    """Source values of identity partition fields, for files that do not store the column."""
    out: dict[int, Any] = {}
    for pf, value in zip(spec.fields, partition, strict=False):
        if isinstance(pf.transform, IdentityTransform):
            out[pf.source_id] = value.bytes if isinstance(value, uuid.UUID) else value
    return out


def _project_column(column: pa.ChunkedArray, read_field: NestedField) -> pa.ChunkedArray:
    target = type_to_arrow(read_field.field_type)
    if column.type.equals(target, check_metadata=False) and _same_nested_ids(column.type, read_field.field_type):
        return column
    return pa.chunked_array(
        [_project_array(chunk, read_field.field_type) for chunk in column.chunks], type=target
    )


def _same_nested_ids(t: pa.DataType, ice: IcebergType) -> bool:
    if isinstance(ice, StructType):
        if not pa.types.is_struct(t) or t.num_fields != len(ice.fields):
            return False
        return all(
            parquet_field_id(t.field(i)) == f.field_id and t.field(i).name == f.name
            and _same_nested_ids(t.field(i).type, f.field_type)
            for i, f in enumerate(ice.fields)
        )
    if isinstance(ice, ListType):
        return (pa.types.is_list(t) or pa.types.is_large_list(t)) \
            and parquet_field_id(t.value_field) == ice.element_id and _same_nested_ids(t.value_type, ice.element_type)
    if isinstance(ice, MapType):
        return pa.types.is_map(t) and parquet_field_id(t.key_field) == ice.key_id \
            and parquet_field_id(t.item_field) == ice.value_id \
            and _same_nested_ids(t.key_type, ice.key_type) and _same_nested_ids(t.item_type, ice.value_type)
    return True


def _project_array(array: pa.Array, t: IcebergType) -> pa.Array:
    """Evolve one file array to the read type: by field id for structs, promoted for primitives."""
    target = type_to_arrow(t)
    if isinstance(t, StructType):
        by_id = _ids_of(array.type) if pa.types.is_struct(array.type) else {}
        index = {array.type.field(i).name: i for i in range(array.type.num_fields)}
        children = []
        for child in t.fields:
            source = by_id.get(child.field_id)
            if source is None:
                children.append(default_array(child, len(array)))
            else:
                children.append(_project_array(array.field(index[source.name]), child.field_type))
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if isinstance(t, ListType):
        values = _project_array(array.values, t.element_type)
        mask = array.is_null() if array.null_count else None
        return pa.ListArray.from_arrays(array.offsets, values, type=target, mask=mask)
    if isinstance(t, MapType):
        keys = _project_array(array.keys, t.key_type)
        items = _project_array(array.items, t.value_type)
        mask = array.is_null() if array.null_count else None
        return pa.MapArray.from_arrays(array.offsets, keys, items, type=target, mask=mask)
    if array.type.equals(target):
        return array
    return pc.cast(array, target)


def _select(table: pa.Table, projected: Schema) -> pa.Table:
    names = [f.name for f in projected.fields]
    if table.column_names == names:
        return table
    return table.select(names)


# -- deletes -----------------------------------------------------------------------------------


def read_position_deletes(io: FileIO, delete_file: DataFile, data_path: str) -> np.ndarray:
    """Deleted positions of ``data_path`` from a position delete file or a deletion vector."""
    if is_deletion_vector(delete_file):
        return read_deletion_vector(io, delete_file, data_path)
    fs, path = io.filesystem_for(delete_file.file_path)
    fragment = parquet_format().make_fragment(path, filesystem=fs)
    by_id = _ids_of(fragment.physical_schema)
    path_col = by_id.get(DELETE_FILE_PATH_ID)
    pos_col = by_id.get(DELETE_POS_ID)
    names = (path_col.name if path_col else "file_path", pos_col.name if pos_col else "pos")
    table = fragment.to_table(columns=list(names), filter=pc.field(names[0]) == data_path)
    return table.column(names[1]).to_numpy()


def _apply_deletes(
    io: FileIO,
    raw: pa.Table,
    data_file: DataFile,
    delete_files: tuple[DataFile, ...],
    file_fields: dict[int, pa.Field],
    table_schema: Schema,
) -> pa.Table:
    keep = np.ones(raw.num_rows, dtype=bool)
    for delete in delete_files:
        if delete.content == DataFileContent.POSITION_DELETES:
            positions = read_position_deletes(io, delete, data_file.file_path)
            positions = positions[positions < raw.num_rows]
            keep[positions] = False
        elif delete.content == DataFileContent.EQUALITY_DELETES:
            keep &= ~equality_matches(io, raw, delete, file_fields, table_schema)
        else:
            raise UnsupportedError(f"unknown delete file content {delete.content}")
    if keep.all():
        return raw
    return raw.filter(pa.array(keep))


def equality_matches(
    io: FileIO, raw: pa.Table, delete: DataFile, file_fields: dict[int, pa.Field], table_schema: Schema
) -> np.ndarray:
    ids = list(delete.equality_ids or [])
    if not ids or any(i not in file_fields for i in ids):
        return np.zeros(raw.num_rows, dtype=bool)
    fs, path = io.filesystem_for(delete.file_path)
    fragment = parquet_format().make_fragment(path, filesystem=fs)
    delete_by_id = _ids_of(fragment.physical_schema)
    names = [delete_by_id[i].name for i in ids]
    deleted = _without_extensions(fragment.to_table(columns=names))
    data_names = [file_fields[i].name for i in ids]
    keys = pa.table(
        {f"k{n}": raw.column(name) for n, name in enumerate(data_names)}
    ).append_column("__row", pa.array(np.arange(raw.num_rows)))
    deleted = pa.table({f"k{n}": deleted.column(name).cast(keys.column(f"k{n}").type)
                        for n, name in enumerate(names)})
    matched = keys.join(deleted, keys=[f"k{n}" for n in range(len(ids))], join_type="left semi")
    out = np.zeros(raw.num_rows, dtype=bool)
    out[matched.column("__row").to_numpy()] = True
    return out
