"""Planning a SQL script, before and after a change: ``python -m bench.sql_planning [--base REV]``.

Times what tablestore does with a 20-statement script before anything runs: the parse of every
statement (``parse_script``: lexing, our grammar, sqlglot's parse of DELETE, UPDATE and MERGE)
and the plan of every query in it (``QueryPlanner.rewrite``: sqlglot's parse of the SELECT of
each query, INSERT, CTAS and view, its table names bound to views, the Spark SQL text written
out). Spark's own parse of that text and everything that executes (catalog calls, Spark jobs)
are left out: they are the same before and after, and only add noise. The planner's table
names are bound to view names up front (``QueryPlanner.bind``), so no catalog or Spark is needed.

Both sides run in the same run, alternating (before, after, after, before, ...), each round a
fresh process per side that imports the code of its checkout: the base commit (where this
checkout's branch left ``main``, unless ``--base`` names another; a detached worktree in a
temporary directory, see ``bench/against_base.py``) and this checkout. A process plans the script ``--reps`` times after
a warm-up and reports the median milliseconds (wall and CPU) of one script's parse and plan.
The table gives every round, the median per side and after / before.

    python -m bench.sql_planning --rounds 6 --reps 100
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import subprocess
import sys
import time
from typing import Any

SCRIPT = """
CREATE DATABASE IF NOT EXISTS shop COMMENT 'the shop' WITH DBPROPERTIES ('owner' = 'data');
USE shop;
CREATE TABLE IF NOT EXISTS orders (id bigint NOT NULL, customer_id bigint, amount decimal(10, 2),
  ts timestamp, status string COMMENT 'new, shipped or cancelled', tags array<string>)
  USING iceberg PARTITIONED BY (days(ts), bucket(16, customer_id))
  TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read');
CREATE TABLE IF NOT EXISTS customers (id bigint NOT NULL, name string, region string, active boolean,
  address struct<street: string, city: string, zip: string>) USING iceberg;
ALTER TABLE orders ADD COLUMNS (channel string COMMENT 'where the order came from');
INSERT INTO customers VALUES (1, 'ann', 'eu', true, named_struct('street', 'a', 'city', 'b', 'zip', 'c')),
  (2, 'bob', 'us', false, NULL), (3, 'cy', 'eu', true, NULL);
INSERT INTO orders
  SELECT s.id, c.id, CAST(s.amount AS decimal(10, 2)), s.ts, lower(s.status), split(s.tags, ','), s.channel
  FROM staging s JOIN customers c ON c.name = s.customer_name
  LEFT JOIN regions r ON r.code = c.region
  WHERE s.ts >= TIMESTAMP '2024-01-01 00:00:00' AND coalesce(r.enabled, true);
WITH recent AS (
  SELECT o.customer_id, o.amount, o.ts FROM orders o WHERE o.ts >= date_sub(current_date(), 30)
), totals AS (
  SELECT customer_id, sum(amount) AS total, count(*) AS n, max(ts) AS last_ts FROM recent GROUP BY customer_id
)
INSERT OVERWRITE TABLE customer_totals
  SELECT c.id, c.name, t.total, t.n, t.last_ts FROM customers c JOIN totals t ON t.customer_id = c.id;
CREATE TABLE daily_totals USING iceberg PARTITIONED BY (day) AS
  WITH d AS (SELECT to_date(ts) AS day, customer_id, amount FROM orders WHERE status <> 'cancelled')
  SELECT day, count(DISTINCT customer_id) AS customers, sum(amount) AS total FROM d GROUP BY day;
CREATE OR REPLACE VIEW big_spenders (id, name, total COMMENT 'last 30 days') AS
  SELECT c.id, c.name, t.total FROM customers c JOIN customer_totals t ON t.id = c.id WHERE t.total > 1000;
UPDATE orders SET status = 'shipped', amount = amount * 1.1 WHERE status = 'new' AND ts < '2024-02-01';
DELETE FROM orders o WHERE o.status = 'cancelled' AND o.customer_id IN (SELECT id FROM customers WHERE NOT active);
MERGE INTO customers t USING (SELECT id, name, region, active, NULL AS address FROM staging_customers) s
  ON t.id = s.id
  WHEN MATCHED AND s.active = false THEN DELETE
  WHEN MATCHED THEN UPDATE SET t.name = s.name, t.region = s.region
  WHEN NOT MATCHED THEN INSERT *;
SELECT c.region, count(*) AS orders, sum(o.amount) AS total,
  rank() OVER (ORDER BY sum(o.amount) DESC) AS position
