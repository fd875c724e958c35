"""INSERT INTO and INSERT OVERWRITE: run the query in Spark, check it fits, commit once.

The query's columns are matched to the table's by position, as in Spark SQL. A value is only
converted where SQL's store assignment allows it (numbers to wider or other numeric types,
with an error on overflow; dates to timestamps); anything else fails before any file is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tablestore.errors import SchemaError, ValidationError
from tablestore.spec import conversions
from tablestore.spec.expressions import And, EqualTo, Expression, IsNull, Reference
from tablestore.spec.schema import type_to_arrow
from tablestore.spec.transforms import IdentityTransform
from tablestore.spec.types import (
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
    TimestampType,
    TimestamptzType,
    UUIDType,
    sql_type_name,
)
from tablestore.sql import statements as st
from tablestore.sql.query import spark_errors
from tablestore.sql.result import StatementResult

if TYPE_CHECKING:
    from tablestore.sql.session import SqlSession
    from tablestore.table import Table

_NUMERIC = (IntegerType, LongType, FloatType, DoubleType, DecimalType)
INSERT_OVERWRITE_MODE = "tablestore.insert-overwrite.mode"


def _spark_kind(spark_type: Any) -> str:
    name = type(spark_type).__name__
    return name.removesuffix("Type").lower()


def _assignable(spark_type: Any, target: IcebergType) -> bool:
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
    if isinstance(target, TimestampType | TimestamptzType):
        return kind in ("timestamp", "timestampntz", "date")
    if isinstance(target, BinaryType | FixedType | UUIDType):
        return kind == "binary"
    if isinstance(target, StructType):
        return kind == "struct"
    if isinstance(target, ListType):
        return kind == "array"
    if isinstance(target, MapType):
        return kind == "map"
    return True


def _spark_cast_type(t: IcebergType) -> str | None:
    if isinstance(t, FixedType | UUIDType | BinaryType):
        return "binary"
    if isinstance(t, StructType | ListType | MapType):
        return None  # nested values are checked by the Arrow conversion
    return sql_type_name(t)


def run_insert(session: SqlSession, table: Table, s: st.Insert) -> StatementResult:
    from pyspark.sql import functions as F

    schema = table.schema()
    spec = table.spec()
    identity_sources = {
        schema.find_column_name(pf.source_id): pf for pf in spec.fields if isinstance(pf.transform, IdentityTransform)
    }
    partition_names = {schema.find_column_name(pf.source_id) for pf in spec.fields}
    static: dict[str, Any] = {}
    dynamic_keys: list[str] = []
    for key, value in s.partition:
        field_id = schema.find_field_id(key, case_sensitive=False)
        name = schema.find_column_name(field_id) if field_id is not None else None
        if name is None or name not in partition_names:
            raise ValidationError(
                f"PARTITION ({key}) names a column that is not a partition column of {table.name}; "
                f"its partition columns are {', '.join(sorted(n for n in partition_names if n)) or 'none'}"
            )
        if value is None:
            dynamic_keys.append(name)
            continue
        if name not in identity_sources:
            raise ValidationError(f"a static value for {name!r} needs an identity partition on it")
        try:
            static[name] = conversions.from_python(schema.find_type(name), value)
        except (ValidationError, ValueError) as e:
            raise ValidationError(
                f"partition value {value!r} for {name!r} is not a valid {schema.find_type(name)}: {e}"
            ) from None
    if s.columns:
        unknown = [c for c in s.columns if schema.find_field_id(c, case_sensitive=False) is None]
        if unknown:
            raise SchemaError(f"INSERT names unknown columns {', '.join(unknown)}; the columns are "
                              f"{', '.join(schema.column_names)}")
        targets = [schema.find_field(c, case_sensitive=False).name for c in s.columns]
    else:
        targets = [f.name for f in schema.fields if f.name not in static]
    df = session.planner().dataframe(s.query)
    if len(df.columns) != len(targets):
        raise ValidationError(
            f"INSERT into {table.name}: the query gives {len(df.columns)} column(s) but {len(targets)} are expected "
            f"({', '.join(targets)})"
        )
    selected = []
    for source, target in zip(df.schema.fields, targets, strict=True):
        t = schema.find_type(target)
        if not _assignable(source.dataType, t):
            raise SchemaError(
                f"INSERT into {table.name}: column {target!r} is {sql_type_name(t)} but the query gives "
                f"{source.dataType.simpleString()}; add an explicit CAST"
            )
        cast_to = _spark_cast_type(t)
        column = F.col(f"`{source.name}`")
        selected.append((column.cast(cast_to) if cast_to else column).alias(target))
    with spark_errors():
        arrow = df.select(*selected).toArrow()
    for name, value in static.items():
        t = schema.find_type(name)
        arrow = arrow.append_column(name, pa.array([value] * arrow.num_rows, type_to_arrow(t)))
    rows = arrow.num_rows
    if not s.overwrite:
        if rows:
            table.append(arrow)
        return StatementResult(affected=rows)
    mode = table.properties.get(INSERT_OVERWRITE_MODE, "dynamic").lower()
    if static:
        condition: Expression | None = None
        for name, value in static.items():
            term: Expression = IsNull(Reference(name)) if value is None else EqualTo(Reference(name), value)
            condition = term if condition is None else And(condition, term)
        table.overwrite(arrow, filter=condition)
    elif mode == "static" or not spec.fields:
        table.overwrite(arrow)
    else:
        table.replace_partitions(arrow)
    return StatementResult(affected=rows)
