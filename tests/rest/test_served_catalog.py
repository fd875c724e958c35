"""The service's commit path on PostgreSQL: one compare-and-swap from the last state seen,
another writer in between, and pooled connections that the database closed."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, event, text

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.errors import CommitConflictError
from tablestore.io.fileio import OutputFile
from tablestore.rest.state.served_catalog import COMMIT_ATTEMPTS, ServedSqlCatalog
from tablestore.spec.metadata.update_models import SetPropertiesUpdate
from tests.rest.conftest import CATALOG, WRITE_TOKEN, RestService, start_service

SCHEMA = pa.schema([pa.field("id", pa.int64())])
JSON_SCHEMA: dict[str, Any] = {"type": "struct", "schema-id": 0,
                               "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


@pytest.fixture
def pg_rest_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RestService]:
    """A service of the test's own: the test closes every database connection it has."""
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


# -- one staging per attempt ---------------------------------------------------------------------


class RacingWriter:
    """Another writer that moves a table right after the service's catalog reads its pointer:
    a real commit through a second catalog on the same database, made from a SQLAlchemy event
    of the service catalog's lookups, so every attempt of the service's commit loses its race."""

    def __init__(self, served: ServedSqlCatalog, other: SqlCatalog, ident: tuple[str, str]) -> None:
        self.other, self.ident, self.armed, self.commits = other, ident, False, 0
        event.listen(served._lookups, "after_cursor_execute", self._after)

    def _after(self, _conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if self.armed and "SELECT iceberg_tables.metadata_location" in statement:
            self.commits += 1
            self.other.commit_table(self.ident, [], [SetPropertiesUpdate(updates={"race": str(self.commits)})])


def _metadata_writes(served: ServedSqlCatalog) -> list[str]:
    """The metadata files the catalog writes from now on (its own FileIO, writing for real)."""
    written: list[str] = []
    new_output = served.io.new_output

    def recording(path: str) -> OutputFile:
        if path.endswith(".metadata.json"):
            written.append(path)
        return new_output(path)

    served.io.new_output = recording  # type: ignore[method-assign]
    return written


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_each_attempt_of_a_served_commit_stages_it_once(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A commit the service makes writes one metadata file per attempt: on PostgreSQL one on
    the state it last saw and one on the current row, on SQLite only the latter; when both lose
    their race the client gets the conflict and every file written is gone again."""
    uri = (f"sqlite:///{tmp_path / 'catalog.db'}" if backend == "sqlite"
           else request.getfixturevalue("postgres_server").create_database())
    properties = {"uri": uri, "warehouse": str(tmp_path / "warehouse")}
    served, other = ServedSqlCatalog("c", **properties), SqlCatalog("c", **properties)
    try:
        served.create_namespace("db")
        served.create_table("db.t", SCHEMA)
        ident = ("db", "t")
        served.commit_table(ident, [], [SetPropertiesUpdate(updates={"seen": "1"})])  # the state it last saw
        other.commit_table(ident, [], [SetPropertiesUpdate(updates={"behind": "1"})])  # now stale
        racer = RacingWriter(served, other, ident)
        written = _metadata_writes(served)

        # The stale state loses, the current one wins: two files written, the first deleted.
        location, metadata = served.commit_table(ident, [], [SetPropertiesUpdate(updates={"a": "1"})])
        attempts = 2 if backend == "postgres" else 1
        assert len(written) == attempts and written[-1] == location
        assert [Path(p.removeprefix("file://")).exists() for p in written] == [False] * (attempts - 1) + [True]
        assert metadata.properties["behind"] == "1" and metadata.properties["a"] == "1"

        # Another writer wins every race: the state last seen was moved, and so is the current
        # row right after each read. The service retries up to its bound, one file per attempt,
        # none left, and only then tells the client to retry.
        other.commit_table(ident, [], [SetPropertiesUpdate(updates={"behind": "2"})])
        written.clear()
        racer.armed = True
        with pytest.raises(CommitConflictError, match="won the race"):
            served.commit_table(ident, [], [SetPropertiesUpdate(updates={"b": "1"})])
        racer.armed = False
        reads = COMMIT_ATTEMPTS - (1 if backend == "postgres" else 0)  # the first PG attempt reads nothing
        assert len(written) == COMMIT_ATTEMPTS and racer.commits == reads
        assert not any(Path(p.removeprefix("file://")).exists() for p in written)
        current = other.load_table("db.t").metadata.properties
        assert current["race"] == str(reads) and "b" not in current

        # The client's retry loop reloads the table, which the service remembers: its next
        # commit needs one attempt.
        served.load_table_metadata(ident)
        written.clear()
        location, _ = served.commit_table(ident, [], [SetPropertiesUpdate(updates={"c": "1"})])
        assert written == [location] and other.load_table("db.t").metadata.properties["c"] == "1"
    finally:
        served.close()
        other.close()


# -- retries on the server -------------------------------------------------------------------------

WRITERS = 16
COMMITS_EACH = 8


@pytest.mark.postgres
def test_sixteen_writers_on_one_table_get_no_conflict_while_the_requirements_hold(
    rest_service_postgres: RestService,
) -> None:
    """16 clients commit to one table at once, while another catalog on the same database keeps
    moving it behind the service's back: the service retries its lost swaps on the current state,
    no client gets a 409 (their requirement, the table's uuid, always holds), and every commit
    is counted once, in /metrics and in the table's metadata files. The session's service: its
    counters are compared before and after, and the namespace is the test's own."""
    service = rest_service_postgres
    auth = {"Authorization": f"Bearer {WRITE_TOKEN}"}
    base = f"{service.uri}/v1/{CATALOG}/namespaces/race"
    assert requests.post(f"{service.uri}/v1/{CATALOG}/namespaces", json={"namespace": ["race"]}, headers=auth,
                         timeout=30).status_code == 200
    created = requests.post(f"{base}/tables", json={"name": "t", "schema": JSON_SCHEMA}, headers=auth, timeout=30)
    table_uuid = created.json()["metadata"]["table-uuid"]
    before = _scrape(service)
    statuses: list[int] = []
    done = threading.Event()

    racer_commits = 0
    # The writers go on past COMMITS_EACH until the racer has landed commits of its own (within a
    # deadline): once the service's commits got fast enough, 16 writers could finish before the
    # racer's first swap won, and the race this test is about never happened.
    deadline = time.monotonic() + 120
    last: dict[int, int] = {}  # each writer's last value

    def writer(index: int) -> None:
        with requests.Session() as session:
            j = 0
            while j < COMMITS_EACH or (racer_commits < 3 and time.monotonic() < deadline):
                last[index] = j
                j += 1
                body = {"requirements": [{"type": "assert-table-uuid", "uuid": table_uuid}],
                        "updates": [{"action": "set-properties", "updates": {f"w{index}": str(last[index])}}]}
                statuses.append(session.post(f"{base}/tables/t", json=body, headers=auth, timeout=60).status_code)

    def racer() -> None:
        nonlocal racer_commits
        direct = SqlCatalog(CATALOG, **service.direct_properties())
        try:
            while not done.is_set():
                try:
                    direct.commit_table(("race", "t"), [], [SetPropertiesUpdate(updates={"racer": str(racer_commits)})])
                    racer_commits += 1
                except CommitConflictError:
                    pass  # the service won that race: the racer's own retry
                time.sleep(0.02)
        finally:
            direct.close()

    racing = threading.Thread(target=racer)
    racing.start()
    writers = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    try:
        for w in writers:
            w.start()
        for w in writers:
            w.join()
    finally:
        done.set()
        racing.join()

    assert len(statuses) >= WRITERS * COMMITS_EACH and statuses == [200] * len(statuses)
    after = _scrape(service)

    def delta(name: str, **labels: str) -> float:
        key = (name, frozenset({"catalog": CATALOG, **labels}.items()))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert delta("tablestore_commits_total", kind="table") == len(statuses)
    assert delta("tablestore_commit_conflicts_total", kind="table") == 0
    assert racer_commits >= 1 and delta("tablestore_commit_retries_total") >= 1
    loaded = requests.get(f"{base}/tables/t", headers=auth, timeout=30).json()
    properties = loaded["metadata"]["properties"]
    assert {k: v for k, v in properties.items() if k.startswith("w")} == \
        {f"w{i}": str(last[i]) for i in range(WRITERS)}
    # One metadata file per landed commit, none twice: version N after the create's 00000.
    assert Path(loaded["metadata-location"]).name.startswith(f"{len(statuses) + racer_commits:05d}-")


def _scrape(service: RestService) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = requests.get(f"{service.uri}/metrics", headers={"Authorization": f"Bearer {WRITE_TOKEN}"}, timeout=30)
    assert response.status_code == 200, response.text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}
