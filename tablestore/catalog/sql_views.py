"""Views and functions of the SQL catalog (a mixin of ``SqlCatalog``).

Views are stored as the Iceberg JDBC catalog stores them: a row of ``iceberg_tables`` with
``iceberg_type = 'VIEW'`` whose ``metadata_location`` points at the view's metadata file
(``<warehouse>/<namespace>/<view>/metadata/<NNNNN>-<uuid>.metadata.json``). Tables and views
share the table's primary key, so a name is one or the other; table queries filter on
``iceberg_type`` (as pyiceberg's do), view queries likewise.

Functions have no place in the JDBC layout, so they get their own table,
``tablestore_functions(catalog_name, function_namespace, function_name, class_name,
return_type, properties, created_ms)``. It is created when the first function is, so a database
shared with other JDBC clients gains a table only if functions are used; other clients ignore it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Column,
    ColumnElement,
    Connection,
    MetaData,
    String,
    Text,
    delete,
    insert,
    inspect,
    literal,
    select,
    update,
)
from sqlalchemy import Table as SqlTable
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.schema import CreateTable

from tablestore.catalog.base import FunctionDef, read_view_metadata_file
from tablestore.catalog.compare_and_swap import PointerSwap, pointer_moved, swap_pointers
from tablestore.catalog.sql_tables import ICEBERG_TABLES, VIEW_TYPE, namespace_text
from tablestore.errors import (
    CommitConflictError,
    CorruptMetadataError,
    FunctionAlreadyExistsError,
    InvalidNameError,
    NoSuchFunctionError,
    NoSuchNamespaceError,
    NoSuchViewError,
    UnsupportedError,
    ViewAlreadyExistsError,
)
from tablestore.names import (
    Identifier,
    IdentifierLike,
    identifier_str,
    to_function_identifier,
    to_namespace,
    to_view_identifier,
)
from tablestore.spec.metadata.view import View

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from tablestore.io.fileio import FileIO
    from tablestore.spec.metadata.view import ViewMetadata

NAME_MAX_LENGTH = 255
# Concurrent CREATE OR REPLACE FUNCTION calls can both find no row and both insert; the loser
# retries and then updates the winner's row.
FUNCTION_REPLACE_ATTEMPTS = 3

FUNCTIONS = SqlTable(
    "tablestore_functions",
    MetaData(),
    Column("catalog_name", String(255), primary_key=True, nullable=False),
    Column("function_namespace", String(255), primary_key=True, nullable=False),
    Column("function_name", String(255), primary_key=True, nullable=False),
    Column("class_name", String(1000), nullable=False),
    Column("return_type", String(1000), nullable=True),
    Column("properties", Text, nullable=True),  # a JSON object of strings
    Column("created_ms", BigInteger, nullable=False),
)

_F = FUNCTIONS.c


class SqlViewsAndFunctions:
    """Views and functions for ``SqlCatalog``; it uses the catalog's connections and helpers."""

    # Whether tablestore_functions is known to exist; once it does, it is not looked up again.
    _functions_table_exists: bool = False

    if TYPE_CHECKING:
        # Provided by SqlCatalog / Catalog.
        name: str
        io: FileIO
        engine: Engine
        _typed: bool

        def _read(self) -> AbstractContextManager[Connection]: ...
        def _write(self) -> AbstractContextManager[Connection]: ...
        def _ns_str(self, namespace: Identifier) -> str: ...
        def _namespace_exists(self, conn: Connection, ns: str) -> bool: ...
        def _require_namespace(self, conn: Connection, ns: str) -> None: ...
        def _table_key(self, identifier: Identifier) -> list[ColumnElement[bool]]: ...
        def table_exists(self, identifier: IdentifierLike) -> bool: ...
        @staticmethod
        def _new_function_def(
            identifier: IdentifierLike,
            class_name: str,
            return_type: str | None,
            properties: Mapping[str, str] | None,
        ) -> FunctionDef: ...

    # -- views -----------------------------------------------------------------------------------
    def _object_ident(self, ident: Identifier, kind: str) -> Identifier:
        self._ns_str(ident[:-1])
        if len(ident[-1]) > NAME_MAX_LENGTH:
            raise InvalidNameError(f"{kind} name {ident[-1][:40]!r}... is longer than {NAME_MAX_LENGTH} characters")
        return ident

    def _view_ident(self, identifier: IdentifierLike) -> Identifier:
        return self._object_ident(to_view_identifier(identifier), "view")

    def _views_supported(self) -> None:
        if not self._typed:
            raise UnsupportedError(
                f"catalog {self.name!r} cannot store views: its iceberg_tables has no iceberg_type column "
                "(the schema of older JDBC catalogs); add it with "
                "ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)"
            )

    def _view_filter(self) -> ColumnElement[bool]:
        return ICEBERG_TABLES.c.iceberg_type == VIEW_TYPE

    def list_views(self, namespace: IdentifierLike) -> list[Identifier]:
        ns_tuple = to_namespace(namespace)
        ns = self._ns_str(ns_tuple)
        t = ICEBERG_TABLES.c
        with self._read() as conn:
            self._require_namespace(conn, ns)
            if not self._typed:
                return []
            names = conn.execute(
                select(t.table_name)
                .where(t.catalog_name == self.name, t.table_namespace == ns, self._view_filter())
                .order_by(t.table_name)
            ).scalars().all()
        return [(*ns_tuple, name) for name in names]

    def view_exists(self, identifier: IdentifierLike) -> bool:
        ident = self._view_ident(identifier)
        if not self._typed:
            return False
        with self._read() as conn:
            row = conn.execute(
                select(literal(1)).where(*self._table_key(ident), self._view_filter()).limit(1)
            ).first()
        return row is not None

    def load_view_metadata(self, identifier: IdentifierLike) -> tuple[str, ViewMetadata]:
        ident = self._view_ident(identifier)
        location = self._current_view_location(ident)
        return location, read_view_metadata_file(self.io, location)

    def _current_view_location(self, ident: Identifier) -> str:
        row = None
        if self._typed:
            with self._read() as conn:
                row = conn.execute(
                    select(ICEBERG_TABLES.c.metadata_location)
                    .where(*self._table_key(ident), self._view_filter())
                ).first()
        if row is None:
            raise self._no_such_view(ident)
        if not row[0]:
            raise CorruptMetadataError(f"view {identifier_str(ident)} has no metadata location in the catalog")
        return str(row[0])

    def _no_such_view(self, ident: Identifier) -> NoSuchViewError:
        hint = " (it is a table)" if self.table_exists(ident) else ""
        return NoSuchViewError(f"View does not exist: {identifier_str(ident)}{hint}")

    def _create_view_entry(self, identifier: Identifier, metadata_location: str) -> None:
        self._views_supported()
        ident = self._view_ident(identifier)
        t = ICEBERG_TABLES.c
        ns = self._ns_str(ident[:-1])
        name = identifier_str(ident)
        try:
            with self._write() as conn:
                self._require_namespace(conn, ns)
                existing = conn.execute(select(t.iceberg_type).where(*self._table_key(ident))).first()
                if existing is not None:
                    raise self._name_taken(name, existing[0])
                conn.execute(insert(ICEBERG_TABLES).values(
                    catalog_name=self.name,
                    table_namespace=ns,
                    table_name=ident[-1],
                    metadata_location=metadata_location,
                    previous_metadata_location=None,
                    iceberg_type=VIEW_TYPE,
                ))
        except IntegrityError:
            kind = "Table with same name" if self.table_exists(ident) else "View"
            raise ViewAlreadyExistsError(f"{kind} already exists: {name}") from None

    @staticmethod
    def _name_taken(name: str, iceberg_type: str | None) -> ViewAlreadyExistsError:
        if iceberg_type == VIEW_TYPE:
            return ViewAlreadyExistsError(f"View already exists: {name}")
        return ViewAlreadyExistsError(
            f"Table with same name already exists: {name} (tables and views share names)"
        )

    def _swap_view_entry(self, identifier: Identifier, base_location: str, new_location: str) -> None:
        ident = self._view_ident(identifier)
        swap = PointerSwap(self._ns_str(ident[:-1]), ident[-1], base_location, new_location)
        what = f"replace of view {identifier_str(ident)}"
        lost = swap_pointers(self.engine, self.name, [swap], what)
        if lost is None:
            return
        if not self.view_exists(ident):
            raise self._no_such_view(ident)
        raise pointer_moved(what, "view", lost)

    def drop_view(self, identifier: IdentifierLike) -> None:
        ident = self._view_ident(identifier)
        if self._typed:
            with self._write() as conn:
                result = conn.execute(
                    delete(ICEBERG_TABLES).where(*self._table_key(ident), self._view_filter())
                )
                if result.rowcount == 1:
                    return
        raise self._no_such_view(ident)

    def rename_view(self, from_identifier: IdentifierLike, to_identifier: IdentifierLike) -> View:
        src = self._view_ident(from_identifier)
        dst = self._view_ident(to_identifier)
        what = f"Cannot rename {identifier_str(src)} to {identifier_str(dst)}"
        if not self._typed:
            raise self._no_such_view(src)
        t = ICEBERG_TABLES.c
        try:
            with self._write() as conn:
                dst_ns = self._ns_str(dst[:-1])
                if not self._namespace_exists(conn, dst_ns):
                    raise NoSuchNamespaceError(
                        f"Namespace does not exist: {namespace_text(dst_ns)} ({what.lower()}; create it first)"
                    )
                existing = conn.execute(select(t.iceberg_type).where(*self._table_key(dst))).first()
                if existing is not None and src != dst:
                    kind = "View" if existing[0] == VIEW_TYPE else "Table"
                    raise ViewAlreadyExistsError(f"{what}. {kind} already exists")
                result = conn.execute(
                    update(ICEBERG_TABLES)
                    .where(*self._table_key(src), self._view_filter())
                    .values(table_namespace=dst_ns, table_name=dst[-1])
                )
                if result.rowcount < 1:
                    raise NoSuchViewError(f"View does not exist: {identifier_str(src)}")
        except IntegrityError:
            raise ViewAlreadyExistsError(f"{what}. View already exists") from None
        location, metadata = self.load_view_metadata(dst)
        return View(dst, location, metadata)

    # -- functions -------------------------------------------------------------------------------
    def _has_functions_table(self, conn: Connection) -> bool:
        if not self._functions_table_exists:
            # Looked up again while missing: another process may create it any time.
            self._functions_table_exists = inspect(conn).has_table(FUNCTIONS.name)
        return self._functions_table_exists

    def _ensure_functions_table(self) -> None:
        with self._read() as conn:
            if self._has_functions_table(conn):
                return
        try:
            with self._write() as conn:
                conn.execute(CreateTable(FUNCTIONS, if_not_exists=True))
        except SQLAlchemyError:
            # Two processes creating it at once: PostgreSQL can report a duplicate even with
            # IF NOT EXISTS; what matters is that it exists now.
            with self._read() as conn:
                if not inspect(conn).has_table(FUNCTIONS.name):
                    raise
        self._functions_table_exists = True

    def _function_ident(self, identifier: IdentifierLike) -> Identifier:
        return self._object_ident(to_function_identifier(identifier), "function")

    def _function_key(self, ident: Identifier) -> list[ColumnElement[bool]]:
        return [
            _F.catalog_name == self.name,
            _F.function_namespace == self._ns_str(ident[:-1]),
            _F.function_name == ident[-1],
        ]

    def create_function(
        self,
        identifier: IdentifierLike,
        class_name: str,
        return_type: str | None = None,
        replace: bool = False,
        properties: Mapping[str, str] | None = None,
    ) -> FunctionDef:
        ident = self._function_ident(identifier)
        fn = self._new_function_def(ident, class_name, return_type, properties)
        ns = self._ns_str(ident[:-1])
        name = identifier_str(ident)
        values: dict[str, Any] = {
            "class_name": fn.class_name,
            "return_type": fn.return_type,
            "properties": json.dumps(fn.properties, sort_keys=True),
            "created_ms": fn.created_ms,
        }
        self._ensure_functions_table()
        for _attempt in range(FUNCTION_REPLACE_ATTEMPTS):
            try:
                with self._write() as conn:
                    if not self._namespace_exists(conn, ns):
                        raise NoSuchNamespaceError(
                            f"cannot create function {name}: namespace {ns!r} does not exist; create it first"
                        )
                    if replace:
                        result = conn.execute(update(FUNCTIONS).where(*self._function_key(ident)).values(**values))
                        if result.rowcount == 1:
                            return fn
                    conn.execute(insert(FUNCTIONS).values(
                        catalog_name=self.name, function_namespace=ns, function_name=ident[-1], **values
                    ))
                return fn
            except IntegrityError:
                if not replace:
                    raise FunctionAlreadyExistsError(
                        f"function {name} already exists; use replace to redefine it"
                    ) from None
        raise CommitConflictError(f"cannot replace function {name}: other writers keep changing it; try again")

    def load_function(self, identifier: IdentifierLike) -> FunctionDef:
        ident = self._function_ident(identifier)
        with self._read() as conn:
            row = conn.execute(
                select(_F.class_name, _F.return_type, _F.properties, _F.created_ms)
                .where(*self._function_key(ident))
            ).first() if self._has_functions_table(conn) else None
        if row is None:
            raise NoSuchFunctionError(f"function {identifier_str(ident)} does not exist in catalog {self.name!r}")
        try:
            props = json.loads(row.properties) if row.properties else {}
        except ValueError:
            raise CorruptMetadataError(
                f"function {identifier_str(ident)} has properties that are not JSON: {row.properties[:80]!r}"
            ) from None
        return FunctionDef(
            ident, row.class_name, row.return_type, {str(k): str(v) for k, v in props.items()}, int(row.created_ms)
        )

    def list_functions(self, namespace: IdentifierLike) -> list[Identifier]:
        ns_tuple = to_namespace(namespace)
        ns = self._ns_str(ns_tuple)
        with self._read() as conn:
            self._require_namespace(conn, ns)
            names = self._function_names(conn, ns)
        return [(*ns_tuple, name) for name in names]

    def _function_names(self, conn: Connection, ns: str) -> list[str]:
        if not self._has_functions_table(conn):
            return []
        return list(conn.execute(
            select(_F.function_name)
            .where(_F.catalog_name == self.name, _F.function_namespace == ns)
            .order_by(_F.function_name)
        ).scalars())

    def function_exists(self, identifier: IdentifierLike) -> bool:
        ident = self._function_ident(identifier)
        with self._read() as conn:
            if not self._has_functions_table(conn):
                return False
            return conn.execute(select(literal(1)).where(*self._function_key(ident)).limit(1)).first() is not None

    def drop_function(self, identifier: IdentifierLike) -> None:
        ident = self._function_ident(identifier)
        with self._write() as conn:
            if self._has_functions_table(conn):
                result = conn.execute(delete(FUNCTIONS).where(*self._function_key(ident)))
                if result.rowcount == 1:
                    return
        raise NoSuchFunctionError(f"function {identifier_str(ident)} does not exist in catalog {self.name!r}")


__all__ = ["FUNCTIONS", "VIEW_TYPE", "SqlViewsAndFunctions"]
