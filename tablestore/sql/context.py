"""What a statement handler is given: the session's typed context and its options.

Every handler (the modules of ``sql/run/``, the procedures of ``sql/procedures/``) is a function
of a :class:`SessionContext` and one parsed statement. Handlers import this module and never
``session.py``: the session imports them, through ``run/registry.py``, so the dependency runs
one way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tablestore.errors import NoSuchTableError, ValidationError
from tablestore.sql.options import SessionOptions
from tablestore.sql.plan.planner import QueryPlanner

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tablestore.catalog.base import Catalog
    from tablestore.catalog_manager import CatalogManager
    from tablestore.config import LakehouseConfig
    from tablestore.sql.parse import statements as st
    from tablestore.table import Table

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
        #: Temporary views a statement made for the rest of the session (a procedure's, such as
        #: ``create_changelog_view``): bare name -> Spark view; every query resolves them first.
        self.temp_views: dict[str, str] = {}

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            # Imported here: pyspark loads (and a JVM starts) only when a statement needs Spark.
            from tablestore.spark import spark_session

            self._spark = spark_session(self.config)
        return self._spark

    def planner(self) -> QueryPlanner:
        """A planner for one statement's queries (it registers the temporary views they read)."""
        planner = QueryPlanner(self.spark, self.manager, self.config.model_dump_json())
        planner.options = self.options
        for name, view in self.temp_views.items():
            planner.bind(name, view)
        return planner

    def load_table(self, catalog: Catalog, identifier: tuple[str, ...]) -> Table:
        """The table ``identifier`` of ``catalog``; ValidationError when it names a view."""
        try:
            return catalog.load_table(identifier)
        except NoSuchTableError:
            if catalog.view_exists(identifier):
                raise ValidationError(f"{'.'.join(identifier)} is a view, not a table") from None
            raise

    def table(self, name: st.Name) -> Table:
        """The table a statement's table name resolves to (what most handlers need of it)."""
        return self.located_table(name)[2]

    def located_table(self, name: st.Name) -> tuple[Catalog, tuple[str, ...], Table]:
        """The catalog, identifier and table a statement's table name resolves to."""
        catalog, identifier = self.manager.resolve_table(name)
        return catalog, identifier, self.load_table(catalog, identifier)

    def write_table(self, name: st.Name) -> tuple[Catalog, tuple[str, ...], Table]:
        """The catalog, identifier and table a write statement (INSERT, DELETE, UPDATE, MERGE)
        commits through: ``db.t.branch_x`` writes branch x, ``db.t.tag_x`` is refused, and a
        table with ``write.wap.enabled`` follows the session's ``spark.wap.branch`` or
        ``spark.wap.id`` (:mod:`tablestore.sql.plan.ref_names`)."""
        from tablestore.sql.plan.ref_names import split_ref, write_target

        split = split_ref(self.manager.resolve_table, tuple(name))
        if split is None:
            catalog, identifier, table = self.located_table(name)
            return catalog, identifier, write_target(self.options, table, None)
        table = self.load_table(split.catalog, split.identifier)
        return split.catalog, split.identifier, write_target(self.options, table, split.ref)
