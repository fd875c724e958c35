"""A catalog service with ``server.authorization: grants``, its principals, and the admin API
as the tests call it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import requests
import yaml

from tests.services import CATALOG, RestService

ADMIN_TOKEN = "admin-token-0123456789abcdef"
ALICE_TOKEN = "alice-token-0123456789abcdef"
BOB_TOKEN = "bob-token-0123456789abcdef"  # bob is a member of the role analysts
CAROL_TOKEN = "carol-token-0123456789abcdef"
TOKENS = {"admin": ADMIN_TOKEN, "alice": ALICE_TOKEN, "bob": BOB_TOKEN, "carol": CAROL_TOKEN}


def write_grants_config(path: Path, catalog_uri: str, warehouse: str, s3: dict[str, str] | None = None,
                        clients: dict[str, str] | None = None, roles: dict[str, list[str]] | None = None) -> None:
    """A service configuration under grants: ``admin`` holds everything, ``alice``, ``bob`` and
    ``carol`` (and the OAuth2 ``clients``, id -> secret) hold what they are granted."""
    catalog: dict[str, Any] = {"name": CATALOG, "type": "sql", "uri": catalog_uri, "warehouse": warehouse}
    if s3:
        catalog["s3"] = {k.removeprefix("s3."): v for k, v in s3.items()}
    server: dict[str, Any] = {
        # The role given here does not matter under grants: the grants decide.
        "tokens": [{"name": name, "token": token, "role": "read"} for name, token in TOKENS.items()],
        "clients": [{"client-id": cid, "client-secret": secret, "role": "read"}
                    for cid, secret in (clients or {}).items()],
        "token-secret": "test-signing-secret",
        "authorization": {"mode": "grants", "admins": ["admin"],
                          "roles": roles if roles is not None else {"analysts": ["bob"]}},
    }
    path.write_text(yaml.safe_dump({"catalogs": [catalog], "server": server}))


def start_grants_service(workdir: Path, catalog_uri: str, warehouse: str, s3: dict[str, str] | None = None,
                         clients: dict[str, str] | None = None) -> RestService:
    config = workdir / "tablestore.yaml"
    write_grants_config(config, catalog_uri, warehouse, s3, clients)
    service = RestService(config, catalog_uri, warehouse, workdir, s3_properties=s3 or {})
    service.start()
    return service


def grant_body(privilege: str, kind: str, name: tuple[str, ...], grantee: str,
               grantee_type: str = "principal") -> dict[str, Any]:
    return {"catalog": CATALOG, "securable": {"type": kind, "name": list(name)}, "privilege": privilege,
            "grantee": {"type": grantee_type, "name": grantee}}


class Admin:
    """The admin API, called as ``admin``."""

    def __init__(self, service: RestService, token: str = ADMIN_TOKEN) -> None:
        self.url = f"{service.uri}/v1/admin/grants"
        self.headers = {"Authorization": f"Bearer {token}"}

    def grant(self, privilege: str, kind: str, name: tuple[str, ...], grantee: str,
              grantee_type: str = "principal") -> requests.Response:
        response = requests.post(self.url, json=grant_body(privilege, kind, name, grantee, grantee_type),
                                 headers=self.headers, timeout=30)
        return response

    def revoke(self, privilege: str, kind: str, name: tuple[str, ...], grantee: str,
               grantee_type: str = "principal") -> requests.Response:
        return requests.delete(self.url, json=grant_body(privilege, kind, name, grantee, grantee_type),
                               headers=self.headers, timeout=30)

    def grants(self) -> list[dict[str, Any]]:
        response = requests.get(self.url, params={"catalog": CATALOG}, headers=self.headers, timeout=30)
        assert response.status_code == 200, response.text
        grants: list[dict[str, Any]] = response.json()["grants"]
        return grants

    def revoke_all(self, grantee: str, grantee_type: str = "principal") -> None:
        for grant in self.grants():
            if grant["grantee"] == {"type": grantee_type, "name": grantee}:
                securable = grant["securable"]
                response = self.revoke(grant["privilege"], securable["type"], tuple(securable["name"]), grantee,
                                       grantee_type)
                assert response.status_code == 200 and response.json()["revoked"], response.text


__all__ = ["ADMIN_TOKEN", "ALICE_TOKEN", "BOB_TOKEN", "CAROL_TOKEN", "Admin", "grant_body", "start_grants_service",
           "write_grants_config"]
