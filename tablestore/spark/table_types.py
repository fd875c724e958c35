"""A query's rows cast to a table's types, in Spark: what every SQL write hands its tasks.

SQL's store assignment decides what may be written to a column (:func:`assignable`: numbers to
wider or other numeric types, with an error on overflow; dates to timestamps; nothing else across
kinds); :func:`typed_for_table` casts a query's columns, matched to the table's by position, so
that Spark hands the write tasks (:mod:`~tablestore.spark.write_task`) values of the
table's types. INSERT, CTAS and RTAS use it before their write, UPDATE and MERGE for the values
they assign.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from tablestore.errors import SchemaError
from tablestore.spark.convert import spark_type as spark_type_of
from tablestore.spec.schemas.schema import type_to_arrow
from tablestore.spec.schemas.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    UnknownType,
    UUIDType,
    sql_type_name,
)

if TYPE_CHECKING:
    from tablestore.table import Table

_NUMERIC = (IntegerType, LongType, FloatType, DoubleType, DecimalType)


def _spark_kind(spark_type: Any) -> str:
    name = type(spark_type).__name__
    return name.removesuffix("Type").lower()


def assignable(spark_type: Any, target: IcebergType) -> bool:
    kind = _spark_kind(spark_type)
    if kind == "null":
        return True
    if isinstance(target, _NUMERIC):
        return kind in ("byte", "short", "integer", "long", "float", "double", "decimal")
    if isinstance(target, StringType):
        return kind in ("string", "varchar", "char")
    if isinstance(target, BooleanType):
        return kind == "boolean"
    if isinstance(target, DateType):
        return kind == "date"
    if isinstance(target, TimestampType | TimestamptzType | TimestampNanoType | TimestamptzNanoType):
        return kind in ("timestamp", "timestampntz", "date")
    if isinstance(target, UnknownType):
        return kind == "null"
    if isinstance(target, BinaryType | FixedType | UUIDType):
        return kind == "binary"
    if isinstance(target, StructType):
        return kind == "struct"
    if isinstance(target, ListType):
        return kind == "array"
    if isinstance(target, MapType):
        return kind == "map"
    return True


def _nullable_everywhere(spark_type: Any) -> Any:
    """A Spark type with every nested field, element and map value nullable."""
    if isinstance(spark_type, T.StructType):
        return T.StructType([T.StructField(f.name, _nullable_everywhere(f.dataType), True, f.metadata)
                             for f in spark_type.fields])
    if isinstance(spark_type, T.ArrayType):
        return T.ArrayType(_nullable_everywhere(spark_type.elementType), True)
    if isinstance(spark_type, T.MapType):
        return T.MapType(_nullable_everywhere(spark_type.keyType), _nullable_everywhere(spark_type.valueType), True)
    return spark_type


def table_typed(column: Any, source_type: Any, t: IcebergType) -> Any:
    """A query's Spark column cast so that its Arrow form is written to a table column of type ``t``.

    - Scalars whose Spark values are not the table's (``spark_cast_type``) are cast to them.
    - A ``NULL`` for a nested column is cast to the column's Spark type: Arrow has no null
      struct, list or map to convert.
    - A nested value keeps its type, with every nested field nullable. Spark's ``toArrow``
      casts its batches to Spark's schema, and a ``named_struct`` of literals has non-nullable
      fields whose Arrow children hold nulls under a NULL struct, which that cast refuses.
      The table's required fields are checked when the rows are written.
    """
    if isinstance(t, StructType | ListType | MapType):
        if _spark_kind(source_type) == "null":
            return column.cast(_nullable_everywhere(spark_type_of(t)))
        relaxed = _nullable_everywhere(source_type)
        return column if relaxed == source_type else column.cast(relaxed)
    cast_to = spark_cast_type(t)
    return column.cast(cast_to) if cast_to else column


def spark_cast_type(t: IcebergType) -> str | None:
    if isinstance(t, FixedType | UUIDType | BinaryType):
        return "binary"
    if isinstance(t, StructType | ListType | MapType):
        return None  # nested values are checked by the Arrow conversion
    if isinstance(t, TimestampNanoType | TimestamptzNanoType):
        # Spark's timestamps have microseconds; the write widens them to nanoseconds exactly.
        return "timestamp_ntz" if isinstance(t, TimestampNanoType) else "timestamp"
    if isinstance(t, UnknownType):
        return None  # only NULL is assignable, and the write leaves the column out of the file
    return sql_type_name(t)


def typed_for_table(table: Table, df: Any, targets: list[str]) -> Any:
    """The query ``df`` with its columns named ``targets`` (by position) and cast so that Spark
    hands the table's writer values of the table's types; SchemaError for a column SQL's store
    assignment does not allow."""
    schema = table.schema()
    # By position: a query's names may repeat (SELECT 3, NULL, NULL names two columns `NULL`).
    df = df.toDF(*targets)
    selected = []
    for source, target in zip(df.schema.fields, targets, strict=True):
        t = schema.find_type(target)
        if not assignable(source.dataType, t):
            raise SchemaError(
                f"INSERT into {table.name}: column {target!r} is {sql_type_name(t)} but the query gives "
                f"{source.dataType.simpleString()}; add an explicit CAST"
            )
        selected.append(table_typed(F.col(f"`{source.name}`"), source.dataType, t).alias(target))
    return df.select(*selected)


def typed_assignments(df: Any, table: Table, names: list[str], what: str) -> Any:
    """``df`` with each column in ``names`` (the values an UPDATE or MERGE assigns) checked against
    and cast to the table's column type; the other columns as they are. ``what`` names the
    statement in the SchemaError of a value SQL's store assignment does not allow."""
    schema = table.schema()
    spark_types = {f.name: f.dataType for f in df.schema.fields}
    columns = []
    for name in df.columns:
        if name not in names:
            columns.append(F.col(f"`{name}`"))
            continue
        t = schema.find_type(name)
        if not assignable(spark_types[name], t):
            raise SchemaError(
                f"{what} of {table.name}: column {name!r} is {sql_type_name(t)} but the new value is "
                f"{spark_types[name].simpleString()}; add an explicit CAST"
            )
        columns.append(table_typed(F.col(f"`{name}`"), spark_types[name], t).alias(name))
    return df.select(*columns)


def static_column(table: Table, name: str, value: Any) -> Any:
    """A PARTITION clause's static value as a Spark column of the table column's type: added in
    Spark, so the rows never pass through the client."""
    t = table.schema().find_type(name)
    python = None if value is None else pa.scalar(value, type_to_arrow(t)).as_py()
    # A timestamp goes as ISO text: PySpark reads a naive datetime in the process's time zone.
    literal = F.lit(python.isoformat() if isinstance(python, datetime.datetime) else python)
    cast_to = spark_cast_type(t)
    return (literal.cast(cast_to) if cast_to else literal).alias(name)


__all__ = ["assignable", "spark_cast_type", "static_column", "table_typed", "typed_assignments", "typed_for_table"]
