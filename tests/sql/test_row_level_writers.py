"""One truth for every writer: row-level statements see every live row, whoever wrote the files.

The same rows are written by each writer (our SQL INSERT, ``format("tablestore")``,
``write_dataframe``, ``table.append`` on v2 and v3, pyiceberg, DuckDB through the REST catalog
service, Java Iceberg, and compaction output), and the table is registered in one lake. Then one
script of statements runs on a copy of it, in copy-on-write and in merge-on-read, on the Spark
engine (the SQL statements: Spark evaluates them over ``_file``/``_pos``) and on the local engine
(the table API: ``update``, ``delete``, ``merge``; a subquery is evaluated first, since the
table core has none). After every statement the count and every column of every row (sorted)
are compared with DuckDB running the same SQL on the same rows in memory.

Set-up is shared: each writer's table is written once per module and copied per case by
registering its metadata file under a new name (copies share the writer's files and add their
own), and DuckDB's expected states are computed once. Every writer runs in both modes on both
engines: 36 cases, the Spark ones about 10 s each.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tablestore.catalog_manager import CatalogManager
from tablestore.config import LakehouseConfig
from tablestore.table import Table
from tests.lakehouse_config import lakehouse_config, sqlite_catalog

pytestmark = pytest.mark.spark

from pyspark.sql import SparkSession  # noqa: E402

from tablestore.spark import spark_session  # noqa: E402
from tablestore.spark.native.native_write import write_dataframe  # noqa: E402
from tablestore.sql.session import SqlSession  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string()), ("g", pa.int64()), ("v", pa.float64())])
COLUMNS = "(id BIGINT, s STRING, g BIGINT, v DOUBLE)"
# The rows as SQL over a range, in a dialect Spark (ours and Java's) and DuckDB share.
ROW_SQL = ("id, concat('r', CAST(id AS STRING)), CASE WHEN id % 11 = 5 THEN NULL ELSE id % 7 END, "
           "CAST(id AS DOUBLE) * 1.5")
HALVES = ((0, 30), (30, 60))
MODES = ["copy-on-write", "merge-on-read"]


def rows(start: int, stop: int) -> pa.Table:
    ids = list(range(start, stop))
    return pa.table({"id": ids, "s": [f"r{i}" for i in ids], "g": [None if i % 11 == 5 else i % 7 for i in ids],
                     "v": [i * 1.5 for i in ids]}, schema=SCHEMA)


BASE = rows(0, 60)
SOURCE = pa.table({"id": list(range(0, 80, 3)), "s": [f"k{i}" for i in range(0, 80, 3)],
                   "g": [i % 5 - 2 for i in range(0, 80, 3)], "v": [i * 0.25 for i in range(0, 80, 3)]}, schema=SCHEMA)


@dataclass(frozen=True)
class Statement:
    name: str
    sql: str  # {t}: the target table, {src}: the source table
    local: Callable[[Table], int]  # the same statement through the table API


def _subquery_ids() -> list[int]:
    return [int(i) for i in SOURCE.filter(pc.equal(SOURCE.column("g"), 0)).column("id").to_pylist()]


def _merge(table: Table) -> int:
    source = SOURCE.filter(pc.equal(pc.bit_wise_and(SOURCE.column("id"), 1), 0))
    return (table.merge(source, on="t.id = k.id", source_alias="k", target_alias="t")
            .when_matched_delete("k.g < 0")
            .when_matched_update({"s": "k.s", "g": "t.g + k.g"})
            .when_not_matched_insert({"id": "k.id", "s": "k.s", "g": "k.g", "v": "k.v"})
            .execute().affected)


def _upsert(table: Table) -> int:
    return (table.merge(SOURCE, on="t.id = k.id", source_alias="k", target_alias="t")
            .when_matched_update_all().when_not_matched_insert_all().execute().affected)


STATEMENTS = [
    Statement("update", "UPDATE {t} SET g = g + 100, s = concat(s, '-u') WHERE g < 3",
              lambda t: t.update({"g": "g + 100", "s": "concat(s, '-u')"}, "g < 3")),
    Statement("delete", "DELETE FROM {t} WHERE v > 80", lambda t: t.delete("v > 80")),
    # The table core has no subqueries: the local engine is given the subquery's ids.
    Statement("delete with a subquery", "DELETE FROM {t} WHERE id IN (SELECT id FROM {src} WHERE g = 0)",
              lambda t: t.delete(f"id IN ({', '.join(map(str, _subquery_ids()))})")),
    # Matched (delete and update), not matched (insert), from a query.
    Statement("merge", "MERGE INTO {t} AS t USING (SELECT id, s, g, v FROM {src} WHERE id % 2 = 0) AS k "
                       "ON t.id = k.id WHEN MATCHED AND k.g < 0 THEN DELETE "
                       "WHEN MATCHED THEN UPDATE SET s = k.s, g = t.g + k.g "
                       "WHEN NOT MATCHED THEN INSERT (id, s, g, v) VALUES (k.id, k.s, k.g, k.v)", _merge),
    # The upsert MERGE SQL runs through the table's merge, from a table.
    Statement("upsert", "MERGE INTO {t} AS t USING {src} AS k ON t.id = k.id "
                        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *", _upsert),
]


def sorted_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    data = table.select(SCHEMA.names).cast(SCHEMA)
    return sorted(zip(*(data.column(n).to_pylist() for n in SCHEMA.names), strict=True))


@pytest.fixture(scope="module")
def expected() -> list[tuple[int, list[tuple[Any, ...]]]]:
    """DuckDB's count and rows after each statement, from BASE."""
    import duckdb

    con = duckdb.connect()
    con.register("base_rows", BASE)
    con.register("source_rows", SOURCE)
    con.execute("CREATE TABLE t AS SELECT * FROM base_rows")
    con.execute("CREATE TABLE src AS SELECT * FROM source_rows")
    out = []
    for statement in STATEMENTS:
        count = con.execute(statement.sql.format(t="t", src="src")).fetchall()[0][0]
        out.append((int(count), sorted_rows(con.execute("SELECT * FROM t").to_arrow_table())))
    con.close()
    return out


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> LakehouseConfig:
    root = tmp_path_factory.mktemp("row-level-writers")
    config = lakehouse_config(root, sqlite_catalog(root, "lake", default_database="db"))
    # Each case registers a writer's base table under a name of its own: the cases share the
    # base files on purpose (each writes only new files), which the catalog allows when told.
    config.catalogs["lake"].properties["allow-overlapping-locations"] = "true"
    return config


