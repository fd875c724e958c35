"""Appends, overwrites and deletes of rows: the data changes of a Table and of its transactions.

One implementation serves both: ``table.append(rows)`` is a :class:`TableTransaction` with one
append, committed at once, and ``with table.transaction() as tx: tx.append(rows)`` is the same
append folded with the transaction's other changes. A data change writes its files here, in the
schema and spec the transaction's earlier changes leave, and hands a snapshot producer
(:mod:`tablestore.table.update.snapshot`) to the transaction, which commits it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tablestore.spec.expressions import Expression
from tablestore.spec.manifest import DataFile
from tablestore.spec.metadata import TableMetadata
from tablestore.table.ops.overwrite import overwrite_producer
from tablestore.table.ops.row_level import delete_rows
from tablestore.table.update.snapshot import FastAppend
from tablestore.table.update.transaction import Transaction
from tablestore.table.write.conform import conform_to_schema, downcast_ns_requested, to_arrow_table
from tablestore.table.write.data_files import WriteContext, write_data_files
from tablestore.table.write.writers import write_data_stream

if TYPE_CHECKING:
    from tablestore.table import Table


def write_files(table: Table, metadata: TableMetadata, data: Any) -> list[DataFile]:
    """Data files for ``data`` in ``metadata``'s schema and spec (the table's, or what a
    transaction's changes leave), not committed. A RecordBatchReader is written as it streams
    in, in bounded memory; other input is split by partition into tasks of the table's engine."""
    schema = metadata.schema()
    downcast = downcast_ns_requested(metadata.properties)
    ctx = WriteContext(table.io, table.location, schema, metadata.spec(), dict(metadata.properties))
    if isinstance(data, pa.RecordBatchReader):
        batches = (conform_to_schema(pa.Table.from_batches([b]), schema, downcast) for b in data)
        return write_data_stream(ctx, batches)
    rows = conform_to_schema(to_arrow_table(data), schema, downcast)
    return write_data_files(ctx, rows, table.engine.map) if rows.num_rows else []


class TableTransaction(Transaction):
    """A :class:`~tablestore.table.update.transaction.Transaction` that also takes rows:
    what ``table.transaction()`` returns."""

    def write_files(self, data: Any) -> list[DataFile]:
        """Data files for ``data`` in the schema and spec the transaction's changes leave."""
        return write_files(self.table, self.metadata, data)

    def append(self, data: Any, snapshot_properties: dict[str, str] | None = None) -> TableTransaction:
        """Append rows (pyarrow Table/RecordBatch/RecordBatchReader or pandas)."""
        return self.add_snapshot(FastAppend(self.table, self.write_files(data), snapshot_properties))

    def append_files(self, files: list[DataFile], snapshot_properties: dict[str, str] | None = None,
                     ) -> TableTransaction:
        """Append data files written elsewhere (by ``write_files`` on other workers)."""
        return self.add_snapshot(FastAppend(self.table, files, snapshot_properties))

    def overwrite(self, data: Any, filter: str | Expression | None = None,
                  snapshot_properties: dict[str, str] | None = None) -> TableTransaction:
        """Replace the rows matching ``filter`` (every row when None) with ``data``."""
        self.require_no_metadata_changes("an overwrite")
        return self.add_snapshot(overwrite_producer(self.table, data, filter, snapshot_properties))

    def delete(self, filter: str | Expression, snapshot_properties: dict[str, str] | None = None,
               ) -> TableTransaction:
        """Delete the rows matching ``filter`` (as :meth:`Table.delete`)."""
        self.require_no_metadata_changes("a delete")
        delete_rows(self.table, filter, snapshot_properties, transaction=self)
        return self
