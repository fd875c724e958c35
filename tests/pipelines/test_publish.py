"""Write-audit-publish in the pipeline: an ingest writes to its run's audit branch, the GX batch
check reads that branch, and main moves only for a batch that passed. A bad batch (a quantity
out of range and NULL users) leaves main's snapshot and rows as they were, for tablestore and for
DuckDB reading main's metadata; the failed check names the branch; the next good batch of the
same day publishes, and the snapshot main gets is the one the check audited."""

from __future__ import annotations

import datetime
import io
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pipelines.definitions import build_assets, build_checks
from pipelines.defs.ingest.assets import BATCH_CHECK, EVENTS_KEY, LANDING_KEY
from pipelines.defs.ingest.landing import day_directory, events_for_day, write_landing_day
from pipelines.defs.publish import AUDIT_PREFIX, audit_branch
from pipelines.defs.resources import resources
from pipelines.settings import PipelineSettings, load_settings
from tests.interop.readers import duckdb_connect, duckdb_read

pytestmark = [pytest.mark.e2e, pytest.mark.spark]


def write_bad_landing_day(settings: PipelineSettings, day: datetime.date) -> None:
    """The day's landing file as a broken source system sends it: one quantity far out of range
    and the first three users missing."""
    good = events_for_day(settings, day)
    quantity = good.column("quantity").to_pylist()
    quantity[0] = 50_000
    users = [None, None, None, *good.column("user_id").to_pylist()[3:]]
    bad = good.set_column(good.schema.get_field_index("quantity"), good.schema.field("quantity"),
                          pa.array(quantity, pa.int32()))
    bad = bad.set_column(bad.schema.get_field_index("user_id"), bad.schema.field("user_id"), pa.array(users, pa.int64()))
    buffer = io.BytesIO()
    pq.write_table(bad, buffer, compression="zstd")
    (day_directory(settings, day) / "part-00000.parquet").write_bytes(buffer.getvalue())


def materialization(result: dg.ExecuteInProcessResult) -> dict[str, object]:
    (event,) = [e for e in result.get_asset_materialization_events() if e.asset_key == EVENTS_KEY]
    metadata = event.materialization.metadata
    return {k: getattr(v, "value", v) for k, v in metadata.items()}


def test_a_batch_that_breaks_its_check_never_reaches_main_and_the_next_good_one_is_published(
    tmp_path: Path,
) -> None:
    settings = load_settings(root=str(tmp_path))
    res = resources(root=str(tmp_path))
    assets = [*build_assets(settings), *build_checks()]
    instance = dg.DagsterInstance.ephemeral()  # one instance: the next run finds the failed one
    assert dg.materialize(assets, selection=[LANDING_KEY], resources=res, instance=instance).success
    first_day, bad_day = settings.daily_dates[:2]

    first = dg.materialize(assets, selection=[EVENTS_KEY], partition_key=first_day.isoformat(), resources=res,
                           instance=instance)
    assert first.success
    published = materialization(first)
    table = res["tablestore"].table("events")
    head = table.current_snapshot()
    assert head is not None
    # A fast-forward: main's new snapshot is the very one the check read on the audit branch.
    assert published["published_snapshot_id"] == published["audited_snapshot_id"] == head.snapshot_id
    assert published["audit_branch"] == audit_branch(first.run_id)
    assert int(str(published["write_tasks"])) >= 1  # Spark's tasks wrote the branch's files
    assert [r for r in table.refs() if r.startswith(AUDIT_PREFIX)] == []  # removed once published
    main_before = head.snapshot_id
    rows_before = sorted(table.scan(columns=["event_id"]).to_arrow().column("event_id").to_pylist())
    assert len(rows_before) == settings.data.events_per_day

    write_bad_landing_day(settings, bad_day)
    bad = dg.materialize(assets, selection=[EVENTS_KEY], partition_key=bad_day.isoformat(), resources=res,
                         instance=instance, raise_on_error=False)

    assert not bad.success
    (evaluation,) = bad.get_asset_check_evaluations()
    assert (evaluation.check_name, evaluation.passed) == (BATCH_CHECK, False)
    branch = audit_branch(bad.run_id)
    assert evaluation.metadata["audit_branch"].value == branch
    failed = [str(f) for f in evaluation.metadata["failed"].value]  # type: ignore[union-attr]
    assert any("quantity" in f for f in failed) and any("user_id" in f for f in failed)
    assert bad.get_asset_materialization_events() == []
    table.refresh()
    assert table.current_snapshot().snapshot_id == main_before
    assert sorted(table.scan(columns=["event_id"]).to_arrow().column("event_id").to_pylist()) == rows_before
    # The batch waits on its branch for inspection.
    on_branch = table.scan(ref=branch, columns=["quantity", "user_id"]).to_arrow()
    assert pc.max(on_branch.column("quantity")).as_py() == 50_000
    assert on_branch.column("user_id").null_count == 3
    # DuckDB, reading main from the metadata file the catalog points at, never sees the batch.
    con = duckdb_connect(tmp_path / "duckdb-extensions")
    seen = duckdb_read(con, table.metadata_location, main_before)
    assert sorted(seen.column("event_id").to_pylist()) == rows_before
    assert pc.max(seen.column("quantity")).as_py() <= 5

    write_landing_day(settings, bad_day)  # the source system sends the day again, whole
    good = dg.materialize(assets, selection=[EVENTS_KEY], partition_key=bad_day.isoformat(), resources=res,
                          instance=instance)
    assert good.success
    published = materialization(good)
    assert published["audit_branches_dropped"] == branch  # the failed run's branch, kept until now
    table.refresh()
    now = table.current_snapshot()
    assert now is not None and published["published_snapshot_id"] == published["audited_snapshot_id"] == now.snapshot_id
    assert now.parent_snapshot_id == main_before
    assert len(table.scan(columns=["event_id"]).to_arrow()) == 2 * settings.data.events_per_day
    assert sorted(table.refs()) == ["main"]
