"""Grants: privileges on a catalog, its namespaces and its tables, held by principals and roles.

The model, in the words of the peers (Polaris' privileges, Lakekeeper's, SQL's ``GRANT``):

============== ==================================================== ====================================
privilege      gives                                                 peers
============== ==================================================== ====================================
LIST           list the namespaces, tables and views in a namespace  Polaris NAMESPACE_LIST/TABLE_LIST,
               (or the catalog's top level), and load namespaces     Lakekeeper ``describe``, SQL USAGE
READ           load a table or view, plan its scans, credentials     Polaris TABLE_READ_DATA, SQL SELECT
               and signatures that read its files
WRITE          commit to a table or view (implies READ); credentials Polaris TABLE_WRITE_DATA,
               and signatures that write its files; a namespace's    Lakekeeper ``modify``, SQL MODIFY
               properties
CREATE         create (or register) tables, views, functions and     Polaris TABLE_CREATE/NAMESPACE_CREATE,
               namespaces inside a namespace (or the catalog)        SQL CREATE
DROP           drop (or rename away) a table, view, function or      Polaris TABLE_DROP/NAMESPACE_DROP,
               namespace                                             SQL DROP
MANAGE_GRANTS  grant and revoke privileges on the object and all     Polaris CATALOG_MANAGE_ACCESS,
               below it                                              Lakekeeper ``manage_grants``
============== ==================================================== ====================================

A grant names one securable: the catalog, a namespace, or a table (views and functions are
tables here, as they share a table's name space). A privilege granted on the catalog or a
namespace holds for everything below it: catalog → namespace → nested namespace → table. A
grantee is a principal (a token's or client's name, or the name an identity provider's claim
maps to) or a role (whose members the ``server.authorization`` section lists). Grants live in the
catalog's own database, table ``tablestore_grants``, so every replica of the service decides
alike, and a revoke holds on every replica at its next request.

This module holds the model, the store and the ``server.authorization`` setting; what each
endpoint needs is decided in :mod:`tablestore.rest.access`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field
from sqlalchemy import Engine, and_, delete, insert, or_, select
from sqlalchemy.exc import IntegrityError

from tablestore.config_files import FileModel, Listed
from tablestore.errors import ValidationError
from tablestore.names import Identifier, to_namespace, validate_name
from tablestore.rest.service_tables import GRANTS, create_service_table


class Privilege(StrEnum):
    LIST = "LIST"
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DROP = "DROP"
    MANAGE_GRANTS = "MANAGE_GRANTS"


CATALOG = "catalog"
NAMESPACE = "namespace"
TABLE = "table"
SECURABLE_TYPES = (CATALOG, NAMESPACE, TABLE)
PRINCIPAL = "principal"
ROLE = "role"
GRANTEE_TYPES = (PRINCIPAL, ROLE)
# What can be granted on a table: listing and creating happen in namespaces.
TABLE_PRIVILEGES = frozenset({Privilege.READ, Privilege.WRITE, Privilege.DROP, Privilege.MANAGE_GRANTS})
# The privileges that also give another one: a writer reads what it commits on.
GIVEN_BY: dict[Privilege, frozenset[Privilege]] = {Privilege.READ: frozenset({Privilege.READ, Privilege.WRITE})}


def parse_privilege(text: str) -> Privilege:
    try:
        return Privilege(text.strip().upper().replace("-", "_"))
    except ValueError:
        raise ValidationError(f"unknown privilege {text!r}; the privileges are "
                              f"{', '.join(p.value for p in Privilege)}") from None


@dataclass(frozen=True)
class Securable:
    """What a grant is on: the catalog (path ``()``), a namespace (its levels) or a table (its
    namespace's levels and its name)."""

    kind: str
    path: Identifier = ()

    def __post_init__(self) -> None:
        if self.kind not in SECURABLE_TYPES:
            raise ValidationError(f"a grant is on a catalog, a namespace or a table, not a {self.kind!r}")
        if self.kind == CATALOG and self.path:
            raise ValidationError("a grant on the catalog names no namespace or table")
        if self.kind == NAMESPACE:
            to_namespace(self.path)
        if self.kind == TABLE:
            if len(self.path) < 2:
                raise ValidationError("a table is named by its namespace and its name, like db.orders")
            to_namespace(self.path[:-1])
            validate_name(self.path[-1], "table name")

    @property
    def namespace(self) -> Identifier:
        """The namespace a table is in, or the namespace itself."""
        return self.path[:-1] if self.kind == TABLE else self.path

    def covers(self, other: Securable) -> bool:
        """Whether a privilege on this securable holds for ``other`` (inherited downwards)."""
        if self.kind == CATALOG:
            return True
        if self.kind == TABLE:
            return other == self
        return other.namespace[:len(self.path)] == self.path

    def describe(self, catalog: str) -> str:
        if self.kind == CATALOG:
            return f"catalog {catalog!r}"
        return f"{self.kind} {'.'.join(self.path)!r} of catalog {catalog!r}"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "name": list(self.path)}

    @classmethod
    def from_json(cls, body: Any) -> Securable:
        if not isinstance(body, dict) or not isinstance(body.get("type"), str):
            raise ValidationError('a securable is {"type": "catalog|namespace|table", "name": [levels...]}')
        name = body.get("name") or []
        if not isinstance(name, list) or not all(isinstance(n, str) for n in name):
            raise ValidationError("a securable's name is a list of strings: the namespace levels (and table name)")
        return cls(body["type"], tuple(name))


