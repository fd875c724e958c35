"""External Hive-style tables in SQL: CREATE EXTERNAL TABLE over a pyarrow-written k=v tree,
MSCK REPAIR TABLE [ADD|DROP|SYNC PARTITIONS], ALTER TABLE ADD PARTITION ... LOCATION, on local
disk and S3, read back through Spark SQL, the table API, the Java oracle and pyiceberg."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pytest
from pyiceberg.table import StaticTable

from tablestore.errors import ParseError, SchemaError, TableAlreadyExistsError, ValidationError
from tablestore.names import normalize_location
from tablestore.sql.session import SqlSession
from tablestore.table import Table
from tests import oracle
from tests.conftest import Warehouse
from tests.lakehouse_config import SqliteCatalog, sqlite_catalog
from tests.sql.conftest import rows
from tests.values import oracle_rows

pytestmark = pytest.mark.spark

PARTITIONING = pa.schema([("date", pa.string()), ("country", pa.string())])
CREATE = """CREATE EXTERNAL TABLE country_page_view (user STRING, cnt INT)
            PARTITIONED BY (date STRING, country STRING) STORED AS PARQUET LOCATION '{root}'"""


@pytest.fixture
def catalogs(tmp_path: Path, warehouse: Warehouse) -> list[SqliteCatalog]:
    return [sqlite_catalog(tmp_path, "lake", default_database="db", warehouse=warehouse.location,
                           s3_properties=warehouse.properties)]


class Tree:
    """Parquet files under ``root`` written by plain pyarrow with Hive partitioning."""

    def __init__(self, session: SqlSession, root: str) -> None:
        # The root as tables record it: a local directory as a file:/// URI.
        self.root = normalize_location(root)
        self.fs, self.path = session.manager.catalog().io.filesystem_for(root)

    def write(self, users: list[str], counts: list[int], dates: list[str], countries: list[str],
              partitioning: pa.Schema | None = PARTITIONING) -> None:
        data = pa.table({"user": users, "cnt": pa.array(counts, pa.int32()), "date": dates, "country": countries})
        if partitioning is None:
            data = data.select(["user", "cnt"])
        ds.write_dataset(data, self.path, format="parquet", filesystem=self.fs,
                         partitioning=ds.partitioning(partitioning, flavor="hive") if partitioning else None,
                         basename_template=f"part-{uuid.uuid4().hex[:8]}-{{i}}.parquet",
                         existing_data_behavior="overwrite_or_ignore")

    def parquet(self) -> list[str]:
        infos = self.fs.get_file_info(pafs.FileSelector(self.path, recursive=True, allow_not_found=True))
        base = self.path.rstrip("/")
        return sorted(f"{self.root}/{i.path[len(base) + 1:]}" for i in infos
                      if i.type == pafs.FileType.File and i.path.endswith(".parquet"))

    def put(self, relative: str, data: bytes) -> None:
        if "/" in relative:
            self.fs.create_dir(f"{self.path}/{relative.rsplit('/', 1)[0]}", recursive=True)
        with self.fs.open_output_stream(f"{self.path}/{relative}") as f:
            f.write(data)

    def delete_dir(self, relative: str) -> None:
        self.fs.delete_dir(f"{self.path}/{relative}")


def table_of(session: SqlSession, name: str = "country_page_view") -> Table:
    return session.manager.catalog().load_table(("db", name))


def data_paths(table: Table) -> list[str]:
    return sorted(t.file.file_path for t in table.scan().plan_files())


def test_msck_repair_makes_a_pyarrow_hive_tree_queryable_and_adds_only_new_partitions(
    session: SqlSession, warehouse: Warehouse
) -> None:
    tree = Tree(session, f"{warehouse.location}/external/country_page_view")
    tree.write(["ann", "bo", "cy", "di"], [3, 5, 7, 9], ["2019-08-30", "2019-08-30", "2019-08-31", "2019-08-31"],
               ["china", "usa", "china", "usa"])
    session.execute(CREATE.format(root=tree.root))
    assert rows(session, "SELECT count(*) FROM country_page_view") == [[0]]  # CREATE registers nothing
    originals = tree.parquet()

    result = session.execute("MSCK REPAIR TABLE country_page_view")[0]

    assert result.columns == ["partitions_added", "partitions_dropped", "files_added", "files_removed"]
    assert result.rows == [[4, 0, 4, 0]]
    table = table_of(session)
    assert data_paths(table) == originals  # registered in place
    assert tree.parquet() == originals  # no file copied or written
    assert rows(session, "SELECT user, cnt, date, country FROM country_page_view ORDER BY user") == [
        ["ann", 3, "2019-08-30", "china"], ["bo", 5, "2019-08-30", "usa"],
        ["cy", 7, "2019-08-31", "china"], ["di", 9, "2019-08-31", "usa"]]
    assert rows(session, "SELECT sum(cnt) FROM country_page_view WHERE country = 'china'") == [[10]]
    assert table.scan(filter="date = '2019-08-31'", columns=["user"]).to_arrow().column("user").to_pylist() \
        in (["cy", "di"], ["di", "cy"])

    tree.write(["ed"], [11], ["2019-09-01"], ["france"])
    second = session.execute("MSCK REPAIR TABLE country_page_view ADD PARTITIONS")[0]

    assert second.rows == [[1, 0, 1, 0]]
    snapshot = table_of(session).current_snapshot()
    assert snapshot is not None
    assert snapshot.summary["added-data-files"] == "1"
    assert snapshot.summary["total-data-files"] == "5"
    assert rows(session, "SELECT user, date FROM country_page_view WHERE country = 'france'") == [
        ["ed", "2019-09-01"]]
    assert rows(session, "SELECT count(*) FROM country_page_view") == [[5]]
    desc = {r[0]: r[1] for r in rows(session, "DESCRIBE EXTENDED country_page_view")}
    assert desc["Type"] == "EXTERNAL" and desc["Location"] == tree.root
    assert [r[0] for r in rows(session, "DESCRIBE country_page_view")][:4] == ["user", "cnt", "date", "country"]


@pytest.mark.parametrize("warehouse", ["local"], indirect=True)  # S3: the main test above
def test_msck_drop_and_sync_partitions(session: SqlSession, warehouse: Warehouse) -> None:
    tree = Tree(session, f"{warehouse.location}/external/v")
    tree.write(["a", "b", "c"], [1, 2, 3], ["2019-08-30", "2019-08-31", "2019-09-01"], ["cn", "cn", "cn"])
    session.execute(CREATE.format(root=tree.root))
    session.execute("MSCK REPAIR TABLE country_page_view")
    tree.delete_dir("date=2019-08-31")

    assert rows(session, "MSCK REPAIR TABLE country_page_view DROP PARTITIONS") == [[0, 1, 0, 1]]
    assert rows(session, "SELECT user FROM country_page_view ORDER BY user") == [["a"], ["c"]]

    tree.delete_dir("date=2019-09-01")
    tree.write(["n"], [4], ["2019-09-02"], ["cn"])
    assert rows(session, "MSCK REPAIR TABLE country_page_view SYNC PARTITIONS") == [[1, 1, 1, 1]]
    assert rows(session, "SELECT user FROM country_page_view ORDER BY user") == [["a"], ["n"]]
    assert rows(session, "ALTER TABLE country_page_view RECOVER PARTITIONS") == [[0, 0, 0, 0]]


@pytest.mark.parametrize("warehouse", ["local"], indirect=True)  # S3: the main test above
def test_add_partition_location_registers_existing_files(session: SqlSession, warehouse: Warehouse) -> None:
    tree = Tree(session, f"{warehouse.location}/external/v")
    tree.write(["a"], [1], ["2019-08-30"], ["cn"])
    landing = Tree(session, f"{warehouse.location}/landing/2019-10-01")
    landing.write(["x", "y"], [7, 8], ["", ""], ["", ""], partitioning=None)
    other = Tree(session, f"{warehouse.location}/landing/other")
    other.write(["z"], [9], [""], [""], partitioning=None)
    session.execute(CREATE.format(root=tree.root))

    result = session.execute(f"""ALTER TABLE country_page_view ADD
        PARTITION (date='2019-10-01', country='fr') LOCATION '{landing.root}'
        PARTITION (date = '2019-10-02', country = 'de') LOCATION '{other.root}'
        PARTITION (date='2019-08-30', country='cn')""")[0]

    assert result.rows == [[3, 0, 3, 0]]
    assert rows(session, "SELECT user, cnt, date, country FROM country_page_view ORDER BY user") == [
        ["a", 1, "2019-08-30", "cn"], ["x", 7, "2019-10-01", "fr"], ["y", 8, "2019-10-01", "fr"],
        ["z", 9, "2019-10-02", "de"]]
    assert [p for p in data_paths(table_of(session)) if not p.startswith(tree.root)] == \
        sorted(landing.parquet() + other.parquet())
    with pytest.raises(Exception, match="already exists"):
        session.execute(f"ALTER TABLE country_page_view ADD PARTITION (date='2019-10-01', country='fr') "
                        f"LOCATION '{landing.root}'")
    assert rows(session, "ALTER TABLE country_page_view ADD IF NOT EXISTS PARTITION (date='2019-10-01', "
                         "country='fr')") == [[0, 0, 0, 0]]


@pytest.mark.parametrize("warehouse", ["local"], indirect=True)  # S3: the main test above
def test_errors_are_clear_and_commit_nothing(session: SqlSession, warehouse: Warehouse) -> None:
    tree = Tree(session, f"{warehouse.location}/external/v")
    tree.write(["a"], [1], ["2019-08-30"], ["cn"])
    session.execute(CREATE.format(root=tree.root))
    session.execute("MSCK REPAIR TABLE country_page_view")
    before = table_of(session).current_snapshot()

    tree.put("date=2019-09-01/country=cn/readme.txt", b"hello")
    with pytest.raises(ValidationError, match="readme.txt: it is not a Parquet file"):
        session.execute("MSCK REPAIR TABLE country_page_view")
    tree.delete_dir("date=2019-09-01")

    session.execute(f"""CREATE EXTERNAL TABLE typed (user STRING, cnt INT) PARTITIONED BY (date DATE, country STRING)
                        STORED AS PARQUET LOCATION '{warehouse.location}/external/typed'""")
    Tree(session, f"{warehouse.location}/external/typed").write(["u"], [1], ["30.08.2019"], ["cn"])
    with pytest.raises(ValidationError, match=r"partition value date='30.08.2019' is not a valid date"):
        session.execute("MSCK REPAIR TABLE typed")
    assert table_of(session, "typed").current_snapshot() is None
    with pytest.raises(ValidationError, match="partition value date='yesterday' is not a valid date"):
        session.execute("ALTER TABLE typed ADD PARTITION (date='yesterday', country='cn')")
    with pytest.raises(ValidationError, match="'day' is not a partition column"):
        session.execute("ALTER TABLE typed ADD PARTITION (day='2019-08-30', country='cn')")

    session.execute("CREATE TABLE managed (user STRING, date STRING) PARTITIONED BY (date)")
    with pytest.raises(ValidationError, match="external tables only"):
        session.execute("MSCK REPAIR TABLE managed")
    with pytest.raises(ValidationError, match="external tables only"):
        session.execute(f"ALTER TABLE managed ADD PARTITION (date='x') LOCATION '{tree.root}'")
    with pytest.raises(ValidationError, match="needs LOCATION"):
        session.execute("CREATE EXTERNAL TABLE nowhere (a INT) PARTITIONED BY (p STRING) STORED AS PARQUET")
    with pytest.raises(ValidationError, match="STORED AS ORC is not supported"):
        session.execute(f"CREATE EXTERNAL TABLE orc (a INT) STORED AS ORC LOCATION '{tree.root}/x'")
    with pytest.raises(SchemaError, match="'date' is also in the column list"):
        session.execute(f"CREATE EXTERNAL TABLE dup (a INT, date STRING) PARTITIONED BY (date STRING) "
                        f"LOCATION '{tree.root}/y'")
    with pytest.raises(ParseError, match="partitioned Hive style, by columns"):
        session.execute(f"CREATE EXTERNAL TABLE tr (a INT, ts TIMESTAMP) PARTITIONED BY (days(ts)) "
                        f"LOCATION '{tree.root}/z'")
    with pytest.raises(TableAlreadyExistsError, match="IF NOT EXISTS"):
        session.execute(CREATE.format(root=tree.root))
    session.execute(CREATE.replace("EXTERNAL TABLE", "EXTERNAL TABLE IF NOT EXISTS").format(root=tree.root))
    with pytest.raises(ParseError, match="expected ADD, DROP or SYNC PARTITIONS"):
        session.execute("MSCK REPAIR TABLE country_page_view FIX")
    assert table_of(session).current_snapshot() == before


@pytest.mark.parametrize("warehouse", ["local"], indirect=True)  # S3: the main test above
def test_insert_into_external_table_writes_into_its_tree(session: SqlSession, warehouse: Warehouse) -> None:
    tree = Tree(session, f"{warehouse.location}/external/v")
    tree.write(["a"], [1], ["2019-08-30"], ["cn"])
    session.execute(CREATE.format(root=tree.root))
    session.execute("MSCK REPAIR TABLE country_page_view")
    session.execute("INSERT INTO country_page_view VALUES ('w', 2, '2019-08-30', 'cn'), ('v', 3, '2019-09-09', 'jp')")
    assert len(tree.parquet()) == 3
    assert all(p.startswith(f"{tree.root}/date=") for p in tree.parquet())
    assert rows(session, "MSCK REPAIR TABLE country_page_view SYNC PARTITIONS") == [[0, 0, 0, 0]]
    session.execute("DROP TABLE country_page_view PURGE")
    assert len(tree.parquet()) == 3  # the data of an external table stays


@pytest.mark.oracle
@pytest.mark.parametrize("warehouse", ["local"], indirect=True)
def test_repaired_table_reads_identically_in_java_and_pyiceberg(session: SqlSession, warehouse: Warehouse) -> None:
    tree = Tree(session, f"{warehouse.location}/external/v")
    tree.write(["ann", "bo", "cy"], [3, 5, 7], ["2019-08-30", "2019-08-30", "2019-08-31"], ["china", "us a", "x/y"])
    session.execute(CREATE.format(root=tree.root) + ";" + "MSCK REPAIR TABLE country_page_view")
    tree.write(["di"], [9], ["2019-09-01"], ["de"])
    session.execute("MSCK REPAIR TABLE country_page_view")
    table = table_of(session)
    ours = oracle_rows(table.scan().to_arrow())
    assert len(ours) == 4

    batch = oracle.OracleBatch()
    read = batch.read(table.metadata_location)
    filtered = batch.read(table.metadata_location, where="country = 'us a'", columns=["user", "date"])
    results = batch.run()

    assert oracle.check(results[read])["rows"] == ours
    assert oracle.check(results[filtered])["rows"] == [["bo", "2019-08-30"]]
    theirs = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
    assert oracle_rows(theirs) == ours
