"""Printing statement results as a table, one JSON line per statement, or CSV."""

from __future__ import annotations

import csv
import sys
from typing import TextIO

from rich.console import Console
from rich.table import Table as RichTable

from tablestore.sql.result import StatementResult, json_value


def print_result(result: StatementResult, fmt: str, out: TextIO | None = None) -> None:
    stream = out or sys.stdout
    if fmt == "json":
        stream.write(result.to_json() + "\n")
        stream.flush()
        return
    if fmt == "csv":
        if result.columns:
            writer = csv.writer(stream)
            writer.writerow(result.columns)
            for row in result.rows:
                writer.writerow(["" if v is None else json_value(v) for v in row])
        elif result.affected is not None:
            stream.write(f"{result.affected}\n")
        stream.flush()
        return
    console = Console(file=stream, soft_wrap=True)
    if result.columns:
        view = RichTable(show_lines=False)
        for column in result.columns:
            view.add_column(column, overflow="fold")
        for row in result.rows:
            view.add_row(*("NULL" if v is None else str(json_value(v)) for v in row))
        console.print(view)
        console.print(f"{len(result.rows)} row(s)", style="dim")
    elif result.affected is not None:
        console.print(f"{result.affected} row(s) affected", style="dim")
    else:
        console.print("OK", style="dim")
