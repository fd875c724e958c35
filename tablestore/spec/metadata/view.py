"""View metadata (apache/iceberg ``format/view-spec.md``, format version 1), JSON both ways.

A view is a query with a name. Its metadata file holds every known *version* of the view's
definition (SQL representations per dialect, the output schema, the catalog and namespace that
unqualified names in the SQL resolve against), the id of the current version and a log of when
the current version changed. ``CREATE OR REPLACE VIEW`` adds a version; it never edits one.

``ViewMetadata`` is an immutable value like ``TableMetadata``: :func:`new_view_metadata` builds
the first one and :meth:`ViewMetadata.replace` the next. Fields and representation types this
module does not model are kept and written back unchanged, so replacing a view that another
engine created keeps what that engine wrote (its earlier versions stay as they were).
"""

from __future__ import annotations

import gzip
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tablestore.errors import CorruptMetadataError, SchemaError, UnsupportedError, ValidationError
from tablestore.spec.schemas.schema import Schema

VIEW_FORMAT_VERSION = 1
ENGINE_NAME = "tablestore"
DEFAULT_DIALECT = "spark"
SQL_REPRESENTATION = "sql"
COMMENT_PROPERTY = "comment"
# How many versions a view keeps (the view spec's property; Java's default).
VERSION_HISTORY_SIZE = "version.history.num-entries"
VERSION_HISTORY_SIZE_DEFAULT = 10
INITIAL_VERSION_ID = 1

