"""Column merges and partial updates: the design document's incremental scenario, the update
rule, duplicate keys, sources of every kind, Spark tasks committing once, and interop, on SQLite:
a merge rewrites fragments and commits one snapshot as any rewrite does (the races of a commit are
in test_fragments.py and test_concurrency.py)."""

from __future__ import annotations

import glob
import pickle
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

import tablestore
from tablestore.catalog.base import Catalog
from tablestore.errors import CommitConflictError, ValidationError
from tablestore.table import Table
from tablestore.table.ops.column_merge import MergePlan, rewrite_fragments, source_columns
from tests import oracle
from tests.values import oracle_rows

IDS = pa.int64()


@pytest.fixture
def db(catalog: Catalog) -> Catalog:
    """The test's catalog (``tests/table/conftest.py``) with the namespace ``db``."""
    catalog.create_namespace("db")
    return catalog


def _catalog(root: Path) -> Catalog:
    """A SQLite catalog, for the Spark and Java-reader tests (they prove nothing about catalogs)."""
    catalog = tablestore.load_catalog("c", type="sql", uri=f"sqlite:///{root}/c.db", warehouse=str(root / "w"))
    catalog.create_namespace("db")
    return catalog


def users_table(catalog: Catalog, name: str = "db.users", files: int = 4, n: int = 200) -> Table:
    """Users 1..n in ``files`` files of consecutive ids."""
    table = catalog.create_table(name, schema=pa.schema([("user_id", IDS), ("name", pa.string())]))
    per = n // files
    for lo in range(1, n + 1, per):
        ids = list(range(lo, lo + per))
        table.append(pa.table({"user_id": pa.array(ids, IDS), "name": [f"u{i}" for i in ids]}))
    return table


def by_key(table: Table, *columns: str) -> dict[int, tuple[Any, ...]]:
    return {r["user_id"]: tuple(r[c] for c in columns) for r in table.scan().to_arrow().to_pylist()}


def segment_c(i: int) -> str | None:
    """Job C's segment for user i: NULL for every third user."""
    return None if i % 3 == 0 else f"c{i}"


def run_scenario(table: Table, source: Any = pa.table) -> None:
    """Job A adds segment for 1-100, job B ltv for 50-150, job C updates segment for 80-120."""
    a = range(1, 101)
    table.merge_columns(source({"user_id": pa.array(a, IDS), "segment": [f"a{i}" for i in a]}), on="user_id")
    b = range(50, 151)
    table.merge_columns(source({"user_id": pa.array(b, IDS), "ltv": [i * 1.5 for i in b]}), on="user_id")
    c = range(80, 121)
    table.update_columns(source({"user_id": pa.array(c, IDS), "segment": pa.array([segment_c(i) for i in c],
                                                                                    pa.string())}),
                         on="user_id", columns=["segment"])


def expected_scenario(i: int) -> tuple[Any, ...]:
    segment = f"a{i}" if i <= 100 else None
    if 80 <= i <= 120 and segment_c(i) is not None:
        segment = segment_c(i)
    return f"u{i}", segment, (i * 1.5 if 50 <= i <= 150 else None)


def test_incremental_scenario_keeps_old_values_where_the_new_is_null_or_absent(db: Catalog) -> None:
    table = users_table(db)
    run_scenario(table)
    assert table.schema().column_names == ["user_id", "name", "segment", "ltv"]
    assert [table.schema().find_field(c).field_id for c in ("segment", "ltv")] == [3, 4]
    got = by_key(table, "name", "segment", "ltv")
    assert got == {i: expected_scenario(i) for i in range(1, 201)}
    assert got[90] == ("u90", "a90", 135.0)  # C's NULL kept A's value
    assert got[91] == ("u91", "c91", 136.5)  # C's value won
    assert got[102] == ("u102", None, 153.0)  # C's NULL for a row without a segment: NULL
    assert got[110] == ("u110", "c110", 165.0)  # C set a value A never had
    ops = [s.summary["operation"] for s in table.snapshots()]
    assert ops == ["append"] * 4 + ["overwrite"] * 3  # one commit per job
    assert [s.summary.get("column-merge") for s in table.snapshots()[4:]] == ["merge", "merge", "update"]


def test_scenario_from_pandas_sources(db: Catalog) -> None:
    table = users_table(db)
    run_scenario(table, lambda cols: pd.DataFrame({k: pa.array(v).to_pylist() for k, v in cols.items()}))
    assert by_key(table, "name", "segment", "ltv") == {i: expected_scenario(i) for i in range(1, 201)}