@pytest.fixture(scope="module")
def manager(config: LakehouseConfig) -> Iterator[CatalogManager]:
    manager = CatalogManager(config)
    manager.catalog().create_namespace("db")
    manager.catalog().create_table("db.src", schema=SCHEMA).append(SOURCE)
    try:
        yield manager
    finally:
        manager.close()


@pytest.fixture(scope="module")
def spark(config: LakehouseConfig) -> Iterator[SparkSession]:
    session = spark_session(config, app_name="tablestore-row-level-writers")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def sql(config: LakehouseConfig, spark: SparkSession, manager: CatalogManager) -> SqlSession:
    return SqlSession(config, spark=spark)


# -- the writers: each leaves BASE in a table and returns its metadata file ---------------------------


def _by_sql_insert(request: pytest.FixtureRequest, manager: CatalogManager) -> str:
    sql: SqlSession = request.getfixturevalue("sql")
    sql.execute(f"CREATE TABLE db.w_sql {COLUMNS}")
    for start, stop in HALVES:
        sql.execute(f"INSERT INTO db.w_sql SELECT {ROW_SQL} FROM range({start}, {stop})")
    return manager.catalog().load_table("db.w_sql").metadata_location


def _by_data_source(request: pytest.FixtureRequest, manager: CatalogManager) -> str:
    spark: SparkSession = request.getfixturevalue("spark")
    manager.catalog().create_table("db.w_source", schema=SCHEMA)
    df = spark.createDataFrame(BASE.to_pylist(), "id BIGINT, s STRING, g BIGINT, v DOUBLE").repartition(2)
    df.write.format("tablestore").mode("append").save("lake.db.w_source")
    return manager.catalog().load_table("db.w_source").metadata_location


