"""The nightly maintenance schedule runs every table's maintenance asset; the metadata records
fewer files after compaction and the snapshots expired. No Spark: the table is written with
tablestore's own appends."""

from __future__ import annotations

import contextlib
import datetime
from decimal import Decimal
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from dagster._core.storage.dagster_run import DagsterRunStatus

from pipelines.definitions import build_definitions
from pipelines.defs.ingest.events import ensure_events_table
from pipelines.defs.maintenance.assets import maintenance_key
from pipelines.defs.maintenance.schedules import MAINTENANCE_JOB, MAINTENANCE_SCHEDULE, MAINTENANCE_TAG
from pipelines.defs.resources import TableStoreResource

EVENTS_SCHEMA = pa.schema([
    pa.field("event_id", pa.int64(), nullable=False), ("event_ts", pa.timestamp("us")), ("user_id", pa.int64()),
    ("email", pa.string()), ("country", pa.string()), ("event_type", pa.string()), ("quantity", pa.int32()),
    ("price", pa.float32()), ("amount", pa.decimal128(10, 2)),
])


def events_batch(first_id: int, rows: int) -> pa.Table:
    day = datetime.datetime(2026, 11, 1)
    return pa.Table.from_pylist([
        {"event_id": i, "event_ts": day + datetime.timedelta(minutes=i), "user_id": i % 7, "email": f"u{i}@x",
         "country": "DE", "event_type": "view", "quantity": 1, "price": 1.5, "amount": Decimal("1.50")}
        for i in range(first_id, first_id + rows)
    ], schema=EVENTS_SCHEMA)


@pytest.mark.timeout(600)
def test_the_schedule_compacts_and_expires_every_table_and_records_it(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        _compacts_and_expires(tmp_path, stack)


def _compacts_and_expires(tmp_path: Path, stack: contextlib.ExitStack) -> None:
    store = TableStoreResource(root=str(tmp_path))
    table = ensure_events_table(store.sql(None))
    for n in range(4):  # four appends to one day: four small files, four snapshots
        table.append(events_batch(n * 10, 10))
    table.refresh()
    assert int(table.current_snapshot().summary["total-data-files"]) == 4  # type: ignore[union-attr]

    defs = build_definitions(root=str(tmp_path))
    # A persistent instance (the schedule's context needs one that can be referenced).
    instance = stack.enter_context(dg.instance_for_test(temp_dir=str(tmp_path)))
    schedule = defs.resolve_schedule_def(MAINTENANCE_SCHEDULE)
    tick = datetime.datetime(2026, 11, 5, 3, 0, tzinfo=datetime.UTC)
    with dg.build_schedule_context(instance=instance, scheduled_execution_time=tick) as context:
        (request,) = schedule.evaluate_tick(context).run_requests or []
    assert request.tags[MAINTENANCE_TAG] == "true"

    events_op = maintenance_key("events").to_python_identifier()
    result = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(
        instance=instance, tags=request.tags,
        run_config={"ops": {events_op: {"config": {"expire_older_than_hours": 0, "retain_last": 1}}}},
    )
    assert result.success
    materialized = {e.materialization.asset_key: {k: getattr(v, "value", v)
                                                  for k, v in e.materialization.metadata.items()}
                    for e in result.get_asset_materialization_events()}
    # Every table has its maintenance asset; those not created yet say so.
    assert set(materialized) == {maintenance_key(t) for t in ("events", "customers", "erasure_requests",
                                                              "erasure_audit")}
    assert materialized[maintenance_key("customers")] == {"skipped": "lakehouse.shop.customers does not exist yet"}
    events = materialized[maintenance_key("events")]
    assert (events["data_files_before"], events["data_files_after"]) == (4, 1)
    assert (events["files_compacted"], events["files_added"]) == (4, 1)
    # The four appends and the compaction's snapshot: all but the last (retain_last 1) expire;
    # the manifest rewrite then commits one more.
    assert (events["snapshots_before"], events["snapshots_expired"], events["snapshots_after"]) == (4, 4, 2)
    assert events["bytes_after"] < events["bytes_before"]  # type: ignore[operator]
    table.refresh()
    assert events["snapshot_id"] == table.current_snapshot().snapshot_id  # type: ignore[union-attr]
    assert table.scan().to_arrow().num_rows == 40


def test_a_tick_is_skipped_while_another_run_is_in_progress(tmp_path: Path) -> None:
    defs = build_definitions(root=str(tmp_path))
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        # An ingest run the landing sensor started, not finished yet.
        instance.add_run(dg.DagsterRun(job_name="__ASSET_JOB", run_id="ingest-run", status=DagsterRunStatus.STARTED,
                                       tags={"lakehouse/trigger": "landing_events_sensor"}))
        with dg.build_schedule_context(instance=instance) as context:
            data = defs.resolve_schedule_def(MAINTENANCE_SCHEDULE).evaluate_tick(context)
    assert not data.run_requests
    assert data.skip_message == "1 run(s) in progress; maintenance runs after them"
