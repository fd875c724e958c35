"""Server-side scan planning from tablestore's ``rest`` catalog.

When the service advertises ``POST …/tables/{table}/plan`` in ``/v1/config`` (and the catalog's
``scan-planning-mode`` is not ``client``), ``table.scan(...)`` asks the service for its file scan
tasks instead of reading the manifests itself: one request for the plan, then one per plan task
the service paged out. The tasks come back with their delete files and residual filters, and the
scan reads them as it reads the tasks of its own planner.

The request pins the scan's snapshot (``snapshot-id``; for an incremental append scan
``start-snapshot-id`` and ``end-snapshot-id``), so the service plans exactly the table state the
client loaded, even if a commit landed since.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tablestore.errors import TableStoreError
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.expression_json import expression_from_json, expression_to_json
from tablestore.spec.expressions.expression_tree import BoundExpression
from tablestore.spec.manifests.content_file_json import content_file_from_json
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.schemas.types import IcebergType, StructType
from tablestore.table.read.scan import FileTask

if TYPE_CHECKING:
    from tablestore.table.read.scan import TableScan

PLAN_ENDPOINT = "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan"
TASKS_ENDPOINT = "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks"
SCAN_PLANNING_MODE = "scan-planning-mode"  # "server" (the default: when advertised) or "client"
POLL_WAIT_S = (0.05, 1.0)  # first and longest wait between polls of a submitted plan
POLL_TIMEOUT_S = 600.0

Request = Callable[..., Any]


class RestScanPlanner:
    """Plans the scans of one table through the service's planning endpoints."""

    def __init__(self, request: Request, table_url: str) -> None:
        self._send = request
        self.table_url = table_url

    def plan(self, scan: TableScan) -> list[FileTask]:
        if scan.snapshot is None:
            return []
        # An incremental scan sends its range (the spec's start/end-snapshot-id), else the snapshot.
        ids: dict[str, Any] = {"start-snapshot-id": scan.start_snapshot_id,
                               "end-snapshot-id": scan.snapshot.snapshot_id} if scan.incremental \
            else {"snapshot-id": scan.snapshot.snapshot_id}
        body: dict[str, Any] = {
            **ids,
            "filter": expression_to_json(scan.row_filter),
            "case-sensitive": scan.case_sensitive,
            "use-snapshot-schema": scan.uses_snapshot_schema,
        }
        if scan.columns is not None:
            body["select"] = list(scan.columns)
        result = self._send("POST", f"{self.table_url}/plan", json=body)
        plan_id = result.get("plan-id")
        try:
            result = self._until_done(result, plan_id)
            reader = _TaskReader(scan)
            tasks = reader.read(result)
            pending = list(result.get("plan-tasks") or [])
            while pending:
                page = self._send("POST", f"{self.table_url}/tasks", json={"plan-task": pending.pop(0)})
                tasks.extend(reader.read(page))
                pending.extend(page.get("plan-tasks") or [])
        except BaseException:
            if plan_id:
                self._cancel(plan_id)
            raise
        return tasks

    def _until_done(self, result: Mapping[str, Any], plan_id: str | None) -> Mapping[str, Any]:
        wait, deadline = POLL_WAIT_S[0], time.monotonic() + POLL_TIMEOUT_S
        while True:
            status = result.get("status")
            if status == "completed":
                return result
            if status == "failed":
                error = result.get("error") or {}
                raise TableStoreError(f"the catalog service failed to plan the scan: "
                                      f"{error.get('message') or error.get('type') or 'no reason given'}")
            if status == "cancelled":
                raise TableStoreError("the catalog service cancelled the scan plan; scan again")
            if status != "submitted" or not plan_id:
                raise TableStoreError(f"the catalog service answered a scan plan with status {status!r}")
            if time.monotonic() > deadline:
                raise TableStoreError(f"the catalog service did not finish planning within {POLL_TIMEOUT_S:.0f} s")
            time.sleep(wait)
            wait = min(wait * 2, POLL_WAIT_S[1])
            result = self._send("GET", f"{self.table_url}/plan/{plan_id}")

    def _cancel(self, plan_id: str) -> None:
        # Best effort: the service drops the plan after its time-to-live anyway.
        with contextlib.suppress(TableStoreError):
            self._send("DELETE", f"{self.table_url}/plan/{plan_id}")


class _TaskReader:
    """Turns ScanTasks JSON into FileTasks, binding each distinct residual once."""

    def __init__(self, scan: TableScan) -> None:
        self.scan = scan
        metadata = scan.metadata
        self.partition_types: dict[int, StructType] = {
            s.spec_id: s.partition_type_for(metadata.schemas) for s in metadata.partition_specs}
        self.column_types: dict[int, IcebergType] = {
            f.field_id: f.field_type for _, f in scan.table_schema.all_fields() if f.field_type.is_primitive}
        self._residuals: dict[str, BoundExpression] = {}

    def residual(self, obj: Any) -> BoundExpression | None:
        if obj is None:
            return None  # the spec: without a residual the client applies the whole filter
        key = json.dumps(obj, sort_keys=True)
        bound = self._residuals.get(key)
        if bound is None:
            schema, cs = self.scan.table_schema, self.scan.case_sensitive
            bound = self._residuals[key] = bind(schema, expression_from_json(obj, schema, cs), cs)
        return bound

    def read(self, page: Mapping[str, Any]) -> list[FileTask]:
        deletes: list[DataFile] = [content_file_from_json(d, self.partition_types)
                                   for d in page.get("delete-files") or []]
        tasks = []
        for obj in page.get("file-scan-tasks") or []:
            refs = obj.get("delete-file-references") or []
            if any(not isinstance(i, int) or not 0 <= i < len(deletes) for i in refs):
                raise TableStoreError(f"the catalog service sent a file scan task with delete file references "
                                       f"{refs} but {len(deletes)} delete files")
            data = content_file_from_json(obj["data-file"], self.partition_types, self.column_types)
            tasks.append(FileTask(data, 0, tuple(deletes[i] for i in refs), self.residual(obj.get("residual-filter"))))
        return tasks


__all__ = ["PLAN_ENDPOINT", "SCAN_PLANNING_MODE", "TASKS_ENDPOINT", "RestScanPlanner"]