_METADATA_KEYS = {
    "view-uuid", "format-version", "location", "schemas", "current-version-id", "versions",
    "version-log", "properties",
}
_VERSION_KEYS = {
    "version-id", "timestamp-ms", "schema-id", "summary", "representations", "default-catalog",
    "default-namespace",
}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _get(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    """A required JSON field of the expected type, or CorruptMetadataError naming it."""
    if not isinstance(obj, Mapping):
        raise CorruptMetadataError(f"{what} is not a JSON object: {obj!r}")
    value = obj.get(key)
    if value is None:
        raise CorruptMetadataError(f"{what} is missing the required field {key!r}")
    # bool is an int in Python but never a valid number field here.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise CorruptMetadataError(f"{what} field {key!r} has the wrong type: {value!r}")
    return value


def _string_map(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise CorruptMetadataError(f"{what} is not a JSON object: {value!r}")
    return {str(k): str(v) for k, v in value.items()}


# -- representations -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SQLViewRepresentation:
    """The view's query as SQL text in one dialect (``spark``, ``trino``, ...)."""

    sql: str
    dialect: str = DEFAULT_DIALECT

    @property
    def type(self) -> str:
        return SQL_REPRESENTATION

    def to_json(self) -> dict[str, Any]:
        return {"type": SQL_REPRESENTATION, "sql": self.sql, "dialect": self.dialect}


@dataclass(frozen=True)
class UnknownViewRepresentation:
    """A representation of a type this module does not know; kept as read, written back as is."""

    raw: dict[str, Any] = field(hash=False)

    @property
    def type(self) -> str:
        return str(self.raw.get("type"))

    def to_json(self) -> dict[str, Any]:
        return dict(self.raw)


ViewRepresentation = SQLViewRepresentation | UnknownViewRepresentation


def representation_from_json(obj: Any) -> ViewRepresentation:
    kind = _get(obj, "type", str, "view representation")
    if kind.lower() != SQL_REPRESENTATION:
        # The spec allows other representation types; readers skip the ones they do not know.
        return UnknownViewRepresentation(dict(obj))
    return SQLViewRepresentation(
        sql=_get(obj, "sql", str, "SQL view representation"),
        dialect=_get(obj, "dialect", str, "SQL view representation"),
    )


# -- versions and the version log ------------------------------------------------------------------


@dataclass(frozen=True)
class ViewVersion:
    """One definition of the view: its SQL, the schema it produces and how to resolve names."""

    version_id: int
    timestamp_ms: int
    schema_id: int
    summary: dict[str, str]
    representations: tuple[ViewRepresentation, ...]
    default_namespace: tuple[str, ...]
    default_catalog: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def sql_representation(self, dialect: str | None = DEFAULT_DIALECT) -> SQLViewRepresentation | None:
        """The SQL in ``dialect`` (case-insensitive), or the first SQL of any dialect if ``None``."""
        for rep in self.representations:
            if isinstance(rep, SQLViewRepresentation) and (
                dialect is None or rep.dialect.lower() == dialect.lower()
            ):
                return rep
        return None

    def same_definition(self, other: ViewVersion) -> bool:
        """Whether two versions define the same view (ids and timestamps aside), as Java decides
        whether an added version reuses an existing one."""
        return (
            self.summary == other.summary
            and self.representations == other.representations
            and self.default_catalog == other.default_catalog
            and self.default_namespace == other.default_namespace
            and self.schema_id == other.schema_id
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version-id": self.version_id,
            "timestamp-ms": self.timestamp_ms,
            "schema-id": self.schema_id,
            "summary": dict(self.summary),
        }
        # Java writes default-catalog only when it is set; readers treat absence as null.
        if self.default_catalog is not None:
            out["default-catalog"] = self.default_catalog
        out["default-namespace"] = list(self.default_namespace)
        out["representations"] = [r.to_json() for r in self.representations]
        out.update(self.extra)
        return out

    @staticmethod
    def from_json(obj: Any) -> ViewVersion:
        what = "view version"
        namespace = _get(obj, "default-namespace", list, what)
        if not all(isinstance(level, str) for level in namespace):
            raise CorruptMetadataError(f"view version default-namespace is not a list of strings: {namespace!r}")
        default_catalog = obj.get("default-catalog")
        if default_catalog is not None and not isinstance(default_catalog, str):
            raise CorruptMetadataError(f"view version default-catalog is not a string: {default_catalog!r}")
        return ViewVersion(
            version_id=_get(obj, "version-id", int, what),
            timestamp_ms=_get(obj, "timestamp-ms", int, what),
            schema_id=_get(obj, "schema-id", int, what),
            summary=_string_map(_get(obj, "summary", dict, what), "view version summary"),
            representations=tuple(
                representation_from_json(r) for r in _get(obj, "representations", list, what)
            ),
            default_namespace=tuple(namespace),
            default_catalog=default_catalog,
            extra={k: v for k, v in obj.items() if k not in _VERSION_KEYS},
        )


@dataclass(frozen=True)
class ViewHistoryEntry:
    """An entry of the version log: at ``timestamp_ms`` the current version became ``version_id``."""

    timestamp_ms: int
    version_id: int

    def to_json(self) -> dict[str, Any]:
        return {"timestamp-ms": self.timestamp_ms, "version-id": self.version_id}

    @staticmethod
    def from_json(obj: Any) -> ViewHistoryEntry:
        return ViewHistoryEntry(
            timestamp_ms=_get(obj, "timestamp-ms", int, "view version-log entry"),
            version_id=_get(obj, "version-id", int, "view version-log entry"),
        )


# -- view metadata ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ViewMetadata:
    """The content of a view metadata file."""

    view_uuid: str
    location: str
    schemas: tuple[Schema, ...]
    current_version_id: int
    versions: tuple[ViewVersion, ...]
    version_log: tuple[ViewHistoryEntry, ...]
    properties: dict[str, str] = field(default_factory=dict)
    format_version: int = VIEW_FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        # An invalid view must fail where it is built or read, not later when it is queried.
        schema_ids = [s.schema_id for s in self.schemas]
        if len(set(schema_ids)) != len(schema_ids):
            raise CorruptMetadataError(f"view {self.view_uuid} has duplicate schema ids {schema_ids}")
        version_ids = [v.version_id for v in self.versions]
        if len(set(version_ids)) != len(version_ids):
            raise CorruptMetadataError(f"view {self.view_uuid} has duplicate version ids {version_ids}")
        if self.current_version_id not in version_ids:
            raise CorruptMetadataError(
                f"view {self.view_uuid}: current-version-id {self.current_version_id} is not one of "
                f"its versions {version_ids}"
            )
        for version in self.versions:
            if version.schema_id not in schema_ids:
                raise CorruptMetadataError(
                    f"view {self.view_uuid}: version {version.version_id} refers to the unknown "
                    f"schema id {version.schema_id}"
                )

    # -- lookups ---------------------------------------------------------------------------------
    def current_version(self) -> ViewVersion:
        return self.version_by_id(self.current_version_id)

    def version_by_id(self, version_id: int) -> ViewVersion:
        for version in self.versions:
            if version.version_id == version_id:
                return version
        raise ValidationError(
            f"view {self.view_uuid} has no version {version_id}; "
            f"it has {[v.version_id for v in self.versions]}"
        )

    def schema_by_id(self, schema_id: int) -> Schema:
        for schema in self.schemas:
            if schema.schema_id == schema_id:
                return schema
        raise SchemaError(f"view {self.view_uuid} has no schema with id {schema_id}")

    def schema(self) -> Schema:
        """The schema of the current version."""
        return self.schema_by_id(self.current_version().schema_id)

    # -- changes ---------------------------------------------------------------------------------
    def replace(
        self,
        sql: str,
        schema: Schema,
        default_namespace: Sequence[str],
        default_catalog: str | None = None,
        properties: Mapping[str, str] | None = None,
        dialect: str = DEFAULT_DIALECT,
        timestamp_ms: int | None = None,
    ) -> ViewMetadata:
        """The metadata after ``CREATE OR REPLACE VIEW``: a new current version for the new SQL.

        As in Java's ``ViewMetadata.Builder``: an equal schema and an identical earlier version
        are reused rather than duplicated; ``properties`` are merged into the existing ones; only
        the newest ``version.history.num-entries`` versions (and the current one) are kept.
        Returns ``self`` when nothing would change.
        """
        now = _now_ms() if timestamp_ms is None else timestamp_ms
        new_properties = {**self.properties, **{str(k): str(v) for k, v in (properties or {}).items()}}
        schemas, schema_id = add_schema(self.schemas, schema)
        candidate = _new_version(
            0, now, schema_id, sql, dialect, default_namespace, default_catalog
        )
        existing = next((v for v in self.versions if v.same_definition(candidate)), None)
        if existing is not None and existing.version_id == self.current_version_id:
            if new_properties == self.properties:
                return self
            return replace(self, properties=new_properties)
        if existing is not None:
            # Going back to an earlier definition makes that version current again.
            version_id, versions = existing.version_id, self.versions
        else:
            version_id = max(v.version_id for v in self.versions) + 1
            versions = (*self.versions, replace(candidate, version_id=version_id))
        log = (*self.version_log, ViewHistoryEntry(now, version_id))
        versions, log = expire_versions(versions, log, version_id, new_properties)
        return replace(
            self,
            schemas=schemas,
            current_version_id=version_id,
            versions=versions,
            version_log=log,
            properties=new_properties,
        )

    # -- JSON ------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "view-uuid": self.view_uuid,
            "format-version": self.format_version,
            "location": self.location,
            "properties": dict(self.properties),
            "schemas": [s.to_json() for s in self.schemas],
            "current-version-id": self.current_version_id,
            "versions": [v.to_json() for v in self.versions],
            "version-log": [e.to_json() for e in self.version_log],
        }
        out.update(self.extra)
        return out

    @staticmethod
    def from_json(obj: Any) -> ViewMetadata:
        what = "view metadata"
        format_version = _get(obj, "format-version", int, what)
        if format_version != VIEW_FORMAT_VERSION:
            raise CorruptMetadataError(
                f"view metadata has format-version {format_version}; only version {VIEW_FORMAT_VERSION} "
                "is defined by the view spec"
            )
        try:
            schemas = tuple(Schema.from_json(s) for s in _get(obj, "schemas", list, what))
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptMetadataError(f"view metadata has an invalid schema: {e}") from e
        return ViewMetadata(
            view_uuid=_get(obj, "view-uuid", str, what),
            location=_get(obj, "location", str, what),
            schemas=schemas,
            current_version_id=_get(obj, "current-version-id", int, what),
            versions=tuple(ViewVersion.from_json(v) for v in _get(obj, "versions", list, what)),
            version_log=tuple(ViewHistoryEntry.from_json(e) for e in _get(obj, "version-log", list, what)),
            properties=_string_map(obj.get("properties"), "view properties"),
            format_version=format_version,
            extra={k: v for k, v in obj.items() if k not in _METADATA_KEYS},
        )


# -- a view as catalogs return it -----------------------------------------------------------------


@dataclass(frozen=True)
class View:
    """A view as a catalog returns it: its identifier, current metadata file and metadata.

    The accessors read the current version: ``sql`` (the Spark SQL, or the first SQL of another
    dialect if the view has no Spark SQL), ``schema``, ``default_catalog``, ``default_namespace``.
    """

    identifier: tuple[str, ...]
    metadata_location: str
    metadata: ViewMetadata

    @property
    def version(self) -> ViewVersion:
        return self.metadata.current_version()

    @property
    def sql(self) -> str:
        version = self.version
        rep = version.sql_representation(DEFAULT_DIALECT) or version.sql_representation(None)
        if rep is None:
            raise UnsupportedError(
                f"view {'.'.join(self.identifier)} has no SQL representation in version "
                f"{version.version_id}; it was written by an engine with another representation type"
            )
        return rep.sql

    @property
    def dialect(self) -> str:
        rep = self.version.sql_representation(DEFAULT_DIALECT) or self.version.sql_representation(None)
        return rep.dialect if rep is not None else DEFAULT_DIALECT

    @property
    def schema(self) -> Schema:
        return self.metadata.schema()

    @property
    def default_catalog(self) -> str | None:
        return self.version.default_catalog

    @property
    def default_namespace(self) -> tuple[str, ...]:
        return self.version.default_namespace

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.metadata.properties)

    @property
    def comment(self) -> str | None:
        return self.metadata.properties.get(COMMENT_PROPERTY)