FROM orders o JOIN customers c ON c.id = o.customer_id
WHERE o.ts BETWEEN '2024-01-01' AND '2024-03-31' AND o.status IN ('new', 'shipped')
GROUP BY c.region HAVING count(*) > 10 ORDER BY total DESC LIMIT 20;
WITH firsts AS (
  SELECT customer_id, min(ts) AS first_ts FROM orders GROUP BY customer_id
), cohorts AS (
  SELECT date_trunc('MONTH', first_ts) AS cohort, customer_id FROM firsts
)
SELECT cohort, count(*) AS customers FROM cohorts GROUP BY cohort
UNION ALL
SELECT NULL, count(*) FROM customers WHERE id NOT IN (SELECT customer_id FROM firsts);
SELECT * FROM big_spenders b WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = b.id AND o.amount > 500);
SELECT o.id, o.amount, x.tag FROM orders o LATERAL VIEW explode(o.tags) x AS tag
WHERE CASE WHEN o.amount > 100 THEN 'big' ELSE 'small' END = 'big';
ALTER TABLE orders CREATE BRANCH IF NOT EXISTS audit RETAIN 7 DAYS;
CALL system.expire_snapshots(table => 'shop.orders', older_than => TIMESTAMP '2024-01-01 00:00:00', retain_last => 5);
DESCRIBE TABLE EXTENDED orders
"""
TABLES = ("orders", "customers", "staging", "regions", "customer_totals", "staging_customers", "big_spenders")
# 20 row-level statements: plain filters (run by the table core), subqueries, UPDATE SET lists,
# MERGE with conditions, assignments and INSERT values.
DML_SCRIPT = """
DELETE FROM orders WHERE status = 'cancelled';
DELETE FROM orders o WHERE o.ts < TIMESTAMP '2024-01-01 00:00:00' AND o.amount < 10 AND o.status IN ('new', 'held');
DELETE FROM orders WHERE customer_id IN (SELECT id FROM customers WHERE NOT active);
DELETE FROM orders o WHERE EXISTS (SELECT 1 FROM staging s WHERE s.id = o.id) AND o.amount > 0;
DELETE FROM orders WHERE id BETWEEN 100 AND 200 OR (status = 'held' AND channel IS NULL);
DELETE FROM customers c WHERE c.region = 'eu' AND c.name LIKE 'test%';
UPDATE orders SET status = 'shipped', amount = amount * 1.1 WHERE status = 'new' AND ts < '2024-02-01';
UPDATE orders o SET o.channel = coalesce(o.channel, 'web') WHERE o.id > 1000;
UPDATE orders SET amount = (SELECT max(amount) FROM orders) WHERE status = 'promo';
UPDATE customers SET active = false, region = upper(region) WHERE id IN (SELECT customer_id FROM orders
  WHERE status = 'cancelled' GROUP BY customer_id HAVING count(*) > 3);
UPDATE customers c SET name = concat(c.name, ' (', c.region, ')') WHERE c.active AND c.region <> 'us';
UPDATE orders SET tags = array('late') WHERE ts < date_sub(current_date(), 90) AND status = 'new';
MERGE INTO customers t USING (SELECT id, name, region, active, NULL AS address FROM staging_customers) s
  ON t.id = s.id
  WHEN MATCHED AND s.active = false THEN DELETE
  WHEN MATCHED THEN UPDATE SET t.name = s.name, t.region = s.region
  WHEN NOT MATCHED THEN INSERT *;
MERGE INTO customers t USING staging_customers s ON t.id = s.id
  WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *;
MERGE INTO orders t USING staging s ON t.id = s.id AND t.ts = s.ts
  WHEN MATCHED AND s.status = 'cancelled' THEN DELETE
  WHEN MATCHED THEN UPDATE SET status = s.status, amount = s.amount
  WHEN NOT MATCHED AND s.amount > 0 THEN INSERT (id, customer_id, amount, ts, status)
    VALUES (s.id, s.customer_id, s.amount, s.ts, s.status);
MERGE INTO orders t USING (SELECT id, sum(amount) AS amount FROM staging GROUP BY id) s ON s.id = t.id
  WHEN MATCHED THEN UPDATE SET amount = t.amount + s.amount;
MERGE INTO customers t USING (SELECT * FROM staging_customers WHERE region = 'eu') s
  ON t.id = s.id AND t.region = s.region
  WHEN NOT MATCHED THEN INSERT (id, name, region, active) VALUES (s.id, s.name, s.region, true);
