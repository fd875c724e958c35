"""The Iceberg JDBC catalog's tables, as the SQL catalog stores them (so pyiceberg's SqlCatalog
and Trino's JDBC catalog read what it writes), and how a namespace is stored in them.
"""

from __future__ import annotations

from sqlalchemy import Column, MetaData, String
from sqlalchemy import Table as SqlTable

TABLE_TYPE = "TABLE"
VIEW_TYPE = "VIEW"

# How the JDBC layout's namespace string holds a dot inside a level ("new.db"): Java's
# JdbcCatalog joins levels with dots and cannot tell one from a separator; we store such a dot as
# the record separator, which no valid name contains. Other JDBC readers see the level with
# that character, where they could not have a dotted level at all.
LEVEL_DOT = "\x1e"


def namespace_of(stored: str) -> tuple[str, ...]:
    """A namespace as stored in the JDBC layout, back as its levels."""
    return tuple(level.replace(LEVEL_DOT, ".") for level in stored.split("."))


def namespace_text(stored: str) -> str:
    """A stored namespace as Java prints one: its levels joined by dots."""
    return stored.replace(LEVEL_DOT, ".")

_METADATA = MetaData()

ICEBERG_TABLES = SqlTable(
    "iceberg_tables",
    _METADATA,
    Column("catalog_name", String(255), primary_key=True, nullable=False),
    Column("table_namespace", String(255), primary_key=True, nullable=False),
    Column("table_name", String(255), primary_key=True, nullable=False),
    Column("metadata_location", String(1000), nullable=True),
    Column("previous_metadata_location", String(1000), nullable=True),
    Column("iceberg_type", String(5), nullable=True),
)

NAMESPACE_PROPERTIES = SqlTable(
    "iceberg_namespace_properties",
    _METADATA,
    Column("catalog_name", String(255), primary_key=True, nullable=False),
    Column("namespace", String(255), primary_key=True, nullable=False),
    Column("property_key", String(255), primary_key=True, nullable=False),
    Column("property_value", String(1000), nullable=False),
)


__all__ = [
    "ICEBERG_TABLES",
    "LEVEL_DOT",
    "NAMESPACE_PROPERTIES",
    "TABLE_TYPE",
    "VIEW_TYPE",
    "namespace_of",
    "namespace_text",
]
