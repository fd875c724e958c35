"""Arguments of the maintenance commands (kept light: parsing must not import the engine)."""

from __future__ import annotations

import argparse

MAINTENANCE_ACTIONS = ("expire-snapshots", "remove-orphans", "compact")


def add_table_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--older-than", help="expire-snapshots/remove-orphans: ISO timestamp threshold")
    parser.add_argument("--retain-last", type=int, help="expire-snapshots: snapshots to keep at least")
    parser.add_argument("--dry-run", action="store_true", help="remove-orphans: only list the files")
    parser.add_argument("--strategy", choices=("binpack", "sort"), default=None, help="compact: strategy")
    parser.add_argument("--sort-order", help="compact: e.g. 'id DESC, name'")
    parser.add_argument("--where", help="compact: only files that may hold matching rows")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="compact: Iceberg rewrite option, e.g. min-input-files=2 (repeatable)")


def add_erase_parser(sub: argparse._SubParsersAction) -> None:
    erase = sub.add_parser("erase", help="erase subjects' rows from tables, verify and audit it")
    erase.add_argument("--config", help="YAML config (default: $TABLESTORE_CONFIG, ./tablestore.yaml, embedded)")
    erase.add_argument("--table", action="append", required=True, help="table to erase from (repeatable)")
    erase.add_argument("--column", required=True, help="the subjects' id column, e.g. user_id")
    group = erase.add_mutually_exclusive_group(required=True)
    group.add_argument("--values", help="comma-separated subject ids")
    group.add_argument("--values-from", help="a table holding the subject ids (in a column named like --column)")
    erase.add_argument("--request-id", required=True, help="the erasure request's id (recorded in the audit)")
    erase.add_argument("--audit-table", help="audit table (default <namespace>.erasure_audit)")
    erase.add_argument("--remove-refs", action="store_true", help="drop branches and tags that pin old snapshots")
