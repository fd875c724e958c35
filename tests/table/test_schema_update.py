"""The schema-change builder on a real table: one commit, retries, promotions read by field id,
conversions by rewrite (no file of the old type stays live), cast modes and the limits. On SQLite;
the commits the service applies (the schema updates, an equal schema's id reused) also over REST,
and the races on every catalog of the matrix."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tablestore
from tablestore.errors import CommitConflictError, SchemaEvolutionError
from tablestore.spec.manifests.manifest import DataFile
from tablestore.table.update.schema_rewrite import physical_type
from tests.conftest import ON_THE_CATALOG_MATRIX, OVER_REST

SCHEMA = pa.schema([
    pa.field("id", pa.int32(), nullable=False),
    ("f", pa.float32()),
    ("price", pa.decimal128(9, 2)),
    ("d", pa.date32()),
    ("s", pa.string()),
    ("p", pa.string()),
])


def rows(ids: range, p: str = "x") -> pa.Table:
    return pa.table({
        "id": pa.array(list(ids), pa.int32()),
        "f": pa.array([i + 0.5 for i in ids], pa.float32()),
        "price": pa.array([decimal.Decimal(i) / 4 for i in ids], pa.decimal128(9, 2)),
        "d": pa.array([datetime.date(2024, 1, 1 + i % 28) for i in ids], pa.date32()),
        "s": [str(i) for i in ids],
        "p": [p] * len(ids),
    }, schema=SCHEMA)


@pytest.fixture
def db(catalog: tablestore.Catalog) -> tablestore.Catalog:
    """The test's catalog (``tests/table/conftest.py``) with the namespace ``db``."""
    catalog.create_namespace("db")
    return catalog


@pytest.fixture
def table(db: tablestore.Catalog) -> tablestore.Table:
    t = db.create_table("db.t", schema=SCHEMA, partition_by=["p"])
    t.append(rows(range(0, 10), "x"))
    t.append(rows(range(10, 20), "y"))
    return t


def live_files(table: tablestore.Table) -> list[str]:
    return table.inspect.data_files().column("file_path").to_pylist()


@OVER_REST
def test_several_changes_land_in_one_commit(table: tablestore.Table) -> None:
    log_before = len(table.metadata.metadata_log)
    snapshot = table.current_snapshot()
    with table.update_schema() as u:
        u.add_column("c", "string", doc="new")
        u.rename_column("s", "label")
        u.widen("id", "bigint")
        u.drop_column("f")
        u.move_after("c", "id")
    assert len(table.metadata.metadata_log) == log_before + 1
    assert table.current_snapshot() == snapshot
    assert table.schema().schema_id == 1
    assert table.schema().column_names == ["id", "c", "price", "d", "label", "p"]
    assert table.schema().find_field("c").field_id == 7
    result = table.scan(filter="id >= 18").to_arrow()
    assert result.schema.field("id").type == pa.int64()
    assert sorted(result.column("label").to_pylist()) == ["18", "19"]
    assert result.column("c").to_pylist() == [None, None]


def test_exception_in_the_block_commits_nothing(table: tablestore.Table) -> None:
    before = table.metadata_location
    with pytest.raises(RuntimeError), table.update_schema() as u:
        u.add_column("c", "string")
        raise RuntimeError("changed my mind")
    assert table.refresh().metadata_location == before


@OVER_REST
def test_a_schema_equal_to_an_earlier_one_reuses_its_id(table: tablestore.Table) -> None:
    with table.update_schema() as u:
        u.add_column("c", "string")
    with table.update_schema() as u:
        u.move_first("p")
    with table.update_schema() as u:
        u.move_after("p", "s")
    assert table.schema().schema_id == 1
    assert [s.schema_id for s in table.metadata.schemas] == [0, 1, 2]


