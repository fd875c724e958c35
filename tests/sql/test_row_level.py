"""DELETE, UPDATE and MERGE statements, run for real (Spark for subqueries), in both modes."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tablestore.errors import QueryError, SchemaError, UnsupportedError, ValidationError
from tablestore.spec.schemas.schema import Schema
from tablestore.spec.schemas.types import LongType, NestedField, StringType
from tablestore.sql.session import SqlSession

pytestmark = pytest.mark.spark

MODES = ["copy-on-write", "merge-on-read"]


def _props(mode: str) -> str:
    return ", ".join(f"'write.{op}.mode'='{mode}'" for op in ("delete", "update", "merge"))


def _setup(session: SqlSession, mode: str) -> None:
    session.execute(f"""
        CREATE TABLE user (id BIGINT, name STRING, region STRING) PARTITIONED BY (region)
          TBLPROPERTIES ({_props(mode)});
        INSERT INTO user SELECT id, concat('n', id), IF(id % 2 = 0, 'us', 'eu') FROM range(1, 21);
        CREATE TABLE employee (id BIGINT);
        INSERT INTO employee SELECT id FROM range(1, 16);
    """)


def _users(session: SqlSession) -> list[list[Any]]:
    return session.execute("SELECT id, name, region FROM user ORDER BY id")[-1].rows


def _summary(session: SqlSession) -> dict[str, str]:
    catalog, identifier = session.manager.resolve_table(("user",))
    snapshot = catalog.load_table(identifier).current_snapshot()
    assert snapshot is not None
    return dict(snapshot.summary)


def test_design_statements_in_both_modes_give_equal_rows_and_counts(session: SqlSession) -> None:
    outcomes = []
    for mode in MODES:
        session.execute("DROP TABLE IF EXISTS user; DROP TABLE IF EXISTS employee")
        _setup(session, mode)
        counts = [session.execute_one(sql).affected for sql in (
            "DELETE FROM user WHERE id = -1",
            "DELETE FROM user WHERE id > (SELECT count(*) FROM employee)",
            "UPDATE user SET name = 'u1' WHERE id > 10",
            "UPDATE user SET name = 'u1' WHERE id > (SELECT count(*) FROM employee)",
        )]
        outcomes.append((counts, _users(session)))
    assert outcomes[0] == outcomes[1]
    counts, rows = outcomes[0]
    assert counts == [0, 5, 5, 0]
    assert [r[0] for r in rows] == list(range(1, 16))
    assert [r[1] for r in rows] == [f"n{i}" for i in range(1, 11)] + ["u1"] * 5


def test_merge_on_read_delete_with_a_subquery_writes_position_deletes(session: SqlSession) -> None:
    _setup(session, "merge-on-read")
    result = session.execute_one("DELETE FROM user WHERE id IN (SELECT id * 3 FROM employee) AND region = 'eu'")
    assert result.affected == 3  # 3, 9, 15
    summary = _summary(session)
    assert summary["added-position-deletes"] == "3" and "added-data-files" not in summary
    assert [r[0] for r in _users(session)] == [i for i in range(1, 21) if i not in (3, 9, 15)]


@pytest.mark.parametrize("mode", MODES)
def test_deleting_a_whole_partition_in_sql_is_pushed_down(session: SqlSession, mode: str) -> None:
    _setup(session, mode)
    assert session.execute_one("DELETE FROM user WHERE region = 'us'").affected == 10
    summary = _summary(session)
    assert summary["operation"] == "delete" and summary["deleted-data-files"] == "1"
    assert "added-data-files" not in summary and "added-delete-files" not in summary


def test_update_with_column_references_correlated_exists_and_scalar_subqueries(session: SqlSession) -> None:
    _setup(session, "merge-on-read")
    result = session.execute_one(
        "UPDATE user u SET name = concat(upper(name), '-', (SELECT max(id) FROM employee)) "
        "WHERE EXISTS (SELECT 1 FROM employee e WHERE e.id = u.id * 2)"
    )
    assert result.affected == 7
    rows = {r[0]: r[1] for r in _users(session)}
    assert rows[1] == "N1-15" and rows[7] == "N7-15" and rows[8] == "n8"


@pytest.mark.parametrize("mode", MODES)
def test_merge_statement_counts_and_rows(session: SqlSession, mode: str) -> None:
    _setup(session, mode)
    result = session.execute_one("""
        MERGE INTO user t USING (SELECT id, concat('m', id) AS name, 'apac' AS region FROM range(18, 24)) s
        ON t.id = s.id
        WHEN MATCHED AND s.id = 18 THEN DELETE
        WHEN MATCHED THEN UPDATE SET name = s.name
        WHEN NOT MATCHED AND s.id < 23 THEN INSERT *
    """)
    assert result.rows == [[5, 2, 1, 2]] and result.affected == 5
    rows = {r[0]: r for r in _users(session)}
    assert 18 not in rows and rows[19] == [19, "m19", "eu"] and rows[22] == [22, "m22", "apac"]
    assert 23 not in rows and len(rows) == 21


def test_bad_statements_give_clear_errors_and_commit_nothing(session: SqlSession) -> None:
    _setup(session, "merge-on-read")
    before = _summary(session)
    with pytest.raises(SchemaError, match="'id' is bigint"):
        session.execute_one("UPDATE user SET id = 'x' || name WHERE id = 1")
    with pytest.raises(SchemaError, match="unknown column 'nope'"):
        session.execute_one("UPDATE user SET nope = 1 WHERE id = 1")
    with pytest.raises(QueryError):
        session.execute_one("DELETE FROM user WHERE missing > (SELECT 1)")
    with pytest.raises(ValidationError, match="several rows of the source"):
        session.execute_one("MERGE INTO user t USING (SELECT 1L AS id UNION ALL SELECT 1L) s ON t.id = s.id "
                            "WHEN MATCHED THEN DELETE")
    assert _summary(session) == before


def test_updating_a_primary_key_column_is_rejected(session: SqlSession) -> None:
    catalog = session.manager.catalog()
    schema = Schema((NestedField(1, "id", LongType(), required=True), NestedField(2, "name", StringType())),
                    identifier_field_ids=(1,))
    table = catalog.create_table(("db", "pk"), schema=schema)
    table.append(pa.table({"id": pa.array([1], pa.int64()), "name": ["a"]},
                          schema=pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])))
    with pytest.raises(ValidationError, match="primary key"):
        session.execute_one("UPDATE pk SET id = id + 1")
    assert len(catalog.load_table(("db", "pk")).snapshots()) == 1


def test_row_level_statements_fail_in_a_streaming_session(session: SqlSession) -> None:
    _setup(session, "merge-on-read")
    session.runtime_mode = "streaming"
    for sql in ("DELETE FROM user WHERE id = 1", "UPDATE user SET name = 'x'"):
        with pytest.raises(UnsupportedError) as error:
            session.execute_one(sql)
        assert str(error.value) == "DELETE/UPDATE TABLE is not supported for streaming mode now"
    session.runtime_mode = "batch"
    assert session.execute_one("DELETE FROM user WHERE id = 1").affected == 1


def test_merge_builder_refuses_a_streaming_source(session: SqlSession, spark: Any) -> None:
    _setup(session, "merge-on-read")
    catalog, identifier = session.manager.resolve_table(("user",))
    stream = spark.readStream.format("rate").load()
    with pytest.raises(UnsupportedError, match="not supported for streaming mode now"):
        catalog.load_table(identifier).merge(stream, on="t.id = s.value")


def test_python_api_runs_its_file_work_on_the_spark_engine(session: SqlSession, spark: Any) -> None:
    from tablestore.spark import SparkEngine

    _setup(session, "merge-on-read")
    catalog, identifier = session.manager.resolve_table(("user",))
    table = catalog.load_table(identifier).with_engine(SparkEngine(spark))
    assert table.delete("id IN (1, 2, 3)") == 3
    assert table.update({"name": "upper(name)"}, "id > 18") == 2
    result = (table.merge(pa.table({"id": pa.array([4, 50], pa.int64()), "name": ["m", "new"], "region": ["us", "eu"]}),
                          on="t.id = s.id").when_matched_update({"name": "s.name"}).when_not_matched_insert_all()
              .execute())
    assert (result.updated, result.inserted) == (1, 1)
    rows = {r[0]: r[1] for r in _users(session)}
    assert 1 not in rows and rows[4] == "m" and rows[19] == "N19" and rows[50] == "new" and len(rows) == 18


@pytest.mark.parametrize("mode", MODES)
def test_upsert_with_update_set_star_and_insert_star_keeps_every_column(session: SqlSession, mode: str) -> None:
    # The target is read with its key only (UPDATE SET * and INSERT * take every value from the
    # source); copy-on-write still rewrites the files' other rows with all their columns.
    _setup(session, mode)
    result = session.execute_one("""
        MERGE INTO user t USING (SELECT id, concat('u', id) AS name, 'apac' AS region FROM range(19, 23)) s
        ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *
    """)
    assert result.rows == [[4, 2, 0, 2]]
    rows = {r[0]: r for r in _users(session)}
    assert rows[19] == [19, "u19", "apac"] and rows[22] == [22, "u22", "apac"]
    assert rows[17] == [17, "n17", "eu"] and rows[18] == [18, "n18", "us"] and len(rows) == 22


@pytest.mark.parametrize("mode", MODES)
def test_an_upsert_gives_the_rows_and_counts_of_the_general_merge(session: SqlSession, mode: str) -> None:
    # UPDATE SET * / INSERT * on key equalities runs as the table's merge; the same statement
    # with conditions that always hold takes the general path (a Spark join). Both must agree,
    # with a source whose names differ in case and order, whose key is INT (cast to BIGINT),
    # and which holds a NULL key (it matches nothing, so it is inserted).
    _setup(session, mode)
    session.execute(f"""
        CREATE TABLE user2 (id BIGINT, name STRING, region STRING) PARTITIONED BY (region)
          TBLPROPERTIES ({_props(mode)});
        INSERT INTO user2 SELECT * FROM user;
    """)
    source = ("(SELECT 'apac' AS REGION, CAST(id AS INT) AS Id, concat('u', id) AS NAME FROM range(18, 24) "
              "UNION ALL SELECT 'eu', CAST(NULL AS INT), 'no key')")
    upsert = session.execute_one(f"MERGE INTO user t USING {source} s ON t.id = s.id "
                                 "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    general = session.execute_one(f"MERGE INTO user2 t USING {source} s ON t.id = s.id "
                                  "WHEN MATCHED AND true THEN UPDATE SET * WHEN NOT MATCHED AND true THEN INSERT *")
    assert upsert.rows == general.rows == [[7, 3, 0, 4]]
    rows = session.execute("SELECT id, name, region FROM user ORDER BY id NULLS FIRST")[-1].rows
    assert rows == session.execute("SELECT id, name, region FROM user2 ORDER BY id NULLS FIRST")[-1].rows
    assert rows[0] == [None, "no key", "eu"] and rows[18] == [18, "u18", "apac"] and rows[17] == [17, "n17", "eu"]
    assert rows[-1] == [23, "u23", "apac"] and len(rows) == 24
    with pytest.raises(ValidationError, match="several rows of the source"):
        session.execute_one("MERGE INTO user t USING (SELECT 19L AS id, 'a' AS name, 'x' AS region UNION ALL "
                            "SELECT 19L, 'b', 'y') s ON t.id = s.id WHEN MATCHED THEN UPDATE SET *")
    assert len(session.execute("SELECT id FROM user")[-1].rows) == 24


def test_an_upsert_from_a_table_of_the_same_types_runs_no_spark_job(session: SqlSession, spark: Any) -> None:
    # Such a source is read by the table core at its current snapshot (deletes applied); one of
    # other types (INT keys here) is read and cast by Spark. Both give the general path's rows.
    _setup(session, "merge-on-read")
    session.execute("""
        CREATE TABLE user2 (id BIGINT, name STRING, region STRING) PARTITIONED BY (region);
        INSERT INTO user2 SELECT * FROM user;
        CREATE TABLE staging (REGION STRING, ID BIGINT, Name STRING);
        INSERT INTO staging SELECT 'apac', id, concat('s', id) FROM range(18, 24);
        DELETE FROM staging WHERE ID = 23;
        CREATE TABLE staging_int (id INT, name STRING, region STRING);
        INSERT INTO staging_int SELECT CAST(id AS INT), concat('i', id), 'eu' FROM range(1, 3);
    """)
    tracker = spark.sparkContext.statusTracker()
    jobs = set(tracker.getJobIdsForGroup())
    upsert = session.execute_one("MERGE INTO user t USING staging s ON t.id = s.id "
                                 "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    assert set(tracker.getJobIdsForGroup()) == jobs
    general = session.execute_one("MERGE INTO user2 t USING staging s ON t.id = s.id "
                                  "WHEN MATCHED AND true THEN UPDATE SET * WHEN NOT MATCHED AND true THEN INSERT *")
    assert upsert.rows == general.rows == [[5, 3, 0, 2]]
    session.execute_one("MERGE INTO user t USING staging_int s ON t.id = s.id WHEN MATCHED THEN UPDATE SET *")
    assert set(tracker.getJobIdsForGroup()) != jobs
    session.execute_one("MERGE INTO user2 t USING staging_int s ON t.id = s.id WHEN MATCHED AND true THEN UPDATE SET *")
    rows = _users(session)
    assert rows == session.execute("SELECT id, name, region FROM user2 ORDER BY id")[-1].rows
    assert rows[0] == [1, "i1", "eu"] and rows[2] == [3, "n3", "eu"] and rows[17] == [18, "s18", "apac"]
    assert rows[-1] == [22, "s22", "apac"] and len(rows) == 22


@pytest.mark.parametrize("mode", MODES)
def test_an_upsert_of_a_table_into_itself_and_of_null_structs(session: SqlSession, mode: str) -> None:
    # A file whose every row is updated is dropped in merge-on-read and its rows written anew,
    # whole. A NULL struct, a named_struct of literals beside one, and a NULL literal for a
    # struct column are written by both MERGE paths.
    session.execute(f"""
        CREATE TABLE nested (id BIGINT, name STRING, st STRUCT<a: INT, b: STRING>) TBLPROPERTIES ({_props(mode)});
        INSERT INTO nested SELECT id, concat('n', id), named_struct('a', CAST(id AS INT), 'b', 'x') FROM range(1, 6);
    """)
    everything = [[i, f"n{i}", {"a": i, "b": "x"}] for i in range(1, 6)]

    def table_rows() -> list[list[Any]]:
        catalog, identifier = session.manager.resolve_table(("nested",))
        data = catalog.load_table(identifier).scan().to_arrow().sort_by("id").to_pylist()
        return [[r["id"], r["name"], r["st"]] for r in data]

    assert session.execute_one("MERGE INTO nested t USING nested s ON t.id = s.id "
                               "WHEN MATCHED THEN UPDATE SET *").rows == [[5, 5, 0, 0]]
    assert table_rows() == everything
    for when in ("", "AND true "):  # the upsert path, then the general one
        session.execute_one(
            "MERGE INTO nested t USING (SELECT 3L AS id, 'z' AS name, named_struct('a', 9, 'b', 'y') AS st "
            "UNION ALL SELECT 7L, 'w', NULL) s ON t.id = s.id "
            f"WHEN MATCHED {when}THEN UPDATE SET * WHEN NOT MATCHED {when}THEN INSERT *")
        session.execute_one("MERGE INTO nested t USING (SELECT 4L AS id, 'q' AS name, NULL AS st) s "
                            f"ON t.id = s.id WHEN MATCHED {when}THEN UPDATE SET *")
        assert table_rows() == [everything[0], everything[1], [3, "z", {"a": 9, "b": "y"}], [4, "q", None],
                                everything[4], [7, "w", None]]
        session.execute_one("DELETE FROM nested WHERE id = 7")
    session.execute_one("UPDATE nested SET st = NULL WHERE id = 1")
    assert table_rows()[0] == [1, "n1", None]


def test_merge_using_a_table_reads_it_with_sparks_parquet_reader_by_field_id(session: SqlSession, spark: Any) -> None:
    # A USING table is read whole, so Spark's own Parquet reader reads it when its files allow;
    # its columns still match by field id: `nm` was renamed to `name` after the rows were written.
    from tablestore.sql.plan.planner import parse_query
    from tablestore.sql.run.row_level import source_table_name

    _setup(session, "merge-on-read")
    session.execute("""
        CREATE TABLE staging (id BIGINT, nm STRING, region STRING);
        INSERT INTO staging SELECT id, concat('s', id), 'apac' FROM range(19, 23);
        ALTER TABLE staging RENAME COLUMN nm TO name;
    """)
    planner = session.planner()
    planner.native_reads.add(("cat", "db", "staging"))
    plan = spark.sql(planner.rewrite("SELECT * FROM staging"))._jdf.queryExecution().executedPlan().toString()
    assert "FileScan parquet" in plan and "BatchEvalPython" not in plan and "PythonDataSource" not in plan
    result = session.execute_one("MERGE INTO user t USING staging s ON t.id = s.id "
                                 "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    assert result.rows == [[4, 2, 0, 2]]
    rows = {r[0]: r for r in _users(session)}
    assert rows[19] == [19, "s19", "apac"] and rows[22] == [22, "s22", "apac"] and rows[18] == [18, "n18", "us"]
    # A USING table with position deletes is read by the data source, which applies them.
    session.execute_one("DELETE FROM staging WHERE id IN (SELECT 21L)")
    session.execute_one("MERGE INTO user t USING staging s ON t.id = s.id "
                        "WHEN MATCHED THEN UPDATE SET name = concat('again-', s.name)")
    rows = {r[0]: r for r in _users(session)}
    assert rows[21] == [21, "s21", "apac"] and rows[22] == [22, "again-s22", "apac"]
    def source(sql: str) -> Any:  # a MERGE's source as the parser keeps it
        return parse_query(f"SELECT * FROM {sql}").args["from_"].this

    assert source_table_name(source("db.staging")) == ("db", "staging")
    assert source_table_name(source("(SELECT * FROM staging)")) is None
    assert source_table_name(source("staging VERSION AS OF 1")) is None


def test_merge_reads_only_the_target_columns_its_query_names() -> None:
    from tablestore.sql.plan.planner import parse_query
    from tablestore.sql.run.row_level import _target_columns as target_columns

    def _target_columns(sql: str, alias: str, columns: list[str]) -> list[str]:
        return target_columns(parse_query(sql), alias, columns)

    columns = ["id", "name", "region", "addr"]
    upsert = ("SELECT t._file, CASE WHEN t._file IS NOT NULL THEN s.name END AS name FROM target AS t "
              "RIGHT OUTER JOIN (SELECT * FROM staging) AS s ON t.id = s.id")
    assert _target_columns(upsert, "t", columns) == ["id"]
    # Unqualified names may be the target's; a struct path counts by its head; t.* reads all.
    assert _target_columns("SELECT t._file, t.addr.city FROM target AS t JOIN s ON region = s.x", "t",
                           columns) == ["region", "addr"]
    assert _target_columns("SELECT t._file FROM target AS t JOIN s ON t.id = s.id "
                           "AND EXISTS (SELECT * FROM o WHERE o.a = t.name)", "t", columns) == ["id", "name"]
    assert _target_columns("SELECT t.* FROM target AS t JOIN s ON t.id = s.id", "t", columns) == columns


def test_row_positions_source_reads_only_the_columns_option(session: SqlSession, spark: Any) -> None:
    from tablestore.spark.tasks.row_source import SOURCE_NAME, native_row_positions, register

    _setup(session, "merge-on-read")
    register(spark)
    options = {"config": session.config.model_dump_json(), "columns": "id"}

    def source_rows() -> list[tuple[int, str, int]]:
        df = spark.read.format(SOURCE_NAME).options(**options).load("cat.db.user")
        assert df.columns == ["id", "_file", "_pos"]
        return sorted((r["id"], r["_file"], r["_pos"]) for r in df.filter("id <= 6").collect())

    # Without deletes Spark's Parquet reader gives the very rows of the source: the table's own
    # paths (not Spark's file: URIs) and each row's position.
    native = native_row_positions(spark, "cat.db.user", options)
    assert native is not None and native.columns == ["id", "_file", "_pos"]
    before = source_rows()
    assert sorted((r["id"], r["_file"], r["_pos"]) for r in native.filter("id <= 6").collect()) == before
    files = {f.file.file_path for f in session.manager.catalog().load_table(("db", "user")).scan().plan_files()}
    assert {path for _, path, _ in before} == files

    session.execute_one("DELETE FROM user WHERE id IN (SELECT 2L)")  # a position delete: positions skip it
    assert native_row_positions(spark, "cat.db.user", options) is None  # deletes: only the source applies them
    # Partition us holds the even ids in order (2, 4, 6, ...): 2 is deleted, 4 and 6 keep positions 1 and 2.
    assert [(i, p) for i, _, p in source_rows()] == [(1, 0), (3, 1), (4, 1), (5, 2), (6, 2)]


def test_merge_join_keys_are_the_target_source_equalities_of_on() -> None:
    from tablestore.sql.plan.planner import parse_query
    from tablestore.sql.run.row_level import _key_pairs as key_pairs

    def _key_pairs(on: str, target: str, source: str) -> list[tuple[str, str]]:
        tree = parse_query(f"SELECT 1 WHERE {on}").args["where"].this
        return [(t.sql(dialect="spark"), s.sql(dialect="spark")) for t, s in key_pairs(tree, target, source)]

    assert _key_pairs("t.id = s.id AND s.region = t.region AND t.name <> s.name", "t", "s") == [
        ("t.id", "s.id"), ("t.region", "s.region")]
    # An equality under OR, or with a constant, is no join key: no semi-join on it.
    assert _key_pairs("t.id = s.id OR t.id = 1", "t", "s") == []
    assert _key_pairs("t.id = 1 AND s.x = t.x", "T", "S") == [("t.x", "s.x")]


def test_merge_with_a_nondeterministic_source_keeps_its_matches(session: SqlSession) -> None:
    # rand() in the source: the semi-join on the keys is skipped (its two reads of the source
    # could disagree); every matched row is still updated once, never inserted again.
    _setup(session, "merge-on-read")
    result = session.execute_one("""
        MERGE INTO user t USING (SELECT id, IF(rand() < 2, 'r', 'x') AS name, 'eu' AS region FROM range(15, 25)) s
        ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *
    """)
    assert result.rows == [[10, 6, 0, 4]]
    rows = {r[0]: r for r in _users(session)}
    assert len(rows) == 24 and rows[15] == [15, "r", "eu"] and rows[24] == [24, "r", "eu"]


def test_delete_update_and_merge_are_each_parsed_once_by_sqlglot(session: SqlSession,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Every sqlglot parse (parse_one, parse, maybe_parse, the statement's own parse from its tokens)
    # goes through Parser.parse: a hook that counts its calls and still parses counts the parses
    # of a statement from its text to its commit. The clauses are carried as trees down to the
    # plain filter and the Spark query, so the statement's own parse is the only one.
    from sqlglot.parser import Parser

    _setup(session, "merge-on-read")
    session.execute("CREATE TABLE staging (id BIGINT, name STRING, region STRING); "
                    "INSERT INTO staging SELECT id, concat('s', id), 'eu' FROM range(18, 23)")
    calls: list[str] = []
    parse = Parser.parse

    def counted(self: Parser, raw_tokens: list[Any], sql: str) -> Any:
        calls.append(sql)
        return parse(self, raw_tokens, sql)

    monkeypatch.setattr(Parser, "parse", counted)

    def parses(sql: str) -> tuple[int, int | None]:
        calls.clear()
        affected = session.execute_one(sql).affected
        return len(calls), affected

    # A plain filter: the table core deletes, with the WHERE's tree turned into its filter.
    assert parses("DELETE FROM user WHERE id = 1 OR region = 'nowhere'") == (1, 1)
    # A subquery: Spark runs the query built from the WHERE's tree.
    assert parses("DELETE FROM user u WHERE u.id IN (SELECT id * 4 FROM employee)") == (1, 5)
    assert parses("UPDATE user SET name = upper(name) WHERE id > 17") == (1, 2)
    assert parses("MERGE INTO user t USING (SELECT id, name, region FROM staging) s ON t.id = s.id "
                  "WHEN MATCHED AND s.id = 18 THEN DELETE WHEN MATCHED THEN UPDATE SET name = s.name "
                  "WHEN NOT MATCHED THEN INSERT *") == (1, 5)
    # The upsert from a small table of the same columns: the table core merges on the ON's tree.
    assert parses("MERGE INTO user t USING staging s ON t.id = s.id "
                  "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *") == (1, 5)
    monkeypatch.undo()
    assert _users(session) == [[i, f"n{i}", "us" if i % 2 == 0 else "eu"] for i in range(2, 18) if i not in (4, 8, 12, 16)] \
        + [[18, "s18", "eu"], [19, "s19", "eu"], [20, "s20", "eu"], [21, "s21", "eu"], [22, "s22", "eu"]]
