"""Who may do what, decided by one :class:`Authorizer` chosen at start-up.

``server.authorization: roles`` (the default) is :class:`RoleAuthorizer`: a principal's role in
a catalog (read or write) decides; LIST and READ need the read role, every other privilege the
write role. ``server.authorization: grants`` is :class:`GrantAuthorizer`: the privileges granted
to the principal and its roles on the catalog, its namespaces and tables decide
(:mod:`tablestore.rest.auth.grants`). The endpoints name the privilege they need on the object they
touch (``Access.require``) and never ask which authorizer runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from tablestore.errors import ForbiddenError
from tablestore.names import Identifier
from tablestore.rest.auth.grants import Grant, Held, Privilege, Securable, namespace_securable, table_securable
from tablestore.rest.auth.principals import READ, WRITE, Principal

if TYPE_CHECKING:
    from tablestore.rest.access import Access, Service


def role_for(privilege: Privilege) -> str:
    """The role a privilege needs under roles: read for LIST and READ, write for the others."""
    return READ if privilege in (Privilege.LIST, Privilege.READ) else WRITE


class Authorizer(Protocol):
    """The decisions an endpoint asks for; :func:`authorizer_for` picks the implementation."""

    def check_endpoint(self, principal: Principal, prefix: str, role: str) -> None:
        """The check made before an endpoint runs, by the role its kind needs (read or write)."""

    def check_config(self, service: Service, principal: Principal, prefix: str) -> None:
        """Whether ``principal`` may read the catalog's client configuration (``/v1/config``)."""

    def may(self, access: Access, privilege: Privilege, securable: Securable) -> bool: ...

    def refusal(self, access: Access, privilege: Privilege, securable: Securable) -> ForbiddenError:
        """The 403 of a privilege the caller lacks, naming what it needs."""

    def sees(self, access: Access, securable: Securable) -> bool:
        """Whether any of the caller's privileges reaches ``securable`` or something inside it
        (a namespace it may load, a listing it may see part of)."""

    def visible(self, access: Access, found: Iterable[Identifier], kind: str) -> list[Identifier]:
        """Of a listing the caller may see only partly, the entries its privileges reach."""

    def may_write_unnamed(self, access: Access) -> bool:
        """Whether credentials for a table not yet named (a staged create) may write."""

    def grants_shown(self, access: Access, grants: list[Grant]) -> list[Grant]:
        """The grants of the catalog the caller may list."""

    def forget(self, access: Access, securable: Securable) -> None:
        """A dropped object's grants go with it."""

    def moved(self, access: Access, source: Identifier, destination: Identifier) -> None:
        """A renamed object keeps its grants under its new name."""


class RoleAuthorizer:
    """``server.authorization: roles``: the principal's role in the catalog decides."""

    def check_endpoint(self, principal: Principal, prefix: str, role: str) -> None:
        if not principal.can(prefix, role):
            raise ForbiddenError(f"{principal.name!r} may not {role} in catalog {prefix!r}")

    def check_config(self, service: Service, principal: Principal, prefix: str) -> None:
        self.check_endpoint(principal, prefix, READ)

    def may(self, access: Access, privilege: Privilege, securable: Securable) -> bool:
        return access.principal.can(access.prefix, role_for(privilege))

    def refusal(self, access: Access, privilege: Privilege, securable: Securable) -> ForbiddenError:
        return ForbiddenError(f"{access.principal.name!r} may not {role_for(privilege)} in catalog {access.prefix!r}")

    def sees(self, access: Access, securable: Securable) -> bool:
        return access.principal.can(access.prefix, READ)

    def visible(self, access: Access, found: Iterable[Identifier], kind: str) -> list[Identifier]:
        return list(found) if access.principal.can(access.prefix, READ) else []

    def may_write_unnamed(self, access: Access) -> bool:
        return access.principal.can(access.prefix, WRITE)

    def grants_shown(self, access: Access, grants: list[Grant]) -> list[Grant]:
        if not access.principal.can(access.prefix, WRITE):
            raise ForbiddenError(f"{access.principal.name!r} may not list the grants of catalog {access.prefix!r}: "
                                 "that needs the write role")
        return grants

    def forget(self, access: Access, securable: Securable) -> None:
        return None  # no grants are kept under roles

    def moved(self, access: Access, source: Identifier, destination: Identifier) -> None:
        return None


class GrantAuthorizer:
    """``server.authorization: grants``: the privileges held on the object or above it decide."""

    def check_endpoint(self, principal: Principal, prefix: str, role: str) -> None:
        return None  # each endpoint requires its own privilege on its object

    def check_config(self, service: Service, principal: Principal, prefix: str) -> None:
        if not service.held(principal, prefix).any():
            # A principal holding nothing in the catalog is told so at once.
            raise ForbiddenError(f"{principal.name!r} holds no privilege in catalog {prefix!r}; "
                                 "a holder of MANAGE_GRANTS there can grant some")

    def may(self, access: Access, privilege: Privilege, securable: Securable) -> bool:
        return access.held().holds(privilege, securable)

    def refusal(self, access: Access, privilege: Privilege, securable: Securable) -> ForbiddenError:
        return ForbiddenError(
            f"{access.principal.name!r} lacks the {privilege} privilege on {securable.describe(access.prefix)} "
            f"(or on a namespace or catalog above it); a holder of MANAGE_GRANTS there can grant it")

    def sees(self, access: Access, securable: Securable) -> bool:
        return access.held().sees(securable)

    def visible(self, access: Access, found: Iterable[Identifier], kind: str) -> list[Identifier]:
        held: Held = access.held()
        make = namespace_securable if kind == "namespace" else table_securable
        return [ident for ident in found if held.sees(make(ident))]

    def may_write_unnamed(self, access: Access) -> bool:
        return False  # WRITE is held on a named table

    def grants_shown(self, access: Access, grants: list[Grant]) -> list[Grant]:
        mine = set(access.service.settings.authorization.grantees(access.principal.name))
        held = access.held()
        return [g for g in grants if g.grantee in mine or held.holds(Privilege.MANAGE_GRANTS, g.securable)]

    def forget(self, access: Access, securable: Securable) -> None:
        access.service.grant_store(access.prefix).forget(securable)

    def moved(self, access: Access, source: Identifier, destination: Identifier) -> None:
        access.service.grant_store(access.prefix).move(table_securable(source), table_securable(destination))


def authorizer_for(grants: bool) -> Authorizer:
    """The authorizer of ``server.authorization``: grants, or the two roles."""
    return GrantAuthorizer() if grants else RoleAuthorizer()


__all__ = ["Authorizer", "GrantAuthorizer", "RoleAuthorizer", "authorizer_for", "role_for"]