@ON_THE_CATALOG_MATRIX
def test_retries_over_a_concurrent_append_but_not_a_concurrent_schema_change(
    db: tablestore.Catalog, table: tablestore.Table
) -> None:
    other = db.load_table("db.t")
    other.append(rows(range(20, 25)))
    with table.update_schema() as u:  # table is stale: the commit is retried on the new state
        u.add_column("c", "int")
    assert table.scan().to_arrow().num_rows == 25
    assert table.schema().column_names[-1] == "c"
    stale = db.load_table("db.t")
    with table.update_schema() as u:
        u.add_column("e", "int")
    before = table.metadata_location
    with pytest.raises(CommitConflictError, match="schema was changed"), stale.update_schema() as u:
        u.add_column("g", "int")
    assert table.refresh().metadata_location == before


def test_promotions_are_metadata_only_and_old_files_read_promoted(table: tablestore.Table) -> None:
    files = live_files(table)
    with table.update_schema() as u:
        u.widen("id", "bigint").widen("f", "double").widen("price", "decimal(18,2)")
    assert live_files(table) == files
    table.append(pa.table({"id": pa.array([2**40], pa.int64()), "f": [0.25],
                           "price": pa.array([decimal.Decimal("1.50")], pa.decimal128(18, 2)),
                           "p": ["z"]}))
    result = table.scan(filter="id >= 19").to_arrow().sort_by("id")
    assert result.schema.field("id").type == pa.int64()
    assert result.schema.field("f").type == pa.float64()
    assert result.schema.field("price").type == pa.decimal128(18, 2)
    assert result.column("id").to_pylist() == [19, 2**40]
    assert result.column("f").to_pylist() == [19.5, 0.25]
    assert result.column("price").to_pylist() == [decimal.Decimal("4.75"), decimal.Decimal("1.50")]
    # bounds written as 4-byte ints and floats still prune correctly
    assert table.scan(filter="f > 19.0").to_arrow().column("f").to_pylist() == [19.5]


def test_conversions_rewrite_only_files_of_the_old_type_in_one_commit(table: tablestore.Table) -> None:
    with table.update_schema() as u:
        u.add_column("n", "int")
    table.append(rows(range(20, 22)).append_column("n", pa.array([7, 8], pa.int32())))
    before = {f: physical_type(table.io, _df(table, f), 7) for f in live_files(table)}
    assert sorted(str(t) for t in before.values()) == ["None", "None", "int32"]
    snapshots = len(table.snapshots())
    with table.update_schema() as u:
        u.widen("id", "double")
        u.widen("d", "timestamp")
        u.widen("f", "string")
    assert len(table.snapshots()) == snapshots + 1
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.schema_id == table.schema().schema_id
    assert snapshot.summary["tablestore.schema-change"] == "id: int -> double, d: date -> timestamp_ntz, f: float -> string"
    for path in live_files(table):
        df = _df(table, path)
        assert physical_type(table.io, df, 1) == pa.float64()
        assert physical_type(table.io, df, 4) == pa.timestamp("us")
        assert physical_type(table.io, df, 2) == pa.string()
    result = table.scan().to_arrow().sort_by("id")
    assert result.column("id").to_pylist()[:2] == [0.0, 1.0]
    assert result.column("d").to_pylist()[1] == datetime.datetime(2024, 1, 2)
    assert result.column("f").to_pylist()[:2] == ["0.5", "1.5"]
    assert result.column("n").to_pylist()[-2:] == [7, 8]
    assert result.num_rows == 22


def _df(table: tablestore.Table, path: str) -> DataFile:
    from tablestore.spec.expressions.expression_tree import AlwaysTrue
    from tablestore.table.read.scan import plan_files

    tasks = plan_files(table.io, table.metadata, table.current_snapshot(), table.schema(), AlwaysTrue(), table.engine)
    return next(t.file for t in tasks if t.file.file_path == path)


