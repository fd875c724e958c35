"""Iceberg's own REST Compatibility Kit (1.11.0) against ``tablestore catalog serve``.

The kit (``RESTCompatibilityKitSuite``: Java's ``CatalogTests`` and ``ViewCatalogTests`` through
``RESTCatalog``) runs as an operator would run it: a started service on SQLite and on PostgreSQL,
a bearer token, ``allow-external-locations`` (the kit makes tables under its own ``file:/tmp``
paths), the names-with-dots option on and namespaces created before tables (the SQL catalog's
rule). Its jars come from Maven Central (``infra/iceberg_rck.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from infra import iceberg_rck
from tests.rest.conftest import CATALOG, WRITE_TOKEN, RestService, write_config

# Kit tests known to fail, each with why; an entry that no failure needs fails the test, so the
# list only shrinks. It is empty: the kit passes completely.
KNOWN_FAILURES: dict[str, str] = {}


def _failures(reports: Path) -> tuple[int, set[str]]:
    """The number of tests the kit ran and the names of those that failed or errored."""
    tests, failed = 0, set()
    for report in reports.glob("TEST-*.xml"):
        suite = ET.parse(report).getroot()
        tests += int(suite.get("tests", "0"))
        for case in suite.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed.add(case.get("name", "?"))
    return tests, failed


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
@pytest.mark.timeout(1800)
def test_the_rest_compatibility_kit_passes(request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> None:
    lib = iceberg_rck.install()
    if kind == "sqlite":
        catalog_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    else:
        catalog_uri = request.getfixturevalue("postgres_server").create_database()
    warehouse = str(tmp_path / "warehouse")
    config = tmp_path / "tablestore.yaml"
    write_config(config, catalog_uri, warehouse, server_extra={"allow-external-locations": "true"})
    service = RestService(config, catalog_uri, warehouse, tmp_path)
    service.start()
    reports = tmp_path / "reports"
    try:
        env = {
            **os.environ,
            "CATALOG_URI": service.uri,
            "CATALOG_WAREHOUSE": CATALOG,
            "CATALOG_TOKEN": WRITE_TOKEN,
            "CATALOG_RCK_SUPPORTS__NAMES__WITH__DOT": "true",
            "CATALOG_RCK_REQUIRES__NAMESPACE__CREATE": "true",
        }
        java = shutil.which("java")
        assert java is not None, "the kit needs a Java runtime (17 or later) on PATH"
        done = subprocess.run(iceberg_rck.command(java, lib, reports), env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=1700)
    finally:
        service.stop()
    tests, failed = _failures(reports)
    summary = "\n".join(line for line in done.stdout.splitlines() if line.startswith("[")) or done.stdout[-3000:]
    assert tests == 157, summary
    unexpected = failed - KNOWN_FAILURES.keys()
    assert not unexpected, f"kit tests failed: {sorted(unexpected)}\n{summary}\n{done.stdout[-6000:]}"
    fixed = KNOWN_FAILURES.keys() - failed
    assert not fixed, f"these kit tests pass now; take them out of KNOWN_FAILURES: {sorted(fixed)}"
