"""Server-side scan planning: ``POST …/plan``, ``GET``/``DELETE …/plan/{plan-id}``, ``POST …/tasks``.

One service (page size 3, so every plan of the test table is paged) and one table: partitioned
by ``cat``, then its schema evolved (``score`` added) and its spec evolved (``bucket(2, id)``
added), and merge-on-read deletes. tablestore's ``rest`` catalog and pyiceberg (0.12, with
``scan-planning-mode=server``) read it through served plans; the rows must be those of local
planning and of the data written.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
import requests

from tablestore.catalog.rest import RestCatalog
from tablestore.catalog.rest_planning import RestScanPlanner
from tablestore.errors import ValidationError
from tests.services import CATALOG, READ_TOKEN, WRITE_TOKEN, RestService, write_config

PAGE = 3
TABLE = "db.events"
DELETED = {0, 5, 10, 15, 20}
WRITER = {"Authorization": f"Bearer {WRITE_TOKEN}"}
READER = {"Authorization": f"Bearer {READ_TOKEN}"}
Row = tuple[int, str, float | None]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestService]:
    # A service of the module's own: a page size of 3 tasks, to page through a small table.
    workdir = tmp_path_factory.mktemp("planning")
    uri, warehouse = f"sqlite:///{workdir / 'catalog.db'}", str(workdir / "warehouse")
    write_config(workdir / "tablestore.yaml", uri, warehouse, server_extra={"scan-planning-page-size": PAGE})
    svc = RestService(workdir / "tablestore.yaml", uri, warehouse, workdir)
    svc.start()
    try:
        yield svc
    finally:
        svc.stop()


def _written() -> list[Row]:
    first = [(i, "abc"[i % 3], None) for i in range(12)]
    second = [(i, "abc"[i % 3], i / 10) for i in range(12, 24)]
    return [r for r in first + second if r[0] not in DELETED]


@pytest.fixture(scope="module")
def snapshots(service: RestService) -> list[int]:
    """Builds the table; returns its snapshot ids (append, append, delete)."""
    client = service.client()
    try:
        client.create_namespace("db")
        table = client.create_table(TABLE, pa.schema([("id", pa.int64()), ("cat", pa.string())]),
                                    partition_by=["cat"], properties={"write.delete.mode": "merge-on-read"})
        table.append(pa.table({"id": pa.array(range(12), pa.int64()), "cat": ["abc"[i % 3] for i in range(12)]}))
        with table.update_schema() as update:
            update.add_column("score", "double")
        table.update_spec().add_field("bucket(2, id)").commit()
        ids = list(range(12, 24))
        table.append(pa.table({"id": pa.array(ids, pa.int64()), "cat": ["abc"[i % 3] for i in ids],
                               "score": [i / 10 for i in ids]}))
        table.delete("id in (0, 5, 10, 15, 20)")
        return [s.snapshot_id for s in client.load_table(TABLE).snapshots()]
    finally:
        client.close()


def _client(service: RestService, mode: str = "server", token: str = READ_TOKEN) -> RestCatalog:
    return RestCatalog("rest", uri=service.uri, token=token, **{"scan-planning-mode": mode})


def _rows(table: pa.Table) -> list[Row]:
    return sorted((r["id"], r["cat"], r["score"]) for r in table.to_pylist())


FILTERS: list[tuple[str | None, Callable[[Row], bool]]] = [
    (None, lambda r: True),
    ("cat = 'a'", lambda r: r[1] == "a"),
    ("cat = 'a' and id > 7", lambda r: r[1] == "a" and r[0] > 7),
    ("score > 1.5 or id < 3", lambda r: (r[2] is not None and r[2] > 1.5) or r[0] < 3),
    ("id in (1, 12, 15, 22)", lambda r: r[0] in (1, 12, 15, 22)),
    ("score is null and cat != 'b'", lambda r: r[2] is None and r[1] != "b"),
]


def _plan(service: RestService, body: dict[str, Any], headers: dict[str, str] = READER) -> requests.Response:
    return requests.post(f"{service.uri}/v1/{CATALOG}/namespaces/db/tables/events/plan", json=body,
                         headers=headers, timeout=60)


def _tasks(service: RestService, token: str, headers: dict[str, str] = READER) -> requests.Response:
    return requests.post(f"{service.uri}/v1/{CATALOG}/namespaces/db/tables/events/tasks",
                         json={"plan-task": token}, headers=headers, timeout=60)


def test_served_plans_read_the_rows_of_local_planning(service: RestService, snapshots: list[int]) -> None:
    served, local = _client(service), _client(service, "client")
    try:
        served_table, local_table = served.load_table(TABLE), local.load_table(TABLE)
        assert isinstance(served.scan_planner(served_table.identifier), RestScanPlanner)
        assert local.scan_planner(local_table.identifier) is None
        for text, keep in FILTERS:
            expected = sorted(r for r in _written() if keep(r))
            scan = served_table.scan(filter=text)
            tasks = scan.plan_files()
            # Served tasks carry their residual; local planning leaves it to the scan's filter.
            assert tasks and all(t.residual is not None for t in tasks), text
            assert all(t.residual is None for t in local_table.scan(filter=text).plan_files()), text
            assert _rows(scan.to_arrow()) == expected, text
            assert _rows(local_table.scan(filter=text).to_arrow()) == expected, text
            assert served_table.scan(filter=text).count() == len(expected), text
        # Time travel to the first append: its schema, and the rows before the deletes.
        old = served_table.scan(snapshot_id=snapshots[0], filter="id >= 4").to_arrow()
        assert sorted(old.to_pylist(), key=lambda r: r["id"]) == [{"id": i, "cat": "abc"[i % 3]} for i in range(4, 12)]
        projected = served_table.scan(filter="cat = 'b' and score > 1", columns=["score", "id"]).to_arrow()
        assert projected.column_names == ["score", "id"]
        assert sorted(projected.column("id").to_pylist()) == [13, 16, 19, 22]
    finally:
        served.close()
        local.close()


def test_pyiceberg_plans_on_the_service_and_reads_the_same_rows(service: RestService, snapshots: list[int]) -> None:
    from pyiceberg.catalog.rest import RestCatalog as PyRestCatalog
    catalog = PyRestCatalog("rest", uri=service.uri, token=READ_TOKEN, **{"scan-planning-mode": "server"})
    table = catalog.load_table(TABLE)
    assert table.scan()._should_use_server_side_planning()
    cases: list[tuple[str, Callable[[Row], bool]]] = [
        ("cat == 'a'", lambda r: r[1] == "a"),
        ("cat == 'a' and id > 7", lambda r: r[1] == "a" and r[0] > 7),
        ("id in (1, 12, 15, 22)", lambda r: r[0] in (1, 12, 15, 22)),
    ]
    for expression, keep in cases:
        assert _rows(table.scan(row_filter=expression).to_arrow()) == sorted(r for r in _written() if keep(r))
    assert len(table.scan().to_arrow()) == len(_written())


def test_large_plans_are_paged_into_plan_tasks_each_fetched_once(service: RestService, snapshots: list[int]) -> None:
    client = _client(service, "client")
    try:
        files = sorted(t.file.file_path for t in client.load_table(TABLE).scan().plan_files())
    finally:
        client.close()
    response = _plan(service, {})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "completed" and body["plan-id"]
    assert len(body["file-scan-tasks"]) == PAGE
    assert len(body["plan-tasks"]) == math.ceil(len(files) / PAGE) - 1
    # Until every plan task was fetched, the plan can be fetched again.
    again = requests.get(f"{service.uri}/v1/{CATALOG}/namespaces/db/tables/events/plan/{body['plan-id']}",
                         headers=READER, timeout=60).json()
    assert again["status"] == "completed" and again["plan-tasks"] == body["plan-tasks"]
    fetched = [t["data-file"]["file-path"] for t in body["file-scan-tasks"]]
    for token in body["plan-tasks"]:
        page = _tasks(service, token)
        assert page.status_code == 200, page.text
        assert len(page.json()["file-scan-tasks"]) <= PAGE
        fetched += [t["data-file"]["file-path"] for t in page.json()["file-scan-tasks"]]
    assert sorted(fetched) == files
    gone = _tasks(service, body["plan-tasks"][0])
    assert gone.status_code == 404 and gone.json()["error"]["type"] == "NoSuchPlanTaskException"
    # All plan tasks fetched: the plan is released.
    plan = requests.get(f"{service.uri}/v1/{CATALOG}/namespaces/db/tables/events/plan/{body['plan-id']}",
                        headers=READER, timeout=60)
    assert plan.status_code == 404 and plan.json()["error"]["type"] == "NoSuchPlanIdException"


def test_a_cancelled_plan_reads_cancelled_and_its_plan_tasks_are_gone(service: RestService,
                                                                       snapshots: list[int]) -> None:
    body = _plan(service, {"filter": True}).json()
    url = f"{service.uri}/v1/{CATALOG}/namespaces/db/tables/events/plan/{body['plan-id']}"
    assert requests.delete(url, headers=READER, timeout=60).status_code == 204
    assert requests.get(url, headers=READER, timeout=60).json() == {"status": "cancelled"}
    response = _tasks(service, body["plan-tasks"][0])
    assert response.status_code == 404 and response.json()["error"]["type"] == "NoSuchPlanTaskException"


def test_file_scan_tasks_carry_their_residual_and_delete_files_by_index(service: RestService,
                                                                          snapshots: list[int]) -> None:
    # cat is an identity partition: decided by each file's partition, id > 7 is what remains.
    body = _plan(service, {"filter": {"type": "and", "left": {"type": "eq", "term": "cat", "value": "a"},
                                      "right": {"type": "gt", "term": "id", "value": 7}}}).json()
    pages = [body] + [_tasks(service, token).json() for token in body.get("plan-tasks", [])]
    tasks = [(page, t) for page in pages for t in page["file-scan-tasks"]]
    assert tasks
    for _, task in tasks:
        assert task["residual-filter"] == {"type": "gt", "term": "id", "value": 7}
        assert task["data-file"]["partition"][0] == "a"
    with_deletes = 0
    for page, task in tasks:
        for index in task.get("delete-file-references", []):
            delete = page["delete-files"][index]
            assert delete["content"] == "position-deletes"
            assert (delete["spec-id"], delete["partition"]) == (task["data-file"]["spec-id"],
                                                                task["data-file"]["partition"])
            with_deletes += 1
    assert with_deletes >= 1  # ids 15 (spec 1) and 0 (spec 0) are deleted rows of cat 'a'
    # A filter that the partition decides: nothing remains to filter in the rows.
    body = _plan(service, {"filter": {"type": "or", "left": {"type": "eq", "term": "cat", "value": "a"},
                                      "right": {"type": "gt", "term": "id", "value": 100}}}).json()
    pages = [body] + [_tasks(service, token).json() for token in body.get("plan-tasks", [])]
    assert {json_residual(t) for page in pages for t in page["file-scan-tasks"]} == {"true"}


def json_residual(task: dict[str, Any]) -> str:
    return "true" if task["residual-filter"] is True else repr(task["residual-filter"])


def test_stats_fields_send_only_the_asked_columns_bounds(service: RestService, snapshots: list[int]) -> None:
    body = _plan(service, {"filter": {"type": "eq", "term": "cat", "value": "b"}, "stats-fields": ["id"]}).json()
    pages = [body] + [_tasks(service, token).json() for token in body.get("plan-tasks", [])]
    for task in (t for page in pages for t in page["file-scan-tasks"]):
        data = task["data-file"]
        assert data["lower-bounds"]["keys"] == [1] and data["upper-bounds"]["keys"] == [1]
        low, high = data["lower-bounds"]["values"][0], data["upper-bounds"]["values"][0]
        assert low <= high and low % 3 == 1 and high % 3 == 1  # cat 'b' holds the ids 1, 4, 7, ...
    plain = _plan(service, {"filter": {"type": "eq", "term": "cat", "value": "b"}}).json()
    assert all("lower-bounds" not in t["data-file"] for t in plain["file-scan-tasks"])


def test_incremental_scans_plan_the_files_appended_between_two_snapshots(service: RestService,
                                                                          snapshots: list[int]) -> None:
    first, second, deleted = snapshots
    client = _client(service, "client")
    try:
        table = client.load_table(TABLE)
        before = {t.file.file_path for t in table.scan(snapshot_id=first).plan_files()}
        after = {t.file.file_path for t in table.scan(snapshot_id=second).plan_files()}
    finally:
        client.close()
    body = _plan(service, {"start-snapshot-id": first, "end-snapshot-id": deleted}).json()
    pages = [body] + [_tasks(service, token).json() for token in body.get("plan-tasks", [])]
    planned = {t["data-file"]["file-path"] for page in pages for t in page["file-scan-tasks"]}
    assert planned == after - before and planned
    # The delete snapshot appended nothing, and an append scan applies no deletes.
    assert all("delete-files" not in page for page in pages)
    empty = _plan(service, {"start-snapshot-id": second, "end-snapshot-id": deleted}).json()
    assert empty["file-scan-tasks"] == [] and "plan-tasks" not in empty


def test_an_incremental_table_scan_plans_its_range_on_the_service(service: RestService,
                                                                   snapshots: list[int]) -> None:
    first, second, deleted = snapshots
    served = _client(service)
    try:
        table = served.load_table(TABLE)
        scan = table.scan(start_snapshot_id=first, end_snapshot_id=deleted)
        # Served tasks carry a residual: the service planned the range, not the client.
        assert scan.plan_files() and all(t.residual is not None for t in scan.plan_files())
        appended = [(i, "abc"[i % 3], i / 10) for i in range(12, 24)]  # the delete after it does not apply
        assert _rows(scan.to_arrow()) == appended
        assert _rows(table.scan(start_snapshot_id=first, filter="cat = 'a'").to_arrow()) == \
            [r for r in appended if r[1] == "a"]
        assert table.scan(start_snapshot_id=second).to_arrow().num_rows == 0
    finally:
        served.close()


def test_bad_plan_requests_are_refused_with_what_is_wrong(service: RestService, snapshots: list[int]) -> None:
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"filter": {"type": "eq", "term": "nope", "value": 1}}, 400, "unknown column 'nope'"),
        ({"select": ["id", "nope"]}, 400, "unknown column 'nope'"),
        ({"snapshot-id": snapshots[0], "start-snapshot-id": snapshots[0], "end-snapshot-id": snapshots[1]}, 400,
         "not both"),
        ({"start-snapshot-id": snapshots[0]}, 400, "needs both start-snapshot-id and end-snapshot-id"),
        ({"start-snapshot-id": snapshots[1], "end-snapshot-id": snapshots[0]}, 400, "not an ancestor"),
        ({"snapshot-id": 12345}, 400, "no snapshot 12345"),
        ({"filter": {"type": "between", "term": "id"}}, 400, "unknown filter type 'between'"),
    ]
    for body, status, words in cases:
        response = _plan(service, body)
        assert response.status_code == status, (body, response.text)
        assert words in response.json()["error"]["message"], (body, response.text)
    missing = requests.post(f"{service.uri}/v1/{CATALOG}/namespaces/db/tables/nope/plan", json={},
                            headers=READER, timeout=60)
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "NoSuchTableException"
    assert _plan(service, {}, headers={}).status_code == 401
    with pytest.raises(ValidationError, match="scan-planning-mode"):
        _client(service, "sometimes")


def test_a_plan_belongs_to_its_caller(service: RestService, snapshots: list[int]) -> None:
    # The read role may plan; a plan task of the writer's plan is not the reader's to fetch.
    assert _plan(service, {}).status_code == 200
    body = _plan(service, {}, headers=WRITER).json()
    stolen = _tasks(service, body["plan-tasks"][0], headers=READER)
    assert stolen.status_code == 404 and stolen.json()["error"]["type"] == "NoSuchPlanTaskException"
    assert _tasks(service, body["plan-tasks"][0], headers=WRITER).status_code == 200

