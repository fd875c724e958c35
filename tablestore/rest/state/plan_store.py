"""Served scan plans kept between requests: the pages of a paged plan, by plan id.

A plan lives until every plan task was fetched, it was cancelled, or ``scan-plan-ttl-seconds``
passed. For a SQL catalog (what ``tablestore catalog serve`` serves) the pages are kept in the
catalog's own database (table ``tablestore_scan_plans``, next to ``iceberg_tables``), so a plan
made by one replica of the service is paged through by any other behind the same database, and
survives the replica that made it. A plan task is taken with one ``DELETE ... RETURNING``: of two
replicas asked for the same task, one serves it. Expired plans are purged now and then.

Any other catalog keeps its plans in this process's memory, at most ``MAX_PLANS`` at once (the
oldest go first, and their clients get a 404 and plan again).
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy import (
    ColumnElement,
    Engine,
    delete,
    select,
    update,
)

from tablestore.errors import NoSuchPlanIdError, NoSuchPlanTaskError
from tablestore.names import Identifier
from tablestore.rest.service_tables import SCAN_PLANS, create_service_table

DEFAULT_PAGE_SIZE = 5000
DEFAULT_PLAN_TTL_S = 600
MAX_PLANS = 1000
PURGE_EVERY_S = 60.0

_P = SCAN_PLANS.c


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


def _no_plan(plan_id: str, table: Identifier) -> NoSuchPlanIdError:
    return NoSuchPlanIdError(f"no scan plan {plan_id!r} for table {'.'.join(table)}: it was never made, "
                             "all its plan tasks were fetched, or it expired; plan the scan again")


def _no_task(token: str, table: Identifier) -> NoSuchPlanTaskError:
    return NoSuchPlanTaskError(f"no plan task {token!r} for table {'.'.join(table)}: it was fetched "
                               "already, its plan was cancelled or expired; plan the scan again")


class _MemoryPlans:
    """Plans by id, in memory, each kept for ``ttl_s`` at most."""

    def __init__(self, ttl_s: int, max_plans: int) -> None:
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
            raise _no_plan(plan_id, table)
        return plan

    def cancel(self, plan_id: str, catalog: str, principal: str, table: Identifier) -> None:
        plan = self.get(plan_id, catalog, principal, table)
        with self._lock:
            # A tombstone: fetching the plan now says "cancelled", as the spec asks.
            plan.cancelled, plan.pages, plan.pending = True, [], set()

    def take_page(self, plan_id: str, index: int, token: str, catalog: str, principal: str,
                  table: Identifier) -> bytes:
        with self._lock:
            self._expire()
            plan = self._plans.get(plan_id)
            if plan is None or not plan.owned_by(catalog, principal, table) or index not in plan.pending:
                raise _no_task(token, table)
            plan.pending.discard(index)
            page = plan.pages[index]
            if not plan.pending:
                # Every plan task fetched: the spec lets the client skip cancelling, so drop it.
                del self._plans[plan_id]
        return page


class _DatabasePlans:
    """The plans of one served catalog, in its database (shared by every replica)."""

    def __init__(self, engine: Engine, catalog: str, ttl_s: int) -> None:
        self.engine = engine
        self.catalog = catalog
        self.ttl_s = ttl_s
        self._last_purge = 0.0
        self._purge_lock = threading.Lock()
        create_service_table(engine, SCAN_PLANS)

    def _cutoff_ms(self) -> int:
        return int(time.time() * 1000) - self.ttl_s * 1000

    def _purge_now_and_then(self) -> None:
        now = time.monotonic()
        with self._purge_lock:
            if now - self._last_purge < PURGE_EVERY_S:
                return
            self._last_purge = now
        with self.engine.begin() as conn:
            conn.execute(delete(SCAN_PLANS).where(_P.catalog_name == self.catalog, _P.created_ms < self._cutoff_ms()))

    def add(self, plan_id: str, plan: StoredPlan) -> None:
        self._purge_now_and_then()
        now_ms = int(time.time() * 1000)
        ident = json.dumps(list(plan.table))
        rows = [{"catalog_name": self.catalog, "plan_id": plan_id, "page": i, "table_ident": ident,
                 "principal": plan.principal, "created_ms": now_ms, "body": page}
                for i, page in enumerate(plan.pages)]
        with self.engine.begin() as conn:
            conn.execute(SCAN_PLANS.insert(), rows)

    def _owned(self, plan_id: str, principal: str, table: Identifier) -> list[ColumnElement[bool]]:
        return [_P.catalog_name == self.catalog, _P.plan_id == plan_id, _P.principal == principal,
                _P.table_ident == json.dumps(list(table)), _P.created_ms >= self._cutoff_ms()]

    def get(self, plan_id: str, catalog: str, principal: str, table: Identifier) -> StoredPlan:
        with self.engine.connect() as conn:
            row = conn.execute(select(_P.body).where(*self._owned(plan_id, principal, table), _P.page == 0)).first()
        if row is None:
            raise _no_plan(plan_id, table)
        if row.body is None:
            return StoredPlan(catalog, table, principal, [], set(), cancelled=True)
        return StoredPlan(catalog, table, principal, [bytes(row.body)], set())

    def cancel(self, plan_id: str, catalog: str, principal: str, table: Identifier) -> None:
        owned = self._owned(plan_id, principal, table)
        with self.engine.begin() as conn:
            # A tombstone: fetching the plan now says "cancelled", as the spec asks.
            found = conn.execute(update(SCAN_PLANS).where(*owned, _P.page == 0).values(body=None)).rowcount
            if not found:
                raise _no_plan(plan_id, table)
            conn.execute(delete(SCAN_PLANS).where(*owned, _P.page > 0))

    def take_page(self, plan_id: str, index: int, token: str, catalog: str, principal: str,
                  table: Identifier) -> bytes:
        if index < 1:
            raise _no_task(token, table)
        with self.engine.begin() as conn:
            row = conn.execute(
                delete(SCAN_PLANS).where(*self._owned(plan_id, principal, table), _P.page == index)
                .returning(_P.body)).first()
        if row is None or row.body is None:
            raise _no_task(token, table)
        # Every plan task fetched: the spec lets the client skip cancelling, so drop the plan. In
        # its own statement after the take was committed: of two replicas taking the last two
        # tasks at once, the later one to get here sees both gone.
        others = select(_P.page).where(_P.catalog_name == self.catalog, _P.plan_id == plan_id, _P.page > 0)
        with self.engine.begin() as conn:
            conn.execute(delete(SCAN_PLANS).where(_P.catalog_name == self.catalog, _P.plan_id == plan_id,
                                                  _P.page == 0, ~others.exists()))
        return bytes(row.body)


class PlanStore:
    """Plans by id: in the catalog's database for the catalogs in ``engines``, else in memory."""

    def __init__(self, ttl_s: int = DEFAULT_PLAN_TTL_S, max_plans: int = MAX_PLANS,
                 engines: Mapping[str, Engine] | None = None) -> None:
        self.ttl_s = ttl_s
        self._memory = _MemoryPlans(ttl_s, max_plans)
        self._databases = {name: _DatabasePlans(engine, name, ttl_s) for name, engine in (engines or {}).items()}

    def _for(self, catalog: str) -> _MemoryPlans | _DatabasePlans:
        return self._databases.get(catalog) or self._memory

    def add(self, plan_id: str, plan: StoredPlan) -> None:
        self._for(plan.catalog).add(plan_id, plan)

    def get(self, plan_id: str, catalog: str, principal: str, table: Identifier) -> StoredPlan:
        return self._for(catalog).get(plan_id, catalog, principal, table)

    def cancel(self, plan_id: str, catalog: str, principal: str, table: Identifier) -> None:
        self._for(catalog).cancel(plan_id, catalog, principal, table)

    def take_page(self, token: str, catalog: str, principal: str, table: Identifier) -> bytes:
        plan_id, _, index_text = token.rpartition(":")
        if not index_text.isdigit() or not plan_id:
            raise _no_task(token, table)
        return self._for(catalog).take_page(plan_id, int(index_text), token, catalog, principal, table)


__all__ = ["DEFAULT_PAGE_SIZE", "DEFAULT_PLAN_TTL_S", "MAX_PLANS", "PlanStore", "StoredPlan"]
