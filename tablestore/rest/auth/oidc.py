"""Bearer tokens of external OpenID Connect issuers (``server.oidc``): keys, verification, roles.

An issuer's keys are found the way OpenID Connect Discovery says: its
``.well-known/openid-configuration`` names the ``jwks_uri``, whose JSON Web Key Set holds the
public keys, each named by a ``kid``. They are kept for ``jwks-cache-seconds`` and fetched
again when a token names a ``kid`` the cache does not hold (the issuer rotated its keys), but
never more often than once per ``jwks-min-refresh-seconds``: anyone can send a token with a
made-up ``kid``, and the issuer must not pay for it. A failed fetch keeps the keys held.

A token is accepted when its ``iss`` is a configured issuer (exactly), its signature verifies
with that issuer's key under one of its public-key algorithms (never ``none`` or HS*), its
``aud`` holds the configured audience and it has not expired (``exp``, ``nbf`` and ``iat`` with
``leeway-seconds``). Its principal is named by ``principal-claim``; its roles come from the
values of ``roles-claim`` through the ``roles`` mapping. A token whose values map to no role is
a principal without roles: authenticated, and refused (403) everywhere.

Fetches are blocking HTTP calls. The request guard runs them in a worker thread
(:meth:`OidcVerifier.fetch_needed`) before it verifies a token on the event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import jwt
import requests

from tablestore.errors import NotAuthorizedError
from tablestore.rest.auth.oidc_settings import OidcIssuer
from tablestore.rest.auth.principals import READ, WRITE, Principal

logger = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 10.0
# Verified tokens are remembered (by their full text) for this long at most, so that a request's
# second look at its token (the request guard, then the endpoint) costs no second signature check.
VERIFIED_CACHE_S = 60.0
VERIFIED_CACHE_SIZE = 4096


def _shown(text: object, limit: int = 120) -> str:
    # What a token says about itself is the sender's text: shown only printable and short.
    value = "".join(c if 32 <= ord(c) < 127 else "?" for c in str(text))
    return value if len(value) <= limit else value[:limit] + "..."


def claim_values(claims: dict[str, Any], path: str) -> list[str]:
    """The string values at a dotted claim path (``realm_access.roles``, ``resource_access.<client>.roles``,
    ``groups``, ``sub``): a string gives one value, a list its strings, anything else none.

    A key may itself contain dots (client ids often do), so at each level the longest run of
    segments that is a key wins.
    """
    node: Any = claims
    segments = path.split(".")
    while segments:
        if not isinstance(node, dict):
            return []
        for size in range(len(segments), 0, -1):
            key = ".".join(segments[:size])
            if key in node:
                node, segments = node[key], segments[size:]
                break
        else:
            return []
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [v for v in node if isinstance(v, str)]
    return []


def _stronger(a: str | None, b: str) -> str:
    return WRITE if WRITE in (a, b) else READ


def roles_of(issuer: OidcIssuer, claims: dict[str, Any]) -> dict[str, str]:
    """The roles a token's claims map to: per catalog the strongest of its values' grants, and a
    catalog's own entry never weaker than ``*`` (Principal.can looks at the catalog's first)."""
    roles: dict[str, str] = {}
    for value in claim_values(claims, issuer.roles_claim):
        for catalog, role in issuer.roles.get(value, {}).items():
            roles[catalog] = _stronger(roles.get(catalog), role)
    if "*" in roles:
        roles = {catalog: _stronger(role, roles["*"]) for catalog, role in roles.items()}
    return roles


class IssuerKeys:
    """One issuer's discovery document and signing keys, cached (see the module docstring)."""

    def __init__(self, issuer: OidcIssuer, get: Callable[..., requests.Response] = requests.get) -> None:
        self.issuer = issuer
        self._get = get
        self._lock = threading.Lock()
        self._jwks: dict[str, dict[str, Any]] = {}  # kid -> JWK
        self._keys: dict[tuple[str, str], jwt.PyJWK] = {}  # (kid, alg) -> key
        self._attempted = float("-inf")  # monotonic time of the last fetch, failed or not
        self._loaded = float("-inf")  # of the last successful one
        self.discovered_token_endpoint: str | None = None
        self.fetches = 0

    def fetch_needed(self, kid: str) -> bool:
        """Whether a token naming ``kid`` should make a fetch now: the key is unknown or the keys
        are old, and the last attempt is at least ``jwks-min-refresh-seconds`` ago."""
        now = time.monotonic()
        wanted = kid not in self._jwks or now - self._loaded > self.issuer.jwks_cache_seconds
        return wanted and now - self._attempted >= self.issuer.jwks_min_refresh_seconds

    def fetch(self, kid: str) -> None:
        """Fetch the discovery document and the key set if ``kid`` still needs it (one fetch at
        a time per issuer). A failure is logged and leaves the keys held."""
        with self._lock:
            if not self.fetch_needed(kid):
                return
            self._attempted = time.monotonic()
            self.fetches += 1
            try:
                document = self._json(self.issuer.discovery_url)
                if document.get("issuer") != self.issuer.issuer:
                    raise ValueError(f"its discovery document names the issuer {_shown(document.get('issuer'))}, "
                                     f"not {self.issuer.issuer}")
                jwks_uri = document.get("jwks_uri")
                if not isinstance(jwks_uri, str):
                    raise ValueError("its discovery document has no jwks_uri")
                keys = self._json(jwks_uri).get("keys")
                if not isinstance(keys, list):
                    raise ValueError(f"{jwks_uri} holds no 'keys' list")
            except (requests.RequestException, ValueError) as e:
                logger.warning("the keys of the OIDC issuer %s could not be fetched: %s", self.issuer.issuer, e)
                return
            endpoint = document.get("token_endpoint")
            self.discovered_token_endpoint = endpoint if isinstance(endpoint, str) else None
            # Signing keys only: an issuer also publishes encryption keys (use: enc).
            self._jwks = {str(k["kid"]): k for k in keys
                          if isinstance(k, dict) and "kid" in k and k.get("use", "sig") == "sig"}
            self._keys = {}
            self._loaded = time.monotonic()

    def _json(self, url: str) -> dict[str, Any]:
        answer = self._get(url, timeout=FETCH_TIMEOUT_S, headers={"Accept": "application/json"})
        answer.raise_for_status()
        body = answer.json()
        if not isinstance(body, dict):
            raise ValueError(f"{url} did not answer a JSON object")
        return body

    def key(self, kid: str, alg: str) -> jwt.PyJWK:
        """The public key ``kid`` for algorithm ``alg``; NotAuthorizedError when the issuer has
        no such key (after a fetch, if one is allowed now) or it is not a key for ``alg``."""
        if self.fetch_needed(kid):
            self.fetch(kid)
        found = self._keys.get((kid, alg))
        if found is not None:
            return found
        jwk = self._jwks.get(kid)
        if jwk is None and not self._jwks:
            raise NotAuthorizedError(f"the signing keys of {self.issuer.issuer} could not be fetched "
                                     f"({self.issuer.discovery_url}); the service's log says why; try again later")
        if jwk is None:
            raise NotAuthorizedError(f"the bearer token names a key ({_shown(kid, 60)}) that {self.issuer.issuer} "
                                     "does not publish; request a new token")
        if jwk.get("alg", alg) != alg:
            raise NotAuthorizedError(f"the bearer token is signed with {_shown(alg, 20)}, but its key is for "
                                     f"{_shown(jwk.get('alg'), 20)}")
        try:
            found = jwt.PyJWK(jwk, algorithm=alg)
        except jwt.PyJWTError:
            raise NotAuthorizedError(f"the bearer token's key ({_shown(kid, 60)}) is not a key for "
                                     f"{_shown(alg, 20)}") from None
        self._keys[(kid, alg)] = found
        return found

    @property
    def token_endpoint(self) -> str | None:
        """Where clients get tokens: the configured ``token-endpoint``, else the discovered one."""
        return self.issuer.token_endpoint or self.discovered_token_endpoint


