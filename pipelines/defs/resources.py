"""Resources: the pipeline settings with the tablestore catalog, and the SparkSession.

Both read one settings file (``pipelines/config/<environment>.yaml``): ``embedded`` runs local
Spark on a SQLite catalog; ``stack`` the Spark cluster on the REST catalog with MinIO.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import PrivateAttr

from pipelines.settings import CATALOG, DATABASE, PipelineSettings, load_settings, selection
from tablestore.catalog_manager import CatalogManager
from tablestore.sql.session import SqlSession

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tablestore.catalog.base import Catalog
    from tablestore.table import Table

_spark_lock = threading.Lock()


class TableStoreResource(dg.ConfigurableResource):
    """The tablestore catalog ``lakehouse`` (database ``shop``) from the environment's settings.

    ``settings_file`` and ``root`` default to what ``$LAKEHOUSE_ENV`` / ``$LAKEHOUSE_ROOT`` select.
    """

    settings_file: str | None = None
    root: str | None = None
    _settings: PipelineSettings | None = PrivateAttr(default=None)
    _manager: CatalogManager | None = PrivateAttr(default=None)

    @property
    def settings(self) -> PipelineSettings:
        if self._settings is None:
            self._settings = load_settings(self.settings_file, self.root)
        return self._settings

    @property
    def manager(self) -> CatalogManager:
        if self._manager is None:
            manager = CatalogManager(self.settings.tablestore)
            catalog = manager.catalog(CATALOG)
            if not catalog.namespace_exists((DATABASE,)):
                catalog.create_namespace(DATABASE)
            manager.use((CATALOG, DATABASE))
            self._manager = manager
        return self._manager

    def catalog(self) -> Catalog:
        return self.manager.catalog(CATALOG)

    def table(self, name: str) -> Table:
        return self.catalog().load_table((DATABASE, name))

    def exists(self, name: str) -> bool:
        return self.catalog().table_exists((DATABASE, name))

    def sql(self, spark: SparkSession | None) -> SqlSession:
        """A SQL session on the lakehouse catalog, ``USE lakehouse.shop``."""
        return SqlSession(self.settings.tablestore, self.manager, spark)


class SparkResource(dg.ConfigurableResource):
    """A SparkSession for the tablestore config: ``local[2]`` embedded, the cluster in the stack."""

    tablestore: TableStoreResource
    _remote: SparkSession | None = PrivateAttr(default=None)

    def session(self) -> SparkSession:
        from tablestore.spark import CONNECT_SCHEME, spark_session

        # One session per process; Dagster may build resources on several threads.
        with _spark_lock:
            if self._remote is not None and not _answers(self._remote):
                # The Spark Connect server died and came back (its restart policy): the server
                # knows this session no more (INVALID_HANDLE.SESSION_CHANGED), and the step that
                # Dagster retries needs a new one. getOrCreate would hand back the dead one.
                _stop_quietly(self._remote)
                self._remote = None
            spark = spark_session(self.tablestore.settings.tablestore, app_name="lakehouse-pipelines")
            if self.tablestore.settings.tablestore.spark.master.startswith(CONNECT_SCHEME):
                self._remote = spark
            return spark

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        # A Spark Connect session lives on the server (its temporary views, the DataFrames made
        # from Arrow tables) until released; a run's session ends with the run. A local or
        # cluster session stays: ``drive`` reuses it, warm, from run to run.
        if self._remote is not None:
            self._remote.stop()
            self._remote = None


def _answers(spark: SparkSession) -> bool:
    """Whether the Spark Connect server still serves ``spark`` (one config round trip, no job)."""
    try:
        spark.conf.get("spark.sql.shuffle.partitions")
    except Exception:  # whatever the client raises for a gone server or session
        return False
    return True


def _stop_quietly(spark: SparkSession) -> None:
    # Stopping releases the session on the server, which may not know it any more.
    with contextlib.suppress(Exception):
        spark.stop()


def resources(settings_file: str | None = None, root: str | None = None) -> dict[str, Any]:
    store = TableStoreResource(settings_file=settings_file, root=root)
    return {"tablestore": store, "spark": SparkResource(tablestore=store)}


@dg.definitions
def defs() -> dg.Definitions:
    """The resources, for the settings the code location is built with (``use_settings``)."""
    return dg.Definitions(resources=resources(*selection()))
