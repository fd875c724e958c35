"""The streaming writers: which one the input shape picks, files per partition, exact rows,
the fanout memory budget, and the data read back through a scan."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tablestore
from tablestore.errors import ValidationError
from tablestore.spec.manifests.manifest import DataFile
from tablestore.table import Table
from tablestore.table.write.conform import conform_to_schema
from tablestore.table.write.data_files import WriteContext
from tablestore.table.write.writers import (
    FANOUT_BUDGET_PROPERTY,
    FanoutWriter,
    PartitionedWriter,
    WriterKind,
    write_batches,
)

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("region", pa.string()),
    ("value", pa.float64()),
    ("note", pa.string()),
])


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[tablestore.Catalog]:
    cat = tablestore.load_catalog("w", type="sql", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    yield cat
    cat.close()


def make_table(catalog: tablestore.Catalog, partition_by: list[str] | None = None,
               properties: dict[str, str] | None = None) -> Table:
    return catalog.create_table("db.t", schema=SCHEMA, partition_by=partition_by or [], properties=properties or {})


def rows(ids: np.ndarray, regions: list[str]) -> pa.Table:
    """Rows with the given ids; row i is in region regions[i]."""
    rng = np.random.default_rng(int(ids[0]) if len(ids) else 0)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "region": pa.array(regions, pa.string()),
        "value": rng.random(len(ids)),
        "note": [f"note-{i:08d}-" + "x" * 40 for i in ids],
    }, schema=SCHEMA)


def batches_of(data: pa.Table, size: int) -> list[pa.Table]:
    return [data.slice(i, size) for i in range(0, data.num_rows, size)]


def context(table: Table) -> WriteContext:
    return table.write_context()


def write(table: Table, batches: list[pa.Table]) -> tuple[list[DataFile], PartitionedWriter]:
    writer = PartitionedWriter(context(table))
    for b in batches:
        writer.write(conform_to_schema(b, table.schema()))
    return writer.close(), writer


def files_per_partition(files: list[DataFile]) -> dict[tuple[object, ...], int]:
    return dict(collections.Counter(tuple(f.partition) for f in files))


def read_back(table: Table, files: list[DataFile]) -> pa.Table:
    table.append_files(files)
    return table.refresh().scan().to_arrow().sort_by("id")


def test_unpartitioned_input_uses_the_single_partition_writer_and_rolls_at_the_target_size(
    catalog: tablestore.Catalog,
) -> None:
    table = make_table(catalog, properties={"write.target-file-size-bytes": str(64 * 1024)})
    data = rows(np.arange(40_000), ["a"] * 40_000)
    files, writer = write(table, batches_of(data, 2_000))
    assert writer.kind == WriterKind.SINGLE
    assert writer.stats.transitions == [WriterKind.SINGLE]
    assert len(files) > 3, "the writer rolls to a new file at the target size"
    assert sum(f.record_count for f in files) == 40_000
    # Every file but the last reached the target; none is far past it (one row group over at most).
    assert all(f.file_size_in_bytes >= 64 * 1024 for f in files[:-1])
    assert all(pq.ParquetFile(f.file_path).metadata.num_rows == f.record_count for f in files)
    assert read_back(table, files).equals(data)


def test_partitioned_input_in_one_partition_uses_the_single_partition_writer(catalog: tablestore.Catalog) -> None:
    table = make_table(catalog, ["region"])
    data = rows(np.arange(5_000), ["eu"] * 5_000)
    files, writer = write(table, batches_of(data, 1_000))
    assert writer.kind == WriterKind.SINGLE
    assert files_per_partition(files) == {("eu",): 1}
    assert read_back(table, files).equals(data)


def test_clustered_input_uses_the_clustered_writer_with_one_file_per_partition(catalog: tablestore.Catalog) -> None:
    table = make_table(catalog, ["region"])
    regions = [f"r{i:02d}" for i in range(12) for _ in range(700)]  # runs cross batch boundaries
    data = rows(np.arange(len(regions)), regions)
    files, writer = write(table, batches_of(data, 1_000))
    assert writer.kind == WriterKind.CLUSTERED
    assert writer.stats.transitions == [WriterKind.CLUSTERED]  # the first batch holds two runs
    assert files_per_partition(files) == {(f"r{i:02d}",): 1 for i in range(12)}
    assert {tuple(f.partition): f.record_count for f in files} == {(f"r{i:02d}",): 700 for i in range(12)}
    assert read_back(table, files).equals(data)


def test_clustered_writer_keeps_one_file_open_at_a_time(catalog: tablestore.Catalog) -> None:
    table = make_table(catalog, ["region"])
    ctx = context(table)
    writer = PartitionedWriter(ctx, kind=WriterKind.CLUSTERED)
    open_counts = []
    regions = [f"r{i}" for i in range(5) for _ in range(300)]
    data = conform_to_schema(rows(np.arange(len(regions)), regions), table.schema())
    for batch in batches_of(data, 250):
        writer.write(batch)
        inner = writer._writer
        assert inner is not None and inner.kind == WriterKind.CLUSTERED
        current = getattr(inner, "current", None)
        open_counts.append(0 if current is None else int(current.files.is_open))
    files = writer.close()
    assert max(open_counts) <= 1
    assert files_per_partition(files) == {(f"r{i}",): 1 for i in range(5)}


def test_unclustered_input_uses_the_fanout_writer_with_one_file_per_partition(catalog: tablestore.Catalog) -> None:
    table = make_table(catalog, ["region"])
    n = 20_000
    regions = [f"r{i % 10}" for i in range(n)]  # every batch interleaves every partition
    data = rows(np.arange(n), regions)
    files, writer = write(table, batches_of(data, 1_000))
    assert writer.kind == WriterKind.FANOUT
    assert writer.stats.budget_flushes == 0
    assert files_per_partition(files) == {(f"r{i}",): 1 for i in range(10)}
    assert {tuple(f.partition): f.record_count for f in files} == {(f"r{i}",): 2_000 for i in range(10)}
    back = read_back(table, files)
    assert back.equals(data)


def test_a_partition_that_returns_switches_the_clustered_writer_to_fanout(catalog: tablestore.Catalog) -> None:
    table = make_table(catalog, ["region"])
    regions = ["a"] * 1_000 + ["b"] * 1_000 + ["a"] * 1_000 + ["c"] * 1_000
    data = rows(np.arange(len(regions)), regions)
    files, writer = write(table, batches_of(data, 1_000))
    assert writer.stats.transitions == [WriterKind.SINGLE, WriterKind.CLUSTERED, WriterKind.FANOUT]
    # 'a' had a closed file before the switch, and gets one more from the fanout writer.
    assert files_per_partition(files) == {("a",): 2, ("b",): 1, ("c",): 1}
    assert read_back(table, files).equals(data)


def test_a_small_budget_makes_the_fanout_writer_flush_and_stay_within_it(catalog: tablestore.Catalog) -> None:
    n, partitions = 300_000, 20
    regions = [f"r{i % partitions:02d}" for i in range(n)]
    data = rows(np.arange(n), regions)
    assert data.nbytes > 16 * 1024 * 1024
    batch_bytes = max(b.nbytes for b in batches_of(data, 2_000))
    results = {}
    for budget in (512 * 1024 * 1024, 16 * 1024 * 1024):
        table = make_table(catalog, ["region"], {FANOUT_BUDGET_PROPERTY: str(budget)})
        files, writer = write(table, batches_of(data, 2_000))
        assert writer.kind == WriterKind.FANOUT
        assert sum(f.record_count for f in files) == n
        assert read_back(table, files).equals(data)
        # The accounting never runs past the budget by more than the batch being routed.
        assert writer.stats.peak_accounted_bytes <= budget + batch_bytes
        row_groups = sum(pq.ParquetFile(f.file_path).metadata.num_row_groups for f in files)
        results[budget] = (writer.stats.budget_flushes, writer.stats.budget_rolls, len(files), row_groups)
        catalog.drop_table("db.t", purge=True)
    big, small = results[512 * 1024 * 1024], results[16 * 1024 * 1024]
    assert big[0] == 0 and big[2] == partitions and big[3] == partitions
    assert small[0] > 0, "the small budget forces early flushes"
    assert small[3] > big[3], "early flushes write more, smaller row groups"
    # 20 open files at 64 KiB each (four columns) stay under half of 16 MiB: the files are kept open.
    assert small[1] == 0 and small[2] == partitions


def test_open_files_past_the_budget_are_rolled(catalog: tablestore.Catalog) -> None:
    n, partitions = 100_000, 50
    regions = [f"r{i % partitions:02d}" for i in range(n)]
    data = rows(np.arange(n), regions)
    assert data.nbytes > 4 * 1024 * 1024
    # 4 MiB: half of it holds 32 open files at 64 KiB (four columns), fewer than 50 partitions.
    table = make_table(catalog, ["region"], {FANOUT_BUDGET_PROPERTY: str(4 * 1024 * 1024)})
    files, writer = write(table, batches_of(data, 1_000))
    assert writer.kind == WriterKind.FANOUT
    assert writer.stats.budget_rolls > 0
    assert len(files) > partitions, "rolled partitions continue in new files"
    assert sum(f.record_count for f in files) == n
    assert read_back(table, files).equals(data)


def test_a_routed_batch_is_accounted_once_whatever_its_partitions(catalog: tablestore.Catalog) -> None:
    """Buffered rows point into their routed batch, which the budget counts once by its real
    buffer size (not once per partition slice), and which is freed when written out."""
    table = make_table(catalog, ["region"])
    n, partitions = 5_000, 100
    data = conform_to_schema(rows(np.arange(n), [f"r{i % partitions:03d}" for i in range(n)]), table.schema())
    writer = PartitionedWriter(context(table))
    for batch in batches_of(data, 1_000):
        writer.write(batch)
    fanout = writer._writer
    assert isinstance(fanout, FanoutWriter)
    chunks = {id(c): c.size for part in fanout.open.values() for c, _, _ in part.pieces}
    assert len(chunks) == 5, "one chunk per batch, shared by its 100 partitions"
    assert fanout.buffered == sum(chunks.values())
    assert data.nbytes <= fanout.buffered <= 2 * data.nbytes
    assert fanout.accounted() == fanout.buffered + partitions * fanout.overhead  # a file reserved per partition
    files = writer.close()
    assert fanout.buffered == 0
    assert sum(f.record_count for f in files) == n
    assert read_back(table, files).equals(data)


def test_batches_sliced_from_a_larger_table_are_not_accounted_as_all_of_it(catalog: tablestore.Catalog) -> None:
    table = make_table(catalog, ["region"], {"write.spark.fanout.enabled": "true"})
    n = 20_000
    data = conform_to_schema(rows(np.arange(n), [f"r{i // 4_000}" for i in range(n)]), table.schema())
    writer = PartitionedWriter(context(table))
    for batch in batches_of(data, 1_000):  # each a slice holding all of ``data``'s buffers
        writer.write(batch)
    fanout = writer._writer
    assert isinstance(fanout, FanoutWriter)
    assert fanout.stats.budget_flushes == 0
    assert data.nbytes <= fanout.buffered <= 2 * data.nbytes
    assert read_back(table, writer.close()).equals(data)


def test_fanout_enabled_property_starts_with_the_fanout_writer(catalog: tablestore.Catalog) -> None:
    table = make_table(catalog, ["region"], {"write.spark.fanout.enabled": "true"})
    data = rows(np.arange(3_000), ["a"] * 1_000 + ["b"] * 2_000)
    files, writer = write(table, batches_of(data, 500))
    assert writer.stats.transitions == [WriterKind.FANOUT]
    assert files_per_partition(files) == {("a",): 1, ("b",): 1}
    assert read_back(table, files).equals(data)


def test_a_static_partition_is_written_without_routing(catalog: tablestore.Catalog) -> None:
    table = make_table(catalog, ["region"])
    data = conform_to_schema(rows(np.arange(1_000), ["x"] * 1_000), table.schema())
    files, stats = write_batches(context(table), batches_of(data, 100), partition=("x",))
    assert stats.kind == WriterKind.SINGLE
    assert files_per_partition(files) == {("x",): 1}
    assert read_back(table, files).equals(data)


def test_transformed_partitions_route_by_the_transform(catalog: tablestore.Catalog) -> None:
    table = make_table(catalog, ["bucket(4, id)", "truncate(1, region)"])
    n = 4_000
    data = rows(np.arange(n), [("ab", "cd", "ef")[i % 3] for i in range(n)])
    files, writer = write(table, batches_of(data, 500))
    assert writer.kind == WriterKind.FANOUT
    assert len(files_per_partition(files)) == 12
    assert all(count == 1 for count in files_per_partition(files).values())
    assert read_back(table, files).equals(data)
    assert table.scan(filter="region = 'cd'").to_arrow().num_rows == sum(1 for i in range(n) if i % 3 == 1)


def test_append_of_a_record_batch_reader_streams_through_the_writers(catalog: tablestore.Catalog) -> None:
    table = make_table(catalog, ["region"])
    data = rows(np.arange(10_000), [f"r{i % 7}" for i in range(10_000)])
    reader = pa.RecordBatchReader.from_batches(SCHEMA, data.to_batches(max_chunksize=1_000))
    snapshot = table.append(reader)
    assert snapshot.summary["added-records"] == "10000"
    assert snapshot.summary["added-data-files"] == "7"
    assert table.scan().to_arrow().sort_by("id").equals(data)


def test_a_failing_stream_leaves_no_files_behind(catalog: tablestore.Catalog, tmp_path: Path) -> None:
    table = make_table(catalog, ["region"], {"write.target-file-size-bytes": str(64 * 1024)})
    data = conform_to_schema(rows(np.arange(20_000), [f"r{i % 3}" for i in range(20_000)]), table.schema())

    def failing() -> Iterator[pa.Table]:
        yield from batches_of(data, 2_000)[:6]
        raise RuntimeError("the source failed")

    with pytest.raises(RuntimeError, match="the source failed"):
        write_batches(context(table), failing())
    assert not [p for p in (tmp_path / "wh").rglob("*.parquet")]
    assert table.refresh().current_snapshot() is None


@pytest.mark.parametrize(("key", "value"), [
    (FANOUT_BUDGET_PROPERTY, "lots"),
    (FANOUT_BUDGET_PROPERTY, "0"),
    ("write.distribution-mode", "sideways"),
    ("write.spark.fanout.enabled", "maybe"),
])
def test_bad_writer_properties_are_named(catalog: tablestore.Catalog, key: str, value: str) -> None:
    table = make_table(catalog, ["region"], {key: value})
    data = rows(np.arange(10), ["a"] * 5 + ["b"] * 5)
    with pytest.raises(ValidationError, match=key.replace(".", r"\.")):
        write(table, [data.slice(0, 5), data.slice(5)])


def test_a_forced_writer_refuses_input_it_cannot_write(catalog: tablestore.Catalog) -> None:
    table = make_table(catalog, ["region"])
    mixed = conform_to_schema(rows(np.arange(6), ["a", "b", "a", "b", "a", "b"]), table.schema())
    with pytest.raises(ValidationError, match="several partitions"):
        PartitionedWriter(context(table), kind=WriterKind.SINGLE).write(mixed)
    with pytest.raises(ValidationError, match="not clustered by partition"):
        PartitionedWriter(context(table), kind=WriterKind.CLUSTERED).write(mixed)
