"""The `tablestore` command.

    tablestore sql [-e "STATEMENTS" | -f FILE] [--format table|json|csv] [--config PATH]
    tablestore table describe|history|files|partitions|snapshots NAME [--config PATH]
    tablestore catalog serve [--config PATH] [--host HOST] [--port 8181]
    tablestore catalog grant|revoke PRIVILEGE --on catalog|namespace:NS|table:NS.T --to principal:P|role:R
    tablestore catalog grants [--on ...] [--to ...] [--catalog NAME]
    tablestore table expire-snapshots|remove-orphans|compact NAME [options]
    tablestore table refs|branch|tag|rollback|fast-forward NAME [REF] [options]
    tablestore erase --table db.t --column user_id (--values 1,2 | --values-from db.requests) --request-id ID

Errors print one line naming what is wrong and exit non-zero; the failed statement commits nothing.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from tablestore.cli.grants_args import GRANT_ACTIONS, add_grant_options
from tablestore.cli.maintenance_args import MAINTENANCE_ACTIONS, add_erase_parser, add_table_options
from tablestore.cli.refs_args import REF_ACTIONS, add_ref_options
from tablestore.errors import ParseError, TableStoreError

# The extra that brings each optional package a command may need (pyproject.toml): the core
# install has none of them, and a command that needs one says which extra to install.
EXTRAS = {
    "pyspark": "spark",
    "pandas": "spark",
    "fastapi": "service",
    "starlette": "service",
    "anyio": "service",
    "prometheus_client": "service",
    "uvicorn": "service",
    "jwt": "service",
    "botocore": "service",
    "dagster": "pipelines",
    "great_expectations": "pipelines",
}


def missing_extra(error: ModuleNotFoundError) -> str | None:
    """The message for a command that needs a package of an extra that is not installed, or None
    when the missing module is not one an extra brings (a real bug, shown as it is)."""
    package = (error.name or "").partition(".")[0]
    extra = EXTRAS.get(package)
    if extra is None:
        return None
    return (f"this command needs {package}, which is not installed; install the {extra!r} extra: "
            f"pip install 'tablestore[{extra}]'")


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML config (default: $TABLESTORE_CONFIG, ./tablestore.yaml, embedded)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tablestore", description="An open table store in the Apache Iceberg format.")
    sub = parser.add_subparsers(dest="command", required=True)
    sql = sub.add_parser("sql", help="run SQL statements, or open an interactive shell")
    _add_common(sql)
    group = sql.add_mutually_exclusive_group()
    group.add_argument("-e", dest="statements", help="statements separated by ';'")
    group.add_argument("-f", dest="file", help="a SQL script to run")
    sql.add_argument("--format", choices=("table", "json", "csv"), default="table", help="output format")
    table = sub.add_parser("table", help="table administration")
    _add_common(table)
    table.add_argument("action", choices=("describe", "history", "snapshots", "files", "partitions",
                                          *MAINTENANCE_ACTIONS, *REF_ACTIONS))
    table.add_argument("name", help="table name: table, db.table or catalog.db.table")
    add_ref_options(table)
    table.add_argument("--format", choices=("table", "json", "csv"), default="table")
    catalog = sub.add_parser("catalog", help="the catalog service")
    _add_common(catalog)
    catalog.add_argument("action", choices=("serve", *GRANT_ACTIONS),
                         help="serve: run the Iceberg REST catalog service; grant, revoke, grants: manage and "
                              "list privileges (server.authorization: grants)")
    catalog.add_argument("--host", help="serve: address to listen on (default: server.host, else 127.0.0.1)")
    catalog.add_argument("--port", type=int, help="serve: port (default: server.port, else 8181)")
    add_grant_options(catalog)
    add_table_options(table)
    add_erase_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        # Each command imports its own module on use: `tablestore catalog` need not load Spark
        # and the SQL layer, `tablestore sql` need not load FastAPI.
        if args.command == "sql":
            from tablestore.cli.sql import run_sql

            return run_sql(args)
        if args.command == "table" and args.action in MAINTENANCE_ACTIONS:
            from tablestore.cli.maintenance import run_maintenance

            return run_maintenance(args)
        if args.command == "table" and args.action in REF_ACTIONS:
            from tablestore.cli.refs import run_refs

            return run_refs(args)
        if args.command == "erase":
            from tablestore.cli.maintenance import run_erase

            return run_erase(args)
        if args.command == "table":
            from tablestore.cli.admin import run_table

            return run_table(args)
        if args.command == "catalog" and args.action in GRANT_ACTIONS:
            from tablestore.cli.grants import run_grants

            return run_grants(args)
        if args.command == "catalog":
            from tablestore.config import load_config
            from tablestore.rest.app import serve

            serve(load_config(args.config), args.host, args.port)
            return 0
    except ParseError as e:
        print(f"error: {e}", file=sys.stderr)
        if e.highlight:
            print(e.highlight, file=sys.stderr)
        return 1
    except TableStoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as e:
        message = missing_extra(e)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
