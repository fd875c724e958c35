"""Parsing of partitions (issue 5): partition evolution, SHOW/DROP/RENAME PARTITION, static partition inserts.

``parse_alter_table`` is an :class:`~tablestore.sql.parse.parser.AlterTableAction`, tried by the
parser after the common ALTER TABLE actions. The statements are classes of :mod:`tablestore.sql.parse.statements`.

Syntax (Spark SQL with Iceberg's extensions, and Hive's partition statements):

- ``ALTER TABLE t ADD PARTITION FIELD term [AS name]``
- ``ALTER TABLE t DROP PARTITION FIELD term | name``
- ``ALTER TABLE t REPLACE PARTITION FIELD term | name WITH term [AS name]``
- ``ALTER TABLE t DROP [IF EXISTS] PARTITION (k='v', ...)[, PARTITION (...) ...] [PURGE]``
- ``ALTER TABLE t PARTITION (k='v', ...) RENAME TO PARTITION (k='v2', ...)``
- ``SHOW PARTITIONS t [PARTITION (k='v', ...)]``
- ``DESCRIBE [TABLE] [EXTENDED] t PARTITION (k='v', ...)``

(``ALTER TABLE t ADD PARTITION (...) LOCATION ...`` is parsed by :mod:`parse_external`.)
"""

from __future__ import annotations

from sqlglot.tokens import TokenType

from tablestore.sql.parse import statements as st
from tablestore.sql.parse.tokens import Cursor


def partition_spec(c: Cursor, allow_dynamic: bool = False) -> st.PartitionSpecText:
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
    if c.accept("ADD", "PARTITION", "FIELD"):
        term = _term(c, "AS")
        return st.AddPartitionField(c.sql, name, term, _alias(c))
    if c.accept("DROP", "PARTITION", "FIELD"):
        return st.DropPartitionField(c.sql, name, _term(c))
    if c.accept("REPLACE", "PARTITION", "FIELD"):
        old = _term(c, "WITH")
        c.expect("WITH")
        new = _term(c, "AS")
        return st.ReplacePartitionField(c.sql, name, old, new, _alias(c))
    if c.accept("DROP"):
        if_exists = c.accept("IF", "EXISTS")
        if c.word() == "PARTITION":
            specs = []
            while c.accept("PARTITION"):
                specs.append(partition_spec(c))
                if not c.accept_type(TokenType.COMMA):
                    break
            purge = c.accept("PURGE")
            return st.DropPartitions(c.sql, name, tuple(specs), if_exists, purge)
        return None
    if c.accept("PARTITION"):
        spec = partition_spec(c)
        if c.accept("RENAME", "TO"):
            c.expect("PARTITION")
            return st.RenamePartition(c.sql, name, spec, partition_spec(c))
    return None


def parse_show_partitions(c: Cursor) -> st.Statement | None:
    """``SHOW PARTITIONS t [PARTITION (...)]``, called by the parser's SHOW after the keyword SHOW."""
    if not c.accept("PARTITIONS"):
        return None
    name = c.qualified_name("a table name")
    spec = partition_spec(c) if c.accept("PARTITION") else ()
    return st.ShowPartitions(c.sql, name, spec)


def parse_describe_partition(c: Cursor, name: st.Name, extended: bool) -> st.Statement | None:
    """``DESCRIBE t PARTITION (...)``, called by the parser's DESCRIBE after the table name."""
    if not c.accept("PARTITION"):
        return None
    return st.DescribePartition(c.sql, name, partition_spec(c), extended)