def catalog_securable() -> Securable:
    return Securable(CATALOG)


def namespace_securable(namespace: Sequence[str]) -> Securable:
    return Securable(NAMESPACE, tuple(namespace))


def table_securable(identifier: Sequence[str]) -> Securable:
    return Securable(TABLE, tuple(identifier))


@dataclass(frozen=True)
class Grantee:
    kind: str
    name: str

    def __post_init__(self) -> None:
        if self.kind not in GRANTEE_TYPES:
            raise ValidationError(f"a grantee is a principal or a role, not a {self.kind!r}")
        if not self.name or len(self.name) > 255:
            raise ValidationError("a grantee needs a name of 1 to 255 characters")

    def to_json(self) -> dict[str, str]:
        return {"type": self.kind, "name": self.name}

    @classmethod
    def from_json(cls, body: Any) -> Grantee:
        if not isinstance(body, dict) or not isinstance(body.get("type"), str) \
                or not isinstance(body.get("name"), str):
            raise ValidationError('a grantee is {"type": "principal|role", "name": "..."}')
        return cls(body["type"], body["name"])


@dataclass(frozen=True)
class Grant:
    securable: Securable
    privilege: Privilege
    grantee: Grantee

    def __post_init__(self) -> None:
        if self.securable.kind == TABLE and self.privilege not in TABLE_PRIVILEGES:
            raise ValidationError(
                f"{self.privilege} cannot be granted on a table: it is a privilege of namespaces "
                "(grant it on the table's namespace); a table takes READ, WRITE, DROP and MANAGE_GRANTS")

    def to_json(self) -> dict[str, Any]:
        return {"securable": self.securable.to_json(), "privilege": self.privilege.value,
                "grantee": self.grantee.to_json()}

    @classmethod
    def from_json(cls, body: Any) -> Grant:
        if not isinstance(body, dict) or not isinstance(body.get("privilege"), str):
            raise ValidationError("a grant is {securable, privilege, grantee}")
        return cls(Securable.from_json(body.get("securable")), parse_privilege(body["privilege"]),
                   Grantee.from_json(body.get("grantee")))


# -- the ``server.authorization`` setting --------------------------------------------------------


def _mode_or_mapping(value: Any) -> Any:
    # ``authorization: grants`` is the short form of ``authorization: {mode: grants}``.
    return {"mode": value} if isinstance(value, str) else value


class AuthorizationSettings(FileModel):
    """``server.authorization``: who decides what a principal may do.

    ::

        authorization:
          mode: grants          # roles (default): the tokens' read/write roles; grants: the grants
          admins: [ops]         # principals holding every privilege on every served catalog
          roles:                # role -> its member principals
            analysts: [trino-a, alice]
    """

    mode: Annotated[Literal["roles", "grants"], BeforeValidator(lambda v: str(v).lower())] = Field(
        default="roles", description="'roles' or 'grants'")
    admins: Listed[str] = Field(default=(), description="a list of principal names")
    roles: dict[str, Listed[str]] = Field(
        default_factory=dict, description="a mapping of role names to lists of principal names")

    @property
    def grants(self) -> bool:
        return self.mode == "grants"

    def grantees(self, principal: str) -> tuple[Grantee, ...]:
        """The principal and the roles it is a member of."""
        return (Grantee(PRINCIPAL, principal),
                *(Grantee(ROLE, role) for role, members in self.roles.items() if principal in members))


def authorization_settings(value: Any) -> AuthorizationSettings:
    return AuthorizationSettings.model_validate(_mode_or_mapping(value))


AuthorizationField = Annotated[AuthorizationSettings, BeforeValidator(_mode_or_mapping)]


# -- what one principal holds in one catalog -----------------------------------------------------


