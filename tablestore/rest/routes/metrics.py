"""``GET /metrics``: the service's metrics in Prometheus' text format (prometheus_client).

Not to be confused with the REST spec's ``POST …/tables/{table}/metrics``, where clients report
their scans and commits (accepted and dropped, see :mod:`tablestore.rest.routes.tables`).

Each app has its own registry (:class:`ServiceMetrics`), so two apps in one process (tests)
never mix their counts. Two kinds of metrics:

- HTTP requests, recorded by the envelope middleware (:mod:`tablestore.rest.envelope`) for
  every request, refused ones included: ``tablestore_http_requests_total{method, route, status}``,
  ``tablestore_http_request_duration_seconds{method, route}`` (a histogram) and
  ``tablestore_http_requests_in_progress``. ``route`` is the route template
  (``/v1/{prefix}/namespaces/{namespace}/tables/{table}``), never the path a client sent;
  a path no route matches is ``unmatched``.
- The catalog's events, counted where they happen (:mod:`tablestore.rest.state.stats`) and read at
  scrape time by :class:`StatsCollector`, each with the served catalog's name as ``catalog``:
  commits, conflicts and retries; cache hits and misses; credentials vended; requests
  signed; scan plans, their file scan tasks and plan tasks served; idempotent replays. Every
  series of a served catalog is present from the start, at 0.

The process's CPU, memory and open files come from prometheus_client's ``process_*`` collector.

One process, one set of counters: ``tablestore catalog serve`` runs one uvicorn worker, so no
multiprocess mode is needed. Replicas behind a load balancer are scraped one by one (each is a
target) and summed in PromQL (``sum by (route) (rate(tablestore_http_requests_total[5m]))``).
Counters start from 0 when a process starts, as Prometheus' ``rate()`` expects.

Access: the metrics name the served catalogs and their traffic, so ``/metrics`` asks for a bearer
token, any principal's (read is enough), like the API, unless ``server.metrics-auth: none``
(or ``server.auth: none``). Prometheus sends one with ``authorization: {credentials_file: …}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from fastapi import APIRouter, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from tablestore.rest.access import Service
from tablestore.rest.state.stats import (
    CACHE_HITS,
    CACHE_MISSES,
    COMMIT_CONFLICTS,
    COMMIT_RETRIES,
    COMMITS,
    CREDENTIALS_VENDED,
    IDEMPOTENT_REPLAYS,
    REQUESTS_SIGNED,
    SCAN_FILE_TASKS,
    SCAN_PLAN_TASKS,
    SCAN_PLANS,
    Stats,
)

router = APIRouter(tags=["operations"])

UNMATCHED = "unmatched"
COMMIT_KINDS = ("table", "transaction", "create", "register")
CACHES = ("metadata", "credentials")
ACCESS = ("read", "write")


@dataclass(frozen=True)
class _Family:
    """One counter family fed from Stats: its metric name (``_total`` is added), help, the
    labels after ``catalog``, the label values present from the start, and where it is counted."""

    stat: str
    name: str
    help: str
    labels: tuple[str, ...]
    initial: tuple[tuple[str, ...], ...]
    source: str  # "catalog" (ServedSqlCatalog.stats), "vendor" (CredentialVendor.stats), "service"


FAMILIES = (
    _Family(COMMITS, "tablestore_commits", "Commits that landed in the catalog database, by kind: "
            "table (a table commit), transaction (a multi-table commit), create, register.",
            ("kind",), tuple((k,) for k in COMMIT_KINDS), "catalog"),
    _Family(COMMIT_CONFLICTS, "tablestore_commit_conflicts", "Commits refused with 409 CommitFailedException: "
            "a requirement failed on the table's current state, or every attempt's race was lost, by kind.",
            ("kind",), tuple((k,) for k in COMMIT_KINDS), "catalog"),
    _Family(COMMIT_RETRIES, "tablestore_commit_retries", "Attempts of a commit after its first: made again on "
            "the table's current row after a race lost or a stale state, and further tries of a register with "
            "overwrite. A commit is counted once in tablestore_commits however many attempts it took.",
            (), ((),), "catalog"),
    _Family(CACHE_HITS, "tablestore_cache_hits", "Lookups answered from a cache: metadata (parsed metadata "
            "files by location), credentials (vended credentials reused).", ("cache",),
            tuple((c,) for c in CACHES), "catalog+vendor"),
    _Family(CACHE_MISSES, "tablestore_cache_misses", "Lookups the cache could not answer: a metadata file read, "
            "or an STS AssumeRole.", ("cache",), tuple((c,) for c in CACHES), "catalog+vendor"),
    _Family(CREDENTIALS_VENDED, "tablestore_credentials_vended", "Scoped storage credentials handed to clients "
            "(a load or create with vended-credentials, or the credentials endpoint), by access.",
            ("access",), tuple((a,) for a in ACCESS), "vendor"),
    _Family(SCAN_PLANS, "tablestore_scan_plans", "Scans planned on the service (POST .../plan).", (), ((),),
            "service"),
    _Family(SCAN_FILE_TASKS, "tablestore_scan_file_tasks", "File scan tasks in the plans made.", (), ((),),
            "service"),
    _Family(SCAN_PLAN_TASKS, "tablestore_scan_plan_tasks_served", "Plan tasks (pages of a paged plan) served "
            "at POST .../tasks.", (), ((),), "service"),
    _Family(IDEMPOTENT_REPLAYS, "tablestore_idempotent_replays", "Responses replayed for a retried "
            "Idempotency-Key instead of running the operation again.", (), ((),), "service"),
    _Family(REQUESTS_SIGNED, "tablestore_requests_signed", "Storage requests signed for clients at "
            "POST .../sign (remote signing); refused ones are not counted.", (), ((),), "service"),
)


class StatsCollector(Collector):
    """The catalog's counters (:mod:`tablestore.rest.state.stats`) as Prometheus counters, read at scrape time."""

    def __init__(self, service: Service) -> None:
        self.service = service

    def _sources(self, family: _Family) -> Iterator[tuple[str, Stats, bool]]:
        """(catalog, its Stats, whether the catalog is a label value in the stats)."""
        for catalog, served in self.service.catalogs.items():
            if "catalog" in family.source:
                stats = getattr(served, "stats", None)
                if isinstance(stats, Stats):
                    yield catalog, stats, False
            if "vendor" in family.source:
                vendor = self.service.vendors.get(catalog)
                if vendor is not None:
                    yield catalog, vendor.stats, False
        if family.source == "service":
            for catalog in self.service.catalogs:
                yield catalog, self.service.stats, True

    def collect(self) -> Iterable[Metric]:
        for family in FAMILIES:
            values: dict[tuple[str, ...], float] = {
                (catalog, *initial): 0.0 for catalog in self.service.catalogs for initial in family.initial}
            for catalog, stats, by_catalog in self._sources(family):
                for name, labels, count in stats.items():
                    if name != family.stat:
                        continue
                    if by_catalog:
                        if labels[:1] != (catalog,):
                            continue
                        key = labels
                    else:
                        key = (catalog, *labels)
                    values[key] = values.get(key, 0.0) + count
            metric = CounterMetricFamily(family.name, family.help, labels=["catalog", *family.labels])
            for key, count in sorted(values.items()):
                metric.add_metric(list(key), count)
            yield metric
        verified = CounterMetricFamily(
            "tablestore_token_verifications", "Bearer tokens verified: one per authenticated request.")
        verified.add_metric([], float(self.service.auth.verifications))
        yield verified