def test_fragments_without_matching_keys_are_not_rewritten(db: Catalog) -> None:
    table = users_table(db)
    before = {f.id for f in table.fragments()}
    snapshot = table.merge_columns(pa.table({"user_id": pa.array([10, 20], IDS), "tier": ["g", "s"]}), on="user_id")
    assert snapshot is not None and snapshot.summary["deleted-data-files"] == "1"
    assert len(before & {f.id for f in table.fragments()}) == 3
    assert table.merge_columns(pa.table({"user_id": pa.array([999], IDS), "x": [1]}), on="user_id") is None
    assert table.schema().column_names[-1] == "x"  # only the schema changed: every row reads NULL
    assert set(by_key(table, "x").values()) == {(None,)}


def test_overwrite_null_policy_lets_a_matched_null_win(db: Catalog) -> None:
    table = users_table(db)
    table.update_columns(pa.table({"user_id": pa.array([1, 2], IDS), "name": pa.array([None, "z"], pa.string())}),
                         on="user_id", columns=["name"], null_policy="overwrite")
    got = by_key(table, "name")
    assert got[1] == (None,) and got[2] == ("z",) and got[3] == ("u3",)


def test_duplicate_keys_fail_naming_one_or_keep_the_first_or_last(db: Catalog) -> None:
    table = users_table(db)
    dup = pa.table({"user_id": pa.array([5, 6, 5, 7], IDS), "tier": ["first", "x", "last", "y"]})
    with pytest.raises(ValidationError, match="2 rows with the key user_id=5; make the keys unique or pass"):
        table.merge_columns(dup, on="user_id")
    assert len(table.snapshots()) == 4 and "tier" not in table.schema().column_names
    table.merge_columns(dup, on="user_id", duplicates="first")
    assert by_key(table, "tier")[5] == ("first",)
    table.update_columns(dup, on="user_id", columns=["tier"], duplicates="last")
    got = by_key(table, "tier")
    assert got[5] == ("last",) and got[6] == ("x",) and got[8] == (None,)


def test_composite_keys_and_null_keys(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.k", schema=pa.schema([("a", IDS), ("b", pa.string()), ("v", IDS)]))
    table.append(pa.table({"a": pa.array([1, 1, 2, None], IDS), "b": ["x", "y", "x", "x"], "v": [1, 2, 3, 4]}))
    source = pa.table({"a": pa.array([1, 2, None], IDS), "b": ["y", "x", "x"], "w": ["1y", "2x", "null-x"]})
    table.merge_columns(source, on=["a", "b"])
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["v"])
    assert [r["w"] for r in rows] == [None, "1y", "2x", None]  # a NULL key matches nothing


def test_merge_only_into_fragments_matching_a_filter(db: Catalog) -> None:
    table = users_table(db)
    table.merge_columns(pa.table({"user_id": pa.array([1, 199], IDS), "t": ["a", "b"]}), on="user_id",
                        filter="user_id > 150")
    got = by_key(table, "t")
    assert got[1] == (None,) and got[199] == ("b",)


# -- Spark: tasks on executors, one commit ---------------------------------------------------------


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tablestore.config import parse_config
    from tablestore.spark import spark_session

    root = tmp_path_factory.mktemp("merge-spark")
    config = parse_config(textwrap.dedent(f"""
        default-catalog: c
        catalogs:
          - {{name: c, type: sql, uri: "sqlite:///{root}/s.db", warehouse: "{root}/w"}}
        spark: {{master: "local[2]"}}
    """), source=str(root / "tablestore.yaml"))
    session = spark_session(config, app_name="tablestore-column-merge-tests")
    try:
        yield session
    finally:
        session.stop()


def spark_table(tmp_path: Path, spark: Any) -> Table:
    from tablestore.spark import SparkEngine

    return users_table(_catalog(tmp_path), files=2).with_engine(SparkEngine(spark))


def test_two_spark_tasks_merge_different_fragments_in_one_snapshot(tmp_path: Path, spark: Any) -> None:
    table = spark_table(tmp_path, spark)
    source = spark.createDataFrame([(i, f"s{i}") for i in (5, 60, 150, 190)], "user_id bigint, segment string")
    fragments = table.fragments()
    rewritten = rewrite_fragments(table, fragments, source, on="user_id", columns=None, mode="merge")
    assert sorted(f.replaces for f in rewritten if f.replaces) == sorted(f.id for f in fragments)
    before = len(table.snapshots())
    snapshot = table.commit_fragments(rewritten)
    assert snapshot is not None and len(table.refresh().snapshots()) == before + 1
    got = by_key(table, "segment")
    assert {k: v for k, v in got.items() if v != (None,)} == {5: ("s5",), 60: ("s60",), 150: ("s150",),
                                                               190: ("s190",)}
    # The same through the table-level call: Spark source, Spark engine, one snapshot per job.
    update = spark.createDataFrame([(5, None), (150, "u150")], "user_id bigint, segment string")
    table.update_columns(update, on="user_id", columns=["segment"])
    got = by_key(table, "segment")
    assert got[5] == ("s5",) and got[150] == ("u150",) and len(table.snapshots()) == before + 2
    # The rows the tasks exchanged through staged Arrow files are gone.
    data_dir = Path(table.location.removeprefix("file://")) / "data"
    assert data_dir.is_dir() and not list(data_dir.glob(".column-merge-*"))


