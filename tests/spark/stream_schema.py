"""The input rows of the streaming tests (shared by the test module and its subprocess job)."""

from __future__ import annotations

INPUT_SCHEMA = "id BIGINT, grp STRING, payload STRING"
