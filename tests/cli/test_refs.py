"""`tablestore table refs|branch|tag|rollback|fast-forward` as a user runs them: a real process,
JSON output, and refusals that exit non-zero with one line and commit nothing."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from tablestore.catalog_manager import CatalogManager
from tablestore.config import load_config
from tablestore.table import Table
from tests.cli.test_cli import config, json_lines, run

__all__ = ["config"]


@pytest.fixture
def table(config: Path) -> Table:
    """``shop.t`` with three snapshots of one row each (ids 1, 2, 3)."""
    manager = CatalogManager(load_config(str(config)))
    catalog = manager.catalog()
    catalog.create_namespace("shop")
    created = catalog.create_table("shop.t", pa.schema([pa.field("id", pa.int64())]))
    for i in (1, 2, 3):
        created.append(pa.table({"id": pa.array([i], pa.int64())}))
    return created


def one(out: str) -> dict:
    lines = json_lines(out)
    assert len(lines) == 1
    return lines[0]


def test_branch_tag_and_refs(config: Path, table: Table) -> None:
    s1, s2, s3 = (s.snapshot_id for s in table.snapshots())
    found = one(run(["table", "branch", "shop.t", "audit", "--min-snapshots-to-keep", "2", "--format", "json"],
                    config).stdout)
    assert found == {"columns": ["name", "type", "snapshot_id", "max_reference_age_in_ms", "min_snapshots_to_keep",
                                 "max_snapshot_age_in_ms"], "rows": [["audit", "BRANCH", s3, None, 2, None]]}
    found = one(run(["table", "tag", "shop.t", "v1", "--snapshot-id", str(s1), "--max-ref-age-ms", "1000",
                     "--format", "json"], config).stdout)
    assert found["rows"] == [["v1", "TAG", s1, 1000, None, None]]
    found = one(run(["table", "tag", "shop.t", "v1", "--replace", "--snapshot-id", str(s2), "--format", "json"],
                    config).stdout)
    assert found["rows"] == [["v1", "TAG", s2, 1000, None, None]]
    refs = one(run(["table", "refs", "shop.t", "--format", "json"], config).stdout)
    assert sorted(r[0] for r in refs["rows"]) == ["audit", "main", "v1"]
    done = run(["table", "branch", "shop.t", "v1"], config, check=False)
    assert done.returncode == 1
    assert done.stderr.strip() == "error: cannot create branch 'v1': a tag named 'v1' already exists; replace it " \
                                  "or choose another name"
    found = one(run(["table", "tag", "shop.t", "v1", "--drop", "--format", "json"], config).stdout)
    assert found["rows"] == [["v1", "TAG", True]]
    assert sorted(table.refresh().refs()) == ["audit", "main"]


def test_rollback_and_fast_forward(config: Path, table: Table) -> None:
    s1, _s2, s3 = (s.snapshot_id for s in table.snapshots())
    run(["table", "branch", "shop.t", "audit"], config)
    found = one(run(["table", "rollback", "shop.t", "--snapshot-id", str(s1), "--format", "json"], config).stdout)
    assert found == {"columns": ["previous_snapshot_id", "current_snapshot_id"], "rows": [[s3, s1]]}
    found = one(run(["table", "fast-forward", "shop.t", "main", "--to", "audit", "--format", "json"],
                    config).stdout)
    assert found == {"columns": ["branch_updated", "previous_ref", "updated_ref"], "rows": [["main", s1, s3]]}
    before = table.refresh().metadata_location
    done = run(["table", "rollback", "shop.t", "--snapshot-id", "42"], config, check=False)
    assert done.returncode == 1 and "the table has no snapshot 42" in done.stderr
    done = run(["table", "rollback", "shop.t"], config, check=False)
    assert done.returncode == 1 and "rollback takes --snapshot-id or --timestamp, exactly one" in done.stderr
    assert table.refresh().metadata_location == before
