"""Queries: resolve names through the catalog manager, then run the query in Spark SQL.

Every table reference becomes a temporary view over the `tablestore` data source, so Spark
pushes projections and filters into scan planning. Views stored in the catalog expand into
temporary views of their own query, resolved under the catalog and database they were created
in. Metadata tables (``db.t.snapshots`` ...) become views of their Arrow tables, and catalog
functions are registered as Spark UDFs when a statement uses them.
"""

from __future__ import annotations

import importlib
import itertools
import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.tokens import Token

from tablestore import errors
from tablestore.errors import (
    NoSuchFunctionError,
    NoSuchNamespaceError,
    NoSuchTableError,
    ParseError,
    QueryError,
    TableStoreError,
    UnsupportedError,
    ValidationError,
)
from tablestore.spark.datasource.source_read import resolve_ref
from tablestore.spark.native.native_read import read_with_options
from tablestore.spec.metadata.view import DEFAULT_DIALECT, SQLViewRepresentation, View
from tablestore.spec.schemas.row_lineage import ROW_LINEAGE_BY_NAME
from tablestore.sql.parse.tokens import parse_tokens
from tablestore.sql.plan.lineage_columns import LINEAGE_OPTION, hide_from_stars, references_row_lineage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tablestore.catalog.base import Catalog
    from tablestore.catalog_manager import CatalogManager
    from tablestore.sql.options import SessionOptions

METADATA_TABLES = ("snapshots", "history", "files", "data_files", "delete_files", "manifests", "partitions",
                   "entries", "refs", "metadata_log_entries", "schemas", "position_deletes", "all_data_files",
                   "all_delete_files", "all_files", "all_entries", "all_manifests")
# The metadata tables that read one snapshot, and so take VERSION AS OF and TIMESTAMP AS OF.
SNAPSHOT_METADATA_TABLES = ("files", "data_files", "delete_files", "manifests", "partitions", "entries",
                            "position_deletes")
_view_ids = itertools.count(1)
# pyspark logs every failed query with its whole plan; the error we raise says what matters.
logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)


def parse_query(sql: str, tokens: Sequence[Token] = ()) -> exp.Expression:
    """sqlglot's Spark parse of a query, from the ``tokens`` the statement parser lexed when it
    has them (a statement's ``query_tokens``), else from the text."""
    try:
        tree = parse_tokens(sql, tokens) if tokens else sqlglot.parse_one(sql, read="spark")
    except SqlglotParseError as e:
        err = e.errors[0] if e.errors else {}
        raise ParseError(f"syntax error: {err.get('description', str(e))}", err.get("line"), err.get("col"),
                         sql) from None
    if tree is None:
        raise ParseError("empty query", sql=sql)
    return tree  # type: ignore[return-value]


def _parts(table: exp.Table) -> tuple[str, ...]:
    parts: list[str] = []
    for part in table.parts:
        if isinstance(part, exp.Dot):
            parts.extend(p.name for p in part.flatten())
        else:
            parts.append(part.name)
    return tuple(parts)


