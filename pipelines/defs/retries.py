"""The retry policy of every asset and asset check of the pipeline.

A step fails when a service it talks to dies under it: MinIO while Spark tasks write files, the
catalog or PostgreSQL during a commit, the Spark Connect server during a job. Each of them comes
back by itself (the stack's restart policies) within seconds to a minute, and every step can run
again from the start: the ingests and ``customers`` are INSERT OVERWRITEs, the feature merges
add a column once and refresh it after, the erasure's DELETE finds nothing the second time and
its audit record is written once per request (``erasure/assets.py``), the landing files and the
requests are written only when missing or changed. So Dagster retries a failed step, waiting 10,
20 then 40 s: 70 s, longer than any service measured takes to come back (docs/stack.md, Faults).

A step that fails for a reason that does not go away (bad settings, a refused write) fails after
the same three waits, with the same error.
"""

from __future__ import annotations

import dagster as dg

STEP_RETRY = dg.RetryPolicy(max_retries=3, delay=10, backoff=dg.Backoff.EXPONENTIAL)


def step_commit_id(context: dg.AssetExecutionContext, what: str) -> str:
    """The commit id of a step's write: the same for every retry of the step and every
    re-execution of its run (the root run's id), and for the same partition. A retry whose first
    attempt's commit landed (its answer lost) gets that commit back and applies nothing twice."""
    run = context.run
    partition = context.partition_key if context.has_partition_key else "-"
    return f"dagster:{run.root_run_id or run.run_id}:{partition}:{what}"
