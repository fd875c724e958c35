"""Request bodies of the REST catalog, as pydantic models (they make the OpenAPI document).

Schemas, specs, sort orders, snapshots and view versions stay plain JSON objects here: the
spec modules (``tablestore.spec``) parse and validate them, with their own error messages.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")


class CreateNamespaceRequest(_Model):
    namespace: list[str]
    properties: dict[str, str] = Field(default_factory=dict)


class UpdateNamespacePropertiesRequest(_Model):
    removals: list[str] = Field(default_factory=list)
    updates: dict[str, str] = Field(default_factory=dict)


class TableIdentifierModel(_Model):
    namespace: list[str]
    name: str


class CreateTableRequest(_Model):
    name: str
    location: str | None = None
    schema_: dict[str, Any] = Field(alias="schema")
    partition_spec: dict[str, Any] | None = Field(default=None, alias="partition-spec")
    write_order: dict[str, Any] | None = Field(default=None, alias="write-order")
    stage_create: bool = Field(default=False, alias="stage-create")
    properties: dict[str, str] = Field(default_factory=dict)


class RegisterTableRequest(_Model):
    name: str
    metadata_location: str = Field(alias="metadata-location")
    overwrite: bool = False


class RegisterViewRequest(_Model):
    name: str
    metadata_location: str = Field(alias="metadata-location")


class RenameRequest(_Model):
    source: TableIdentifierModel
    destination: TableIdentifierModel


class CommitTableRequest(_Model):
    identifier: TableIdentifierModel | None = None
    requirements: list[dict[str, Any]] = Field(default_factory=list)
    updates: list[dict[str, Any]] = Field(default_factory=list)


class CommitTransactionRequest(_Model):
    table_changes: list[CommitTableRequest] = Field(alias="table-changes")


class CreateViewRequest(_Model):
    name: str
    location: str | None = None
    schema_: dict[str, Any] = Field(alias="schema")
    view_version: dict[str, Any] = Field(alias="view-version")
    properties: dict[str, str] = Field(default_factory=dict)


class CommitViewRequest(_Model):
    identifier: TableIdentifierModel | None = None
    requirements: list[dict[str, Any]] = Field(default_factory=list)
    updates: list[dict[str, Any]] = Field(default_factory=list)


class CreateFunctionRequest(_Model):
    """tablestore's extension: a catalog function (``CREATE FUNCTION db.f AS 'class'``)."""

    name: str
    class_name: str = Field(alias="class-name")
    return_type: str | None = Field(default=None, alias="return-type")
    properties: dict[str, str] = Field(default_factory=dict)
    replace: bool = False


class PlanTableScanRequest(_Model):
    snapshot_id: int | None = Field(default=None, alias="snapshot-id")
    select: list[str] | None = None
    filter: Any = None  # the spec's Expression JSON, read by tablestore.spec.expressions.expression_json
    min_rows_requested: int | None = Field(default=None, alias="min-rows-requested")
    case_sensitive: bool = Field(default=True, alias="case-sensitive")
    use_snapshot_schema: bool = Field(default=False, alias="use-snapshot-schema")
    start_snapshot_id: int | None = Field(default=None, alias="start-snapshot-id")
    end_snapshot_id: int | None = Field(default=None, alias="end-snapshot-id")
    stats_fields: list[str] | None = Field(default=None, alias="stats-fields")


class FetchScanTasksRequest(_Model):
    plan_task: str = Field(alias="plan-task")


__all__ = [
    "CommitTableRequest", "CommitTransactionRequest", "CommitViewRequest", "CreateFunctionRequest",
    "CreateNamespaceRequest", "CreateTableRequest", "CreateViewRequest", "FetchScanTasksRequest",
    "PlanTableScanRequest", "RegisterTableRequest",
    "RegisterViewRequest", "RenameRequest", "TableIdentifierModel", "UpdateNamespacePropertiesRequest",
]
