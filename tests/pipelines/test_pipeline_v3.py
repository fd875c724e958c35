"""The pipeline with ``events`` in format v3 (settings ``events: {format-version: 3}``), one run.

The embedded settings with that one key added: ``events`` is created as v3, the schema
evolution adds ``source_system STRING NOT NULL DEFAULT 'landing'`` to a table with rows
(metadata only), later ingests leave the column out and get the write default, and the GDPR
erasure's merge-on-read DELETE writes deletion vectors (which needs the deletion vector
writer; without it the erasure step fails, refusing position deletes on v3). The shipped settings stay on v2 (the
stack's Trino 476 does not read deletion vectors), which test_pipeline_e2e.py covers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipelines.defs.erasure.assets import ERASURE_KEY
from pipelines.defs.resources import resources
from pipelines.drive import drive
from pipelines.settings import CONFIG_DIR, load_settings
from tablestore.errors import ConfigError

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(1800)]


def test_the_shipped_settings_keep_events_on_v2_and_a_bad_version_is_refused(tmp_path: Path) -> None:
    assert load_settings(CONFIG_DIR / "embedded.yaml", root=str(tmp_path)).events.format_version == 2
    # The stack's file needs the stack's environment to load; it sets no format version either.
    assert yaml.safe_load((CONFIG_DIR / "stack.yaml").read_text()).get("events") is None
    doc = yaml.safe_load((CONFIG_DIR / "embedded.yaml").read_text())
    doc["events"] = {"format-version": 4}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match="events.format-version must be 2 or 3, got 4"):
        load_settings(bad, root=str(tmp_path))


def test_one_run_on_v3_adds_a_not_null_default_column_and_erases_the_requested_users(tmp_path: Path) -> None:
    doc = yaml.safe_load((CONFIG_DIR / "embedded.yaml").read_text())
    doc["events"] = {"format-version": 3}
    settings_file = tmp_path / "v3.yaml"
    settings_file.write_text(yaml.safe_dump(doc))
    root = tmp_path / "lake"
    run = drive(str(settings_file), str(root))
    assert {s.label: s.error for s in run.steps if not s.success} == {}
    assert {c.name: c.passed for c in run.checks if not c.passed} == {}

    table = resources(str(settings_file), str(root))["tablestore"].table("events")
    assert table.metadata.format_version == 3
    column = table.schema().find_field("source_system")
    assert (column.required, column.initial_default, column.write_default) == (True, "landing", "landing")
    rows = table.scan(columns=["event_id", "source_system"]).to_arrow()
    assert rows.num_rows > 0 and set(rows.column("source_system").to_pylist()) == {"landing"}

    erasure = run.metadata(ERASURE_KEY)
    assert erasure["verified"] is True
    settings = load_settings(settings_file, root=str(root))
    erased = set(settings.erasure.requested_users)
    assert erased.isdisjoint(table.scan(columns=["user_id"]).to_arrow().column("user_id").to_pylist())
    # The erasure's DELETE is merge-on-read: on v3 that needs deletion vectors (helper wt-dv's
    # work); without them it fails, refusing position delete files in a v3 table.
    assert isinstance(erasure["rows_deleted"], dict) and erasure["rows_deleted"]["events"] > 0
