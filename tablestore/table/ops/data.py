"""Appends, overwrites and deletes of rows: the data changes of a Table and of its transactions.

One implementation serves both: ``table.append(rows)`` is a :class:`TableTransaction` with one
append, committed at once, and ``with table.transaction() as tx: tx.append(rows)`` is the same
append folded with the transaction's other changes. A data change writes its files here, in the
schema and spec the transaction's earlier changes leave, and hands a snapshot producer
(:mod:`tablestore.table.update.snapshot`) to the transaction, which commits it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tablestore.spec.expressions.expression_tree import Expression
from tablestore.spec.manifests.manifest import DataFile, ManifestFile
from tablestore.spec.metadata.table_metadata import Snapshot, TableMetadata
from tablestore.spec.metadata.update_models import TableRequirement, TableUpdate
from tablestore.table.ops.overwrite import (
    overwrite_files_producer,
    overwrite_producer,
    replace_files_producer,
    replace_partitions_files_producer,
)
from tablestore.table.ops.row_level import delete_rows
from tablestore.table.update.retry import StagedCommit
from tablestore.table.update.rewrite import RewriteFiles, RewriteManifests
from tablestore.table.update.snapshot import FastAppend
from tablestore.table.update.transaction import ComputedChange, Transaction
from tablestore.table.update.validation import no_position_deletes_into
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

    def overwrite_files(self, files: list[DataFile], filter: str | Expression | None = None,
                        snapshot_properties: dict[str, str] | None = None) -> TableTransaction:
        """Replace the rows matching ``filter`` (every row when None) with data files written
        elsewhere, validated against the commits made since the table was loaded (a static
        ``INSERT OVERWRITE``)."""
        self.require_no_metadata_changes("an overwrite")
        return self.add_snapshot(overwrite_files_producer(self.table, files, filter, snapshot_properties))

    def replace_partitions_files(self, files: list[DataFile],
                                 snapshot_properties: dict[str, str] | None = None) -> TableTransaction:
        """Dynamic partition overwrite with data files written elsewhere: the partitions they
        have rows in are replaced (a dynamic ``INSERT OVERWRITE``)."""
        self.require_no_metadata_changes("an overwrite")
        return self.add_snapshot(replace_partitions_files_producer(self.table, files, snapshot_properties))

    def replace_files(self, files: list[DataFile], read_snapshot_id: int | None,
                      snapshot_properties: dict[str, str] | None = None) -> TableTransaction:
        """Replace the whole table with data files written elsewhere, unless data arrived since
        the snapshot ``read_snapshot_id`` the write read (None: the table was empty then)."""
        self.require_no_metadata_changes("a replace")
        return self.add_snapshot(replace_files_producer(self.table, files, read_snapshot_id, snapshot_properties))

    def rewrite_files(self, removed: list[DataFile], added: list[DataFile], scan_snapshot: Snapshot | None,
                      snapshot_properties: dict[str, str] | None = None,
                      position_deletes_conflict: str | None = None) -> TableTransaction:
        """Swap files for files holding the same rows (compaction, delete file rewrites): a
        ``replace`` snapshot whose added files keep the data sequence number of
        ``scan_snapshot``. With ``position_deletes_conflict`` (what the rewrite is, for the
        message), position deletes a concurrent commit added into a removed file are a conflict."""
        checks = [] if position_deletes_conflict is None else [
            no_position_deletes_into({f.file_path for f in removed}, position_deletes_conflict)
        ]
        return self.add_snapshot(RewriteFiles(self.table, removed, added, scan_snapshot, checks, snapshot_properties))

    def rewrite_manifests(self, target_entries: Callable[[list[ManifestFile]], int],
                          spec_id: int | None = None) -> ManifestsRewritten:
        """Re-cluster the data manifests (of ``spec_id``, or all) into manifests of
        ``target_entries(manifests)`` entries; the counts are known once the transaction commits."""
        producer = RewriteManifests(self.table, target_entries, spec_id)
        self.add_snapshot(producer)
        return ManifestsRewritten(producer)

    def change_metadata(
        self, stage: Callable[[TableMetadata], tuple[list[TableRequirement], list[TableUpdate]]],
    ) -> TableTransaction:
        """A metadata change recomputed on every attempt: ``stage(metadata)`` gives the
        requirements and updates on the table as it is then (what to expire, refs to drop)."""
        def staged(base: TableMetadata) -> StagedCommit:
            requirements, updates = stage(base)
            return StagedCommit(requirements, updates)

        return self.add_change(ComputedChange(staged))

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


class ManifestsRewritten:
    """How many manifests a manifest rewrite replaced and wrote, once its transaction committed."""

    def __init__(self, producer: RewriteManifests) -> None:
        self._producer = producer

    @property
    def rewritten(self) -> int:
        return len(self._producer.rewritten)

    @property
    def added(self) -> int:
        return len(self._producer.added)
