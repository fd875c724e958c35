"""Who a request comes from: a :class:`Principal` (a token's, a client's or an identity
provider's user) and its role, ``read`` or ``write``, in each served catalog."""

from __future__ import annotations

from typing import Annotated, Any

import pydantic
from pydantic_core import PydanticCustomError

READ = "read"
WRITE = "write"
ROLES = (READ, WRITE)


def _role_grant(value: Any) -> Any:
    if isinstance(value, dict) and not value:
        raise PydanticCustomError("config_must", "must map catalog names to read or write, got an empty mapping")
    if not isinstance(value, str | dict):
        raise PydanticCustomError("config_must", "must be read, write or a mapping of catalog names to them, got {v}",
                                  {"v": repr(value)})
    # A role alone holds in every served catalog: "*".
    grant = {"*": value} if isinstance(value, str) else value
    for catalog, role in grant.items():
        if str(role).lower() not in ROLES:
            raise PydanticCustomError("config_value", "role {role} for {catalog} is not one of read, write",
                                      {"role": repr(role), "catalog": repr(str(catalog))})
    return {str(catalog): str(role).lower() for catalog, role in grant.items()}


# A role a file grants (a static token, a client, an identity provider's claim value): ``read``
# or ``write`` in every served catalog, or a mapping of catalog names to them.
RoleGrant = Annotated[dict[str, str], pydantic.BeforeValidator(_role_grant)]


class Principal(pydantic.BaseModel):
    """Who a token belongs to, and its role (``read`` or ``write``) in each served catalog."""

    model_config = pydantic.ConfigDict(frozen=True)

    name: str
    roles: dict[str, str]

    def can(self, catalog: str, role: str) -> bool:
        held = self.roles.get(catalog) or self.roles.get("*")
        return held == WRITE or (held == READ and role == READ)

    def __repr__(self) -> str:
        return f"Principal(name={self.name!r}, roles={self.roles!r})"

    __str__ = __repr__


__all__ = ["READ", "ROLES", "WRITE", "Principal", "RoleGrant"]
