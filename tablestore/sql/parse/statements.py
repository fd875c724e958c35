"""The statements the SQL layer understands, as plain data produced by the parser.

A statement that holds a query keeps the query's tokens too (``query_tokens``, lexed once with
the script, see :mod:`tablestore.sql.parse.tokens`), so the query planner parses the query from them
without lexing it again; () means the planner lexes the text. They take no part in comparing
statements: two statements are equal when their text and their parts are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlglot import exp
    from sqlglot.tokens import Token

Name = tuple[str, ...]


@dataclass(frozen=True)
class Statement:
    sql: str


@dataclass(frozen=True)
class Query(Statement):
    """A query run by Spark SQL (SELECT, WITH, VALUES, TABLE, FROM ...)."""

    query_tokens: tuple[Token, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class Use(Statement):
    name: Name


@dataclass(frozen=True)
class ShowCatalogs(Statement):
    pattern: str | None = None


@dataclass(frozen=True)
class ShowDatabases(Statement):
    catalog: Name | None = None
    pattern: str | None = None


@dataclass(frozen=True)
class ShowObjects(Statement):
    """SHOW TABLES | VIEWS | FUNCTIONS [IN ns] [LIKE 'pattern']."""

    kind: str
    namespace: Name | None = None
    pattern: str | None = None


@dataclass(frozen=True)
class ShowCreateTable(Statement):
    name: Name


@dataclass(frozen=True)
class ShowTblProperties(Statement):
    name: Name


@dataclass(frozen=True)
class CreateDatabase(Statement):
    name: Name
    if_not_exists: bool = False
    comment: str | None = None
    location: str | None = None
    properties: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DropDatabase(Statement):
    name: Name
    if_exists: bool = False
    cascade: bool = False


@dataclass(frozen=True)
class AlterDatabase(Statement):
    name: Name
    set_properties: dict[str, str] = field(default_factory=dict)
    unset_properties: tuple[str, ...] = ()


@dataclass(frozen=True)
class DescribeDatabase(Statement):
    name: Name
    extended: bool = False


@dataclass(frozen=True)
class ColumnDef:
    name: str
    type_text: str
    not_null: bool = False
    comment: str | None = None


@dataclass(frozen=True)
class CreateTable(Statement):
    name: Name
    columns: tuple[ColumnDef, ...] = ()
    if_not_exists: bool = False
    or_replace: bool = False
    external: bool = False
    using: str | None = None
    partitioned_by: tuple[str, ...] = ()
    comment: str | None = None
    location: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    query: str | None = None
    query_tokens: tuple[Token, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class DropTable(Statement):
    name: Name
    if_exists: bool = False
    purge: bool = False


@dataclass(frozen=True)
class RenameTable(Statement):
    name: Name
    new_name: Name
    view: bool = False


@dataclass(frozen=True)
class SetTableProperties(Statement):
    name: Name
    properties: dict[str, str]


@dataclass(frozen=True)
class UnsetTableProperties(Statement):
    name: Name
    keys: tuple[str, ...]
    if_exists: bool = False


@dataclass(frozen=True)
class DescribeTable(Statement):
    name: Name
    extended: bool = False


@dataclass(frozen=True)
class Insert(Statement):
    name: Name
    overwrite: bool
    partition: tuple[tuple[str, str | None], ...] = ()
    columns: tuple[str, ...] = ()
    query: str = ""
    query_tokens: tuple[Token, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class CreateView(Statement):
    name: Name
    query: str
    or_replace: bool = False
    if_not_exists: bool = False
    columns: tuple[tuple[str, str | None], ...] = ()
    comment: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    query_tokens: tuple[Token, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class DropView(Statement):
    name: Name
    if_exists: bool = False


@dataclass(frozen=True)
class CreateFunction(Statement):
    name: Name
    class_name: str
    return_type: str | None = None
    or_replace: bool = False
    if_not_exists: bool = False


@dataclass(frozen=True)
class DropFunction(Statement):
    name: Name
    if_exists: bool = False


@dataclass(frozen=True)
class DescribeFunction(Statement):
    name: Name
    extended: bool = False


# -- External tables ---------------------------------------------------------------------------


PartitionValues = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class MsckRepair(Statement):
    """``MSCK REPAIR TABLE t [ADD|DROP|SYNC PARTITIONS]`` (and ``ALTER TABLE t RECOVER PARTITIONS``)."""

    name: Name
    mode: str = "add"


@dataclass(frozen=True)
class AddPartitions(Statement):
    """``ALTER TABLE t ADD [IF NOT EXISTS] PARTITION (k='v', ...) [LOCATION 'path'] [PARTITION ...]``."""

    name: Name
    partitions: tuple[tuple[PartitionValues, str | None], ...]
    if_not_exists: bool = False


# -- Partitions and session options ------------------------------------------------------------


PartitionSpecText = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class AddPartitionField(Statement):
    name: Name
    term: str
    field_name: str | None = None


@dataclass(frozen=True)
class DropPartitionField(Statement):
    name: Name
    term: str


@dataclass(frozen=True)
class ReplacePartitionField(Statement):
    name: Name
    old: str
    new: str
    field_name: str | None = None


@dataclass(frozen=True)
class DropPartitions(Statement):
    name: Name
    partitions: tuple[PartitionSpecText, ...]
    if_exists: bool = False
    purge: bool = False


@dataclass(frozen=True)
class RenamePartition(Statement):
    name: Name
    partition: PartitionSpecText
    new_partition: PartitionSpecText


@dataclass(frozen=True)
class ShowPartitions(Statement):
    name: Name
    partition: PartitionSpecText = ()


@dataclass(frozen=True)
class DescribePartition(Statement):
    name: Name
    partition: PartitionSpecText
    extended: bool = False


@dataclass(frozen=True)
class SetOption(Statement):
    """``SET k=v`` (value given), ``SET k`` (show one) or ``SET`` (show all)."""

    key: str | None = None
    value: str | None = None


# -- Procedures --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call(Statement):
    name: Name
    # (parameter name or None for a positional argument, the argument's SQL text)
    args: tuple[tuple[str | None, str], ...]


# -- Branches, tags and RESET ------------------------------------------------------------------


@dataclass(frozen=True)
class CreateRef(Statement):
    """``ALTER TABLE t CREATE [OR REPLACE] | REPLACE BRANCH|TAG ...``."""

    name: Name
    kind: str
    """``branch`` or ``tag``."""
    ref: str
    create: bool = True
    replace: bool = False
    if_not_exists: bool = False
    snapshot_id: int | None = None
    max_ref_age_ms: int | None = None
    """``RETAIN n DAYS``: how long the ref itself is kept."""
    min_snapshots_to_keep: int | None = None
    """``WITH SNAPSHOT RETENTION n SNAPSHOTS`` (branches)."""
    max_snapshot_age_ms: int | None = None
    """``WITH SNAPSHOT RETENTION ... m DAYS`` (branches)."""


@dataclass(frozen=True)
class DropRef(Statement):
    """``ALTER TABLE t DROP BRANCH|TAG [IF EXISTS] name``."""

    name: Name
    kind: str
    ref: str
    if_exists: bool = False


@dataclass(frozen=True)
class ResetOption(Statement):
    """``RESET`` (every session option) or ``RESET key``."""

    key: str | None = None


# -- Row-level DML -----------------------------------------------------------------------------
# Their conditions, values and MERGE source are the sqlglot trees (Spark dialect) of the
# statement's one parse; they stay trees down to planning. A handler copies a tree before it
# builds it into a query: a statement may run more than once.


@dataclass(frozen=True)
class DeleteFrom(Statement):
    name: Name
    alias: str | None = None
    where: exp.Expr | None = None


@dataclass(frozen=True)
class UpdateTable(Statement):
    name: Name
    assignments: tuple[tuple[str, exp.Expr], ...]
    alias: str | None = None
    where: exp.Expr | None = None


@dataclass(frozen=True)
class MergeClause:
    matched: bool
    action: str  # "update", "delete" or "insert"
    condition: exp.Expr | None = None
    # UPDATE SET column = value pairs, or INSERT's columns and values; None means ``*``.
    assignments: tuple[tuple[str, exp.Expr], ...] | None = None
    insert_columns: tuple[str, ...] | None = None
    insert_values: tuple[exp.Expr, ...] | None = None


@dataclass(frozen=True)
class MergeInto(Statement):
    name: Name
    source: exp.Expr  # a table (exp.Table) or a query (exp.Subquery), without its alias
    on: exp.Expr
    clauses: tuple[MergeClause, ...]
    alias: str | None = None
    source_alias: str | None = None


# -- Schema evolution --------------------------------------------------------------------------


@dataclass(frozen=True)
class AddColumnAction:
    column: Name
    type_text: str
    not_null: bool = False
    comment: str | None = None
    first: bool = False
    after: str | None = None
    default: Any = None  # the DEFAULT literal's value (format v3), None without one


@dataclass(frozen=True)
class DropColumnAction:
    column: Name
    if_exists: bool = False


@dataclass(frozen=True)
class RenameColumnAction:
    column: Name
    new_name: str


@dataclass(frozen=True)
class AlterColumnAction:
    column: Name
    type_text: str | None = None
    comment: str | None = None
    first: bool = False
    after: str | None = None
    drop_not_null: bool = False
    set_not_null: bool = False
    set_default: bool = False  # SET DEFAULT default / DROP DEFAULT (default None)
    default: Any = None


@dataclass(frozen=True)
class IdentifierFieldsAction:
    columns: tuple[Name, ...]
    drop: bool = False


Action = AddColumnAction | DropColumnAction | RenameColumnAction | AlterColumnAction | IdentifierFieldsAction


@dataclass(frozen=True)
class AlterSchema(Statement):
    """One ALTER TABLE statement changing the schema; its actions land in one commit."""

    name: Name
    actions: tuple[Action, ...]