def test_files_without_the_column_or_already_of_the_new_type_are_kept(table: tablestore.Table) -> None:
    with table.update_schema() as u:
        u.add_column("n", "int")
    table.append(pa.table({"id": pa.array([100], pa.int32()), "n": pa.array([5], pa.int32()), "p": ["z"]}))
    before = live_files(table)
    without_n = [f for f in before if physical_type(table.io, _df(table, f), 7) is None]
    assert len(without_n) == 2
    with table.update_schema() as u:
        u.widen("n", "bigint")  # a promotion: old files stay
    table.append(pa.table({"id": pa.array([101], pa.int32()), "n": pa.array([6], pa.int64()), "p": ["z"]}))
    with table.update_schema() as u:
        u.widen("n", "string")
    after = live_files(table)
    assert len(after) == 4
    assert set(without_n) <= set(after)
    assert all(physical_type(table.io, _df(table, f), 7) in (None, pa.string()) for f in after)
    assert sorted(v for v in table.scan().to_arrow().column("n").to_pylist() if v is not None) == ["5", "6"]


def test_strict_cast_mode_fails_on_a_bad_value_and_commits_nothing(
    table: tablestore.Table, tmp_path: Path
) -> None:
    table.update_properties({"tablestore.schema.cast-mode": "strict"})
    table.append(pa.table({"id": pa.array([99], pa.int32()), "s": ["not a number"], "p": ["z"]}))
    before = table.metadata_location
    data_dir = tmp_path / "wh" / "db" / "t" / "data"
    files_before = sorted(str(p) for p in data_dir.rglob("*.parquet"))
    with pytest.raises(SchemaEvolutionError, match="'not a number' does not convert"), table.update_schema() as u:
        u.widen("s", "int")
    assert table.refresh().metadata_location == before
    assert sorted(str(p) for p in data_dir.rglob("*.parquet")) == files_before
    table.delete("id = 99")
    with table.update_schema() as u:
        u.widen("s", "int")
    assert sorted(table.scan().to_arrow().column("s").to_pylist())[:3] == [0, 1, 2]


def test_null_on_error_cast_mode_turns_bad_values_into_null(table: tablestore.Table) -> None:
    table.update_properties({"tablestore.schema.cast-mode": "null-on-error"})
    table.append(pa.table({"id": pa.array([99], pa.int32()), "s": ["oops"], "p": ["z"]}))
    with table.update_schema() as u:
        u.widen("s", "bigint")
    result = table.scan(filter="id >= 18").to_arrow().sort_by("id")
    assert result.column("s").to_pylist() == [18, 19, None]
    assert result.schema.field("s").type == pa.int64()


def test_implicit_mode_refuses_explicit_casts(table: tablestore.Table) -> None:
    before = table.metadata_location
    with pytest.raises(SchemaEvolutionError, match="cast-mode"), table.update_schema() as u:
        u.widen("s", "int")
    assert table.refresh().metadata_location == before


def test_partition_source_can_be_renamed_and_still_partitions(table: tablestore.Table) -> None:
    with table.update_schema() as u:
        u.rename_column("p", "part")
    table.append(pa.table({"id": pa.array([50], pa.int32()), "part": ["w"]}))
    assert table.scan(filter="part = 'w'").to_arrow().column("id").to_pylist() == [50]
    assert sorted(set(table.scan().to_arrow().column("part").to_pylist())) == ["w", "x", "y"]


def test_written_files_carry_the_new_field_ids(table: tablestore.Table) -> None:
    with table.update_schema() as u:
        u.drop_column("s")
        u.add_column("s", "string")
    table.append(pa.table({"id": pa.array([77], pa.int32()), "s": ["new"], "p": ["q"]}))
    newest = next(f for f in live_files(table) if "p=q" in f)
    ids = {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in pq.read_schema(newest.removeprefix("file://"))}
    assert ids["s"] == 7
    assert table.scan(filter="id = 5").to_arrow().column("s").to_pylist() == [None]


