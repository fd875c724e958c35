"""INSERT INTO and INSERT OVERWRITE: Spark tasks write the query's rows, the client commits once.

This module plans the statement and dispatches it to the Spark engine. The rows never reach the
client: the query, cast to the table's types (:mod:`tablestore.spark.table_types`, with a
PARTITION clause's static values as literal columns), runs as a Spark job whose tasks write the
data files (:mod:`tablestore.spark.tasks.write_files`); the client then commits them in one
snapshot (:mod:`tablestore.spark.commit`): an append, an overwrite by filter (static) or a
dynamic partition overwrite, validated against the table as it was loaded before the query ran,
and marked with the write's id, or with the session's ``tablestore.commit-id`` when one is set
(``SET tablestore.commit-id = 'job-42'``): an INSERT whose commit id is already in the history of
the branch it writes commits nothing (a re-run or a retry of the same work applies once; see
:mod:`tablestore.table.update.identity`). The option stays set until ``RESET tablestore.commit-id``.

The query's columns are matched to the table's by position, as in Spark SQL. A value is only
converted where SQL's store assignment allows it (numbers to wider or other numeric types,
with an error on overflow; dates to timestamps); anything else fails before any file is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tablestore.errors import SchemaError, ValidationError
from tablestore.spark.commit import OVERWRITE, REPLACE_PARTITIONS, FilesCommit
from tablestore.spark.table_types import static_column, typed_for_table
from tablestore.spark.tasks.write_files import WrittenFiles, commit_written, table_target, write_files
from tablestore.spec.expressions.expression_tree import And, EqualTo, Expression, IsNull, Reference
from tablestore.spec.partitioning.transforms import IdentityTransform
from tablestore.spec.schemas import conversions
from tablestore.spec.schemas.types import sql_type_name
from tablestore.sql.options import COMMIT_ID, INSERT_OVERWRITE_MODE
from tablestore.sql.parse import statements as st
from tablestore.sql.plan.planner import spark_errors
from tablestore.sql.result import StatementResult
from tablestore.table import CommitIdentity

if TYPE_CHECKING:
    from tablestore.sql.context import SessionContext
    from tablestore.table import Table

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


def write_query(context: SessionContext, table: Table, df: Any) -> WrittenFiles:
    """Spark tasks write the rows of ``df`` (typed for ``table``) as data files; nothing commits."""
    with spark_errors():
        return write_files(df, table_target(table, context.config.model_dump_json()))


def insert(context: SessionContext, s: st.Insert) -> StatementResult:
    """INSERT INTO and INSERT OVERWRITE (the handler of :class:`~tablestore.sql.parse.statements.Insert`)."""
    _, _, table = context.write_table(s.name)
    return run_insert(context, table, s)


def run_insert(context: SessionContext, table: Table, s: st.Insert) -> StatementResult:
    clause = resolve_partition_clause(table, s.partition)
    static = clause.static
    targets = _targets(table, s, clause)
    df = context.planner().dataframe(s.query, s.query_tokens)
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
    commit_id = context.options.get(COMMIT_ID)
    identity = CommitIdentity(commit_id) if commit_id else None
    if not s.overwrite:
        if written.files:
            commit_written(table, written, identity=identity)
        return StatementResult(affected=rows)
    if static and (not clause.dynamic or mode == "static"):
        # Every row the PARTITION clause selects is replaced, even by an empty query (Hive's rule).
        condition: Expression | None = None
        for name, value in static.items():
            term: Expression = IsNull(Reference(name)) if value is None else EqualTo(Reference(name), value)
            condition = term if condition is None else And(condition, term)
        commit_written(table, written, FilesCommit(OVERWRITE, filter=condition), identity)
    elif mode == "static" or not table.spec().fields:
        commit_written(table, written, FilesCommit(OVERWRITE), identity)
    else:
        commit_written(table, written, FilesCommit(REPLACE_PARTITIONS), identity)
    return StatementResult(affected=rows)
