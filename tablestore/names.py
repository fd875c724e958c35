"""Names and locations: identifiers of tables, views and functions, and where metadata files go.

A leaf module (it imports only :mod:`tablestore.errors`): the catalogs, the table layer, the
SQL layer and the REST service all parse names and place files by these rules, and none of
them should need the catalog package for that.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Protocol

from tablestore.errors import InvalidNameError

Identifier = tuple[str, ...]
IdentifierLike = str | Sequence[str]

# The table property naming the directory of a table's (or view's) metadata files.
WRITE_METADATA_PATH = "write.metadata.path"
# <version>-<uuid>[.<codec>].metadata.json, as Java and pyiceberg name metadata files.
METADATA_FILE_RE = re.compile(r"(\d+)-([\w-]{36})(?:\.\w+)?\.metadata\.json")


# -- names -----------------------------------------------------------------------------------


def validate_name(name: object, what: str = "name") -> str:
    """``name`` if it is usable as a namespace or table name, else InvalidNameError naming it.

    Names become path segments of table locations, so separators and ``..`` are refused, as are
    control characters (they corrupt logs and terminals).
    """
    if not isinstance(name, str):
        raise InvalidNameError(f"{what} must be a string, got {type(name).__name__} {name!r}")
    if not name.strip():
        raise InvalidNameError(f"{what} {name!r} is empty")
    if "/" in name or "\\" in name:
        raise InvalidNameError(f"{what} {name!r} contains '/' or '\\', which are not allowed in names")
    if ".." in name or name == ".":
        raise InvalidNameError(f"{what} {name!r} contains '..', which is not allowed in names")
    bad = next((c for c in name if ord(c) < 32 or 127 <= ord(c) < 160), None)
    if bad is not None:
        raise InvalidNameError(
            f"{what} {name!r} contains the control character {bad!r}, which is not allowed in names"
        )
    return name


def _split(identifier: IdentifierLike, what: str) -> Identifier:
    if isinstance(identifier, str):
        # "db.t" → ("db", "t"); an empty string is the empty (root) identifier.
        parts: tuple[Any, ...] = tuple(identifier.split(".")) if identifier else ()
    else:
        try:
            parts = tuple(identifier)
        except TypeError:
            raise InvalidNameError(
                f"{what} must be a string like 'db.t' or a tuple of names, got {identifier!r}"
            ) from None
    for part in parts:
        try:
            validate_name(part, what)
        except InvalidNameError as e:
            if isinstance(identifier, str) and part != identifier:
                raise InvalidNameError(f"{what} {identifier!r} is not valid: {e}") from None
            raise
    return parts


def to_namespace(namespace: IdentifierLike, allow_root: bool = False) -> Identifier:
    """A namespace as a tuple of validated levels (``"a.b"`` → ``("a", "b")``)."""
    ns = _split(namespace, "namespace")
    if not ns and not allow_root:
        raise InvalidNameError("namespace is empty; give at least one level, like 'db'")
    return ns


def _to_identifier(identifier: IdentifierLike, kind: str) -> Identifier:
    ident = _split(identifier, f"{kind} identifier")
    if len(ident) < 2:
        raise InvalidNameError(
            f"{kind} identifier {identifier!r} has no namespace; write it as 'namespace.{kind}'"
        )
    return ident


def to_table_identifier(identifier: IdentifierLike) -> Identifier:
    """A table identifier as a tuple: namespace levels then the table name, validated."""
    return _to_identifier(identifier, "table")


def to_view_identifier(identifier: IdentifierLike) -> Identifier:
    """A view identifier as a tuple: namespace levels then the view name, validated."""
    return _to_identifier(identifier, "view")


def to_function_identifier(identifier: IdentifierLike) -> Identifier:
    """A function identifier as a tuple: namespace levels then the function name, validated."""
    return _to_identifier(identifier, "function")


def identifier_str(identifier: Identifier) -> str:
    return ".".join(identifier)


# -- locations -------------------------------------------------------------------------------


def to_location_uri(location: str) -> str:
    """A location as it is recorded in metadata: a local path becomes a ``file:///`` URI.

    The spec asks for full URIs with a scheme (and from v4 on reads a path without one as
    relative to the table), and readers such as iceberg-rust refuse a bare ``/abs/path``. A
    relative path is made absolute first, as it means nothing outside this process. A URI with
    a scheme is returned exactly as given, Hadoop's ``file:/abs/path`` included: a location a
    client asked for comes back as it asked (Java keeps it too, and the REST compatibility kit
    checks it), and the files under it are named in the same spelling. Reading accepts every
    spelling (``FileIO.new_input``), so tables written with plain paths, by older versions of
    tablestore or by other tools, stay readable.
    """
    scheme, sep, _rest = location.partition(":")
    if sep and len(scheme) > 1 and "/" not in scheme:
        return location
    path = os.path.abspath(os.path.expanduser(location))
    return f"file://{path}"


def normalize_location(location: str) -> str:
    """A table or warehouse location as recorded: no trailing slash, a local path as an
    absolute ``file:///`` URI (locations are read by other engines; the spec asks for full
    URIs, iceberg-rust refuses a bare path, and from v4 on one would mean a relative path).
    A URI with a scheme keeps its spelling (``file:/data/x`` stays ``file:/data/x``)."""
    return to_location_uri(location.rstrip("/") or "/")


class _Located(Protocol):
    """Table or view metadata, as far as naming its next metadata file goes."""

    @property
    def location(self) -> str: ...

    @property
    def properties(self) -> Mapping[str, str]: ...


def parse_metadata_version(metadata_location: str | None) -> int:
    """The version in a metadata file name (``00003-<uuid>.metadata.json`` → 3); -1 if none."""
    if not metadata_location:
        return -1
    match = METADATA_FILE_RE.fullmatch(metadata_location.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else -1


def new_metadata_location(metadata: _Located, previous_location: str | None) -> str:
    """Where the next metadata file goes: ``<location>/metadata/<version:05d>-<uuid>.metadata.json``.

    Tables and views name their metadata files alike (as Java's JDBC catalog does).
    """
    version = parse_metadata_version(previous_location) + 1
    return f"{metadata_directory(metadata)}/{version:05d}-{metadata_file_uuid.get()()}.metadata.json"


# Where the uuid in a new metadata file's name comes from: uuid4, unless the catalog service runs
# a request with an Idempotency-Key, whose files it can then recognise (tablestore.rest.state.replicas).
metadata_file_uuid: ContextVar[Callable[[], uuid.UUID]] = ContextVar("metadata_file_uuid", default=uuid.uuid4)


def metadata_directory(metadata: _Located) -> str:
    """Where a table's (or view's) metadata files, manifest lists and manifests go: the
    ``write.metadata.path`` property, else ``<location>/metadata``; a local one as a URI."""
    custom = metadata.properties.get(WRITE_METADATA_PATH)
    directory = to_location_uri(custom) if custom else f"{to_location_uri(metadata.location.rstrip('/'))}/metadata"
    return directory.rstrip("/")


__all__ = [
    "METADATA_FILE_RE",
    "WRITE_METADATA_PATH",
    "Identifier",
    "IdentifierLike",
    "identifier_str",
    "metadata_directory",
    "metadata_file_uuid",
    "new_metadata_location",
    "normalize_location",
    "parse_metadata_version",
    "to_function_identifier",
    "to_location_uri",
    "to_namespace",
    "to_table_identifier",
    "to_view_identifier",
    "validate_name",
]
