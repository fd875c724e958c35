"""Conversions between Spark and tablestore: types, Arrow data and pushed filters.

Spark has no TIME, UUID, fixed or nanosecond types, so Iceberg ``time`` is carried as
``bigint`` microseconds since midnight, ``uuid`` and ``fixed(n)`` as ``binary`` (``uuid`` as
its 16 bytes, as Iceberg's own Spark integration does), and ``timestamp_ns``/``timestamptz_ns``
as Spark timestamps (truncated to microseconds). Writes convert the same columns back.

Runs on the driver and on executors; imports no catalog.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
from pyspark.sql import datasource as sds
from pyspark.sql import types as st
from pyspark.sql.datasource import Filter

from tablestore.errors import SchemaError, TableStoreError
from tablestore.spec.expressions import expression_tree as ex
from tablestore.spec.expressions.binding import bind
from tablestore.spec.schemas.schema import Schema
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
    TimeType,
    UnknownType,
    UUIDType,
)

# -- types ----------------------------------------------------------------------------------------


def spark_type(t: IcebergType) -> st.DataType:
    """The Spark type that carries values of an Iceberg type (see the module docstring)."""
    if isinstance(t, StructType):
        return st.StructType([
            st.StructField(f.name, spark_type(f.field_type), nullable=not f.required) for f in t.fields
        ])
    if isinstance(t, ListType):
        return st.ArrayType(spark_type(t.element_type), containsNull=not t.element_required)
    if isinstance(t, MapType):
        return st.MapType(spark_type(t.key_type), spark_type(t.value_type), valueContainsNull=not t.value_required)
    simple: dict[type[IcebergType], st.DataType] = {
        BooleanType: st.BooleanType(),
        IntegerType: st.IntegerType(),
        LongType: st.LongType(),
        FloatType: st.FloatType(),
        DoubleType: st.DoubleType(),
        DateType: st.DateType(),
        TimeType: st.LongType(),
        TimestampType: st.TimestampNTZType(),
        TimestamptzType: st.TimestampType(),
        TimestampNanoType: st.TimestampNTZType(),
        TimestamptzNanoType: st.TimestampType(),
        StringType: st.StringType(),
        UUIDType: st.BinaryType(),
        FixedType: st.BinaryType(),
        BinaryType: st.BinaryType(),
        UnknownType: st.NullType(),
    }
    if isinstance(t, DecimalType):
        return st.DecimalType(t.precision, t.scale)
    found = simple.get(type(t))
    if found is None:
        raise SchemaError(f"Spark has no type for Iceberg type {t}")
    return found


def spark_schema(schema: Schema) -> st.StructType:
    return st.StructType([
        st.StructField(f.name, spark_type(f.field_type), nullable=not f.required) for f in schema.fields
    ])


def spark_arrow_schema(schema: st.StructType) -> pa.Schema:
    """The exact Arrow schema Spark checks the batches of a Python data source against."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def to_spark_table(table: pa.Table, target: pa.Schema, table_name: str = "") -> pa.Table:
    """Rows read by tablestore in the Arrow types Spark expects (time → int64, fixed → binary, ...).

    Spark's timestamps have microseconds: a ``timestamp_ns`` value converts only when it has no
    digits below the microsecond. Otherwise the read fails naming the table, column and type
    rather than give a truncated value (or write one back, for UPDATE and MERGE).
    """
    columns = []
    for i, f in enumerate(target):
        column = table.column(i)
        if not column.type.equals(f.type):
            try:
                column = column.cast(f.type, safe=_has_nanoseconds(column.type))
            except pa.ArrowInvalid:
                where = f" of table {table_name}" if table_name else ""
                raise SchemaError(
                    f"column {table.column_names[i]!r}{where} holds {_ns_type_name(column.type)} values with "
                    "nanoseconds, which Spark (microseconds) cannot show without truncating them; read the table "
                    "with tablestore's Python API (table.scan().to_arrow()), which keeps nanoseconds"
                ) from None
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=target)