def _by_write_dataframe(request: pytest.FixtureRequest, manager: CatalogManager) -> str:
    spark: SparkSession = request.getfixturevalue("spark")
    manager.catalog().create_table("db.w_native", schema=SCHEMA)
    # Computed columns: the shape whose field ids Spark once dropped.
    df = spark.range(0, 60, 1, 2).selectExpr(
        "id", "concat('r', CAST(id AS STRING)) AS s", "CASE WHEN id % 11 = 5 THEN NULL ELSE id % 7 END AS g",
        "CAST(id AS DOUBLE) * 1.5 AS v")
    outcome = write_dataframe(df, "db.w_native", config=request.getfixturevalue("config"))
    assert outcome.path == "native", outcome
    return manager.catalog().load_table("db.w_native").metadata_location


def _by_append(version: int) -> Callable[[pytest.FixtureRequest, CatalogManager], str]:
    def write(request: pytest.FixtureRequest, manager: CatalogManager) -> str:
        table = manager.catalog().create_table(f"db.w_append_v{version}", schema=SCHEMA,
                                               properties={"format-version": str(version)})
        for start, stop in HALVES:
            table.append(rows(start, stop))
        return table.metadata_location
    return write


def _by_pyiceberg(request: pytest.FixtureRequest, manager: CatalogManager) -> str:
    from pyiceberg.catalog.sql import SqlCatalog as PyCatalog

    config: LakehouseConfig = request.getfixturevalue("config")
    props = config.catalogs["lake"].properties
    theirs = PyCatalog("lake", uri=props["uri"], warehouse=f"file://{props['warehouse']}")
    table = theirs.create_table("db.w_pyiceberg", schema=SCHEMA)
    for start, stop in HALVES:
        table.append(rows(start, stop))
    return str(table.metadata_location)


def _by_duckdb(request: pytest.FixtureRequest, manager: CatalogManager) -> str:
    from tablestore.catalog.sql_catalog import SqlCatalog
    from tests.interop.readers import duckdb_connect
    from tests.rest.conftest import CATALOG, WRITE_TOKEN, start_service

    workdir = Path(tempfile.mkdtemp(prefix="row-level-duckdb-"))
    service = start_service(request, "sqlite", workdir)
    try:
        con = duckdb_connect(workdir / "extensions")
        con.execute(f"CREATE SECRET lake_auth (TYPE iceberg, TOKEN '{WRITE_TOKEN}')")
        con.execute(f"ATTACH '{CATALOG}' AS lake (TYPE iceberg, ENDPOINT '{service.uri}', SECRET lake_auth)")
        con.execute("CREATE SCHEMA lake.dw")
        con.execute("CREATE TABLE lake.dw.t (id BIGINT, s VARCHAR, g BIGINT, v DOUBLE)")
        for start, stop in HALVES:
            con.execute(f"INSERT INTO lake.dw.t SELECT {ROW_SQL.replace('AS STRING', 'AS VARCHAR')} "
                        f"FROM range({start}, {stop}) AS r(id)")
        con.close()
        direct = SqlCatalog(CATALOG, **service.direct_properties())
        try:
            return direct.load_table("dw.t").metadata_location
        finally:
            direct.close()
    finally:
        service.stop()


