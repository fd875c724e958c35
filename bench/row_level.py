"""Row-level operations: a GDPR-shaped delete and a MERGE / upsert of keys.

gdpr_delete: the events table (``--rows``, partitioned by ``day(event_ts)`` over 30 days) with
100,000 users (``user_id % 100000 + 1``, so about 0.001 of the rows each); delete the rows of
100 users, spread over every partition (about 0.1% of the rows).

- floor: plain pyarrow finding those rows: read the ``user_id`` column of every data file and
  count ``is_in`` matches (the least any delete has to do);
- tablestore: ``Table.delete("user_id IN (...)")`` in merge-on-read (position delete files) and
  in copy-on-write (rewritten files); tablestore-v3-dv: the same merge-on-read delete on the
  table upgraded to format v3, which writes deletion vectors (target: no slower than position
  deletes);
- tablestore-spark, tablestore-spark-cow: the same delete on the Spark engine,
  ``table.with_engine(SparkEngine(spark)).delete(...)`` (per-file work as Spark tasks; SQL's
  ``DELETE ... WHERE user_id IN (...)`` is a plain filter and runs without Spark);
- pyiceberg: ``Table.delete`` (copy-on-write) on the very same table, registered in its own catalog;
- deltalake: ``DeltaTable.delete`` on a Delta table of the same rows partitioned by day.

Every round starts from the same table: tablestore and pyiceberg register the untouched base
metadata under a fresh name (a delete never changes existing files), deltalake copies its
table directory (untimed).

upsert_large and upsert_10k: the same base table and a source of ``--rows / 10`` keys (1M into
10M rows at full scale) or 10,000 keys, half of them existing event ids with a changed quantity,
half new. ``merge(...).when_matched_update_all().when_not_matched_insert_all()`` in
merge-on-read and copy-on-write against pyiceberg's ``upsert`` (stopped after
``BENCH_PYICEBERG_CAP`` seconds, 1,800 by default; the round then reports the bound). The floor
is plain pyarrow joining the source keys with every file's ``event_id`` column, then rewriting
each file that holds a matched key and writing the new rows (what copy-on-write must do at
least; merge-on-read may do less).

On Spark (see bench/row_level_spark.py): tablestore-spark / tablestore-spark-cow run SQL
``MERGE INTO t USING staging s ON t.event_id = s.event_id WHEN MATCHED THEN UPDATE SET * WHEN
NOT MATCHED THEN INSERT *`` through a SqlSession on Spark (what one writes on Spark; the staging
table holds the source, written once, untimed); tablestore-spark-api / -api-cow run
``table.with_engine(SparkEngine(spark)).merge(df, ...)`` with the staging table as a Spark
DataFrame cached and counted at the first round's setup (untimed). One ``local[2]`` session
serves every Spark round; it starts and warms up (a MERGE included) in the first Spark round's
untimed setup. ``BENCH_CONTESTANTS`` (bench/common.py) runs only the contestants it names.

The harness checks that every contestant of a case returns the same count (rows deleted, or
updated plus inserted), the Spark ones included.

Every contestant reports the peak growth of its process tree's resident memory in a round: for
Spark that includes the JVM (a child of this process) and its Python workers, but not heap the
JVM grew in an earlier round or the warm-up and kept.
"""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import NAMESPACE, TABLE_NAME, Benchmark, Case, Contestant, Workspace, create_tablestore_table
from bench.row_level_spark import CATALOG, SparkSide

USERS = 100_000
DELETED_USERS = 100
SMALL_UPSERT_KEYS = 10_000
# pyiceberg's upsert is stopped after this many seconds (issue #3129: 1,066 s for 1M rows).
PYICEBERG_CAP = float(os.environ.get("BENCH_PYICEBERG_CAP", "1800"))
MOR = {f"write.{op}.mode": "merge-on-read" for op in ("delete", "update", "merge")}


def gdpr_data(data: pa.Table) -> pa.Table:
    users = pc.add(pc.divide(data.column("user_id"), pa.scalar(10, pa.int64())), 0)
    users = pc.add(pc.subtract(users, pc.multiply(pc.divide(users, USERS), USERS)), 1)
    return data.set_column(data.schema.get_field_index("user_id"), "user_id", users)


