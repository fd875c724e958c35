"""INSERT INTO and INSERT OVERWRITE: Spark tasks write the query's rows, the client commits once.

The rows never reach the client: the query, cast to the table's types (and with a PARTITION
clause's static values as literal columns), runs as a Spark job whose tasks write the data files
(:mod:`tablestore.engine.spark.write_files`); the client then commits them in one snapshot: an
append, an overwrite by filter (static) or a dynamic partition overwrite, validated against the
table as it was loaded before the query ran, and marked with the write's id.

The query's columns are matched to the table's by position, as in Spark SQL. A value is only
converted where SQL's store assignment allows it (numbers to wider or other numeric types,
with an error on overflow; dates to timestamps); anything else fails before any file is written.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
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
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    UnknownType,
    UUIDType,
    sql_type_name,
)
from tablestore.sql import statements as st
from tablestore.sql.context import INSERT_OVERWRITE_MODE
from tablestore.sql.query import spark_errors
from tablestore.sql.result import StatementResult
from tablestore.table.ops.overwrite import overwrite_files_producer, replace_partitions_files_producer
from tablestore.table.update.identity import CommitIdentity
from tablestore.table.update.snapshot import FastAppend, SnapshotProducer
from tablestore.table.update.transaction import commit_snapshot

if TYPE_CHECKING:
    from tablestore.engine.spark.write_files import WrittenFiles
    from tablestore.spec.manifest import DataFile
    from tablestore.spec.metadata import Snapshot
    from tablestore.sql.context import SessionContext
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
    from pyspark.sql import types as T

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
            from tablestore.engine.spark.convert import spark_type

            return column.cast(_nullable_everywhere(spark_type(t)))
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


@dataclass
class PartitionClause:
    """``PARTITION (k1='v1', k2)`` resolved against the table: static values and dynamic columns."""

    static: dict[str, Any] = field(default_factory=dict)
    dynamic: list[str] = field(default_factory=list)
    """Identity partition columns without a value, in the order the query must give them."""


def resolve_partition_clause(table: Table, partition: tuple[tuple[str, str | None], ...]) -> PartitionClause:
    """Check a PARTITION clause: every key a partition column, values of the column's type.

    Identity partition columns the clause leaves out are dynamic too (Hive's partial static
    insert); they come after the other columns, those named in the clause first.
    """
    schema = table.schema()
    spec = table.spec()
    identity = [schema.find_column_name(pf.source_id) for pf in spec.fields
                if isinstance(pf.transform, IdentityTransform)]
    partition_names = {schema.find_column_name(pf.source_id) for pf in spec.fields}
    clause = PartitionClause()
    if not partition:
        return clause
    for key, value in partition:
        field_id = schema.find_field_id(key, case_sensitive=False)
        name = schema.find_column_name(field_id) if field_id is not None else None
        if name is None or name not in partition_names:
            raise ValidationError(
                f"PARTITION ({key}) names a column that is not a partition column of {table.name}; "
                f"its partition columns are {', '.join(sorted(n for n in partition_names if n)) or 'none'}"
            )
        if name in clause.static or name in clause.dynamic:
            raise ValidationError(f"PARTITION names {name!r} twice")
        if value is None:
            clause.dynamic.append(name)
            continue
        if name not in identity:
            raise ValidationError(
                f"a static value for {name!r} needs an identity partition on it; {table.name} partitions it by "
                f"{', '.join(str(pf.transform) for pf in spec.fields if schema.find_column_name(pf.source_id) == name)}"
            )
        t = schema.find_type(name)
        try:
            clause.static[name] = conversions.from_python(t, value)
        except (ValidationError, ValueError) as e:
            raise ValidationError(
                f"partition value {value!r} for {name!r} is not a valid {sql_type_name(t)}: {e}"
            ) from None
    clause.dynamic.extend(n for n in identity if n is not None and n not in clause.static and n not in clause.dynamic)
    return clause


def _targets(table: Table, s: st.Insert, clause: PartitionClause) -> list[str]:
    schema = table.schema()
    if s.columns:
        unknown = [c for c in s.columns if schema.find_field_id(c, case_sensitive=False) is None]
        if unknown:
            raise SchemaError(f"INSERT names unknown columns {', '.join(unknown)}; the columns are "
                              f"{', '.join(schema.column_names)}")
        targets = [schema.find_field(c, case_sensitive=False).name for c in s.columns]
        fixed = [c for c in targets if c in clause.static]
        if fixed:
            raise ValidationError(
                f"column {fixed[0]!r} has a static value in the PARTITION clause; remove it from the column list"
            )
        twice = sorted({c for c in targets if targets.count(c) > 1})
        if twice:
            raise ValidationError(f"INSERT names column(s) {', '.join(twice)} more than once; name each column once")
        return targets
    if not s.partition:
        return [f.name for f in schema.fields]
    moved = set(clause.dynamic)
    return [f.name for f in schema.fields if f.name not in clause.static and f.name not in moved] + clause.dynamic


def _column_count_error(table: Table, given: int, targets: list[str], clause: PartitionClause) -> ValidationError:
    expected = f"{len(targets)} are expected ({', '.join(targets)})"
    if clause.static and given == len(targets) + len(clause.static):
        return ValidationError(
            f"INSERT into {table.name}: the query gives {given} columns but {expected}; the static partition "
            f"column(s) {', '.join(clause.static)} take their values from the PARTITION clause, so remove them "
            "from the query"
        )
    if clause.dynamic and given == len(targets) - len(clause.dynamic):
        missing = ", ".join(clause.dynamic)
        return ValidationError(
            f"INSERT into {table.name}: partition value missing for {missing}: give it in the PARTITION clause "
            f"({clause.dynamic[0]}='...') or as the last column(s) of the query ({expected})"
        )
    return ValidationError(f"INSERT into {table.name}: the query gives {given} column(s) but {expected}")


def overwrite_mode(context: SessionContext, table: Table) -> str:
    """``static`` (replace all rows the PARTITION clause selects) or ``dynamic`` (replace only the
    partitions the query writes): the session option, else the table property, else dynamic."""
    return context.options.overwrite_mode() or table.properties.get(INSERT_OVERWRITE_MODE, "dynamic").lower()


def typed_for_table(table: Table, df: Any, targets: list[str]) -> Any:
    """The query ``df`` with its columns named ``targets`` (by position) and cast so that Spark
    hands the table's writer values of the table's types; SchemaError for a column SQL's store
    assignment does not allow."""
    from pyspark.sql import functions as F

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


def static_column(table: Table, name: str, value: Any) -> Any:
    """A PARTITION clause's static value as a Spark column of the table column's type: added in
    Spark, so the rows never pass through the client."""
    from pyspark.sql import functions as F

    t = table.schema().find_type(name)
    python = None if value is None else pa.scalar(value, type_to_arrow(t)).as_py()
    # A timestamp goes as ISO text: PySpark reads a naive datetime in the process's time zone.
    literal = F.lit(python.isoformat() if isinstance(python, datetime.datetime) else python)
    cast_to = spark_cast_type(t)
    return (literal.cast(cast_to) if cast_to else literal).alias(name)


def write_query(context: SessionContext, table: Table, df: Any) -> WrittenFiles:
    """Spark tasks write the rows of ``df`` (typed for ``table``) as data files; nothing commits."""
    from tablestore.engine.spark.write_files import table_target, write_files

    with spark_errors():
        return write_files(df, table_target(table, context.config.to_json()))


def commit_written_files(table: Table, written: WrittenFiles,
                         producer: Callable[[list[DataFile], dict[str, str]], SnapshotProducer]) -> Snapshot:
    """One snapshot of the files Spark wrote, marked with the write's id (a retry of a commit
    whose outcome was unknown finds it); the files are deleted when the commit is refused."""
    from tablestore.engine.spark.source_write import WRITE_ID_PROPERTY
    from tablestore.engine.spark.write_files import commit_written

    identity = CommitIdentity(written.write_id, WRITE_ID_PROPERTY)
    return commit_written(table.io, written,
                          lambda files: commit_snapshot(producer(files, written.summary()), identity))


def insert(context: SessionContext, s: st.Insert) -> StatementResult:
    """INSERT INTO and INSERT OVERWRITE (the handler of :class:`~tablestore.sql.statements.Insert`)."""
    _, _, table = context.write_table(s.name)
    return run_insert(context, table, s)


def run_insert(context: SessionContext, table: Table, s: st.Insert) -> StatementResult:
    clause = resolve_partition_clause(table, s.partition)
    static = clause.static
    targets = _targets(table, s, clause)
    df = context.planner().dataframe(s.query)
    if len(df.columns) != len(targets):
        raise _column_count_error(table, len(df.columns), targets, clause)
    df = typed_for_table(table, df, targets)
    if static:
        df = df.select("*", *(static_column(table, name, value) for name, value in static.items()))
    mode = overwrite_mode(context, table) if s.overwrite else "append"
    if mode not in ("static", "dynamic", "append"):
        raise ValidationError(f"{INSERT_OVERWRITE_MODE} must be 'dynamic' or 'static', got {mode!r}")
    written = write_query(context, table, df)
    rows = written.rows
    if not s.overwrite:
        if written.files:
            commit_written_files(table, written, lambda files, props: FastAppend(table, files, props))
        return StatementResult(affected=rows)
    if static and (not clause.dynamic or mode == "static"):
        # Every row the PARTITION clause selects is replaced, even by an empty query (Hive's rule).
        condition: Expression | None = None
        for name, value in static.items():
            term: Expression = IsNull(Reference(name)) if value is None else EqualTo(Reference(name), value)
            condition = term if condition is None else And(condition, term)
        commit_written_files(table, written,
                             lambda files, props: overwrite_files_producer(table, files, condition, props))
    elif mode == "static" or not table.spec().fields:
        commit_written_files(table, written, lambda files, props: overwrite_files_producer(table, files, None, props))
    else:
        commit_written_files(table, written,
                             lambda files, props: replace_partitions_files_producer(table, files, props))
    return StatementResult(affected=rows)
