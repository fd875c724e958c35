"""Hive-style partitions in SQL: the design document's country_page_view examples, static, partial
static and dynamic inserts, INSERT OVERWRITE modes, SHOW/DROP/RENAME/DESCRIBE PARTITION, partition
evolution statements, and the errors that commit nothing. Run for real on Spark."""

from __future__ import annotations

import datetime
import re
from typing import Any

import pytest

from tablestore.errors import NoSuchPartitionError, PartitionAlreadyExistsError, ValidationError
from tablestore.sql.session import SqlSession
from tests.sql.conftest import rows

pytestmark = pytest.mark.spark

PAGE_VIEWS = "CREATE TABLE country_page_view (user STRING, cnt INT, date STRING, country STRING) " \
             "PARTITIONED BY (date, country)"


def partitions(session: SqlSession, table: str = "country_page_view") -> list[str]:
    return [r[0] for r in rows(session, f"SHOW PARTITIONS {table}")]


def table_of(session: SqlSession, name: str) -> Any:
    return session.manager.catalog().load_table(("db", name))


def views(session: SqlSession) -> list[list[Any]]:
    return rows(session, "SELECT `user`, cnt, `date`, country FROM country_page_view ORDER BY `user`")


# -- the design document's examples ------------------------------------------------------------


def test_static_insert_creates_the_partition_and_show_partitions_lists_it(session: SqlSession) -> None:
    session.execute(PAGE_VIEWS)
    result = session.execute("INSERT INTO country_page_view PARTITION (date='2019-08-30', country='china') "
                             "VALUES ('alice', 3), ('bob', 5)")
    assert result[0].affected == 2
    assert partitions(session) == ["date=2019-08-30/country=china"]
    assert views(session) == [["alice", 3, "2019-08-30", "china"], ["bob", 5, "2019-08-30", "china"]]
    files = table_of(session, "country_page_view").inspect.files()
    assert files.column("partition").to_pylist() == [{"date": "2019-08-30", "country": "china"}]


def test_dynamic_insert_creates_a_partition_per_value(session: SqlSession) -> None:
    session.execute(PAGE_VIEWS)
    session.execute("""INSERT INTO country_page_view SELECT * FROM VALUES
        ('alice', 1, '2019-08-30', 'china'), ('bob', 2, '2019-08-30', 'us'), ('carol', 3, '2019-08-31', 'us')""")
    assert partitions(session) == ["date=2019-08-30/country=china", "date=2019-08-30/country=us",
                                   "date=2019-08-31/country=us"]
    assert rows(session, "SHOW PARTITIONS country_page_view PARTITION (country='us')") == [
        ["date=2019-08-30/country=us"], ["date=2019-08-31/country=us"]]


def test_partial_static_insert_takes_the_dynamic_partition_column_last(session: SqlSession) -> None:
    session.execute(PAGE_VIEWS)
    session.execute("""INSERT INTO country_page_view PARTITION (date='2019-08-30', country)
        SELECT * FROM VALUES ('alice', 1, 'china'), ('bob', 2, 'us') AS v(u, c, country)""")
    assert partitions(session) == ["date=2019-08-30/country=china", "date=2019-08-30/country=us"]
    # Naming no dynamic column at all is the same: the missing partition column comes last.
    session.execute("INSERT INTO country_page_view PARTITION (date='2019-08-31') VALUES ('carol', 3, 'fr')")
    assert views(session)[-1] == ["carol", 3, "2019-08-31", "fr"]


def test_insert_overwrite_of_a_static_partition_leaves_the_others(session: SqlSession) -> None:
    session.execute(PAGE_VIEWS)
    session.execute("""INSERT INTO country_page_view VALUES
        ('alice', 1, '2019-08-30', 'china'), ('bob', 2, '2019-08-30', 'us'), ('carol', 3, '2019-08-31', 'china')""")
    session.execute("INSERT OVERWRITE TABLE country_page_view PARTITION (date='2019-08-30', country='china') "
                    "VALUES ('dave', 10)")
    assert views(session) == [["bob", 2, "2019-08-30", "us"], ["carol", 3, "2019-08-31", "china"],
                              ["dave", 10, "2019-08-30", "china"]]
    # A static overwrite with an empty query empties exactly that partition.
    session.execute("INSERT OVERWRITE country_page_view PARTITION (date='2019-08-30', country='china') "
                    "SELECT * FROM VALUES ('x', 1) AS v(a, b) WHERE false")
    assert partitions(session) == ["date=2019-08-30/country=us", "date=2019-08-31/country=china"]


