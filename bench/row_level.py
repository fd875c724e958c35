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
- pyiceberg: ``Table.delete`` (copy-on-write) on the very same table, registered in its own catalog;
- deltalake: ``DeltaTable.delete`` on a Delta table of the same rows partitioned by day.

Every round starts from the same table: tablestore and pyiceberg register the untouched base
metadata under a fresh name (a delete never changes existing files), deltalake copies its
table directory (untimed).

upsert: a table of ``min(--rows, 1M)`` events and a source of 10,000 rows (half of them
existing event ids with a changed quantity, half new). tablestore's MERGE (merge-on-read,
``when_matched_update_all().when_not_matched_insert_all()``) against pyiceberg's ``upsert``;
the floor is pyarrow joining the source keys with the table's ``event_id`` column.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import NAMESPACE, TABLE_NAME, Benchmark, Case, Contestant, Workspace, create_tablestore_table

USERS = 100_000
DELETED_USERS = 100
UPSERT_ROWS = 1_000_000
UPSERT_SOURCE = 10_000
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


def build(ws: Workspace, rounds: int | None = None) -> Benchmark:
    import tablestore

    data = gdpr_data(ws.data)
    users = chosen_users(data)
    condition = f"user_id IN ({', '.join(map(str, users))})"
    base_dir = ws.fresh("row-level-base")
    base = create_tablestore_table(base_dir)
    base.append(data)
    base_metadata = base.metadata_location
    catalog = tablestore.load_catalog("rl", type="sql", uri=f"sqlite:///{base_dir}/rounds.db",
                                      warehouse=str(base_dir / "wh"))
    catalog.create_namespace(NAMESPACE)
    py_catalog = _pyiceberg_catalog(ws.root / "row-level-py")
    delta_base = ws.root / "row-level-delta-base"
    delta_dir = ws.root / "row-level-delta"
    from deltalake import DeltaTable, write_deltalake

    day = pc.cast(pc.cast(data.column("event_ts"), pa.date32()), pa.string())
    write_deltalake(str(delta_base), data.append_column("day", day), partition_by=["day"])
    counter = iter(range(1_000_000))
    state: dict[str, Any] = {}
    user_set = pa.array(users, pa.int64())
    files = _data_files(base_dir / "wh")

    def floor() -> int:
        return sum(int(pc.sum(pc.is_in(pq.read_table(f, columns=["user_id"]).column("user_id"),
                                       value_set=user_set)).as_py() or 0) for f in files)

    def fresh_ours(mode: str, format_version: int = 2) -> None:
        table = catalog.register_table(f"{NAMESPACE}.r{next(counter)}", base_metadata)
        table.update_properties({"write.delete.mode": mode, "format-version": str(format_version)})
        state["ours"] = catalog.load_table(table.identifier)

    def fresh_pyiceberg() -> None:
        state["py"] = py_catalog.register_table(f"{NAMESPACE}.r{next(counter)}", base_metadata)

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
            Contestant("pyiceberg", pyiceberg_delete, fresh_pyiceberg),
            Contestant("deltalake", delta_delete, fresh_delta),
        ],
        rounds=rounds or 3,
        targets={"pyiceberg": 10.0},
        relative=[("tablestore-v3-dv", "tablestore", 1.0)],
    )

    upsert_rows = min(ws.rows, UPSERT_ROWS)
    upsert_data = data.slice(0, upsert_rows)
    upsert_dir = ws.fresh("row-level-upsert")
    upsert_base = create_tablestore_table(upsert_dir)
    upsert_base.update_properties(MOR)
    upsert_base.append(upsert_data)
    upsert_metadata = upsert_base.metadata_location
    upsert_catalog = tablestore.load_catalog("up", type="sql", uri=f"sqlite:///{upsert_dir}/rounds.db",
                                             warehouse=str(upsert_dir / "wh"))
    upsert_catalog.create_namespace(NAMESPACE)
    rng = np.random.default_rng(11)
    existing = upsert_data.take(pa.array(rng.choice(upsert_rows, size=UPSERT_SOURCE // 2, replace=False)))
    existing = existing.set_column(existing.schema.get_field_index("quantity"), "quantity",
                                   pc.add(existing.column("quantity"), pa.scalar(100, pa.int32())))
    new = data.slice(0, UPSERT_SOURCE - UPSERT_SOURCE // 2)
    new = new.set_column(0, "event_id", pa.array(np.arange(10**9, 10**9 + new.num_rows, dtype=np.int64)))
    source = pa.concat_tables([existing, new]).cast(upsert_data.schema)
    upsert_files = _data_files(upsert_dir / "wh")

    def upsert_floor() -> int:
        keys = pa.concat_tables([pq.read_table(f, columns=["event_id"]) for f in upsert_files])
        matched = keys.join(source.select(["event_id"]), keys="event_id", join_type="inner").num_rows
        return matched + (source.num_rows - matched)

    def fresh_upsert_ours() -> None:
        state["up"] = upsert_catalog.register_table(f"{NAMESPACE}.u{next(counter)}", upsert_metadata)

    def ours_upsert() -> int:
        result = (state["up"].merge(source, on="t.event_id = s.event_id")
                  .when_matched_update_all().when_not_matched_insert_all().execute())
        return result.updated + result.inserted

    def fresh_upsert_py() -> None:
        state["pyup"] = py_catalog.register_table(f"{NAMESPACE}.u{next(counter)}", upsert_metadata)

    def pyiceberg_upsert() -> int:
        result = state["pyup"].upsert(source, join_cols=["event_id"])
        return int(result.rows_updated) + int(result.rows_inserted)

    upsert = Case(
        "upsert",
        [
            Contestant("pyarrow", upsert_floor, floor=True),
            Contestant("tablestore", ours_upsert, fresh_upsert_ours),
            Contestant("pyiceberg", pyiceberg_upsert, fresh_upsert_py),
        ],
        rounds=rounds or 3,
        targets={"pyiceberg": 20.0},
    )

    def cleanup() -> None:
        for name in ("row-level-base", "row-level-py", "row-level-delta-base", "row-level-delta", "row-level-upsert"):
            shutil.rmtree(ws.root / name, ignore_errors=True)

    return Benchmark(
        "row_level",
        f"row_level: GDPR delete of {DELETED_USERS} users from {ws.rows:,} rows in day(event_ts) partitions; "
        f"upsert of {UPSERT_SOURCE:,} keys into {upsert_rows:,} rows",
        [gdpr, upsert],
        notes=[
            "gdpr floor: pyarrow reading user_id of every data file and counting is_in matches",
            "tablestore = merge-on-read (position deletes); tablestore-v3-dv = merge-on-read on the table "
            "upgraded to v3 (deletion vectors, untimed upgrade); tablestore-cow = copy-on-write rewrites",
            "pyiceberg deletes by copy-on-write; deltalake by rewriting files (deletion vectors off by default)",
            "upsert floor: pyarrow joining the source keys with the table's event_id column; "
            "tablestore = MERGE in merge-on-read, pyiceberg = Table.upsert",
            f"TABLE {TABLE_NAME}; every round starts from the same base snapshot",
        ],
        cleanup=cleanup,
    )
