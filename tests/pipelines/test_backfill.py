"""A backfill of 7 days runs as one run and one snapshot; re-running 2 of them changes nothing.

The backfill is what Dagster launches for a range when the asset's policy is
``BackfillPolicy.single_run()``: one run tagged with the range's first and last partition. The
re-run of 2 days compares their landing rows with what main holds and commits nothing (no audit
branch, no snapshot); when one of the days changed at the source, only that day is written.
The SQL layer's ``SET tablestore.commit-id`` is checked on its own at the end: an INSERT whose
commit id is already in the history commits nothing. One Spark session for the module.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.definitions import build_assets, build_checks, build_definitions
from pipelines.defs.ingest.assets import EVENTS_KEY
from pipelines.defs.ingest.landing import day_directory, write_landing_day
from pipelines.defs.resources import resources
from pipelines.settings import load_settings
from tablestore.table import Table

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
EMBEDDED = Path(__file__).resolve().parents[2] / "pipelines" / "config" / "embedded.yaml"


def settings_file(tmp_path: Path) -> str:
    """The embedded settings with 8 daily partitions before the evolution, and fewer events."""
    text = EMBEDDED.read_text()
    for old, new in (("days: 4 ", "days: 10 "), ("events-per-day: 1200", "events-per-day: 300"),
                     ("at: 2026-11-03", "at: 2026-11-08"), ("cutover: 2026-11-04", "cutover: 2026-11-09")):
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "settings.yaml"
    path.write_text(text)
    return str(path)


def metadata(result: dg.ExecuteInProcessResult, partitions: int) -> dict[str, object]:
    """The metadata of the events materialization: Dagster records it once per partition of the run."""
    events = [e.materialization for e in result.get_asset_materialization_events() if e.asset_key == EVENTS_KEY]
    assert len(events) == partitions
    assert len({e.partition for e in events}) == partitions
    return {k: getattr(v, "value", v) for k, v in events[0].metadata.items()}


def snapshot_ids(table: Table) -> list[int]:
    return [s.snapshot_id for s in table.refresh().snapshots()]


def rows(table: Table) -> list[tuple[int, float]]:
    data = table.scan(columns=["event_id", "price"]).to_arrow()
    return sorted(zip(data.column("event_id").to_pylist(), data.column("price").to_pylist(), strict=True))


def test_a_backfill_of_7_days_is_one_run_and_one_snapshot_and_a_rerun_of_2_changes_nothing(tmp_path: Path) -> None:
    file = settings_file(tmp_path)
    root = str(tmp_path / "root")
    settings = load_settings(file, root)
    days = [d.isoformat() for d in settings.daily_dates]
    assert len(days) == 8
    graph = build_definitions(file, root).resolve_asset_graph()
    # What makes a backfill of a range one run (on one Spark application): the asset's policy.
    assert graph.get(EVENTS_KEY).backfill_policy == dg.BackfillPolicy.single_run()
    for day in settings.daily_dates:
        write_landing_day(settings, day)
    res = resources(file, root)
    assets = [*build_assets(settings), *build_checks()]
    instance = dg.DagsterInstance.ephemeral()

    def run(first: str, last: str) -> dg.ExecuteInProcessResult:
        result = dg.materialize(assets, selection=[EVENTS_KEY], resources=res, instance=instance,
                                tags={RANGE_START: first, RANGE_END: last})
        assert result.success
        return result

    backfill = run(days[0], days[6])
    table = res["tablestore"].table("events")
    assert len(instance.get_runs()) == 1
    after_backfill = snapshot_ids(table)
    assert len(after_backfill) == 1  # the 7 days: one INSERT OVERWRITE, one snapshot
    head = table.current_snapshot()
    assert head is not None and int(head.summary["changed-partition-count"]) == 7
    backfilled = rows(table)
    assert len(backfilled) == 7 * settings.data.events_per_day
    first = metadata(backfill, 7)
    assert (first["action"], first["partitions_written"], first["snapshot_id"]) == ("overwritten", 7, head.snapshot_id)
    assert head.summary["tablestore.commit-id"] == first["commit_id"]

    # Re-running 2 of the days: their landing rows are what main holds, so nothing is written.
    rerun = metadata(run(days[2], days[3]), 2)
    assert (rerun["action"], rerun["partitions_written"], rerun["partitions_unchanged"]) == ("unchanged", 0, 2)
    assert rerun["snapshot_id"] == 0 and rerun["audit_branch"] == ""
    assert snapshot_ids(table) == after_backfill
    assert sorted(table.refs()) == ["main"]  # no audit branch was made either
    assert rows(table) == backfilled

    # The source sends one of the two days again with one price corrected: the re-run writes that
    # day only, in one snapshot; the other day's files stay as they were.
    path = day_directory(settings, settings.daily_dates[3]) / "part-00000.parquet"
    landed = pq.read_table(path)
    prices = landed.column("price").to_pylist()
    prices[0] = 999.5
    column = landed.schema.get_field_index("price")
    pq.write_table(landed.set_column(column, landed.schema.field("price"), pa.array(prices, pa.float32())),
                   path, compression="zstd")
    corrected = metadata(run(days[2], days[3]), 2)
    assert (corrected["action"], corrected["partitions_written"], corrected["partitions_unchanged"]) == (
        "overwritten", 1, 1)
    now = snapshot_ids(table)
    assert now[:-1] == after_backfill and len(now) == 2
    head = table.current_snapshot()
    assert head is not None and head.summary["changed-partition-count"] == "1"
    assert int(head.summary["added-records"]) == settings.data.events_per_day
    changed = rows(table)
    assert len(changed) == len(backfilled)
    assert sorted(set(changed) - set(backfilled)) == [(landed.column("event_id")[0].as_py(), 999.5)]


    # The SQL layer on its own: an INSERT whose commit id the history holds commits nothing.
    sql = res["tablestore"].sql(res["spark"].session())
    sql.execute_one("CREATE TABLE lakehouse.shop.commit_id_probe (id BIGINT)")
    probe = res["tablestore"].table("commit_id_probe")
    sql.execute_one("SET tablestore.commit-id = 'probe-1'")
    for _ in range(2):
        sql.execute_one("INSERT INTO lakehouse.shop.commit_id_probe VALUES (1), (2)")
    assert len(snapshot_ids(probe)) == 1
    sql.execute_one("SET tablestore.commit-id = 'probe-2'")
    sql.execute_one("INSERT INTO lakehouse.shop.commit_id_probe VALUES (3)")
    sql.execute_one("RESET tablestore.commit-id")
    sql.execute_one("INSERT INTO lakehouse.shop.commit_id_probe VALUES (4)")
    assert len(snapshot_ids(probe)) == 3
    assert sorted(probe.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4]
    summaries = [s.summary for s in probe.snapshots()]
    assert [s.get("tablestore.commit-id") for s in summaries] == ["probe-1", "probe-2", None]
    assert all("tablestore.write-id" in s for s in summaries)
