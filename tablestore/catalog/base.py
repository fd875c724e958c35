"""Catalogs: where tables are found by name, and where commits are made atomic: the interface.

``tablestore.catalog`` re-exports this module with ``load_catalog``, which chooses an
implementation; the implementations (``sql``, ``rest``) import this module, not the package.

A catalog maps ``namespace.table`` to the location of the table's current metadata file and
swaps that pointer atomically on commit. Everything else about a table lives in its files.

``Catalog`` holds what every implementation shares: identifier parsing and validation, table
creation (first metadata file, default location), registration, purge on drop, the
metadata-file side of a commit, and the same for views (``CREATE [OR REPLACE] VIEW`` writes a
view metadata file with a new version). Implementations (``SqlCatalog``; a REST one later)
supply the storage of the pointers, of namespaces and of functions.

Tables and views share one name space per namespace: a name is either a table or a view.
Functions (``CREATE FUNCTION db.f AS 'class'``) have their own name space.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Self

import pyarrow as pa

from tablestore.catalog.locations import (
    ALLOW_OVERLAPPING_LOCATIONS,
    delete_owned_files,
    holds_files,
    overlapping,
    owned_files,
    remove_empty_directories,
    unique_location,
)
from tablestore.errors import (
    CommitConflictError,
    CommitFailedError,
    FunctionAlreadyExistsError,
    MetadataFileNotFoundError,
    NoSuchNamespaceError,
    NoSuchTableError,
    NoSuchViewError,
    TableAlreadyExistsError,
    TableStoreError,
    UnsupportedError,
    ValidationError,
    ViewAlreadyExistsError,
)
from tablestore.io import load_file_io
from tablestore.io.cleanup import deleted_unless_sent
from tablestore.io.fileio import FileIO
from tablestore.names import (
    WRITE_METADATA_PATH,
    Identifier,
    IdentifierLike,
    identifier_str,
    new_metadata_location,
    normalize_location,
    parse_metadata_version,
    to_function_identifier,
    to_namespace,
    to_table_identifier,
    to_view_identifier,
    validate_name,
)
from tablestore.option_values import flag
from tablestore.spec.metadata.metadata_builder import apply_updates
from tablestore.spec.metadata.table_metadata import new_table_metadata, parse_metadata, serialize_metadata
from tablestore.spec.metadata.view import (
    COMMENT_PROPERTY,
    View,
    ViewMetadata,
    new_view_metadata,
    parse_view_metadata,
    serialize_view_metadata,
)
from tablestore.spec.partitioning.partition_spec import UNPARTITIONED_SPEC, PartitionSpec, build_partition_spec
from tablestore.spec.partitioning.sort_order import UNSORTED_ORDER
from tablestore.spec.schemas.schema import Schema, to_schema
from tablestore.table import Table

if TYPE_CHECKING:
    from tablestore.spec.metadata.table_metadata import TableMetadata
    from tablestore.spec.metadata.update_models import TableRequirement, TableUpdate
    from tablestore.spec.partitioning.partition_spec import PartitionSpec
    from tablestore.spec.partitioning.sort_order import SortOrder
    from tablestore.table import Table
    from tablestore.table.read.scan import ScanPlanner

WAREHOUSE = "warehouse"
LOCATION = "location"
FORMAT_VERSION = "format-version"
# Iceberg's catalog properties for new tables: ``table-default.<key>`` unless the table sets
# ``<key>`` itself, ``table-override.<key>`` always (``table-default.format-version: 3`` makes v3
# the catalog's default).
TABLE_DEFAULT_PREFIX = "table-default."
TABLE_OVERRIDE_PREFIX = "table-override."


def properties_with_format_version(properties: Mapping[str, str] | None, format_version: int | None) -> dict[str, str]:
    """A new table's properties, with ``format_version`` as the ``format-version`` property."""
    props = {str(k): str(v) for k, v in (properties or {}).items()}
    if format_version is not None:
        given = props.get(FORMAT_VERSION)
        if given is not None and given != str(format_version):
            raise ValidationError(
                f"format_version={format_version} contradicts the property format-version={given}; give one"
            )
        props[FORMAT_VERSION] = str(format_version)
    return props


