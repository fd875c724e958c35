"""The one commit of data files written by Spark tasks, whoever wrote them.

Every Spark write ends here on the driver: SQL's INSERT, CTAS and RTAS
(:func:`~tablestore.spark.tasks.write_files.commit_written`), the ``tablestore`` data source's
batch writes and its native Parquet path (:mod:`~tablestore.spark.datasource.source_write`) and each
micro-batch of the streaming sink (:mod:`~tablestore.spark.datasource.stream`). :func:`commit_files`
makes the commit through the Table API, in one transaction named by the write's commit identity
(a retry of a write whose outcome was unknown finds the earlier snapshot instead of landing
twice), so what every writer commits to, and how, is decided in this one place.

What a write does with the rows already in the table is a :class:`FilesCommit`: append; overwrite
the rows a filter selects (a static ``INSERT OVERWRITE``); replace the partitions the files write
(a dynamic one); or replace the whole table unless data arrived since the write read it (the data
source's ``mode("overwrite")`` and the streaming sink's complete mode).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tablestore.errors import CommitConflictError
from tablestore.io.cleanup import deleted_unless_sent
from tablestore.spark.write_task import delete_quietly
from tablestore.spec.expressions.expression_tree import Expression
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.metadata.table_metadata import Snapshot
from tablestore.table import CommitIdentity, Table, TableTransaction

# Snapshot summary key naming the Spark write that produced a snapshot: a batch write's abort()
# looks for it so that it never deletes the files of a commit that did land.
WRITE_ID_PROPERTY = "tablestore.write-id"



class CommitMode(enum.StrEnum):
    """What a write's commit does with the rows already in the table."""

    APPEND = "append"
    OVERWRITE = "overwrite"
    REPLACE_PARTITIONS = "replace-partitions"
    REPLACE_TABLE = "replace-table"


APPEND = CommitMode.APPEND
OVERWRITE = CommitMode.OVERWRITE
REPLACE_PARTITIONS = CommitMode.REPLACE_PARTITIONS
REPLACE_TABLE = CommitMode.REPLACE_TABLE


@dataclass(frozen=True)
class FilesCommit:
    """What a commit does with the rows already in the table."""

    mode: CommitMode = CommitMode.APPEND
    #: OVERWRITE: the rows replaced (every row when None).
    filter: Expression | None = None
    #: REPLACE_TABLE: the snapshot the write read (None: the table was empty); data added since
    #: makes the commit fail.
    read_snapshot_id: int | None = None


@dataclass(frozen=True)
class Committed:
    snapshot: Snapshot
    #: True when the commit identity showed the write was committed before: nothing was
    #: committed now, ``snapshot`` is the earlier one and the files were deleted.
    applied_before: bool


def writer_identity(write_id: str) -> CommitIdentity:
    """The commit identity of one Spark batch write (SQL or data source): its write id."""
    return CommitIdentity(write_id, WRITE_ID_PROPERTY)


def commit_files(table: Table, files: list[DataFile], identity: CommitIdentity | None,
                 how: FilesCommit = FilesCommit(), snapshot_properties: dict[str, str] | None = None,
                 writer: str = "the Spark write") -> Committed:
    """Commit ``files`` to ``table`` in one snapshot, as ``how`` says, marked with ``identity``.

    The files are deleted when the commit is refused (not when its outcome is unknown: it may
    have landed). Files written in a partition spec the table no longer has are refused: their
    partition tuples follow the old spec, the new manifest would not. ``writer`` names the write
    in that message.
    """
    # Until the change is in the transaction, a failure leaves files no commit references; from
    # then on the transaction owns them: deleted only when the commit is known not to have
    # landed (tablestore.table.update.commit_outcome).
    with deleted_unless_sent(lambda: delete_quietly(table.io, [f.file_path for f in files])):
        if any(f.spec_id != table.spec().spec_id for f in files):
            raise CommitConflictError(
                f"the partition spec of {table.name} changed while {writer} wrote its files; run it again"
            )
        # Every Spark write's commit is opened here and only here, so what all of them commit to
        # (and, once writes name one, the ref they target) is decided in one place.
        transaction = _staged(table.transaction(identity), files, how, snapshot_properties)
    snapshot = transaction.commit_transaction()
    assert snapshot is not None  # a transaction with a file change makes (or finds) a snapshot
    return Committed(snapshot, transaction.applied_before is not None)


def _staged(transaction: TableTransaction, files: list[DataFile], how: FilesCommit,
            snapshot_properties: dict[str, str] | None) -> TableTransaction:
    mode = CommitMode(how.mode)
    if mode is CommitMode.APPEND:
        return transaction.append_files(files, snapshot_properties)
    if mode is CommitMode.OVERWRITE:
        return transaction.overwrite_files(files, how.filter, snapshot_properties)
    if mode is CommitMode.REPLACE_PARTITIONS:
        return transaction.replace_partitions_files(files, snapshot_properties)
    return transaction.replace_files(files, how.read_snapshot_id, snapshot_properties)


__all__ = ["APPEND", "OVERWRITE", "REPLACE_PARTITIONS", "REPLACE_TABLE", "WRITE_ID_PROPERTY", "CommitMode", "Committed",
           "FilesCommit", "commit_files", "writer_identity"]
