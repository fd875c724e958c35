"""The pipeline's settings file: its errors come from the configuration's one formatter."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.settings import CONFIG_DIR, load_settings
from tablestore.errors import ConfigError


@pytest.mark.parametrize(("change", "message"), [
    ("data: 5\n", "'data' must be a mapping (start, days, events-per-day, users, seed), got 5"),
    ("data:\n  start: 2026-11-01\n", "data.days is missing"),
])
def test_a_top_level_key_is_quoted_as_in_the_configuration(tmp_path: Path, change: str, message: str) -> None:
    text = (CONFIG_DIR / "embedded.yaml").read_text()
    start = text.index("data:\n")
    end = text.index("evolution:")
    path = tmp_path / "settings.yaml"
    path.write_text(text[:start] + change + text[end:])
    with pytest.raises(ConfigError) as info:
        load_settings(path, root=tmp_path)
    assert str(info.value) == f"{path}: {message}"


@pytest.mark.parametrize(("section", "message"), [
    ("changes:\n  in-process: {max-rowz: 5}\n",
     "unknown key 'changes.in-process.max-rowz' (did you mean 'max-rows'?); expected one of max-files, max-rows, "
     "max-scan-rows"),
    ("changes:\n  in-process: {max-files: -1}\n", "changes.in-process.max-files must be at least 0"),
])
def test_the_in_process_bounds_are_checked_as_written(tmp_path: Path, section: str, message: str) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text((CONFIG_DIR / "embedded.yaml").read_text() + section)
    with pytest.raises(ConfigError) as info:
        load_settings(path, root=tmp_path)
    assert str(info.value) == f"{path}: {message}"


def test_the_in_process_bounds_default_and_read_from_the_file(tmp_path: Path) -> None:
    bounds = load_settings(CONFIG_DIR / "embedded.yaml", root=tmp_path).changes.in_process
    assert (bounds.max_files, bounds.max_rows, bounds.max_scan_rows) == (32, 100_000, 2_000_000)
    path = tmp_path / "settings.yaml"
    path.write_text((CONFIG_DIR / "embedded.yaml").read_text() + "changes:\n  in-process: {max-rows: 0}\n")
    bounds = load_settings(path, root=tmp_path).changes.in_process
    assert (bounds.max_files, bounds.max_rows, bounds.max_scan_rows) == (32, 0, 2_000_000)


def test_the_tablestore_section_is_a_configuration_read_in_place(tmp_path: Path) -> None:
    # Its relative paths resolve against root, and its errors name their key in the settings file.
    settings = load_settings(CONFIG_DIR / "embedded.yaml", root=tmp_path)
    assert settings.tablestore.catalogs["lakehouse"].properties["warehouse"] == str(tmp_path / "warehouse")
    assert settings.data_docs.site == tmp_path / "data_docs"
    path = tmp_path / "settings.yaml"
    path.write_text((CONFIG_DIR / "embedded.yaml").read_text().replace(
        "      default-database: shop\n", "      default-database: shop\n      s3: [1]\n"))
    with pytest.raises(ConfigError) as info:
        load_settings(path, root=tmp_path)
    assert str(info.value) == (f"{path}: tablestore.catalogs[0].s3 must be a mapping (endpoint, access-key-id, ...), "
                               "got [1]")
