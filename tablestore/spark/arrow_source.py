"""A Spark DataFrame as an Arrow source (a merge or MERGE INTO source given as a DataFrame).

Found through :mod:`tablestore.engine.sources` when the table layer meets a value whose type
comes from pyspark.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema


class SparkArrowSource:
    """The rows of a (batch) Spark DataFrame, collected to the driver as Arrow."""

    def __init__(self, df: DataFrame) -> None:
        self.df = df

    @property
    def arrow_schema(self) -> pa.Schema:
        return to_arrow_schema(self.df.schema)

    @property
    def is_streaming(self) -> bool:
        return bool(self.df.isStreaming)

    def to_arrow(self, columns: Sequence[str] | None = None) -> pa.Table:
        # The table API's sources (table.merge(df), table.append(df) on the local engine) are
        # Arrow in this process by contract; no SQL statement comes here (their writes run in
        # Spark tasks: tasks/write_files.py, tasks/row_level_tasks.py), and a column merge from a
        # DataFrame runs on the executors (tasks/column_merge_tasks.py).
        df = self.df if columns is None else self.df.select(*columns)
        return df.toArrow()


def adapt(value: object) -> SparkArrowSource | None:
    """A DataFrame (classic or Spark Connect) adapted; None for any other pyspark value."""
    return SparkArrowSource(value) if isinstance(value, DataFrame) else None


__all__ = ["SparkArrowSource", "adapt"]