class QueryPlanner:
    """Turns a query into Spark SQL over temporary views, registering what it needs."""

    def __init__(self, spark: SparkSession, manager: CatalogManager, config_json: str) -> None:
        self.spark = spark
        self.manager = manager
        self.config_json = config_json
        self._expanding: list[tuple[str, ...]] = []
        # The query being rewritten names a row lineage column: its tables are read with them.
        self._row_lineage = False
        self._lineage_views: dict[str, list[str]] = {}
        # Tables (catalog name, *identifier) read whole by the statement, such as a MERGE's
        # USING table: Spark's own Parquet reader reads them when their files allow it
        # (spark_native_read), which costs a fraction of the data source's Python-to-JVM
        # transfer. Other reads keep the data source, whose filter push-down prunes files.
        self.native_reads: set[tuple[str, ...]] = set()
        # Names bound to temporary views the statement registered itself (bind).
        self._bound: dict[tuple[str, ...], str] = {}
        # The session's options: its spark.wap.branch redirects reads of WAP tables (ref_names).
        self.options: SessionOptions | None = None

    def bind(self, name: str, view: str) -> None:
        """Resolve the bare name ``name`` to the temporary view ``view``: a relation the statement
        made itself, such as a row-level statement's target with its ``_file`` and ``_pos``."""
        self._bound[(name,)] = view

    # -- the entry point -----------------------------------------------------------------------
    def dataframe(self, query: str | exp.Expression, tokens: Sequence[Token] = ()) -> DataFrame:
        """The query as a Spark DataFrame. ``query`` is SQL text, or a tree a statement built
        from its own parse (a row-level statement's query: not parsed again; the planner
        changes it, so pass a tree of its own); ``tokens``, when given, are the text's tokens as
        the statement parser lexed them (a statement's ``query_tokens``), so it is not lexed again."""
        rewritten = self.rewrite(query, tokens)
        with spark_errors():
            return self.spark.sql(rewritten)

    def rewrite(self, query: str | exp.Expression, tokens: Sequence[Token] = ()) -> str:
        """The query in Spark SQL over the temporary views it reads (registered here)."""
        tree = query if isinstance(query, exp.Expression) else parse_query(query, tokens)
        outer, self._row_lineage = self._row_lineage, references_row_lineage(tree)
        try:
            return self._rewrite(tree)
        finally:
            self._row_lineage = outer

    def _rewrite(self, tree: exp.Expression) -> str:
        cte_names = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
        for table in list(tree.find_all(exp.Table)):
            if not table.name or isinstance(table.this, exp.Func):
                continue  # table-valued functions such as range(10)
            parts = _parts(table)
            if len(parts) == 1 and parts[0] in cte_names:
                continue
            view = self._bind_relation(parts, table.args.get("version"))
            alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(parts[-1]))
            table.replace(exp.Table(this=exp.to_identifier(view), alias=alias))
        if self._row_lineage:
            hide_from_stars(tree, self._lineage_views)
        self._register_functions(tree)
        return tree.sql(dialect="spark")

    # -- relations -----------------------------------------------------------------------------
    def _bind_relation(self, parts: tuple[str, ...], version: exp.Version | None) -> str:
        if parts in self._bound:
            return self._bound[parts]
        if len(parts) >= 2 and parts[-1].lower() in METADATA_TABLES:
            table = self._try_table(parts[:-1])
            if table is not None:
                kind = parts[-1].lower()
                if version is None:
                    return self._metadata_view(table, kind)
                if kind not in SNAPSHOT_METADATA_TABLES:
                    raise ValidationError(
                        f"time travel is not supported on the {kind} metadata table; it is supported on "
                        f"{', '.join(SNAPSHOT_METADATA_TABLES)}"
                    )
                return self._metadata_view(table, kind, _version_snapshot(table, version))
        ref_view = self._ref_view(parts, version)
        if ref_view is not None:
            return ref_view
        catalog, identifier = self._resolve(parts)
        if catalog.table_exists(identifier):
            return self._table_view(catalog, identifier, version)
        if catalog.view_exists(identifier):
            if version is not None:
                raise ValidationError(f"{'.'.join(identifier)} is a view; time travel applies to tables only")
            return self._catalog_view(catalog, identifier)
        if not catalog.namespace_exists(identifier[:-1]):
            raise NoSuchNamespaceError(
                f"database {'.'.join(identifier[:-1])!r} does not exist in catalog {catalog.name!r} "
                f"(while resolving {'.'.join(parts)!r})"
            )
        raise NoSuchTableError(
            f"table or view {'.'.join(parts)!r} does not exist (looked for {catalog.name}.{'.'.join(identifier)})"
        )

    def _resolve(self, parts: tuple[str, ...]) -> tuple[Catalog, tuple[str, ...]]:
        """The catalog and identifier of a table name; inside a view, a catalog name unknown here
        is the name another engine gave the catalog the view lives in (Spark's ``rest`` in
        ``SELECT ... FROM rest.db.t``), so the rest of the name is resolved there."""
        if self._expanding and len(parts) >= 3 and not self.manager.has_catalog(parts[0]):
            return self.manager.catalog(self._expanding[-1][0]), parts[1:]
        return self.manager.resolve_table(parts)

    def _try_table(self, parts: tuple[str, ...]) -> Any:
        try:
            catalog, identifier = self._resolve(parts)
        except (ValidationError, NoSuchTableError, NoSuchNamespaceError, LookupError):
            return None
        try:
            return catalog.load_table(identifier)
        except (NoSuchTableError, NoSuchNamespaceError):
            return None

    def _new_view_name(self) -> str:
        return f"__tablestore_{next(_view_ids)}"

    def _ref_view(self, parts: tuple[str, ...], version: exp.Version | None) -> str | None:
        """The view of ``db.t.branch_x`` or ``db.t.tag_x`` (:mod:`tablestore.sql.plan.ref_names`), or
        None when ``parts`` names no ref."""
        from tablestore.sql.plan.ref_names import check_readable, split_ref

        split = split_ref(self._resolve, parts)
        if split is None:
            return None
        name = ".".join((split.catalog.name, *split.identifier))
        if version is not None:
            raise ValidationError(f"{'.'.join(parts)} names a {split.ref.kind} of {name}; time travel "
                                  f"(VERSION AS OF, TIMESTAMP AS OF) applies to the table's own name")
        _, metadata = split.catalog.load_table_metadata(split.identifier)
        check_readable(metadata, split.ref, name)
        return self._table_view(split.catalog, split.identifier, None, ref=split.ref.name)

    def _table_view(self, catalog: Catalog, identifier: tuple[str, ...], version: exp.Version | None,
                    ref: str | None = None) -> str:
        if version is None and ref is None and self.options is not None and self.options.get("spark.wap.branch"):
            from tablestore.sql.plan.ref_names import wap_read_ref

            ref = wap_read_ref(self.options, catalog.load_table_metadata(identifier)[1])
        if ref is not None:
            reader = self.spark.read.format("tablestore").option("config", self.config_json).option("ref", ref)
            return self._register_read(reader, catalog, identifier)
        if version is None and not self._row_lineage and (catalog.name, *identifier) in self.native_reads:
            outcome = read_with_options(self.spark, ".".join((catalog.name, *identifier)),
                                        {"config": self.config_json})
            if outcome.path == "native":
                name = self._new_view_name()
                outcome.df.createOrReplaceTempView(name)
                return name
        reader = self.spark.read.format("tablestore").option("config", self.config_json)
        if version is not None:
            kind = version.name.upper()
            value = version.expression
            literal = value.this if isinstance(value, exp.Literal) else value.sql(dialect="spark")
            if kind == "VERSION":
                if isinstance(value, exp.Literal) and value.is_string:
                    # Checked here too, so that an unknown name is our error, not Spark's.
                    _, metadata = catalog.load_table_metadata(identifier)
                    resolve_ref(metadata, str(literal), ".".join((catalog.name, *identifier)), None, None)
                    reader = reader.option("ref", str(literal))
                else:
                    reader = reader.option("snapshot-id", str(literal))
            else:
                reader = reader.option("as-of-timestamp", str(literal))
        return self._register_read(reader, catalog, identifier)

    def _register_read(self, reader: Any, catalog: Catalog, identifier: tuple[str, ...]) -> str:
        if self._row_lineage:
            reader = reader.option(LINEAGE_OPTION, "true")
        name = self._new_view_name()
        df = reader.load(".".join((catalog.name, *identifier)))
        df.createOrReplaceTempView(name)
        if self._row_lineage:
            self._lineage_views[name] = [c for c in df.columns if c.lower() not in ROW_LINEAGE_BY_NAME]
        return name

    def _metadata_view(self, table: Any, kind: str, snapshot_id: int | None = None) -> str:
        inspect = getattr(table.inspect, kind)
        arrow = inspect() if snapshot_id is None else inspect(snapshot_id)
        name = self._new_view_name()
        self.spark.createDataFrame(arrow).createOrReplaceTempView(name)
        return name

    def _catalog_view(self, catalog: Catalog, identifier: tuple[str, ...]) -> str:
        key = (catalog.name, *identifier)
        if key in self._expanding:
            chain = " -> ".join(".".join(k) for k in [*self._expanding, key])
            raise ValidationError(f"view {'.'.join(key)} refers to itself: {chain}")
        view = catalog.load_view(identifier)
        sql = _runnable_sql(view, ".".join(key))
        # A default catalog unknown here (Spark writes its session catalog, spark_catalog) is
        # another engine's: unqualified names resolve in the catalog the view lives in.
        foreign = bool(view.default_catalog) and not self.manager.has_catalog(str(view.default_catalog))
        default_catalog = catalog.name if foreign or not view.default_catalog else str(view.default_catalog)
        namespace = tuple(view.default_namespace)
        if foreign and namespace and not catalog.namespace_exists(namespace):
            # That engine's current database (Spark's "default"), not one of this catalog: the
            # view's own namespace stands in.
            namespace = identifier[:-1]
        self._expanding.append(key)
        try:
            with self.manager_context(default_catalog, namespace):
                df = self.spark.sql(self.rewrite(sql))
        finally:
            self._expanding.pop()
        names = view.schema.column_names
        if len(names) == len(df.columns) and names != df.columns:
            df = df.toDF(*names)
        name = self._new_view_name()
        df.createOrReplaceTempView(name)
        return name

    @contextmanager
    def manager_context(self, catalog: str, namespace: tuple[str, ...]) -> Iterator[None]:
        """Resolve names as if ``USE catalog.namespace`` (a view's SQL is resolved where it was made)."""
        saved = (self.manager.current_catalog, self.manager.current_database)
        try:
            self.manager.use((catalog, *namespace) if namespace else (catalog,))
            yield
        finally:
            self.manager.current_catalog, self.manager.current_database = saved

    # -- functions -----------------------------------------------------------------------------
    def _register_functions(self, tree: exp.Expression) -> None:
        for call in tree.find_all(exp.Anonymous):
            name = call.name
            if not name or self._builtin(name):
                continue
            parent = call.parent
            if isinstance(parent, exp.Dot) and parent.expression is call:
                continue  # qualified calls are resolved by Spark
            self.register_function(name)

    def _builtin(self, name: str) -> bool:
        try:
            return bool(self.spark.catalog.functionExists(name))
        except Exception:
            return False

    def register_function(self, name: str) -> None:
        catalog = self.manager.catalog()
        identifier = (*self.manager.current_namespace, name)
        try:
            definition = catalog.load_function(identifier)
        except NoSuchFunctionError:
            return  # Spark reports the unknown function with its own message
        fn = load_python_function(definition.class_name)
        self.spark.udf.register(name, fn, returnType=definition.return_type or "string")


