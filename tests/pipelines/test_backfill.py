"""A backfill of 7 days, launched as the UI launches one, is one run on Spark and one snapshot;
a second backfill of 2 of those days changes nothing.

The backfill goes through Dagster itself: the GraphQL mutation ``launchPartitionBackfill`` (what
the UI's launch dialog sends) against the code location loaded as the daemon loads it, on a
persistent instance in a temporary DAGSTER_HOME; then the daemon's backfill loop
(``execute_backfill_iteration``) turns it into runs and, once they finished, completes it. The
instance launches runs in the test's process (``SyncInMemoryRunLauncher``): the run is the same
run Dagster plans for the backfill, executed without a second Python process, so one Spark
session serves the whole module. ``BackfillPolicy.single_run()`` on ``events`` is what makes the
7 days one run (tagged with the range's first and last partition), one Spark job and one
``INSERT OVERWRITE``. The second backfill compares the 2 days' landing rows with what main holds
and commits nothing (no audit branch, no snapshot); a third, after one day changed at the source,
writes that day only. The SQL layer's ``SET tablestore.commit-id`` is checked on its own at the
end: an INSERT whose commit id is already in the history commits nothing.
"""

from __future__ import annotations

import logging
import re
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster._core.execution.backfill import BulkActionStatus
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.storage.dagster_run import DagsterRunStatus
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._daemon.backfill import execute_backfill_iteration
from dagster_graphql.test.utils import execute_dagster_graphql

from pipelines.definitions import build_definitions
from pipelines.defs.ingest.assets import EVENTS_KEY
from pipelines.defs.ingest.landing import day_directory, write_landing_day
from pipelines.defs.ingest.sensors import RANGE_END, RANGE_START
from pipelines.defs.resources import resources
from pipelines.settings import PipelineSettings, load_settings
from tablestore.table import Table

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

EMBEDDED = Path(__file__).resolve().parents[2] / "pipelines" / "config" / "embedded.yaml"
# Runs start as soon as the backfill daemon submits them, in the daemon's own process.
INSTANCE = ("run_coordinator:\n  module: dagster._core.run_coordinator\n  class: DefaultRunCoordinator\n"
            "run_launcher:\n  module: dagster._core.launcher.sync_in_memory_run_launcher\n"
            "  class: SyncInMemoryRunLauncher\n")
LAUNCH_BACKFILL = """
mutation LaunchPartitionBackfill($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message stack }
    ... on InvalidSubsetError { message }
    ... on UnauthorizedError { message }
  }
}"""


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


@contextmanager
def daemon(home: Path) -> Iterator[tuple[dg.DagsterInstance, WorkspaceProcessContext]]:
    """The instance over ``home`` and the code location, as the daemon and the webserver load them."""
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name="pipelines.definitions", attribute="defs"), location_name="pipelines")
    with dg.DagsterInstance.from_config(str(home)) as instance, \
            WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget(origin)) as workspace:
        yield instance, workspace


def backfill(home: Path, days: list[str]) -> tuple[Any, list[Any]]:
    """Launch a backfill of ``days`` of ``events`` as the UI does, and run the backfill daemon's
    loop until Dagster marks it finished: (the backfill, its runs)."""
    with daemon(home) as (instance, workspace):
        answer = execute_dagster_graphql(workspace.create_request_context(), LAUNCH_BACKFILL, {"params": {
            "assetSelection": [{"path": EVENTS_KEY.path}], "partitionNames": days}})
        assert answer.errors is None, answer.errors
        launched = answer.data["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched
        backfill_id = launched["backfillId"]
        done = None
        for _ in range(5):  # one pass submits the run (and runs it here), the next completes the backfill
            errors = [e for e in execute_backfill_iteration(workspace, logging.getLogger("backfill-test")) if e]
            assert errors == [], errors
            done = instance.get_backfill(backfill_id)
            assert done is not None
            if done.status != BulkActionStatus.REQUESTED:
                break
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
        failures = [str(e.dagster_event.event_specific_data)[:3000] for r in runs for e in instance.all_logs(r.run_id)
                    if e.dagster_event is not None and e.dagster_event.is_step_failure]
        assert done is not None and done.status == BulkActionStatus.COMPLETED_SUCCESS, (done, failures)
        return done, list(runs)


def events_metadata(instance: dg.DagsterInstance, run_id: str, partitions: int) -> dict[str, object]:
    """The metadata of the run's events materialization: Dagster records it once per partition."""
    events = [e.asset_materialization for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)]
    mine = [m for m in events if m is not None and m.asset_key == EVENTS_KEY]
    assert len({m.partition for m in mine}) == len(mine) == partitions
    return {k: getattr(v, "value", v) for k, v in mine[0].metadata.items()}


def check_evaluation(instance: dg.DagsterInstance, run_id: str) -> Any:
    """The run's one evaluation of the batch check of ``events``."""
    (entry,) = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    assert entry.dagster_event is not None
    return entry.dagster_event.event_specific_data


