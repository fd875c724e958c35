"""The REST catalog service, started for real: ``tablestore catalog serve`` in a subprocess.

``rest_service`` is parametrized over the catalog database (SQLite, and PostgreSQL started by
the suite); it has a write token, a read-only token and client credentials.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from infra.local.processes import die_with_parent, free_port, stop_process

WRITE_TOKEN = "write-token-0123456789abcdef"
READ_TOKEN = "read-token-0123456789abcdef"
CLIENT_ID = "etl"
CLIENT_SECRET = "etl-secret-0123456789"
CATALOG = "lake"


@dataclass
class RestService:
    """A catalog service process; ``restart()`` starts it again on the same port and database."""

    config_path: Path
    catalog_uri: str
    warehouse: str
    workdir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> None:
        log = open(self.workdir / "server.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tablestore.cli", "catalog", "serve", "--config", str(self.config_path),
                 "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent, cwd=self.workdir,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout_s
        request = urllib.request.Request(f"{self.uri}/v1/config", headers={"Authorization": f"Bearer {READ_TOKEN}"})
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the catalog service exited:\n{self.log()}")
            try:
                with urllib.request.urlopen(request, timeout=2):
                    return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the catalog service did not answer:\n{self.log()}")
            time.sleep(0.2)

    def log(self) -> str:
        return (self.workdir / "server.log").read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no cleanup, no flush, as a crash."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)

    s3_properties: dict[str, str] = field(default_factory=dict)

    def direct_properties(self) -> dict[str, str]:
        """Properties of a SqlCatalog on the same database and warehouse."""
        return {"uri": self.catalog_uri, "warehouse": self.warehouse, **self.s3_properties}

    def pyiceberg(self, token: str = WRITE_TOKEN) -> Any:
        from pyiceberg.catalog.rest import RestCatalog as PyRestCatalog

        return PyRestCatalog("rest", uri=self.uri, token=token)

    def client(self, token: str = WRITE_TOKEN) -> Any:
        from tablestore.catalog.rest import RestCatalog

        return RestCatalog("rest", uri=self.uri, token=token)


def write_config(path: Path, catalog_uri: str, warehouse: str, s3: dict[str, str] | None = None) -> None:
    s3_lines = "".join(f'      {k.removeprefix("s3.")}: "{v}"\n' for k, v in (s3 or {}).items())
    path.write_text(f"""
catalogs:
  - name: {CATALOG}
    type: sql
    uri: "{catalog_uri}"
    warehouse: "{warehouse}"
{"    s3:" + chr(10) + s3_lines if s3 else ""}
server:
  tokens:
    - name: writer
      token: {WRITE_TOKEN}
      role: write
    - name: reader
      token: {READ_TOKEN}
      roles: {{{CATALOG}: read}}
  clients:
    - client-id: {CLIENT_ID}
      client-secret: {CLIENT_SECRET}
      role: write
  token-secret: test-signing-secret
""")


def _start_service(request: pytest.FixtureRequest, kind: str, workdir: Path, s3: bool = False) -> RestService:
    if kind == "sqlite":
        catalog_uri = f"sqlite:///{workdir / 'catalog.db'}"
    else:
        catalog_uri = request.getfixturevalue("postgres_server").create_database()
    warehouse = str(workdir / "warehouse")
    s3_properties = None
    if s3:
        server = request.getfixturevalue("s3_server")
        warehouse = f"s3://{server.create_bucket()}/warehouse"
        s3_properties = server.properties
    config = workdir / "tablestore.yaml"
    write_config(config, catalog_uri, warehouse, s3_properties)
    service = RestService(config, catalog_uri, warehouse, workdir, s3_properties=s3_properties or {})
    service.start()
    return service


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="module", params=BACKENDS)
def rest_service(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestService]:
    """One service per test module and backend (tests use their own namespaces)."""
    service = _start_service(request, request.param, tmp_path_factory.mktemp("rest"))
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(params=BACKENDS)
def fresh_rest_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RestService]:
    """A service of the test's own, for tests that kill or restart it."""
    service = _start_service(request, request.param, tmp_path)
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture
def s3_rest_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RestService]:
    """A service whose warehouse is in S3 (moto); its s3 settings are only in the server's config."""
    service = _start_service(request, "sqlite", tmp_path, s3=True)
    try:
        yield service
    finally:
        service.stop()