@pytest.mark.oracle
def test_oracle_and_pyiceberg_read_evolved_tables_like_we_do(db: tablestore.Catalog) -> None:
    from pyiceberg.table import StaticTable

    from tests import oracle
    from tests.values import oracle_rows

    converted = db.create_table("db.converted", schema=SCHEMA, partition_by=["p"])
    converted.append(rows(range(0, 6), "x"))
    converted.append(rows(range(6, 9), "y"))
    with converted.update_schema() as u:
        u.widen("id", "double").widen("d", "timestamptz").widen("price", "string")
    assert all(physical_type(converted.io, _df(converted, f), 1) == pa.float64() for f in live_files(converted))
    converted.append(pa.table({"id": [9.5], "d": pa.array([None], pa.timestamp("us", tz="UTC")), "p": ["z"]}))

    renamed = db.create_table("db.renamed", schema=SCHEMA)
    renamed.append(rows(range(0, 3)))
    with renamed.update_schema() as u:
        u.rename_column("s", "label").widen("id", "bigint").widen("f", "double").drop_column("price")
    with renamed.update_schema() as u:
        u.add_column("s", "string", after="id")
    renamed.append(pa.table({"id": pa.array([3], pa.int64()), "s": ["new"], "label": ["l3"], "p": ["x"]}))
    assert renamed.scan(filter="id < 1").to_arrow().select(["s", "label"]).to_pylist() == [{"s": None, "label": "0"}]

    batch = oracle.OracleBatch()
    jobs = {t.name: batch.read(t.metadata_location) for t in (converted, renamed)}
    results = batch.run()
    for t in (converted, renamed):
        ours = oracle_rows(t.scan().to_arrow())
        theirs = oracle.check(results[jobs[t.name]])
        assert [c["name"] for c in theirs["columns"]] == t.schema().column_names
        assert theirs["rows"] == ours, t.name
        assert oracle_rows(StaticTable.from_metadata(t.metadata_location).scan().to_arrow()) == ours, t.name


@pytest.fixture(scope="module")
def spark() -> object:
    from tablestore.spark import spark_session

    return spark_session(None, app_name="tablestore-schema-update-tests")


@pytest.mark.spark
def test_conversion_rewrite_runs_on_the_spark_engine(table: tablestore.Table, spark: object) -> None:
    from tablestore.spark import SparkEngine

    on_spark = table.with_engine(SparkEngine(spark))  # type: ignore[arg-type]
    with on_spark.update_schema() as u:
        u.widen("id", "double")
    assert all(physical_type(on_spark.io, _df(on_spark, f), 1) == pa.float64() for f in live_files(on_spark))
    assert sorted(on_spark.scan().to_arrow().column("id").to_pylist()) == [float(i) for i in range(20)]


@ON_THE_CATALOG_MATRIX
def test_a_conversion_started_before_a_concurrent_append_converts_that_file_too(
    db: tablestore.Catalog, table: tablestore.Table
) -> None:
    update = table.update_schema().widen("id", "double")
    db.load_table("db.t").append(rows(range(20, 23), "z"))  # an int file, after the plan began
    update.commit()
    table.refresh()
    assert all(physical_type(table.io, _df(table, f), 1) == pa.float64() for f in live_files(table))
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [float(i) for i in range(23)]


def test_explicit_commit_inside_the_block_commits_once(table: tablestore.Table) -> None:
    log_before = len(table.metadata.metadata_log)
    with table.update_schema() as u:
        u.add_column("c", "int")
        u.commit()
    assert len(table.metadata.metadata_log) == log_before + 1


def test_timestamps_convert_to_strings_as_spark_prints_them(db: tablestore.Catalog) -> None:
    t = db.create_table("db.ts", schema=pa.schema([("ts", pa.timestamp("us", tz="UTC")),
                                                              ("b", pa.bool_())]))
    t.append(pa.table({"ts": pa.array([datetime.datetime(2024, 1, 2, 3, 4, 5),
                                        datetime.datetime(2024, 1, 2, 3, 4, 5, 120000), None],
                                       pa.timestamp("us", tz="UTC")), "b": [True, False, None]}))
    with t.update_schema() as u:
        u.widen("ts", "string").widen("b", "string")
    result = t.scan().to_arrow()
    assert result.column("ts").to_pylist() == ["2024-01-02 03:04:05", "2024-01-02 03:04:05.12", None]
    assert result.column("b").to_pylist() == ["true", "false", None]
