"""Iceberg's maintenance procedures: ``CALL cat.system.expire_snapshots(table => 'db.t', ...)``.

Argument names and result columns follow Iceberg's Spark procedures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tablestore.errors import ValidationError
from tablestore.maintenance.compaction import rewrite_data_files, rewrite_manifests, rewrite_position_deletes
from tablestore.maintenance.expire import expire_snapshots, result_row
from tablestore.maintenance.orphans import remove_orphan_files
from tablestore.option_values import truth
from tablestore.sql.options import COMMIT_ID
from tablestore.sql.procedures.arguments import int_argument, table_argument, time_argument
from tablestore.sql.procedures.registry import Parameter, procedure
from tablestore.sql.result import StatementResult

if TYPE_CHECKING:
    from tablestore.catalog.base import Catalog


def _options(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError(f"options must be a map('key', 'value', ...), got {value!r}")
    return {str(k): v for k, v in value.items()}


@procedure(
    "expire_snapshots",
    Parameter("table", required=True), Parameter("older_than"), Parameter("retain_last"),
    Parameter("max_concurrent_deletes"), Parameter("stream_results"), Parameter("snapshot_ids"),
    Parameter("clean_expired_metadata"),
    doc="Remove snapshots older than older_than (keeping retain_last) and the files only they used.",
)
def _expire(session: Any, catalog: Catalog, args: dict[str, Any]) -> StatementResult:
    ids = args.get("snapshot_ids")
    if ids is not None and not isinstance(ids, list):
        ids = [ids]
    result = expire_snapshots(
        table_argument(catalog, args), time_argument(args.get("older_than"), "older_than"),
        int_argument(args.get("retain_last"), "retain_last"), [int(i) for i in ids] if ids else None,
        max_concurrent_deletes=int_argument(args.get("max_concurrent_deletes"), "max_concurrent_deletes"),
    )
    row = result_row(result)
    return StatementResult(list(row), [list(row.values())])


@procedure(
    "remove_orphan_files",
    Parameter("table", required=True), Parameter("older_than"), Parameter("location"), Parameter("dry_run"),
    Parameter("max_concurrent_deletes"), Parameter("file_list_view"), Parameter("equal_schemes"),
    Parameter("equal_authorities"), Parameter("prefix_mismatch_mode"),
    doc="Delete files under the table location that no metadata references (older than 3 days by default).",
)
def _orphans(session: Any, catalog: Catalog, args: dict[str, Any]) -> StatementResult:
    result = remove_orphan_files(
        table_argument(catalog, args), time_argument(args.get("older_than"), "older_than"), args.get("location"),
        truth(args.get("dry_run") or False, "dry_run"),
        int_argument(args.get("max_concurrent_deletes"), "max_concurrent_deletes"),
    )
    return StatementResult(["orphan_file_location"], [[p] for p in result.orphan_file_locations])


@procedure(
    "rewrite_data_files",
    Parameter("table", required=True), Parameter("strategy"), Parameter("sort_order"), Parameter("options"),
    Parameter("where"),
    doc="Compact small files per partition (binpack or sort), applying deletes.",
)
def _rewrite_data(session: Any, catalog: Catalog, args: dict[str, Any]) -> StatementResult:
    strategy = args.get("strategy") or ("sort" if args.get("sort_order") else "binpack")
    # SET tablestore.commit-id: a retried compaction whose first commit landed rewrites nothing again.
    r = rewrite_data_files(table_argument(catalog, args), str(strategy), args.get("sort_order"), args.get("where"),
                           _options(args.get("options")), commit_id=session.options.get(COMMIT_ID) or None)
    columns = ["rewritten_data_files_count", "added_data_files_count", "rewritten_bytes_count",
               "failed_data_files_count", "removed_delete_files_count"]
    return StatementResult(columns, [[getattr(r, c) for c in columns]])


@procedure(
    "rewrite_manifests",
    Parameter("table", required=True), Parameter("use_caching"), Parameter("spec_id"),
    doc="Rewrite data manifests clustered by partition, in one commit.",
)
def _rewrite_manifests(session: Any, catalog: Catalog, args: dict[str, Any]) -> StatementResult:
    r = rewrite_manifests(table_argument(catalog, args), int_argument(args.get("spec_id"), "spec_id"))
    return StatementResult(["rewritten_manifests_count", "added_manifests_count"],
                           [[r.rewritten_manifests_count, r.added_manifests_count]])


def _rewrite_deletes(session: Any, catalog: Catalog, args: dict[str, Any]) -> StatementResult:
    r = rewrite_position_deletes(table_argument(catalog, args), _options(args.get("options")))
    columns = ["rewritten_delete_files_count", "added_delete_files_count", "rewritten_bytes_count",
               "added_bytes_count"]
    return StatementResult(columns, [[getattr(r, c) for c in columns]])


_DELETES_DOC = "Merge each partition's position delete files, dropping deletes of files no longer live."
# Iceberg names it rewrite_position_delete_files; the shorter name is kept as an alias.
procedure("rewrite_position_delete_files", Parameter("table", required=True), Parameter("options"),
          doc=_DELETES_DOC)(_rewrite_deletes)
procedure("rewrite_position_deletes", Parameter("table", required=True), Parameter("options"),
          doc=_DELETES_DOC)(_rewrite_deletes)