@dataclass(frozen=True)
class Held:
    """The grants a principal holds in a catalog (directly and through its roles), or all of them."""

    grants: tuple[Grant, ...]
    admin: bool = False

    def holds(self, privilege: Privilege, securable: Securable) -> bool:
        if self.admin:
            return True
        giving = GIVEN_BY.get(privilege, frozenset({privilege}))
        return any(g.privilege in giving and g.securable.covers(securable) for g in self.grants)

    def sees(self, securable: Securable) -> bool:
        """Whether any privilege reaches the securable: on it or above it, or (for a namespace)
        on anything inside it. A namespace one may read one table of is seen in listings."""
        if self.admin:
            return True
        return any(g.securable.covers(securable) or securable.covers(g.securable) for g in self.grants)

    def any(self) -> bool:
        return self.admin or bool(self.grants)


# -- the store --------------------------------------------------------------------------------------

_G = GRANTS.c


def _name_json(path: Identifier) -> str:
    return json.dumps(list(path), separators=(",", ":"))


def _grant_of(row: Any) -> Grant:
    return Grant(Securable(row.securable_type, tuple(json.loads(row.securable_name))), Privilege(row.privilege),
                 Grantee(row.grantee_type, row.grantee_name))


class GrantStore:
    """The grants of one served catalog, in its database (created on first use)."""

    def __init__(self, engine: Engine, catalog: str) -> None:
        self.engine = engine
        self.catalog = catalog
        create_service_table(engine, GRANTS)

    def _key(self, grant: Grant) -> Any:
        return and_(_G.catalog_name == self.catalog, _G.securable_type == grant.securable.kind,
                    _G.securable_name == _name_json(grant.securable.path), _G.privilege == grant.privilege.value,
                    _G.grantee_type == grant.grantee.kind, _G.grantee_name == grant.grantee.name)

    def grant(self, grant: Grant, granted_by: str) -> bool:
        """Record ``grant``; False when it was held already (granting twice is not an error)."""
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(GRANTS).values(
                    catalog_name=self.catalog, securable_type=grant.securable.kind,
                    securable_name=_name_json(grant.securable.path), privilege=grant.privilege.value,
                    grantee_type=grant.grantee.kind, grantee_name=grant.grantee.name, granted_by=granted_by,
                    granted_ms=int(time.time() * 1000)))
        except IntegrityError:
            return False
        return True

    def revoke(self, grant: Grant) -> bool:
        """Remove ``grant``; False when it was not held."""
        with self.engine.begin() as conn:
            return conn.execute(delete(GRANTS).where(self._key(grant))).rowcount > 0

    def grants(self, grantees: Iterable[Grantee] | None = None) -> list[Grant]:
        """The catalog's grants (to ``grantees`` only, when given), in a stable order."""
        query = select(GRANTS).where(_G.catalog_name == self.catalog)
        if grantees is not None:
            query = query.where(or_(*(and_(_G.grantee_type == g.kind, _G.grantee_name == g.name)
                                      for g in grantees)))
        query = query.order_by(_G.securable_type, _G.securable_name, _G.grantee_type, _G.grantee_name, _G.privilege)
        with self.engine.connect() as conn:
            return [_grant_of(row) for row in conn.execute(query)]

    def forget(self, securable: Securable) -> None:
        """Remove the grants on a dropped object (and, for a namespace, on anything left below
        it), so that a new object of the same name does not inherit them."""
        gone = [g for g in self.grants() if securable.covers(g.securable)]
        with self.engine.begin() as conn:
            for grant in gone:
                conn.execute(delete(GRANTS).where(self._key(grant)))

    def move(self, source: Securable, destination: Securable) -> None:
        """A renamed table keeps its grants under its new name."""
        with self.engine.begin() as conn:
            conn.execute(delete(GRANTS).where(
                _G.catalog_name == self.catalog, _G.securable_type == destination.kind,
                _G.securable_name == _name_json(destination.path)))
            conn.execute(GRANTS.update().where(
                _G.catalog_name == self.catalog, _G.securable_type == source.kind,
                _G.securable_name == _name_json(source.path)).values(securable_name=_name_json(destination.path)))


__all__ = [
    "CATALOG",
    "NAMESPACE",
    "PRINCIPAL",
    "ROLE",
    "TABLE",
    "AuthorizationField",
    "AuthorizationSettings",
    "Grant",
    "GrantStore",
    "Grantee",
    "Held",
    "Privilege",
    "Securable",
    "authorization_settings",
    "catalog_securable",
    "namespace_securable",
    "parse_privilege",
    "table_securable",
]
