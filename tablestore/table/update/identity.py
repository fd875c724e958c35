"""Commit identifiers: a job that commits again with the same identifier never applies twice.

A writer that may run more than once for the same work (a Spark streaming batch replayed after
a restart, a Dagster step re-executed after a failure, any job retried by a scheduler) gives its
commit a :class:`CommitIdentity`. The commit records it in its snapshot summary, and before every
attempt, on the table as it is then, the transaction looks for it in the history of main. When
it is there, the work was committed before: the transaction deletes the files it wrote and
returns the earlier snapshot without committing. Because the check runs again on every retry, a
re-run racing its original cannot land twice either: the commit asserts the head of main, so
whichever lands second sees the first in the history it is re-staged on.

An identity may carry a sequence (Spark's micro-batch id): then a commit of the same identity
with an equal or higher sequence counts as applied, as Iceberg's Spark streaming sink decides.
History older than the oldest retained snapshot is not searched (expiring snapshots forgets
identities).
"""

from __future__ import annotations

from dataclasses import dataclass

from tablestore.spec.metadata.table_metadata import MAIN_BRANCH, Snapshot, TableMetadata

COMMIT_ID_PROPERTY = "tablestore.commit-id"


@dataclass(frozen=True)
class CommitIdentity:
    """Who makes a commit: ``value`` under summary key ``key``, optionally with a sequence."""

    value: str
    key: str = COMMIT_ID_PROPERTY
    sequence: int | None = None
    sequence_key: str | None = None

    @classmethod
    def of(cls, commit_id: str | CommitIdentity | None) -> CommitIdentity | None:
        """The identity a caller named: a plain string is the value under the default key."""
        if commit_id is None or isinstance(commit_id, CommitIdentity):
            return commit_id
        return cls(str(commit_id))

    def summary(self) -> dict[str, str]:
        out = {self.key: self.value}
        if self.sequence is not None and self.sequence_key is not None:
            out[self.sequence_key] = str(self.sequence)
        return out

    def latest(self, metadata: TableMetadata, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """The newest snapshot on ``branch`` that carries this identity's value."""
        snapshot = metadata.branch_head(branch)
        while snapshot is not None:
            if snapshot.summary.get(self.key) == self.value:
                return snapshot
            parent = snapshot.parent_snapshot_id
            snapshot = metadata.snapshot_by_id(parent) if parent is not None else None
        return None

    def latest_sequence(self, metadata: TableMetadata, branch: str = MAIN_BRANCH) -> int | None:
        """The sequence the newest snapshot of this identity recorded (None if none did)."""
        found = self.latest(metadata, branch)
        if found is None or self.sequence_key is None:
            return None
        raw = found.summary.get(self.sequence_key)
        return int(raw) if raw is not None and raw.lstrip("-").isdigit() else None

    def applied(self, metadata: TableMetadata, branch: str = MAIN_BRANCH) -> Snapshot | None:
        """The snapshot that already applied this commit on ``branch``, or None if it never was."""
        found = self.latest(metadata, branch)
        if found is None or self.sequence is None:
            return found
        last = self.latest_sequence(metadata, branch)
        return found if last is not None and self.sequence <= last else None


def as_identity(commit_id: str | CommitIdentity | None) -> CommitIdentity | None:
    return CommitIdentity.of(commit_id)
