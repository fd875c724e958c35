"""The statement parser: catalog, DDL and DML statements in Spark SQL syntax.

Queries are not parsed here: their text and their tokens, lexed once with the script, go to
the query planner (:mod:`tablestore.sql.plan.planner`), whose sqlglot parse resolves their table
names before Spark SQL runs them. Everything else is parsed by a small recursive-descent
parser over sqlglot's tokens, so an error points at the line and column of the mistake.
"""

from __future__ import annotations

from typing import Protocol

from sqlglot.tokens import Token, TokenType

from tablestore.errors import ParseError
from tablestore.sql.parse import external, options, partitions, procedures, refs, row_level, schema
from tablestore.sql.parse import statements as st
from tablestore.sql.parse.tokens import Cursor, StatementText, split_statements


class StatementParser(Protocol):
    """The parser of a statement that starts with its keyword: the cursor is at that keyword."""

    def __call__(self, c: Cursor, /) -> st.Statement: ...


class AlterTableAction(Protocol):
    """An ALTER TABLE extension: the cursor is after ``ALTER TABLE|VIEW name``. It returns its
    statement, or None when the action is not one of its own (the parser then puts the cursor
    back where it was, whatever the extension read to find out)."""

    def __call__(self, c: Cursor, name: st.Name, is_view: bool, /) -> st.Statement | None: ...


_QUERY_STARTS = {"SELECT", "WITH", "VALUES", "TABLE", "FROM", "(", "EXPLAIN"}
_DATABASE_WORDS = ("DATABASE", "SCHEMA", "NAMESPACE")
_PLURAL_DATABASES = ("DATABASES", "SCHEMAS", "NAMESPACES")


def parse_script(script: str) -> list[st.Statement]:
    return [parse_statement(s) for s in split_statements(script)]


def parse_statement(statement: StatementText | str) -> st.Statement:
    if isinstance(statement, str):
        parts = split_statements(statement)
        if len(parts) != 1:
            raise ParseError(f"expected one statement, found {len(parts)}", sql=statement)
        statement = parts[0]
    cursor = Cursor(statement)
    first = cursor.word()
    if first in _QUERY_STARTS:
        return st.Query(statement.text, cursor.rest_tokens())
    parser = _PARSERS.get(first)
    if parser is None:
        token = cursor.peek()
        raise cursor.error(
            f"unsupported statement {token.text if token else ''!r}; tablestore runs SELECT, INSERT, CREATE, DROP, "
            "ALTER, DESCRIBE, SHOW and USE statements"
        )
    result = parser(cursor)
    cursor.expect_end()
    return result


# -- USE / SHOW / DESCRIBE ------------------------------------------------------------------


def _use(c: Cursor) -> st.Statement:
    c.expect("USE")
    c.accept("NAMESPACE") or c.accept("DATABASE") or c.accept("SCHEMA")
    return st.Use(c.sql, c.qualified_name("a catalog or database name"))


def _pattern(c: Cursor) -> str | None:
    if c.accept("LIKE"):
        return c.string("a LIKE pattern")
    if c.is_type(TokenType.STRING):
        return c.string()
    return None


def _in_namespace(c: Cursor) -> st.Name | None:
    if c.accept("IN") or c.accept("FROM"):
        return c.qualified_name("a database name")
    return None


def _show(c: Cursor) -> st.Statement:
    c.expect("SHOW")
    shown = partitions.parse_show_partitions(c)
    if shown is not None:
        return shown
    if c.accept("CATALOGS"):
        return st.ShowCatalogs(c.sql, _pattern(c))
    if any(c.accept(w) for w in _PLURAL_DATABASES):
        return st.ShowDatabases(c.sql, _in_namespace(c), _pattern(c))
    if c.accept("TABLES"):
        return st.ShowObjects(c.sql, "tables", _in_namespace(c), _pattern(c))
    if c.accept("VIEWS"):
        return st.ShowObjects(c.sql, "views", _in_namespace(c), _pattern(c))
    c.accept("USER") or c.accept("SYSTEM") or c.accept("ALL")
    if c.accept("FUNCTIONS"):
        return st.ShowObjects(c.sql, "functions", _in_namespace(c), _pattern(c))
    if c.accept("CREATE"):
        c.expect("TABLE")
        name = c.qualified_name("a table or view name")
        c.accept("AS") and c.accept("SERDE")
        return st.ShowCreateTable(c.sql, name)
    if c.accept("TBLPROPERTIES"):
        return st.ShowTblProperties(c.sql, c.qualified_name("a table name"))
    raise c.error("expected CATALOGS, DATABASES, TABLES, VIEWS, FUNCTIONS, CREATE TABLE or TBLPROPERTIES after SHOW")


