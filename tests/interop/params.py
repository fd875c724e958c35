"""Test parameters shared by the reader suites: warehouse kinds and fixture names."""

from __future__ import annotations

from typing import Any

import pytest

from tests.interop.fixture_tables import FIXTURE_NAMES
from tests.interop.readers import S3Access
from tests.services import S3Server

KINDS = ["path", "file", pytest.param("s3", marks=pytest.mark.s3)]
LOCAL_KINDS = ["path", "file"]
FIXTURES = FIXTURE_NAMES

# Java's results: (warehouse kind, fixture, snapshot id) -> the oracle's JSON result.
JavaReads = dict[tuple[str, str, int], dict[str, Any]]


def s3_access(request: pytest.FixtureRequest, kind: str) -> S3Access | None:
    """How a reader reaches the loopback S3 server, for the ``s3`` warehouse only."""
    if kind != "s3":
        return None
    server: S3Server = request.getfixturevalue("s3_server")
    return S3Access(server.endpoint, server.access_key, server.secret_key, server.region)
