"""What a statement handler is given: the session's typed context and its options.

Every handler (``catalog_statements.py``, ``table_statements.py``, ``dml.py``, the
``*_statements.py`` modules, the procedures) is a function of a :class:`SessionContext` and one
parsed statement. Handlers import this module and never ``session.py``: the session imports
them, through ``registry.py``, so the dependency runs one way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tablestore.errors import NoSuchTableError, ValidationError
from tablestore.sql.query import QueryPlanner

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tablestore.catalog import Catalog
    from tablestore.config import LakehouseConfig
    from tablestore.session import CatalogManager
    from tablestore.sql import statements as st
    from tablestore.table import Table

INSERT_OVERWRITE_MODE = "tablestore.insert-overwrite.mode"
SPARK_OVERWRITE_MODE = "spark.sql.sources.partitionOverwriteMode"
OVERWRITE_MODES = ("dynamic", "static")
# ``SET tablestore.commit-id = ...``: the commit identifier of the session's INSERTs (dml.py).
COMMIT_ID = "tablestore.commit-id"
UNDEFINED = "<undefined>"


@dataclass
class SessionOptions:
    """The options of one session: what ``SET key=value`` changed, and the runtime mode.

    The two overwrite modes are typed fields: their keys are matched ignoring case (as their
    values are checked) and their values are ``dynamic`` or ``static``. Any other key is kept
    as given, so ``SET`` lists it and ``SET key`` shows it, as Spark does.
    """

    insert_overwrite_mode: str | None = None
    """``SET tablestore.insert-overwrite.mode``: INSERT OVERWRITE's mode; it wins over Spark's."""
    partition_overwrite_mode: str | None = None
    """``SET spark.sql.sources.partitionOverwriteMode``: Spark's name for the same choice."""
    runtime_mode: str = "batch"
    """``batch``, or ``streaming`` in a session that a streaming job runs: row-level DML is batch-only."""
    others: dict[str, str] = field(default_factory=dict)
    """Every other key set in the session, by its name as given."""

    def set(self, key: str, value: str) -> str:
        """Set ``key``; returns the value kept (an overwrite mode in lower case).
        ValidationError for an overwrite mode other than ``dynamic`` or ``static``."""
        known = _known_key(key)
        if known is None:
            self.others[key] = value
            return value
        mode = value.lower()
        if mode not in OVERWRITE_MODES:
            raise ValidationError(f"{key} must be 'dynamic' or 'static', got {value!r}")
        if known == INSERT_OVERWRITE_MODE:
            self.insert_overwrite_mode = mode
        else:
            self.partition_overwrite_mode = mode
        return mode

    def get(self, key: str) -> str | None:
        """The value set for ``key``, or None."""
        known = _known_key(key)
        if known == INSERT_OVERWRITE_MODE:
            return self.insert_overwrite_mode
        if known == SPARK_OVERWRITE_MODE:
            return self.partition_overwrite_mode
        return self.others.get(key)

    def reset(self, key: str | None = None) -> None:
        """Forget what ``SET key=...`` set (every key when None), as Spark's ``RESET``."""
        known = _known_key(key) if key is not None else None
        if key is None or known == INSERT_OVERWRITE_MODE:
            self.insert_overwrite_mode = None
        if key is None or known == SPARK_OVERWRITE_MODE:
            self.partition_overwrite_mode = None
        if key is None:
            self.others.clear()
        else:
            self.others.pop(key, None)

    def items(self) -> list[tuple[str, str]]:
        """Every key set, with its value, sorted by key (what ``SET`` lists)."""
        typed = [(INSERT_OVERWRITE_MODE, self.insert_overwrite_mode),
                 (SPARK_OVERWRITE_MODE, self.partition_overwrite_mode)]
        return sorted([(k, v) for k, v in typed if v is not None] + list(self.others.items()))

    def overwrite_mode(self) -> str | None:
        """The session's INSERT OVERWRITE mode: tablestore's option, else Spark's, else None."""
        return self.insert_overwrite_mode or self.partition_overwrite_mode


def _known_key(key: str) -> str | None:
    lowered = key.lower()
    for known in (INSERT_OVERWRITE_MODE, SPARK_OVERWRITE_MODE):
        if lowered == known.lower():
            return known
    return None


class SessionContext:
    """The session as a statement handler sees it: the configuration, the catalogs (the
    manager: the current catalog and database, name resolution), the options, Spark (started
    on first use) and a query planner over them."""

    def __init__(self, config: LakehouseConfig, manager: CatalogManager, spark: SparkSession | None = None,
                 options: SessionOptions | None = None) -> None:
        self.config = config
        self.manager = manager
        self.options = options if options is not None else SessionOptions()
        self._spark = spark

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            # Imported here: pyspark loads (and a JVM starts) only when a statement needs Spark.
            from tablestore.engine.spark import spark_session

            self._spark = spark_session(self.config)
        return self._spark

    def planner(self) -> QueryPlanner:
        """A planner for one statement's queries (it registers the temporary views they read)."""
        planner = QueryPlanner(self.spark, self.manager, self.config.to_json())
        planner.options = self.options
        return planner

    def load_table(self, catalog: Catalog, identifier: tuple[str, ...]) -> Table:
        """The table ``identifier`` of ``catalog``; ValidationError when it names a view."""
        try:
            return catalog.load_table(identifier)
        except NoSuchTableError:
            if catalog.view_exists(identifier):
                raise ValidationError(f"{'.'.join(identifier)} is a view, not a table") from None
            raise

    def table(self, name: st.Name) -> tuple[Catalog, tuple[str, ...], Table]:
        """The catalog, identifier and table a statement's table name resolves to."""
        catalog, identifier = self.manager.resolve_table(name)
        return catalog, identifier, self.load_table(catalog, identifier)

    def write_table(self, name: st.Name) -> tuple[Catalog, tuple[str, ...], Table]:
        """The catalog, identifier and table a write statement (INSERT, DELETE, UPDATE, MERGE)
        commits through: ``db.t.branch_x`` writes branch x, ``db.t.tag_x`` is refused, and a
        table with ``write.wap.enabled`` follows the session's ``spark.wap.branch`` or
        ``spark.wap.id`` (:mod:`tablestore.sql.ref_names`)."""
        from tablestore.sql.ref_names import split_ref, write_target

        split = split_ref(self.manager.resolve_table, tuple(name))
        if split is None:
            catalog, identifier, table = self.table(name)
            return catalog, identifier, write_target(self.options, table, None)
        table = self.load_table(split.catalog, split.identifier)
        return split.catalog, split.identifier, write_target(self.options, table, split.ref)
