"""Retention of events: partitions older than N days are dropped in metadata only; off by default."""

from __future__ import annotations

import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from pipelines.definitions import build_definitions
from pipelines.defs.ingest.retention import RETENTION_KEY, apply_retention
from pipelines.drive import materialize
from pipelines.settings import CONFIG_DIR, load_settings
from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.errors import ConfigError
from tablestore.table import Table

SCHEMA = pa.schema([("event_id", pa.int64()), ("event_ts", pa.timestamp("us"))])


def _events(catalog: SqlCatalog) -> Table:
    """Days 1-3 under the day spec, then hours of day 4 under the hour spec."""
    catalog.create_namespace("shop")
    table = catalog.create_table("shop.events", schema=SCHEMA, partition_by=["days(event_ts)"])
    ts = [datetime.datetime(2026, 11, d, h) for d in (1, 2, 3) for h in (0, 12)]
    table.append(pa.table({"event_id": list(range(len(ts))), "event_ts": ts}, schema=SCHEMA))
    with table.update_spec() as update:
        update.replace_field("days(event_ts)", "hours(event_ts)")
    hours = [datetime.datetime(2026, 11, 4, h) for h in (0, 1, 5)]
    table.append(pa.table({"event_id": [100, 101, 102], "event_ts": hours}, schema=SCHEMA))
    return table


def test_retention_drops_whole_old_partitions_of_both_specs_in_metadata_only(tmp_path: Path) -> None:
    catalog = SqlCatalog("lakehouse", uri=f"sqlite:///{tmp_path}/c.db", warehouse=str(tmp_path / "wh"))
    table = _events(catalog)
    files_before = {f["file_path"] for f in table.inspect.data_files().to_pylist()}

    result = apply_retention(table, datetime.datetime(2026, 11, 4, 1))

    assert result.dropped == ["event_ts_day=2026-11-01", "event_ts_day=2026-11-02", "event_ts_day=2026-11-03",
                              "event_ts_hour=2026-11-04-00"]
    assert (result.deleted_rows, result.files_removed, result.files_rewritten) == (7, 4, 0)
    table.refresh()
    current = table.current_snapshot()
    assert current is not None
    summary = current.summary
    assert summary["deleted-data-files"] == "4" and "added-data-files" not in summary
    assert summary["retention"] == "true"
    # Metadata only: the files left are files that were there before, none written.
    assert {f["file_path"] for f in table.inspect.data_files().to_pylist()} < files_before
    assert sorted(table.scan().to_arrow().column("event_id").to_pylist()) == [101, 102]
    # Nothing older is left: a second pass drops nothing and commits nothing.
    snapshot = table.current_snapshot()
    assert apply_retention(table, datetime.datetime(2026, 11, 4, 1)).dropped == []
    assert table.refresh().current_snapshot() == snapshot


def test_retention_is_off_by_default_and_the_asset_commits_nothing(tmp_path: Path) -> None:
    settings = load_settings(root=str(tmp_path))
    assert settings.retention.days is None
    result = materialize(build_definitions(root=str(tmp_path)), [RETENTION_KEY])
    (event,) = result.get_asset_materialization_events()
    assert event.materialization.metadata["retention"].value == "off (set retention.days to enable)"


def test_retention_days_must_be_a_positive_whole_number(tmp_path: Path) -> None:
    text = (CONFIG_DIR / "embedded.yaml").read_text()
    good = tmp_path / "good.yaml"
    good.write_text(text + "retention:\n  days: 2\n")
    assert load_settings(good, root=tmp_path).retention.days == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text(text + "retention:\n  days: -1\n")
    with pytest.raises(ConfigError, match=r"retention.days must be a whole number of days >= 1, got -1"):
        load_settings(bad, root=tmp_path)
