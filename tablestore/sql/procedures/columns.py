"""Column-merge procedures (issue 7), in Iceberg's ``CALL <catalog>.system.<name>(...)`` form:

    CALL lake.system.merge_columns(table => 'db.t', source => 'db.s', on => 'user_id', columns => 'segment,ltv')
    CALL lake.system.update_columns(table => 'db.t', source => 'db.s', on => 'user_id', columns => 'segment')

``table`` and ``source`` are table names in the procedure's catalog (``database.table``) or in
another catalog (``catalog.database.table``); ``on`` and ``columns`` are comma-separated names.
The merge runs in Spark tasks, classic or Connect (:mod:`tablestore.spark.tasks.column_merge_tasks`):
no row of the source or the table passes through the session's process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tablestore.errors import ValidationError
from tablestore.sql.options import COMMIT_ID
from tablestore.sql.procedures.registry import Parameter, procedure
from tablestore.sql.result import StatementResult

if TYPE_CHECKING:
    from tablestore.catalog.base import Catalog
    from tablestore.sql.context import SessionContext
    from tablestore.table import Table

_COMMON = (
    Parameter("table", required=True, doc="the table to merge into"),
    Parameter("source", required=True, doc="the table to read the keys and new values from"),
    Parameter("on", required=True, doc="comma-separated key columns"),
    Parameter("columns", doc="comma-separated columns (merge: default every non-key column of the source)"),
    Parameter("duplicates", doc="duplicate source keys: 'error' (default), 'first' or 'last'"),
)


def _text(args: dict[str, Any], name: str, default: str | None = None) -> str | None:
    value = args.get(name, default)
    if value is not None and not isinstance(value, str):
        raise ValidationError(f"argument {name!r} must be a string; got {value!r}")
    return value


def _table(session: SessionContext, catalog: Catalog, name: str) -> Table:
    parts = tuple(p.strip().strip("`") for p in name.split("."))
    if len(parts) == 3 and parts[0] in session.manager.config.catalogs:
        catalog, parts = session.manager.catalog(parts[0]), parts[1:]
    elif len(parts) != 2:
        raise ValidationError(f"table names have the form [catalog.]database.table; got {name!r}")
    return session.load_table(catalog, parts)


def _run(session: SessionContext, catalog: Catalog, args: dict[str, Any], mode: str) -> StatementResult:
    target = _table(session, catalog, str(_text(args, "table")))
    source_table = _table(session, catalog, str(_text(args, "source")))
    on = [c.strip() for c in str(_text(args, "on")).split(",")]
    columns_text = _text(args, "columns")
    columns = [c.strip() for c in columns_text.split(",")] if columns_text else None
    if columns is None:
        if mode == "update":
            raise ValidationError("update_columns needs columns => 'a,b': the columns to update")
        columns = [c for c in source_table.schema().column_names if c not in on]
    unknown = [c for c in (*on, *columns) if source_table.schema().find_field_id(c) is None]
    if unknown:
        raise ValidationError(f"the source {source_table.name} has no column {unknown[0]!r}")
    duplicates = _text(args, "duplicates", "error") or "error"
    policy = _text(args, "null_policy", "keep") or "keep"
    # Spark tasks read the source and rewrite the fragments; this process plans and commits.
    from tablestore.spark.tasks.column_merge_tasks import merge_in_tasks, table_source
    from tablestore.sql.plan.planner import spark_errors

    with spark_errors():
        source = table_source(session.spark, source_table, [*on, *columns], session.config.model_dump_json())
        # SET tablestore.commit-id: a retried merge whose first commit landed applies nothing twice.
        outcome = merge_in_tasks(target, source, on, columns, mode, policy, duplicates,
                                 commit_id=session.options.get(COMMIT_ID) or None)
    snapshot = outcome.snapshot
    return StatementResult(
        ["rewritten_fragments", "snapshot_id"],
        [[outcome.rewritten, snapshot.snapshot_id if snapshot is not None else None]],
    )


@procedure("merge_columns", *_COMMON, doc="Add the source's columns to the table's rows, joined on the key.")
def merge_columns(session: SessionContext, catalog: Catalog, args: dict[str, Any]) -> StatementResult:
    return _run(session, catalog, args, "merge")


@procedure(
    "update_columns", *_COMMON,
    Parameter("null_policy", doc="'keep' (default): a NULL new value keeps the old; 'overwrite': it wins"),
    doc="Update the table's columns from the source: absent or NULL new values keep the old ones.",
)
def update_columns(session: SessionContext, catalog: Catalog, args: dict[str, Any]) -> StatementResult:
    return _run(session, catalog, args, "update")
