"""The REST catalog service, started for real: ``tablestore catalog serve`` in a subprocess.

``rest_service`` is the service over a SQLite catalog database; a module whose behaviour depends
on the database (commits, transactions, idempotency keys kept in it, the fuzz that found
PostgreSQL refusing a NUL) opts in to PostgreSQL too with ``ON_BOTH_DATABASES``. It has a write
token, a read-only token and client credentials.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.services import (
    CATALOG,
    CLIENT_ID,
    CLIENT_SECRET,
    READ_TOKEN,
    WRITE_TOKEN,
    RestService,
    write_config,
)

__all__ = ["CATALOG", "CLIENT_ID", "CLIENT_SECRET", "READ_TOKEN", "WRITE_TOKEN", "RestService", "start_service",
           "write_config"]


def start_service(request: pytest.FixtureRequest, kind: str, workdir: Path, s3: bool = False) -> RestService:
    """A started service over a ``kind`` (sqlite or postgres) catalog database, its warehouse in
    ``workdir`` (or with ``s3`` in a bucket of the loopback S3 server)."""
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
# The service's code is the same over either database; only what the database does differs (its
# transactions, locks and types). Auth, routes, clients and protocol checks run on SQLite alone.
ON_BOTH_DATABASES = pytest.mark.parametrize("rest_service", BACKENDS, indirect=True)


def _session_service(request: pytest.FixtureRequest, kind: str,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestService]:
    service = start_service(request, kind, tmp_path_factory.mktemp(f"rest-{kind}"))
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="session")
def rest_service_sqlite(request: pytest.FixtureRequest,
                        tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestService]:
    yield from _session_service(request, "sqlite", tmp_path_factory)


@pytest.fixture(scope="session")
def rest_service_postgres(request: pytest.FixtureRequest,
                          tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestService]:
    yield from _session_service(request, "postgres", tmp_path_factory)


@pytest.fixture(scope="module", params=["sqlite"])
def rest_service(request: pytest.FixtureRequest) -> RestService:
    """One service per backend for the whole session, started when a module first asks for it
    (it was one per module and backend: 22 starts); SQLite unless the module opts in to both
    (``ON_BOTH_DATABASES``). Tests use namespaces of their own, and what they read back from the
    log is their own requests'. Tests that kill, restart or reconfigure a service take
    ``fresh_rest_service`` or start their own."""
    service: RestService = request.getfixturevalue(f"rest_service_{request.param}")
    return service


@pytest.fixture(params=BACKENDS)
def fresh_rest_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RestService]:
    """A service of the test's own, for tests that kill or restart it."""
    service = start_service(request, request.param, tmp_path)
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture
def s3_rest_service(served_catalog_s3: RestService) -> Iterator[RestService]:
    """A service whose warehouse is in S3 (MinIO); its s3 settings are only in the server's config.
    The session's (``tests/conftest.py``, the catalog matrix's ``rest-s3`` leg): it was one start
    per test, and no test changes its configuration. Emptied after the test."""
    try:
        yield served_catalog_s3
    finally:
        served_catalog_s3.reset()
