"""Filters as SQL text: quoted column names, literals and predicates that :func:`parse_filter` reads back.

``str()`` of an unbound or bound filter is SQL in the Spark dialect, so that a filter can be
shown to users, logged, and sent to an engine; this module is the one place that writes it.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterable
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

_SIMPLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Words that would be read as SQL rather than as a column name.
_RESERVED = frozenset(
    {"and", "or", "not", "in", "is", "null", "true", "false", "like", "between", "date", "timestamp",
     "cast", "case", "when", "then", "else", "end", "select", "from", "where", "escape", "interval"}
)
_OPERATOR = {"eq": "=", "not_eq": "!=", "lt": "<", "lt_eq": "<=", "gt": ">", "gt_eq": ">="}
_UNARY_FORMAT = {
    "is_null": "{term} IS NULL", "not_null": "{term} IS NOT NULL",
    "is_nan": "isnan({term})", "not_nan": "NOT isnan({term})",
}


def quote_part(part: str) -> str:
    """One part of a column name, in backticks when it is not a plain identifier."""
    if _SIMPLE_NAME.match(part) and part.lower() not in _RESERVED:
        return part
    return "`" + part.replace("`", "``") + "`"


def quote_name(name: str) -> str:
    """A dotted column name (``"address.city"``) with each part quoted as needed."""
    return ".".join(quote_part(p) for p in name.split("."))


def format_literal(value: Any) -> str:
    """A Python value written as a SQL literal that :func:`parse_filter` reads back."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f") if value.is_finite() else f"'{value}'"
    if isinstance(value, float):
        # The parser reads 1.5 back as a Decimal, which binds to the same value.
        return repr(value) if math.isfinite(value) else f"'{value}'"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, time):
        return f"'{value.isoformat()}'"
    if isinstance(value, uuid.UUID):
        return f"'{value}'"
    if isinstance(value, (bytes, bytearray)):
        return f"X'{bytes(value).hex()}'"
    return repr(value)


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return format_literal(escaped + "%")


def unary_predicate_sql(op: str, term: object) -> str:
    """``term IS NULL``, ``isnan(term)`` and their complements, for the unary ``op``."""
    return _UNARY_FORMAT[op].format(term=term)


def literal_predicate_sql(op: str, term: object, literal: Any) -> str:
    """A comparison of ``term`` with ``literal``; ``starts_with`` is ``LIKE 'prefix%'``."""
    if op == "starts_with":
        return f"{term} LIKE {_like_prefix(literal)}"
    if op == "not_starts_with":
        return f"{term} NOT LIKE {_like_prefix(literal)}"
    return f"{term} {_OPERATOR[op]} {format_literal(literal)}"


def set_predicate_sql(op: str, term: object, values: Iterable[Any]) -> str:
    """``term IN (...)`` or ``term NOT IN (...)`` with the values in the order given."""
    word = "IN" if op == "in" else "NOT IN"
    return f"{term} {word} ({', '.join(format_literal(v) for v in values)})"
