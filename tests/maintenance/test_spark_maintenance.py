"""Compaction and erasure distributed on Spark (one SparkSession for the module)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import tablestore
from tablestore.catalog_manager import CatalogManager
from tablestore.config import LakehouseConfig, SparkConfig, SqlCatalogConfig
from tests.maintenance.helpers import SCHEMA, rows, subject_rows_in_files

pytestmark = pytest.mark.spark

from pyspark.sql import SparkSession  # noqa: E402

from tablestore.spark import SparkEngine, spark_session  # noqa: E402


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CatalogManager, SparkSession]]:
    root: Path = tmp_path_factory.mktemp("spark-maint")
    catalog = SqlCatalogConfig(name="lake", properties={"uri": f"sqlite:///{root}/c.db", "warehouse": str(root / "wh")}, default_database="db")
    config = LakehouseConfig(default_catalog="lake", catalogs={"lake": catalog}, spark=SparkConfig(master="local[2]", conf={"spark.sql.shuffle.partitions": "4"}))
    manager = CatalogManager(config)
    manager.catalog().create_namespace("db")
    session = spark_session(config, app_name="tablestore-maintenance-tests")
    try:
        yield manager, session
    finally:
        session.stop()
        manager.close()


def test_compaction_and_erasure_run_as_spark_tasks(setup: tuple[CatalogManager, SparkSession]) -> None:
    manager, spark = setup
    catalog = manager.catalog()
    table = catalog.create_table("db.t", schema=SCHEMA, partition_by=["country"]).with_engine(SparkEngine(spark))
    for start in range(0, 60, 10):
        table.append(rows(10, start))
    result = table.maintenance().rewrite_data_files(options={"min-input-files": 2})
    assert result.rewritten_data_files_count == 18 and result.added_data_files_count == 3
    assert sorted(table.refresh().scan().to_arrow().column("user_id").to_pylist()) == list(range(60))
    report = tablestore.erase(catalog, "db.t", "user_id", "S1", values=[5, 6])
    assert report.verified and report.rows_removed == 2
    field_id = table.schema().find_field("user_id").field_id
    assert subject_rows_in_files(table.location, field_id, [5, 6]) == {}