def new_table_properties(catalog_properties: Mapping[str, str], properties: Mapping[str, str] | None,
                         format_version: int | None) -> dict[str, str]:
    """A new table's properties: the catalog's ``table-default.*``, then the table's own (and
    ``format_version``), then the catalog's ``table-override.*``, as Iceberg's catalogs merge them."""
    def prefixed(prefix: str) -> dict[str, str]:
        return {k[len(prefix):]: v for k, v in catalog_properties.items()
                if k.startswith(prefix) and len(k) > len(prefix)}

    return {**prefixed(TABLE_DEFAULT_PREFIX), **properties_with_format_version(properties, format_version),
            **prefixed(TABLE_OVERRIDE_PREFIX)}

# CREATE OR REPLACE VIEW is a blind overwrite, so losing the pointer swap to another writer is
# retried (on the new current version) rather than reported.
VIEW_REPLACE_ATTEMPTS = 5


@dataclass(frozen=True)
class PropertiesUpdateSummary:
    """What ``update_namespace_properties`` did: keys removed, keys set, removals not present."""

    removed: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FunctionDef:
    """A persistent function: the class implementing it (a Spark/Hive UDF class or a Python
    ``module:function``), its declared return type if any, and free-form properties."""

    identifier: Identifier
    class_name: str
    return_type: str | None
    properties: dict[str, str]
    created_ms: int


# -- metadata files ----------------------------------------------------------------------------


def write_metadata_file(io: FileIO, location: str, metadata: TableMetadata) -> None:
    """Write a metadata file; never overwrites (FileExistsError), as commits rely on it."""
    io.new_output(location).write(serialize_metadata(metadata), overwrite=False)


def read_metadata_file(io: FileIO, location: str) -> TableMetadata:
    try:
        data = io.new_input(location).read()
    except FileNotFoundError:
        raise metadata_file_missing(location) from None
    return parse_metadata(data)


def metadata_file_missing(location: str) -> MetadataFileNotFoundError:
    """The error for a metadata file that is gone: Java's message first (its ``NotFoundException``
    from the file IO; the REST compatibility kit matches it), then what it means."""
    return MetadataFileNotFoundError(
        f"Failed to open input stream for file: {location} (the metadata file does not exist; "
        "the table's files were removed behind the catalog's back)"
    )


def write_view_metadata_file(io: FileIO, location: str, metadata: ViewMetadata) -> None:
    """Write a view metadata file; never overwrites (FileExistsError)."""
    io.new_output(location).write(serialize_view_metadata(metadata), overwrite=False)


def read_view_metadata_file(io: FileIO, location: str) -> ViewMetadata:
    try:
        data = io.new_input(location).read()
    except FileNotFoundError:
        raise MetadataFileNotFoundError(
            f"Failed to open input stream for file: {location} (the view metadata file does not exist)"
        ) from None
    return parse_view_metadata(data)


# -- the catalog -------------------------------------------------------------------------------