def test_a_concurrent_delete_fails_the_commit_of_spark_tasks(tmp_path: Path, spark: Any) -> None:
    table = spark_table(tmp_path, spark)
    source = spark.createDataFrame([(i, i * 2.0) for i in (10, 110)], "user_id bigint, ltv double")
    rewritten = rewrite_fragments(table, table.fragments(), source, on="user_id", columns=["ltv"], mode="merge")
    assert len(rewritten) == 2
    table.catalog.load_table("db.users").delete("user_id = 150")  # another writer touches a fragment
    with pytest.raises(CommitConflictError):
        table.commit_fragments(rewritten)
    assert "ltv" not in table.refresh().schema().column_names and len(by_key(table)) == 199


def test_spark_duplicates_are_found_in_the_tasks(tmp_path: Path, spark: Any) -> None:
    table = spark_table(tmp_path, spark)
    source = spark.createDataFrame([(7, "a"), (7, "b")], "user_id bigint, t string")
    with pytest.raises(Exception, match="2 rows with the key user_id=7"):
        table.merge_columns(source, on="user_id")
    table.merge_columns(source, on="user_id", duplicates="last")
    assert by_key(table, "t")[7] == ("b",)


def test_spark_duplicates_resolve_in_the_order_of_the_source_partitions(tmp_path: Path, spark: Any) -> None:
    table = spark_table(tmp_path, spark)
    # Three partitions in order; key 7 in the first and the last, key 150 (the other fragment)
    # twice in the middle one and once in the last.
    parts = [[(7, "a"), (60, "x")], [(150, "p"), (150, "q")], [(150, "r"), (7, "b")]]
    rdd = spark.sparkContext.parallelize([r for part in parts for r in part], 3)
    source = spark.createDataFrame(rdd, "user_id bigint, t string")
    assert source.rdd.glom().map(len).collect() == [2, 2, 2]
    table.merge_columns(source, on="user_id", duplicates="first")
    got = by_key(table, "t")
    assert (got[7], got[60], got[150]) == (("a",), ("x",), ("p",))
    table.update_columns(source, on="user_id", columns=["t"], duplicates="last")
    got = by_key(table, "t")
    assert (got[7], got[60], got[150]) == (("b",), ("x",), ("r",))


def test_a_spark_dataframe_merges_on_the_local_engine(tmp_path: Path, spark: Any) -> None:
    table = users_table(_catalog(tmp_path))
    table.merge_columns(spark.createDataFrame([(3, "x")], "user_id bigint, t string"), on="user_id")
    assert by_key(table, "t")[3] == ("x",)


def test_spark_fragments_with_overlapping_key_ranges_get_every_matching_row(tmp_path: Path, spark: Any) -> None:
    from tablestore.spark import SparkEngine

    table = odd_even_table(_catalog(tmp_path)).with_engine(SparkEngine(spark))
    rows = [(i, f"s{i}") for i in (1, 2, 99, 100, 500)] + [(2, "again")]
    source = spark.createDataFrame(rows, "user_id bigint, segment string").repartition(3)
    snapshot = table.merge_columns(source, on="user_id", duplicates="first")
    assert snapshot is not None and snapshot.summary["deleted-data-files"] == "2"
    got = {k: v for k, v in by_key(table, "name", "segment").items() if v[1] is not None}
    assert {k: v[1] for k, v in got.items() if k != 2} == {1: "s1", 99: "s99", 100: "s100"}
    assert got[2][1] in ("s2", "again") and len(by_key(table)) == 200


def test_spark_tasks_get_contiguous_fragments_of_equal_size() -> None:
    from tablestore.spark.tasks.column_merge_tasks import assign_tasks
    from tablestore.table.ops.column_merge import disjoint_order

    assert disjoint_order([(20, 29), (0, 9), (10, 19)]) == [1, 2, 0]
    assert disjoint_order([(0, 10), (10, 19)]) is None  # touching ranges share the key 10
    assert disjoint_order([(0, 9), (None, 19)]) is None
    assert assign_tasks([0, 1, 2, 3], [10, 10, 10, 10], 2) == [0, 0, 1, 1]
    assert assign_tasks([3, 2, 1, 0], [10, 10, 10, 10], 2) == [1, 1, 0, 0]
    assert assign_tasks([0, 1, 2], [100, 1, 1], 2) == [0, 1, 1]


# -- interop -------------------------------------------------------------------------------------