def _version_snapshot(table: Any, version: exp.Version) -> int:
    """The snapshot id a metadata table's ``VERSION AS OF`` (a snapshot id, branch or tag) or
    ``TIMESTAMP AS OF`` (a timestamp string) selects."""
    from tablestore.option_values import epoch_ms
    from tablestore.table.read.scan import select_snapshot

    value = version.expression
    if not isinstance(value, exp.Literal):
        raise ValidationError(f"{version.name} AS OF on a metadata table takes a literal, not {value.sql('spark')}")
    if version.name.upper() == "VERSION":
        if value.is_string:
            ref, snapshot_id = resolve_ref(table.metadata, str(value.this), table.name, None, None)
            snapshot = select_snapshot(table.metadata, snapshot_id, None, ref)
        else:
            snapshot = select_snapshot(table.metadata, int(value.this))
    else:
        snapshot = select_snapshot(table.metadata, None, epoch_ms(str(value.this)))
    if snapshot is None:
        raise ValidationError(f"table {table.name} has no snapshot at {version.sql('spark')}")
    return int(snapshot.snapshot_id)


def _runnable_sql(view: View, name: str) -> str:
    """The view's SQL in the dialect tablestore runs (Spark's); UnsupportedError naming the
    dialects it has otherwise."""
    spark = view.version.sql_representation(DEFAULT_DIALECT)
    if spark is not None:
        return spark.sql
    dialects = sorted({r.dialect for r in view.version.representations if isinstance(r, SQLViewRepresentation)})
    raise UnsupportedError(
        f"view {name} has SQL only in dialect {', '.join(repr(d) for d in dialects) or 'none'}; tablestore "
        f"runs views in the {DEFAULT_DIALECT!r} dialect: add a {DEFAULT_DIALECT} version of the view "
        "(CREATE OR REPLACE VIEW from Spark or tablestore), or query it from an engine that speaks that dialect"
    )


