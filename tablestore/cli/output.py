"""Printing statement results as a table, one JSON line per statement, or CSV.

A query's rows are printed as they come from Spark (as spark-sql does), never gathered first:
CSV and JSON a row at a time; the table format in tables of up to ``ROWS_PER_TABLE`` rows (a
table needs its rows to size its columns), so a small result prints as one table.
"""

from __future__ import annotations

import csv
import itertools
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table as RichTable

from tablestore.sql.result import StatementResult, json_value

ROWS_PER_TABLE = 1000


def print_result(result: StatementResult, fmt: str, out: TextIO | None = None) -> None:
    stream = out or sys.stdout
    if fmt == "json":
        for part in result.json_parts():
            stream.write(part)
        stream.write("\n")
        stream.flush()
        return
    if fmt == "csv":
        if result.columns:
            writer = csv.writer(stream)
            writer.writerow(result.columns)
            for row in result.iter_rows():
                writer.writerow(["" if v is None else json_value(v) for v in row])
        elif result.affected is not None:
            stream.write(f"{result.affected}\n")
        stream.flush()
        return
    console = Console(file=stream, soft_wrap=True)
    if result.columns:
        count = 0
        for chunk in _chunks(result.iter_rows(), first=True):
            view = RichTable(show_lines=False)
            for column in result.columns:
                view.add_column(column, overflow="fold")
            for row in chunk:
                view.add_row(*("NULL" if v is None else str(json_value(v)) for v in row))
            console.print(view)
            count += len(chunk)
        console.print(f"{count} row(s)", style="dim")
    elif result.affected is not None:
        console.print(f"{result.affected} row(s) affected", style="dim")
    else:
        console.print("OK", style="dim")


def _chunks(rows: Iterator[list[Any]], first: bool) -> Iterator[list[list[Any]]]:
    """Runs of up to ROWS_PER_TABLE rows; one empty run for no rows (an empty table is printed)."""
    while True:
        chunk = list(itertools.islice(rows, ROWS_PER_TABLE))
        if chunk or first:
            yield chunk
        if len(chunk) < ROWS_PER_TABLE:
            return
        first = False
