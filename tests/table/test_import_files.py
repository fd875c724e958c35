"""Registering existing Parquet files: footers to DataFiles, Hive k=v partitions, MSCK REPAIR,
ADD PARTITION ... LOCATION, on local disk and S3, read back by tablestore and pyiceberg."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable

from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.errors import AlreadyExistsError, SchemaError, ValidationError
from tablestore.names import normalize_location
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.name_mapping import DEFAULT_NAME_MAPPING, NameMapping
from tablestore.spec.schemas.types import LongType, StringType
from tablestore.table import Table
from tablestore.table.ops.external import (
    PartitionToAdd,
    add_partitions,
    create_external_table,
    repair_table,
)
from tablestore.table.ops.import_files import import_files
from tests import oracle
from tests.conftest import Warehouse
from tests.values import oracle_rows

SCHEMA = pa.schema([("user", pa.string()), ("cnt", pa.int32()), ("date", pa.string()), ("country", pa.string())])
PARTITIONING = pa.schema([("date", pa.string()), ("country", pa.string())])


def page_views(users: list[str], dates: list[str | None], countries: list[str]) -> pa.Table:
    return pa.table({"user": users, "cnt": list(range(1, len(users) + 1)), "date": dates, "country": countries},
                    schema=SCHEMA)


@pytest.fixture
def catalog(warehouse: Warehouse, tmp_path: Path) -> Iterator[SqlCatalog]:
    cat = SqlCatalog(f"c{uuid.uuid4().hex[:8]}", uri=f"sqlite:///{tmp_path / 'catalog.db'}",
                     warehouse=warehouse.location, **warehouse.properties)
    cat.create_namespace("db")
    try:
        yield cat
    finally:
        cat.close()


class Tree:
    """A directory tree of Parquet files written by plain pyarrow, as another tool would."""

    def __init__(self, catalog: SqlCatalog, root: str) -> None:
        # The root as tables record it: a local directory as a file:/// URI.
        self.root = normalize_location(root)
        self.fs, self.path = catalog.io.filesystem_for(root)

    def write(self, data: pa.Table, partitioning: pa.Schema | None = PARTITIONING, prefix: str = "part") -> None:
        ds.write_dataset(
            data, self.path, format="parquet", filesystem=self.fs,
            partitioning=ds.partitioning(partitioning, flavor="hive") if partitioning is not None else None,
            basename_template=f"{prefix}-{uuid.uuid4().hex[:6]}-{{i}}.parquet",
            existing_data_behavior="overwrite_or_ignore",
        )

    def files(self) -> list[str]:
        infos = self.fs.get_file_info(pafs.FileSelector(self.path, recursive=True, allow_not_found=True))
        return sorted(f"{self.root}/{i.path[len(self.path.rstrip('/')) + 1:]}" for i in infos
                      if i.type == pafs.FileType.File)

    def parquet(self) -> list[str]:
        return [p for p in self.files() if p.endswith(".parquet")]

    def delete_dir(self, relative: str) -> None:
        self.fs.delete_dir(f"{self.path}/{relative}")

    def put(self, relative: str, data: bytes) -> None:
        if "/" in relative:
            self.fs.create_dir(f"{self.path}/{relative.rsplit('/', 1)[0]}", recursive=True)
        with self.fs.open_output_stream(f"{self.path}/{relative}") as f:
            f.write(data)


def rows(table: Table, **scan: Any) -> list[tuple[Any, ...]]:
    out = table.scan(**scan).to_arrow()
    return sorted(tuple(r.values()) for r in out.to_pylist())


def data_paths(table: Table) -> list[str]:
    return sorted(t.file.file_path for t in table.scan().plan_files())


def external(catalog: SqlCatalog, root: str, name: str = "db.views") -> Table:
    return create_external_table(catalog, name, SCHEMA, ["date", "country"], root)


def test_msck_repair_registers_a_pyarrow_hive_tree_without_copying(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    tree = Tree(catalog, f"{warehouse.location}/ext/views")
    tree.write(page_views(["a", "b", "c", "d"], ["2019-08-30", "2019-08-30", "2019-08-31", None],
                          ["china", "us a", "china", "x/y"]))
    table = external(catalog, tree.root)
    assert table.current_snapshot() is None  # CREATE registers nothing, as in Hive
    assert table.location == tree.root
    assert table.properties["EXTERNAL"] == "TRUE"
    mapping = NameMapping.from_json(table.properties[DEFAULT_NAME_MAPPING])
    assert [(f.field_id, f.names) for f in mapping.fields] == [
        (1, ("user",)), (2, ("cnt",)), (3, ("date",)), (4, ("country",))]
    before = tree.parquet()

    result = repair_table(table)

    assert (result.partitions_added, result.files_added, result.partitions_dropped) == (4, 4, 0)
    assert result.snapshot is not None and result.snapshot.summary["added-data-files"] == "4"
    assert data_paths(table) == before  # the original files, registered where they are
    assert tree.parquet() == before  # nothing copied or written next to them
    assert rows(table) == [("a", 1, "2019-08-30", "china"), ("b", 2, "2019-08-30", "us a"),
                           ("c", 3, "2019-08-31", "china"), ("d", 4, None, "x/y")]
    assert rows(table, filter="country = 'china' AND cnt > 1") == [("c", 3, "2019-08-31", "china")]
    assert len(table.scan(filter="date = '2019-08-30'").plan_files()) == 2  # pruned by partition
    pyiceberg = StaticTable.from_metadata(table.metadata_location, properties=warehouse.properties)
    theirs = pyiceberg.scan().to_arrow().to_pylist()
    assert sorted(tuple(r.values()) for r in theirs) == rows(table)


def test_second_repair_adds_only_the_new_partition(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    tree = Tree(catalog, f"{warehouse.location}/ext/views")
    tree.write(page_views(["a", "b"], ["2019-08-30", "2019-08-31"], ["china", "china"]))
    table = external(catalog, tree.root)
    repair_table(table)
    first = table.current_snapshot()
    tree.write(page_views(["z"], ["2019-09-01"], ["de"]), prefix="late")

    result = repair_table(table)

    assert (result.partitions_added, result.files_added) == (1, 1)
    snapshot = table.current_snapshot()
    assert snapshot is not None and first is not None and snapshot.parent_snapshot_id == first.snapshot_id
    assert snapshot.summary["added-data-files"] == "1"
    assert snapshot.summary["added-records"] == "1"
    assert snapshot.summary["total-data-files"] == "3"
    added = [e["data_file"]["file_path"] for e in table.inspect.entries().to_pylist()
             if e["status"] == 1 and e["snapshot_id"] == snapshot.snapshot_id]
    assert len(added) == 1 and "/date=2019-09-01/country=de/late-" in added[0]
    assert rows(table, filter="date = '2019-09-01'") == [("z", 1, "2019-09-01", "de")]
    assert len(rows(table)) == 3
    # Nothing new: no commit.
    again = repair_table(table)
    assert (again.files_added, again.snapshot) == (0, None)
    assert table.current_snapshot() == snapshot


def test_repair_drop_and_sync_remove_vanished_partitions_in_metadata_only(
    catalog: SqlCatalog, warehouse: Warehouse
) -> None:
    tree = Tree(catalog, f"{warehouse.location}/ext/views")
    tree.write(page_views(["a", "b", "c"], ["2019-08-30", "2019-08-31", "2019-09-01"], ["cn", "cn", "cn"]))
    table = external(catalog, tree.root)
    repair_table(table)
    tree.delete_dir("date=2019-08-31")
    tree.write(page_views(["n"], ["2019-09-02"], ["cn"]), prefix="new")

    dropped = repair_table(table, "drop")  # DROP does not add the new directory
    assert (dropped.partitions_dropped, dropped.files_removed, dropped.files_added) == (1, 1, 0)
    assert dropped.snapshot is not None and dropped.snapshot.summary["operation"] == "delete"
    assert [r[0] for r in rows(table)] == ["a", "c"]

    tree.delete_dir("date=2019-09-01")
    synced = repair_table(table, "SYNC")
    assert (synced.partitions_added, synced.partitions_dropped) == (1, 1)
    assert synced.snapshot is not None and synced.snapshot.summary["operation"] == "overwrite"
    assert [r[0] for r in rows(table)] == ["a", "n"]
    assert data_paths(table) == tree.parquet()


def test_add_partition_registers_files_from_another_location(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    tree = Tree(catalog, f"{warehouse.location}/ext/views")
    tree.write(page_views(["a"], ["2019-08-30"], ["cn"]))
    elsewhere = Tree(catalog, f"{warehouse.location}/landing/batch-7")
    # Files without the partition directories: the values come from the statement.
    elsewhere.write(pa.table({"user": ["x", "y"], "cnt": pa.array([7, 8], pa.int32())}), partitioning=None)
    table = external(catalog, tree.root)
    repair_table(table)

    result = add_partitions(table, [PartitionToAdd({"date": "2020-01-01", "country": "fr"}, elsewhere.root)])

    assert (result.partitions_added, result.files_added) == (1, 1)
    assert data_paths(table)[-1].startswith(elsewhere.root + "/")
    assert rows(table, filter="country = 'fr'") == [("x", 7, "2020-01-01", "fr"), ("y", 8, "2020-01-01", "fr")]
    with pytest.raises(AlreadyExistsError, match="already exists"):
        add_partitions(table, [PartitionToAdd({"date": "2020-01-01", "country": "fr"}, elsewhere.root)])
    skipped = add_partitions(table, [PartitionToAdd({"date": "2020-01-01", "country": "fr"})], if_not_exists=True)
    assert skipped.snapshot is None
    # A later MSCK DROP keeps files registered from other locations while they exist.
    assert repair_table(table, "sync").snapshot is None
    elsewhere.delete_dir("")
    assert repair_table(table, "drop").partitions_dropped == 1
    assert [r[0] for r in rows(table)] == ["a"]


def test_add_partition_without_location_uses_the_partition_directory(catalog: SqlCatalog,
                                                                      warehouse: Warehouse) -> None:
    tree = Tree(catalog, f"{warehouse.location}/ext/views")
    tree.write(page_views(["a", "b"], ["2019-08-30", "2019-08-31"], ["cn", "us a"]))
    table = external(catalog, tree.root)
    result = add_partitions(table, [PartitionToAdd({"DATE": "2019-08-31", "country": "us a"})])
    assert result.files_added == 1
    assert rows(table) == [("b", 2, "2019-08-31", "us a")]
    with pytest.raises(ValidationError, match="no data files under .*date=2019-09-09"):
        add_partitions(table, [PartitionToAdd({"date": "2019-09-09", "country": "cn"})])


def test_import_files_reads_metrics_from_the_footer(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    tree = Tree(catalog, f"{warehouse.location}/ext/metrics")
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("day", pa.date32())])
    data = pa.table({"id": [5, None, 9, 7], "name": ["b", "a", None, "c" * 20],
                     "day": [datetime.date(2024, 1, 2)] * 4}, schema=schema)
    tree.write(data, partitioning=pa.schema([("day", pa.date32())]))
    table = create_external_table(catalog, "db.m", schema, ["day"], tree.root)
    [path] = tree.parquet()

    snapshot = import_files(table, [path])

    assert snapshot is not None and snapshot.summary["operation"] == "append"
    [task] = table.scan().plan_files()
    f = task.file
    assert f.file_path == path
    assert f.record_count == 4
    assert f.partition == (conversions.from_python(table.schema().find_type("day"), "2024-01-02"),)
    local_path = tree.path + path[len(tree.root):]
    assert f.file_size_in_bytes == tree.fs.get_file_info(local_path).size
    footer = pq.ParquetFile(tree.fs.open_input_file(local_path)).metadata
    assert f.split_offsets == [footer.row_group(0).column(0).dictionary_page_offset]
    assert f.value_counts == {1: 4, 2: 4}
    assert f.null_value_counts == {1: 1, 2: 1}
    assert conversions.from_bytes(LongType(), f.lower_bounds[1]) == 5  # type: ignore[index]
    assert conversions.from_bytes(LongType(), f.upper_bounds[1]) == 9  # type: ignore[index]
    assert conversions.from_bytes(StringType(), f.lower_bounds[2]) == "a"  # type: ignore[index]
    assert conversions.from_bytes(StringType(), f.upper_bounds[2]) == "c" * 15 + "d"  # type: ignore[index]
    assert 3 not in (f.value_counts or {})  # the partition column is not in the file
    assert rows(table, filter="id > 6") == [(7, "c" * 20, datetime.date(2024, 1, 2)),
                                            (9, None, datetime.date(2024, 1, 2))]
    with pytest.raises(ValidationError, match="already registered"):
        import_files(table, [path])


def test_files_without_ids_are_read_through_the_name_mapping_nested_fields_too(
    catalog: SqlCatalog, warehouse: Warehouse
) -> None:
    tree = Tree(catalog, f"{warehouse.location}/ext/nested")
    schema = pa.schema([("ID", pa.int64()), ("st", pa.struct([("x", pa.int64()), ("y", pa.string())])),
                        ("lst", pa.list_(pa.int64())), ("mp", pa.map_(pa.string(), pa.float64())),
                        ("p", pa.int32())])
    data = pa.table({"ID": [1, 2], "st": [{"x": 1, "y": "a"}, None], "lst": [[1, 2], None],
                     "mp": [[("k", 1.5)], []], "p": [1, 2]}, schema=schema)
    tree.write(data, partitioning=pa.schema([("p", pa.int32())]))
    table_schema = pa.schema([("id", pa.int64()), *list(schema)[1:]])  # Hive lower-cases names
    table = create_external_table(catalog, "db.nested", table_schema, ["p"], tree.root)
    repair_table(table)
    expected = [(1, {"x": 1, "y": "a"}, [1, 2], [("k", 1.5)], 1), (2, None, None, [], 2)]
    assert sorted((tuple(r.values()) for r in table.scan().to_arrow().to_pylist()), key=lambda r: r[0]) == expected
    assert [r["id"] for r in table.scan(filter="st.x = 1").to_arrow().to_pylist()] == [1]
    files = {tuple(t.file.partition): t.file for t in table.scan().plan_files()}
    st_x = table.schema().find_field("st.x").field_id
    assert conversions.from_bytes(LongType(), files[(1,)].lower_bounds[st_x]) == 1  # type: ignore[index]


def test_errors_name_the_problem_and_commit_nothing(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    tree = Tree(catalog, f"{warehouse.location}/ext/bad")
    tree.write(page_views(["a"], ["2019-08-30"], ["cn"]))
    table = external(catalog, tree.root)
    repair_table(table)
    snapshot = table.current_snapshot()

    tree.put("date=2019-09-01/country=cn/notes.txt", b"not parquet")
    with pytest.raises(ValidationError, match=r"notes.txt: .*not a Parquet file|notes.txt: it is not a Parquet"):
        repair_table(table)
    tree.delete_dir("date=2019-09-01")
    tree.put("date=2019-09-01/country=cn/_SUCCESS", b"")  # hidden files are skipped
    tree.put("date=2019-09-01/country=cn/.part.crc", b"x")
    assert repair_table(table).snapshot is None

    managed = catalog.create_table("db.managed", schema=SCHEMA, partition_by=["date", "country"])
    with pytest.raises(ValidationError, match="external tables only"):
        repair_table(managed)

    typed = create_external_table(catalog, "db.typed", pa.schema([("user", pa.string()), ("d", pa.date32())]),
                                  ["d"], f"{warehouse.location}/ext/typed")
    typed_tree = Tree(catalog, typed.location)
    typed_tree.write(pa.table({"user": ["u"], "d": ["not-a-date"]}), partitioning=pa.schema([("d", pa.string())]))
    with pytest.raises(ValidationError, match=r"partition value d='not-a-date' is not a valid date"):
        repair_table(typed)
    assert typed.refresh().current_snapshot() is None

    odd = Tree(catalog, f"{warehouse.location}/ext/odd")
    odd.write(pa.table({"user": ["u"], "cnt": ["seven"]}), partitioning=None)
    with pytest.raises(ValidationError, match="no directory for partition column.*date=<value>/country=<value>/"):
        repair_table(external(catalog, odd.root, "db.odd"))
    odd.put("extra/x.parquet", b"")
    with pytest.raises(ValidationError, match="directory 'extra' is not a partition directory"):
        repair_table(catalog.load_table("db.odd"))
    odd.delete_dir("extra")
    catalog.drop_table("db.odd", purge=True)
    flat = create_external_table(catalog, "db.flat", SCHEMA, [], odd.root)
    with pytest.raises(ValidationError, match="column 'cnt' is string in the file but int in the table"):
        repair_table(flat)
    with pytest.raises(ValidationError, match="is not partitioned"):
        add_partitions(flat, [PartitionToAdd({"date": "x"})])
    with pytest.raises(ValidationError, match="'day' is not a partition column"):
        add_partitions(table, [PartitionToAdd({"day": "x", "country": "cn"})])
    with pytest.raises(ValidationError, match="unknown repair mode"):
        repair_table(table, "fix")
    assert table.refresh().current_snapshot() == snapshot
    assert catalog.load_table("db.flat").current_snapshot() is None


def test_unpartitioned_external_table_registers_files_at_the_root(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    tree = Tree(catalog, f"{warehouse.location}/ext/flat")
    tree.write(pa.table({"user": ["a", "b"], "cnt": pa.array([1, 2], pa.int32())}), partitioning=None)
    table = create_external_table(catalog, "db.flat", SCHEMA.remove(3).remove(2), [], tree.root)
    result = repair_table(table)
    assert (result.files_added, result.partitions_added) == (1, 1)
    assert rows(table) == [("a", 1), ("b", 2)]


def test_inserted_rows_land_in_the_hive_tree_and_purge_keeps_external_data(
    catalog: SqlCatalog, warehouse: Warehouse
) -> None:
    tree = Tree(catalog, f"{warehouse.location}/ext/views")
    tree.write(page_views(["a"], ["2019-08-30"], ["cn"]))
    table = external(catalog, tree.root)
    repair_table(table)
    table.append(page_views(["w"], ["2019-08-30"], ["cn"]))
    assert all(p.startswith(f"{tree.root}/date=2019-08-30/country=cn/") for p in data_paths(table))
    assert repair_table(table, "sync").snapshot is None  # the written file is known already
    with pytest.raises(AlreadyExistsError, match="already holds an Iceberg table"):
        external(catalog, tree.root, "db.again")

    catalog.drop_table("db.views", purge=True)

    remaining = tree.files()
    assert len(tree.parquet()) == 2
    assert not [p for p in remaining if "/metadata/" in p]


def test_name_mapping_json_round_trips() -> None:
    text = ('[{"field-id": 1, "names": ["id", "record_id"]}, {"names": ["gone"]}, '
            '{"field-id": 3, "names": ["loc"], "fields": [{"field-id": 4, "names": ["lat"]}]}]')
    mapping = NameMapping.from_json(text)
    assert mapping.to_json() == text
    assert mapping.find("RECORD_ID").field_id == 1  # type: ignore[union-attr]
    assert mapping.find("gone").field_id is None  # type: ignore[union-attr]
    assert mapping.find("loc").child("lat").field_id == 4  # type: ignore[union-attr]
    with pytest.raises(SchemaError, match="not valid JSON"):
        NameMapping.from_json("[{")


def test_the_tables_name_mapping_property_decides_which_file_column_is_which(
    catalog: SqlCatalog, warehouse: Warehouse
) -> None:
    tree = Tree(catalog, f"{warehouse.location}/ext/aliases")
    # Another tool called the columns differently; the mapping gives each field its old names too.
    tree.write(pa.table({"usr": ["a", "b"], "n": pa.array([1, 2], pa.int32()), "date": ["d1", "d1"],
                         "country": ["cn", "cn"]}))
    table = external(catalog, tree.root)
    mapping = ('[{"field-id": 1, "names": ["user", "usr"]}, {"field-id": 2, "names": ["cnt", "n"]}, '
               '{"field-id": 3, "names": ["date"]}, {"field-id": 4, "names": ["country"]}]')
    table.update_properties({DEFAULT_NAME_MAPPING: mapping})
    repair_table(table)
    assert rows(table) == [("a", 1, "d1", "cn"), ("b", 2, "d1", "cn")]
    assert rows(table, filter="cnt = 2") == [("b", 2, "d1", "cn")]
    [task] = table.scan().plan_files()
    assert task.file.value_counts == {1: 2, 2: 2}  # metrics found the columns by their mapped names
    theirs = StaticTable.from_metadata(table.metadata_location, properties=warehouse.properties).scan().to_arrow()
    assert sorted(tuple(r.values()) for r in theirs.to_pylist()) == rows(table)


def write_spark_style_tree(tree: Tree) -> None:
    """Files as Spark writes them by default: INT96 timestamps, a _SUCCESS marker, nested columns."""
    data = pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "ts": pa.array([datetime.datetime(2024, 1, 1, 10, 0, 0, 123456), None,
                        datetime.datetime(2024, 1, 2, 23, 59, 59)], pa.timestamp("us")),
        "st": pa.array([{"x": 1, "y": "a"}, None, {"x": 3, "y": None}],
                       pa.struct([("x", pa.int32()), ("y", pa.string())])),
    })
    for day, rows_of_day in (("2024-01-01", [0, 1]), ("2024-01-02", [2])):
        tree.fs.create_dir(f"{tree.path}/day={day}", recursive=True)
        with tree.fs.open_output_stream(f"{tree.path}/day={day}/part-00000-c000.snappy.parquet") as f:
            pq.write_table(data.take(rows_of_day), f, use_deprecated_int96_timestamps=True, compression="snappy")
    tree.put("_SUCCESS", b"")


SPARK_STYLE_SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")),
                                ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])), ("day", pa.date32())])


def test_spark_style_files_with_int96_timestamps_register_and_read(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    tree = Tree(catalog, f"{warehouse.location}/ext/spark")
    write_spark_style_tree(tree)
    table = create_external_table(catalog, "db.spark", SPARK_STYLE_SCHEMA, ["day"], tree.root)
    assert repair_table(table).files_added == 2
    ours = table.scan(filter="day = '2024-01-01'").to_arrow().to_pylist()
    assert sorted((r["id"], r["ts"], r["st"]) for r in ours) == [
        (1, datetime.datetime(2024, 1, 1, 10, 0, 0, 123456, tzinfo=datetime.UTC), {"x": 1, "y": "a"}),
        (2, None, None)]
    theirs = StaticTable.from_metadata(table.metadata_location, properties=warehouse.properties).scan().to_arrow()
    assert oracle_rows(theirs) == oracle_rows(table.scan().to_arrow())


@pytest.mark.oracle
@pytest.mark.parametrize("warehouse", ["local"], indirect=True)
def test_imported_files_read_identically_in_java(catalog: SqlCatalog, warehouse: Warehouse) -> None:
    tree = Tree(catalog, f"{warehouse.location}/ext/spark")
    write_spark_style_tree(tree)
    table = create_external_table(catalog, "db.spark", SPARK_STYLE_SCHEMA, ["day"], tree.root)
    repair_table(table)
    batch = oracle.OracleBatch()
    everything = batch.read(table.metadata_location)
    nested = batch.read(table.metadata_location, columns=["id", "st.x"], where="day = DATE '2024-01-02'")
    results = batch.run()
    assert oracle.check(results[everything])["rows"] == oracle_rows(table.scan().to_arrow())
    assert oracle.check(results[nested])["rows"] == [[3, 3]]
