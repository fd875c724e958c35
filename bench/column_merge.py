"""Merge one new column into a table of 100 files from a source with a value for every row.

The table holds ``rows`` users (user_id, name, country, amount), written as 100 files of
consecutive user ids; the source holds the same user ids in random order with a new column
``score``. Every contestant rewrites every file with the new column:

- floor: pyarrow reads the 100 files, left-joins the source on user_id (``Table.join``) and
  writes 100 files again (zstd, as tablestore writes);
- tablestore (local engine): ``table.merge_columns(source, on="user_id")``, threads, one
  task per fragment, the schema change and the rewrite in one commit;
- tablestore (Spark local[2]): the same with the source a Spark DataFrame read from Parquet
  and cached, the table on the Spark engine; the source is a plain scan of files, so the
  Python tasks read its files themselves;
- tablestore (Spark, computed source): the same source behind a filter that keeps every row,
  so its rows come from the JVM (``mapInArrow``), as for any DataFrame Spark computes;
- Lance: ``LanceDataset.merge(source, left_on="user_id")`` on a Lance dataset of the same rows
  in 100 fragments.

Each round starts from the same table: tablestore registers the untouched base metadata under
a new name, Lance restores its first version, the floor writes into a fresh directory.
"""

from __future__ import annotations

import itertools
import shutil
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from bench.common import Benchmark, Case, Contestant, Workspace, tablestore_catalog

FILES = 100
NAMESPACE = "cm"


def _base(rows: int) -> pa.Table:
    rng = np.random.default_rng(7)
    ids = np.arange(rows, dtype=np.int64)
    countries = np.array(["de", "fr", "nl", "us", "jp"])
    return pa.table({
        "user_id": ids,
        "name": pc.binary_join_element_wise("user-", pa.array(ids).cast(pa.string()), ""),
        "country": pa.array(countries[rng.integers(0, len(countries), rows)]),
        "amount": rng.random(rows) * 100,
    })


def _source(rows: int) -> pa.Table:
    rng = np.random.default_rng(11)
    ids = rng.permutation(rows).astype(np.int64)
    return pa.table({"user_id": ids, "score": rng.random(rows)})


def build(ws: Workspace, rounds: int | None = None) -> Benchmark:
    import lance

    from tablestore.config import LakehouseConfig, SparkConfig, SqlCatalogConfig
    from tablestore.spark import SparkEngine, spark_session

    rows = ws.rows
    root = ws.fresh("column-merge")
    base = _base(rows)
    source = _source(rows)
    per_file = -(-rows // FILES)

    # tablestore: 100 files, one commit.
    catalog_config = SqlCatalogConfig(
        name="cm", properties={"uri": f"sqlite:///{root}/catalog.db", "warehouse": str(root / "wh")})
    catalog = tablestore_catalog(root)
    catalog.create_namespace(NAMESPACE)
    table = catalog.create_table(f"{NAMESPACE}.base", schema=base.schema)
    files = [f for i in range(FILES) for f in table.write_files(base.slice(i * per_file, per_file))]
    table.append_files(files)
    base_metadata = table.metadata_location
    paths = [t.file.file_path.removeprefix("file://") for t in table.scan().plan_files()]
    counter = itertools.count()
    current: dict[str, Any] = {}

    def fresh_table() -> None:
        current["table"] = catalog.register_table(f"{NAMESPACE}.t{next(counter)}", base_metadata)

    def ours_local() -> int:
        current["table"].merge_columns(source, on="user_id")
        return rows

    # Spark: the source as a cached DataFrame read from Parquet.
    source_dir = root / "source"
    source_dir.mkdir()
    for i in range(8):
        step = -(-rows // 8)
        pq.write_table(source.slice(i * step, step), source_dir / f"part-{i}.parquet")
    config = LakehouseConfig(default_catalog="cm", catalogs={"cm": catalog_config}, spark=SparkConfig(conf={
        "spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "4",
    }))
    spark = spark_session(config, app_name="bench-column-merge")
    spark_source = spark.read.parquet(str(source_dir)).cache()
    spark_source.count()
    engine = SparkEngine(spark)

    def ours_spark() -> int:
        current["table"].with_engine(engine).merge_columns(spark_source, on="user_id")
        return rows

    computed_source = spark_source.where("score >= 0")

    def ours_spark_computed() -> int:
        current["table"].with_engine(engine).merge_columns(computed_source, on="user_id")
        return rows

    # Untimed: start the Python workers (each imports pyarrow, pandas and tablestore once per
    # SparkContext) with a merge of a few keys spread over the fragments.
    fresh_table()
    few = source.slice(0, 1000)
    current["table"].with_engine(engine).merge_columns(spark.createDataFrame(few.to_pandas()), on="user_id")

    # floor: read, join, write 100 files.
    floor_dir = root / "floor"

    def fresh_floor() -> None:
        shutil.rmtree(floor_dir, ignore_errors=True)
        floor_dir.mkdir()

    def floor() -> int:
        data = ds.dataset(paths, format="parquet").to_table()
        joined = data.join(source, keys="user_id", join_type="left outer")
        ds.write_dataset(
            joined, floor_dir, format="parquet", max_rows_per_file=per_file, max_rows_per_group=per_file,
            file_options=ds.ParquetFileFormat().make_write_options(compression="zstd"),
            existing_data_behavior="overwrite_or_ignore",
        )
        return rows

    # Lance: the same rows in 100 fragments; every round restores version 1.
    lance_uri = str(root / "lance")
    lance.write_dataset(base, lance_uri, max_rows_per_file=per_file)

    def fresh_lance() -> None:
        lance.dataset(lance_uri, version=1).restore()

    def lance_merge() -> int:
        lance.dataset(lance_uri).merge(source, left_on="user_id")
        return rows

    def cleanup() -> None:
        spark.stop()
        catalog.close()
        shutil.rmtree(root, ignore_errors=True)

    case = Case(
        "merge 1 column",
        [
            Contestant("pyarrow-join", floor, fresh_floor, floor=True),
            Contestant("tablestore", ours_local, fresh_table),
            Contestant("tablestore-spark", ours_spark, fresh_table),
            Contestant("tablestore-spark-computed", ours_spark_computed, fresh_table),
            Contestant("lance", lance_merge, fresh_lance),
        ],
        rounds=rounds or 3,
        targets={"pyarrow-join": 1.3},
    )
    return Benchmark(
        "column_merge",
        f"column_merge: one new column into {rows:,} rows in {FILES} files from a {rows:,}-row source",
        [case],
        notes=[
            "floor: pyarrow reads the files, Table.join (left outer) with the source, writes 100 files (zstd)",
            "tablestore: table.merge_columns(source, on='user_id'): one task per fragment, one commit with "
            "the schema change; -spark: Spark local[2], source a cached DataFrame read from Parquet, "
            "which the tasks read from its files; -spark-computed: the same behind a filter, its rows "
            "from the JVM through mapInArrow",
            "lance: LanceDataset.merge(source, left_on='user_id') on the same rows in 100 fragments",
            "seconds: median of the rounds, contestants interleaved; cpu: this process and its "
            "descendants (Spark's JVM and Python workers); Spark's workers are started by an "
            "untimed merge of 1,000 keys first",
        ],
        cleanup=cleanup,
    )
