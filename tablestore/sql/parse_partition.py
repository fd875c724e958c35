"""Parsing of partitions (issue 5): partition evolution, SHOW/DROP/RENAME PARTITION, static partition inserts.

``parse_alter_table`` is tried by :func:`tablestore.sql.parser._alter` after the common ALTER
TABLE actions; it returns None when the action is not one of this module's. Top-level
statements of this module are registered in ``STATEMENT_HANDLERS`` (first keyword -> parser).
Statement classes of this module live here too; the session dispatches them by class name.

Syntax (Spark SQL with Iceberg's extensions, and Hive's partition statements):

- ``ALTER TABLE t ADD PARTITION FIELD term [AS name]``
- ``ALTER TABLE t DROP PARTITION FIELD term | name``
- ``ALTER TABLE t REPLACE PARTITION FIELD term | name WITH term [AS name]``
- ``ALTER TABLE t DROP [IF EXISTS] PARTITION (k='v', ...)[, PARTITION (...) ...] [PURGE]``
- ``ALTER TABLE t PARTITION (k='v', ...) RENAME TO PARTITION (k='v2', ...)``
- ``SHOW PARTITIONS t [PARTITION (k='v', ...)]``
- ``DESCRIBE [TABLE] [EXTENDED] t PARTITION (k='v', ...)``
- ``SET key=value``, ``SET key``, ``SET``: session options such as
  ``tablestore.insert-overwrite.mode`` (``dynamic`` or ``static``).

(``ALTER TABLE t ADD PARTITION (...) LOCATION ...`` is parsed by :mod:`parse_external`.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot.tokens import TokenType

from tablestore.sql import statements as st
from tablestore.sql.tokens import Cursor

PartitionSpecText = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class AddPartitionField(st.Statement):
    name: st.Name
    term: str
    field_name: str | None = None


@dataclass(frozen=True)
class DropPartitionField(st.Statement):
    name: st.Name
    term: str


@dataclass(frozen=True)
class ReplacePartitionField(st.Statement):
    name: st.Name
    old: str
    new: str
    field_name: str | None = None


@dataclass(frozen=True)
class DropPartitions(st.Statement):
    name: st.Name
    partitions: tuple[PartitionSpecText, ...]
    if_exists: bool = False
    purge: bool = False


@dataclass(frozen=True)
class RenamePartition(st.Statement):
    name: st.Name
    partition: PartitionSpecText
    new_partition: PartitionSpecText


@dataclass(frozen=True)
class ShowPartitions(st.Statement):
    name: st.Name
    partition: PartitionSpecText = ()


@dataclass(frozen=True)
class DescribePartition(st.Statement):
    name: st.Name
    partition: PartitionSpecText
    extended: bool = False


@dataclass(frozen=True)
class SetOption(st.Statement):
    """``SET k=v`` (value given), ``SET k`` (show one) or ``SET`` (show all)."""

    key: str | None = None
    value: str | None = None


def partition_spec(c: Cursor, allow_dynamic: bool = False) -> PartitionSpecText:
    """``(k='v', k2=2, k3=NULL)`` after PARTITION; with ``allow_dynamic`` a key may lack a value."""
    c.expect_type(TokenType.L_PAREN, "(")
    out: list[tuple[str, str | None]] = []
    while True:
        key = c.identifier("a partition column")
        value: str | None
        if c.accept_type(TokenType.EQ):
            value = None if c.accept("NULL") else c.literal_text()
        elif allow_dynamic:
            value = None
        else:
            raise c.error(f"expected = and a value after partition column {key!r}")
        out.append((key, value))
        if c.accept_type(TokenType.COMMA):
            continue
        c.expect_type(TokenType.R_PAREN, ", or )")
        return tuple(out)


def _term(c: Cursor, *stop_words: str) -> str:
    if c.at_end():
        raise c.error("expected a partition term such as hours(ts), bucket(16, id) or a column")
    first, last = c.balanced_until(*stop_words)
    return c.text_between(first, last)


def _alias(c: Cursor) -> str | None:
    return c.identifier("a partition field name") if c.accept("AS") else None


def parse_alter_table(c: Cursor, name: st.Name, is_view: bool) -> st.Statement | None:
    start = c.pos
    if c.accept("ADD", "PARTITION", "FIELD"):
        term = _term(c, "AS")
        return AddPartitionField(c.sql, name, term, _alias(c))
    if c.accept("DROP", "PARTITION", "FIELD"):
        return DropPartitionField(c.sql, name, _term(c))
    if c.accept("REPLACE", "PARTITION", "FIELD"):
        old = _term(c, "WITH")
        c.expect("WITH")
        new = _term(c, "AS")
        return ReplacePartitionField(c.sql, name, old, new, _alias(c))
    if c.accept("DROP"):
        if_exists = c.accept("IF", "EXISTS")
        if c.word() == "PARTITION":
            specs = []
            while c.accept("PARTITION"):
                specs.append(partition_spec(c))
                if not c.accept_type(TokenType.COMMA):
                    break
            purge = c.accept("PURGE")
            return DropPartitions(c.sql, name, tuple(specs), if_exists, purge)
        c.pos = start
        return None
    if c.accept("PARTITION"):
        spec = partition_spec(c)
        if c.accept("RENAME", "TO"):
            c.expect("PARTITION")
            return RenamePartition(c.sql, name, spec, partition_spec(c))
        c.pos = start
        return None
    return None


def parse_show_partitions(c: Cursor) -> st.Statement | None:
    """``SHOW PARTITIONS t [PARTITION (...)]``, called by the parser's SHOW after the keyword SHOW."""
    if not c.accept("PARTITIONS"):
        return None
    name = c.qualified_name("a table name")
    spec = partition_spec(c) if c.accept("PARTITION") else ()
    return ShowPartitions(c.sql, name, spec)


def parse_describe_partition(c: Cursor, name: st.Name, extended: bool) -> st.Statement | None:
    """``DESCRIBE t PARTITION (...)``, called by the parser's DESCRIBE after the table name."""
    if not c.accept("PARTITION"):
        return None
    return DescribePartition(c.sql, name, partition_spec(c), extended)


def _set(c: Cursor) -> st.Statement:
    c.expect("SET")
    first = c.peek()
    if first is None:
        return SetOption(c.sql)
    if first.token_type == TokenType.EQ:
        raise c.error("expected an option name after SET")
    # Keys are dotted and may contain dashes (tablestore.insert-overwrite.mode): take the raw text.
    last = first
    while not c.at_end() and not c.is_type(TokenType.EQ):
        last = c.advance()
    key = c.sql[first.start:last.end + 1].strip().strip("`")
    if not c.accept_type(TokenType.EQ):
        return SetOption(c.sql, key)
    value_token = c.peek()
    if value_token is None:
        raise c.error(f"expected a value after SET {key}=")
    value = c.sql[value_token.start:].strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    c.pos = len(c.tokens)
    return SetOption(c.sql, key, value)


STATEMENT_HANDLERS: dict[str, Callable[[Cursor], st.Statement]] = {"SET": _set}
