"""View requirements and updates of the REST spec (``CommitViewRequest``), applied to ViewMetadata.

The rules follow Java's ``ViewMetadata.Builder``: an added schema equal to an existing one is
reused, else it gets the highest id plus 1 (the first schema 0), whatever id the client gave it;
an added version identical to an existing one is reused, else it keeps its id unless that is not
above every existing one, when it gets the highest plus 1; a version with two queries for one
dialect is refused (400 IllegalArgumentException, Java's message);
``-1`` ids mean "the one added last in this commit"; setting the current version appends to the
version log and old versions expire past ``version.history.num-entries``.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from tablestore.errors import CommitConflictError, InvalidArgumentError, ValidationError
from tablestore.rest.routes.limits import check_properties
from tablestore.spec.metadata.view import (
    ViewHistoryEntry,
    ViewMetadata,
    ViewVersion,
    add_schema,
    expire_versions,
)
from tablestore.spec.schemas.schema import Schema


def check_view_requirements(requirements: list[Any], metadata: ViewMetadata) -> None:
    for requirement in requirements:
        if not isinstance(requirement, dict) or requirement.get("type") != "assert-view-uuid":
            raise ValidationError(f"unknown view requirement {requirement!r}; the spec defines assert-view-uuid")
        expected = str(requirement.get("uuid", ""))
        if expected.lower() != metadata.view_uuid.lower():
            raise CommitConflictError(
                f"Requirement failed: view UUID does not match: expected {expected} != {metadata.view_uuid}"
            )


def check_dialects(version: ViewVersion) -> None:
    """One query per dialect (case-insensitive), as Java's ``ViewMetadata.Builder`` checks."""
    seen: set[str] = set()
    for representation in version.representations:
        dialect = getattr(representation, "dialect", None)
        if dialect is None:
            continue
        if dialect.lower() in seen:
            raise InvalidArgumentError(
                f"Invalid view version: Cannot add multiple queries for dialect {dialect.lower()}"
            )
        seen.add(dialect.lower())


def _new_version_id(versions: tuple[ViewVersion, ...], requested: int) -> int:
    """Java's ``reuseOrCreateNewViewVersionId`` for a version not among ``versions``: the id
    asked for, unless an existing version's id is as high, then the highest plus 1."""
    new_id = requested
    for version in versions:
        if version.version_id >= new_id:
            new_id = version.version_id + 1
    return new_id


def _field(update: dict[str, Any], key: str) -> Any:
    if key not in update:
        raise ValidationError(f"view update {update.get('action')!r} is missing {key!r}")
    return update[key]


def apply_view_updates(metadata: ViewMetadata, updates: list[Any], now_ms: int) -> ViewMetadata:
    """The view metadata after ``updates`` (``metadata`` itself if nothing changed)."""
    md = metadata
    last_schema: int | None = None
    last_version: int | None = None
    for update in updates:
        if not isinstance(update, dict) or not isinstance(update.get("action"), str):
            raise ValidationError(f"a view update must be an object with an 'action', got {update!r}")
        action = update["action"]
        if action == "assign-uuid":
            if str(_field(update, "uuid")).lower() != md.view_uuid.lower():
                raise ValidationError("a view's uuid cannot be changed")
        elif action == "upgrade-format-version":
            if int(_field(update, "format-version")) != md.format_version:
                raise ValidationError(f"view format version {md.format_version} is the only one defined")
        elif action == "add-schema":
            schemas, last_schema = add_schema(md.schemas, Schema.from_json(_field(update, "schema")))
            md = replace(md, schemas=schemas)
        elif action == "set-location":
            md = replace(md, location=str(_field(update, "location")).rstrip("/"))
        elif action == "set-properties":
            updates_map = _field(update, "updates")
            if not isinstance(updates_map, dict):
                raise ValidationError("set-properties needs 'updates', an object of strings")
            new_properties = {str(k): str(v) for k, v in updates_map.items()}
            check_properties(new_properties, "set-properties")
            md = replace(md, properties={**md.properties, **new_properties})
        elif action == "remove-properties":
            removals = {str(k) for k in _field(update, "removals")}
            md = replace(md, properties={k: v for k, v in md.properties.items() if k not in removals})
        elif action == "add-view-version":
            version = ViewVersion.from_json(_field(update, "view-version"))
            if version.schema_id == -1:
                if last_schema is None:
                    raise ValidationError("add-view-version refers to schema -1 but no schema was added")
                version = replace(version, schema_id=last_schema)
            existing = next((v for v in md.versions if v.same_definition(version)), None)
            if existing is not None:
                last_version = existing.version_id
            else:
                if version.schema_id not in {s.schema_id for s in md.schemas}:
                    raise InvalidArgumentError(f"Cannot add version with unknown schema: {version.schema_id}")
                check_dialects(version)
                last_version = _new_version_id(md.versions, version.version_id)
                md = replace(md, versions=(*md.versions, replace(version, version_id=last_version)))
        elif action == "set-current-view-version":
            version_id = int(_field(update, "view-version-id"))
            if version_id == -1:
                if last_version is None:
                    raise ValidationError("set-current-view-version -1 needs an add-view-version before it")
                version_id = last_version
            if version_id not in {v.version_id for v in md.versions}:
                raise ValidationError(f"set-current-view-version: the view has no version {version_id}")
            if version_id != md.current_version_id:
                log = (*md.version_log, ViewHistoryEntry(now_ms, version_id))
                versions, log = expire_versions(md.versions, log, version_id, md.properties)
                md = replace(md, current_version_id=version_id, versions=versions, version_log=log)
        else:
            raise ValidationError(f"unknown view update action {action!r}")
    return md if md != metadata else metadata


def new_view_from_request(location: str, schema_json: Any, version_json: Any, properties: dict[str, str],
                          now_ms: int) -> ViewMetadata:
    """The metadata of a view created from a REST CreateViewRequest: as Java's
    ``setCurrentVersion(version, schema)`` on a new builder, the schema is the first (id 0) and the
    version, which refers to it, keeps its id."""
    schema = Schema.from_json(schema_json).with_id(0)
    version = ViewVersion.from_json(version_json)
    version = replace(version, schema_id=schema.schema_id)
    check_dialects(version)
    return ViewMetadata(
        view_uuid=str(uuid.uuid4()),
        location=location.rstrip("/"),
        schemas=(schema,),
        current_version_id=version.version_id,
        versions=(version,),
        version_log=(ViewHistoryEntry(now_ms, version.version_id),),
        properties=dict(properties),
    )


__all__ = ["apply_view_updates", "check_dialects", "check_view_requirements", "new_view_from_request"]
