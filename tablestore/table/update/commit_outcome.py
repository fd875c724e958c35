"""Who may delete a written file: the outcome of a commit, and the one place that cleans up.

A write first writes files (data, delete, manifest and manifest-list files), then asks the
catalog to swap the table's metadata pointer. Only the answer to that request says whether the
files became part of the table. Three outcomes, and what each does with the files:

- **not landed**: the catalog refused the commit (a conflict, a failed requirement) or an error
  was raised before the request was sent. Nothing references the files: they are deleted.
- **landed**: the catalog took the commit. The files are the table's now.
- **unknown**: the answer was lost (a 5xx or 504 from the service or a gateway, a connection
  reset after the request was sent, a database connection lost at ``COMMIT``). The files may be
  referenced by the table: **nothing is deleted**, ever. The commit reloads the table and looks
  for its own snapshot (by snapshot id): found, the write landed and returns normally. Not
  found, the commit is staged and sent again on the table as it is now: the attempt that was
  lost asserted the branch head it was made on, so at most one of the two can land, and when
  the head moved past it, it never will. When the catalog cannot be reached, or the answers
  stay lost, :class:`~tablestore.errors.CommitStateUnknownError` names the snapshot id to look
  for; ``remove_orphan_files`` clears the files if it never landed.

This is Iceberg Java's rule (``SnapshotProducer`` never cleans up after
``CommitStateUnknownException``), and every write kind follows it: the transaction
(:mod:`tablestore.table.update.transaction`) resolves outcomes with :class:`OutcomeResolver`,
and the phase before a commit exists (writing files, building the change) runs under
:func:`~tablestore.io.cleanup.deleted_unless_sent`, which deletes what it wrote only on an
error that is not an unknown outcome. No other module catches ``BaseException`` to delete files
(a test in ``tests/test_layers.py`` keeps it so).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from tablestore.errors import CommitStateUnknownError
from tablestore.io.cleanup import deleted_unless_sent
from tablestore.spec.metadata.table_metadata import Snapshot, TableMetadata

if TYPE_CHECKING:
    from tablestore.table import Table

log = logging.getLogger(__name__)

#: How many lost answers one commit resolves (reload, look, send again) before it reports the
#: outcome as unknown: a catalog that keeps losing answers is not retried for half an hour.
UNKNOWN_ATTEMPTS = 3


class Outcome(enum.StrEnum):
    """What became of a commit."""

    LANDED = "landed"
    NOT_LANDED = "not-landed"
    UNKNOWN = "unknown"


class Landed(Exception):  # a signal inside the commit loop, not an error
    """The table already holds this commit's snapshot: an attempt whose answer was lost landed."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__(snapshot.snapshot_id)
        self.snapshot = snapshot


class OutcomeResolver:
    """Resolves the lost answers of one snapshot's commit (see the module docstring).

    ``branch`` is the branch the snapshot goes to (None: staged without moving a branch, which
    no requirement guards, so it is never sent twice)."""

    def __init__(self, table: Table, snapshot_id: int, branch: str | None) -> None:
        self.table = table
        self.snapshot_id = snapshot_id
        self.branch = branch
        #: The parent snapshot of each attempt whose answer was lost (it may still land while
        #: the branch's head is that parent).
        self.unknown_parents: list[int | None] = []
        self.last_parent: int | None = None

    @property
    def resolving(self) -> bool:
        return bool(self.unknown_parents)

    def check_landed(self, base: TableMetadata) -> None:
        """Raise :class:`Landed` when ``base`` holds the snapshot (an earlier attempt landed)."""
        if self.unknown_parents:
            snapshot = base.snapshot_by_id(self.snapshot_id)
            if snapshot is not None:
                raise Landed(snapshot)

    def after_unknown(self, error: CommitStateUnknownError, forget_attempt: Callable[[], None]) -> None:
        """An attempt's answer was lost: keep its files, reload the table so the next attempt
        finds the snapshot if it landed; raise the unknown outcome when that cannot be told."""
        self.unknown_parents.append(self.last_parent)
        forget_attempt()  # its manifest list may be the table's now
        try:
            self.table.refresh()
        except Exception as e:
            raise self.unknown(f"the catalog cannot be reached to check ({type(e).__name__}: {e})") from error
        found = self.table.metadata.snapshot_by_id(self.snapshot_id)
        if found is not None:
            return  # the next stage raises Landed
        if self.branch is None:
            raise self.unknown("a staged snapshot is not sent twice") from error
        if len(self.unknown_parents) >= UNKNOWN_ATTEMPTS:
            raise self.unknown(f"{len(self.unknown_parents)} answers were lost ({error})") from error
        log.warning("commit of snapshot %s to %s: answer lost (%s); not in the table, sending it again",
                    self.snapshot_id, self.table.name, error)

    def may_still_land(self) -> bool:
        """Whether an attempt whose answer was lost could still land on the table as last loaded:
        its requirement (the branch head it was made on) still holds. Its files must stay then."""
        if not self.unknown_parents:
            return False
        if self.branch is None:
            return True
        head = self.table.metadata.branch_head(self.branch)
        return (head.snapshot_id if head is not None else None) in self.unknown_parents

    def unknown(self, why: str) -> CommitStateUnknownError:
        return CommitStateUnknownError(
            f"the commit of snapshot {self.snapshot_id} to table {self.table.name} may or may not have "
            f"landed: {why}. Its files are kept. Check whether snapshot {self.snapshot_id} is in the "
            "table's history (tablestore snapshots, or table.snapshots()); retry the write with the same "
            "commit id to apply it at most once; remove_orphan_files clears the files if it never landed",
            snapshot_id=self.snapshot_id,
        )


__all__ = ["UNKNOWN_ATTEMPTS", "Landed", "Outcome", "OutcomeResolver", "deleted_unless_sent"]