def _by_java(request: pytest.FixtureRequest, manager: CatalogManager) -> str:
    from tests import oracle

    warehouse = Path(tempfile.mkdtemp(prefix="row-level-java-"))
    batch = oracle.OracleBatch(warehouse=str(warehouse))
    batch.sql(f"CREATE TABLE ref.db.t {COLUMNS} USING iceberg TBLPROPERTIES ('format-version'='2')",
              *[f"INSERT INTO ref.db.t SELECT {ROW_SQL} FROM range({start}, {stop})" for start, stop in HALVES])
    oracle.check(batch.run()[0])
    return str(sorted((warehouse / "db" / "t" / "metadata").glob("v*.metadata.json"))[-1])


def _by_compaction(request: pytest.FixtureRequest, manager: CatalogManager) -> str:
    table = manager.catalog().create_table("db.w_compacted", schema=SCHEMA)
    for start in range(0, 60, 20):
        table.append(rows(start, start + 20))
    result = table.maintenance().rewrite_data_files(options={"min-input-files": 2})
    assert result.rewritten_data_files_count == 3 and result.added_data_files_count == 1, result
    table.refresh()
    return table.metadata_location


WRITERS: dict[str, Callable[[pytest.FixtureRequest, CatalogManager], str]] = {
    "sql-insert": _by_sql_insert,
    "format-tablestore": _by_data_source,
    "write_dataframe": _by_write_dataframe,
    "table.append": _by_append(2),
    "table.append-v3": _by_append(3),
    "pyiceberg": _by_pyiceberg,
    "duckdb": _by_duckdb,
    "java": _by_java,
    "compaction": _by_compaction,
}


def _cases() -> list[Any]:
    """Every writer x mode x engine: which rows a statement sees depends on the writer, how it
    writes them on the mode, and where the work runs on the engine."""
    cases = []
    for writer in WRITERS:
        marks = [pytest.mark.oracle] if writer == "java" else []
        cases += [pytest.param(writer, mode, engine, marks=marks, id=f"{writer}-{mode}-{engine}")
                  for mode in MODES for engine in ("local", "spark")]
    return cases


@pytest.fixture(scope="module")
def written() -> dict[str, str]:
    return {}


@pytest.fixture
def base(request: pytest.FixtureRequest, manager: CatalogManager, written: dict[str, str]) -> Callable[[str], str]:
    """The writer's metadata file, written on first use in the module."""
    def get(writer: str) -> str:
        if writer not in written:
            written[writer] = WRITERS[writer](request, manager)
        return written[writer]
    return get


_copies = itertools.count()


@pytest.mark.parametrize(("writer", "mode", "engine"), _cases())
def test_row_level_statements_agree_with_duckdb_on_every_writers_files(
    request: pytest.FixtureRequest, writer: str, mode: str, engine: str, manager: CatalogManager,
    base: Callable[[str], str], expected: list[tuple[int, list[tuple[Any, ...]]]],
) -> None:
    name = f"db.{writer.replace('-', '_').replace('.', '_')}_{mode.replace('-', '_')}_{engine}_{next(_copies)}"
    catalog = manager.catalog()
    table = catalog.register_table(name, base(writer))
    assert sorted_rows(table.scan().to_arrow()) == sorted_rows(BASE), f"{writer} did not write the base rows"
    table.update_properties({f"write.{op}.mode": mode for op in ("delete", "update", "merge")})
    sql: SqlSession | None = request.getfixturevalue("sql") if engine == "spark" else None
    for statement, (count, want) in zip(STATEMENTS, expected, strict=True):
        if sql is not None:
            affected = sql.execute_one(statement.sql.format(t=f"lake.{name}", src="lake.db.src")).affected
        else:
            affected = statement.local(catalog.load_table(name))
        got = sorted_rows(catalog.load_table(name).scan().to_arrow())
        assert (affected, got) == (count, want), f"{statement.name} on {writer}'s files ({mode}, {engine})"
    if mode == "merge-on-read":
        deletes = [d for task in catalog.load_table(name).scan().plan_files() for d in task.delete_files]
        assert deletes, "merge-on-read left no delete file"