def _describe(c: Cursor) -> st.Statement:
    c.advance()  # DESCRIBE | DESC
    if any(c.accept(w) for w in _DATABASE_WORDS):
        extended = c.accept("EXTENDED")
        return st.DescribeDatabase(c.sql, c.qualified_name("a database name"), extended)
    if c.accept("FUNCTION"):
        extended = c.accept("EXTENDED")
        return st.DescribeFunction(c.sql, c.qualified_name("a function name"), extended)
    c.accept("TABLE")
    extended = c.accept("EXTENDED") or c.accept("FORMATTED")
    name = c.qualified_name("a table name")
    return partitions.parse_describe_partition(c, name, extended) or st.DescribeTable(c.sql, name, extended)


# -- CREATE ----------------------------------------------------------------------------------


def _if_not_exists(c: Cursor) -> bool:
    return c.accept("IF", "NOT", "EXISTS")


def _if_exists(c: Cursor) -> bool:
    return c.accept("IF", "EXISTS")


def _create(c: Cursor) -> st.Statement:
    c.expect("CREATE")
    or_replace = c.accept("OR", "REPLACE")
    if any(c.accept(w) for w in _DATABASE_WORDS):
        return _create_database(c)
    external = c.accept("EXTERNAL")
    c.accept("TEMPORARY") and _unsupported(c, "temporary objects")
    if c.accept("TABLE"):
        return _create_table(c, or_replace, external)
    if c.accept("VIEW"):
        return _create_view(c, or_replace)
    if c.accept("FUNCTION"):
        return _create_function(c, or_replace)
    raise c.error("expected DATABASE, TABLE, VIEW or FUNCTION after CREATE")


def _unsupported(c: Cursor, what: str) -> bool:
    raise c.error(f"{what} are not supported")


def _create_database(c: Cursor) -> st.Statement:
    if_not_exists = _if_not_exists(c)
    name = c.qualified_name("a database name")
    comment = location = None
    properties: dict[str, str] = {}
    while not c.at_end():
        if c.accept("COMMENT"):
            comment = c.string("a comment")
        elif c.accept("LOCATION"):
            location = c.string("a location")
        elif c.accept("WITH"):
            if not (c.accept("DBPROPERTIES") or c.accept("PROPERTIES")):
                raise c.error("expected DBPROPERTIES after WITH")
            properties.update(c.properties())
        else:
            raise c.error(f"unexpected {c.next_text()!r} in CREATE DATABASE")
    return st.CreateDatabase(c.sql, name, if_not_exists, comment, location, properties)


def _column_defs(c: Cursor) -> tuple[st.ColumnDef, ...]:
    c.expect_type(TokenType.L_PAREN, "(")
    columns = []
    while True:
        name = c.identifier("a column name")
        type_text = schema.column_type(c, name, ("NOT NULL", "COMMENT", "NULL"))
        clauses = schema.column_clauses(c, name)
        columns.append(st.ColumnDef(name, type_text, clauses.not_null is True, clauses.comment))
        if c.accept_type(TokenType.COMMA):
            continue
        c.expect_type(TokenType.R_PAREN, ", or )")
        return tuple(columns)


def _partition_terms(c: Cursor) -> tuple[str, ...]:
    c.expect_type(TokenType.L_PAREN, "(")
    terms = []
    while True:
        first, last = c.balanced_until()
        terms.append(c.text_between(first, last))
        if c.accept_type(TokenType.COMMA):
            continue
        c.expect_type(TokenType.R_PAREN, ", or )")
        return tuple(terms)


