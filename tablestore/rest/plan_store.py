"""Served scan plans kept between requests: the pages of a paged plan, by plan id.

In memory, per process: a plan lives until every plan task was fetched, it was cancelled, or
``scan-plan-ttl-seconds`` passed; at most ``MAX_PLANS`` at once (the oldest go first, and their
clients get a 404 and plan again).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from tablestore.errors import NoSuchPlanIdError, NoSuchPlanTaskError
from tablestore.names import Identifier

DEFAULT_PAGE_SIZE = 5000
DEFAULT_PLAN_TTL_S = 600
MAX_PLANS = 1000


@dataclass
class StoredPlan:
    """The pages of one plan: page 0 answered the plan request, the rest wait for ``/tasks``."""

    catalog: str
    table: Identifier
    principal: str
    pages: list[bytes]
    pending: set[int]
    created: float = field(default_factory=time.monotonic)
    cancelled: bool = False

    def owned_by(self, catalog: str, principal: str, table: Identifier) -> bool:
        # A plan is its caller's: another token cannot page through it.
        return self.catalog == catalog and self.principal == principal and self.table == table


class PlanStore:
    """Plans by id, in memory, each kept for ``ttl_s`` at most."""

    def __init__(self, ttl_s: int = DEFAULT_PLAN_TTL_S, max_plans: int = MAX_PLANS) -> None:
        self.ttl_s = ttl_s
        self.max_plans = max_plans
        self._plans: OrderedDict[str, StoredPlan] = OrderedDict()
        self._lock = threading.Lock()

    def _expire(self) -> None:
        deadline = time.monotonic() - self.ttl_s
        while self._plans and (len(self._plans) > self.max_plans
                               or next(iter(self._plans.values())).created < deadline):
            self._plans.popitem(last=False)

    def add(self, plan_id: str, plan: StoredPlan) -> None:
        with self._lock:
            self._plans[plan_id] = plan
            self._expire()

    def get(self, plan_id: str, catalog: str, principal: str, table: Identifier) -> StoredPlan:
        with self._lock:
            self._expire()
            plan = self._plans.get(plan_id)
        if plan is None or not plan.owned_by(catalog, principal, table):
            raise NoSuchPlanIdError(f"no scan plan {plan_id!r} for table {'.'.join(table)}: it was never made, "
                                    "all its plan tasks were fetched, or it expired; plan the scan again")
        return plan

    def cancel(self, plan_id: str, catalog: str, principal: str, table: Identifier) -> None:
        plan = self.get(plan_id, catalog, principal, table)
        with self._lock:
            # A tombstone: fetching the plan now says "cancelled", as the spec asks.
            plan.cancelled, plan.pages, plan.pending = True, [], set()

    def take_page(self, token: str, catalog: str, principal: str, table: Identifier) -> bytes:
        plan_id, _, index_text = token.rpartition(":")
        missing = NoSuchPlanTaskError(f"no plan task {token!r} for table {'.'.join(table)}: it was fetched "
                                      "already, its plan was cancelled or expired; plan the scan again")
        if not index_text.isdigit():
            raise missing
        index = int(index_text)
        with self._lock:
            self._expire()
            plan = self._plans.get(plan_id)
            if plan is None or not plan.owned_by(catalog, principal, table) or index not in plan.pending:
                raise missing
            plan.pending.discard(index)
            page = plan.pages[index]
            if not plan.pending:
                # Every plan task fetched: the spec lets the client skip cancelling, so drop it.
                del self._plans[plan_id]
        return page


__all__ = ["DEFAULT_PAGE_SIZE", "DEFAULT_PLAN_TTL_S", "MAX_PLANS", "PlanStore", "StoredPlan"]
