"""Known bugs and limits of the other readers, each asserted as exactly what the reader does.

A limitation is either an error (the reader must raise one matching ``error``) or wrong rows
(the reader must return exactly ``wrong_rows(snapshot)``, which must differ from the right
rows). When a reader is fixed, its test fails here and the entry is removed, so the list in
``docs/readers.md`` stays true. Our own defects are never listed: a reader that trips on one
fails its test until we fix it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.interop.built import SnapshotRows


@dataclass(frozen=True)
class Limitation:
    reader: str
    bug: str  # what is wrong, as docs/readers.md names it
    fixtures: tuple[str, ...]
    applies: Callable[[SnapshotRows], bool] = lambda snapshot: True
    error: str | None = None  # a regular expression the reader's error message matches
    wrong_rows: Callable[[SnapshotRows], list[list[Any]]] | None = None


def _null_nested_as_empty(snapshot: SnapshotRows) -> list[list[Any]]:
    """The right rows, with a null ``nested`` (list<struct<k, v: list>>) read as []."""
    at = snapshot.columns.index("nested")
    from tests.interop.rows import sort_rows

    return sort_rows([[*row[:at], [] if row[at] is None else row[at], *row[at + 1:]] for row in snapshot.rows])


LIMITATIONS: tuple[Limitation, ...] = (
    Limitation(
        "iceberg-rust",
        "iceberg-rust cannot read a struct that gained a field: files written before the field was "
        "added fail to build the struct instead of reading the new field as null",
        ("struct_gained_field",),
        applies=lambda snapshot: "b" in str(snapshot.schema.find_type("st")),
        error=r"Incorrect number of arrays for StructArray fields, expected 2 got 1",
    ),
    Limitation(
        "pyiceberg",
        "pyiceberg reads a null list of structs that hold a list (list<struct<k, v: list<int>>>) as an "
        "empty list; Java, DuckDB, Polars and iceberg-rust read null",
        ("all_types", "all_types_partitioned"),
        wrong_rows=_null_nested_as_empty,
    ),
    Limitation(
        "java",
        "Spark 3.5, through which the Java oracle reads, has no time type and refuses the whole table",
        ("time_type",),
        error=r"UnsupportedOperationException: Spark does not support time fields",
    ),
)


def limitation(reader: str, fixture: str, snapshot: SnapshotRows) -> Limitation | None:
    for known in LIMITATIONS:
        if known.reader == reader and fixture in known.fixtures and known.applies(snapshot):
            return known
    return None
