"""A query's result as a stream of Arrow record batches, one Spark partition at a time.

    reader = result_stream(spark.sql("SELECT ..."))   # a pyarrow.RecordBatchReader
    for batch in reader: ...

``DataFrame.toArrow()`` collects every row: in classic PySpark the driver JVM gathers every
partition's batches before the Python client reads them (``spark.driver.maxResultSize`` caps
the whole result, and the driver's heap holds it), and the client then holds the whole table.
Here each task turns its batches into Arrow IPC messages (``mapInArrow``, one binary row per
batch of ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows) and ``toLocalIterator`` fetches
the partitions one after the other (classic: one small job per partition, the next one
prefetched; Spark Connect: the server streams the batches of its ``ExecutePlan`` response). So
the driver holds at most two partitions and the client a batch or two, whatever the size of the
result, and the order of the rows (an ORDER BY's partitions come in order) is kept.

The batches have the schema ``toArrow()`` gives (UTC timestamps, 32-bit offsets).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_COLUMN = "ipc"


def _to_ipc(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """On the executors: each batch as one Arrow IPC stream in one binary row."""
    for batch in batches:
        if not batch.num_rows:
            continue
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        yield pa.record_batch([pa.array([sink.getvalue().to_pybytes()], pa.binary())], names=[_COLUMN])


def result_stream(df: DataFrame) -> pa.RecordBatchReader:
    """The rows of ``df`` as a RecordBatchReader that fetches them a partition at a time."""
    schema = to_arrow_schema(df.schema, timezone="UTC")
    # A query may name two columns alike (SELECT t.*, o.* of a join), which mapInArrow refuses:
    # the columns travel by position and get their names back here.
    positional = df.toDF(*(f"c{i}" for i in range(len(df.columns))))
    rows = positional.mapInArrow(_to_ipc, f"{_COLUMN} binary").toLocalIterator(prefetchPartitions=True)

    def batches() -> Iterator[pa.RecordBatch]:
        for row in rows:
            with pa.ipc.open_stream(row[0]) as reader:
                for batch in reader:
                    columns = [c.cast(f.type) for c, f in zip(batch.columns, schema, strict=True)]
                    yield pa.RecordBatch.from_arrays(columns, schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


__all__ = ["result_stream"]
