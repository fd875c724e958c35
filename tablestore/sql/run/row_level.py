"""Execution of row-level DML (issue 6): DELETE, UPDATE and MERGE.

- A DELETE whose WHERE is a plain filter on the table's columns runs in the table core, with
  push-down (whole files and partitions dropped in metadata) and no Spark.
- Anything else runs its condition and expressions in Spark: the target is read at its current
  snapshot with two hidden columns, ``_file`` and ``_pos`` (by Spark's Parquet reader when the
  files have no deletes, else the ``tablestore_rows`` source; only the columns a MERGE uses), the
  statement becomes one Spark query over it (subqueries, joins and functions included) whose
  rows are its effect (each affected row's file, position, deleted or updated, new values; rows
  to insert), and Spark tasks apply it per data file with the table core's per-file functions:
  position deletes or deletion vectors (merge-on-read), file rewrites (copy-on-write), new
  rows. The driver commits once, validated against the snapshot Spark read
  (``tablestore.spark.tasks.row_level_tasks``); no row reaches it.

The parts of a WHERE that are plain filters also prune the files Spark reads, and serve as the
conflict-detection filter under serializable isolation. A MERGE reads only the target columns
its query names, and, when its source is deterministic, first keeps only the target rows whose
ON keys the source has (a semi-join Spark can broadcast), so the outer join does not shuffle
the whole target.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from tablestore.errors import (
    FilterError,
    NoSuchNamespaceError,
    NoSuchTableError,
    SchemaError,
    UnsupportedError,
    ValidationError,
)
from tablestore.spark.options import quote_name
from tablestore.spark.table_types import typed_assignments
from tablestore.spark.tasks.row_level_tasks import DELETE, INSERT, UPDATE, RowLevelOutcome, apply_changes
from tablestore.spark.tasks.row_source import SOURCE_NAME, native_row_positions, register
from tablestore.spec.expressions.binding import bind
from tablestore.spec.expressions.expression_parser import parse_filter
from tablestore.spec.expressions.expression_tree import AlwaysTrue, BooleanExpression
from tablestore.sql.options import COMMIT_ID
from tablestore.sql.parse.statements import DeleteFrom, MergeClause, MergeInto, UpdateTable
from tablestore.sql.plan.planner import METADATA_TABLES, QueryPlanner, parse_query, spark_errors
from tablestore.sql.result import StatementResult
from tablestore.table import CommitIdentity
from tablestore.table.ops.row_level import RowLevelOperation, check_assignable
from tablestore.table.write.conform import conform_to_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from tablestore.catalog.base import Catalog
    from tablestore.spec.metadata.table_metadata import Snapshot
    from tablestore.sql.context import SessionContext
    from tablestore.table import Table

STREAMING_ERROR = "DELETE/UPDATE TABLE is not supported for streaming mode now"
TARGET_MARKER = "__tablestore_target__"
DUPLICATE_MATCH_ERROR = ("MERGE matched a single row of the target table with several rows of the source; "
                         "make the source's keys unique (for example with a GROUP BY or a window)")
# The upsert shortcut (Table.merge) holds its source in this process; only a source table of at
# most this many rows takes it, so the client's memory stays bounded whatever the statement.
UPSERT_SOURCE_MAX_ROWS = 250_000
_view_ids = itertools.count(1)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _conjuncts(sql: str) -> list[exp.Expr]:
    tree = parse_query(f"SELECT 1 WHERE {sql}").args["where"].this
    return list(tree.flatten()) if isinstance(tree, exp.And) else [tree]


def _plain_filter(sql: str | None, qualifiers: set[str], table: Table) -> tuple[BooleanExpression | None, bool]:
    """The plain-filter part of a WHERE (AND of what the table core can evaluate) and whether it is all of it."""
    if sql is None:
        return AlwaysTrue(), True
    parts: list[BooleanExpression] = []
    complete = True
    for conjunct in _conjuncts(sql):
        node = conjunct.copy()
        if any(True for _ in node.find_all(exp.Subquery, exp.Exists, exp.Select)):
            complete = False
            continue
        for column in node.find_all(exp.Column):
            if column.table and column.table.lower() in qualifiers:
                column.set("table", None)
        try:
            expr = parse_filter(node.sql(dialect="spark"))
            bind(table.schema(), expr)
        except (FilterError, ValidationError):
            complete = False
            continue
        parts.append(expr)
    if not parts:
        return None, complete
    out = parts[0]
    for p in parts[1:]:
        out = out & p
    return out, complete


def _target_columns(sql: str, alias: str, columns: list[str]) -> list[str]:
    """The target's columns that a row-level statement's query can read, in the table's order:
    every column qualified with the target's alias, and every unqualified one (or struct path)
    that starts with a target column's name (it may be the target's). A ``*`` of the target (``t.*``, or a bare ``*``
    outside a subquery of its own) reads them all. The target's rows are then read with only
    these (an upsert's UPDATE SET * and INSERT * need only the keys)."""
    tree = parse_query(sql)
    names = {c.lower(): c for c in columns}
    used: set[str] = set()
    for star in tree.find_all(exp.Star):
        parent = star.parent
        if isinstance(parent, exp.Column) and (parent.table or "").lower() not in ("", alias.lower()):
            continue
        select = star.find_ancestor(exp.Select)
        if select is tree or (isinstance(parent, exp.Column) and parent.table):
            return list(columns)
    for column in tree.find_all(exp.Column):
        # The path's head is the alias (t.x, t.s.f) or, unqualified, maybe a column (x, s.f).
        parts = [p.name.lower() for p in column.parts]
        head = parts[1] if parts[0] == alias.lower() and len(parts) > 1 else parts[0]
        if head in names:
            used.add(names[head])
    return [c for c in columns if c in used]


def source_table_name(source: str) -> tuple[str, ...] | None:
    """The name's parts when a MERGE source is a bare table name (no query, no time travel)."""
    table = parse_query(f"SELECT * FROM {source}").args["from_"].this
    if not isinstance(table, exp.Table) or table.args.get("version") or isinstance(table.this, exp.Func):
        return None
    return tuple(part.name for part in table.parts)


def _key_pairs(on: str, target: str, source: str) -> list[tuple[str, str]]:
    """The ``target.x = source.y`` equalities among the top-level ANDs of a MERGE's ON, as
    (target expression, source expression) Spark SQL: only such a pair is a join key."""
    out = []
    for conjunct in _conjuncts(on):
        if not (isinstance(conjunct, exp.EQ) and isinstance(conjunct.left, exp.Column)
                and isinstance(conjunct.right, exp.Column)):
            continue
        sides = [(c.table or "").lower() for c in (conjunct.left, conjunct.right)]
        if sides == [target.lower(), source.lower()]:
            out.append((conjunct.left.sql(dialect="spark"), conjunct.right.sql(dialect="spark")))
        elif sides == [source.lower(), target.lower()]:
            out.append((conjunct.right.sql(dialect="spark"), conjunct.left.sql(dialect="spark")))
    return out


def _check_batch(context: SessionContext) -> None:
    if str(context.options.runtime_mode).lower() == "streaming":
        raise UnsupportedError(STREAMING_ERROR)


def _target_planner(context: SessionContext, catalog: Catalog, identifier: tuple[str, ...], table: Table,
                    prune: BooleanExpression | None, columns: list[str] | None = None) -> QueryPlanner:
    """A planner that reads the bare name ``TARGET_MARKER`` as the target's rows at its current
    snapshot, with ``_file`` and ``_pos`` (only ``columns`` of them when given)."""
    spark = context.spark
    register(spark)
    planner = context.planner()
    snapshot = table.current_snapshot()
    assert snapshot is not None
    options = {"config": planner.config_json, "snapshot-id": str(snapshot.snapshot_id)}
    if prune is not None and not isinstance(prune, AlwaysTrue):
        options["filter"] = str(prune)
    if columns is not None:
        options["columns"] = ",".join(columns)
    name = quote_name((catalog.name, *identifier))
    view = f"__tablestore_rows_{next(_view_ids)}"
    with spark_errors():
        # Spark's Parquet reader when the files allow it, else the tablestore_rows source.
        df = native_row_positions(spark, name, options)
        if df is None:
            df = spark.read.format(SOURCE_NAME).options(**options).load(name)
        df.createOrReplaceTempView(view)
    planner.bind(TARGET_MARKER, view)
    return planner


def commit_identity(context: SessionContext) -> CommitIdentity | None:
    """``SET tablestore.commit-id``: a statement retried with it after an unknown outcome finds
    the commit that landed and applies nothing twice (as INSERT does)."""
    commit_id = context.options.get(COMMIT_ID)
    return CommitIdentity(commit_id) if commit_id else None


def _apply(context: SessionContext, table: Table, snapshot: Snapshot | None, operation: RowLevelOperation,
           changes: DataFrame,
           conflict_filter: BooleanExpression) -> RowLevelOutcome:
    """The statement's effect written by Spark tasks and committed once (tablestore.spark.tasks.row_level_tasks)."""
    with spark_errors():
        return apply_changes(table, snapshot, operation, changes, conflict_filter=conflict_filter,
                             duplicate_error=DUPLICATE_MATCH_ERROR, commit_id=commit_identity(context))


# -- DELETE ------------------------------------------------------------------------------------------
def delete_from(context: SessionContext, s: DeleteFrom) -> StatementResult:
    _check_batch(context)
    catalog, identifier, table = context.write_table(s.name)
    alias = s.alias or identifier[-1]
    plain, complete = _plain_filter(s.where, {alias.lower(), identifier[-1].lower()}, table)
    if complete:
        assert plain is not None
        return StatementResult(affected=table.delete(plain, commit_id=commit_identity(context)))
    snapshot = table.current_snapshot()
    if snapshot is None:
        return StatementResult(affected=0)
    planner = _target_planner(context, catalog, identifier, table, plain)
    df = planner.dataframe(f"SELECT `_file`, `_pos`, {DELETE} AS `__kind` FROM {TARGET_MARKER} AS "
                           f"{_quote(alias)} WHERE {s.where}")
    outcome = _apply(context, table, snapshot, RowLevelOperation.DELETE, df, plain or AlwaysTrue())
    return StatementResult(affected=outcome.deleted)


# -- UPDATE ------------------------------------------------------------------------------------------
def update_table(context: SessionContext, s: UpdateTable) -> StatementResult:
    _check_batch(context)
    catalog, identifier, table = context.write_table(s.name)
    names = check_assignable(table, [c for c, _ in s.assignments])
    values = dict(zip(names, (v for _, v in s.assignments), strict=True))
    alias = s.alias or identifier[-1]
    plain, _ = _plain_filter(s.where, {alias.lower(), identifier[-1].lower()}, table)
    snapshot = table.current_snapshot()
    planner = _target_planner(context, catalog, identifier, table, plain) if snapshot is not None else None
    select = ", ".join(
        f"({values[c]}) AS {_quote(c)}" if c in values else f"{_quote(alias)}.{_quote(c)}"
        for c in table.schema().column_names
    )
    where = f" WHERE {s.where}" if s.where else ""
    if planner is None:
        # An empty table: still check the statement (unknown columns, types) in Spark.
        planner = context.planner()
        from_clause = f"{'.'.join(_quote(p) for p in (catalog.name, *identifier))} AS {_quote(alias)}"
    else:
        from_clause = f"{TARGET_MARKER} AS {_quote(alias)}"
    files = f"`_file`, `_pos`, {UPDATE} AS `__kind`, " if snapshot is not None else ""
    df = planner.dataframe(f"SELECT {files}{select} FROM {from_clause}{where}")
    df = typed_assignments(df, table, names, "UPDATE")
    if snapshot is None:
        return StatementResult(affected=0)
    outcome = _apply(context, table, snapshot, RowLevelOperation.UPDATE, df, plain or AlwaysTrue())
    return StatementResult(affected=outcome.updated)


# -- MERGE -------------------------------------------------------------------------------------------
def _deterministic(planner: QueryPlanner, source: str) -> bool:
    """Whether Spark's analysed plan of the MERGE source is deterministic (False when it
    cannot tell, as over Spark Connect)."""
    df = planner.dataframe(f"SELECT * FROM {source} AS __source")
    try:
        return bool(df._jdf.queryExecution().analyzed().deterministic())
    except AttributeError:
        return False


def _same_typed_table(context: SessionContext, name: tuple[str, ...], target: Table) -> pa.Table | None:
    """The rows of a USING table read by the table core, when the table has the target's
    columns (by name, in any order and case) with the same types, so no cast is needed, and
    at most ``UPSERT_SOURCE_MAX_ROWS`` rows (its snapshot summary's count); else None, and
    the statement runs in Spark. This process holds the rows it returns, hence the cap."""
    if len(name) >= 2 and name[-1].lower() in METADATA_TABLES:
        return None
    try:
        catalog, identifier = context.manager.resolve_table(name)
        if not catalog.table_exists(identifier):
            return None  # a view: Spark runs its query
        source = catalog.load_table(identifier)
    except (ValidationError, NoSuchTableError, NoSuchNamespaceError, LookupError):
        return None
    schema = target.schema()
    wanted = {f.name.lower(): f for f in schema.fields}
    fields = source.schema().fields
    if len(fields) != len(wanted) or any(
            f.name.lower() not in wanted or wanted[f.name.lower()].field_type != f.field_type for f in fields):
        return None
    snapshot = source.current_snapshot()
    records = snapshot.summary.get("total-records") if snapshot is not None else "0"
    if records is None or not records.isdigit() or int(records) > UPSERT_SOURCE_MAX_ROWS:
        return None
    data = source.scan().to_arrow()
    by_name = {c.lower(): c for c in data.column_names}
    data = data.select([by_name[c.lower()] for c in schema.column_names]).rename_columns(schema.column_names)
    return conform_to_schema(data, schema)


def _upsert(context: SessionContext, s: MergeInto, table: Table, t: str, src: str,
            source_table: tuple[str, ...] | None) -> StatementResult | None:
    """A MERGE that is a plain upsert from a small table, run by the table's merge
    (``Table.merge``), or None when the statement is not one.

    An upsert: ON holds only ``t.k = s.k`` equalities, and the clauses are ``WHEN MATCHED
    THEN UPDATE SET *`` and/or ``WHEN NOT MATCHED THEN INSERT *`` without conditions, and
    the source is a table of the target's columns and types with at most
    ``UPSERT_SOURCE_MAX_ROWS`` rows, which the table core reads (``_same_typed_table``). The
    merge then matches each target file against the source's sorted keys and changes only
    the files that hold one, one file at a time on the table's engine, without a Spark job
    (for a small source that is most of the statement's time saved). Every other MERGE, a
    large or computed source included, runs in Spark below, where Spark tasks write the
    files and no row reaches this process."""
    keys = _key_pairs(s.on, t, src) if s.on else []
    if source_table is None or not keys or len(keys) != len(_conjuncts(s.on)):
        return None
    schema = table.schema()
    key_columns = {k.split(".")[-1].strip("`").lower() for k, _ in keys}
    if any((schema.find_column_name(i) or "").lower() not in key_columns for i in schema.identifier_field_ids):
        return None  # UPDATE SET * keeps a row's identifier fields, which only the general path does
    kinds = sorted((c.matched, c.action) for c in s.clauses)
    if kinds not in ([(False, "insert")], [(True, "update")], [(False, "insert"), (True, "update")]):
        return None
    if any(c.condition or c.assignments is not None or c.insert_values is not None or c.insert_columns
           for c in s.clauses):
        return None
    source = _same_typed_table(context, source_table, table)
    if source is None:
        return None
    builder = table.merge(source, on=s.on, source_alias=src, target_alias=t)
    for clause in s.clauses:
        if clause.matched:
            builder.when_matched_update_all()
        else:
            builder.when_not_matched_insert_all()
    result = builder.execute(commit_identity(context))
    total = result.updated + result.deleted + result.inserted
    return StatementResult(
        ["num_affected_rows", "num_updated_rows", "num_deleted_rows", "num_inserted_rows"],
        [[total, result.updated, result.deleted, result.inserted]], affected=total,
    )


def merge_into(context: SessionContext, s: MergeInto) -> StatementResult:
    _check_batch(context)
    catalog, identifier, table = context.write_table(s.name)
    schema = table.schema()
    columns = schema.column_names
    identifier_columns = {schema.find_column_name(i) for i in schema.identifier_field_ids}
    t = s.alias or identifier[-1]
    src = s.source_alias or "__source"
    if t.lower() == src.lower():
        raise ValidationError("the target and the source of MERGE need different aliases")
    for clause in s.clauses:
        if clause.action == "update" and clause.assignments is not None:
            check_assignable(table, [c for c, _ in clause.assignments])
    source_table = source_table_name(s.source)
    upsert = _upsert(context, s, table, t, src, source_table)
    if upsert is not None:
        return upsert
    snapshot = table.current_snapshot()
    matched = f"{_quote(t)}.`_file` IS NOT NULL"

    def when(clause: MergeClause) -> str:
        condition = f" AND ({clause.condition})" if clause.condition else ""
        return f"{matched if clause.matched else 'NOT (' + matched + ')'}{condition}"

    def value(clause: MergeClause, column: str) -> str:
        if clause.action == "delete":
            return "NULL"
        if clause.action == "update":
            if clause.assignments is None:
                keep = column in identifier_columns
                return f"{_quote(t) if keep else _quote(src)}.{_quote(column)}"
            given = {c.lower(): v for c, v in clause.assignments}
            return f"({given[column.lower()]})" if column.lower() in given else f"{_quote(t)}.{_quote(column)}"
        if clause.insert_values is None:
            return f"{_quote(src)}.{_quote(column)}"
        names = clause.insert_columns or tuple(columns)
        if clause.insert_columns is None and len(clause.insert_values) != len(columns):
            raise ValidationError(f"INSERT VALUES gives {len(clause.insert_values)} value(s) but {table.name} "
                                  f"has {len(columns)} column(s); name the columns")
        unknown = [n for n in names if n.lower() not in {c.lower() for c in columns}]
        if unknown:
            raise SchemaError(f"MERGE inserts unknown column(s) {', '.join(unknown)}; the columns are "
                              f"{', '.join(columns)}")
        given = {n.lower(): v for n, v in zip(names, clause.insert_values, strict=True)}
        return f"({given[column.lower()]})" if column.lower() in given else "NULL"

    action = "CASE " + " ".join(f"WHEN {when(c)} THEN {i}" for i, c in enumerate(s.clauses)) + " ELSE -1 END"
    values = [
        "CASE " + " ".join(f"WHEN {when(c)} THEN {value(c, col)}" for c in s.clauses) + f" END AS {_quote(col)}"
        for col in columns
    ]
    join = "RIGHT OUTER JOIN" if any(not c.matched for c in s.clauses) else "INNER JOIN"

    def select(target: str, source: str = s.source) -> str:
        return (f"SELECT {_quote(t)}.`_file` AS `__file`, {_quote(t)}.`_pos` AS `__pos`, "
                f"{action} AS `__action`, {', '.join(values)} FROM {target} AS {_quote(t)} {join} "
                f"{source} AS {_quote(src)} ON {s.on}")

    if snapshot is None:
        planner = context.planner()
        target = f"(SELECT *, CAST(NULL AS STRING) AS `_file`, CAST(NULL AS BIGINT) AS `_pos` FROM " \
                 f"{'.'.join(_quote(p) for p in (catalog.name, *identifier))})"
    else:
        used = _target_columns(select(TARGET_MARKER), t, columns)
        planner = _target_planner(context, catalog, identifier, table, None,
                                  used if len(used) < len(columns) else None)
        target = TARGET_MARKER
    if source_table is not None:
        # A USING table is read whole, so Spark's Parquet reader may read it (the data
        # source's Arrow-to-JVM transfer was a large share of a large MERGE). A name that
        # does not resolve is left to the planner, which says what is wrong with it.
        with contextlib.suppress(ValidationError, NoSuchTableError, NoSuchNamespaceError, LookupError):
            source_catalog, source_identifier = context.manager.resolve_table(source_table)
            planner.native_reads.add((source_catalog.name, *source_identifier))
    query = f"SELECT * FROM ({select(target)}) WHERE `__action` >= 0"
    keys = _key_pairs(s.on, t, src) if snapshot is not None else []
    if keys and _deterministic(planner, s.source):
        # Only target rows whose keys the source has can match: a semi-join on the keys
        # (broadcast when the source is small) drops the others before the outer join, which
        # otherwise shuffles every target row (it cannot broadcast its preserved source).
        # The source is a CTE read once per reference at one snapshot; a deterministic
        # source gives both references the same rows.
        source_cte = "__merge_source"
        target_keys = ", ".join(k for k, _ in keys)
        source_keys = ", ".join(v for _, v in keys)
        filtered = (f"(SELECT * FROM {TARGET_MARKER} AS {_quote(t)} WHERE ({target_keys}) IN "
                    f"(SELECT {source_keys} FROM {source_cte} AS {_quote(src)}))")
        query = (f"WITH {source_cte} AS (SELECT * FROM {s.source} AS {_quote(src)}) SELECT * FROM "
                 f"({select(filtered, source_cte)}) WHERE `__action` >= 0")
    df = typed_assignments(planner.dataframe(query), table, list(columns), "MERGE")
    kinds = {"delete": DELETE, "update": UPDATE, "insert": INSERT}
    kind = "CASE `__action` " + " ".join(f"WHEN {i} THEN {kinds[c.action]}" for i, c in enumerate(s.clauses)) \
        + " END"
    changes = df.selectExpr("`__file` AS `_file`", "`__pos` AS `_pos`", f"{kind} AS `__kind`",
                            *[_quote(c) for c in columns])
    outcome = _apply(context, table, snapshot, RowLevelOperation.MERGE, changes, AlwaysTrue())
    counts = {"update": outcome.updated, "delete": outcome.deleted, "insert": outcome.inserted}
    total = sum(counts.values())
    return StatementResult(
        ["num_affected_rows", "num_updated_rows", "num_deleted_rows", "num_inserted_rows"],
        [[total, counts["update"], counts["delete"], counts["insert"]]], affected=total,
    )
