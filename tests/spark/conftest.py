"""Shared fixtures of the Spark engine tests: a module's lake (an SQLite catalog with namespace
``db``) and the one local Spark session the module's tests share (starting one takes 10-30 s)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from tablestore.catalog.base import Catalog
from tablestore.catalog_manager import CatalogManager
from tablestore.config import LakehouseConfig, SparkConfig, SqlCatalogConfig
from tablestore.spark import spark_session
from tablestore.table import Table


@dataclass
class Lake:
    root: Path
    config: LakehouseConfig
    manager: CatalogManager

    @property
    def catalog(self) -> Catalog:
        return self.manager.catalog()

    def create(self, name: str, schema: pa.Schema, partition_by: list[str] | None = None) -> Table:
        return self.catalog.create_table(f"db.{name}", schema=schema, partition_by=partition_by)

    def load(self, name: str) -> Table:
        return self.catalog.load_table(f"db.{name}")


@pytest.fixture(scope="module")
def lake(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    root = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    catalog = SqlCatalogConfig(name="lake", properties={"uri": f"sqlite:///{root}/catalog.db", "warehouse": str(root / "wh")}, default_database="db")
    # Few shuffle partitions: the tests' data is small, and each partition costs a Python task.
    config = LakehouseConfig(default_catalog="lake", catalogs={"lake": catalog}, spark=SparkConfig(master="local[2]", conf={"spark.sql.shuffle.partitions": "4"}))
    manager = CatalogManager(config)
    manager.catalog().create_namespace("db")
    try:
        yield Lake(root, config, manager)
    finally:
        manager.close()


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest, lake: Lake) -> Iterator[SparkSession]:
    session = spark_session(lake.config, app_name=f"tablestore-{request.module.__name__.rsplit('.', 1)[-1]}")
    try:
        yield session
    finally:
        session.stop()
