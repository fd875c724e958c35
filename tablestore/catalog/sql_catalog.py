"""The SQL catalog: the Iceberg JDBC catalog's tables, in SQLite or PostgreSQL.

The database layout is exactly the one of Iceberg's ``JdbcCatalog`` and pyiceberg's
``SqlCatalog``, so those and this catalog can share one database:

- ``iceberg_tables(catalog_name, table_namespace, table_name, metadata_location,
  previous_metadata_location, iceberg_type)`` — one row per table (``iceberg_type`` is the "V1"
  schema's column: ``TABLE``, ``VIEW`` or NULL for rows written by older clients; databases
  created without the column are used as they are).
- ``iceberg_namespace_properties(catalog_name, namespace, property_key, property_value)`` — one
  row per namespace property, plus the ``exists=true`` marker row every namespace gets.

Views (rows with ``iceberg_type = 'VIEW'``) and functions (table ``tablestore_functions``) are
in :mod:`tablestore.catalog.sql_views`.

Multi-level namespaces are stored dotted (``a.b``); a namespace also exists implicitly when a
table or namespace below it exists. Commits compare-and-swap ``metadata_location``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    create_engine,
    delete,
    event,
    insert,
    inspect,
    literal,
    or_,
    select,
    union,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.schema import CreateTable

from tablestore.catalog.base import (
    Catalog,
    Identifier,
    IdentifierLike,
    PropertiesUpdateSummary,
    identifier_str,
    read_metadata_file,
    to_namespace,
    to_table_identifier,
)
from tablestore.catalog.compare_and_swap import PointerSwap, pointer_moved, swap_pointers
from tablestore.catalog.sql_tables import (
    ICEBERG_TABLES,
    LEVEL_DOT,
    NAMESPACE_PROPERTIES,
    TABLE_TYPE,
    VIEW_TYPE,
    namespace_of,
    namespace_text,
)
from tablestore.catalog.sql_transactions import SqlMultiTableCommit
from tablestore.catalog.sql_views import FUNCTIONS, SqlViewsAndFunctions
from tablestore.errors import (
    CommitConflictError,
    CommitFailedError,
    CommitStateUnknownError,
    CorruptMetadataError,
    InvalidNameError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
    UnsupportedError,
    ValidationError,
)
from tablestore.io.cleanup import deleted_unless_sent
from tablestore.spec.metadata.update_models import AssertCreate

if TYPE_CHECKING:
    from tablestore.spec.metadata.table_metadata import TableMetadata
    from tablestore.spec.metadata.update_models import TableRequirement, TableUpdate
    from tablestore.table import Table

logger = logging.getLogger(__name__)

URI = "uri"
EXISTS_PROPERTY = "exists"  # the JDBC catalog's marker row that makes an empty namespace exist
NAME_MAX_LENGTH = 255  # the VARCHAR(255) key columns
SQLITE_BUSY_TIMEOUT_S = 30.0

_T = ICEBERG_TABLES.c
_NS = NAMESPACE_PROPERTIES.c


def _like_prefix(value: str) -> str:
    """A LIKE pattern for ``value.`` followed by anything, with ``!`` as the escape character."""
    return value.replace("!", "!!").replace("_", "!_").replace("%", "!%") + ".%"


def _storable_properties(what: str, properties: Mapping[str, str]) -> dict[str, str]:
    """``properties`` as strings, refusing a NUL character: PostgreSQL's text cannot hold one
    (SQLite can), and a catalog must accept the same properties on either database."""
    rows = {str(k): str(v) for k, v in properties.items()}
    for key, value in rows.items():
        if "\x00" in key or "\x00" in value:
            where = "key" if "\x00" in key else "value"
            raise ValidationError(
                f"{what} property {key!r} contains a NUL character, which a catalog database cannot "
                f"store; remove it from the {where}"
            )
    return rows


def _too_long(what: str, name: str) -> str:
    return f"{what} {name[:40]!r}... is longer than {NAME_MAX_LENGTH} characters"


# -- engines -----------------------------------------------------------------------------------


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control away from the sqlite3 module (it would BEGIN lazily, deferred),
    # so that _on_begin can start write transactions with BEGIN IMMEDIATE.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        # WAL lets readers run during a commit and two processes commit without "database is
        # locked" failures (writers wait for each other up to the busy timeout).
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.fetchall()
    finally:
        cursor.close()


def _sqlite_on_begin(conn: Connection) -> None:
    # A deferred transaction that reads and then writes fails at once with SQLITE_BUSY when
    # another process wrote meanwhile (no busy wait is possible); IMMEDIATE takes the write lock
    # up front, so concurrent writers queue instead.
    write = conn.get_execution_options().get("tablestore_write", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def create_catalog_engine(uri: str) -> Engine:
    """A SQLAlchemy engine for a catalog database (SQLite file or PostgreSQL)."""
    try:
        url = make_url(uri)
    except (ArgumentError, ValueError):
        # The message would repeat the URI, which may carry a password.
        raise ValidationError(
            "the catalog uri is not a valid SQLAlchemy URL; use sqlite:////abs/path/catalog.db "
            "or postgresql+psycopg2://user:password@host:5432/db"
        ) from None
    try:
        if url.get_backend_name() == "sqlite":
            database = url.database or ""
            if database and database != ":memory:" and not database.startswith("file:"):
                Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
            event.listen(engine, "connect", _sqlite_on_connect)
            event.listen(engine, "begin", _sqlite_on_begin)
            return engine
        # pool_pre_ping: a server restart must not surface as a failed commit.
        return create_engine(url, pool_pre_ping=True)
    except (NoSuchModuleError, ImportError) as e:
        raise ValidationError(
            f"no database driver for the catalog uri's scheme {url.drivername!r}: {e}; "
            "use sqlite:/// or postgresql+psycopg2://"
        ) from None


# -- the catalog -------------------------------------------------------------------------------


class SqlCatalog(SqlMultiTableCommit, SqlViewsAndFunctions, Catalog):
    """An Iceberg catalog in a SQL database, interchangeable with pyiceberg's SqlCatalog.

    ``SqlCatalog(name, uri="sqlite:////abs/catalog.db" | "postgresql+psycopg2://...",
    warehouse="/abs/warehouse" | "s3://bucket/prefix", **s3_properties)``. Without ``uri`` and
    with a local warehouse, the database is ``<warehouse>/catalog.db``.
    """

    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        if len(name) > NAME_MAX_LENGTH:
            raise InvalidNameError(_too_long("catalog name", name))
        uri = self.properties.get(URI)
        if not uri:
            local = self.warehouse
            if not local or "://" in local.replace("file://", ""):
                raise ValidationError(
                    "SqlCatalog needs uri= (sqlite:////abs/path/catalog.db or postgresql+psycopg2://...)"
                )
            local = local.removeprefix("file:")
            local = local[2:] if local.startswith("//") else local
            uri = f"sqlite:///{os.path.join(local, 'catalog.db')}"
        self.engine = create_catalog_engine(uri)
        self._swap_engine = self.engine
        self._typed = self._init_tables()

    def __repr__(self) -> str:
        return (
            f"SqlCatalog(name={self.name!r}, "
            f"uri={self.engine.url.render_as_string(hide_password=True)!r}, warehouse={self.warehouse!r})"
        )

    def close(self) -> None:
        self.engine.dispose()

    # -- database plumbing -----------------------------------------------------------------------
    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            conn.execution_options(tablestore_write=True)
            with conn.begin():
                yield conn

    def _init_tables(self) -> bool:
        """Create the catalog tables if missing; whether ``iceberg_tables`` has ``iceberg_type``.

        Two processes may start on a new database at once: CREATE ... IF NOT EXISTS, and a
        failure is fine if the table exists afterwards (PostgreSQL can still report a
        duplicate when both create concurrently).
        """
        for table in (ICEBERG_TABLES, NAMESPACE_PROPERTIES):
            if inspect(self.engine).has_table(table.name):
                continue
            try:
                with self._write() as conn:
                    conn.execute(CreateTable(table, if_not_exists=True))
            except SQLAlchemyError:
                if not inspect(self.engine).has_table(table.name):
                    raise
        columns = {c["name"] for c in inspect(self.engine).get_columns(ICEBERG_TABLES.name)}
        if "iceberg_type" not in columns:
            # A database of an older JDBC catalog/pyiceberg ("V0" schema): used as is, since
            # other clients may not expect the column.
            logger.info("catalog database has no iceberg_tables.iceberg_type column; not writing it")
        return "iceberg_type" in columns

    def _table_filter(self) -> list[ColumnElement[bool]]:
        # Rows of views (iceberg_type = 'VIEW', written by Java or Rust) are not tables.
        if not self._typed:
            return []
        return [or_(_T.iceberg_type == TABLE_TYPE, _T.iceberg_type.is_(None))]

    def _table_key(self, identifier: Identifier) -> list[ColumnElement[bool]]:
        return [
            _T.catalog_name == self.name,
            _T.table_namespace == self._ns_str(identifier[:-1]),
            _T.table_name == identifier[-1],
        ]

    @staticmethod
    def _ns_str(namespace: Identifier) -> str:
        # Levels are stored joined by dots (the JDBC layout), so a dot inside a level is stored
        # as LEVEL_DOT; no valid name holds that control character.
        joined = ".".join(level.replace(".", LEVEL_DOT) for level in namespace)
        if len(joined) > NAME_MAX_LENGTH:
            raise InvalidNameError(_too_long("namespace", joined))
        return joined

    def _no_such_table(self, ident: Identifier) -> NoSuchTableError:
        hint = " (it is a view)" if self.view_exists(ident) else ""
        return NoSuchTableError(f"Table does not exist: {identifier_str(ident)}{hint}")

    def _table_ident(self, identifier: IdentifierLike) -> Identifier:
        ident = to_table_identifier(identifier)
        self._ns_str(ident[:-1])
        if len(ident[-1]) > NAME_MAX_LENGTH:
            raise InvalidNameError(_too_long("table name", ident[-1]))
        return ident

    # -- namespaces ------------------------------------------------------------------------------
    def namespace_exists(self, namespace: IdentifierLike) -> bool:
        ns = self._ns_str(to_namespace(namespace))
        with self._read() as conn:
            return self._namespace_exists(conn, ns)

    def _namespace_exists(self, conn: Connection, ns: str) -> bool:
        # As the JDBC catalog: a namespace exists if it has properties (at least the marker) or
        # a table or namespace below it exists.
        prefix = _like_prefix(ns)
        in_tables = select(literal(1)).where(
            _T.catalog_name == self.name,
            or_(_T.table_namespace == ns, _T.table_namespace.like(prefix, escape="!")),
        ).limit(1)
        if conn.execute(in_tables).first() is not None:
            return True
        in_properties = select(literal(1)).where(
            _NS.catalog_name == self.name,
            or_(_NS.namespace == ns, _NS.namespace.like(prefix, escape="!")),
        ).limit(1)
        return conn.execute(in_properties).first() is not None

    def _require_namespace(self, conn: Connection, ns: str) -> None:
        if not self._namespace_exists(conn, ns):
            raise NoSuchNamespaceError(f"Namespace does not exist: {namespace_text(ns)}")

    def create_namespace(
        self, namespace: IdentifierLike, properties: Mapping[str, str] | None = None
    ) -> None:
        ns = self._ns_str(to_namespace(namespace))
        rows = _storable_properties("namespace", properties or {})
        # Java's JDBC catalog always writes the marker (pyiceberg only when there are no
        # properties); with it the namespace survives the removal of all its properties.
        rows[EXISTS_PROPERTY] = "true"
        try:
            with self._write() as conn:
                if self._namespace_exists(conn, ns):
                    raise NamespaceAlreadyExistsError(f"Namespace already exists: {namespace_text(ns)}")
                conn.execute(insert(NAMESPACE_PROPERTIES), [
                    {"catalog_name": self.name, "namespace": ns, "property_key": k, "property_value": v}
                    for k, v in rows.items()
                ])
        except IntegrityError:
            raise NamespaceAlreadyExistsError(f"Namespace already exists: {namespace_text(ns)}") from None

    def drop_namespace(self, namespace: IdentifierLike) -> None:
        levels = to_namespace(namespace)
        ns = self._ns_str(levels)
        with self._write() as conn:
            self._require_namespace(conn, ns)
            # Every row counts, views included (pyiceberg's drop_namespace counts only tables and
            # would strand the views); functions count too.
            rows = conn.execute(
                select(_T.table_name, _T.iceberg_type if self._typed else literal(None))
                .where(_T.catalog_name == self.name, _T.table_namespace == ns)
                .order_by(_T.table_name)
            ).all()
            contents = [(("view" if kind == VIEW_TYPE else "table"), f"{ns}.{t}") for t, kind in rows]
            contents += [("function", f"{ns}.{f}") for f in self._function_names(conn, ns)]
            if contents:
                counts = {k: sum(1 for kind, _ in contents if kind == k) for k in ("table", "view", "function")}
                kinds = ", ".join(f"{n} {k}(s)" for k, n in counts.items() if n)
                shown = ", ".join(n for _, n in contents[:5]) + (", ..." if len(contents) > 5 else "")
                raise NamespaceNotEmptyError(
                    f"Namespace {namespace_text(ns)} is not empty. It has {kinds} ({shown}); "
                    "drop them first (or use DROP NAMESPACE ... CASCADE in SQL)"
                )
            children = self._child_namespaces(conn, levels)
            if children:
                shown = ", ".join(".".join(c) for c in children[:5]) + (", ..." if len(children) > 5 else "")
                raise NamespaceNotEmptyError(
                    f"Namespace {namespace_text(ns)} is not empty. It has namespace(s) {shown}; "
                    "drop them first (or use DROP NAMESPACE ... CASCADE in SQL)"
                )
            conn.execute(delete(NAMESPACE_PROPERTIES).where(
                _NS.catalog_name == self.name, _NS.namespace == ns
            ))

    def list_namespaces(self, parent: IdentifierLike = ()) -> list[Identifier]:
        parent_ns = to_namespace(parent, allow_root=True)
        with self._read() as conn:
            if parent_ns:
                self._require_namespace(conn, self._ns_str(parent_ns))
            return self._child_namespaces(conn, parent_ns)

    def _child_namespaces(self, conn: Connection, parent: Identifier) -> list[Identifier]:
        tables_q = select(_T.table_namespace.label("ns")).where(_T.catalog_name == self.name)
        props_q = select(_NS.namespace.label("ns")).where(_NS.catalog_name == self.name)
        if parent:
            prefix = _like_prefix(self._ns_str(parent))
            tables_q = tables_q.where(_T.table_namespace.like(prefix, escape="!"))
            props_q = props_q.where(_NS.namespace.like(prefix, escape="!"))
        depth = len(parent) + 1
        found = {
            namespace_of(ns)[:depth]
            for ns in conn.execute(union(tables_q, props_q)).scalars()
            if ns
        }
        return sorted(ns for ns in found if len(ns) == depth and ns[:-1] == parent)

    def load_namespace_properties(self, namespace: IdentifierLike) -> dict[str, str]:
        ns = self._ns_str(to_namespace(namespace))
        with self._read() as conn:
            self._require_namespace(conn, ns)
            rows = conn.execute(
                select(_NS.property_key, _NS.property_value)
                .where(_NS.catalog_name == self.name, _NS.namespace == ns)
            ).all()
        # The marker is bookkeeping, not a property the user set (Java hides it too).
        return {k: v for k, v in sorted(rows) if k != EXISTS_PROPERTY}

    def update_namespace_properties(
        self,
        namespace: IdentifierLike,
        removals: set[str] | None = None,
        updates: Mapping[str, str] | None = None,
    ) -> PropertiesUpdateSummary:
        ns = self._ns_str(to_namespace(namespace))
        removals = set(removals or ())
        updates = _storable_properties("namespace", updates or {})
        if overlap := removals & updates.keys():
            raise ValidationError(f"properties {sorted(overlap)} are both removed and updated; pick one")
        if EXISTS_PROPERTY in removals or EXISTS_PROPERTY in updates:
            raise ValidationError(f"namespace property {EXISTS_PROPERTY!r} is reserved by the catalog")
        with self._write() as conn:
            self._require_namespace(conn, ns)
            current = set(conn.execute(
                select(_NS.property_key).where(_NS.catalog_name == self.name, _NS.namespace == ns)
            ).scalars())
            removed = sorted(removals & current)
            missing = sorted(removals - current)
            if removed:
                conn.execute(delete(NAMESPACE_PROPERTIES).where(
                    _NS.catalog_name == self.name, _NS.namespace == ns, _NS.property_key.in_(removed)
                ))
            if updates:
                # No portable UPSERT: delete then insert, inside this one transaction.
                conn.execute(delete(NAMESPACE_PROPERTIES).where(
                    _NS.catalog_name == self.name, _NS.namespace == ns, _NS.property_key.in_(list(updates))
                ))
                rows = dict(updates)
                if EXISTS_PROPERTY not in current:
                    # A namespace that existed only implicitly (or was created without the marker)
                    # now gets one, so it outlives the removal of these properties.
                    rows[EXISTS_PROPERTY] = "true"
                conn.execute(insert(NAMESPACE_PROPERTIES), [
                    {"catalog_name": self.name, "namespace": ns, "property_key": k, "property_value": v}
                    for k, v in rows.items()
                ])
        return PropertiesUpdateSummary(removed=removed, updated=sorted(updates), missing=missing)

    # -- tables ----------------------------------------------------------------------------------
    def list_tables(self, namespace: IdentifierLike) -> list[Identifier]:
        ns_tuple = to_namespace(namespace)
        ns = self._ns_str(ns_tuple)
        with self._read() as conn:
            self._require_namespace(conn, ns)
            names = conn.execute(
                select(_T.table_name)
                .where(_T.catalog_name == self.name, _T.table_namespace == ns, *self._table_filter())
                .order_by(_T.table_name)
            ).scalars().all()
        return [(*ns_tuple, name) for name in names]

    def _table_pointers(self) -> list[tuple[Identifier, str]]:
        with self._read() as conn:
            rows = conn.execute(
                select(_T.table_namespace, _T.table_name, _T.metadata_location)
                .where(_T.catalog_name == self.name, *self._table_filter())
            ).all()
        return [((*ns.split("."), name), location) for ns, name, location in rows if location]

    def table_exists(self, identifier: IdentifierLike) -> bool:
        ident = self._table_ident(identifier)
        with self._read() as conn:
            row = conn.execute(
                select(literal(1)).where(*self._table_key(ident), *self._table_filter()).limit(1)
            ).first()
        return row is not None

    def _create_table_entry(self, identifier: Identifier, metadata_location: str) -> None:
        ident = self._table_ident(identifier)
        row: dict[str, Any] = {
            "catalog_name": self.name,
            "table_namespace": self._ns_str(ident[:-1]),
            "table_name": ident[-1],
            "metadata_location": metadata_location,
            "previous_metadata_location": None,
        }
        if self._typed:
            row["iceberg_type"] = TABLE_TYPE
        with self.engine.connect() as conn:
            conn.execution_options(tablestore_write=True)
            transaction = conn.begin()
            try:
                self._require_namespace(conn, row["table_namespace"])
                conn.execute(insert(ICEBERG_TABLES).values(**row))
            except IntegrityError:
                transaction.rollback()
                if self.view_exists(ident):
                    raise TableAlreadyExistsError(
                        f"View with same name already exists: {identifier_str(ident)}"
                    ) from None
                raise TableAlreadyExistsError(f"Table already exists: {identifier_str(ident)}") from None
            try:
                transaction.commit()
            except SQLAlchemyError as e:
                # The row may be in the table now: its metadata file must stay.
                raise CommitStateUnknownError(
                    f"creating table {identifier_str(ident)} may or may not have been applied (the database "
                    f"failed while committing); load the table to check. Its metadata file is kept: {metadata_location}"
                ) from e

    def _drop_table_entry(self, identifier: Identifier) -> None:
        ident = self._table_ident(identifier)
        with self._write() as conn:
            result = conn.execute(
                delete(ICEBERG_TABLES).where(*self._table_key(ident), *self._table_filter())
            )
            if result.rowcount < 1:
                raise self._no_such_table(ident)

    def rename_table(self, from_identifier: IdentifierLike, to_identifier: IdentifierLike) -> Table:
        src = self._table_ident(from_identifier)
        dst = self._table_ident(to_identifier)
        what = f"Cannot rename {identifier_str(src)} to {identifier_str(dst)}"
        try:
            with self._write() as conn:
                dst_ns = self._ns_str(dst[:-1])
                if not self._namespace_exists(conn, dst_ns):
                    raise NoSuchNamespaceError(
                        f"Namespace does not exist: {namespace_text(dst_ns)} ({what.lower()}; create it first)"
                    )
                result = conn.execute(
                    update(ICEBERG_TABLES)
                    .where(*self._table_key(src), *self._table_filter())
                    .values(table_namespace=dst_ns, table_name=dst[-1])
                )
                if result.rowcount < 1:
                    raise NoSuchTableError(f"Table does not exist: {identifier_str(src)}")
        except IntegrityError:
            kind = "View" if self.view_exists(dst) else "Table"
            raise TableAlreadyExistsError(f"{what}. {kind} already exists") from None
        return self.load_table(dst)

    def load_table_metadata(self, identifier: IdentifierLike) -> tuple[str, TableMetadata]:
        ident = self._table_ident(identifier)
        location = self._current_location(ident)
        try:
            return location, read_metadata_file(self.io, location)
        except UnsupportedError as e:
            raise UnsupportedError(f"cannot load table {identifier_str(ident)}: {e}") from None

    def _current_location(self, ident: Identifier) -> str:
        with self._read() as conn:
            row = conn.execute(
                select(_T.metadata_location).where(*self._table_key(ident), *self._table_filter())
            ).first()
        if row is None:
            raise self._no_such_table(ident)
        if not row[0]:
            raise CorruptMetadataError(
                f"table {identifier_str(ident)} has no metadata location in the catalog"
            )
        return str(row[0])

    # -- commits ---------------------------------------------------------------------------------
    # Where the pointer swap of a single-table commit is sent, and whether it runs there as its
    # own transaction (the service's PostgreSQL connections in autocommit mode).
    _swap_engine: Engine
    _swap_autocommit = False

    def commit_table(
        self,
        identifier: IdentifierLike,
        requirements: Sequence[TableRequirement],
        updates: Sequence[TableUpdate],
    ) -> tuple[str, TableMetadata]:
        """Commit updates to a table (or create it, when ``requirements`` hold ``AssertCreate``).

        The requirements are checked against the current metadata, the updates applied, the
        next metadata file written, and then the catalog row is swapped only if it still points
        at the metadata the commit was based on. CommitConflictError if a requirement fails or
        another commit won; the new metadata file is deleted then. CommitStateUnknownError if the
        database failed while committing (the file is kept: it may be the table's state now).
        """
        ident = self._table_ident(identifier)
        try:
            current = self.load_table_metadata(ident)
        except NoSuchTableError:
            if not any(isinstance(r, AssertCreate) for r in requirements):
                raise
            return self._create_by_commit(ident, requirements, updates)
        staged = self._new_metadata(ident, current, requirements, updates)
        if staged is None:
            return current
        if not self._swap_staged(ident, current[0], staged):
            raise pointer_moved(
                f"commit to table {identifier_str(ident)}", "table",
                PointerSwap(self._ns_str(ident[:-1]), ident[-1], current[0], staged[0]),
            )
        return staged

    def _create_by_commit(
        self, ident: Identifier, requirements: Sequence[TableRequirement], updates: Sequence[TableUpdate]
    ) -> tuple[str, TableMetadata]:
        staged = self._new_metadata(ident, None, requirements, updates)
        assert staged is not None  # a new table always has metadata
        new_location, new_metadata = staged
        io = self.table_io(new_metadata)
        # The new metadata file is deleted only when the row surely was not written; a database
        # lost at COMMIT (CommitStateUnknownError) keeps it: the table may point at it now.
        with deleted_unless_sent(lambda: io.delete(new_location)):
            self.check_location_free(ident, new_metadata.location)
            try:
                self._create_table_entry(ident, new_location)
            except TableAlreadyExistsError as e:
                if str(e).startswith("View with same name"):
                    raise  # AlreadyExistsError: a view has the name, no retry helps
                raise CommitConflictError(
                    "Requirement failed: table already exists "
                    f"(table {identifier_str(ident)} was created concurrently; load it and retry)"
                ) from None
        return staged

    def _swap_staged(self, ident: Identifier, base_location: str, staged: tuple[str, TableMetadata]) -> bool:
        """Swap the table's pointer from ``base_location`` to the staged metadata file: whether
        it was made. The file is deleted when it was not, or when the database refused the swap;
        it is kept when the outcome is unknown (it may be the table's state now)."""
        new_location, new_metadata = staged
        io = self.table_io(new_metadata)
        swap = PointerSwap(self._ns_str(ident[:-1]), ident[-1], base_location, new_location)
        try:
            lost = swap_pointers(self._swap_engine, self.name, [swap], f"commit to table {identifier_str(ident)}",
                                 autocommit=self._swap_autocommit)
        except CommitStateUnknownError:
            raise  # the COMMIT may have been applied: the file may be the table's state now
        except CommitFailedError:
            io.delete(new_location)
            raise
        if lost is not None:
            io.delete(new_location)
            return False
        return True


__all__ = ["FUNCTIONS", "ICEBERG_TABLES", "NAMESPACE_PROPERTIES", "SqlCatalog", "create_catalog_engine"]
