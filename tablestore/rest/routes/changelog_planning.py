"""Server-side planning of a changelog: ``POST …/tables/{table}/plan-changelog``, a tablestore
extension of the REST protocol (docs/changes.md, "Over REST"), beside the spec's scan planning.

The request names the range as Iceberg's incremental scans do (``start-snapshot-id`` exclusive,
``end-snapshot-id`` inclusive, defaulting to the table's creation and its current snapshot). The
service plans it with the table core (:class:`~tablestore.table.read.changelog.ChangelogScan`)
and answers in one response, ``completed``:

- ``snapshots``: the snapshots of the range that may change rows, with their ordinal, sequence
  number and operation (a ``replace`` changes none and is left out, as in Java);
- ``delete-files``: every delete file a task needs, as the spec's content files, and
  ``delete-file-sequence-numbers``: the data sequence number of each, by position;
- ``change-tasks``: per data file whose live rows a snapshot changed, its ``ordinal`` and
  ``snapshot-id``, the spec's ``data-file`` with its ``data-sequence-number``, and
  ``before-delete-file-references`` / ``after-delete-file-references``: the deletes that applied
  to it before and after the snapshot (absent: the file was not live then).

A client computes the changes with no table code: the rows of a data file live before and not
after are DELETEs, the reverse INSERTs; rows deleted and re-inserted unchanged by one snapshot
(copy-on-write carry-overs) cancel out. The spec's append-scan form of ``…/plan`` stays as it is.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field

from tablestore.rest.access import ReadAccess
from tablestore.rest.routes.planning import readable
from tablestore.spec.manifests.content_file_json import content_file_to_json
from tablestore.spec.manifests.manifest import DataFile
from tablestore.spec.schemas.types import IcebergType
from tablestore.table.read.deletion_vectors import delete_file_key

router = APIRouter(prefix="/v1/{prefix}/namespaces/{namespace}/tables/{table}", tags=["changelog planning"])


class PlanChangelogRequest(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    start_snapshot_id: int | None = Field(default=None, alias="start-snapshot-id")
    end_snapshot_id: int | None = Field(default=None, alias="end-snapshot-id")
    stats_fields: list[str] | None = Field(default=None, alias="stats-fields")


@router.post("/plan-changelog")
def plan_changelog(
    namespace: str,
    table: str,
    access: ReadAccess,
    body: Annotated[PlanChangelogRequest | None, Body()] = None,
) -> dict[str, Any]:
    ident = readable(access, namespace, table)
    request = body or PlanChangelogRequest()
    loaded = access.catalog.load_table(ident)
    scan = loaded.changes(from_snapshot=request.start_snapshot_id, to_snapshot=request.end_snapshot_id,
                          compute_updates=False)
    plan = scan.plan()
    metadata = loaded.metadata
    partition_types = {s.spec_id: s.partition_type_for(metadata.schemas) for s in metadata.partition_specs}
    column_types: dict[int, IcebergType] = {
        f.field_id: f.field_type for _, f in scan.schema.all_fields() if f.field_type.is_primitive}
    stats = [f for f in (scan.schema.find_field_id(n) for n in request.stats_fields or []) if f is not None]
    deletes: list[dict[str, Any]] = []
    sequence_numbers: list[int] = []
    index: dict[tuple[str, int | None], int] = {}

    def refs(files: tuple[DataFile, ...]) -> list[int]:
        out = []
        for df in files:
            key = delete_file_key(df)
            if key not in index:
                index[key] = len(deletes)
                deletes.append(content_file_to_json(df, partition_types[df.spec_id]))
                sequence_numbers.append(plan.delete_sequence_numbers[key])
            out.append(index[key])
        return out

    tasks = []
    for task in plan.tasks:
        obj: dict[str, Any] = {
            "ordinal": task.ordinal, "snapshot-id": task.snapshot_id,
            "data-file": content_file_to_json(task.data_file, partition_types[task.data_file.spec_id], column_types,
                                              stats),
            "data-sequence-number": task.data_sequence_number,
        }
        if task.before_deletes is not None:
            obj["before-delete-file-references"] = refs(task.before_deletes)
        if task.after_deletes is not None:
            obj["after-delete-file-references"] = refs(task.after_deletes)
        tasks.append(obj)
    changing = [s for s in scan.range.snapshots if s.operation != "replace"]
    return {
        "status": "completed",
        "start-snapshot-id": scan.from_snapshot_id,
        "end-snapshot-id": scan.to_snapshot_id,
        "schema-id": scan.schema.schema_id,
        "snapshots": [{"ordinal": i, "snapshot-id": s.snapshot_id, "sequence-number": s.sequence_number,
                       "operation": s.operation} for i, s in enumerate(changing)],
        "delete-files": deletes,
        "delete-file-sequence-numbers": sequence_numbers,
        "change-tasks": tasks,
    }


__all__ = ["PlanChangelogRequest", "router"]
