"""Server-side scan planning: ``POST …/tables/{t}/plan``, ``GET``/``DELETE …/plan/{plan-id}`` and
``POST …/tables/{t}/tasks``, as the REST spec defines them.

The service plans with tablestore's own planner (:func:`tablestore.table.read.scan.plan_files`, or
:func:`~tablestore.table.read.scan.plan_appended_files` for an incremental append scan) and answers
``completed`` at once: planning a 100,000-file table takes well under a second here, so no plan
is left ``submitted``. Each file scan task carries its residual filter (the request's filter
residualized against the file's partition) and its delete files by index into the response's
``delete-files``.

A plan with more file scan tasks than ``scan-planning-page-size`` (server setting, default 5000)
is paged: the first page comes with the response, the others are ``plan-tasks`` that the client
fetches from ``…/tasks``. A plan's pages live in the catalog's database
(:mod:`tablestore.rest.state.plan_store`) until every plan task was fetched, the plan was cancelled
(``DELETE``), or ``scan-plan-ttl-seconds`` passed, so any replica of the service behind a load
balancer serves them: no sticky sessions are needed.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Body, Response
from fastapi.responses import JSONResponse

from tablestore.errors import NoSuchSnapshotError, ValidationError
from tablestore.names import Identifier
from tablestore.rest.access import Access, ReadAccess
from tablestore.rest.auth.grants import Privilege
from tablestore.rest.routes.models import FetchScanTasksRequest, PlanTableScanRequest
from tablestore.rest.state.plan_store import PlanStore, StoredPlan
from tablestore.rest.state.stats import SCAN_FILE_TASKS, SCAN_PLAN_TASKS, SCAN_PLANS
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.evaluators import ResidualEvaluator
from tablestore.spec.expressions.expression_json import expression_from_json, expression_to_json
from tablestore.spec.expressions.expression_tree import AlwaysTrue, BoundExpression
from tablestore.spec.manifests.content_file_json import content_file_to_json
from tablestore.spec.metadata.table_metadata import TableMetadata
from tablestore.spec.partitioning.partition_spec import PartitionSpec
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import IcebergType, StructType
from tablestore.table.read.scan import FileTask, plan_appended_files, plan_files, select_snapshot

router = APIRouter(prefix="/v1/{prefix}/namespaces/{namespace}/tables/{table}", tags=["scan planning"])


def readable(access: Access, namespace: str, table: str) -> Identifier:
    """The table a planning request names, which the caller must be able to READ: planning, its
    pages and its tasks hand out the table's file names and statistics."""
    ident = access.parse_identifier(namespace, table)
    access.require_table(Privilege.READ, ident)
    return ident


def plan_store(access: Access) -> PlanStore:
    return access.service.plans


def _owner(access: Access) -> tuple[str, str]:
    return access.prefix, access.principal.name


# -- planning --------------------------------------------------------------------------------


def _field_ids(schema: Schema, names: list[str] | None, case_sensitive: bool, what: str) -> list[int]:
    ids = []
    for name in names or []:
        field_id = schema.find_field_id(name, case_sensitive)
        if field_id is None:
            raise ValidationError(f"{what} names unknown column {name!r}; the columns are: "
                                  f"{', '.join(schema.column_names)}")
        ids.append(field_id)
    return ids


@dataclass
class Planned:
    schema: Schema
    tasks: list[FileTask]
    filter: BoundExpression


def plan_request(access: Access, table: Identifier, request: PlanTableScanRequest) -> tuple[TableMetadata, Planned]:
    """The file tasks of a PlanTableScanRequest, planned on the table's current metadata."""
    incremental = request.start_snapshot_id is not None or request.end_snapshot_id is not None
    if incremental and request.snapshot_id is not None:
        raise ValidationError("give either snapshot-id (a point-in-time scan) or start-snapshot-id and "
                              "end-snapshot-id (an incremental scan), not both")
    if incremental and (request.start_snapshot_id is None or request.end_snapshot_id is None):
        raise ValidationError("an incremental scan needs both start-snapshot-id and end-snapshot-id")
    if request.min_rows_requested is not None and request.min_rows_requested < 0:
        raise ValidationError("min-rows-requested must not be negative")
    loaded = access.catalog.load_table(table)
    metadata = loaded.metadata
    cs = request.case_sensitive
    try:
        end_id = request.end_snapshot_id if incremental else request.snapshot_id
        snapshot = select_snapshot(metadata, end_id)
        schema = metadata.schema()
        if request.use_snapshot_schema and snapshot is not None and snapshot.schema_id is not None:
            schema = metadata.schema_by_id(snapshot.schema_id) or schema
        bound = bind(schema, expression_from_json(request.filter, schema, cs), cs)
        _field_ids(schema, request.select, cs, "select")
        if incremental:
            assert request.start_snapshot_id is not None and request.end_snapshot_id is not None
            tasks = plan_appended_files(loaded.io, metadata, request.start_snapshot_id, request.end_snapshot_id,
                                        schema, bound, loaded.engine)
        else:
            tasks = plan_files(loaded.io, metadata, snapshot, schema, bound, loaded.engine)
    except NoSuchSnapshotError as e:
        # The table exists (404 is for the table); a snapshot it lacks is a bad request.
        raise ValidationError(str(e)) from None
    return metadata, Planned(schema, tasks, bound)


