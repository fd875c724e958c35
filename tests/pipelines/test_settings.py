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
