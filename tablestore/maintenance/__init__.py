"""Table maintenance: expire snapshots, remove orphan files, compaction, manifests, erasure.

    >>> table.maintenance().expire_snapshots(retain_last=1)       # doctest: +SKIP
    >>> table.maintenance().rewrite_data_files(options={"min-input-files": 2})  # doctest: +SKIP
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from tablestore.maintenance.compaction import (
    RewriteDataResult,
    RewriteDeletesResult,
    RewriteManifestsResult,
    remove_dangling_deletes,
    rewrite_data_files,
    rewrite_manifests,
    rewrite_position_deletes,
)
from tablestore.maintenance.expire import ExpireResult, Progress, expire_snapshots
from tablestore.maintenance.orphans import OrphanResult, remove_orphan_files
from tablestore.table import CommitIdentity, Table

__all__ = ["ExpireResult", "Maintenance", "OrphanResult", "RewriteDataResult", "RewriteDeletesResult",
           "RewriteManifestsResult"]


class Maintenance:
    """Maintenance actions on one table (``table.maintenance()``)."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def expire_snapshots(
        self, older_than: int | str | datetime.datetime | None = None, retain_last: int | None = None,
        snapshot_ids: Iterable[int] | None = None, override_retention: bool = False, dry_run: bool = False,
        max_concurrent_deletes: int | None = None, progress: Progress | None = None,
    ) -> ExpireResult:
        return expire_snapshots(self.table, older_than, retain_last, snapshot_ids, override_retention, dry_run,
                                max_concurrent_deletes, progress=progress)

    def remove_orphan_files(
        self, older_than: int | str | datetime.datetime | None = None, location: str | None = None,
        dry_run: bool = False, max_concurrent_deletes: int | None = None, progress: Progress | None = None,
    ) -> OrphanResult:
        return remove_orphan_files(self.table, older_than, location, dry_run, max_concurrent_deletes, progress)

    def rewrite_data_files(
        self, strategy: str = "binpack", sort_order: str | None = None, where: str | None = None,
        options: dict[str, Any] | None = None, progress: Progress | None = None, branch: str | None = None,
        commit_id: str | CommitIdentity | None = None,
    ) -> RewriteDataResult:
        """Compact (or sort) the data files of main, or of ``branch``; the rewrite validates
        against that branch's head. ``commit_id``: a retried compaction whose first commit
        landed rewrites nothing again."""
        table = self.table.on_branch(branch) if branch else self.table
        return rewrite_data_files(table, strategy, sort_order, where, options, progress=progress,
                                  commit_id=commit_id)

    def rewrite_position_deletes(self, options: dict[str, Any] | None = None) -> RewriteDeletesResult:
        return rewrite_position_deletes(self.table, options)

    def remove_dangling_deletes(self) -> int:
        return remove_dangling_deletes(self.table)

    def rewrite_manifests(self, spec_id: int | None = None) -> RewriteManifestsResult:
        return rewrite_manifests(self.table, spec_id)


# ``table.maintenance()``: the table package cannot import this one (it sits below it).
Table.maintenance_actions = Maintenance