class OidcVerifier:
    """The configured issuers' tokens turned into Principals."""

    def __init__(self, issuers: tuple[OidcIssuer, ...],
                 get: Callable[..., requests.Response] = requests.get) -> None:
        self.issuers = {issuer.issuer: IssuerKeys(issuer, get) for issuer in issuers}
        self._verified: dict[str, tuple[float, Principal]] = {}

    def __bool__(self) -> bool:
        return bool(self.issuers)

    @staticmethod
    def unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """A JWT's header and claims, unverified; None when ``token`` is not a JWT."""
        try:
            header = jwt.get_unverified_header(token)
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return None
        return header, claims

    def issuer_of(self, token: str) -> IssuerKeys | None:
        """The configured issuer a token says it is from (unverified), or None."""
        parts = self.unverified(token)
        return self.issuers.get(str(parts[1].get("iss"))) if parts else None

    def fetch_needed(self, token: str) -> Callable[[], None] | None:
        """The blocking key fetch that verifying ``token`` would make now, to run off the event
        loop first; None when none is needed."""
        parts = self.unverified(token)
        if parts is None or token in self._verified:
            return None
        keys = self.issuers.get(str(parts[1].get("iss")))
        kid = str(parts[0].get("kid", ""))
        if keys is None or not keys.fetch_needed(kid):
            return None
        return lambda: keys.fetch(kid)

    def authenticate(self, token: str) -> Principal:
        """The Principal of a token of a configured issuer; NotAuthorizedError saying why not."""
        remembered = self._verified.get(token)
        now = time.time()
        if remembered is not None and now < remembered[0]:
            return remembered[1]
        parts = self.unverified(token)
        if parts is None:
            raise NotAuthorizedError("the bearer token is not valid")
        header, unverified = parts
        iss = str(unverified.get("iss"))
        keys = self.issuers.get(iss)
        if keys is None:
            raise NotAuthorizedError(f"the bearer token was issued by {_shown(iss)!r}, which this service does not "
                                     f"trust; it accepts tokens of {', '.join(sorted(self.issuers))}")
        issuer = keys.issuer
        alg = str(header.get("alg"))
        if alg not in issuer.algorithms:
            raise NotAuthorizedError(f"the bearer token is signed with {_shown(alg, 20)!r}; this service accepts "
                                     f"{', '.join(issuer.algorithms)} from {iss}")
        key = keys.key(str(header.get("kid", "")), alg)
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key, algorithms=[alg], audience=issuer.audience, issuer=issuer.issuer,
                leeway=issuer.leeway_seconds, options={"require": ["exp", "iss", "aud"]})
        except jwt.ExpiredSignatureError:
            where = keys.token_endpoint or iss
            raise NotAuthorizedError(f"the bearer token has expired; request a new one at {where}") from None
        except jwt.InvalidAudienceError:
            raise NotAuthorizedError(f"the bearer token is not meant for this service: its audience does not include "
                                     f"{issuer.audience!r}") from None
        except jwt.InvalidSignatureError:
            raise NotAuthorizedError(f"the bearer token's signature does not verify with the key of {iss}") from None
        except jwt.PyJWTError as e:
            raise NotAuthorizedError(f"the bearer token is not valid: {_shown(e)}") from None
        name = claims.get(issuer.principal_claim)
        if not isinstance(name, str) or not name:
            raise NotAuthorizedError(f"the bearer token has no {issuer.principal_claim!r} claim to name its principal")
        principal = Principal(name=name, roles=roles_of(issuer, claims))
        self._remember(token, principal, float(claims["exp"]) + issuer.leeway_seconds)
        return principal

    def _remember(self, token: str, principal: Principal, expires: float) -> None:
        if len(self._verified) >= VERIFIED_CACHE_SIZE:
            now = time.time()
            self._verified = {t: v for t, v in self._verified.items() if v[0] > now}
            if len(self._verified) >= VERIFIED_CACHE_SIZE:
                self._verified.clear()
        self._verified[token] = (min(expires, time.time() + VERIFIED_CACHE_S), principal)

    def token_endpoint(self, token: str | None) -> str | None:
        """The token endpoint clients should use: that of ``token``'s issuer when it is one of
        the configured ones, else the first configured issuer's (fetched if not yet known)."""
        keys = self.issuer_of(token) if token else None
        keys = keys or next(iter(self.issuers.values()), None)
        if keys is None:
            return None
        if keys.token_endpoint is None and keys.fetch_needed(""):
            keys.fetch("")
        return keys.token_endpoint


__all__ = ["IssuerKeys", "OidcVerifier", "claim_values", "roles_of"]
