"""Write-audit-publish: a run writes to an audit branch of its table, the checks read that branch,
and only a batch that passed them reaches ``main``.

Each run gets its own branch, ``audit_<run id>``, created from main's head by the run's first
write (Iceberg's rule for a write to a missing branch). Publishing fast-forwards main to the
branch when main has not moved since the branch was made, so the snapshot the checks read is the
one main gets; when another writer moved main meanwhile, the branch's snapshots are cherry-picked
onto it instead (each keeps ``source-snapshot-id``). The branch is then removed.

A run whose checks fail leaves its branch for inspection; the next run of the same asset drops
the branches of runs that have finished, so no audit branch outlives the run after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tablestore.errors import ValidationError
from tablestore.spec.metadata.table_metadata import MAIN_BRANCH

if TYPE_CHECKING:
    import dagster as dg

    from tablestore.table import Table

AUDIT_PREFIX = "audit_"


def audit_branch(run_id: str) -> str:
    """The audit branch of one Dagster run (identifier-safe: usable as ``t.branch_<name>`` in SQL)."""
    return AUDIT_PREFIX + run_id.replace("-", "_")


def run_of_branch(branch: str) -> str | None:
    """The run id an audit branch belongs to (None for another branch)."""
    if not branch.startswith(AUDIT_PREFIX):
        return None
    return branch.removeprefix(AUDIT_PREFIX).replace("_", "-")


def drop_finished_audit_branches(table: Table, instance: dg.DagsterInstance) -> list[str]:
    """Remove the audit branches of runs that finished (a failed run's branch, kept until now for
    inspection; a run that died before publishing); the names removed."""
    doomed = []
    for name, ref in sorted(table.refresh().refs().items()):
        run_id = run_of_branch(name)
        if run_id is None or not ref.is_branch:
            continue
        run = instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            doomed.append(name)
    if doomed:
        with table.manage_snapshots() as ms:
            for name in doomed:
                ms.remove_branch(name)
    return doomed


def publish(table: Table, branch: str) -> int:
    """Move what ``branch`` holds onto main, remove the branch; main's new head snapshot id."""
    table.refresh()
    head = table.refs()[branch].snapshot_id
    try:
        with table.manage_snapshots() as ms:
            ms.fast_forward(MAIN_BRANCH, branch).remove_branch(branch)
    except ValidationError:
        # Main moved since the branch was made: replay the branch's own snapshots onto it.
        main = table.refresh().refs()[MAIN_BRANCH].snapshot_id
        on_main = {s.snapshot_id for s in table.metadata.ancestors_of(main)}
        own = [s for s in table.metadata.ancestors_of(head) if s.snapshot_id not in on_main]
        for snapshot in reversed(own):
            table.manage_snapshots().cherrypick(snapshot.snapshot_id).commit()
        table.manage_snapshots().remove_branch(branch).commit()
    published = table.refresh().current_snapshot()
    assert published is not None
    return published.snapshot_id