def _create_table(c: Cursor, or_replace: bool, external: bool) -> st.Statement:
    if_not_exists = _if_not_exists(c)
    name = c.qualified_name("a table name")
    columns: tuple[st.ColumnDef, ...] = ()
    if c.is_type(TokenType.L_PAREN):
        columns = _column_defs(c)
    using = comment = location = None
    partitioned: tuple[str, ...] = ()
    properties: dict[str, str] = {}
    query = None
    query_tokens: tuple[Token, ...] = ()
    while not c.at_end():
        if c.accept("USING") or c.accept("STORED", "AS"):
            using = c.identifier("a format name").lower()
        elif c.accept("PARTITIONED BY") or c.accept("PARTITIONED", "BY"):
            partitioned = _partition_terms(c)
        elif c.accept("COMMENT"):
            comment = c.string("a comment")
        elif c.accept("LOCATION"):
            location = c.string("a location")
        elif c.accept("TBLPROPERTIES"):
            properties.update(c.properties())
        elif c.accept("AS"):
            query = c.rest_text()
            if not query:
                raise c.error("expected a query after AS")
            query_tokens = c.rest_tokens()
            c.pos = len(c.tokens)
        else:
            raise c.error(f"unexpected {c.next_text()!r} in CREATE TABLE")
    if not columns and query is None and not external:
        raise c.error("CREATE TABLE needs a column list or AS SELECT ...")
    return st.CreateTable(c.sql, name, columns, if_not_exists, or_replace, external, using, partitioned,
                          comment, location, properties, query, query_tokens)


def _create_view(c: Cursor, or_replace: bool) -> st.Statement:
    if_not_exists = _if_not_exists(c)
    name = c.qualified_name("a view name")
    columns: list[tuple[str, str | None]] = []
    if c.accept_type(TokenType.L_PAREN):
        while True:
            column = c.identifier("a column name")
            comment = c.string("a comment") if c.accept("COMMENT") else None
            columns.append((column, comment))
            if c.accept_type(TokenType.COMMA):
                continue
            c.expect_type(TokenType.R_PAREN, ", or )")
            break
    comment = None
    properties: dict[str, str] = {}
    while True:
        if c.accept("COMMENT"):
            comment = c.string("a comment")
        elif c.accept("TBLPROPERTIES"):
            properties.update(c.properties())
        else:
            break
    c.expect("AS")
    query = c.rest_text()
    if not query:
        raise c.error("expected a query after AS")
    query_tokens = c.rest_tokens()
    c.pos = len(c.tokens)
    return st.CreateView(c.sql, name, query, or_replace, if_not_exists, tuple(columns), comment, properties,
                         query_tokens)


def _create_function(c: Cursor, or_replace: bool) -> st.Statement:
    if_not_exists = _if_not_exists(c)
    name = c.qualified_name("a function name")
    c.expect("AS")
    class_name = c.string("the function's 'module.function' as a string")
    return_type = None
    if c.accept("RETURNS"):
        first, last = c.balanced_until()
        return_type = c.text_between(first, last)
    return st.CreateFunction(c.sql, name, class_name, return_type, or_replace, if_not_exists)


# -- DROP / ALTER -------------------------------------------------------------------------------


def _drop(c: Cursor) -> st.Statement:
    c.expect("DROP")
    if any(c.accept(w) for w in _DATABASE_WORDS):
        if_exists = _if_exists(c)
        name = c.qualified_name("a database name")
        cascade = c.accept("CASCADE")
        if not cascade:
            c.accept("RESTRICT")
        return st.DropDatabase(c.sql, name, if_exists, cascade)
    if c.accept("TABLE"):
        if_exists = _if_exists(c)
        name = c.qualified_name("a table name")
        return st.DropTable(c.sql, name, if_exists, c.accept("PURGE"))
    if c.accept("VIEW"):
        if_exists = _if_exists(c)
        return st.DropView(c.sql, c.qualified_name("a view name"), if_exists)
    c.accept("TEMPORARY")
    if c.accept("FUNCTION"):
        if_exists = _if_exists(c)
        return st.DropFunction(c.sql, c.qualified_name("a function name"), if_exists)
    raise c.error("expected DATABASE, TABLE, VIEW or FUNCTION after DROP")


