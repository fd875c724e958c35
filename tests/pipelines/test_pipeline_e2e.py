"""The whole asset graph, twice, on the embedded configuration; then the Java oracle reads the
events table; then one thing at a time is broken and the matching GX check must fail.

One lakehouse (module fixture) serves the module: a run of the graph takes a few minutes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from pipelines.definitions import build_definitions
from pipelines.defs.customers.assets import LTV_KEY, SEGMENTS_KEY
from pipelines.defs.erasure.assets import ERASURE_KEY
from pipelines.defs.ingest import events as ev
from pipelines.defs.ingest.assets import EVENTS_HOURLY_KEY, EVENTS_KEY, EVOLUTION_KEY, LANDING_KEY
from pipelines.defs.resources import resources
from pipelines.drive import PipelineRun, drive, materialize
from pipelines.settings import DATABASE, load_settings
from tests import oracle

# Two drives of the whole graph in the module fixture: about 15 minutes on a loaded machine.
pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(1800)]

TABLES = ("events", "customers", "erasure_requests", "landing_events", "erasure_audit")
ALL_CHECKS = {"events_batch_valid", "null_device_before_evolution", "evolved_types", "partition_specs_by_cutover",
              "erased_users_gone", "landing_reconciles"}


@dataclass
class State:
    rows: dict[str, list[dict[str, Any]]]
    snapshots: dict[str, list[int]]


@dataclass
class Lake:
    root: Path
    first: PipelineRun
    second: PipelineRun
    after_first: State
    after_second: State


def state(root: Path) -> State:
    res = resources(root=str(root))
    catalog = res["tablestore"].catalog()
    rows, snapshots = {}, {}
    for name in TABLES:
        table = catalog.load_table((DATABASE, name))
        data = table.scan().to_arrow()
        key = "event_id" if "event_id" in data.column_names else data.column_names[0]
        # completed_at and the audit's erased_at are wall-clock times, not data.
        data = data.drop_columns([c for c in ("completed_at", "erased_at") if c in data.column_names])
        rows[name] = data.sort_by(key).to_pylist()
        snapshots[name] = [s.snapshot_id for s in table.snapshots()]
    return State(rows, snapshots)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    root = tmp_path_factory.mktemp("lakehouse")
    first = drive(root=str(root))
    after_first = state(root)
    second = drive(root=str(root))
    yield Lake(root, first, second, after_first, state(root))


def checks_of(run: PipelineRun) -> dict[str, bool]:
    return {c.name: c.passed for c in run.checks}


def test_first_run_materializes_everything_and_every_check_passes(lake: Lake) -> None:
    assert {s.label: s.error for s in lake.first.steps if not s.success} == {}
    assert checks_of(lake.first) == dict.fromkeys(ALL_CHECKS, True)
    erasure = lake.first.metadata(ERASURE_KEY)
    assert erasure["users"] == [7, 42, 101]
    assert erasure["verified"] is True
    settings = load_settings(root=str(lake.root))
    assert len(lake.after_first.rows["landing_events"]) == settings.data.days * settings.data.events_per_day
    erased = {7, 42, 101}
    # The SQL DELETE (IN-subquery over the pending requests) removed every landed row of the
    # subjects from events, and their one row each from customers.
    landed = [r for r in lake.after_first.rows["landing_events"] if r["user_id"] in erased]
    assert erasure["rows_deleted"] == {"events": len(landed), "customers": 3}
    files_rewritten, files_removed = erasure["files_rewritten"], erasure["files_removed"]
    assert isinstance(files_rewritten, int) and isinstance(files_removed, int)
    assert files_rewritten > 0 and files_removed > 0
    expected = [r["event_id"] for r in lake.after_first.rows["landing_events"] if r["user_id"] not in erased]
    assert [r["event_id"] for r in lake.after_first.rows["events"]] == sorted(expected)
    assert {r["status"] for r in lake.after_first.rows["erasure_requests"]} == {"done"}
    audit = lake.after_first.rows["erasure_audit"]
    assert [r["verified"] for r in audit] == [True]
    # The audit counts the rows the SQL DELETE removed: the erasure is one act.
    assert [r["rows_removed"] for r in audit] == [len(landed) + 3] == [erasure["rows_removed"]]
    customers = lake.after_first.rows["customers"]
    assert erased.isdisjoint(r["user_id"] for r in customers)
    assert {r["segment"] for r in customers} <= {"vip", "regular", "occasional", "browser"}
    # lifetime_value is a partial update: customers who never bought keep NULL.
    assert all(r["lifetime_value"] is None for r in customers if r["segment"] == "browser")
    assert all(r["lifetime_value"] is not None for r in customers if r["segment"] in ("vip", "regular"))


def test_second_run_is_idempotent(lake: Lake) -> None:
    assert {s.label: s.error for s in lake.second.steps if not s.success} == {}
    assert checks_of(lake.second) == checks_of(lake.first)
    for name in TABLES:
        assert lake.after_second.rows[name] == lake.after_first.rows[name], name
    new = {n: lake.after_second.snapshots[n][len(lake.after_first.snapshots[n]):] for n in TABLES}
    # Old snapshots stay; nothing is committed where nothing changed: no new landing files, no
    # new requests, no erasure, and the days under the day spec are left as they are.
    for name in TABLES:
        assert lake.after_second.snapshots[name][:len(lake.after_first.snapshots[name])] == \
            lake.after_first.snapshots[name]
    assert new["landing_events"] == [] and new["erasure_requests"] == [] and new["erasure_audit"] == []
    daily = [s for s in lake.second.steps if "lakehouse/shop/events" in s.materializations]
    # Two runs land days: those before the evolution, those after it (each a range of days).
    assert [s.materializations["lakehouse/shop/events"]["action"] for s in daily] == ["unchanged", "unchanged"]
    # The hours match their landing rows too: events gets no snapshot at all (no audit branch
    # either); customers is rebuilt and its features refreshed.
    hourly = [s for s in lake.second.steps if "lakehouse/shop/events_hourly" in s.materializations]
    assert [s.materializations["lakehouse/shop/events_hourly"]["action"] for s in hourly] == ["unchanged"]
    assert new["events"] == []
    assert len(new["customers"]) == 3
    # Nothing pending: the erasure step commits nothing and says so.
    assert lake.second.metadata(ERASURE_KEY) == {"pending": 0, "message": "no pending erasure requests"}
    # The first run's erasure kept the day files under the day spec (position deletes, then a
    # rewrite in each file's own spec), so the spec check holds after both runs.
    specs = [c for c in lake.second.checks if c.name == "partition_specs_by_cutover"]
    assert [c.passed for c in specs] == [True]
    settings = load_settings(root=str(lake.root))
    observed = specs[0].metadata["observed"]
    assert isinstance(observed, dict)
    assert observed["files_per_spec"] == {"day": len(settings.daily_dates), "hour": 24}


def test_java_oracle_reads_both_specs_null_device_and_widened_types(lake: Lake) -> None:
    table = resources(root=str(lake.root))["tablestore"].table("events")
    settings = load_settings(root=str(lake.root))
    batch = oracle.OracleBatch()
    everything = batch.read(table.metadata_location)
    old = batch.read(table.metadata_location, columns=["device"],
                     where=f"event_ts < TIMESTAMP '{settings.evolution.at} 00:00:00'")
    new = batch.read(table.metadata_location, columns=["device"],
                     where=f"event_ts >= TIMESTAMP '{settings.evolution.at} 00:00:00'")
    files = batch.meta(table.metadata_location, "files")
    results = batch.run()

    read = oracle.check(results[everything])
    types = {c["name"]: c["type"] for c in read["columns"]}
    assert (types["quantity"], types["price"], types["amount"]) == ("bigint", "double", "decimal(12,2)")
    assert "country_code" in types and "country" not in types
    assert len(read["rows"]) == len(lake.after_second.rows["events"])
    assert {row[0] for row in oracle.check(results[old])["rows"]} == {None}
    assert None not in {row[0] for row in oracle.check(results[new])["rows"]}
    meta = oracle.check(results[files])
    spec_ids = {row[[c["name"] for c in meta["columns"]].index("spec_id")] for row in meta["rows"]}
    assert spec_ids == {0, 1}


# -- breaking one thing at a time -----------------------------------------------------------------


def run_check(root: Path, asset: dg.AssetKey, name: str) -> dg.AssetCheckEvaluation:
    """Run one asset check alone through Dagster and return its evaluation."""
    result = materialize(build_definitions(root=str(root)), dg.AssetSelection.checks(dg.AssetCheckKey(asset, name)))
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


def failed_expectations(evaluation: dg.AssetCheckEvaluation) -> list[str]:
    """The failed expectations of a check: pipelines.defs.quality_checks.check_result stores them as a JSON list."""
    failed = evaluation.metadata["failed"]
    assert isinstance(failed, dg.JsonMetadataValue) and isinstance(failed.value, list)
    return failed.value


def test_check_fails_when_an_erased_user_is_reinserted(lake: Lake) -> None:
    table = resources(root=str(lake.root))["tablestore"].table("events")
    row = dict(lake.after_second.rows["events"][0])
    full = table.scan(filter=f"event_id = {row['event_id']}").to_arrow()
    reinserted = full.set_column(full.column_names.index("user_id"), "user_id", pa.array([42], pa.int64()))
    reinserted = reinserted.set_column(reinserted.column_names.index("event_id"), "event_id",
                                       pa.array([999_999_999], pa.int64()))
    table.append(reinserted)
    try:
        evaluation = run_check(lake.root, ERASURE_KEY, "erased_users_gone")
        assert evaluation.passed is False
        assert any("42" in str(f) for f in failed_expectations(evaluation))
    finally:
        table.refresh().delete("event_id = 999999999")
    assert run_check(lake.root, ERASURE_KEY, "erased_users_gone").passed is True


def test_check_fails_when_an_old_row_gets_a_device(lake: Lake) -> None:
    table = resources(root=str(lake.root))["tablestore"].table("events")
    event_id = lake.after_second.rows["events"][0]["event_id"]
    original = table.scan(filter=f"event_id = {event_id}").to_arrow()
    assert original.column("device").to_pylist() == [None]
    changed = original.set_column(original.column_names.index("device"), "device", pa.array(["ios"]))
    table.overwrite(changed, filter=f"event_id = {event_id}")
    try:
        evaluation = run_check(lake.root, EVOLUTION_KEY, "null_device_before_evolution")
        assert evaluation.passed is False
        assert any("device" in str(f) for f in failed_expectations(evaluation))
    finally:
        table.refresh().overwrite(original, filter=f"event_id = {event_id}")
    assert run_check(lake.root, EVOLUTION_KEY, "null_device_before_evolution").passed is True


def test_check_fails_when_a_column_is_left_unwidened(tmp_path: Path) -> None:
    settings = load_settings(root=str(tmp_path))
    res = resources(root=str(tmp_path))
    definitions = build_definitions(root=str(tmp_path), settings=settings)
    assert materialize(definitions, [LANDING_KEY]).success
    for day in settings.daily_dates:
        if day < settings.evolution.at:
            assert materialize(definitions, [EVENTS_KEY], partition_key=day.isoformat()).success
    store = res["tablestore"]
    ran = ev.evolve_schema(store.sql(res["spark"].session()), skip=("quantity",))
    assert not any("quantity" in s for s in ran)
    evaluation = run_check(tmp_path, EVOLUTION_KEY, "evolved_types")
    assert evaluation.passed is False
    failed = failed_expectations(evaluation)
    assert any("quantity" in f and "LongType" in f for f in failed)
    assert not any("'price'" in f or "'amount'" in f for f in failed if "of_type" in f)
    assert store.table("events").schema().find_field("quantity").field_type.__class__.__name__ == "IntegerType"


def test_ingest_files_are_written_in_spark_tasks(lake: Lake) -> None:
    """The ingest's INSERT OVERWRITE writes from Spark's executors, not from the run process:
    each ingest records the Spark tasks that wrote its files (issue 29)."""
    keys = {EVENTS_KEY.to_user_string(), EVENTS_HOURLY_KEY.to_user_string()}
    ingests = [m for step in lake.first.steps for key, m in step.materializations.items()
               if key in keys and m["action"] == "overwritten"]
    assert len(ingests) >= 2  # the daily and the hourly ingests
    for metadata in ingests:
        assert int(str(metadata["write_tasks"])) >= 1, metadata
        assert metadata["write_executors"] == "driver", metadata  # local[2]: the driver's executor
        assert metadata["write_hosts"] != "", metadata


def test_feature_merges_are_written_in_spark_tasks(lake: Lake) -> None:
    """The customer features merge from their Spark query in Spark tasks (merge_columns on the
    first run, update_columns on the second): the run process plans and commits (issue 29)."""
    keys = {SEGMENTS_KEY.to_user_string(), LTV_KEY.to_user_string()}
    for run, action in ((lake.first, "merge_columns"), (lake.second, "update_columns")):
        merges = [m for step in run.steps for key, m in step.materializations.items() if key in keys]
        assert [m["action"] for m in merges] == [action, action]
        for metadata in merges:
            assert int(str(metadata["rewritten_fragments"])) >= 1, metadata
            assert int(str(metadata["write_tasks"])) >= 1, metadata
            assert metadata["write_hosts"] != "", metadata
    segments = next(m for step in lake.first.steps for key, m in step.materializations.items()
                    if key == SEGMENTS_KEY.to_user_string())
    # The segment counts come from Spark (one row per segment); every customer has a segment
    # (the erasure may remove some customers after the merge, never add one).
    counts = segments["segments"]
    assert isinstance(counts, dict) and set(counts) <= {"vip", "regular", "occasional", "browser"}
    assert sum(counts.values()) == segments["source_rows"]
    assert sum(counts.values()) >= len(lake.after_first.rows["customers"])
