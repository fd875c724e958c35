"""Shared fixtures: real services (moto S3, PostgreSQL) and catalogs on every storage/database.

- ``s3_server`` (session): a moto S3 server; ``.endpoint``, ``.access_key``, ``.secret_key``,
  ``.properties`` (FileIO/catalog properties), ``.create_bucket()``, ``.client()`` (boto3).
- ``postgres_server`` (session) and ``postgres_uri``: a SQLAlchemy URI of a fresh database.
- ``warehouse``: parametrized over ``local`` and ``s3`` (marker ``s3``); a :class:`Warehouse`
  with ``.location`` and ``.properties``.
- ``catalog_uri``: parametrized over ``sqlite`` and ``postgres`` (marker ``postgres``).
- ``catalog``: a ``SqlCatalog`` with a fresh name and database on every ``warehouse`` and ``catalog_uri``.

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

from tests.services import PostgresServer, S3Server, start_postgres, start_s3_server

if TYPE_CHECKING:
    from tablestore.catalog.sql import SqlCatalog


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
    server = start_s3_server(tmp_path_factory.mktemp("moto"))
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


@pytest.fixture
def catalog(warehouse: Warehouse, catalog_uri: str) -> Iterator[SqlCatalog]:
    from tablestore.catalog.sql import SqlCatalog

    cat = SqlCatalog(
        f"test_{uuid.uuid4().hex[:8]}", uri=catalog_uri, warehouse=warehouse.location, **warehouse.properties
    )
    try:
        yield cat
    finally:
        cat.close()
