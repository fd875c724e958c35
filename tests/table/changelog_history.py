"""Seeded random histories for the changelog's differential tests, and an equality-delete writer.

Neither Iceberg's Spark runtime nor pyiceberg writes equality deletes (Flink does), so
:func:`write_equality_deletes` writes them as Flink's writer does: a Parquet file of the key
column carrying its field id, one per partition, committed as a row delta.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tablestore.spec.manifests.manifest import DataFile, DataFileContent, FileFormat
from tablestore.spec.metadata.table_metadata import Snapshot
from tablestore.table import Table
from tablestore.table.update.snapshot import RowDelta
from tablestore.table.update.transaction import commit_snapshot

PARTS = ("a", "b", "c")


def write_equality_deletes(table: Table, keys: list[tuple[str, int]]) -> Snapshot | None:
    """Equality deletes on ``id`` for (partition ``p``, id) pairs, one file per partition."""
    field = table.schema().find_field("id")
    by_part: dict[str, list[int]] = {}
    for p, i in keys:
        by_part.setdefault(p, []).append(i)
    files = []
    for p, ids in sorted(by_part.items()):
        schema = pa.schema([pa.field("id", pa.int64(), nullable=False,
                                     metadata={b"PARQUET:field_id": str(field.field_id).encode()})])
        sink = pa.BufferOutputStream()
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}, schema=schema), sink)
        payload = sink.getvalue().to_pybytes()
        path = f"{table.location}/data/p={p}/eq-{uuid.uuid4()}.parquet"
        table.io.new_output(path).write(payload)
        files.append(DataFile(content=DataFileContent.EQUALITY_DELETES, file_path=path, file_format=FileFormat.PARQUET,
                              partition=(p,), record_count=len(ids), file_size_in_bytes=len(payload),
                              equality_ids=[field.field_id], spec_id=table.spec().spec_id))
    if not files:
        return None
    return commit_snapshot(RowDelta(table, [], [], files, None, []))


class History:
    """Random operations on a table partitioned by ``p`` with a growing ``id``; each returns a
    short description of what it did."""

    def __init__(self, table: Table, seed: int) -> None:
        self.table = table
        self.rng = random.Random(seed)
        self.next_id = 0
        self.added_columns = 0

    def rows(self, n: int, ids: list[int] | None = None) -> pa.Table:
        schema = self.table.schema().as_arrow()
        ids = ids if ids is not None else list(range(self.next_id, self.next_id + n))
        self.next_id = max(self.next_id, max(ids, default=-1) + 1)
        values: dict[str, Any] = {}
        for f in schema:
            if f.name == "id":
                values["id"] = ids
            elif f.name == "p":
                values["p"] = [PARTS[i % 3] for i in ids]
            elif pa.types.is_string(f.type):
                values[f.name] = [f"v{self.rng.randrange(5)}" for _ in ids]
            else:
                values[f.name] = pa.array([self.rng.randrange(100) for _ in ids]).cast(f.type)
        return pa.table(values, schema=schema)

    def live_ids(self) -> list[int]:
        return sorted(self.table.scan(columns=["id"]).to_arrow().column("id").to_pylist())

    def step(self) -> str:
        t = self.table
        op = self.rng.choice(["append", "append", "overwrite", "delete", "delete", "update", "update", "merge",
                              "compact", "evolve", "equality", "mode", "duplicate"])
        ids = self.live_ids()
        if op == "append" or not ids:
            t.append(self.rows(self.rng.randint(1, 12)))
            return "append"
        if op == "duplicate":  # a row equal in every column to an existing one: a multiset change
            row = t.scan(filter=f"id = {self.rng.choice(ids)}").to_arrow().slice(0, 1)
            t.append(row)
            return "duplicate"
        if op == "overwrite":
            p = self.rng.choice(PARTS)
            fresh = self.rows(self.rng.randint(0, 4))
            t.overwrite(fresh.filter(pa.compute.equal(fresh.column("p"), p)), f"p = '{p}'")
            return f"overwrite p={p}"
        low = self.rng.choice(ids)
        high = low + self.rng.randint(0, 6)
        if op == "delete":
            t.delete(f"id >= {low} and id <= {high}")
            return f"delete {low}..{high}"
        if op == "update":
            t.update({"v": f"'u{self.rng.randrange(4)}'"}, f"id >= {low} and id <= {high}")
            return f"update {low}..{high}"
        if op == "merge":
            source_ids = [*sorted(set(self.rng.sample(ids, min(3, len(ids))))), self.next_id, self.next_id + 1]
            source = self.rows(0, source_ids)
            (t.merge(source, "t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute())
            return "merge"
        if op == "compact":
            t.maintenance().rewrite_data_files(options={"min-input-files": "2"})
            t.refresh()
            return "compact"
        if op == "evolve":
            self.added_columns += 1
            with t.update_schema() as u:
                if self.added_columns % 2:
                    u.add_column(f"c{self.added_columns}", "int")
                else:
                    u.update_column(f"c{self.added_columns - 1}", "long")
            return "evolve"
        if op == "equality":
            chosen = self.rng.sample(ids, min(len(ids), self.rng.randint(1, 3)))
            write_equality_deletes(t, [(PARTS[i % 3], i) for i in chosen])
            t.refresh()
            return f"equality {chosen}"
        mode = self.rng.choice(["copy-on-write", "merge-on-read"])
        t.update_properties({"write.delete.mode": mode, "write.update.mode": mode, "write.merge.mode": mode})
        return f"mode {mode}"
