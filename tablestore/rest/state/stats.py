"""Event counters of the catalog service, kept where the events happen and read by ``/metrics``.

A served catalog counts its commits, conflicts, retries and cache hits; a credential vendor the
credentials it vends; the service its scan plans. Each keeps a :class:`Stats`: plain counters
by name and label values, without a dependency on prometheus_client, so the catalog and the
vendor stay usable (and testable) without the service. :mod:`tablestore.rest.routes.metrics` turns
them into Prometheus metrics at scrape time, with the catalog's name as a label.
"""

from __future__ import annotations

import threading

# The counters' names, shared by the places that count and by tablestore.rest.routes.metrics. A served
# catalog's and a vendor's counters carry the labels named; the service's (Service.stats) carry the
# catalog's name as their one label.
COMMITS = "commits"  # labels: kind (table, transaction, create, register)
COMMIT_CONFLICTS = "commit_conflicts"  # labels: kind
COMMIT_RETRIES = "commit_retries"  # labels: none
CACHE_HITS = "cache_hits"  # labels: cache (metadata, credentials)
CACHE_MISSES = "cache_misses"  # labels: cache
CREDENTIALS_VENDED = "credentials_vended"  # labels: access (read, write)
SCAN_PLANS = "scan_plans"  # the service's: plans made
SCAN_FILE_TASKS = "scan_file_tasks"  # the service's: file scan tasks in those plans
SCAN_PLAN_TASKS = "scan_plan_tasks"  # the service's: plan tasks (pages) fetched from .../tasks
IDEMPOTENT_REPLAYS = "idempotent_replays"  # the service's: responses replayed for an Idempotency-Key
REQUESTS_SIGNED = "requests_signed"  # the service's: storage requests signed (remote signing)


class Stats:
    """Counters by name and label values; thread-safe (the service's handlers run in a pool)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, tuple[str, ...]], float] = {}

    def inc(self, name: str, *labels: str, amount: float = 1) -> None:
        key = (name, labels)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + amount

    def get(self, name: str, *labels: str) -> float:
        with self._lock:
            return self._counts.get((name, labels), 0)

    def items(self) -> list[tuple[str, tuple[str, ...], float]]:
        """Every counter as (name, label values, count)."""
        with self._lock:
            return [(name, labels, count) for (name, labels), count in self._counts.items()]


__all__ = [
    "CACHE_HITS",
    "CACHE_MISSES",
    "COMMITS",
    "COMMIT_CONFLICTS",
    "COMMIT_RETRIES",
    "CREDENTIALS_VENDED",
    "IDEMPOTENT_REPLAYS",
    "REQUESTS_SIGNED",
    "SCAN_FILE_TASKS",
    "SCAN_PLANS",
    "SCAN_PLAN_TASKS",
    "Stats",
]
