"""A real Keycloak 26 on loopback, for tests: ``start_keycloak(workdir)``, and its admin REST API.

The server comes from :mod:`infra.keycloak_server` (downloaded, built and seeded once per
machine) and runs in development mode (``kc.sh start-dev``: plain HTTP, H2 in a file) from a
copy of the seed database in ``workdir``, so it starts without creating Keycloak's schema. A
test creates what it needs through the admin API: realms (each one an issuer), confidential
clients with service accounts (the client credentials grant), realm roles given to those
service accounts, and an audience mapper so the tokens name the catalog service.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from infra import keycloak_server
from infra.local.processes import child_pids, free_port, kill_pids, spawn, stop_process, wait_until

START_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Client:
    """A confidential client of the client credentials grant: its service account (whose id,
    the tokens' ``sub``, is ``account_id``) holds realm ``roles``; its tokens' ``aud`` holds
    ``audience``; ``attributes`` such as ``access.token.lifespan``."""

    client_id: str
    secret: str
    roles: tuple[str, ...] = ()
    audience: str | None = None
    attributes: tuple[tuple[str, str], ...] = ()
    account_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def representation(self) -> dict[str, Any]:
        mappers = [{"name": "audience", "protocol": "openid-connect", "protocolMapper": "oidc-audience-mapper",
                    "config": {"included.custom.audience": self.audience, "access.token.claim": "true",
                               "id.token.claim": "false"}}] if self.audience else []
        return {"clientId": self.client_id, "secret": self.secret, "enabled": True, "protocol": "openid-connect",
                "publicClient": False, "clientAuthenticatorType": "client-secret", "serviceAccountsEnabled": True,
                "standardFlowEnabled": False, "directAccessGrantsEnabled": False,
                "attributes": dict(self.attributes), "protocolMappers": mappers,
                "defaultClientScopes": ["catalog", "roles", "basic"]}


@dataclass
class KeycloakServer:
    """A running Keycloak; ``admin(method, path, ...)`` calls its admin REST API as the bootstrap admin."""

    port: int
    process: Any = field(default=None, repr=False)
    log_path: Path | None = None
    _admin_token: str | None = field(default=None, repr=False)
    _admin_expires: float = 0.0

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def issuer(self, realm: str) -> str:
        return f"{self.uri}/realms/{realm}"

    def token_endpoint(self, realm: str) -> str:
        return f"{self.issuer(realm)}/protocol/openid-connect/token"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def admin(self, method: str, path: str, json: Any = None, expect: Sequence[int] = (200, 201, 204)) -> Any:
        """One admin API call (``path`` under ``/admin/realms``); its JSON answer, if any."""
        if self._admin_token is None or time.monotonic() > self._admin_expires:
            answer = requests.post(self.token_endpoint("master"), timeout=60, data={
                "grant_type": "password", "client_id": "admin-cli",
                "username": keycloak_server.ADMIN_USER, "password": keycloak_server.ADMIN_PASSWORD})
            answer.raise_for_status()
            self._admin_token = answer.json()["access_token"]
            self._admin_expires = time.monotonic() + answer.json()["expires_in"] - 10
        response = requests.request(method, f"{self.uri}/admin/realms{path}", json=json, timeout=120,
                                    headers={"Authorization": f"Bearer {self._admin_token}"})
        assert response.status_code in expect, (method, path, response.status_code, response.text[:1000])
        return response.json() if response.content and "json" in response.headers.get("content-type", "") else None

    def import_realm(self, realm: str, roles: Sequence[str], clients: Sequence[Client]) -> str:
        """A realm (an issuer) made in one call, as a realm file is imported: realm ``roles``, the
        client scope ``catalog`` that Iceberg's clients ask for (Keycloak refuses unknown scopes),
        and ``clients``; its issuer URL. One call instead of one per object: on two loaded cores
        each admin call costs seconds."""
        self.admin("POST", "", {
            "realm": realm, "enabled": True,
            "roles": {"realm": [{"name": role} for role in roles]},
            "clientScopes": [
                {"name": "catalog", "protocol": "openid-connect", "attributes": {"include.in.token.scope": "true"}},
                {"name": "roles", "protocol": "openid-connect", "attributes": {"include.in.token.scope": "false"},
                 "protocolMappers": [{"name": "realm roles", "protocol": "openid-connect",
                                      "protocolMapper": "oidc-usermodel-realm-role-mapper",
                                      "config": {"claim.name": "realm_access.roles", "multivalued": "true",
                                                 "access.token.claim": "true", "jsonType.label": "String"}}]},
                {"name": "basic", "protocol": "openid-connect", "attributes": {"include.in.token.scope": "false"},
                 "protocolMappers": [{"name": "sub", "protocol": "openid-connect",
                                      "protocolMapper": "oidc-sub-mapper",
                                      "config": {"access.token.claim": "true"}}]}],
            "clients": [client.representation() for client in clients],
            "users": [{"id": client.account_id, "username": f"service-account-{client.client_id}", "enabled": True,
                       "serviceAccountClientId": client.client_id, "realmRoles": list(client.roles)}
                      for client in clients],
        })
        return self.issuer(realm)

    def import_client(self, realm: str, client: Client, roles: Sequence[str] = ()) -> None:
        """``client`` added to an existing realm, with realm ``roles`` created first."""
        for role in roles:
            self.admin("POST", f"/{realm}/roles", {"name": role})
        self.create_client(realm, client.client_id, client.secret, client.roles, client.audience,
                           dict(client.attributes))

    def create_realm(self, realm: str, roles: Sequence[str] = (), **settings: Any) -> str:
        """A realm (an issuer) with realm ``roles``; its issuer URL."""
        self.admin("POST", "", {"realm": realm, "enabled": True, **settings})
        for role in roles:
            self.admin("POST", f"/{realm}/roles", {"name": role})
        return self.issuer(realm)

    def create_client(self, realm: str, client_id: str, secret: str, roles: Sequence[str] = (),
                      audience: str | None = None, attributes: dict[str, str] | None = None) -> str:
        """A confidential client that gets tokens with the client credentials grant (its service
        account holds the realm ``roles``), its tokens' ``aud`` holding ``audience``; its id."""
        self.admin("POST", f"/{realm}/clients", {
            "clientId": client_id, "secret": secret, "enabled": True, "protocol": "openid-connect",
            "publicClient": False, "clientAuthenticatorType": "client-secret", "serviceAccountsEnabled": True,
            "standardFlowEnabled": False, "directAccessGrantsEnabled": False, "attributes": attributes or {},
            "protocolMappers": [{
                "name": "audience", "protocol": "openid-connect", "protocolMapper": "oidc-audience-mapper",
                "config": {"included.custom.audience": audience, "access.token.claim": "true",
                           "id.token.claim": "false"}}] if audience else []})
        internal = self.admin("GET", f"/{realm}/clients?clientId={client_id}")[0]["id"]
        if roles:
            account = self.admin("GET", f"/{realm}/clients/{internal}/service-account-user")["id"]
            granted = [self.admin("GET", f"/{realm}/roles/{role}") for role in roles]
            self.admin("POST", f"/{realm}/users/{account}/role-mappings/realm", granted)
        return str(internal)

    def service_account(self, realm: str, client_internal_id: str) -> dict[str, Any]:
        account: dict[str, Any] = self.admin("GET", f"/{realm}/clients/{client_internal_id}/service-account-user")
        return account

    def token(self, realm: str, client_id: str, secret: str) -> str:
        """An access token of the client credentials grant."""
        answer = requests.post(self.token_endpoint(realm), timeout=60, data={
            "grant_type": "client_credentials", "client_id": client_id, "client_secret": secret})
        assert answer.status_code == 200, answer.text[:1000]
        return str(answer.json()["access_token"])

    def stop(self) -> None:
        if self.process is None:
            return
        # kc.sh passes SIGTERM on to its JVM; a JVM that outlives it is killed by id.
        jvms = child_pids(self.process.pid)
        stop_process(self.process, timeout_s=30)
        kill_pids([pid for pid in jvms if Path(f"/proc/{pid}").exists()])


def start_keycloak(workdir: Path, timeout_s: float = START_TIMEOUT_S) -> KeycloakServer:
    """Keycloak on a free loopback port, its database a copy of the seed in ``workdir``."""
    dist = keycloak_server.install()
    database = workdir / keycloak_server.DB_FILE
    database.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(keycloak_server.seed_db(), database)
    port = free_port()
    log_path = workdir / "keycloak.log"
    process = spawn(keycloak_server.command(dist, port), log_path, env=keycloak_server.environment(workdir),
                    cwd=workdir)
    server = KeycloakServer(port=port, process=process, log_path=log_path)
    try:
        wait_until(lambda: keycloak_server.ready(server.uri), "Keycloak", process, log_path, timeout_s)
    except BaseException:
        server.stop()
        raise
    return server


__all__ = ["Client", "KeycloakServer", "start_keycloak"]
