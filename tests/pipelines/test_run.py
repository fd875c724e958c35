"""The plan of runs that ``run_pipeline`` and the stack's GraphQL client both launch."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from pipelines.definitions import build_definitions
from pipelines.defs.ingest.assets import EVENTS_HOURLY_KEY, EVENTS_KEY
from pipelines.run import pipeline_plan
from pipelines.settings import load_settings

RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"


def test_plan_is_four_runs_with_ranges_of_days_and_hours_in_the_order_of_the_dates(tmp_path: Path) -> None:
    settings = load_settings(root=str(tmp_path))
    plan = pipeline_plan(settings)
    assert [(p.label, [k.to_user_string() for k in p.keys], p.partition_key, p.tags) for p in plan] == [
        ("landing, events 2026-11-01 .. 2026-11-02, schema evolution",
         ["landing/events", "landing/erasure_requests", "lakehouse/shop/events",
          "lakehouse/shop/events_schema_evolution"],
         None, {RANGE_START: "2026-11-01", RANGE_END: "2026-11-02"}),
        ("events 2026-11-03, rollover", ["lakehouse/shop/events", "lakehouse/shop/events_rollover"],
         None, {RANGE_START: "2026-11-03", RANGE_END: "2026-11-03"}),
        ("events_hourly 2026-11-04-00:00 .. 2026-11-04-23:00, events retention, erasure requests",
         ["lakehouse/shop/events_hourly", "lakehouse/shop/events_retention", "lakehouse/shop/erasure_requests"],
         None, {RANGE_START: "2026-11-04-00:00", RANGE_END: "2026-11-04-23:00"}),
        ("customers and features, hourly rollup, gdpr erasure, trino reconciliation",
         ["lakehouse/shop/customers", "lakehouse/shop/customer_segments", "lakehouse/shop/customer_lifetime_value",
          "lakehouse/shop/events_hourly_rollup", "lakehouse/shop/gdpr_erasure", "lakehouse/shop/trino_reconciliation"],
         None, None),
    ]


def test_plan_materializes_every_asset_and_partition_once_after_its_upstreams(tmp_path: Path) -> None:
    settings = load_settings(root=str(tmp_path))
    graph = build_definitions(root=str(tmp_path)).resolve_asset_graph()
    plan = pipeline_plan(settings)
    run_of: dict[dg.AssetKey, int] = {}
    for index, step in enumerate(plan):
        for key in step.keys:
            run_of.setdefault(key, index)  # events: the run of its first days
    # Every asset but the table maintenance, which runs on its own schedule.
    maintained = {k for k in graph.get_all_asset_keys() if k.path[:3] == ["lakehouse", "shop", "maintenance"]}
    assert len(maintained) == 4
    assert set(run_of) == set(graph.get_all_asset_keys()) - maintained
    # An asset's upstreams are in its own run (Dagster orders them there) or an earlier one.
    for key, index in run_of.items():
        late = [u.to_user_string() for u in graph.get(key).parent_keys if run_of[u] > index]
        assert late == [], f"{key.to_user_string()} runs before its upstreams {late}"
    # Inside the hours' run the requests load after the hours: they are ingestion's suppression
    # list, and loaded first they would keep the subjects out of events (nothing left to erase).
    requests = dg.AssetKey(["lakehouse", "shop", "erasure_requests"])
    assert run_of[requests] == run_of[EVENTS_HOURLY_KEY]
    assert {EVENTS_KEY, EVENTS_HOURLY_KEY} <= graph.get(requests).parent_keys
    # Each day and each hour lands exactly once, the days after the evolution in a later run.
    days = [(i, d) for i, p in enumerate(plan) if EVENTS_KEY in p.keys and p.tags
            for d in graph.get(EVENTS_KEY).partitions_def.get_partition_keys()  # type: ignore[union-attr]
            if p.tags[RANGE_START] <= d <= p.tags[RANGE_END]]
    assert [d for _, d in days] == [d.isoformat() for d in settings.daily_dates]
    evolution_run = run_of[dg.AssetKey(["lakehouse", "shop", "events_schema_evolution"])]
    assert all((i <= evolution_run) == (d < settings.evolution_at.isoformat()) for i, d in days)
    (hourly,) = [p for p in plan if EVENTS_HOURLY_KEY in p.keys]
    hours = graph.get(EVENTS_HOURLY_KEY).partitions_def.get_partition_keys()  # type: ignore[union-attr]
    assert hourly.tags == {RANGE_START: hours[0], RANGE_END: hours[-1]}
    # The partitioned assets accept a range in one run.
    assert graph.get(EVENTS_KEY).backfill_policy == dg.BackfillPolicy.single_run()
    assert graph.get(EVENTS_HOURLY_KEY).backfill_policy == dg.BackfillPolicy.single_run()
