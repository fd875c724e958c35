"""The statements the SQL layer understands, as plain data produced by the parser.

A statement that holds a query keeps the query's tokens too (``query_tokens``, lexed once with
the script, see :mod:`tablestore.sql.tokens`), so the query planner parses the query from them
without lexing it again; () means the planner lexes the text. They take no part in comparing
statements: two statements are equal when their text and their parts are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
