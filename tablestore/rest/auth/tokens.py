"""Who may do what: bearer tokens, OAuth2 client credentials, and where tables may live.

Static tokens come from the config. Tokens issued at ``/v1/oauth/tokens`` are JSON Web Tokens
(RFC 7519) signed with HS256 (PyJWT) under a key derived from ``server.token-secret``, so they
need no server-side store and stay valid across restarts when the secret is configured. Their
claims are the standard ones: ``sub`` (the client id, or the principal of the static token they
were exchanged from), ``iat``, ``exp``, ``iss`` and ``aud`` (both ``tablestore``: the service
issues tokens only for itself), ``scope`` (``catalog``, the Iceberg REST clients' default), and
``kind`` for a token exchanged from a static one. Tokens of the format used before
(``ts1.<claims>.<hmac>``) are refused with a 401 that says to request a new token. Tokens are
compared in constant time and never logged.

Tokens of the external OpenID Connect issuers of ``server.oidc`` (their ``iss`` is one of them)
are verified by :mod:`tablestore.rest.auth.oidc`; the static tokens and the service's own keep working
beside them.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jwt

from tablestore.errors import ForbiddenError, NotAuthorizedError, ValidationError
from tablestore.rest.auth.oidc import OidcVerifier
from tablestore.rest.auth.principals import WRITE, Principal

if TYPE_CHECKING:
    from tablestore.rest.settings import ServerSettings

ANONYMOUS = Principal(name="anonymous", roles={"*": WRITE})
# The location properties that decide where a table writes files besides its location.
LOCATION_PROPERTIES = ("write.data.path", "write.metadata.path", "write.object-storage.path",
                       "write.folder-storage.path")
# Who a signed token was issued to: a configured client (the claim is left out), or the
# principal of a static token it was exchanged from.
CLIENT_TOKEN = "client"
STATIC_TOKEN = "static"
ALGORITHM = "HS256"
ISSUER = AUDIENCE = "tablestore"
SCOPE = "catalog"
# The prefix of the tokens this service issued before it issued JWTs.
LEGACY_PREFIX = "ts1."
TOKEN_ENDPOINT = "/v1/oauth/tokens"


def signing_key(secret: bytes) -> bytes:
    """The HS256 key of ``server.token-secret``: the SHA-256 of a fixed prefix and the secret, so
    that a secret of any length gives a key of the 256 bits RFC 7518 asks of HS256 (and PyJWT
    warns about without)."""
    return hashlib.sha256(b"tablestore issued tokens\0" + secret).digest()


class Authenticator:
    """Turns an ``Authorization`` header into a Principal, and client credentials into tokens."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self._key = signing_key(settings.token_secret)
        self.oidc = OidcVerifier(settings.oidc)
        # Whether an issued token was revoked (POST /v1/oauth/revoke, on any replica:
        # tablestore.rest.state.replicas); set by the app.
        self.revoked: Callable[[str], bool] = lambda _token: False
        # Bearer tokens verified (``authenticate``), for /metrics: one per authenticated request.
        self.verifications = 0
        self._count_lock = threading.Lock()

    def issue(self, client_id: str, client_secret: str) -> tuple[str, int]:
        """A signed token for valid client credentials, and its lifetime in seconds."""
        client = self.settings.client(client_id)
        if client is None or not hmac.compare_digest(client.client_secret.encode(), client_secret.encode()):
            raise NotAuthorizedError("invalid client credentials")
        return self.signed(client_id, CLIENT_TOKEN)

    def exchange(self, subject_token: str) -> tuple[str, int, Principal]:
        """RFC 8693 token exchange, the way Java's and Trino's clients refresh: a fresh token for
        the principal of ``subject_token``, one of ours that is valid and unexpired.

        The new token names the same principal (so it holds the same roles, as configured now).
        A static token is exchanged for a signed one of the same principal, which expires.
        NotAuthorizedError when ``subject_token`` is not a valid token of this server.
        """
        principal = self.authenticate(f"Bearer {subject_token}")
        external = self.oidc.issuer_of(subject_token)
        if external is not None:
            raise NotAuthorizedError(f"tokens of {external.issuer.issuer} are refreshed by their issuer, at "
                                     f"{external.token_endpoint or external.issuer.issuer}")
        if principal is ANONYMOUS:
            raise NotAuthorizedError("this server runs without authentication: it issues no tokens")
        # A static token, or a signed one exchanged from one, stays a static principal's: a
        # client of the same name must not lend it its roles.
        kind = STATIC_TOKEN
        if self.settings.token_principal(subject_token) is None:
            kind = str(self.claims(subject_token).get("kind", CLIENT_TOKEN))
        token, ttl = self.signed(principal.name, kind)
        return token, ttl, principal

    def signed(self, name: str, kind: str) -> tuple[str, int]:
        """A JWT for the principal ``name`` that expires after ``server.token-ttl-seconds``."""
        ttl = self.settings.token_ttl_s
        now = int(time.time())
        claims: dict[str, Any] = {"sub": name, "iat": now, "exp": now + ttl, "iss": ISSUER, "aud": AUDIENCE,
                                  "scope": SCOPE}
        if kind != CLIENT_TOKEN:
            claims["kind"] = kind
        return jwt.encode(claims, self._key, algorithm=ALGORITHM), ttl

    def claims(self, token: str) -> dict[str, Any]:
        """The verified claims of a token this service issued; NotAuthorizedError saying why not."""
        if token.startswith(LEGACY_PREFIX):
            raise NotAuthorizedError(
                "the bearer token is in the format this service issued before it issued JSON Web Tokens, "
                f"which it no longer accepts; request a new token at {TOKEN_ENDPOINT}")
        try:
            claims: dict[str, Any] = jwt.decode(
                token, self._key, algorithms=[ALGORITHM], audience=AUDIENCE, issuer=ISSUER,
                options={"require": ["sub", "exp", "iat"]})
        except jwt.ExpiredSignatureError:
            raise NotAuthorizedError(f"the bearer token has expired; request a new one at {TOKEN_ENDPOINT}") from None
        except jwt.InvalidTokenError:
            raise NotAuthorizedError("the bearer token is not valid") from None
        return claims

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization`` header; NotAuthorizedError saying why not."""
        with self._count_lock:
            self.verifications += 1
        if not self.settings.auth_required:
            return ANONYMOUS
        if not authorization:
            raise NotAuthorizedError("no bearer token; send 'Authorization: Bearer <token>'")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise NotAuthorizedError("the Authorization header must be 'Bearer <token>'")
        principal = self.settings.token_principal(token)
        if principal is not None:
            return principal
        if token.startswith(LEGACY_PREFIX):
            return self._verify_issued(token)
        if token.count(".") == 2:
            if self.oidc and self._external(token):
                return self.oidc.authenticate(token)
            return self._verify_issued(token)
        raise NotAuthorizedError("the bearer token is not valid")

    def _external(self, token: str) -> bool:
        # Ours carry iss "tablestore"; any other issuer is answered by the OIDC verifier, which
        # says whether it trusts it.
        parts = self.oidc.unverified(token)
        return parts is not None and parts[1].get("iss") != ISSUER

    def key_fetch(self, authorization: str | None) -> Callable[[], None] | None:
        """The blocking fetch of an issuer's keys that authenticating ``authorization`` would make
        now (for the request guard to run in a worker thread first), or None."""
        if not self.oidc or not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or token.count(".") != 2:
            return None
        return self.oidc.fetch_needed(token)

    def token_endpoint(self, authorization: str | None) -> str | None:
        """Where clients should get their tokens when external issuers are configured: that of
        the caller's issuer, or the first configured one for a static token. None without
        issuers, and for a token this service issued: its client refreshes it here, and Java's
        would send its refresh to an advertised endpoint."""
        if not self.oidc:
            return None
        _, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if token.count(".") == 2 and not self._external(token):
            return None
        return self.oidc.token_endpoint(token or None)

    def _verify_issued(self, token: str) -> Principal:
        claims = self.claims(token)
        if self.revoked(token):
            raise NotAuthorizedError(f"the bearer token was revoked; request a new one at {TOKEN_ENDPOINT}")
        name, kind = str(claims["sub"]), str(claims.get("kind", CLIENT_TOKEN))
        if kind == STATIC_TOKEN:
            # Exchanged from a static token: valid while a static token of that name is configured.
            found = next((p for p in self.settings.tokens if p.name == name), None)
            if found is None:
                raise NotAuthorizedError("the bearer token's principal is no longer configured")
            return found
        client = self.settings.client(name)
        if client is None:
            raise NotAuthorizedError("the bearer token's client is no longer configured")
        return client


def _local(location: str) -> str:
    # file:///x, file:/x and /x name the same local path.
    if location.startswith("file://"):
        return location[len("file://"):]
    return location.removeprefix("file:")


def check_location(location: str, warehouse: str | None, allow_external: bool, what: str) -> None:
    """ValidationError unless ``location`` is inside the warehouse (or external ones are allowed).

    Relative segments are refused outright: ``<warehouse>/../other`` would pass a prefix check.
    """
    if allow_external:
        return
    segments = location.replace("\\", "/").split("/")
    if any(s in ("..", ".") for s in segments) or any(ord(c) < 32 for c in location):
        raise ValidationError(f"{what} {location!r} contains '.' or '..' segments or control characters")
    if location.startswith("s3://") and any(c in location for c in "*?$"):
        # IAM wildcards and policy variables: a vended session policy scoped to this path would
        # reach other tables' files.
        raise ValidationError(f"{what} {location!r} contains '*', '?' or '$'; name a plain folder")
    if not warehouse:
        raise ValidationError(f"{what} {location!r} cannot be checked: the catalog has no warehouse")
    root = _local(warehouse).rstrip("/") + "/"
    candidate = _local(location).rstrip("/") + "/"
    if not candidate.startswith(root) or candidate == root:
        raise ValidationError(
            f"{what} {location!r} is outside the warehouse {warehouse}; put it under the warehouse "
            "(or set server.allow-external-locations: true)"
        )


__all__ = ["ANONYMOUS", "LOCATION_PROPERTIES", "Authenticator", "ForbiddenError", "NotAuthorizedError",
           "check_location"]
