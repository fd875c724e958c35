"""Shared fixtures: real services (MinIO, PostgreSQL) and catalogs on every storage/database.

- ``s3_server`` (session): MinIO built from source (infra/images/minio.py) on loopback; ``.endpoint``, ``.access_key``, ``.secret_key``,
  ``.properties`` (FileIO/catalog properties), ``.create_bucket()``, ``.client()`` (boto3).
- ``postgres_server`` (session) and ``postgres_uri``: a SQLAlchemy URI of a fresh database.
- ``trino`` (session): Trino 476 on loopback (tests/trino.py) with no catalog; a module adds its
  own with ``trino.create_catalog(name, properties)`` and drops them when done.
- ``warehouse``: parametrized over ``local`` and ``s3`` (marker ``s3``); a :class:`Warehouse`
  with ``.location`` and ``.properties``.
- ``catalog_uri``: parametrized over ``sqlite`` and ``postgres`` (marker ``postgres``).
- ``catalog``: a ``SqlCatalog`` with a fresh name and database on every ``warehouse`` and ``catalog_uri``;
  ``SQL_CATALOG_LEGS`` takes each database on local disk and SQLite on S3 (3 legs, not 4).
- ``catalog_target``: a :class:`CatalogTarget`, by default ``sqlite``. A test whose behaviour
  depends on the catalog opts in to more legs: ``ON_THE_CATALOG_MATRIX`` (``sqlite``,
  ``postgres`` (marker ``postgres``) and ``rest``, the REST catalog service started for real on
  loopback (``served_catalog``, once per session, backed by its own SQLite catalog) and reached
  by a ``type: rest`` client), ``OVER_REST`` (``sqlite`` and ``rest``), ``ON_EVERY_STORAGE``
  (``sqlite`` on local disk and on S3) or ``ON_EVERY_CATALOG_AND_STORAGE`` (the three on both).
  ``tests/table/conftest.py`` and ``tests/maintenance/conftest.py`` open their ``catalog`` and
  ``db_catalog`` from it.
- ``catalog_service`` (module): that same session service for a module that needs a catalog
  service with the default configuration (tokens, client credentials, a local warehouse), emptied
  when the module is done.

Services start only when a selected test needs them (``-m "not s3 and not postgres"`` needs
neither) and stop at the end of the session, also when tests fail.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.budget import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401 (hooks: the time budget)
from tests.services import (
    WRITE_TOKEN,
    PostgresServer,
    RestService,
    S3Server,
    start_postgres,
    start_s3_server,
    write_config,
)

if TYPE_CHECKING:
    from tablestore.catalog.base import Catalog
    from tablestore.catalog.sql_catalog import SqlCatalog
    from tests.trino import TrinoServer


@dataclass
class Warehouse:
    """Where a test's tables go: a local directory or an s3:// prefix in a fresh bucket."""

    kind: str  # "local" or "s3"
    location: str
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        """The location as tables record it: a local directory is written as a file:/// URI."""
        return f"file://{self.location}" if self.kind == "local" else self.location


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = start_s3_server(tmp_path_factory.mktemp("minio"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    # Not under pytest's basetemp: pytest keeps /tmp/pytest-of-<user> at mode 0700 (and resets
    # it when any other session starts), but the server runs as a non-root user.
    workdir = Path(tempfile.mkdtemp(prefix="tablestore-pg-"))
    workdir.chmod(0o755)
    try:
        server = start_postgres(workdir)
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def trino(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrinoServer]:
    from tests.trino import start_trino

    server = start_trino(tmp_path_factory.mktemp("trino-server"), {})
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_uri(postgres_server: PostgresServer) -> str:
    """A SQLAlchemy URI (postgresql+psycopg2) of a database created for this test."""
    return postgres_server.create_database()


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def warehouse(request: pytest.FixtureRequest, tmp_path: Path) -> Warehouse:
    if request.param == "local":
        return Warehouse("local", str(tmp_path / "warehouse"))
    server: S3Server = request.getfixturevalue("s3_server")
    bucket = server.create_bucket()
    return Warehouse("s3", f"s3://{bucket}/warehouse", server.properties)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def catalog_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'catalog' / 'catalog.db'}"
    uri: str = request.getfixturevalue("postgres_uri")
    return uri


# The SQL catalog's tests (tests/catalog/): its database and its warehouse's storage are
# independent (the database holds the pointer, the storage the files), so each database runs on
# local disk and S3 once, not the four pairs of both.
SQL_CATALOG_LEGS = pytest.mark.parametrize(("catalog_uri", "warehouse"), [
    pytest.param("sqlite", "local", id="sqlite-local"),
    pytest.param("postgres", "local", id="postgres-local", marks=pytest.mark.postgres),
    pytest.param("sqlite", "s3", id="sqlite-s3", marks=pytest.mark.s3),
], indirect=True)


@pytest.fixture
def catalog(warehouse: Warehouse, catalog_uri: str) -> Iterator[SqlCatalog]:
    from tablestore.catalog.sql_catalog import SqlCatalog

    cat = SqlCatalog(
        f"test_{uuid.uuid4().hex[:8]}", uri=catalog_uri, warehouse=warehouse.location, **warehouse.properties
    )
    try:
        yield cat
    finally:
        cat.close()


# -- the catalog matrix -------------------------------------------------------------------------

# ``catalog_target`` is a SQLite catalog unless a test asks for more (docs/testing.md, "the catalog
# matrix"): a leg costs a database or the service's reset per test, and proves something only
# where that catalog takes part in the behaviour.
CATALOGS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), "rest"]
SQL_AND_REST = ["sqlite", "rest"]
STORAGES = ["sqlite", pytest.param("sqlite-s3", marks=pytest.mark.s3)]
CATALOGS_ON_EVERY_STORAGE = [
    *CATALOGS,
    pytest.param("sqlite-s3", marks=pytest.mark.s3),
    pytest.param("postgres-s3", marks=[pytest.mark.postgres, pytest.mark.s3]),
    pytest.param("rest-s3", marks=pytest.mark.s3),
]

