"""Reading deletion vectors: a full scan of a table with DVs on 10% of its data files.

The events table (``--rows``, partitioned by ``day(event_ts)``) gets deletes on every tenth of
its data files (sorted by path): every 20th row of each such file, i.e. 5% of their rows. Then
the scans:

- floor: ``pyarrow.dataset`` reading the data files of the table *without* deletes;
- tablestore: ``scan().to_arrow()`` of a table holding exactly the live rows, without deletes
  (written by appending the DV table's rows, so the same layout);
- tablestore-dv: the same scan of the table upgraded to format v3 whose deletes are deletion
  vectors (one Puffin blob per data file). Target: within 1.15x of tablestore;
- tablestore-posdel: the same deletes on the v2 table, as Parquet position delete files;
- pyiceberg-dv: pyiceberg 0.12 scanning the DV table (``StaticTable.from_metadata``).

The deletes are applied by position (:func:`tablestore.table.ops.row_level.apply_positions`, the
path of SQL DELETE on Spark), so both tables get the very same rows deleted.
"""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np

from bench.common import NAMESPACE, TABLE_NAME, Benchmark, Case, Contestant, Workspace, shared_table

FILE_SHARE = 10  # every 10th data file gets deletes
ROW_STEP = 20  # every 20th row of such a file is deleted


def _local(path: str) -> str:
    return path.removeprefix("file://")


def build(ws: Workspace, rounds: int | None = None) -> Benchmark:
    import pyarrow.dataset as ds
    from pyiceberg.table import StaticTable

    import tablestore
    from tablestore.table.ops.row_level import apply_positions

    base = shared_table(ws)
    base_metadata = base.metadata_location
    directory = ws.fresh("deletion-vectors")
    catalog = tablestore.load_catalog("dv", type="sql", uri=f"sqlite:///{directory}/catalog.db",
                                      warehouse=str(directory / "wh"))
    catalog.create_namespace(NAMESPACE)

    tasks = sorted(base.scan().plan_files(), key=lambda t: t.file.file_path)
    chosen = tasks[::FILE_SHARE]
    deleted = {t.file.file_path: np.arange(0, t.file.record_count, ROW_STEP, dtype=np.int64) for t in chosen}

    def with_deletes(name: str, format_version: int) -> Any:
        table = catalog.register_table(f"{NAMESPACE}.{name}", base_metadata)
        table.update_properties({"write.delete.mode": "merge-on-read", "format-version": str(format_version)})
        table = catalog.load_table(table.identifier)
        snapshot = table.current_snapshot()
        assert snapshot is not None
        apply_positions(table, snapshot, "delete", deleted)
        return catalog.load_table(table.identifier)

    dv_table = with_deletes("dv", 3)
    with_deletes("posdel", 2)
    live = dv_table.scan().to_arrow()
    plain = catalog.create_table(f"{NAMESPACE}.plain", schema=base.schema(), partition_by=["day(event_ts)"])
    plain.append(live)
    plain_paths = [_local(t.file.file_path) for t in catalog.load_table(plain.identifier).scan().plan_files()]
    dv_files = sum(1 for t in dv_table.scan().plan_files() if t.delete_files)

    def scan(name: str) -> int:
        return int(catalog.load_table(f"{NAMESPACE}.{name}").scan().to_arrow().num_rows)

    case = Case(
        "full scan",
        [
            Contestant("pyarrow", lambda: int(ds.dataset(plain_paths, format="parquet").to_table().num_rows),
                       floor=True),
            Contestant("tablestore", lambda: scan("plain")),
            Contestant("tablestore-dv", lambda: scan("dv")),
            Contestant("tablestore-posdel", lambda: scan("posdel")),
            Contestant("pyiceberg-dv", lambda: int(StaticTable.from_metadata(dv_table.metadata_location)
                                                   .scan().to_arrow().num_rows)),
        ],
        rounds=rounds or 5,
        relative=[("tablestore-dv", "tablestore", 1.15), ("tablestore-dv", "tablestore-posdel", 1.0)],
    )

    def cleanup() -> None:
        shutil.rmtree(directory, ignore_errors=True)

    removed = sum(len(p) for p in deleted.values())
    return Benchmark(
        "deletion_vectors",
        f"deletion_vectors: full scan of {live.num_rows:,} live rows; DVs on {dv_files} of {len(tasks)} data files "
        f"({removed:,} rows deleted) against the same rows without deletes",
        [case],
        notes=[
            "floor: pyarrow.dataset over the data files of the table without deletes",
            "tablestore = the live rows rewritten without deletes; tablestore-dv = format v3 with deletion vectors; "
            "tablestore-posdel = format v2 with the same deletes as Parquet position delete files",
            f"TABLE {TABLE_NAME}: every {FILE_SHARE}th data file gets every {ROW_STEP}th row deleted",
        ],
        cleanup=cleanup,
    )
