"""The one retry loop of the commit path, and its policy from the ``commit.retry.*`` properties.

Every commit to a table goes through :func:`commit_with_retries`, called by
:meth:`~tablestore.table.update.transaction.Transaction.commit_transaction` only: stage the change on the
table's current metadata (validating it against what others committed meanwhile), send it to
the catalog, and when the catalog refuses it because another writer won the race
(:class:`CommitConflictError` from the compare-and-swap or a failed requirement), wait, refresh
and stage again. A change that no longer applies raises while it is staged; that is final.

The properties are Iceberg's; the defaults are the ones the README promises:

- ``commit.retry.num-retries`` (100): attempts after the first;
- ``commit.retry.min-wait-ms`` (10) and ``commit.retry.max-wait-ms`` (1000): jittered
  exponential backoff between attempts;
- ``commit.retry.total-timeout-ms`` (1,800,000): no new attempt after this long.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tablestore.errors import CommitConflictError, CommitStateUnknownError, TableStoreError
from tablestore.spec.metadata.table_metadata import TableMetadata
from tablestore.spec.metadata.update_models import TableRequirement, TableUpdate

if TYPE_CHECKING:
    from tablestore.table import Table

NUM_RETRIES = "commit.retry.num-retries"
MIN_WAIT_MS = "commit.retry.min-wait-ms"
MAX_WAIT_MS = "commit.retry.max-wait-ms"
TOTAL_TIMEOUT_MS = "commit.retry.total-timeout-ms"


@dataclass(frozen=True)
class RetryPolicy:
    num_retries: int = 100
    min_wait_ms: int = 10
    max_wait_ms: int = 1000
    total_timeout_ms: int = 1_800_000

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> RetryPolicy:
        default = cls()

        def number(key: str, fallback: int) -> int:
            try:
                return max(0, int(properties.get(key, fallback)))
            except ValueError:
                return fallback  # a malformed value must not make a commit fail

        return cls(
            number(NUM_RETRIES, default.num_retries),
            number(MIN_WAIT_MS, default.min_wait_ms),
            number(MAX_WAIT_MS, default.max_wait_ms),
            number(TOTAL_TIMEOUT_MS, default.total_timeout_ms),
        )

    def wait_seconds(self, attempt: int) -> float:
        """The pause before retry number ``attempt`` (1-based): full jitter over an exponential
        bound, plus the minimum so that writers that collided do not collide again at once."""
        bound = min(self.max_wait_ms, self.min_wait_ms * (2 ** min(attempt, 16)))
        return (random.uniform(0, bound) + self.min_wait_ms) / 1000


@dataclass(frozen=True)
class StagedCommit:
    """One attempt's requirements and updates."""

    requirements: list[TableRequirement]
    updates: list[TableUpdate]


def commit_with_retries(
    table: Table,
    stage: Callable[[TableMetadata], StagedCommit],
    on_conflict: Callable[[], None] | None = None,
    on_unknown: Callable[[CommitStateUnknownError], None] | None = None,
    on_interrupted: Callable[[], None] | None = None,
) -> int:
    """Stage on the table's metadata and commit, retrying lost races under the table's
    ``commit.retry.*`` policy; returns how many attempts it took. ``on_conflict`` runs after a
    refused attempt (to drop what was written for it only). ``on_unknown`` runs after an attempt
    whose answer was lost: it reloads the table for the next attempt (whose stage finds the
    snapshot if it landed) or raises; without it the unknown outcome is raised at once (see
    :mod:`tablestore.table.update.commit_outcome`). ``on_interrupted`` runs when the process is
    interrupted (Ctrl-C, SystemExit) while a request may be in flight, before that propagates.

    Only the catalog's own answers count as "not landed": a conflict or another
    :class:`TableStoreError` it raised. Any other error out of the catalog call may have come
    after the request was sent, so it is an unknown outcome."""
    policy = RetryPolicy.from_properties(table.properties)
    deadline = time.monotonic() + policy.total_timeout_ms / 1000
    attempt = 0
    while True:
        staged = stage(table.metadata)
        try:
            table.metadata_location, table.metadata = table.catalog.commit_table(
                table.identifier, staged.requirements, staged.updates)
            return attempt + 1
        except CommitStateUnknownError as e:
            if on_unknown is None:
                raise
            on_unknown(e)
            continue
        except CommitConflictError:
            if on_conflict is not None:
                on_conflict()
            attempt += 1
            if attempt > policy.num_retries or time.monotonic() > deadline:
                raise
        except TableStoreError:
            raise  # the catalog answered and refused the commit: it did not land
        except Exception as e:
            # Not classified by the catalog (a driver's socket error, a database error at
            # COMMIT): the commit may have landed, so it is an unknown outcome, never a reason
            # to delete files.
            unknown = CommitStateUnknownError(
                f"the commit to {table.name} may or may not have landed ({type(e).__name__}: {e}); "
                "reload the table to check")
            if on_unknown is None:
                raise unknown from e
            on_unknown(unknown)
            continue
        except BaseException:
            if on_interrupted is not None:
                on_interrupted()
            raise
        time.sleep(policy.wait_seconds(attempt))
        table.refresh()