# Races, conflicts, retries and transactions: each catalog decides a race its own way (SQLite's
# file lock, PostgreSQL's row lock, the service's compare-and-swap and its 409).
ON_THE_CATALOG_MATRIX = pytest.mark.parametrize("catalog_target", CATALOGS, indirect=True)
# What the REST protocol carries: metadata updates the service applies (refs, schemas, specs, row
# ids), its own checks and errors. PostgreSQL stores the same pointer as SQLite: no leg of its own.
OVER_REST = pytest.mark.parametrize("catalog_target", SQL_AND_REST, indirect=True)
# What reads and writes files: local disk and S3 (MinIO), on one catalog.
ON_EVERY_STORAGE = pytest.mark.parametrize("catalog_target", STORAGES, indirect=True)
# Every catalog on every storage: the Python API's basic round trip (tests/table/test_table.py).
ON_EVERY_CATALOG_AND_STORAGE = pytest.mark.parametrize("catalog_target", CATALOGS_ON_EVERY_STORAGE, indirect=True)


@dataclass(frozen=True)
class CatalogTarget:
    """One leg of the catalog matrix: the catalog's kind (``sqlite``, ``postgres`` or ``rest``),
    the properties that open it (picklable, so a worker process opens the same catalog) and
    where its tables are stored."""

    kind: str
    name: str
    properties: dict[str, str]
    warehouse: Warehouse

    def open(self) -> Catalog:
        import tablestore

        return tablestore.load_catalog(self.name, **self.properties)


def _serve(workdir: Path, s3: S3Server | None = None) -> RestService:
    warehouse = f"s3://{s3.create_bucket()}/warehouse" if s3 else str(workdir / "warehouse")
    config = workdir / "tablestore.yaml"
    catalog_uri = f"sqlite:///{workdir / 'catalog.db'}"
    write_config(config, catalog_uri, warehouse, s3.properties if s3 else None)
    service = RestService(config, catalog_uri, warehouse, workdir, s3_properties=s3.properties if s3 else {})
    service.start()
    return service


@pytest.fixture(scope="session")
def served_catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestService]:
    """The catalog service of the matrix's ``rest`` leg; emptied after each test that uses it."""
    service = _serve(tmp_path_factory.mktemp("served-catalog"))
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="module")
def catalog_service(served_catalog: RestService) -> Iterator[RestService]:
    """The session's catalog service (``served_catalog``) for a module that needs a service with
    the default configuration and keeps state across its tests: emptied when the module is done,
    also when it fails. A module that changes the service's configuration starts its own."""
    try:
        yield served_catalog
    finally:
        served_catalog.reset()


@pytest.fixture(scope="session")
def served_catalog_s3(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server) -> Iterator[RestService]:
    """The same with its warehouse in S3 (MinIO): the client gets the S3 settings from the service."""
    service = _serve(tmp_path_factory.mktemp("served-catalog-s3"), s3_server)
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(params=["sqlite"])
def catalog_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CatalogTarget]:
    kind, _, storage = str(request.param).partition("-")
    if kind == "rest":
        service: RestService = request.getfixturevalue("served_catalog_s3" if storage else "served_catalog")
        # The service is shared by the session, so it is emptied after the test (also a failed one).
        try:
            yield CatalogTarget("rest", "rest", {"type": "rest", "uri": service.uri, "token": WRITE_TOKEN},
                                Warehouse(storage or "local", service.warehouse, service.s3_properties))
        finally:
            service.reset()
        return
    if storage:
        server: S3Server = request.getfixturevalue("s3_server")
        warehouse = Warehouse("s3", f"s3://{server.create_bucket()}/warehouse", server.properties)
    else:
        warehouse = Warehouse("local", str(tmp_path / "warehouse"))
    uri = request.getfixturevalue("postgres_uri") if kind == "postgres" else f"sqlite:///{tmp_path / 'catalog.db'}"
    yield CatalogTarget(kind, f"test_{uuid.uuid4().hex[:8]}",
                        {"type": "sql", "uri": uri, "warehouse": warehouse.location, **warehouse.properties},
                        warehouse)


# The expiry of a vended credential, tried for real: MinIO's STS vends for 15 minutes at the
# least, so one test vends when the session starts and another tries the credential when it ends.
EXPIRY_FIRST = "tests/rest/test_credentials.py::test_a_credential_vended_when_the_session_starts_works_until_it_expires"
EXPIRY_LAST = "tests/rest/test_credentials.py::test_an_expired_vended_credential_is_refused"


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first = [item for item in items if item.nodeid == EXPIRY_FIRST]
    last = [item for item in items if item.nodeid == EXPIRY_LAST]
    rest = [item for item in items if item.nodeid not in (EXPIRY_FIRST, EXPIRY_LAST)]
    items[:] = first + rest + last