def test_drop_partition(session: SqlSession) -> None:
    session.execute(PAGE_VIEWS)
    session.execute("""INSERT INTO country_page_view VALUES
        ('alice', 1, '2019-08-30', 'china'), ('bob', 2, '2019-08-30', 'us'), ('carol', 3, '2019-08-31', 'us')""")
    table = table_of(session, "country_page_view")
    result = session.execute("ALTER TABLE country_page_view DROP PARTITION (date='2019-08-30', country='china')")
    assert result[0].affected == 1
    assert partitions(session) == ["date=2019-08-30/country=us", "date=2019-08-31/country=us"]
    summary = table.refresh().current_snapshot().summary
    # The files align with the partition: removed from metadata, nothing rewritten.
    assert summary["operation"] == "delete" and summary["deleted-data-files"] == "1"
    assert "added-data-files" not in summary
    # Several partitions at once, in one commit; a partial spec drops every partition it matches.
    snapshots = len(table.snapshots())
    session.execute("ALTER TABLE country_page_view DROP PARTITION (country='us'), PARTITION (date='2019-08-31')")
    assert partitions(session) == [] and len(table.refresh().snapshots()) == snapshots + 1
    with pytest.raises(NoSuchPartitionError, match="IF EXISTS"):
        session.execute("ALTER TABLE country_page_view DROP PARTITION (date='2019-08-30', country='china')")
    session.execute("ALTER TABLE country_page_view DROP IF EXISTS PARTITION (date='2019-08-30', country='china')")
    assert len(table.refresh().snapshots()) == snapshots + 1


# -- INSERT OVERWRITE modes ----------------------------------------------------------------------


def test_overwrite_modes_dynamic_static_by_session_option_and_table_property(session: SqlSession) -> None:
    session.execute(PAGE_VIEWS)
    seed = """INSERT INTO country_page_view VALUES ('a', 1, 'd1', 'china'), ('b', 2, 'd1', 'us'),
              ('c', 3, 'd2', 'us')"""
    session.execute(seed)
    # Dynamic (the default): only the partitions the query writes are replaced.
    session.execute("INSERT OVERWRITE country_page_view PARTITION (date='d1', country) VALUES ('x', 9, 'us')")
    assert views(session) == [["a", 1, "d1", "china"], ["c", 3, "d2", "us"], ["x", 9, "d1", "us"]]
    session.execute("INSERT OVERWRITE country_page_view VALUES ('y', 8, 'd2', 'us')")
    assert views(session) == [["a", 1, "d1", "china"], ["x", 9, "d1", "us"], ["y", 8, "d2", "us"]]
    # Static by session option: everything the PARTITION clause selects, the whole table without one.
    assert rows(session, "SET tablestore.insert-overwrite.mode=static") == [["tablestore.insert-overwrite.mode",
                                                                            "static"]]
    session.execute("INSERT OVERWRITE country_page_view PARTITION (date='d1', country) VALUES ('z', 7, 'fr')")
    assert views(session) == [["y", 8, "d2", "us"], ["z", 7, "d1", "fr"]]
    session.execute("INSERT OVERWRITE country_page_view VALUES ('w', 6, 'd3', 'de')")
    assert views(session) == [["w", 6, "d3", "de"]]
    # Spark's own option is honoured too; the table property applies when the session sets nothing.
    session.execute("SET spark.sql.sources.partitionOverwriteMode=DYNAMIC")
    session.session_options.reset("tablestore.insert-overwrite.mode")
    session.execute("INSERT OVERWRITE country_page_view VALUES ('v', 5, 'd4', 'de')")
    assert len(views(session)) == 2
    session.session_options.reset()
    session.execute("ALTER TABLE country_page_view SET TBLPROPERTIES ('tablestore.insert-overwrite.mode'='static')")
    session.execute("INSERT OVERWRITE country_page_view VALUES ('u', 4, 'd5', 'de')")
    assert views(session) == [["u", 4, "d5", "de"]]
    with pytest.raises(ValidationError, match="'dynamic' or 'static'"):
        session.execute("SET tablestore.insert-overwrite.mode=sometimes")



