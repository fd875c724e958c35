"""Row lineage (format/spec.md, "Row Lineage"): the ``_row_id`` and
``_last_updated_sequence_number`` metadata columns of format v3 tables.

Both are reserved field ids. A data file may store them (a rewrite copies moved rows' values
into the new file) or omit them; a null, or a missing column, is inherited on read:

- ``_row_id``: the data file's ``first_row_id`` plus the row's position in the file;
- ``_last_updated_sequence_number``: the data sequence number of the file's manifest entry.

A file without a ``first_row_id`` (written before the table was upgraded to v3) has no row
ids: both columns read null, as Java reads them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tablestore.errors import SchemaError
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import LongType, NestedField

ROW_ID = NestedField(2147483540, "_row_id", LongType(), False,
                     "A unique long assigned for row lineage")
LAST_UPDATED_SEQUENCE_NUMBER = NestedField(2147483539, "_last_updated_sequence_number", LongType(), False,
                                           "The sequence number which last updated this row")
ROW_LINEAGE_FIELDS = (ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER)
ROW_LINEAGE_IDS = frozenset(f.field_id for f in ROW_LINEAGE_FIELDS)
ROW_LINEAGE_BY_NAME = {f.name: f for f in ROW_LINEAGE_FIELDS}


def inherited_row_ids(stored: pa.ChunkedArray | pa.Array | None, first_row_id: int | None,
                      positions: np.ndarray) -> pa.Array:
    """``_row_id`` of rows at ``positions`` of a file: the stored value, else first_row_id + position."""
    if first_row_id is None:
        return pa.nulls(len(positions), pa.int64())
    inherited = pa.array(positions.astype(np.int64) + first_row_id, pa.int64())
    return _coalesce(stored, inherited)


def inherited_sequence_numbers(stored: pa.ChunkedArray | pa.Array | None, first_row_id: int | None,
                               data_sequence_number: int | None, count: int) -> pa.Array:
    """``_last_updated_sequence_number`` of ``count`` rows: the stored value, else the file's
    data sequence number."""
    if first_row_id is None or data_sequence_number is None:
        return pa.nulls(count, pa.int64())
    return _coalesce(stored, pa.array(np.full(count, data_sequence_number, dtype=np.int64), pa.int64()))


def _coalesce(stored: pa.ChunkedArray | pa.Array | None, inherited: pa.Array) -> pa.Array:
    if stored is None:
        return inherited
    if isinstance(stored, pa.ChunkedArray):
        stored = stored.combine_chunks()
    stored = stored.cast(pa.int64())
    if stored.null_count == 0:
        return stored
    result: pa.Array = pc.coalesce(stored, inherited)
    return result


def with_row_lineage(schema: Schema) -> Schema:
    """``schema`` with the row lineage fields appended: what a rewrite of a v3 table reads and
    writes, so that moved rows keep their ``_row_id`` and ``_last_updated_sequence_number``."""
    taken = [f.name for f in ROW_LINEAGE_FIELDS if schema.find_field_id(f.name) is not None]
    if taken:
        raise SchemaError(
            f"column {taken[0]!r} has the name of a row lineage metadata column of format v3 tables; "
            "rename it to rewrite this table's files"
        )
    return Schema((*schema.fields, *ROW_LINEAGE_FIELDS), schema.schema_id, schema.identifier_field_ids)


def mark_updated(rows: pa.Table, updated: pa.Array | None = None) -> pa.Table:
    """``rows`` with ``_last_updated_sequence_number`` nulled where ``updated`` is true (every
    row when it is None), so the rewrite's own sequence number is inherited there (spec: an
    updated row's value "must be set to null"). Rows without the column are returned as they are."""
    name = LAST_UPDATED_SEQUENCE_NUMBER.name
    if name not in rows.column_names:
        return rows
    index = rows.column_names.index(name)
    if updated is None:
        column: pa.Array | pa.ChunkedArray = pa.nulls(rows.num_rows, pa.int64())
    else:
        column = pc.if_else(updated, pa.nulls(rows.num_rows, pa.int64()), rows.column(index))
    return rows.set_column(index, pa.field(name, pa.int64()), column)