def chosen_users(data: pa.Table) -> list[int]:
    rng = np.random.default_rng(7)
    present = pc.unique(data.column("user_id")).to_numpy()
    return sorted(int(u) for u in rng.choice(present, size=DELETED_USERS, replace=False))


def _data_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*.parquet") if "deletes" not in p.name)


def _pyiceberg_catalog(directory: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    directory.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("py", uri=f"sqlite:///{directory}/py.db", warehouse=f"file://{directory}/pywh")
    catalog.create_namespace(NAMESPACE)
    return catalog


COUNTER = iter(range(10**9))


def fresh_table(catalog: Any, metadata: str, properties: dict[str, str]) -> Any:
    """The untouched base table under a new name, with ``properties`` set (untimed)."""
    table = catalog.register_table(f"{NAMESPACE}.r{next(COUNTER)}", metadata)
    table.update_properties(properties)
    return catalog.load_table(table.identifier)


def upsert_source(data: pa.Table, keys: int) -> pa.Table:
    """``keys`` rows: half of them existing events with a changed quantity, half new event ids."""
    rng = np.random.default_rng(11)
    existing = data.take(pa.array(rng.choice(data.num_rows, size=keys // 2, replace=False)))
    existing = existing.set_column(existing.schema.get_field_index("quantity"), "quantity",
                                   pc.add(existing.column("quantity"), pa.scalar(100, pa.int32())))
    new = data.slice(0, keys - keys // 2)
    new = new.set_column(0, "event_id", pa.array(np.arange(10**12, 10**12 + new.num_rows, dtype=np.int64)))
    return pa.concat_tables([existing, new]).cast(data.schema)


def floor_upsert(files: list[Path], source: pa.Table, out: Path, codec: str) -> int:
    """The least an upsert has to do, in plain pyarrow: join the source keys with every file's key
    column, rewrite each file that holds a matched key with the matched rows replaced, and write
    the unmatched source rows. Returns the rows updated plus inserted."""
    key = "event_id"
    source_keys = pa.table({key: source.column(key), "__s": pa.array(np.arange(source.num_rows))})
    threads = os.cpu_count() or 1

    def matches(f: Path) -> np.ndarray:
        keys = pq.read_table(f, columns=[key])
        return keys.join(source_keys, keys=key, join_type="inner").column("__s").to_numpy()

    with ThreadPoolExecutor(threads) as pool:
        per_file = list(pool.map(matches, files))
        matched = np.zeros(source.num_rows, dtype=bool)
        for hits in per_file:
            matched[hits] = True

        def rewrite(item: tuple[int, Path]) -> None:
            index, f = item
            hits = per_file[index]
            rows = pq.read_table(f)
            updated = source.take(pa.array(hits))
            kept = rows.filter(pc.invert(pc.is_in(rows.column(key), value_set=updated.column(key))))
            pq.write_table(pa.concat_tables([kept, updated.cast(kept.schema)]), out / f"r{index}.parquet",
                           compression=codec)

        list(pool.map(rewrite, [(i, f) for i, f in enumerate(files) if len(per_file[i])]))
    inserted = source.filter(pa.array(~matched))
    pq.write_table(inserted, out / "inserted.parquet", compression=codec)
    if int(matched.sum()) != source.num_rows // 2:  # the source is built half matched
        raise AssertionError(f"the floor matched {int(matched.sum())} keys, not {source.num_rows // 2}")
    return int(matched.sum()) + inserted.num_rows


def upsert_case(ws: Workspace, name: str, keys: int, data: pa.Table, files: list[Path], base_metadata: str,
                catalog: Any, py_catalog: Any, spark: SparkSide, rounds: int | None,
                targets: dict[str, float]) -> Case:
    """An upsert of ``keys`` source rows (half matched) into the base table (``files``), side by side."""
    source = upsert_source(data, keys)
    staging = spark.staging(f"staging_{name}", source)
    state: dict[str, Any] = {}
    floor_dir = ws.root / "row-level-floor"

    def fresh_floor() -> None:
        shutil.rmtree(floor_dir, ignore_errors=True)
        floor_dir.mkdir(parents=True)

    def fresh_ours(mode: str) -> None:
        state["ours"] = fresh_table(catalog, base_metadata, {"write.merge.mode": mode})

    def ours() -> int:
        result = (state["ours"].merge(source, on="t.event_id = s.event_id")
                  .when_matched_update_all().when_not_matched_insert_all().execute())
        return result.updated + result.inserted

    def fresh_spark(mode: str, frame: bool) -> None:
        fresh_ours(mode)
        if frame:
            spark.source_frame(staging)  # cached and counted once, at the first round
        else:
            spark.spark  # noqa: B018 - the session starts (and warms up) here, untimed

    def fresh_pyiceberg() -> None:
        state["py"] = py_catalog.register_table(f"{NAMESPACE}.u{next(COUNTER)}", base_metadata)

    def pyiceberg_upsert() -> int:
        result = state["py"].upsert(source, join_cols=["event_id"])
        return int(result.rows_updated) + int(result.rows_inserted)

    return Case(
        name,
        [
            Contestant("pyarrow", lambda: floor_upsert(files, source, floor_dir, "zstd"), fresh_floor, floor=True),
            Contestant("tablestore", ours, lambda: fresh_ours("merge-on-read")),
            Contestant("tablestore-cow", ours, lambda: fresh_ours("copy-on-write")),
            Contestant("tablestore-spark", lambda: spark.merge_sql(state["ours"], staging),
                       lambda: fresh_spark("merge-on-read", False)),
            Contestant("tablestore-spark-cow", lambda: spark.merge_sql(state["ours"], staging),
                       lambda: fresh_spark("copy-on-write", False)),
            Contestant("tablestore-spark-api", lambda: spark.merge_api(state["ours"], staging),
                       lambda: fresh_spark("merge-on-read", True)),
            Contestant("tablestore-spark-api-cow", lambda: spark.merge_api(state["ours"], staging),
                       lambda: fresh_spark("copy-on-write", True)),
            Contestant("pyiceberg", pyiceberg_upsert, fresh_pyiceberg, cap_seconds=PYICEBERG_CAP),
        ],
        rounds=rounds or 3,
        targets=targets,
    )


def build(ws: Workspace, rounds: int | None = None) -> Benchmark:
    import tablestore

    data = gdpr_data(ws.data)
    users = chosen_users(data)
    condition = f"user_id IN ({', '.join(map(str, users))})"
    base_dir = ws.fresh("row-level-base")
    base = create_tablestore_table(base_dir)
    base.append(data)
    base_metadata = base.metadata_location
    # Each round registers the untouched base table under a new name: the tables share its
    # location by design (a round only adds files), which the catalog refuses unless told.
    catalog = tablestore.load_catalog(CATALOG, type="sql", uri=f"sqlite:///{base_dir}/rounds.db",
                                      warehouse=str(base_dir / "wh"), **{"allow-overlapping-locations": "true"})
    catalog.create_namespace(NAMESPACE)
    py_catalog = _pyiceberg_catalog(ws.root / "row-level-py")
    delta_base = ws.root / "row-level-delta-base"
    delta_dir = ws.root / "row-level-delta"
    from deltalake import DeltaTable, write_deltalake

    day = pc.cast(pc.cast(data.column("event_ts"), pa.date32()), pa.string())
    write_deltalake(str(delta_base), data.append_column("day", day), partition_by=["day"])
    state: dict[str, Any] = {}
    user_set = pa.array(users, pa.int64())
    files = _data_files(base_dir / "wh")  # the base table's: listed before the staging tables exist
    spark = SparkSide(base_dir, catalog)
    spark.prepare(data.slice(0, 10))

    def floor() -> int:
        return sum(int(pc.sum(pc.is_in(pq.read_table(f, columns=["user_id"]).column("user_id"),
                                       value_set=user_set)).as_py() or 0) for f in files)

    def fresh_ours(mode: str, format_version: int = 2) -> None:
        state["ours"] = fresh_table(catalog, base_metadata,
                                    {"write.delete.mode": mode, "format-version": str(format_version)})

    def fresh_spark(mode: str) -> None:
        fresh_ours(mode)
        spark.spark  # noqa: B018 - the session starts (and warms up) at the first Spark round, untimed

    def fresh_pyiceberg() -> None:
        state["py"] = py_catalog.register_table(f"{NAMESPACE}.r{next(COUNTER)}", base_metadata)

    def pyiceberg_delete() -> int:
        table = state["py"]
        before = table.current_snapshot().summary["total-records"]
        table.delete(condition)
        return int(before) - int(table.current_snapshot().summary["total-records"])

    def fresh_delta() -> None:
        shutil.rmtree(delta_dir, ignore_errors=True)
        shutil.copytree(delta_base, delta_dir)

    def delta_delete() -> int:
        metrics = DeltaTable(str(delta_dir)).delete(condition)
        return int(metrics["num_deleted_rows"])

    gdpr = Case(
        "gdpr_delete",
        [
            Contestant("pyarrow", floor, floor=True),
            Contestant("tablestore", lambda: state["ours"].delete(condition), lambda: fresh_ours("merge-on-read")),
            Contestant("tablestore-v3-dv", lambda: state["ours"].delete(condition),
                       lambda: fresh_ours("merge-on-read", 3)),
            Contestant("tablestore-cow", lambda: state["ours"].delete(condition), lambda: fresh_ours("copy-on-write")),
            Contestant("tablestore-spark", lambda: spark.delete(state["ours"], condition),
                       lambda: fresh_spark("merge-on-read")),
            Contestant("tablestore-spark-cow", lambda: spark.delete(state["ours"], condition),
                       lambda: fresh_spark("copy-on-write")),
            Contestant("pyiceberg", pyiceberg_delete, fresh_pyiceberg),
            Contestant("deltalake", delta_delete, fresh_delta),
        ],
        rounds=rounds or 3,
        targets={"pyiceberg": 20.0},
        relative=[("tablestore-v3-dv", "tablestore", 1.0)],
    )

    upsert_cases = [
        upsert_case(ws, "upsert_large", max(ws.rows // 10, 2), data, files, base_metadata, catalog, py_catalog, spark,
                    rounds,
                    {"pyarrow": 1.0, "pyiceberg": 50.0}),
        upsert_case(ws, "upsert_10k", min(SMALL_UPSERT_KEYS, max(ws.rows // 10, 2)), data, files, base_metadata,
                    catalog, py_catalog, spark, rounds, {"pyarrow": 1.5}),
    ]

    def cleanup() -> None:
        spark.stop()
        for name in ("row-level-base", "row-level-py", "row-level-delta-base", "row-level-delta",
                     "row-level-floor"):
            shutil.rmtree(ws.root / name, ignore_errors=True)

    return Benchmark(
        "row_level",
        f"row_level: GDPR delete of {DELETED_USERS} users from {ws.rows:,} rows in day(event_ts) partitions; "
        f"upserts of {max(ws.rows // 10, 2):,} and {min(SMALL_UPSERT_KEYS, max(ws.rows // 10, 2)):,} keys "
        f"(half matched) into {ws.rows:,} rows",
        [gdpr, *upsert_cases],
        notes=[
            "gdpr floor: pyarrow reading user_id of every data file and counting is_in matches",
            "tablestore = merge-on-read (position deletes); tablestore-v3-dv = merge-on-read on the table "
            "upgraded to v3 (deletion vectors, untimed upgrade); tablestore-cow = copy-on-write rewrites",
            "pyiceberg deletes by copy-on-write; deltalake by rewriting files (deletion vectors off by default)",
            "upsert floor: pyarrow joining the source keys with every data file's event_id column, then "
            "rewriting each file holding a matched key (its other rows plus the updated ones) and writing the "
            "new rows, threads over files, the table's codec",
            "tablestore = MERGE (update all, insert all) in merge-on-read; tablestore-cow = copy-on-write; "
            f"pyiceberg = Table.upsert, stopped after {PYICEBERG_CAP:,.0f} s (BENCH_PYICEBERG_CAP)",
            "tablestore-spark(-cow) = SQL MERGE INTO ... USING staging on Spark local[2]; tablestore-spark-api(-cow)"
            " = merge() on SparkEngine with a cached Spark DataFrame source; gdpr tablestore-spark(-cow) = "
            "delete() on SparkEngine; one Spark session, started and warmed up untimed",
            "peak RSS +MB: the process tree's peak resident memory during a round minus at its start "
            "(sampled every 0.1 s; the tree includes Spark's JVM and Python workers, less heap the JVM kept)",
            f"TABLE {TABLE_NAME}; every round starts from the same base snapshot",
        ],
        cleanup=cleanup,
    )