def test_dynamic_insert_overwrite_after_rollover_replaces_exactly_the_rows_of_the_hour(session: SqlSession) -> None:
    # Issue 19's repro: the day-spec file's rows of the overwritten hour go, 11:00 stays.
    session.execute("CREATE TABLE hits (id BIGINT, ts TIMESTAMP) PARTITIONED BY (days(ts)) "
                    "TBLPROPERTIES ('write.delete.mode'='merge-on-read')")
    session.execute("INSERT INTO hits VALUES (1, TIMESTAMP'2026-01-01 10:00:00'), (2, TIMESTAMP'2026-01-01 10:59:59'), "
                    "(3, TIMESTAMP'2026-01-01 11:00:00')")
    session.execute("ALTER TABLE hits REPLACE PARTITION FIELD days(ts) WITH hours(ts)")
    before = len(table_of(session, "hits").snapshots())
    session.execute("INSERT OVERWRITE hits VALUES (9, TIMESTAMP'2026-01-01 10:30:00')")
    assert rows(session, "SELECT id, CAST(ts AS STRING) FROM hits ORDER BY id") == [
        [3, "2026-01-01 11:00:00"], [9, "2026-01-01 10:30:00"]]
    table = table_of(session, "hits")
    assert len(table.snapshots()) == before + 1
    summary = table.current_snapshot().summary
    assert (summary["replace-partitions"], summary["added-position-deletes"]) == ("true", "2")

# -- errors commit nothing -----------------------------------------------------------------------


@pytest.mark.parametrize(("sql", "message"), [
    ("INSERT INTO country_page_view PARTITION (cnt='3') VALUES ('a', 'd', 'c')",
     "PARTITION (cnt) names a column that is not a partition column of db.country_page_view; its partition "
     "columns are country, date"),
    ("INSERT OVERWRITE country_page_view PARTITION (date='2019-08-30') VALUES ('a', 1)",
     "partition value missing for country: give it in the PARTITION clause (country='...') or as the last "
     "column(s) of the query"),
    ("INSERT INTO country_page_view PARTITION (date='2019-08-30', country='china') "
     "VALUES ('a', 1, '2019-08-30', 'china')",
     "the static partition column(s) date, country take their values from the PARTITION clause, so remove them "
     "from the query"),
    ("INSERT INTO typed PARTITION (day='2019-13-45') VALUES (1)", "partition value '2019-13-45' for 'day' is not "
                                                                  "a valid date"),
    ("INSERT INTO typed PARTITION (day='2019-08-30', n='many') VALUES (1)",
     "partition value 'many' for 'n' is not a valid int"),
])
def test_partition_clause_errors_are_clear_and_commit_nothing(session: SqlSession, sql: str,
                                                              message: str | None) -> None:
    session.execute(PAGE_VIEWS)
    session.execute("CREATE TABLE typed (v INT, day DATE, n INT) PARTITIONED BY (day, n)")
    session.execute("INSERT INTO country_page_view VALUES ('a', 1, '2019-08-30', 'us'); "
                    "INSERT INTO typed VALUES (1, DATE'2019-08-30', 1)")
    before = {name: table_of(session, name).metadata_location for name in ("country_page_view", "typed")}
    with pytest.raises(ValidationError, match=re.escape(message) if message else None):
        session.execute(sql)
    assert {name: table_of(session, name).metadata_location for name in before} == before


# -- management and statistics -------------------------------------------------------------------


def test_rename_partition_moves_rows_in_one_commit(session: SqlSession) -> None:
    session.execute(PAGE_VIEWS)
    session.execute("""INSERT INTO country_page_view VALUES
        ('a', 1, '2019-08-30', 'china'), ('b', 2, '2019-08-30', 'us'), ('c', 3, '2019-08-31', 'us')""")
    table = table_of(session, "country_page_view")
    snapshots = len(table.snapshots())
    session.execute("ALTER TABLE country_page_view PARTITION (date='2019-08-30', country='us') "
                    "RENAME TO PARTITION (date='2019-09-01', country='us')")
    assert partitions(session) == ["date=2019-08-30/country=china", "date=2019-08-31/country=us",
                                   "date=2019-09-01/country=us"]
    assert views(session)[1] == ["b", 2, "2019-09-01", "us"]
    assert len(table.refresh().snapshots()) == snapshots + 1
    with pytest.raises(PartitionAlreadyExistsError):
        session.execute("ALTER TABLE country_page_view PARTITION (date='2019-08-31', country='us') "
                        "RENAME TO PARTITION (date='2019-09-01', country='us')")
    with pytest.raises(NoSuchPartitionError):
        session.execute("ALTER TABLE country_page_view PARTITION (date='1999-01-01', country='us') "
                        "RENAME TO PARTITION (date='1999-01-02', country='us')")
    assert len(table.refresh().snapshots()) == snapshots + 1