class Catalog(ABC):
    """A named catalog of namespaces and tables.

    ``properties`` configure it (``warehouse``, ``uri``, the ``s3.*`` file-IO settings); they may
    hold credentials, so they are never shown in reprs or messages.
    """

    def __init__(self, name: str, **properties: str) -> None:
        validate_name(name, "catalog name")
        self.name = name
        self.properties: dict[str, str] = {k: str(v) for k, v in properties.items() if v is not None}
        warehouse = self.properties.get(WAREHOUSE)
        self.warehouse: str | None = normalize_location(warehouse) if warehouse else None
        self.io: FileIO = load_file_io(self.properties, self.warehouse)
        self._location_of_metadata: dict[str, str] = {}  # metadata directory -> table location

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, warehouse={self.warehouse!r})"

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release connections; the catalog is unusable afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- namespaces (per implementation) ---------------------------------------------------------
    @abstractmethod
    def create_namespace(
        self, namespace: IdentifierLike, properties: Mapping[str, str] | None = None
    ) -> None:
        """Create a namespace; NamespaceAlreadyExistsError if it exists."""

    @abstractmethod
    def drop_namespace(self, namespace: IdentifierLike) -> None:
        """Drop an empty namespace; NamespaceNotEmptyError if it has tables, views, functions or
        child namespaces."""

    @abstractmethod
    def list_namespaces(self, parent: IdentifierLike = ()) -> list[Identifier]:
        """The namespaces one level below ``parent`` (top-level ones by default), sorted."""

    @abstractmethod
    def load_namespace_properties(self, namespace: IdentifierLike) -> dict[str, str]: ...

    @abstractmethod
    def update_namespace_properties(
        self,
        namespace: IdentifierLike,
        removals: set[str] | None = None,
        updates: Mapping[str, str] | None = None,
    ) -> PropertiesUpdateSummary: ...

    @abstractmethod
    def namespace_exists(self, namespace: IdentifierLike) -> bool: ...

    # -- tables (per implementation) -----------------------------------------------------------
    @abstractmethod
    def list_tables(self, namespace: IdentifierLike) -> list[Identifier]:
        """The tables of one namespace (not of its children), sorted."""

    @abstractmethod
    def table_exists(self, identifier: IdentifierLike) -> bool: ...

    @abstractmethod
    def rename_table(self, from_identifier: IdentifierLike, to_identifier: IdentifierLike) -> Table:
        """Rename a table (its files stay where they are)."""

    @abstractmethod
    def load_table_metadata(self, identifier: IdentifierLike) -> tuple[str, TableMetadata]:
        """The current metadata location and metadata; NoSuchTableError if there is no table."""

    @abstractmethod
    def commit_table(
        self,
        identifier: IdentifierLike,
        requirements: Sequence[TableRequirement],
        updates: Sequence[TableUpdate],
    ) -> tuple[str, TableMetadata]:
        """Validate, apply, write the next metadata file, swap the pointer; see SqlCatalog."""

    @abstractmethod
    def _create_table_entry(self, identifier: Identifier, metadata_location: str) -> None:
        """Record a new table; TableAlreadyExistsError if the name is taken."""

    @abstractmethod
    def _drop_table_entry(self, identifier: Identifier) -> None:
        """Remove a table's record; NoSuchTableError if there is none."""

    # -- views (per implementation) ------------------------------------------------------------
    @abstractmethod
    def list_views(self, namespace: IdentifierLike) -> list[Identifier]:
        """The views of one namespace (not of its children), sorted; tables are not listed."""

    @abstractmethod
    def view_exists(self, identifier: IdentifierLike) -> bool: ...

    @abstractmethod
    def load_view_metadata(self, identifier: IdentifierLike) -> tuple[str, ViewMetadata]:
        """The current view metadata location and metadata; NoSuchViewError if there is no view."""

    @abstractmethod
    def drop_view(self, identifier: IdentifierLike) -> None:
        """Remove a view from the catalog (NoSuchViewError if none). As Java's catalogs do, its
        metadata files are left in place: they are small, and no table data hangs on them."""

    @abstractmethod
    def rename_view(self, from_identifier: IdentifierLike, to_identifier: IdentifierLike) -> View:
        """Rename a view; ViewAlreadyExistsError if a view or table holds the new name."""

    @abstractmethod
    def _create_view_entry(self, identifier: Identifier, metadata_location: str) -> None:
        """Record a new view; ViewAlreadyExistsError if the name is taken by a view or table."""

    @abstractmethod
    def _swap_view_entry(self, identifier: Identifier, base_location: str, new_location: str) -> None:
        """Point a view at ``new_location`` if it still points at ``base_location``, else
        CommitConflictError (NoSuchViewError if the view is gone)."""

    # -- functions (per implementation) --------------------------------------------------------
    @abstractmethod
    def create_function(
        self,
        identifier: IdentifierLike,
        class_name: str,
        return_type: str | None = None,
        replace: bool = False,
        properties: Mapping[str, str] | None = None,
    ) -> FunctionDef:
        """Record a function (``CREATE [OR REPLACE] FUNCTION``); FunctionAlreadyExistsError if one
        of that name exists and not ``replace``; NoSuchNamespaceError if the namespace does not."""

    @abstractmethod
    def load_function(self, identifier: IdentifierLike) -> FunctionDef:
        """The function of that name; NoSuchFunctionError if there is none."""

    @abstractmethod
    def list_functions(self, namespace: IdentifierLike) -> list[Identifier]:
        """The functions of one namespace, sorted."""

    @abstractmethod
    def function_exists(self, identifier: IdentifierLike) -> bool: ...

    @abstractmethod
    def drop_function(self, identifier: IdentifierLike) -> None:
        """Remove a function; NoSuchFunctionError if there is none."""

    def commit_tables(
        self, changes: Sequence[tuple[IdentifierLike, Sequence[TableRequirement], Sequence[TableUpdate]]]
    ) -> list[tuple[str, TableMetadata]]:
        """Commit to several tables atomically (all or none); the new (location, metadata) of each."""
        raise UnsupportedError(f"{type(self).__name__} cannot commit to several tables atomically")

    # -- shared table logic --------------------------------------------------------------------
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
        """Create a table and write its first metadata file (``00000-<uuid>.metadata.json``).

        ``schema`` is an Arrow schema or a tablestore Schema (field ids are assigned afresh).
        ``partition_by`` lists partition expressions: ``"day(ts)"``, ``"bucket(16, id)"``,
        ``"country"``. The location defaults to ``<warehouse>/<namespace levels>/<table>``
        (or ``<namespace location>/<table>`` if the namespace has a ``location`` property).
        ``format_version`` (1, 2 or 3; default 2), or the ``format-version`` property, chooses
        the Iceberg format version. The catalog's ``table-default.<key>`` properties are the
        table's unless it sets them, its ``table-override.<key>`` ones always are.
        """
        ident = to_table_identifier(identifier)
        namespace = ident[:-1]
        if not self.namespace_exists(namespace):
            raise NoSuchNamespaceError(
                f"Namespace does not exist: {identifier_str(namespace)} "
                f"(cannot create table {identifier_str(ident)}; create the namespace first)"
            )
        # Checked early only to avoid writing a metadata file for nothing; the catalog's unique
        # key is what decides a race.
        if self.table_exists(ident):
            raise TableAlreadyExistsError(f"Table already exists: {identifier_str(ident)}")
        if self.view_exists(ident):
            raise TableAlreadyExistsError(
                f"View with same name already exists: {identifier_str(ident)} "
                "(tables and views share names: drop the view or choose another name)"
            )

        # A format-version property chooses the format version (new_table_metadata takes it out);
        # it also decides what an Arrow nanosecond timestamp becomes (microseconds below v3).
        table_properties = new_table_properties(self.properties, properties, format_version)
        table_schema = to_schema(schema, table_properties)
        if partition_by is None:
            spec = UNPARTITIONED_SPEC
        elif isinstance(partition_by, PartitionSpec):
            spec = partition_by
        else:
            exprs = [partition_by] if isinstance(partition_by, str) else list(partition_by)
            spec = build_partition_spec(table_schema, exprs) if exprs else UNPARTITIONED_SPEC

        if location:
            table_location = normalize_location(location)
            self.check_location_free(ident, table_location)
        else:
            table_location = self.default_table_location(ident)
        metadata = new_table_metadata(
            table_schema, spec, sort_order or UNSORTED_ORDER, table_location, table_properties
        )
        metadata_location = new_metadata_location(metadata, None)
        io = self.table_io(metadata)
        write_metadata_file(io, metadata_location, metadata)
        # Kept when the outcome is unknown: the table may point at it.
        with deleted_unless_sent(lambda: io.delete(metadata_location)):
            self._create_table_entry(ident, metadata_location)
        return self._make_table(ident, metadata_location, metadata)

    def register_table(self, identifier: IdentifierLike, metadata_location: str) -> Table:
        """Add an existing table to the catalog by its metadata file (written by any engine)."""
        ident = to_table_identifier(identifier)
        namespace = ident[:-1]
        if not self.namespace_exists(namespace):
            raise NoSuchNamespaceError(
                f"Namespace does not exist: {identifier_str(namespace)} "
                f"(cannot register table {identifier_str(ident)}; create the namespace first)"
            )
        metadata = read_metadata_file(self.io, metadata_location)
        # A taken name is the error a client expects first (the catalog's unique key still
        # decides a race); only then does the location matter.
        if self.view_exists(ident):
            raise TableAlreadyExistsError(f"View with same name already exists: {identifier_str(ident)}")
        if self.table_exists(ident):
            raise TableAlreadyExistsError(f"Table already exists: {identifier_str(ident)}")
        self.check_location_free(ident, metadata.location)
        self._create_table_entry(ident, metadata_location)
        return self._make_table(ident, metadata_location, metadata)

    def load_table(self, identifier: IdentifierLike) -> Table:
        ident = to_table_identifier(identifier)
        metadata_location, metadata = self.load_table_metadata(ident)
        return self._make_table(ident, metadata_location, metadata)

    def drop_table(self, identifier: IdentifierLike, purge: bool = False) -> None:
        """Remove a table from the catalog; with ``purge``, also delete the files it owns: those
        its metadata references (metadata files, manifest lists, manifests, data and delete
        files, statistics), and for an external table (``EXTERNAL=TRUE``) all but its data files.

        Nothing else under its location is touched: after a rename, another table may live
        there (``tablestore.catalog.locations``). Files are deleted after the table is gone from
        the catalog, so no reader can load a table whose files are half deleted.
        """
        ident = to_table_identifier(identifier)
        if not purge:
            self._drop_table_entry(ident)
            return
        metadata_location, metadata = self.load_table_metadata(ident)
        io = self.table_io(metadata)
        # Listed before the drop: the files cannot be found once the pointer is gone, and a
        # failed listing (an unreadable manifest) must leave the table in the catalog.
        external = metadata.properties.get("EXTERNAL", "").upper() == "TRUE"
        files = owned_files(io, metadata, metadata_location, external)
        self._drop_table_entry(ident)
        delete_owned_files(io, files)
        remove_empty_directories(io, metadata.location)

    # -- shared view logic ---------------------------------------------------------------------
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
        """Create a view, or with ``replace`` give an existing one a new current version.

        ``sql`` is stored as the ``spark`` dialect representation; ``schema`` is the schema the
        query produces; ``default_catalog`` and ``default_namespace`` are what unqualified names
        in ``sql`` resolve against (the session's current catalog and database at creation).
        ``comment`` becomes the ``comment`` property. On replace, properties are merged into the
        existing ones (as Java does) and an identical definition adds no version.
        ViewAlreadyExistsError if a view (without ``replace``) or a table has the name.
        """
        ident = to_view_identifier(identifier)
        name = identifier_str(ident)
        namespace = ident[:-1]
        if not self.namespace_exists(namespace):
            raise NoSuchNamespaceError(
                f"Namespace does not exist: {identifier_str(namespace)} "
                f"(cannot create view {name}; create the namespace first)"
            )
        if self.table_exists(ident):
            raise ViewAlreadyExistsError(
                f"Table with same name already exists: {name} "
                "(tables and views share names: drop the table or choose another name)"
            )
        view_schema = to_schema(schema)
        view_properties = {str(k): str(v) for k, v in (properties or {}).items()}
        if comment is not None:
            view_properties[COMMENT_PROPERTY] = comment
        namespace_default = to_namespace(default_namespace, allow_root=True)

        for _attempt in range(VIEW_REPLACE_ATTEMPTS):
            current: tuple[str, ViewMetadata] | None = None
            if replace:
                with contextlib.suppress(NoSuchViewError):
                    current = self.load_view_metadata(ident)
            elif self.view_exists(ident):
                raise ViewAlreadyExistsError(f"View already exists: {name} (use replace to redefine it)")

            if current is None:
                metadata = new_view_metadata(
                    self.default_table_location(ident), view_schema, sql, namespace_default,
                    default_catalog, view_properties,
                )
                base_location = None
            else:
                base_location, base = current
                metadata = base.replace(
                    sql, view_schema, namespace_default, default_catalog, view_properties
                )
                if metadata is base:
                    return View(ident, base_location, base)

            try:
                location = self.commit_view(ident, base_location, metadata)
            except (ViewAlreadyExistsError, CommitConflictError, NoSuchViewError):
                # Another writer created, replaced or dropped the view meanwhile: a plain create
                # reports it, a replace tries again from what is there now (unless a table took
                # the name, which no retry changes).
                if not replace or self.table_exists(ident):
                    raise
                continue
            return View(ident, location, metadata)
        raise CommitConflictError(
            f"cannot replace view {name}: other writers changed it {VIEW_REPLACE_ATTEMPTS} times "
            "while this replace was running; try again"
        )

    def commit_view(self, identifier: IdentifierLike, base_location: str | None, metadata: ViewMetadata) -> str:
        """Write ``metadata`` as the view's next metadata file and point the view at it; its location.

        With ``base_location`` None the view is new: ViewAlreadyExistsError if a view or table has
        the name. Otherwise the view's pointer is compare-and-swapped from ``base_location``:
        CommitConflictError if another writer moved it, NoSuchViewError if it is gone. The file
        is deleted when nothing was committed.
        """
        ident = to_view_identifier(identifier)
        location = new_metadata_location(metadata, base_location)
        write_view_metadata_file(self.io, location, metadata)
        # Kept when the outcome is unknown: the view may point at it.
        with deleted_unless_sent(lambda: self.io.delete(location)):
            if base_location is None:
                self._create_view_entry(ident, location)
            else:
                self._swap_view_entry(ident, base_location, location)
        return location

    def register_view(self, identifier: IdentifierLike, metadata_location: str) -> View:
        """Add an existing view to the catalog by its view metadata file (written by any engine,
        or kept from a dropped view); a table or view of that name refuses it."""
        ident = to_view_identifier(identifier)
        if not self.namespace_exists(ident[:-1]):
            raise NoSuchNamespaceError(
                f"Namespace does not exist: {identifier_str(ident[:-1])} "
                f"(cannot register view {identifier_str(ident)}; create the namespace first)"
            )
        if self.table_exists(ident):
            raise ViewAlreadyExistsError(f"Table with same name already exists: {identifier_str(ident)}")
        metadata = read_view_metadata_file(self.io, metadata_location)
        self._create_view_entry(ident, metadata_location)
        return View(ident, metadata_location, metadata)

    def load_view(self, identifier: IdentifierLike) -> View:
        ident = to_view_identifier(identifier)
        metadata_location, metadata = self.load_view_metadata(ident)
        return View(ident, metadata_location, metadata)

    def default_table_location(self, identifier: Identifier) -> str:
        """Where a new table goes unless told: ``<namespace location>/<table>`` or
        ``<warehouse>/<namespace levels>/<table>``, with a unique suffix when that path is taken
        (files lie there, as a renamed or dropped table leaves them, or it overlaps a live
        table), so no two live tables ever share files."""
        location = self._plain_table_location(identifier)
        if self._location_taken(identifier, location):
            return unique_location(location)
        return location

    def _plain_table_location(self, identifier: Identifier) -> str:
        namespace, table_name = identifier[:-1], identifier[-1]
        namespace_location = self.load_namespace_properties(namespace).get(LOCATION)
        if namespace_location:
            return f"{normalize_location(namespace_location)}/{table_name}"
        if not self.warehouse:
            raise ValidationError(
                f"cannot choose a location for table {identifier_str(identifier)}: the catalog has no "
                "'warehouse' property; set one or pass location="
            )
        return "/".join((self.warehouse.rstrip("/"), *namespace, table_name))

    def _location_taken(self, identifier: Identifier, location: str) -> bool:
        if holds_files(self.io, location):
            return True
        return bool(overlapping(location, self.live_table_locations(exclude=identifier)))

    def check_location_free(self, identifier: Identifier, location: str) -> None:
        """Refuse a table location that equals, contains or lies inside a live table's, unless the
        catalog property ``allow-overlapping-locations`` is true."""
        if flag(self.properties, ALLOW_OVERLAPPING_LOCATIONS, kind="catalog property"):
            return
        clashes = overlapping(location, self.live_table_locations(exclude=identifier))
        if clashes:
            name, other = clashes[0]
            raise ValidationError(
                f"cannot place table {identifier_str(identifier)} at {location}: it overlaps the "
                f"location {other} of live table {name}; choose a location of its own (or set the "
                f"catalog property {ALLOW_OVERLAPPING_LOCATIONS}: true)"
            )

    def live_table_locations(self, exclude: Identifier | None = None) -> list[tuple[str, str]]:
        """(name, location) of every table in the catalog but ``exclude``.

        A table's location is read from its metadata file once per metadata directory and
        catalog object: a commit writes its next metadata file into the same directory, and only
        one live table writes there, so a busy catalog costs one read per new table, not one per
        commit. (A ``set-location`` on a table whose ``write.metadata.path`` is elsewhere keeps
        the directory and is seen late; the rule is a guard, a purge never depends on it.)
        """
        out = []
        for ident, metadata_location in self._table_pointers():
            if ident == exclude:
                continue
            directory = metadata_location.rsplit("/", 1)[0]
            location = self._location_of_metadata.get(directory)
            if location is None:
                try:
                    location = read_metadata_file(self.io, metadata_location).location
                except (OSError, TableStoreError):
                    continue  # a table whose metadata cannot be read holds no files we could see
                self._location_of_metadata[directory] = location
            out.append((identifier_str(ident), location))
        return out

    def _table_pointers(self) -> list[tuple[Identifier, str]]:
        """(identifier, metadata location) of every table in the catalog. Implementations with
        one place for all pointers (the SQL catalog) answer in one query."""
        out: list[tuple[Identifier, str]] = []
        pending = list(self.list_namespaces())
        while pending:
            namespace = pending.pop()
            pending.extend(self.list_namespaces(namespace))
            for ident in self.list_tables(namespace):
                with contextlib.suppress(NoSuchTableError):
                    out.append((ident, self.load_table_metadata(ident)[0]))
        return out

    def table_io(self, metadata: TableMetadata) -> FileIO:
        """The FileIO for a table: the catalog's, unless table properties override S3 settings."""
        overrides = {k: v for k, v in metadata.properties.items() if k.startswith("s3.")}
        if not overrides:
            return self.io
        return load_file_io({**self.properties, **overrides}, metadata.location)

    def scan_planner(self, identifier: Identifier) -> ScanPlanner | None:
        """Who plans the scans of a table when not the client itself: a catalog whose service
        plans scans (the REST catalog, when the server advertises it) returns its planner."""
        return None

    # -- helpers for implementations -----------------------------------------------------------
    @staticmethod
    def _new_function_def(
        identifier: IdentifierLike,
        class_name: str,
        return_type: str | None,
        properties: Mapping[str, str] | None,
    ) -> FunctionDef:
        """A validated FunctionDef created now (implementations store it)."""
        ident = to_function_identifier(identifier)
        if not isinstance(class_name, str) or not class_name.strip():
            raise ValidationError(
                f"function {identifier_str(ident)} needs the name of the class that implements it"
            )
        if return_type is not None and (not isinstance(return_type, str) or not return_type.strip()):
            raise ValidationError(
                f"function {identifier_str(ident)}: return_type must be a type name like 'bigint' or None"
            )
        if chr(0) in class_name or (return_type is not None and chr(0) in return_type):
            raise ValidationError(
                f"function {identifier_str(ident)}: the class name or return type contains a NUL character; remove it"
            )
        return FunctionDef(
            ident,
            class_name.strip(),
            return_type.strip() if return_type is not None else None,
            {str(k): str(v) for k, v in (properties or {}).items()},
            time.time_ns() // 1_000_000,
        )

    def _make_table(self, identifier: Identifier, metadata_location: str, metadata: TableMetadata) -> Table:
        return Table(self, identifier, metadata_location, metadata, self.table_io(metadata))

    def _new_metadata(
        self,
        identifier: Identifier,
        current: tuple[str, TableMetadata] | None,
        requirements: Sequence[TableRequirement],
        updates: Sequence[TableUpdate],
    ) -> tuple[str, TableMetadata] | None:
        """Validate the requirements, apply the updates and write the next metadata file.

        Returns the new (location, metadata), or None when the updates change nothing.
        """
        staged = self._next_metadata(current, requirements, updates)
        if staged is not None:
            self._write_next_metadata(identifier, *staged)
        return staged

    def _next_metadata(
        self,
        current: tuple[str, TableMetadata] | None,
        requirements: Sequence[TableRequirement],
        updates: Sequence[TableUpdate],
    ) -> tuple[str, TableMetadata] | None:
        """:meth:`_new_metadata` without the write: the next (location, metadata), or None."""
        current_location, current_metadata = current if current is not None else (None, None)
        for requirement in requirements:
            requirement.validate(current_metadata)
        new_metadata = apply_updates(current_metadata, list(updates), metadata_location=current_location)
        if current_metadata is not None and new_metadata == current_metadata:
            return None
        return new_metadata_location(new_metadata, current_location), new_metadata

    def _write_next_metadata(self, identifier: Identifier, location: str, new_metadata: TableMetadata) -> None:
        """Write the next metadata file of a commit: CommitConflictError if it exists already,
        CommitFailedError if it cannot be written."""
        try:
            write_metadata_file(self.table_io(new_metadata), location, new_metadata)
        except FileExistsError as e:
            raise CommitConflictError(
                f"cannot commit to table {identifier_str(identifier)}: its next metadata file "
                f"{location} exists already"
            ) from e
        except OSError as e:
            raise CommitFailedError(
                f"cannot commit to table {identifier_str(identifier)}: writing {location} failed: {e}"
            ) from e


__all__ = [
    "WRITE_METADATA_PATH",
    "Catalog",
    "FunctionAlreadyExistsError",
    "FunctionDef",
    "Identifier",
    "IdentifierLike",
    "PropertiesUpdateSummary",
    "View",
    "ViewAlreadyExistsError",
    "identifier_str",
    "metadata_file_missing",
    "new_metadata_location",
    "normalize_location",
    "parse_metadata_version",
    "read_metadata_file",
    "read_view_metadata_file",
    "to_function_identifier",
    "to_namespace",
    "to_table_identifier",
    "to_view_identifier",
    "validate_name",
    "write_metadata_file",
    "write_view_metadata_file",
]
