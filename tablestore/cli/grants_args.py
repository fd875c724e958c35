"""Arguments of the grant commands (kept light: parsing must not import the service or the engine)."""

from __future__ import annotations

import argparse

GRANT_ACTIONS = ("grant", "revoke", "grants")


def add_grant_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("privilege", nargs="?",
                        help="grant/revoke: LIST, READ, WRITE, CREATE, DROP or MANAGE_GRANTS")
    parser.add_argument("--on", dest="securable",
                        help="grant/revoke/grants: catalog, namespace:LEVELS or table:NAMESPACE.NAME")
    parser.add_argument("--to", dest="grantee", help="grant/revoke/grants: principal:NAME or role:NAME")
    parser.add_argument("--catalog", dest="catalog_name",
                        help="grant/revoke/grants: the catalog of the configuration (default: the default one)")
    parser.add_argument("--format", choices=("table", "json", "csv"), default="table")
