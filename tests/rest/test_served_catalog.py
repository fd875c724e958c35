"""The service's commit path on PostgreSQL: one compare-and-swap from the last state seen,
another writer in between, and pooled connections that the database closed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, text

from tablestore.catalog.sql import SqlCatalog
from tests.rest.conftest import CATALOG, RestService, start_service

SCHEMA = pa.schema([pa.field("id", pa.int64())])


@pytest.fixture
def pg_rest_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RestService]:
    service = start_service(request, "postgres", tmp_path)
    try:
        yield service
    finally:
        service.stop()


def _ids(table: object) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())  # type: ignore[attr-defined]


@pytest.mark.postgres
def test_commits_survive_other_writers_and_connections_closed_by_the_database(
    pg_rest_service: RestService,
) -> None:
    service = pg_rest_service
    client = service.client()
    direct = SqlCatalog(CATALOG, **service.direct_properties())
    try:
        client.create_namespace("cas")
        client.create_table("cas.t", SCHEMA).append(pa.table({"id": [1]}, schema=SCHEMA))
        client.load_table("cas.t").append(pa.table({"id": [2]}, schema=SCHEMA))
        # Another writer moves the table behind the service's back: the service's next commit
        # starts from a stale state, loses the swap and makes it again from the current row.
        direct.load_table("cas.t").append(pa.table({"id": [3]}, schema=SCHEMA))
        stale = client.load_table("cas.t")
        direct.load_table("cas.t").append(pa.table({"id": [4]}, schema=SCHEMA))
        stale.append(pa.table({"id": [5]}, schema=SCHEMA))  # the table layer retries on 409
        assert _ids(client.load_table("cas.t")) == [1, 2, 3, 4, 5]

        # The database closes every connection of the service (as a restart does): the pooled
        # connections are found closed and replaced, and nothing fails.
        engine = create_engine(service.catalog_uri, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                killed = conn.execute(text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()")).scalar()
        finally:
            engine.dispose()
        assert killed and killed > 0
        client.load_table("cas.t").append(pa.table({"id": [6]}, schema=SCHEMA))
        assert _ids(client.load_table("cas.t")) == [1, 2, 3, 4, 5, 6]
        current = direct.load_table("cas.t")
        # Created, then six appends: no commit lost or made twice.
        assert len(current.metadata.snapshots) == 6 and len(current.metadata.metadata_log) == 6
        assert Path(current.metadata_location).name.startswith("00006-")
    finally:
        client.close()
        direct.close()