@contextmanager
def spark_errors() -> Iterator[None]:
    """Spark's analysis and runtime errors as a QueryError with Spark's own first line."""
    from pyspark.errors import PySparkException

    try:
        yield
    except PySparkException as e:
        text = (e.getMessage() if hasattr(e, "getMessage") else str(e)) or str(e)
        raised = _worker_error(text)
        if raised is not None:
            raise raised from None
        first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
        first = first.split("; line ")[0] if "SQLSTATE" in first else first
        if first.rstrip().endswith("Traceback (most recent call last):"):
            # A Python worker failed: its exception line says why, the first line does not.
            cause = _PYTHON_EXCEPTION.findall(text)
            if cause:
                first = f"{first.rstrip().removesuffix('Traceback (most recent call last):').rstrip()} {cause[0]}"
        raise QueryError(first.replace("__tablestore_", "relation ")) from None


def load_python_function(class_name: str) -> Any:
    """Import ``module.function``; ship it to executors by value so they need not import it."""
    module_name, _, attr = class_name.rpartition(".")
    if not module_name:
        raise ValidationError(f"function class {class_name!r} must be 'module.function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValidationError(f"cannot import module {module_name!r} for function {class_name!r}: {e}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValidationError(f"{class_name!r} is not a function in module {module_name!r}")
    try:
        import cloudpickle

        cloudpickle.register_pickle_by_value(module)
    except (ImportError, ValueError):
        pass
    return fn


_PYTHON_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): .+$", re.MULTILINE)
_WORKER_ERROR = re.compile(r"^tablestore\.errors\.(\w+): (.+)$", re.MULTILINE)


def _worker_error(text: str) -> TableStoreError | None:
    """The tablestore error a Python worker raised (reading a table in a task), as that error:
    its message says what to do, where Spark's first line says only that a worker failed."""
    found = _WORKER_ERROR.search(text)
    if found is None:
        return None
    cls = getattr(errors, found.group(1), None)
    if not (isinstance(cls, type) and issubclass(cls, TableStoreError)):
        return None
    try:
        return cls(found.group(2))
    except TypeError:  # an error class that takes other arguments
        return None