def test_describe_partition_and_the_partitions_metadata_table_agree(session: SqlSession) -> None:
    session.execute(PAGE_VIEWS)
    session.execute("INSERT INTO country_page_view VALUES ('a', 1, '2019-08-30', 'china'), ('b', 2, '2019-08-30', "
                    "'china'), ('c', 3, '2019-08-31', 'us')")
    session.execute("INSERT INTO country_page_view VALUES ('d', 4, '2019-08-30', 'china')")
    desc = {r[0]: r[1] for r in rows(session, "DESCRIBE country_page_view PARTITION (date='2019-08-30', "
                                              "country='china')")}
    meta = rows(session, """SELECT record_count, file_count, total_data_file_size_in_bytes, last_updated_at,
        last_updated_snapshot_id FROM country_page_view.partitions WHERE partition.country = 'china'""")
    assert desc["Partition Values"] == "[date=2019-08-30, country=china]"
    assert (int(desc["Record Count"]), int(desc["File Count"]), int(desc["Total Size"])) == tuple(meta[0][:3])
    assert (desc["Record Count"], desc["File Count"]) == ("3", "2")
    assert desc["Last Updated Snapshot"] == str(meta[0][4])
    last = datetime.datetime.fromisoformat(desc["Last Updated"])
    assert last == (meta[0][3] if meta[0][3].tzinfo else meta[0][3].replace(tzinfo=datetime.UTC))
    assert rows(session, "DESCRIBE country_page_view PARTITION (date='2019-08-30', country='china')")[0] == [
        "user", "string", ""]
    with pytest.raises(NoSuchPartitionError):
        session.execute("DESCRIBE country_page_view PARTITION (date='2019-08-30', country='fr')")


def test_partition_evolution_statements_and_drop_across_specs(session: SqlSession) -> None:
    session.execute("CREATE TABLE ev (id BIGINT, ts TIMESTAMP, country STRING) PARTITIONED BY (days(ts))")
    session.execute("INSERT INTO ev VALUES (1, TIMESTAMP'2024-05-01 10:00:00', 'de'), "
                    "(2, TIMESTAMP'2024-05-02 11:00:00', 'fr'), (6, TIMESTAMP'2024-05-01 15:00:00', 'fr')")
    session.execute("ALTER TABLE ev REPLACE PARTITION FIELD days(ts) WITH hours(ts)")
    session.execute("ALTER TABLE ev ADD PARTITION FIELD country AS c")
    session.execute("INSERT INTO ev VALUES (3, TIMESTAMP'2024-05-02 12:30:00', 'de'), "
                    "(4, TIMESTAMP'2024-05-03 01:00:00', 'fr')")
    assert partitions(session, "ev") == ["ts_day=2024-05-01", "ts_day=2024-05-02",
                                         "ts_hour=2024-05-02-12/c=de", "ts_hour=2024-05-03-01/c=fr"]
    table = table_of(session, "ev")
    assert [[(f.name, str(f.transform)) for f in s.fields] for s in table.metadata.partition_specs] == [
        [("ts_day", "day")], [("ts_hour", "hour")], [("ts_hour", "hour"), ("c", "identity")]]
    # A day names hourly files too (an hour lies in one day): both go from metadata alone.
    session.execute("ALTER TABLE ev DROP PARTITION (ts_day='2024-05-02')")
    summary = table.refresh().current_snapshot().summary
    assert summary["deleted-data-files"] == "2" and "added-data-files" not in summary
    assert rows(session, "SELECT id FROM ev ORDER BY id") == [[1], [4], [6]]
    # Old daily files do not know the country: that drop rewrites them, in the same one commit.
    session.execute("INSERT INTO ev VALUES (5, TIMESTAMP'2024-05-03 02:00:00', 'de')")
    session.execute("ALTER TABLE ev DROP PARTITION (c='de')")
    assert rows(session, "SELECT id FROM ev ORDER BY id") == [[4], [6]]
    summary = table.refresh().current_snapshot().summary
    assert (summary["operation"], summary["deleted-data-files"], summary["added-data-files"]) == ("overwrite", "2", "1")
    assert partitions(session, "ev") == ["ts_hour=2024-05-01-15/c=fr", "ts_hour=2024-05-03-01/c=fr"]
    session.execute("ALTER TABLE ev DROP PARTITION FIELD c")
    session.execute("ALTER TABLE ev DROP PARTITION FIELD hours(ts)")
    assert table.refresh().spec().fields == () and table.spec().spec_id == 3
    with pytest.raises(ValidationError, match="not partitioned by 'days\\(ts\\)'"):
        session.execute("ALTER TABLE ev DROP PARTITION FIELD days(ts)")