def page_text(path: Path) -> str:
    """The text a reader sees on an HTML page (no markup, scripts or styles)."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", path.read_text(), flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def snapshot_ids(table: Table) -> list[int]:
    return [s.snapshot_id for s in table.refresh().snapshots()]


def rows(table: Table) -> list[tuple[int, float]]:
    data = table.scan(columns=["event_id", "price"]).to_arrow()
    return sorted(zip(data.column("event_id").to_pylist(), data.column("price").to_pylist(), strict=True))


@pytest.fixture
def lakehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[PipelineSettings, str, Path]:
    # The code location reads its settings from the environment, as under the daemon.
    file = settings_file(tmp_path)
    monkeypatch.setenv("LAKEHOUSE_SETTINGS", file)
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(tmp_path / "root"))
    home = tmp_path / "dagster-home"
    home.mkdir()
    (home / "dagster.yaml").write_text(INSTANCE)
    return load_settings(file, str(tmp_path / "root")), file, home


@pytest.mark.timeout(900)
def test_a_backfill_of_7_days_is_one_run_and_one_snapshot_and_a_backfill_of_2_of_them_changes_nothing(
        lakehouse: tuple[PipelineSettings, str, Path]) -> None:
    settings, file, home = lakehouse
    root = str(settings.root)
    days = [d.isoformat() for d in settings.daily_dates]
    assert len(days) == 8
    # What makes a backfill of a range one run (on one Spark application): the asset's policy.
    graph = build_definitions(file, root).resolve_asset_graph()
    assert graph.get(EVENTS_KEY).backfill_policy == dg.BackfillPolicy.single_run()
    for day in settings.daily_dates:
        write_landing_day(settings, day)
    store = resources(file, root)["tablestore"]

    first, runs = backfill(home, days[:7])
    assert first.status == BulkActionStatus.COMPLETED_SUCCESS
    (run,) = runs  # the 7 days: one run
    assert run.status == DagsterRunStatus.SUCCESS
    assert (run.tags[RANGE_START], run.tags[RANGE_END]) == (days[0], days[6])
    assert list(run.asset_selection or ()) == [EVENTS_KEY]
    table = store.table("events")
    after_backfill = snapshot_ids(table)
    assert len(after_backfill) == 1  # one INSERT OVERWRITE, one snapshot
    head = table.current_snapshot()
    assert head is not None and int(head.summary["changed-partition-count"]) == 7
    backfilled = rows(table)
    assert len(backfilled) == 7 * settings.data.events_per_day
    with dg.DagsterInstance.from_config(str(home)) as instance:
        written = events_metadata(instance, run.run_id, 7)
    assert (written["action"], written["partitions_written"], written["snapshot_id"]) == (
        "overwritten", 7, head.snapshot_id)
    assert head.summary["tablestore.commit-id"] == written["commit_id"]
    # Spark tasks wrote the files, not the run's process.
    assert int(str(written["write_tasks"])) >= 1

    # The batch check's GX validation built its Data Docs page, and the check's result links to it.
    with dg.DagsterInstance.from_config(str(home)) as instance:
        checked = check_evaluation(instance, run.run_id)
    assert (checked.check_name, checked.passed) == ("events_batch_valid", True)
    link = checked.metadata["data_docs"]
    assert isinstance(link, dg.UrlMetadataValue) and (link.url or "").startswith("file://")
    page = Path(urllib.parse.unquote(urllib.parse.urlparse(link.url or "").path))
    assert page.is_file() and page.is_relative_to(settings.data_docs.site / "validations" / "events_batch_valid")
    text = page_text(page)
    assert re.search(r"Expectation Suite: events_batch_valid .{0,80}Status: Succeeded", text), text[:2000]
    assert "Evaluated Expectations 7 Successful Expectations 7 Unsuccessful Expectations 0" in text, text[:2000]

    # A second backfill of 2 of the days: their landing rows are what main holds, nothing is written.
    second, (rerun,) = backfill(home, days[2:4])
    assert second.status == BulkActionStatus.COMPLETED_SUCCESS
    assert (rerun.tags[RANGE_START], rerun.tags[RANGE_END]) == (days[2], days[3])
    with dg.DagsterInstance.from_config(str(home)) as instance:
        unchanged = events_metadata(instance, rerun.run_id, 2)
    assert (unchanged["action"], unchanged["partitions_written"], unchanged["partitions_unchanged"]) == (
        "unchanged", 0, 2)
    assert unchanged["snapshot_id"] == 0 and unchanged["audit_branch"] == ""
    assert snapshot_ids(table) == after_backfill
    assert sorted(table.refs()) == ["main"]  # no audit branch was made either
    assert rows(table) == backfilled

    # The source sends one of the two days again with one price corrected: the same backfill
    # writes that day only, in one snapshot; the other day's files stay as they were.
    path = day_directory(settings, settings.daily_dates[3]) / "part-00000.parquet"
    landed = pq.read_table(path)
    prices = landed.column("price").to_pylist()
    prices[0] = 999.5
    column = landed.schema.get_field_index("price")
    pq.write_table(landed.set_column(column, landed.schema.field("price"), pa.array(prices, pa.float32())),
                   path, compression="zstd")
    third, (corrected_run,) = backfill(home, days[2:4])
    assert third.status == BulkActionStatus.COMPLETED_SUCCESS
    with dg.DagsterInstance.from_config(str(home)) as instance:
        corrected = events_metadata(instance, corrected_run.run_id, 2)
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
    # Each run's check added its page to the site; the first run's page, which its result links to, stays.
    assert page.is_file()
    assert len(list((settings.data_docs.site / "validations" / "events_batch_valid").rglob("*.html"))) == 3

    # The SQL layer on its own: an INSERT whose commit id the history holds commits nothing.
    res = resources(file, root)
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