DELETE FROM orders WHERE amount IS NULL OR amount < 0;
UPDATE orders SET status = CASE WHEN amount > 100 THEN 'big' ELSE 'small' END WHERE status IS NULL;
MERGE INTO orders t USING staging s ON t.id = s.id WHEN MATCHED THEN DELETE
"""


def _modules() -> tuple[Any, Any, Any]:
    """The parser, planner and row-level handlers of the side's checkout: sql/ in rooms (after
    issue 47), or its flat modules (before)."""
    import importlib

    try:
        return tuple(importlib.import_module(f"tablestore.sql.{m}")  # type: ignore[return-value]
                     for m in ("parse.parser", "plan.planner", "run.row_level"))
    except ModuleNotFoundError:
        return tuple(importlib.import_module(f"tablestore.sql.{m}")  # type: ignore[return-value]
                     for m in ("parser", "query", "row_level_statements"))


def work() -> dict[str, Any]:
    """One process's figures for the ``tablestore`` it imports (either side's)."""
    from sqlglot import exp

    parser, planner_module, _ = _modules()
    parse_script, QueryPlanner, parse_query = parser.parse_script, planner_module.QueryPlanner, \
        planner_module.parse_query
    statements = parse_script(SCRIPT)
    queries = []  # (text, tokens) of every query; tokens only where the planner takes them
    takes_tokens = len(inspect.signature(QueryPlanner.rewrite).parameters) > 2
    for s in statements:
        kind = type(s).__name__
        text = s.sql if kind == "Query" else getattr(s, "query", None) if kind in ("Insert", "CreateTable",
                                                                                   "CreateView") else None
        if text:
            queries.append((text, getattr(s, "query_tokens", ()) if takes_tokens else ()))
    for text, _ in queries:
        # A function Spark must look up would need Spark: the script uses none.
        assert not list(parse_query(text).find_all(exp.Anonymous)), text

    def plan(statements: list[Any]) -> None:
        planner = QueryPlanner(None, None, "{}")  # type: ignore[arg-type]
        for table in TABLES:
            planner.bind(table, f"view_{table}")
        for s in statements:
            kind = type(s).__name__
            if kind == "Query":
                planner.rewrite(*((s.sql, s.query_tokens) if takes_tokens else (s.sql,)))
            elif kind in ("Insert", "CreateTable", "CreateView") and getattr(s, "query", None):
                planner.rewrite(*((s.query, s.query_tokens) if takes_tokens else (s.query,)))

    return {"statements": len(statements), "queries": len(queries), "takes_tokens": takes_tokens,
            **_timed(lambda: parse_script(SCRIPT), plan, "")}


def dml_work() -> dict[str, Any]:
    """The 20 row-level statements of ``DML_SCRIPT``: their parse, and the planning hops that need
    no Spark, each side with its own functions (the same names before and after): a DELETE's or
    UPDATE's WHERE split into the plain filter the table core runs and prunes with, bound to a
    real table's schema; a MERGE's join keys and whether its source is a bare table. Before,
    these read the clauses' SQL text again; after, they read the trees of the one parse."""
    import tempfile

    import tablestore
    from tablestore.spec.schemas.schema import Schema
    from tablestore.spec.schemas.types import (
        BooleanType,
        DecimalType,
        ListType,
        LongType,
        NestedField,
        StringType,
        TimestampType,
    )

    parser, _, row_level = _modules()
    parse_script = parser.parse_script
    with tempfile.TemporaryDirectory() as directory:
        catalog = tablestore.load_catalog("bench", type="sql", uri=f"sqlite:///{directory}/catalog.db",
                                          warehouse=f"{directory}/wh")
        catalog.create_namespace("shop")
        fields = {"orders": [("id", LongType()), ("customer_id", LongType()), ("amount", DecimalType(10, 2)),
                             ("ts", TimestampType()), ("status", StringType()), ("channel", StringType()),
                             ("tags", ListType(100, StringType()))],
                  "customers": [("id", LongType()), ("name", StringType()), ("region", StringType()),
                                ("active", BooleanType())]}
        tables = {name: catalog.create_table(f"shop.{name}", schema=Schema(
            tuple(NestedField(i, n, t) for i, (n, t) in enumerate(cols, 1)))) for name, cols in fields.items()}

        def plan(statements: list[Any]) -> None:
            for s in statements:
                table = tables[s.name[-1]]
                alias = (s.alias or s.name[-1]).lower()
                if type(s).__name__ == "MergeInto":
                    row_level._key_pairs(s.on, alias, s.source_alias or "__source")
                    row_level.source_table_name(s.source)
                else:
                    row_level._plain_filter(s.where, {alias, s.name[-1]}, table)

        statements = parse_script(DML_SCRIPT)
        assert len(statements) == 20 and all(
            type(s).__name__ in ("DeleteFrom", "UpdateTable", "MergeInto") for s in statements)
        return _timed(lambda: parse_script(DML_SCRIPT), plan, "dml ")


