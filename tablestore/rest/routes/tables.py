"""Table endpoints: list, create (and stage-create), register, load (ETag), exists, commit,
drop, rename, metrics, and the atomic multi-table ``transactions/commit``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache, partial
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Body, Header, Query, Response
from fastapi.responses import JSONResponse

from tablestore.catalog.base import Catalog, read_metadata_file
from tablestore.errors import TableStoreError, UnsupportedError, ValidationError
from tablestore.names import Identifier, metadata_directory, normalize_location
from tablestore.rest.access import (
    Access,
    ReadAccess,
    WriteAccess,
)
from tablestore.rest.auth.grants import Privilege, table_securable
from tablestore.rest.auth.tokens import LOCATION_PROPERTIES
from tablestore.rest.paths import identifier_of
from tablestore.rest.routes.limits import check_properties
from tablestore.rest.routes.models import (
    CommitTableRequest,
    CommitTransactionRequest,
    CreateTableRequest,
    RegisterTableRequest,
    RenameRequest,
)
from tablestore.rest.routes.namespaces import page
from tablestore.rest.state.metadata_cache import metadata_json
from tablestore.rest.state.served_catalog import ServedSqlCatalog
from tablestore.spec.metadata.table_metadata import TableMetadata, new_table_metadata
from tablestore.spec.metadata.update_models import (
    AssertCreate,
    SetLocationUpdate,
    SetPropertiesUpdate,
    TableRequirement,
    TableUpdate,
    requirement_from_json,
    update_from_json,
)
from tablestore.spec.partitioning.partition_spec import UNPARTITIONED_SPEC, PartitionSpec
from tablestore.spec.partitioning.sort_order import UNSORTED_ORDER, SortOrder
from tablestore.spec.schemas.schema import Schema

router = APIRouter(prefix="/v1/{prefix}", tags=["tables"])
T = TypeVar("T")


def parsed(what: str, parse: Callable[[], T]) -> T:
    """``parse()``, with malformed JSON reported as a ValidationError (400) naming ``what``."""
    try:
        return parse()
    except TableStoreError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise ValidationError(f"malformed {what}: {type(e).__name__}: {e}") from None


def load_result(access: Access, location: str | None, metadata: TableMetadata,
                ident: Identifier | None = None) -> dict[str, Any]:
    config, credentials = access.table_config(metadata.location, metadata.properties, ident)
    result: dict[str, Any] = {"metadata-location": location, "metadata": metadata.to_json(), "config": config}
    if credentials:
        result["storage-credentials"] = credentials
    return result


def _metadata_json(access: Access, location: str, metadata: TableMetadata) -> bytes:
    catalog = access.catalog
    if isinstance(catalog, ServedSqlCatalog):
        return catalog.metadata_json(location, metadata)
    return metadata_json(metadata)


def table_response(access: Access, location: str, metadata: TableMetadata, with_config: bool = True,
                   headers: dict[str, str] | None = None, ident: Identifier | None = None) -> Response:
    """A LoadTableResult (or, without config, a CommitTableResponse) for a committed metadata file.

    The metadata's JSON is spliced in as bytes serialized once per file, which is most of the
    cost of answering a load.
    """
    parts = [b'{"metadata-location":', json.dumps(location).encode("utf-8"),
             b',"metadata":', _metadata_json(access, location, metadata)]
    if with_config:
        config, credentials = access.table_config(metadata.location, metadata.properties, ident)
        parts += [b',"config":', json.dumps(config).encode("utf-8")]
        if credentials:
            parts += [b',"storage-credentials":', json.dumps(credentials).encode("utf-8")]
    parts.append(b"}")
    return Response(b"".join(parts), media_type="application/json", headers=headers)


def _changes(access: Access, change: CommitTableRequest) -> tuple[list[TableRequirement], list[TableUpdate]]:
    requirements = [parsed("requirement", partial(requirement_from_json, r)) for r in change.requirements]
    updates = [parsed("update", partial(update_from_json, u)) for u in change.updates]
    for update in updates:
        if isinstance(update, SetLocationUpdate):
            access.check_location(update.location, "table location")
        elif isinstance(update, SetPropertiesUpdate):
            check_properties(update.updates, "set-properties")
            for key in LOCATION_PROPERTIES:
                if key in update.updates:
                    access.check_location(update.updates[key], f"table property {key}")
    return requirements, updates


def require_commit(access: Access, ident: Identifier, requirements: list[TableRequirement]) -> None:
    """A commit needs WRITE on the table; one that creates it (a staged create's assert-create)
    needs CREATE on its namespace too."""
    if any(isinstance(r, AssertCreate) for r in requirements):
        access.require_namespace(Privilege.CREATE, ident[:-1])
    access.require_table(Privilege.WRITE, ident)


def require_rename(access: Access, source: Identifier, destination: Identifier) -> None:
    """A rename drops the source and creates the destination."""
    access.require_table(Privilege.DROP, source)
    access.require_namespace(Privilege.CREATE, destination[:-1])


@router.get("/namespaces/{namespace}/tables")
def list_tables(
    namespace: str,
    access: ReadAccess,
    page_token: str | None = Query(default=None, alias="pageToken"),
    page_size: int | None = Query(default=None, alias="pageSize"),
) -> dict[str, Any]:
    ns = access.parse_namespace(namespace)
    whole = access.require_listing(ns)
    found, token = page(access.visible(access.catalog.list_tables(ns), "table", whole), page_token, page_size)
    return {"identifiers": [{"namespace": list(i[:-1]), "name": i[-1]} for i in found], "next-page-token": token}


@router.post("/namespaces/{namespace}/tables")
def create_table(namespace: str, body: CreateTableRequest, access: WriteAccess) -> Response:
    catalog = access.catalog
    ident = access.parse_identifier(namespace, body.name)
    access.require_namespace(Privilege.CREATE, ident[:-1])
    schema = parsed("schema", lambda: Schema.from_json(body.schema_))
    spec = parsed("partition-spec", partial(PartitionSpec.from_json, body.partition_spec)) \
        if body.partition_spec else UNPARTITIONED_SPEC
    order = parsed("write-order", partial(SortOrder.from_json, body.write_order)) \
        if body.write_order else UNSORTED_ORDER
    check_properties(body.properties, "table properties")
    location = normalize_location(body.location) if body.location else catalog.default_table_location(ident)
    access.check_location(location, "table location")
    for key in LOCATION_PROPERTIES:
        if key in body.properties:
            access.check_location(body.properties[key], f"table property {key}")
    if body.stage_create:
        # Nothing is written: the client commits the table later with assert-create.
        if not catalog.namespace_exists(ident[:-1]):
            catalog.load_namespace_properties(ident[:-1])  # raises NoSuchNamespaceError
        metadata = new_table_metadata(schema, spec, order, location, dict(body.properties))
        # The client writes its first manifests before it commits the table; on a local
        # warehouse the directory must exist for writers that do not create it (DuckDB's
        # CREATE TABLE AS SELECT failed there).
        catalog.table_io(metadata).make_local_directory(metadata_directory(metadata))
        return JSONResponse(load_result(access, None, metadata, ident))
    table = catalog.create_table(ident, schema, spec, order, body.properties, location)
    return table_response(access, table.metadata_location, table.metadata, ident=ident)


@router.post("/namespaces/{namespace}/register")
def register_table(namespace: str, body: RegisterTableRequest, access: WriteAccess) -> Response:
    ident = access.parse_identifier(namespace, body.name)
    access.require_namespace(Privilege.CREATE, ident[:-1])
    if body.overwrite:
        # Overwriting replaces an existing table's metadata: a commit of it.
        access.require_table(Privilege.WRITE, ident)
    access.check_location(body.metadata_location, "metadata location")
    # Checked before registering: a table whose files live elsewhere must not enter the catalog.
    access.check_location(read_metadata_file(access.catalog.io, body.metadata_location).location, "table location")
    catalog = access.catalog
    if body.overwrite:
        if not isinstance(catalog, ServedSqlCatalog):
            raise UnsupportedError("this catalog cannot register with overwrite; drop the table first")
        table = catalog.register_table_overwrite(ident, body.metadata_location)
    else:
        table = catalog.register_table(ident, body.metadata_location)
    return table_response(access, table.metadata_location, table.metadata, ident=ident)


@lru_cache(maxsize=4096)  # a load's every answer of one file: the digest once (it was 3% of a load's CPU)
def etag_of(metadata_location: str, snapshots: str) -> str:
    """The ETag of a load: its metadata file and the snapshots asked for."""
    return '"' + hashlib.sha256(f"{metadata_location}|{snapshots}".encode()).hexdigest()[:32] + '"'


@router.get("/namespaces/{namespace}/tables/{table}")
def load_table(
    namespace: str,
    table: str,
    access: ReadAccess,
    snapshots: str = Query(default="all", pattern="^(all|refs)$"),
    if_none_match: str | None = Header(default=None),
) -> Response:
    ident = access.parse_identifier(namespace, table)
    access.require_table(Privilege.READ, ident)
    location, metadata = access.catalog.load_table_metadata(ident)
    etag = etag_of(location, snapshots)
    if if_none_match and (if_none_match.strip() == "*" or etag in [t.strip() for t in if_none_match.split(",")]):
        return Response(status_code=304, headers={"ETag": etag})
    if snapshots == "refs":
        referenced = {ref.snapshot_id for ref in metadata.refs.values()}
        metadata = replace(metadata, snapshots=tuple(s for s in metadata.snapshots if s.snapshot_id in referenced))
        return JSONResponse(load_result(access, location, metadata, ident), headers={"ETag": etag})
    return table_response(access, location, metadata, headers={"ETag": etag}, ident=ident)


@router.head("/namespaces/{namespace}/tables/{table}", status_code=204)
def table_exists(namespace: str, table: str, access: ReadAccess) -> Response:
    ident = access.parse_identifier(namespace, table)
    access.require_table(Privilege.READ, ident)
    exists = access.catalog.table_exists(ident)
    return Response(status_code=204 if exists else 404)


@router.post("/namespaces/{namespace}/tables/{table}")
def commit_table(namespace: str, table: str, body: CommitTableRequest, access: WriteAccess) -> Response:
    return commit_response(access, namespace, table, body)


def commit_response(access: Access, namespace: str, table: str, body: CommitTableRequest) -> Response:
    """The commit of a table (``POST .../tables/{table}``) by a caller holding the write role,
    answered: the route's work, shared with the envelope's (:mod:`tablestore.rest.routes.table_commits`)."""
    ident, requirements, updates = commit_request(access, namespace, table, body)
    location, metadata = access.catalog.commit_table(ident, requirements, updates)
    # A response object skips FastAPI's jsonable_encoder, which costs more than the commit's SQL.
    return table_response(access, location, metadata, with_config=False)


def commit_request(access: Access, namespace: str, table: str, body: CommitTableRequest
                   ) -> tuple[Identifier, list[TableRequirement], list[TableUpdate]]:
    """A table commit's table, requirements and updates, parsed and checked: its locations, and
    the caller's privileges on the table (a database read under grants)."""
    ident = access.parse_identifier(namespace, table)
    requirements, updates = _changes(access, body)
    require_commit(access, ident, requirements)
    return ident, requirements, updates


@router.delete("/namespaces/{namespace}/tables/{table}", status_code=204)
def drop_table(
    namespace: str,
    table: str,
    access: WriteAccess,
    purge_requested: bool = Query(default=False, alias="purgeRequested"),
) -> Response:
    ident = access.parse_identifier(namespace, table)
    access.require_table(Privilege.DROP, ident)
    access.catalog.drop_table(ident, purge=purge_requested)
    access.forget(table_securable(ident))
    return Response(status_code=204)


@router.post("/tables/rename", status_code=204)
def rename_table(body: RenameRequest, access: WriteAccess) -> Response:
    source = identifier_of(body.source.namespace, body.source.name)
    destination = identifier_of(body.destination.namespace, body.destination.name)
    require_rename(access, source, destination)
    access.catalog.rename_table(source, destination)
    access.moved(source, destination)
    return Response(status_code=204)


@router.post("/namespaces/{namespace}/tables/{table}/metrics", status_code=204)
def report_metrics(
    namespace: str, table: str, access: ReadAccess, _body: Annotated[dict[str, Any] | None, Body()] = None
) -> Response:
    # Accepted and dropped: the spec makes reporting best-effort, and no one reads them here.
    access.require_table(Privilege.READ, access.parse_identifier(namespace, table))
    return Response(status_code=204)


@router.post("/transactions/commit", status_code=204)
def commit_transaction(body: CommitTransactionRequest, access: WriteAccess) -> Response:
    changes: list[tuple[Identifier, list[TableRequirement], list[TableUpdate]]] = []
    for change in body.table_changes:
        if change.identifier is None:
            raise ValidationError("every table change of a transaction needs its 'identifier'")
        ident = identifier_of(change.identifier.namespace, change.identifier.name)
        requirements, updates = _changes(access, change)
        require_commit(access, ident, requirements)
        changes.append((ident, requirements, updates))
    if not changes:
        raise ValidationError("a transaction needs at least one table change")
    catalog: Catalog = access.catalog
    catalog.commit_tables(changes)
    return Response(status_code=204)


__all__ = ["commit_request", "commit_response", "etag_of", "load_result", "parsed", "require_commit",
           "require_rename", "router", "table_response"]