class ServiceMetrics:
    """The registry of one app: the HTTP metrics, the catalog's counters and the process's."""

    def __init__(self, service: Service) -> None:
        # No *_created series beside each counter (process-wide: the service has no other registry).
        disable_created_metrics()
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "tablestore_http_requests", "HTTP requests answered, by method, route template and status.",
            ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram(
            "tablestore_http_request_duration_seconds",
            "Time from a request's arrival to the end of its answer, by method and route template.",
            ["method", "route"], registry=self.registry)
        self._series: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        self.in_progress = Gauge(
            "tablestore_http_requests_in_progress", "HTTP requests being answered.", registry=self.registry)
        self.registry.register(StatsCollector(service))
        ProcessCollector(registry=self.registry)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        # The series of each (method, route, status) looked up once: labels() checks and locks on
        # every call, a few percent of a table load's CPU. Routes are templates, so they are few.
        key = (method, route, status)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = (self.requests.labels(method, route, str(status)),
                                          self.latency.labels(method, route))
        series[0].inc()
        series[1].observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def metrics_of(request: Request) -> ServiceMetrics:
    metrics: ServiceMetrics = request.app.state.metrics
    return metrics


@router.get("/metrics", include_in_schema=False)
async def get_metrics(request: Request) -> Response:
    # The envelope authenticated the scrape (unless server.metrics-auth: none).
    return Response(metrics_of(request).render(), media_type=CONTENT_TYPE_LATEST)


__all__ = ["FAMILIES", "UNMATCHED", "ServiceMetrics", "StatsCollector", "metrics_of", "router"]