# -- building --------------------------------------------------------------------------------------


def _new_version(
    version_id: int,
    timestamp_ms: int,
    schema_id: int,
    sql: str,
    dialect: str,
    default_namespace: Sequence[str],
    default_catalog: str | None,
) -> ViewVersion:
    if not isinstance(sql, str) or not sql.strip():
        raise ValidationError("a view needs its SQL text; got an empty query")
    if isinstance(default_namespace, str):
        # A bare string would otherwise become a namespace of single characters.
        raise ValidationError(
            f"default_namespace must be a tuple of names like ('db',), got the string {default_namespace!r}"
        )
    return ViewVersion(
        version_id=version_id,
        timestamp_ms=timestamp_ms,
        schema_id=schema_id,
        summary={"engine-name": ENGINE_NAME},
        representations=(SQLViewRepresentation(sql, dialect),),
        default_namespace=tuple(default_namespace),
        default_catalog=default_catalog,
    )


def add_schema(schemas: tuple[Schema, ...], schema: Schema) -> tuple[tuple[Schema, ...], int]:
    """The schema list with ``schema`` in it, and its id (an equal existing schema is reused)."""
    for existing in schemas:
        if existing.fields == schema.fields and existing.identifier_field_ids == schema.identifier_field_ids:
            return schemas, existing.schema_id
    schema_id = max((s.schema_id for s in schemas), default=-1) + 1
    return (*schemas, schema.with_id(schema_id)), schema_id


