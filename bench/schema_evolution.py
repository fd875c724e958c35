"""Schema evolution: reading across schema versions, and the cost of ALTER TABLE ADD COLUMN.

Cases:
- scan 5 schemas: the events written in five equal appends, with a schema change between
  appends (add ``amount``; rename ``device`` to ``platform``; promote ``quantity`` int to bigint
  and ``price`` float to double; add ``flag``), so the files hold five schema versions and the
  read projects each by field id, promoting and filling NULLs. The floor is the same rows, the
  same values and the same five appends, written under the final schema from the start.
  Target: within 1.1x of the floor.
- add column: ``ALTER TABLE ... ADD COLUMN`` through the SQL layer on the full table against
  the same statement on a 1,000-row table. It only writes metadata, so its cost must not grow
  with the table (target: within 1.5x, the noise of a commit of a few milliseconds).
"""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.common import NAMESPACE, SCHEMA, Benchmark, Case, Contestant, Workspace, tablestore_catalog

_VERSION0 = [n for n in SCHEMA.names if n not in ("amount", "flag")]
_FINAL = pa.schema([
    ("event_id", pa.int64()), ("event_ts", pa.timestamp("us")), ("user_id", pa.int64()), ("country", pa.string()),
    ("event_type", pa.string()), ("quantity", pa.int64()), ("price", pa.float64()), ("platform", pa.string()),
    ("amount", pa.decimal128(10, 2)), ("flag", pa.bool_()),
])


def _chunks(data: pa.Table, parts: int = 5) -> list[pa.Table]:
    size = -(-data.num_rows // parts)
    return [data.slice(i * size, size) for i in range(parts)]


def _as_final(chunk: pa.Table, version: int) -> pa.Table:
    """A chunk as the final schema reads it: NULL for columns added after it was written."""
    n = chunk.num_rows
    return pa.table({
        "event_id": chunk.column("event_id"), "event_ts": chunk.column("event_ts"),
        "user_id": chunk.column("user_id"), "country": chunk.column("country"),
        "event_type": chunk.column("event_type"),
        "quantity": chunk.column("quantity").cast(pa.int64()), "price": chunk.column("price").cast(pa.float64()),
        "platform": chunk.column("device"),
        "amount": chunk.column("amount") if version >= 1 else pa.nulls(n, pa.decimal128(10, 2)),
        "flag": chunk.column("flag") if version >= 4 else pa.nulls(n, pa.bool_()),
    }, schema=_FINAL)


def _as_version(chunk: pa.Table, version: int) -> pa.Table:
    """A chunk with the columns, names and types of schema version ``version``."""
    out = chunk.select(_VERSION0 + (["amount"] if version >= 1 else []) + (["flag"] if version >= 4 else []))
    if version >= 2:
        out = out.rename_columns(["platform" if n == "device" else n for n in out.column_names])
    if version >= 3:
        out = out.set_column(out.column_names.index("quantity"), "quantity", out.column("quantity").cast(pa.int64()))
        out = out.set_column(out.column_names.index("price"), "price", out.column("price").cast(pa.float64()))
    return out


def _evolve(table: Any, version: int) -> None:
    with table.update_schema() as u:
        if version == 1:
            u.add_column("amount", "decimal(10,2)")
        elif version == 2:
            u.rename_column("device", "platform")
        elif version == 3:
            u.widen("quantity", "bigint").widen("price", "double")
        elif version == 4:
            u.add_column("flag", "boolean")


def _write_tables(directory: Path, data: pa.Table) -> tuple[Any, Any]:
    directory.mkdir(parents=True, exist_ok=True)
    catalog = tablestore_catalog(directory)
    catalog.create_namespace(NAMESPACE)
    evolved = catalog.create_table(f"{NAMESPACE}.evolved", schema=data.schema.remove(
        data.schema.get_field_index("flag")).remove(data.schema.get_field_index("amount")),
        partition_by=["day(event_ts)"])
    plain = catalog.create_table(f"{NAMESPACE}.plain", schema=_FINAL, partition_by=["day(event_ts)"])
    for version, chunk in enumerate(_chunks(data)):
        if version:
            _evolve(evolved, version)
        evolved.append(_as_version(chunk, version))
        plain.append(_as_final(chunk, version))
    assert evolved.schema().column_names == _FINAL.names
    assert len(evolved.metadata.schemas) == 5
    return evolved, plain


def build(ws: Workspace, rounds: int | None = None) -> Benchmark:
    from tablestore.config import parse_config
    from tablestore.sql.session import SqlSession

    directory = ws.fresh("schema_evolution")
    evolved, plain = _write_tables(directory, ws.data)
    catalog = tablestore_catalog(directory)
    small = catalog.create_table(f"{NAMESPACE}.small", schema=ws.data.schema)
    small.append(ws.data.slice(0, 1000))
    # The two readers must agree row for row before their speed means anything.
    ours, floor_rows = evolved.scan().to_arrow(), plain.scan().to_arrow()
    key = [("event_id", "ascending")]
    if not ours.sort_by(key).equals(floor_rows.sort_by(key)):
        raise AssertionError("the evolved table does not read like the single-schema table")
    del ours, floor_rows

    def scan(name: str) -> int:
        return int(catalog.load_table(f"{NAMESPACE}.{name}").scan().to_arrow().num_rows)

    config = parse_config(textwrap.dedent(f"""
        default-catalog: bench
        catalogs:
          - name: bench
            type: sql
            uri: sqlite:///{directory}/catalog.db
            warehouse: {directory}/wh
            default-database: {NAMESPACE}
    """), source=str(directory / "tablestore.yaml"))
    session = SqlSession(config)
    counter = itertools.count()

    def add_column(name: str) -> int:
        session.execute_one(f"ALTER TABLE {name} ADD COLUMN c{next(counter)} STRING")
        return 1

    scans = Case("scan 5 schemas", [
        Contestant("one schema", lambda: scan("plain"), floor=True),
        Contestant("tablestore", lambda: scan("evolved")),
    ], rounds=rounds or 5, targets={"one schema": 1.1})
    alters = Case("add column", [
        Contestant("1,000 rows", lambda: add_column("small"), floor=True),
        Contestant("tablestore", lambda: add_column("evolved")),
    ], rounds=max(rounds or 0, 9), targets={"1,000 rows": 1.5})
    files = len(evolved.scan().plan_files())
    return Benchmark(
        "schema_evolution",
        f"schema_evolution: {ws.rows:,} rows in {files} files over 5 schema versions",
        [scans, alters],
        notes=[
            "scan 5 schemas: floor = the same rows and appends under the final schema; tablestore = files "
            "written under 5 schema versions (add, rename, int->bigint and float->double, add), read by field id",
            f"add column: ALTER TABLE ADD COLUMN through the SQL layer; floor on a 1,000-row table, tablestore "
            f"on the {ws.rows:,}-row table (metadata only: the cost must not grow with the table)",
        ],
    )