def _has_nanoseconds(t: pa.DataType) -> bool:
    """Whether an Arrow type holds nanosecond timestamps at any depth (only those convert safely:
    the other conversions are reinterpretations by construction)."""
    if pa.types.is_timestamp(t):
        return t.unit == "ns"
    if pa.types.is_struct(t):
        return any(_has_nanoseconds(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_nanoseconds(t.value_type)
    if pa.types.is_map(t):
        return _has_nanoseconds(t.key_type) or _has_nanoseconds(t.item_type)
    return False


def _ns_type_name(t: pa.DataType) -> str:
    return "timestamptz_ns" if pa.types.is_timestamp(t) and t.tz else "timestamp_ns"


def _needs_conversion(t: IcebergType) -> bool:
    if isinstance(t, StructType):
        return any(_needs_conversion(f.field_type) for f in t.fields)
    if isinstance(t, ListType):
        return _needs_conversion(t.element_type)
    if isinstance(t, MapType):
        return _needs_conversion(t.key_type) or _needs_conversion(t.value_type)
    return isinstance(t, TimeType | UUIDType | FixedType)


def _from_spark_array(array: pa.Array, t: IcebergType) -> pa.Array:
    """Undo the read-side type mapping for one column, so conform_to_schema can take over."""
    if not _needs_conversion(t):
        return array
    if isinstance(t, TimeType) and pa.types.is_integer(array.type):
        return array.cast(pa.time64("us"))
    if isinstance(t, UUIDType | FixedType) and (pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type)):
        width = 16 if isinstance(t, UUIDType) else t.length
        try:
            return array.cast(pa.binary(width))
        except pa.ArrowInvalid:
            raise SchemaError(f"a value for a {t} column is not {width} bytes long") from None
    mask = array.is_null() if array.null_count else None
    if isinstance(t, StructType) and pa.types.is_struct(array.type):
        names = [array.type.field(i).name for i in range(array.type.num_fields)]
        by_name = {f.name: f for f in t.fields}
        children = []
        for i, name in enumerate(names):
            child = array.field(i)
            children.append(_from_spark_array(child, by_name[name].field_type) if name in by_name else child)
        return pa.StructArray.from_arrays(children, names=names, mask=mask)
    if isinstance(t, ListType) and pa.types.is_list(array.type):
        values = _from_spark_array(array.values, t.element_type)
        return pa.ListArray.from_arrays(array.offsets, values, mask=mask)
    if isinstance(t, MapType) and pa.types.is_map(array.type):
        keys = _from_spark_array(array.keys, t.key_type)
        items = _from_spark_array(array.items, t.value_type)
        return pa.MapArray.from_arrays(array.offsets, keys, items, mask=mask)
    return array


def from_spark_table(data: pa.Table, schema: Schema) -> pa.Table:
    """Spark's Arrow rows with time, uuid and fixed columns back in tablestore's Arrow types."""
    by_name = {f.name: f for f in schema.fields}
    lowered = {f.name.lower(): f for f in schema.fields}
    columns = []
    for name in data.column_names:
        f = by_name.get(name) or lowered.get(name.lower())
        column = data.column(name)
        if f is not None and _needs_conversion(f.field_type):
            column = pa.chunked_array(
                [_from_spark_array(chunk, f.field_type) for chunk in column.chunks]
                or [_from_spark_array(pa.array([], column.type), f.field_type)]
            )
        columns.append(column)
    return pa.Table.from_arrays(columns, names=data.column_names)


# -- filters --------------------------------------------------------------------------------------

# Column types whose Spark values are not the table's values (see the type mapping), so a
# comparison in Spark does not mean the same as one on the stored data.
_NOT_PUSHABLE = (TimeType, UUIDType, TimestampNanoType, TimestamptzNanoType, UnknownType)
# Binary values compare by bytes in both, but only equality is worth the risk of subtle order
# differences between engines.
_EQUALITY_ONLY = (FixedType, BinaryType)


def _column(attribute: tuple[str, ...], schema: Schema) -> str | None:
    """The dotted column name for Spark's column path, if it names a pushable column."""
    if not attribute or any("." in part for part in attribute):
        return None  # our references are dotted names; a dot inside a name is ambiguous
    name = ".".join(attribute)
    field_id = schema.find_field_id(name)
    if field_id is None:
        return None
    # Only struct nesting: Spark does not push predicates on list elements or map values, and
    # a field below one would have no single value per row.
    parent = schema.parent_id(field_id)
    while parent is not None:
        if not isinstance(schema.find_field(parent).field_type, StructType):
            return None
        parent = schema.parent_id(parent)
    if isinstance(schema.find_field(field_id).field_type, (*_NOT_PUSHABLE, StructType, ListType, MapType)):
        return None
    return name


def filter_to_expression(f: Filter, schema: Schema) -> ex.BooleanExpression | None:
    """Spark's pushed filter as a tablestore expression with the same meaning, or None.

    Both use SQL's three-valued logic, so ``Not`` maps to ``Not``. Filters with a NULL literal
    are left to Spark (``a IN (1, NULL)`` and its negation do not mean what they look like).
    """
    try:
        expr = _convert(f, schema)
        if expr is None:
            return None
        bind(schema, expr)  # literals that do not fit the column stay with Spark
        return expr
    except (TableStoreError, TypeError, ValueError, OverflowError):
        return None


_COMPARISONS: dict[type, type[ex.LiteralPredicate]] = {
    sds.EqualTo: ex.EqualTo,
    sds.GreaterThan: ex.GreaterThan,
    sds.GreaterThanOrEqual: ex.GreaterThanOrEqual,
    sds.LessThan: ex.LessThan,
    sds.LessThanOrEqual: ex.LessThanOrEqual,
}


def _convert(f: Filter | None, schema: Schema) -> ex.BooleanExpression | None:
    if f is None:
        return None
    if isinstance(f, sds.Not):
        child = _convert(f.child, schema)
        return ex.Not(child) if child is not None else None
    # Spark 4.3 pushes no And / Or (it splits conjunctions and keeps disjunctions), but a later
    # version may; they cost nothing here.
    kind = type(f).__name__
    if kind in ("And", "Or"):
        a = _convert(getattr(f, "left", None), schema)
        b = _convert(getattr(f, "right", None), schema)
        if a is None or b is None:
            return None
        return ex.And(a, b) if kind == "And" else ex.Or(a, b)
    attribute = getattr(f, "attribute", None)
    if not isinstance(attribute, tuple):
        return None
    name = _column(attribute, schema)
    if name is None:
        return None
    column_type = schema.find_field(name).field_type
    if isinstance(f, sds.IsNull):
        return ex.IsNull(name)
    if isinstance(f, sds.IsNotNull):
        return ex.NotNull(name)
    value = getattr(f, "value", None)
    if isinstance(f, sds.EqualNullSafe):
        # a <=> v is never unknown: with v NULL it is IS NULL, else "not null and equal",
        # which keeps NOT (a <=> v) true for NULL rows, as in Spark.
        if value is None:
            return ex.IsNull(name)
        return ex.And(ex.NotNull(name), ex.EqualTo(name, value))
    if isinstance(f, sds.In):
        values = tuple(value) if isinstance(value, tuple | list) else None
        if not values or any(v is None for v in values):
            return None
        return ex.In(name, values)
    if value is None:
        return None
    if isinstance(f, sds.StringStartsWith):
        return ex.StartsWith(name, value) if isinstance(column_type, StringType) else None
    predicate = _COMPARISONS.get(type(f))
    if predicate is None:
        return None
    if isinstance(column_type, _EQUALITY_ONLY) and predicate is not ex.EqualTo:
        return None
    return predicate(name, value)


def combine(expressions: Iterable[ex.BooleanExpression]) -> ex.BooleanExpression:
    out: ex.BooleanExpression = ex.AlwaysTrue()
    for e in expressions:
        out = e if isinstance(out, ex.AlwaysTrue) else ex.And(out, e)
    return out
