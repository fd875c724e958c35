"""Who a request comes from: a :class:`Principal` (a token's, a client's or an identity
provider's user) and its role, ``read`` or ``write``, in each served catalog."""

from __future__ import annotations

import pydantic

READ = "read"
WRITE = "write"
ROLES = (READ, WRITE)


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


__all__ = ["READ", "ROLES", "WRITE", "Principal"]
