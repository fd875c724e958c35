"""`tablestore catalog grant|revoke|grants`: privileges on a catalog, its namespaces and tables.

    tablestore catalog grant READ --on namespace:sales --to role:analysts [--catalog lakehouse]
    tablestore catalog revoke WRITE --on table:sales.orders --to principal:etl
    tablestore catalog grants [--catalog lakehouse] [--on namespace:sales] [--to role:analysts]

``--on`` is ``catalog``, ``namespace:LEVELS`` or ``table:NAMESPACE.NAME`` (levels joined by dots);
``--to`` is ``principal:NAME`` or ``role:NAME``. On a ``rest`` catalog of the configuration the
commands go through the service's admin API with the catalog's token or credential (and need
MANAGE_GRANTS there); on a ``sql`` catalog they write the catalog's database directly, which is
how an operator holding the database's credentials sets up the first grants.
"""

from __future__ import annotations

import argparse

from tablestore.catalog.rest import RestCatalog
from tablestore.catalog.sql_catalog import SqlCatalog
from tablestore.catalog_manager import CatalogManager
from tablestore.cli.output import print_result
from tablestore.config import load_config
from tablestore.errors import ValidationError
from tablestore.rest.auth.grants import (
    CATALOG,
    GRANTEE_TYPES,
    Grant,
    Grantee,
    GrantStore,
    Securable,
    parse_privilege,
)
from tablestore.sql.result import StatementResult

ADMIN_PATH = "/v1/admin/grants"


def parse_securable(text: str) -> Securable:
    kind, sep, name = text.partition(":")
    if kind == CATALOG and not sep:
        return Securable(CATALOG)
    if not sep or not name:
        raise ValidationError(f"--on {text!r}: write catalog, namespace:LEVELS or table:NAMESPACE.NAME")
    return Securable(kind, tuple(name.split(".")))


def parse_grantee(text: str) -> Grantee:
    kind, sep, name = text.partition(":")
    if not sep or kind not in GRANTEE_TYPES:
        raise ValidationError(f"--to {text!r}: write principal:NAME or role:NAME")
    return Grantee(kind, name)


def _name(securable: Securable) -> str:
    return ".".join(securable.path) if securable.path else "-"


def run_grants(args: argparse.Namespace) -> int:
    manager = CatalogManager(load_config(args.config))
    try:
        catalog = manager.catalog(args.catalog_name)
        if args.action == "grants":
            grants = _list(catalog)
            if args.securable:
                wanted = parse_securable(args.securable)
                grants = [g for g in grants if g.securable == wanted]
            if args.grantee:
                grantee = parse_grantee(args.grantee)
                grants = [g for g in grants if g.grantee == grantee]
            rows = [[g.securable.kind, _name(g.securable), g.privilege.value, g.grantee.kind, g.grantee.name]
                    for g in grants]
            print_result(StatementResult(["on", "name", "privilege", "grantee_type", "grantee"], rows), args.format)
            return 0
        if not (args.privilege and args.securable and args.grantee):
            raise ValidationError(f"tablestore catalog {args.action} needs a privilege, --on and --to, for example: "
                                  f"tablestore catalog {args.action} READ --on namespace:sales --to role:analysts")
        grant = Grant(parse_securable(args.securable), parse_privilege(args.privilege), parse_grantee(args.grantee))
        changed = _change(catalog, grant, args.action)
        column = "granted" if args.action == "grant" else "revoked"
        print_result(StatementResult(["on", "name", "privilege", "grantee_type", "grantee", column],
                                     [[grant.securable.kind, _name(grant.securable), grant.privilege.value,
                                       grant.grantee.kind, grant.grantee.name, changed]]), args.format)
        return 0
    finally:
        manager.close()


def _list(catalog: object) -> list[Grant]:
    if isinstance(catalog, RestCatalog):
        answer = catalog.service_request("GET", ADMIN_PATH, params={"catalog": catalog.prefix})
        return [Grant.from_json(g) for g in answer["grants"]]
    return _store(catalog).grants()


def _change(catalog: object, grant: Grant, action: str) -> bool:
    if isinstance(catalog, RestCatalog):
        body = {"catalog": catalog.prefix, **grant.to_json()}
        answer = catalog.service_request("POST" if action == "grant" else "DELETE", ADMIN_PATH, json=body)
        return bool(answer["granted" if action == "grant" else "revoked"])
    store = _store(catalog)
    if action == "revoke":
        return store.revoke(grant)
    assert isinstance(catalog, SqlCatalog)
    path = grant.securable.path
    if grant.securable.kind == "namespace" and not catalog.namespace_exists(path):
        raise ValidationError(f"cannot grant on namespace {'.'.join(path)!r}: it does not exist")
    if grant.securable.kind == "table" and not (catalog.table_exists(path) or catalog.view_exists(path)
                                                or catalog.function_exists(path)):
        raise ValidationError(f"cannot grant on table {'.'.join(path)!r}: no table, view or function has that name")
    return store.grant(grant, "tablestore catalog grant")


def _store(catalog: object) -> GrantStore:
    if not isinstance(catalog, SqlCatalog):
        raise ValidationError("grants are managed on a sql catalog (its database) or a rest catalog (its service's "
                              f"admin API), not on {type(catalog).__name__}")
    return GrantStore(catalog.engine, catalog.name)


__all__ = ["parse_grantee", "parse_securable", "run_grants"]
