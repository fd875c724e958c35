"""Iceberg's ``create_changelog_view``: the changes between two snapshots as a temporary view.

    CALL cat.system.create_changelog_view(
        table => 'db.t',
        options => map('start-snapshot-id', '1', 'end-snapshot-id', '2'),  -- or start-/end-timestamp
        compute_updates => true, identifier_columns => array('id'),
        net_changes => false, changelog_view => 'v')

Arguments, defaults and the result (one row: ``changelog_view``) are Iceberg's Spark
procedure's: the view is named ``<table>_changes`` unless given; updates are computed when
``identifier_columns`` are given (or ``compute_updates => true``, with the table's identifier
fields). Beyond Iceberg: tables with delete files (merge-on-read position deletes, deletion
vectors, equality deletes) are read, not refused; on format v3 ``compute_updates => true``
pairs updates by row lineage when no key is known; and ``net_changes`` combines with updates.
The changelog is computed by Spark tasks (``spark/tasks/changelog_tasks.py``) and the view is
readable by every later statement of the session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tablestore.errors import ValidationError
from tablestore.sql.procedures.registry import Parameter, procedure
from tablestore.sql.result import StatementResult

if TYPE_CHECKING:
    from tablestore.catalog.base import Catalog
    from tablestore.sql.context import SessionContext

_OPTIONS = {"start-snapshot-id", "end-snapshot-id", "start-timestamp", "end-timestamp"}


def _option_int(options: dict[str, Any], name: str) -> int | None:
    value = options.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValidationError(f"create_changelog_view: option {name!r} must be a number, got {value!r}") from None


def _bool(value: Any, name: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ValidationError(f"create_changelog_view: {name} must be true or false, got {value!r}")


@procedure(
    "create_changelog_view",
    Parameter("table", required=True, doc="the table, as 'db.t'"),
    Parameter("changelog_view", doc="the temporary view's name (default: <table>_changes)"),
    Parameter("options", doc="map of start-snapshot-id, end-snapshot-id, start-timestamp, end-timestamp"),
    Parameter("compute_updates", doc="pair DELETE/INSERT of one key into UPDATE_BEFORE/UPDATE_AFTER"),
    Parameter("identifier_columns", doc="array of the columns that identify a row"),
    Parameter("net_changes", doc="collapse each row's changes in the range into its net change"),
)
def create_changelog_view(context: SessionContext, catalog: Catalog, args: dict[str, Any]) -> StatementResult:
    """The changes of a table between two snapshots as a temporary view, computed by Spark tasks."""
    from tablestore.spark.tasks.changelog_tasks import changelog_dataframe

    name = args["table"]
    if not isinstance(name, str):
        raise ValidationError(f"create_changelog_view: table must be a string like 'db.t', got {name!r}")
    table = catalog.load_table(name)
    options = args.get("options") or {}
    if not isinstance(options, dict):
        raise ValidationError("create_changelog_view: options must be a map(...) of strings")
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise ValidationError(f"create_changelog_view: unknown option(s) {', '.join(unknown)}; the options are "
                              f"{', '.join(sorted(_OPTIONS))}")
    identifier_columns = args.get("identifier_columns")
    if identifier_columns is not None and (not isinstance(identifier_columns, list)
                                           or not all(isinstance(c, str) for c in identifier_columns)):
        raise ValidationError("create_changelog_view: identifier_columns must be an array('col', ...)")
    compute = _bool(args.get("compute_updates"), "compute_updates")
    if compute is None:  # Iceberg computes updates by default only when identifier columns are given
        compute = identifier_columns is not None
    scan = table.changes(
        from_snapshot=_option_int(options, "start-snapshot-id"), to_snapshot=_option_int(options, "end-snapshot-id"),
        from_timestamp=_option_int(options, "start-timestamp"), to_timestamp=_option_int(options, "end-timestamp"),
        identifier_columns=identifier_columns, compute_updates=compute,
        net_changes=bool(_bool(args.get("net_changes"), "net_changes")))
    view = args.get("changelog_view") or f"{table.identifier[-1]}_changes"
    if not isinstance(view, str) or not view.replace("_", "").isalnum():
        raise ValidationError(f"create_changelog_view: changelog_view must be a plain name (letters, digits, _), "
                              f"got {view!r}")
    changelog_dataframe(context.spark, scan).createOrReplaceTempView(view)
    context.temp_views[view] = view
    return StatementResult(["changelog_view"], [[view]])