def _alter(c: Cursor) -> st.Statement:
    c.expect("ALTER")
    if any(c.accept(w) for w in _DATABASE_WORDS):
        name = c.qualified_name("a database name")
        if c.accept("SET"):
            if c.accept("LOCATION"):
                return st.AlterDatabase(c.sql, name, {"location": c.string("a location")})
            if not (c.accept("DBPROPERTIES") or c.accept("PROPERTIES")):
                raise c.error("expected DBPROPERTIES or LOCATION after SET")
            return st.AlterDatabase(c.sql, name, c.properties())
        if c.accept("UNSET"):
            if not (c.accept("DBPROPERTIES") or c.accept("PROPERTIES")):
                raise c.error("expected DBPROPERTIES after UNSET")
            return st.AlterDatabase(c.sql, name, {}, tuple(c.key_list()))
        raise c.error("expected SET or UNSET after ALTER DATABASE name")
    is_view = c.accept("VIEW")
    if not is_view:
        c.expect("TABLE")
    name = c.qualified_name("a table name")
    if c.accept("RENAME", "TO"):
        return st.RenameTable(c.sql, name, c.qualified_name("the new name"), view=is_view)
    if c.accept("SET", "TBLPROPERTIES"):
        return st.SetTableProperties(c.sql, name, c.properties())
    if c.accept("UNSET", "TBLPROPERTIES"):
        if_exists = _if_exists(c)
        return st.UnsetTableProperties(c.sql, name, tuple(c.key_list()), if_exists)
    start = c.pos
    for action in _ALTER_TABLE_ACTIONS:
        statement = action(c, name, is_view)
        if statement is not None:
            return statement
        c.pos = start
    token = c.peek()
    raise c.error(f"unsupported ALTER {'VIEW' if is_view else 'TABLE'} action {token.text if token else ''!r}")


# -- INSERT ------------------------------------------------------------------------------------


def _insert(c: Cursor) -> st.Statement:
    c.expect("INSERT")
    overwrite = c.accept("OVERWRITE")
    if not overwrite:
        c.expect("INTO")
    c.accept("TABLE")
    name = c.qualified_name("a table name")
    partition: list[tuple[str, str | None]] = []
    if c.accept("PARTITION"):
        c.expect_type(TokenType.L_PAREN, "(")
        while True:
            key = c.identifier("a partition column")
            value = c.literal_text() if c.accept_type(TokenType.EQ) else None
            partition.append((key, value))
            if c.accept_type(TokenType.COMMA):
                continue
            c.expect_type(TokenType.R_PAREN, ", or )")
            break
    columns: list[str] = []
    token = c.peek()
    if token is not None and token.token_type == TokenType.L_PAREN and c.word(1) not in ("SELECT", "WITH", "VALUES"):
        c.advance()
        columns.append(c.identifier("a column name"))
        while c.accept_type(TokenType.COMMA):
            columns.append(c.identifier("a column name"))
        c.expect_type(TokenType.R_PAREN, ")")
    query = c.rest_text()
    if not query:
        raise c.error("expected VALUES or a query")
    if c.word() not in _QUERY_STARTS:
        raise c.error(f"expected VALUES or SELECT but found {c.next_text()!r}")
    query_tokens = c.rest_tokens()
    c.pos = len(c.tokens)
    return st.Insert(c.sql, name, overwrite, tuple(partition), tuple(columns), query, query_tokens)


# The first keyword (two for ``MSCK REPAIR``) of each statement that is not a query.
_PARSERS: dict[str, StatementParser] = {
    "USE": _use,
    "SHOW": _show,
    "DESCRIBE": _describe,
    "DESC": _describe,
    "CREATE": _create,
    "DROP": _drop,
    "ALTER": _alter,
    "INSERT": _insert,
    **row_level.STATEMENT_PARSERS,
    **external.STATEMENT_PARSERS,
    **procedures.STATEMENT_PARSERS,
    **options.STATEMENT_PARSERS,
}
# Tried in this order after the common ALTER TABLE actions (RENAME TO, SET/UNSET TBLPROPERTIES).
_ALTER_TABLE_ACTIONS: tuple[AlterTableAction, ...] = (
    refs.parse_alter_table,
    schema.parse_alter_table,
    partitions.parse_alter_table,
    external.parse_alter_table,
)