def expire_versions(
    versions: tuple[ViewVersion, ...],
    log: tuple[ViewHistoryEntry, ...],
    current_id: int,
    properties: Mapping[str, str],
) -> tuple[tuple[ViewVersion, ...], tuple[ViewHistoryEntry, ...]]:
    try:
        keep = max(1, int(properties.get(VERSION_HISTORY_SIZE, VERSION_HISTORY_SIZE_DEFAULT)))
    except ValueError:
        raise ValidationError(
            f"view property {VERSION_HISTORY_SIZE} must be an integer, "
            f"got {properties[VERSION_HISTORY_SIZE]!r}"
        ) from None
    if len(versions) <= keep:
        return versions, log
    newest = sorted((v.version_id for v in versions if v.version_id != current_id), reverse=True)
    retained = {current_id, *newest[: keep - 1]}
    kept_versions = tuple(v for v in versions if v.version_id in retained)
    # As Java does: the log keeps its newest entries back to the first one whose version is gone,
    # so every entry left refers to a version that can still be read.
    start = len(log)
    while start > 0 and log[start - 1].version_id in retained:
        start -= 1
    return kept_versions, log[start:]


def new_view_metadata(
    location: str,
    schema: Schema,
    sql: str,
    default_namespace: Sequence[str],
    default_catalog: str | None = None,
    properties: Mapping[str, str] | None = None,
    dialect: str = DEFAULT_DIALECT,
    view_uuid: str | None = None,
    timestamp_ms: int | None = None,
) -> ViewMetadata:
    """The metadata of a new view: version 1 with schema 0 and one SQL representation."""
    now = _now_ms() if timestamp_ms is None else timestamp_ms
    version = _new_version(INITIAL_VERSION_ID, now, 0, sql, dialect, default_namespace, default_catalog)
    return ViewMetadata(
        view_uuid=view_uuid or str(uuid.uuid4()),
        location=location.rstrip("/"),
        schemas=(schema.with_id(0),),
        current_version_id=INITIAL_VERSION_ID,
        versions=(version,),
        version_log=(ViewHistoryEntry(now, INITIAL_VERSION_ID),),
        properties={str(k): str(v) for k, v in (properties or {}).items()},
    )


def parse_view_metadata(data: bytes) -> ViewMetadata:
    """Parse a view metadata file (plain or gzip-compressed JSON, as Java writes by default)."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise CorruptMetadataError(f"view metadata file is not valid gzip: {e}") from e
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, ValueError) as e:
        raise CorruptMetadataError(f"view metadata file is not valid JSON: {e}") from e
    return ViewMetadata.from_json(obj)


def serialize_view_metadata(metadata: ViewMetadata) -> bytes:
    """The JSON bytes of a view metadata file (uncompressed)."""
    return json.dumps(metadata.to_json(), indent=2).encode("utf-8")


__all__ = [
    "COMMENT_PROPERTY",
    "DEFAULT_DIALECT",
    "ENGINE_NAME",
    "VERSION_HISTORY_SIZE",
    "SQLViewRepresentation",
    "UnknownViewRepresentation",
    "View",
    "ViewHistoryEntry",
    "ViewMetadata",
    "ViewRepresentation",
    "ViewVersion",
    "new_view_metadata",
    "parse_view_metadata",
    "representation_from_json",
    "serialize_view_metadata",
]