@pytest.mark.oracle
def test_the_java_oracle_and_pyiceberg_read_merged_tables_identically(tmp_path: Path) -> None:
    from pyiceberg.table import StaticTable

    catalog = _catalog(tmp_path)
    table = users_table(catalog)
    run_scenario(table)
    # A Java merge-on-read table: its position deletes are applied by the rewrite.
    java_dir = tmp_path / "java"
    batch = oracle.OracleBatch(warehouse=str(java_dir))
    batch.sql(
        "CREATE TABLE ref.db.j (user_id bigint, name string) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')",
        "INSERT INTO ref.db.j VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')",
        "DELETE FROM ref.db.j WHERE user_id = 2",
        "SELECT 1",
    )
    oracle.check(batch.run()[0])
    metadata = max(glob.glob(str(java_dir / "db" / "j" / "metadata" / "v*.metadata.json")),
                   key=lambda p: int(Path(p).name[1:].split(".")[0]))
    java = catalog.register_table("db.j", metadata)
    with_deletes = [f for f in java.fragments() if f.delete_files]
    assert len(with_deletes) == 1 and with_deletes[0].record_count > 1
    java.merge_columns(pa.table({"user_id": pa.array([2, 3], IDS), "score": pa.array([20, 30], pa.int32())}),
                       on="user_id")
    assert sorted(java.scan().to_arrow().to_pylist(), key=lambda r: r["user_id"]) == [
        {"user_id": 1, "name": "a", "score": None}, {"user_id": 3, "name": "c", "score": 30},
        {"user_id": 4, "name": "d", "score": None}]
    check = oracle.OracleBatch()
    jobs = {t.name: (t, check.read(t.metadata_location)) for t in (table, java)}
    results = check.run()
    for table_, job in jobs.values():
        ours = oracle_rows(table_.scan().to_arrow())
        assert oracle.check(results[job])["rows"] == ours
        assert oracle_rows(StaticTable.from_metadata(table_.metadata_location).scan().to_arrow()) == ours


def odd_even_table(catalog: Catalog) -> Table:
    """Users 1..200 in two files, odd and even ids: the files' key ranges overlap."""
    table = catalog.create_table("db.odd_even", schema=pa.schema([("user_id", IDS), ("name", pa.string())]))
    for parity in (1, 0):
        ids = [i for i in range(1, 201) if i % 2 == parity]
        table.append(pa.table({"user_id": pa.array(ids, IDS), "name": [f"u{i}" for i in ids]}))
    return table


def test_local_fragments_with_overlapping_key_ranges_get_every_matching_row(db: Catalog) -> None:
    table = odd_even_table(db)
    source = pa.table({"user_id": pa.array([2, 1, 99, 100, 500, 2, 1], IDS),
                       "segment": ["s2", "s1", "s99", "s100", "s500", "again", "later"]})
    with pytest.raises(ValidationError, match="2 rows with the key user_id=(1|2)"):
        table.merge_columns(source, on="user_id")
    snapshot = table.merge_columns(source, on="user_id", duplicates="first")
    assert snapshot is not None and snapshot.summary["deleted-data-files"] == "2"
    got = {k: v[1] for k, v in by_key(table, "name", "segment").items() if v[1] is not None}
    assert got == {1: "s1", 2: "s2", 99: "s99", 100: "s100"} and len(by_key(table)) == 200
    table.update_columns(source, on="user_id", columns=["segment"], duplicates="last")
    got = {k: v[0] for k, v in by_key(table, "segment").items() if v[0] is not None}
    assert got == {1: "later", 2: "again", 99: "s99", 100: "s100"}


def test_duplicates_of_keys_no_fragment_holds_are_dropped_not_an_error(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    source = pa.table({"user_id": pa.array([5, 999, 999, 0, 0], IDS), "tier": ["g", "x", "y", "p", "q"]})
    for table in (users_table(catalog), odd_even_table(catalog)):  # disjoint and overlapping ranges
        table.merge_columns(source, on="user_id")
        got = {k: v for k, v in by_key(table, "tier").items() if v != (None,)}
        assert got == {5: ("g",)} and len(got) == 1


def test_source_rows_sent_to_another_process_carry_only_their_rows(db: Catalog) -> None:
    table = users_table(db)  # 4 fragments of 50 users
    plan_source = pa.table({"user_id": pa.array(range(1, 201), IDS), "tier": [f"t{i}" for i in range(1, 201)]})
    fragments = table.fragments()
    plan = MergePlan.build(fragments[0].context, source_columns(plan_source), "user_id", None, "merge", "keep",
                           "error")
    items = plan.slices(plan.prepare_source(plan_source, unique=False), fragments)
    assert len(items) == 4
    for _, rows in items:
        sent = pickle.loads(pickle.dumps(rows))
        assert sent.data.num_rows == 50 and sent.indices is None
        assert sent.table(plan).to_pylist() == rows.table(plan).to_pylist()
