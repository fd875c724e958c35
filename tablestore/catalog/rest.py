"""The ``rest`` catalog: tablestore's client of an Iceberg REST catalog service.

``RestCatalog(name, uri="http://host:8181", token=... | credential="client-id:client-secret",
warehouse=<served catalog>)``. The server hands out the file-IO settings (``s3.*``) in
``/v1/config`` and in every LoadTableResult ``config``, so a client needs only the URI and a token.
It asks for vended credentials (``X-Iceberg-Access-Delegation: vended-credentials``) and uses a
table's ``storage-credentials`` (longest prefix of the table location) over its ``config``;
credentials about to expire are renewed at ``GET .../tables/{t}/credentials``.
Data files are written by the client; metadata files and pointer swaps are the server's, so a
commit is one request that the server makes atomic.

Functions use tablestore's extension endpoints (``/v1/{prefix}/namespaces/{ns}/functions``).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote

import requests

from tablestore.catalog.base import Catalog, FunctionDef, PropertiesUpdateSummary, new_table_properties
from tablestore.catalog.rest_planning import PLAN_ENDPOINT, SCAN_PLANNING_MODE, TASKS_ENDPOINT, RestScanPlanner
from tablestore.errors import (
    AlreadyExistsError,
    CommitConflictError,
    CommitStateUnknownError,
    CorruptMetadataError,
    ForbiddenError,
    FunctionAlreadyExistsError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchFunctionError,
    NoSuchNamespaceError,
    NoSuchTableError,
    NoSuchViewError,
    NotAuthorizedError,
    NotFoundError,
    TableAlreadyExistsError,
    TableStoreError,
    UnsupportedError,
    ValidationError,
    ViewAlreadyExistsError,
)
from tablestore.io import load_file_io
from tablestore.io.fileio import FileIO
from tablestore.names import (
    Identifier,
    IdentifierLike,
    identifier_str,
    to_function_identifier,
    to_namespace,
    to_table_identifier,
    to_view_identifier,
)
from tablestore.spec.metadata.table_metadata import TableMetadata
from tablestore.spec.metadata.view import COMMENT_PROPERTY, View, ViewMetadata, new_view_metadata
from tablestore.spec.partitioning.partition_spec import PartitionSpec, build_partition_spec
from tablestore.spec.schemas.schema import to_schema

if TYPE_CHECKING:
    import pyarrow as pa

    from tablestore.spec.metadata.update_models import TableRequirement, TableUpdate
    from tablestore.spec.partitioning.partition_spec import PartitionSpec
    from tablestore.spec.partitioning.sort_order import SortOrder
    from tablestore.spec.schemas.schema import Schema
    from tablestore.table import Table

URI = "uri"
TOKEN = "token"
CREDENTIAL = "credential"
SERVER_WAREHOUSE = "warehouse"  # for a REST catalog: which of the server's catalogs to use
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 120.0
# Vended credentials with less than this left are renewed before a table's files are touched.
RENEW_BEFORE_EXPIRY_S = 300.0
EXPIRES_AT = "s3.session-token-expires-at-ms"
_NOT_FOUND = {
    "NoSuchNamespaceException": NoSuchNamespaceError,
    "NoSuchTableException": NoSuchTableError,
    "NoSuchViewException": NoSuchViewError,
    "NoSuchFunctionException": NoSuchFunctionError,
}


def _seg(text: str) -> str:
    return quote(text, safe="")


def uuid7() -> str:
    """A UUIDv7 (RFC 9562: 48 bits of Unix milliseconds, then random bits), the form the REST
    spec asks for an Idempotency-Key (Python 3.11 has no uuid.uuid7)."""
    value = (int(time.time() * 1000) & (2**48 - 1)) << 80 | secrets.randbits(80)
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # the RFC 4122 variant
    hexed = f"{value:032x}"
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"


def _session_for(uri: str) -> requests.Session:
    """An HTTP session to the service, with the environment's proxy and CA bundle settings
    resolved once: every request goes to the same host, and requests would otherwise scan the
    whole environment (and ~/.netrc) again on each one, which costs more CPU than the request."""
    session = requests.Session()
    session.proxies.update(requests.utils.get_environ_proxies(uri))
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle:
        session.verify = bundle
    session.trust_env = False
    return session


class RestCatalog(Catalog):
    """A catalog served by ``tablestore catalog serve`` (or any Iceberg REST catalog)."""

    def __init__(self, name: str, **properties: str) -> None:
        props = {k: str(v) for k, v in properties.items() if v is not None}
        uri = props.get(URI, "").rstrip("/")
        if not uri.startswith(("http://", "https://")):
            raise ValidationError("a rest catalog needs uri=http(s)://host:port of the catalog service")
        self.uri = uri
        self.name = name  # set again by Catalog.__init__; here for reprs of errors raised before
        self._session = _session_for(uri)
        token = props.get(TOKEN)
        # Kept to ask for a new token when the issued one expires (a 401 on a request).
        self._credential = props.get(CREDENTIAL) if not token else None
        if self._credential:
            token = self._fetch_token(self._credential)
        if token:
            self._session.headers["Authorization"] = f"Bearer {token}"
        # The spec's signal that this client takes scoped credentials for table files.
        self._session.headers["X-Iceberg-Access-Delegation"] = "vended-credentials"
        params = {SERVER_WAREHOUSE: props[SERVER_WAREHOUSE]} if props.get(SERVER_WAREHOUSE) else None
        config = self._request("GET", f"{self.uri}/v1/config", params=params)
        # The spec: a server that advertises a key lifetime replays retried mutations that carry
        # an Idempotency-Key, so a request whose response was lost can be sent again safely.
        self._idempotent = bool(config.get("idempotency-key-lifetime"))
        self._endpoints = {str(e) for e in config.get("endpoints") or []}
        overrides = dict(config.get("overrides") or {})
        prefix = overrides.get("prefix") or props.get("prefix") or ""
        self.prefix = prefix  # the served catalog's name on the service
        self._base = f"{self.uri}/v1/{prefix}".rstrip("/")
        merged = {**dict(config.get("defaults") or {}), **props, **overrides}
        # The server owns the warehouse; locally the name would read as a path.
        merged.pop(SERVER_WAREHOUSE, None)
        merged = {k: v for k, v in merged.items() if k not in (TOKEN, CREDENTIAL)}
        self._table_configs: dict[str, dict[str, str]] = {}
        self._table_ios: dict[str, FileIO] = {}
        self._identifiers: dict[str, Identifier] = {}  # table location -> name, to renew credentials
        super().__init__(name, **merged)
        mode = self.properties.get(SCAN_PLANNING_MODE, "server")
        if mode not in ("server", "client"):
            raise ValidationError(f"{SCAN_PLANNING_MODE} must be 'server' (plan on the service when it offers "
                                  f"to) or 'client' (always plan here), got {mode!r}")
        self._plan_on_server = mode == "server" and {PLAN_ENDPOINT, TASKS_ENDPOINT} <= self._endpoints

    def __repr__(self) -> str:
        return f"RestCatalog(name={self.name!r}, uri={self.uri!r})"

    def close(self) -> None:
        self._session.close()

    # -- HTTP --------------------------------------------------------------------------------------
    def _fetch_token(self, credential: str) -> str:
        client_id, sep, secret = credential.partition(":")
        if not sep:
            raise ValidationError("credential must be 'client-id:client-secret'")
        try:
            response = self._session.post(
                f"{self.uri}/v1/oauth/tokens",
                data={"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret,
                      "scope": "catalog"},
                timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
            )
        except requests.RequestException as e:
            raise TableStoreError(f"cannot reach the catalog service at {self.uri}: {type(e).__name__}") from None
        if response.status_code != 200:
            raise NotAuthorizedError(f"the catalog service refused the client credentials of {client_id!r}")
        return str(response.json()["access_token"])

    def _request(
        self,
        method: str,
        url: str,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        conflict: type[TableStoreError] = AlreadyExistsError,
        commit: bool = False,
    ) -> Any:
        headers = None
        if method in ("POST", "DELETE") and getattr(self, "_idempotent", False):
            headers = {"Idempotency-Key": uuid7()}
        try:
            try:
                response = self._session.request(method, url, json=json, params=params, headers=headers,
                                                 timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S))
            except (requests.ConnectionError, requests.ReadTimeout):
                if headers is None:
                    raise
                # The response was lost (or the request never arrived): the same key makes the
                # retry replay the first response if the server applied it.
                response = self._session.request(method, url, json=json, params=params, headers=headers,
                                                 timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S))
            if response.status_code == 401 and self._credential:
                # The issued token expired (or the server's signing secret changed): a 401 means
                # the request was not applied, so it is safe to send again with a new token.
                self._session.headers["Authorization"] = f"Bearer {self._fetch_token(self._credential)}"
                response = self._session.request(method, url, json=json, params=params, headers=headers,
                                                 timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S))
        except requests.RequestException as e:
            if commit and not isinstance(e, requests.ConnectTimeout | requests.exceptions.SSLError):
                # The request may have reached the server and been applied.
                raise CommitStateUnknownError(
                    f"commit to the catalog service at {self.uri} may or may not have been applied "
                    f"({type(e).__name__}); reload the table to check"
                ) from None
            raise TableStoreError(f"cannot reach the catalog service at {self.uri}: {type(e).__name__}") from None
        if response.status_code in (200, 204) or (method == "HEAD" and response.status_code < 300):
            return response.json() if response.content else None
        self._raise(response, conflict, commit)

    def service_request(self, method: str, path: str, json: Any = None,
                        params: Mapping[str, str] | None = None) -> Any:
        """A request to the service's own API beside the Iceberg protocol (such as the grants'
        ``/v1/admin/grants``), authenticated as this catalog is; its JSON answer."""
        return self._request(method, f"{self.uri}{path}", json=json, params=params)

    def _raise(self, response: requests.Response, conflict: type[TableStoreError], commit: bool) -> NoReturn:
        status = response.status_code
        try:
            error = response.json().get("error") or {}
            message, kind = str(error.get("message") or ""), str(error.get("type") or "")
        except (ValueError, AttributeError):
            message, kind = response.text[:200], ""
        message = message or f"the catalog service answered {status}"
        if status == 401:
            raise NotAuthorizedError(f"not authorized by the catalog service: {message}")
        if status == 403:
            raise ForbiddenError(f"forbidden by the catalog service: {message}")
        if status == 404:
            raise _NOT_FOUND.get(kind, NotFoundError)(message)
        if status == 409:
            if kind == "CommitFailedException":
                raise CommitConflictError(message)
            if kind == "NamespaceNotEmptyException":
                raise NamespaceNotEmptyError(message)
            raise conflict(message)
        if status == 406:
            raise UnsupportedError(message)
        if status == 422:
            raise CorruptMetadataError(message)
        if 400 <= status < 500:
            raise ValidationError(message)
        if commit:
            raise CommitStateUnknownError(f"commit state unknown ({status}): {message}; reload the table to check")
        raise TableStoreError(f"the catalog service failed ({status}): {message}")

    def _ns_url(self, namespace: Identifier) -> str:
        return f"{self._base}/namespaces/{'%1F'.join(_seg(level) for level in namespace)}"

    def _object_url(self, identifier: Identifier, kind: str) -> str:
        return f"{self._ns_url(identifier[:-1])}/{kind}/{_seg(identifier[-1])}"

    def _exists(self, url: str) -> bool:
        try:
            self._request("HEAD", url)
        except NotFoundError:
            return False
        return True

    # -- namespaces ------------------------------------------------------------------------------
    def create_namespace(self, namespace: IdentifierLike, properties: Mapping[str, str] | None = None) -> None:
        ns = to_namespace(namespace)
        self._request("POST", f"{self._base}/namespaces",
                      json={"namespace": list(ns), "properties": dict(properties or {})},
                      conflict=NamespaceAlreadyExistsError)

    def drop_namespace(self, namespace: IdentifierLike) -> None:
        self._request("DELETE", self._ns_url(to_namespace(namespace)))

    def list_namespaces(self, parent: IdentifierLike = ()) -> list[Identifier]:
        parent_ns = to_namespace(parent, allow_root=True)
        params = {"parent": "\x1f".join(parent_ns)} if parent_ns else None
        body = self._request("GET", f"{self._base}/namespaces", params=params)
        return sorted(tuple(ns) for ns in body["namespaces"])

    def load_namespace_properties(self, namespace: IdentifierLike) -> dict[str, str]:
        body = self._request("GET", self._ns_url(to_namespace(namespace)))
        return dict(body.get("properties") or {})

    def update_namespace_properties(
        self, namespace: IdentifierLike, removals: set[str] | None = None, updates: Mapping[str, str] | None = None
    ) -> PropertiesUpdateSummary:
        body = self._request("POST", f"{self._ns_url(to_namespace(namespace))}/properties",
                             json={"removals": sorted(removals or ()), "updates": dict(updates or {})})
        return PropertiesUpdateSummary(removed=list(body.get("removed") or []),
                                       updated=list(body.get("updated") or []),
                                       missing=list(body.get("missing") or []))

    def namespace_exists(self, namespace: IdentifierLike) -> bool:
        return self._exists(self._ns_url(to_namespace(namespace)))

    # -- tables ----------------------------------------------------------------------------------
    def list_tables(self, namespace: IdentifierLike) -> list[Identifier]:
        body = self._request("GET", f"{self._ns_url(to_namespace(namespace))}/tables")
        return sorted((*i["namespace"], i["name"]) for i in body["identifiers"])

    def table_exists(self, identifier: IdentifierLike) -> bool:
        return self._exists(self._object_url(to_table_identifier(identifier), "tables"))

    def _remember(self, body: Mapping[str, Any]) -> tuple[str, TableMetadata]:
        metadata = TableMetadata.from_json(body["metadata"])
        if body.get("config") is not None:
            config = {str(k): str(v) for k, v in body["config"].items()}
            # The spec: storage-credentials come before credentials in config.
            config.update(_best_credentials(body.get("storage-credentials"), metadata.location))
            self._table_configs[metadata.location] = config
            self._table_ios.pop(metadata.location, None)
        return str(body["metadata-location"]), metadata

    def load_table_metadata(self, identifier: IdentifierLike) -> tuple[str, TableMetadata]:
        ident = to_table_identifier(identifier)
        body = self._request("GET", self._object_url(ident, "tables"))
        try:
            location, metadata = self._remember(body)
        except UnsupportedError as e:
            raise UnsupportedError(f"cannot load table {identifier_str(ident)}: {e}") from None
        self._identifiers[metadata.location] = ident
        return location, metadata

    def load_credentials(self, identifier: IdentifierLike) -> list[dict[str, Any]]:
        """The table's vended ``storage-credentials`` (``GET .../tables/{t}/credentials``)."""
        body = self._request("GET", f"{self._object_url(to_table_identifier(identifier), 'tables')}/credentials")
        return list(body.get("storage-credentials") or [])

    def _renew_if_expiring(self, metadata: TableMetadata) -> None:
        config = self._table_configs.get(metadata.location)
        expires_at = (config or {}).get(EXPIRES_AT)
        if not config or not expires_at or int(expires_at) / 1000 - time.time() > RENEW_BEFORE_EXPIRY_S:
            return
        identifier = self._identifiers.get(metadata.location)
        if identifier is None:
            return
        fresh = _best_credentials(self.load_credentials(identifier), metadata.location)
        if fresh:
            self._table_configs[metadata.location] = {**config, **fresh}
            self._table_ios.pop(metadata.location, None)

    def scan_planner(self, identifier: Identifier) -> RestScanPlanner | None:
        """The service plans this catalog's scans when it advertises scan planning, unless
        ``scan-planning-mode: client``."""
        if not self._plan_on_server:
            return None
        return RestScanPlanner(self._request, self._object_url(to_table_identifier(identifier), "tables"))

    def table_io(self, metadata: TableMetadata) -> FileIO:
        """The FileIO for a table, from the ``config`` and credentials the server handed out with it."""
        self._renew_if_expiring(metadata)
        io = self._table_ios.get(metadata.location)
        if io is None:
            config = self._table_configs.get(metadata.location, {})
            overrides = {k: v for k, v in metadata.properties.items() if k.startswith("s3.")}
            props = {**self.properties, **config, **overrides}
            io = self.io if props == self.properties else load_file_io(props, metadata.location)
            self._table_ios[metadata.location] = io
        return io

    def create_table(
        self,
        identifier: IdentifierLike,
        schema: Schema | pa.Schema,
        partition_by: Sequence[str] | str | PartitionSpec | None = None,
        sort_order: SortOrder | None = None,
        properties: Mapping[str, str] | None = None,
        location: str | None = None,
        format_version: int | None = None,
    ) -> Table:
        ident = to_table_identifier(identifier)
        # The REST spec carries the format version as the format-version property.
        # The client's own table-default.* / table-override.* apply, as in Java's REST client;
        # the server may add its own.
        table_properties = new_table_properties(self.properties, properties, format_version)
        table_schema = to_schema(schema, table_properties)
        request: dict[str, Any] = {"name": ident[-1], "schema": table_schema.to_json(),
                                   "properties": table_properties}
        if partition_by is not None:
            if isinstance(partition_by, PartitionSpec):
                spec = partition_by
            else:
                exprs = [partition_by] if isinstance(partition_by, str) else list(partition_by)
                spec = build_partition_spec(table_schema, exprs)
            request["partition-spec"] = spec.to_json()
        if sort_order is not None:
            request["write-order"] = sort_order.to_json()
        if location:
            request["location"] = location
        body = self._request("POST", f"{self._ns_url(ident[:-1])}/tables", json=request,
                             conflict=TableAlreadyExistsError)
        metadata_location, metadata = self._remember(body)
        self._identifiers[metadata.location] = ident
        return self._make_table(ident, metadata_location, metadata)

    def register_table(self, identifier: IdentifierLike, metadata_location: str, overwrite: bool = False) -> Table:
        """Add a table by its metadata file; with ``overwrite``, an existing table of that name
        is pointed at the file instead (the REST spec's RegisterTableRequest ``overwrite``)."""
        ident = to_table_identifier(identifier)
        request: dict[str, Any] = {"name": ident[-1], "metadata-location": metadata_location}
        if overwrite:
            request["overwrite"] = True
        body = self._request("POST", f"{self._ns_url(ident[:-1])}/register", json=request,
                             conflict=TableAlreadyExistsError)
        location, metadata = self._remember(body)
        return self._make_table(ident, location, metadata)

    def drop_table(self, identifier: IdentifierLike, purge: bool = False) -> None:
        ident = to_table_identifier(identifier)
        self._request("DELETE", self._object_url(ident, "tables"),
                      params={"purgeRequested": "true" if purge else "false"})

    def rename_table(self, from_identifier: IdentifierLike, to_identifier: IdentifierLike) -> Table:
        src, dst = to_table_identifier(from_identifier), to_table_identifier(to_identifier)
        self._request("POST", f"{self._base}/tables/rename", conflict=TableAlreadyExistsError, json={
            "source": {"namespace": list(src[:-1]), "name": src[-1]},
            "destination": {"namespace": list(dst[:-1]), "name": dst[-1]},
        })
        return self.load_table(dst)

    def commit_table(
        self, identifier: IdentifierLike, requirements: Sequence[TableRequirement], updates: Sequence[TableUpdate]
    ) -> tuple[str, TableMetadata]:
        ident = to_table_identifier(identifier)
        body = self._request("POST", self._object_url(ident, "tables"), commit=True, conflict=CommitConflictError,
                             json={"identifier": {"namespace": list(ident[:-1]), "name": ident[-1]},
                                   "requirements": [r.to_json() for r in requirements],
                                   "updates": [u.to_json() for u in updates]})
        return self._remember(body)

    def commit_tables(
        self, changes: Sequence[tuple[IdentifierLike, Sequence[TableRequirement], Sequence[TableUpdate]]]
    ) -> list[tuple[str, TableMetadata]]:
        idents = [to_table_identifier(i) for i, _, _ in changes]
        self._request("POST", f"{self._base}/transactions/commit", commit=True, conflict=CommitConflictError,
                      json={"table-changes": [
                          {"identifier": {"namespace": list(ident[:-1]), "name": ident[-1]},
                           "requirements": [r.to_json() for r in reqs], "updates": [u.to_json() for u in ups]}
                          for ident, (_, reqs, ups) in zip(idents, changes, strict=True)
                      ]})
        return [self.load_table_metadata(ident) for ident in idents]

    def _create_table_entry(self, identifier: Identifier, metadata_location: str) -> None:
        self.register_table(identifier, metadata_location)

    def _drop_table_entry(self, identifier: Identifier) -> None:
        self.drop_table(identifier)

    # -- views -----------------------------------------------------------------------------------
    def list_views(self, namespace: IdentifierLike) -> list[Identifier]:
        body = self._request("GET", f"{self._ns_url(to_namespace(namespace))}/views")
        return sorted((*i["namespace"], i["name"]) for i in body["identifiers"])

    def view_exists(self, identifier: IdentifierLike) -> bool:
        return self._exists(self._object_url(to_view_identifier(identifier), "views"))

    def load_view_metadata(self, identifier: IdentifierLike) -> tuple[str, ViewMetadata]:
        body = self._request("GET", self._object_url(to_view_identifier(identifier), "views"))
        return str(body["metadata-location"]), ViewMetadata.from_json(body["metadata"])

    def create_view(
        self,
        identifier: IdentifierLike,
        sql: str,
        schema: Schema | pa.Schema,
        default_catalog: str | None = None,
        default_namespace: IdentifierLike = (),
        properties: Mapping[str, str] | None = None,
        replace: bool = False,
        comment: str | None = None,
    ) -> View:
        ident = to_view_identifier(identifier)
        view_schema = to_schema(schema)
        props = {str(k): str(v) for k, v in (properties or {}).items()}
        if comment is not None:
            props[COMMENT_PROPERTY] = comment
        namespace_default = to_namespace(default_namespace, allow_root=True)
        if replace and self.view_exists(ident):
            base_location, base = self.load_view_metadata(ident)
            new = base.replace(sql, view_schema, namespace_default, default_catalog, props)
            if new is base:
                return View(ident, base_location, base)
            version = new.current_version()
            updates = [
                {"action": "add-schema", "schema": new.schema_by_id(version.schema_id).to_json()},
                {"action": "add-view-version", "view-version": {**version.to_json(), "schema-id": -1}},
                {"action": "set-current-view-version", "view-version-id": -1},
                {"action": "set-properties", "updates": new.properties},
            ]
            body = self._request("POST", self._object_url(ident, "views"), commit=True,
                                 conflict=CommitConflictError, json={
                                     "identifier": {"namespace": list(ident[:-1]), "name": ident[-1]},
                                     "requirements": [{"type": "assert-view-uuid", "uuid": base.view_uuid}],
                                     "updates": updates})
        else:
            draft = new_view_metadata("", view_schema, sql, namespace_default, default_catalog, props)
            body = self._request("POST", f"{self._ns_url(ident[:-1])}/views", conflict=ViewAlreadyExistsError,
                                 json={"name": ident[-1], "schema": draft.schemas[0].to_json(),
                                       "view-version": draft.current_version().to_json(), "properties": props})
        return View(ident, str(body["metadata-location"]), ViewMetadata.from_json(body["metadata"]))

    def register_view(self, identifier: IdentifierLike, metadata_location: str) -> View:
        """Add a view by an existing view metadata file (``POST .../register-view``)."""
        ident = to_view_identifier(identifier)
        body = self._request("POST", f"{self._ns_url(ident[:-1])}/register-view", conflict=ViewAlreadyExistsError,
                             json={"name": ident[-1], "metadata-location": metadata_location})
        return View(ident, str(body["metadata-location"]), ViewMetadata.from_json(body["metadata"]))

    def drop_view(self, identifier: IdentifierLike) -> None:
        self._request("DELETE", self._object_url(to_view_identifier(identifier), "views"))

    def rename_view(self, from_identifier: IdentifierLike, to_identifier: IdentifierLike) -> View:
        src, dst = to_view_identifier(from_identifier), to_view_identifier(to_identifier)
        self._request("POST", f"{self._base}/views/rename", conflict=ViewAlreadyExistsError, json={
            "source": {"namespace": list(src[:-1]), "name": src[-1]},
            "destination": {"namespace": list(dst[:-1]), "name": dst[-1]},
        })
        return self.load_view(dst)

    def _create_view_entry(self, identifier: Identifier, metadata_location: str) -> None:
        # create_view is overridden: the server writes view metadata files.
        raise UnsupportedError("a rest catalog creates views through the service (create_view)")

    def _swap_view_entry(self, identifier: Identifier, base_location: str, new_location: str) -> None:
        raise UnsupportedError("a rest catalog replaces views through the service (create_view)")

    # -- functions (tablestore extension) --------------------------------------------------------
    def create_function(
        self,
        identifier: IdentifierLike,
        class_name: str,
        return_type: str | None = None,
        replace: bool = False,
        properties: Mapping[str, str] | None = None,
    ) -> FunctionDef:
        function = self._new_function_def(identifier, class_name, return_type, properties)
        ident = function.identifier
        body = self._request("POST", f"{self._ns_url(ident[:-1])}/functions", conflict=FunctionAlreadyExistsError,
                             json={"name": ident[-1], "class-name": function.class_name,
                                   "return-type": function.return_type, "properties": function.properties,
                                   "replace": replace})
        return _function(body)

    def load_function(self, identifier: IdentifierLike) -> FunctionDef:
        return _function(self._request("GET", self._object_url(to_function_identifier(identifier), "functions")))

    def list_functions(self, namespace: IdentifierLike) -> list[Identifier]:
        body = self._request("GET", f"{self._ns_url(to_namespace(namespace))}/functions")
        return sorted((*i["namespace"], i["name"]) for i in body["identifiers"])

    def function_exists(self, identifier: IdentifierLike) -> bool:
        try:
            self.load_function(identifier)
        except NoSuchFunctionError:
            return False
        return True

    def drop_function(self, identifier: IdentifierLike) -> None:
        self._request("DELETE", self._object_url(to_function_identifier(identifier), "functions"))


def _best_credentials(credentials: Any, location: str) -> dict[str, str]:
    """The config of the storage credential whose prefix is the longest one of ``location``
    (as Java's S3FileIO and pyiceberg choose), or ``{}``."""
    best: Mapping[str, Any] | None = None
    for entry in credentials or []:
        prefix = str(entry.get("prefix") or "")
        if location.startswith(prefix) and (best is None or len(prefix) > len(str(best.get("prefix")))):
            best = entry
    return {str(k): str(v) for k, v in (best or {}).get("config", {}).items()}


def _function(body: Mapping[str, Any]) -> FunctionDef:
    ident = body["identifier"]
    return FunctionDef((*ident["namespace"], ident["name"]), str(body["class-name"]), body.get("return-type"),
                       dict(body.get("properties") or {}), int(body.get("created-ms") or 0))


__all__ = ["RestCatalog", "identifier_str"]
