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
from tablestore.spec.expressions.expression_parser import filter_from_tree
from tablestore.spec.expressions.expression_tree import AlwaysTrue, BooleanExpression
from tablestore.sql.options import COMMIT_ID
from tablestore.sql.parse.statements import DeleteFrom, MergeClause, MergeInto, UpdateTable
from tablestore.sql.plan import trees
from tablestore.sql.plan.planner import METADATA_TABLES, QueryPlanner, spark_errors
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


def _plain_filter(where: exp.Expr | None, qualifiers: set[str],
                  table: Table) -> tuple[BooleanExpression | None, bool]:
    """The plain-filter part of a WHERE (AND of what the table core can evaluate) and whether it is all of it."""
    if where is None:
        return AlwaysTrue(), True
    parts: list[BooleanExpression] = []
    complete = True
    for conjunct in trees.conjuncts(where):
        node = conjunct.copy()
        if any(True for _ in node.find_all(exp.Subquery, exp.Exists, exp.Select)):
            complete = False
            continue
        for column in node.find_all(exp.Column):
            if column.table and column.table.lower() in qualifiers:
                column.set("table", None)
        try:
            expr = filter_from_tree(node)
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


def _target_columns(tree: exp.Expr, alias: str, columns: list[str]) -> list[str]:
    """The target's columns that a row-level statement's query can read, in the table's order:
    every column qualified with the target's alias, and every unqualified one (or struct path)
    that starts with a target column's name (it may be the target's). A ``*`` of the target (``t.*``, or a bare ``*``
    outside a subquery of its own) reads them all. The target's rows are then read with only
    these (an upsert's UPDATE SET * and INSERT * need only the keys)."""
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


def source_table_name(source: exp.Expr) -> tuple[str, ...] | None:
    """The name's parts when a MERGE source is a bare table name (no query, no time travel)."""
    if not isinstance(source, exp.Table) or source.args.get("version") or isinstance(source.this, exp.Func):
        return None
    return tuple(part.name for part in source.parts)


def _key_pairs(on: exp.Expr, target: str, source: str) -> list[tuple[exp.Column, exp.Column]]:
    """The ``target.x = source.y`` equalities among the top-level ANDs of a MERGE's ON, as
    (target column, source column): only such a pair is a join key."""
    out = []
    for conjunct in trees.conjuncts(on):
        if not (isinstance(conjunct, exp.EQ) and isinstance(conjunct.left, exp.Column)
                and isinstance(conjunct.right, exp.Column)):
            continue
        sides = [(c.table or "").lower() for c in (conjunct.left, conjunct.right)]
        if sides == [target.lower(), source.lower()]:
            out.append((conjunct.left, conjunct.right))
        elif sides == [source.lower(), target.lower()]:
            out.append((conjunct.right, conjunct.left))
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
        df = native_row_positions(spark, name, options, prune)
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
    # SELECT _file, _pos, DELETE AS __kind FROM target AS alias WHERE <the statement's WHERE>
    query = trees.select(trees.column("_file"), trees.column("_pos"), trees.aliased(trees.number(DELETE), "__kind"),
                   from_=trees.relation(exp.Table(this=trees.identifier(TARGET_MARKER)), alias),
                   where=s.where.copy() if s.where is not None else None)
    outcome = _apply(context, table, snapshot, RowLevelOperation.DELETE, planner.dataframe(query),
                     plain or AlwaysTrue())
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
    # SELECT [_file, _pos, UPDATE AS __kind,] (value) AS c | alias.c, ... FROM target AS alias [WHERE ...]
    assigned = [
        trees.aliased(exp.Paren(this=values[c].copy()), c) if c in values else trees.column(c, alias)
        for c in table.schema().column_names
    ]
    if planner is None:
        # An empty table: still check the statement (unknown columns, types) in Spark.
        planner = context.planner()
        target = trees.table_name((catalog.name, *identifier))
        files: list[exp.Expr] = []
    else:
        target = exp.Table(this=trees.identifier(TARGET_MARKER))
        files = [trees.column("_file"), trees.column("_pos"), trees.aliased(trees.number(UPDATE), "__kind")]
    query = trees.select(*files, *assigned, from_=trees.relation(target, alias),
                   where=s.where.copy() if s.where is not None else None)
    df = typed_assignments(planner.dataframe(query), table, names, "UPDATE")
    if snapshot is None:
        return StatementResult(affected=0)
    outcome = _apply(context, table, snapshot, RowLevelOperation.UPDATE, df, plain or AlwaysTrue())
    return StatementResult(affected=outcome.updated)


