"""Parsing of external Hive-style tables (issue 5): CREATE EXTERNAL TABLE, MSCK REPAIR, ADD PARTITION ... LOCATION.

``parse_alter_table`` is an :class:`~tablestore.sql.parse.parser.AlterTableAction`, tried by the
parser after the common ALTER TABLE actions. ``STATEMENT_PARSERS`` maps this module's first keywords to their
parsers. The statements are classes of :mod:`tablestore.sql.parse.statements`.

CREATE EXTERNAL TABLE itself is parsed by the common CREATE TABLE parser (``external=True``,
Hive's typed partition columns arrive as ``"name type"`` terms) and run by
:mod:`tablestore.sql.run.external`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot.tokens import TokenType

from tablestore.sql.parse import statements as st
from tablestore.sql.parse.tokens import Cursor, StatementText, tokenize


def partition_values(c: Cursor) -> st.PartitionValues:
    """``(k='v', k2=2, k3=NULL)``: every key with a literal value, as text (NULL as None)."""
    c.expect_type(TokenType.L_PAREN, "(")
    values: list[tuple[str, str | None]] = []
    while True:
        key = c.identifier("a partition column")
        if c.accept_type(TokenType.EQ) is None:
            raise c.error(f"expected = and a value after the partition column {key!r}")
        values.append((key, None if c.accept("NULL") else c.literal_text()))
        if c.accept_type(TokenType.COMMA):
            continue
        c.expect_type(TokenType.R_PAREN, ", or )")
        return tuple(values)


@dataclass(frozen=True)
class PartitionColumnDef:
    """A term of an external table's PARTITIONED BY: ``name type [COMMENT '...']`` (Hive), or a bare
    ``name`` of a column in the column list (Spark data source tables)."""

    name: str
    type_text: str | None = None
    comment: str | None = None


def partition_column_def(term: str) -> PartitionColumnDef:
    """Parse one PARTITIONED BY term of CREATE EXTERNAL TABLE (the common parser keeps terms as text)."""
    c = Cursor(StatementText(term, 1, tuple(tokenize(term))))
    name = c.identifier("a partition column name")
    if c.at_end():
        return PartitionColumnDef(name)
    if c.is_type(TokenType.L_PAREN):
        raise c.error(
            "external tables are partitioned Hive style, by columns: use PARTITIONED BY (name type, ...); "
            "transforms such as days(ts) need a managed table (CREATE TABLE ... USING iceberg)"
        )
    first, last = c.balanced_until("COMMENT")
    type_text = c.text_between(first, last)
    comment = c.string("a comment") if c.accept("COMMENT") else None
    c.expect_end()
    return PartitionColumnDef(name, type_text, comment)


def _add_partitions(c: Cursor, name: st.Name) -> st.Statement:
    if_not_exists = c.accept("IF", "NOT", "EXISTS")
    partitions: list[tuple[st.PartitionValues, str | None]] = []
    while c.accept("PARTITION"):
        values = partition_values(c)
        location = c.string("the partition location as a string") if c.accept("LOCATION") else None
        partitions.append((values, location))
    if not partitions:
        raise c.error("expected PARTITION (column = value, ...) after ADD")
    return st.AddPartitions(c.sql, name, tuple(partitions), if_not_exists)


def parse_alter_table(c: Cursor, name: st.Name, is_view: bool) -> st.Statement | None:
    adds_partition = c.word() == "ADD" and (
        (c.word(1) == "PARTITION" and c.is_type(TokenType.L_PAREN, 2))
        or (c.word(1) == "IF" and c.word(2) == "NOT" and c.word(3) == "EXISTS" and c.word(4) == "PARTITION")
    )
    if adds_partition and not is_view:
        c.expect("ADD")
        return _add_partitions(c, name)
    if not is_view and c.accept("RECOVER", "PARTITIONS"):
        return st.MsckRepair(c.sql, name, "add")
    return None


def _msck(c: Cursor) -> st.Statement:
    c.expect("MSCK", "REPAIR")  # one token in sqlglot's Spark tokenizer
    c.expect("TABLE")
    name = c.qualified_name("a table name")
    mode = "add"
    for word in ("ADD", "DROP", "SYNC"):
        if c.accept(word):
            c.expect("PARTITIONS")
            mode = word.lower()
            break
    else:
        if not c.at_end():
            raise c.error(f"expected ADD, DROP or SYNC PARTITIONS but found {c.next_text()!r}")
    return st.MsckRepair(c.sql, name, mode)


STATEMENT_PARSERS: dict[str, Callable[[Cursor], st.Statement]] = {"MSCK REPAIR": _msck, "MSCK": _msck}