class PageWriter:
    """Writes file scan tasks as ScanTasks JSON, with residuals worked out once per partition."""

    def __init__(self, metadata: TableMetadata, planned: Planned, stats_ids: list[int]) -> None:
        schema = planned.schema
        self.specs: dict[int, PartitionSpec] = {s.spec_id: s for s in metadata.partition_specs}
        self.partition_types: dict[int, StructType] = {
            i: s.partition_type_for(metadata.schemas) for i, s in self.specs.items()}
        self.column_types: dict[int, IcebergType] = {
            f.field_id: f.field_type for _, f in schema.all_fields() if f.field_type.is_primitive}
        self.stats_ids = stats_ids
        self.filter = planned.filter
        self.schema = schema
        self._residuals: dict[int, ResidualEvaluator] = {}
        self._residual_json: dict[tuple[int, tuple[Any, ...]], Any] = {}

    def residual(self, task: FileTask) -> Any:
        if isinstance(self.filter, AlwaysTrue):
            return True
        key = (task.spec_id, tuple(task.file.partition))
        if key not in self._residual_json:
            evaluator = self._residuals.get(task.spec_id)
            if evaluator is None:
                evaluator = self._residuals[task.spec_id] = ResidualEvaluator(
                    self.specs[task.spec_id], self.schema, self.filter)
            self._residual_json[key] = expression_to_json(evaluator.residual_for(task.file.partition))
        return self._residual_json[key]

    def page(self, tasks: list[FileTask], plan_tasks: list[str]) -> bytes:
        deletes: list[dict[str, Any]] = []
        index: dict[str, int] = {}
        out = []
        for task in tasks:
            obj: dict[str, Any] = {
                "data-file": content_file_to_json(task.file, self.partition_types[task.spec_id], self.column_types,
                                                  self.stats_ids),
                "residual-filter": self.residual(task),
            }
            if task.delete_files:
                refs = []
                for df in task.delete_files:
                    position = index.get(df.file_path)
                    if position is None:
                        position = index[df.file_path] = len(deletes)
                        deletes.append(content_file_to_json(df, self.partition_types[df.spec_id]))
                    refs.append(position)
                obj["delete-file-references"] = refs
            out.append(obj)
        body: dict[str, Any] = {}
        if deletes:
            body["delete-files"] = deletes
        body["file-scan-tasks"] = out
        if plan_tasks:
            body["plan-tasks"] = plan_tasks
        return json.dumps(body, separators=(",", ":")).encode("utf-8")


def _completed(page: bytes, plan_id: str | None) -> Response:
    # The stored page is ScanTasks JSON; the status (and id) go in front of its fields.
    head = {"status": "completed"} if plan_id is None else {"status": "completed", "plan-id": plan_id}
    prefix = json.dumps(head, separators=(",", ":")).encode("utf-8")[:-1]
    return Response(prefix + b"," + page[1:], media_type="application/json")


@router.post("/plan")
def plan_table_scan(
    namespace: str,
    table: str,
    access: ReadAccess,
    body: Annotated[PlanTableScanRequest | None, Body()] = None,
) -> Response:
    ident = readable(access, namespace, table)
    request = body or PlanTableScanRequest()
    metadata, planned = plan_request(access, ident, request)
    writer = PageWriter(metadata, planned, _field_ids(planned.schema, request.stats_fields, request.case_sensitive,
                                                      "stats-fields"))
    size = access.service.settings.scan_planning_page_size
    chunks = [planned.tasks[i:i + size] for i in range(0, len(planned.tasks), size)] or [[]]
    plan_id = secrets.token_urlsafe(18)
    tokens = [f"{plan_id}:{i}" for i in range(1, len(chunks))]
    pages = [writer.page(chunks[0], tokens)] + [writer.page(c, []) for c in chunks[1:]]
    if tokens:
        # Only a paged plan is kept: a plan answered whole leaves nothing to fetch or cancel.
        plan_store(access).add(plan_id, StoredPlan(access.prefix, ident, access.principal.name, pages,
                                                   set(range(1, len(chunks)))))
    access.service.stats.inc(SCAN_PLANS, access.prefix)
    access.service.stats.inc(SCAN_FILE_TASKS, access.prefix, amount=len(planned.tasks))
    return _completed(pages[0], plan_id)


@router.get("/plan/{plan_id}")
def fetch_planning_result(namespace: str, table: str, plan_id: str, access: ReadAccess) -> Response:
    ident = readable(access, namespace, table)
    plan = plan_store(access).get(plan_id, *_owner(access), ident)
    if plan.cancelled:
        return JSONResponse({"status": "cancelled"})
    return _completed(plan.pages[0], None)


@router.delete("/plan/{plan_id}", status_code=204)
def cancel_planning(namespace: str, table: str, plan_id: str, access: ReadAccess) -> Response:
    ident = readable(access, namespace, table)
    plan_store(access).cancel(plan_id, *_owner(access), ident)
    return Response(status_code=204)


@router.post("/tasks")
def fetch_scan_tasks(namespace: str, table: str, body: FetchScanTasksRequest, access: ReadAccess) -> Response:
    ident = readable(access, namespace, table)
    if not access.catalog.table_exists(ident):
        access.catalog.load_table_metadata(ident)  # raises NoSuchTableError / NoSuchNamespaceError
    page = plan_store(access).take_page(body.plan_task, *_owner(access), ident)
    access.service.stats.inc(SCAN_PLAN_TASKS, access.prefix)
    return Response(page, media_type="application/json")


__all__ = ["PageWriter", "plan_request", "router"]
