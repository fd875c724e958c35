"""`tablestore table ...`: describe a table and list its history, snapshots, files and partitions."""

from __future__ import annotations

import argparse

from tablestore.catalog_manager import CatalogManager
from tablestore.cli.output import print_result
from tablestore.config import load_config
from tablestore.sql.result import StatementResult
from tablestore.sql.run.ddl import describe_table


def run_table(args: argparse.Namespace) -> int:
    manager = CatalogManager(load_config(args.config))
    catalog, identifier = manager.resolve_table(tuple(args.name.split(".")))
    table = catalog.load_table(identifier)
    if args.action == "describe":
        result = describe_table(catalog, table, extended=True)
    else:
        result = StatementResult.from_arrow(getattr(table.inspect, args.action)())
    print_result(result, args.format)
    return 0