# -- MERGE -------------------------------------------------------------------------------------------
def _deterministic(planner: QueryPlanner, source: exp.Expr) -> bool:
    """Whether Spark's analysed plan of the MERGE source is deterministic (False when it
    cannot tell, as over Spark Connect)."""
    df = planner.dataframe(trees.select(exp.Star(), from_=trees.relation(source, "__source")))
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
    keys = _key_pairs(s.on, t, src)
    if source_table is None or not keys or len(keys) != len(trees.conjuncts(s.on)):
        return None
    schema = table.schema()
    key_columns = {k.name.lower() for k, _ in keys}
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
    builder = table.merge(source, on=s.on.copy(), source_alias=src, target_alias=t)
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

    def when(clause: MergeClause) -> exp.Expr:
        # t._file IS NOT NULL [AND (condition)], or NOT (t._file IS NOT NULL) [AND (condition)]
        matched = trees.is_not_null(trees.column("_file", t))
        side = matched if clause.matched else trees.not_(matched)
        return trees.and_(side, clause.condition.copy()) if clause.condition is not None else side

    def value(clause: MergeClause, name: str) -> exp.Expr:
        if clause.action == "delete":
            return exp.Null()
        if clause.action == "update":
            if clause.assignments is None:
                keep = name in identifier_columns
                return trees.column(name, t if keep else src)
            given = {c.lower(): v for c, v in clause.assignments}
            return exp.Paren(this=given[name.lower()].copy()) if name.lower() in given else trees.column(name, t)
        if clause.insert_values is None:
            return trees.column(name, src)
        names = clause.insert_columns or tuple(columns)
        if clause.insert_columns is None and len(clause.insert_values) != len(columns):
            raise ValidationError(f"INSERT VALUES gives {len(clause.insert_values)} value(s) but {table.name} "
                                  f"has {len(columns)} column(s); name the columns")
        unknown = [n for n in names if n.lower() not in {c.lower() for c in columns}]
        if unknown:
            raise SchemaError(f"MERGE inserts unknown column(s) {', '.join(unknown)}; the columns are "
                              f"{', '.join(columns)}")
        values = {n.lower(): v for n, v in zip(names, clause.insert_values, strict=True)}
        return exp.Paren(this=values[name.lower()].copy()) if name.lower() in values else exp.Null()

    inserts = any(not c.matched for c in s.clauses)

    def merged(target: exp.Expr, source: exp.Expr) -> exp.Select:
        """SELECT t._file AS __file, t._pos AS __pos, CASE ... END AS __action, CASE ... END AS c, ...
        FROM target AS t {RIGHT OUTER | INNER} JOIN source AS src ON <the statement's ON>"""
        action = trees.case([(when(c), trees.number(i)) for i, c in enumerate(s.clauses)], trees.number(-1))
        values = [trees.aliased(trees.case([(when(c), value(c, name)) for c in s.clauses]), name) for name in columns]
        join = exp.Join(this=trees.relation(source, src), on=s.on.copy(),
                        **({"side": "RIGHT", "kind": "OUTER"} if inserts else {"kind": "INNER"}))
        return trees.select(trees.aliased(trees.column("_file", t), "__file"),
                            trees.aliased(trees.column("_pos", t), "__pos"), trees.aliased(action, "__action"),
                            *values, from_=trees.relation(target, t), joins=(join,))

    def effective(select: exp.Select) -> exp.Select:
        # SELECT * FROM (select) WHERE __action >= 0
        return trees.select(exp.Star(), from_=trees.subquery(select),
                            where=exp.GTE(this=trees.column("__action"), expression=trees.number(0)))

    marker = exp.Table(this=trees.identifier(TARGET_MARKER))
    if snapshot is None:
        planner = context.planner()
        # (SELECT *, CAST(NULL AS STRING) AS _file, CAST(NULL AS BIGINT) AS _pos FROM the table)
        target: exp.Expr = trees.subquery(trees.select(
            exp.Star(), trees.aliased(trees.cast_null("TEXT"), "_file"),
            trees.aliased(trees.cast_null("BIGINT"), "_pos"),
            from_=trees.table_name((catalog.name, *identifier))))
    else:
        used = _target_columns(merged(marker, s.source), t, columns)
        planner = _target_planner(context, catalog, identifier, table, None,
                                  used if len(used) < len(columns) else None)
        target = marker
    if source_table is not None:
        # A USING table is read whole, so Spark's Parquet reader may read it (the data
        # source's Arrow-to-JVM transfer was a large share of a large MERGE). A name that
        # does not resolve is left to the planner, which says what is wrong with it.
        with contextlib.suppress(ValidationError, NoSuchTableError, NoSuchNamespaceError, LookupError):
            source_catalog, source_identifier = context.manager.resolve_table(source_table)
            planner.native_reads.add((source_catalog.name, *source_identifier))
    query = effective(merged(target, s.source))
    keys = _key_pairs(s.on, t, src) if snapshot is not None else []
    if keys and _deterministic(planner, s.source):
        # Only target rows whose keys the source has can match: a semi-join on the keys
        # (broadcast when the source is small) drops the others before the outer join, which
        # otherwise shuffles every target row (it cannot broadcast its preserved source).
        # The source is a CTE read once per reference at one snapshot; a deterministic
        # source gives both references the same rows.
        source_cte = exp.Table(this=trees.identifier("__merge_source"))
        # (SELECT * FROM target AS t WHERE (t.k, ...) IN (SELECT s.k, ... FROM __merge_source AS src))
        in_source = exp.In(this=exp.Tuple(expressions=[k.copy() for k, _ in keys]), query=trees.subquery(
            trees.select(*(v.copy() for _, v in keys), from_=trees.relation(source_cte, src))))
        filtered = trees.subquery(trees.select(exp.Star(), from_=trees.relation(marker, t), where=in_source))
        # WITH __merge_source AS (SELECT * FROM source AS src) SELECT * FROM (...) WHERE __action >= 0
        query = trees.with_cte(effective(merged(filtered, source_cte)), "__merge_source",
                               trees.select(exp.Star(), from_=trees.relation(s.source, src)))
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