def _timed(parse: Any, plan: Any, prefix: str) -> dict[str, Any]:
    reps = int(sys.argv[sys.argv.index("--reps") + 1])
    for _ in range(max(5, reps // 10)):  # warm-up
        plan(parse())
    wall: dict[str, list[float]] = {"parse": [], "plan": [], "total": []}
    cpu: dict[str, list[float]] = {"parse": [], "plan": [], "total": []}
    for _ in range(reps):
        w0, c0 = time.perf_counter(), time.process_time()
        statements = parse()
        w1, c1 = time.perf_counter(), time.process_time()
        plan(statements)
        w2, c2 = time.perf_counter(), time.process_time()
        for out, (a, b, c) in ((wall, (w0, w1, w2)), (cpu, (c0, c1, c2))):
            out["parse"].append(b - a)
            out["plan"].append(c - b)
            out["total"].append(c - a)
    return {"wall_ms": {prefix + k: statistics.median(v) * 1e3 for k, v in wall.items()},
            "cpu_ms": {prefix + k: statistics.median(v) * 1e3 for k, v in cpu.items()}}


def main(argv: list[str] | None = None) -> int:
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table

    from bench.against_base import HERE, alternating, base_checkout, checkout_env, merge_base, short_commit

    parser = argparse.ArgumentParser(prog="python -m bench.sql_planning", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default=None,
                        help="the base revision (default: where this checkout's branch left main)")
    parser.add_argument("--base-dir", type=Path, default=None, help="an existing checkout of the base instead")
    parser.add_argument("--rounds", type=int, default=6, help="processes per side, alternating (default 6)")
    parser.add_argument("--reps", type=int, default=100, help="timed plannings of the script per process")
    args = parser.parse_args(argv)
    console = Console()
    if not console.is_terminal and console.width < 140:
        console.width = 140

    rounds: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    with base_checkout(args.base or merge_base(), args.base_dir) as base:
        sides = {"before": base, "after": HERE}
        commits = {side: short_commit(path) for side, path in sides.items()}
        for number, side in enumerate(alternating(2 * args.rounds), 1):
            checkout = sides[side]
            # -P: the script's folder (bench/) is not put on sys.path, so only the checkout is.
            done = subprocess.run([sys.executable, "-P", __file__, "--worker", "--reps", str(args.reps)],
                                  cwd=checkout, env=checkout_env(checkout), capture_output=True, text=True,
                                  check=False)
            if done.returncode != 0:
                raise SystemExit(f"the {side} side failed:\n{done.stderr}")
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            rounds[side].append(figures)
            console.log(f"round {number} {side} ({commits[side]}): total {figures['wall_ms']['total']:.2f} ms, "
                        f"cpu {figures['cpu_ms']['total']:.2f} ms", highlight=False)

    first = rounds["after"][0]
    table = Table(title=f"Planning a script of {first['statements']} statements ({first['queries']} queries): "
                        f"before {commits['before']}, after {commits['after']}; median ms per script of "
                        f"{args.rounds} processes per side x {args.reps} plannings", title_justify="left")
    # CPU first: on a shared machine a process waits for a core far longer than it computes.
    for column in ("phase", "cpu before, per process", "cpu after, per process", "cpu before", "cpu after",
                   "cpu after / before", "wall before", "wall after", "wall after / before"):
        table.add_column(column, justify="left" if column == "phase" else "right")
    # "dml parse" and "dml plan": DML_SCRIPT's 20 row-level statements (dml_work).
    for phase in ("parse", "plan", "total", "dml parse", "dml plan", "dml total"):
        cpu_b = [r["cpu_ms"][phase] for r in rounds["before"]]
        cpu_a = [r["cpu_ms"][phase] for r in rounds["after"]]
        wall_b = statistics.median(r["wall_ms"][phase] for r in rounds["before"])
        wall_a = statistics.median(r["wall_ms"][phase] for r in rounds["after"])
        table.add_row(phase, " ".join(f"{v:.1f}" for v in cpu_b), " ".join(f"{v:.1f}" for v in cpu_a),
                      f"{statistics.median(cpu_b):.2f}", f"{statistics.median(cpu_a):.2f}",
                      f"{statistics.median(cpu_a) / statistics.median(cpu_b):.2f}",
                      f"{wall_b:.2f}", f"{wall_a:.2f}", f"{wall_a / wall_b:.2f}")
    console.print(table)
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv:
        figures, dml = work(), dml_work()
        for key in ("wall_ms", "cpu_ms"):
            figures[key].update(dml[key])
        print(json.dumps(figures))
        sys.exit(0)
    sys.exit(main())
