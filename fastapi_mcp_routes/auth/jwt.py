"""`JWTBearer`: OAuth 2.1 bearer tokens verified as JWTs, as an MCP resource server must.

Usable as `mcp_routes(auth=...)` and as an ordinary route dependency, also through
`Security(jwt_bearer, scopes=[...])`. The token must be signed with an allowed algorithm
(never `none`, never an HMAC algorithm against an RSA or EC public key), be within its
`exp`/`nbf` window (with leeway), and be issued by the issuer for this audience: a token issued
for another resource is refused (spec 2025-11-25, basic/authorization "Token Audience Binding").
Failures are 401 with `WWW-Authenticate: Bearer resource_metadata="..."` (RFC 9728), or 403
`insufficient_scope` when scopes are missing.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
from fastapi import HTTPException
from fastapi.security import SecurityScopes
from starlette.requests import Request

WELL_KNOWN_RESOURCE: Final = "/.well-known/oauth-protected-resource"
_HMAC: Final = frozenset({"HS256", "HS384", "HS512"})
# An unknown `kid` refreshes the JWKS at most this often, so forged kids cannot hammer the issuer.
JWKS_REFRESH_S: Final = 60.0
JWKS_TIMEOUT_S: Final = 5.0


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a verified token speaks for."""

    subject: str
    scopes: frozenset[str]
    claims: Mapping[str, Any] = field(default_factory=dict)

    @property
    def tenant(self) -> str | None:
        """The tenant claim (`tid` or `tenant`), where the issuer sets one."""
        value = self.claims.get("tid", self.claims.get("tenant"))
        return str(value) if value is not None else None


class JWTBearer:
    """A FastAPI dependency that verifies a bearer JWT and returns its `Principal`.

    Args:
        issuer: the expected `iss`.
        audience: the expected `aud`: this resource's identifier.
        key: a PEM public key, or a JWK (a dict), for issuers with one key.
        jwks: a JWKS document (`{"keys": [...]}`), keys picked by `kid`.
        jwks_url: where to fetch the JWKS; cached, refreshed on an unknown `kid` at most
            once every `jwks_refresh_s` seconds.
        algorithms: the allowed signature algorithms; `none` is never allowed.
        required_scopes: scopes every token must carry.
        leeway_s: clock skew tolerated on `exp` and `nbf`.
        resource_metadata_url: the RFC 9728 metadata URL named in `WWW-Authenticate`;
            by default the server's `/.well-known/oauth-protected-resource`.
        jwks_refresh_s: the least time between two fetches of `jwks_url`, so tokens with
            made-up key ids cannot make the server hammer its issuer.
    """

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        key: str | Mapping[str, Any] | None = None,
        jwks: Mapping[str, Any] | None = None,
        jwks_url: str | None = None,
        algorithms: Sequence[str] = ("RS256",),
        required_scopes: Iterable[str] = (),
        leeway_s: float = 30.0,
        resource_metadata_url: str | None = None,
        jwks_refresh_s: float = JWKS_REFRESH_S,
    ) -> None:
        if sum(source is not None for source in (key, jwks, jwks_url)) != 1:
            raise ValueError("JWTBearer needs exactly one of key, jwks or jwks_url")
        allowed = [a for a in algorithms if a.lower() != "none"]
        if not allowed or len(allowed) != len(algorithms):
            raise ValueError(f"algorithms must name real signature algorithms, never 'none'; got {list(algorithms)!r}")
        if leeway_s < 0:
            raise ValueError(f"leeway_s must be zero or more seconds, got {leeway_s!r}")
        if jwks_refresh_s < 0:
            raise ValueError(f"jwks_refresh_s must be zero or more seconds, got {jwks_refresh_s!r}")
        self.jwks_refresh_s = jwks_refresh_s
        self.issuer = issuer
        self.audience = audience
        self.algorithms = tuple(allowed)
        self.required_scopes = frozenset(required_scopes)
        self.leeway_s = leeway_s
        self.resource_metadata_url = resource_metadata_url
        self._key = key
        self._jwks = dict(jwks) if jwks is not None else None
        self._jwks_url = jwks_url
        self._fetched_at = float("-inf")

    async def __call__(self, request: Request, security_scopes: SecurityScopes) -> Principal:
        wanted = self.required_scopes | set(security_scopes.scopes)
        token = _bearer_token(request)
        if token is None:
            raise self._unauthorized(request, wanted, error=None)
        principal = await self._verify(token, request, wanted)
        missing = wanted - principal.scopes
        if missing:
            raise HTTPException(
                403,
                "The token lacks a required scope.",
                {"WWW-Authenticate": self._challenge(request, wanted, "insufficient_scope")},
            )
        return principal

    async def _verify(self, token: str, request: Request, wanted: set[str] | frozenset[str]) -> Principal:
        # Imported on first use: python-jose and its crypto backend take tens of milliseconds
        # to import, which an app that never verifies a JWT should not pay at startup.
        from jose import JWTError, jwt

        try:
            header = jwt.get_unverified_header(token)
            algorithm = header.get("alg")
            if algorithm not in self.algorithms:
                raise JWTError(f"algorithm {algorithm!r} is not allowed")
            key = await self._key_for(header.get("kid"), algorithm)
            claims = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self.audience,
                issuer=self.issuer,
                options={"leeway": self.leeway_s, "require_exp": True, "require_sub": True},
            )
        except (JWTError, KeyError, ValueError, TypeError):
            raise self._unauthorized(request, wanted, error="invalid_token") from None
        return Principal(str(claims["sub"]), _scopes(claims), claims)

    async def _key_for(self, kid: object, algorithm: str) -> Any:
        from jose import JWTError, jwk

        if self._key is not None:
            key = jwk.construct(self._key, algorithm)
        else:
            found = self._find(kid)
            if (
                found is None
                and self._jwks_url is not None
                and time.monotonic() - self._fetched_at > self.jwks_refresh_s
            ):
                await self._fetch()
                found = self._find(kid)
            if found is None:
                raise JWTError("no key for this token's kid")
            key = jwk.construct(found, algorithm)
        if algorithm in _HMAC and not _is_secret(key):
            raise JWTError("an HMAC algorithm cannot be verified with a public key")
        return key

    def _find(self, kid: object) -> Mapping[str, Any] | None:
        keys = (self._jwks or {}).get("keys", [])
        return next((k for k in keys if isinstance(k, Mapping) and k.get("kid") == kid), None)

    async def _fetch(self) -> None:
        url = self._jwks_url
        if url is None:
            return
        self._fetched_at = time.monotonic()

        def get() -> Any:
            with urllib.request.urlopen(url, timeout=JWKS_TIMEOUT_S) as response:
                return json.load(response)

        try:
            document = await anyio.to_thread.run_sync(get)
        except (OSError, ValueError):
            return  # keep the keys we had; tokens needing new ones are refused
        if isinstance(document, dict) and isinstance(document.get("keys"), list):
            self._jwks = document

    def _unauthorized(self, request: Request, wanted: set[str] | frozenset[str], error: str | None) -> HTTPException:
        message = "A valid bearer token is required." if error is None else "The bearer token is not valid."
        return HTTPException(401, message, {"WWW-Authenticate": self._challenge(request, wanted, error)})

    def _challenge(self, request: Request, wanted: set[str] | frozenset[str], error: str | None) -> str:
        url = self.resource_metadata_url or str(request.base_url).rstrip("/") + WELL_KNOWN_RESOURCE
        parts = [f'resource_metadata="{url}"']
        if wanted:
            parts.append(f'scope="{" ".join(sorted(wanted))}"')
        if error is not None:
            parts.append(f'error="{error}"')
        return "Bearer " + ", ".join(parts)


def _bearer_token(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def _scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    scope = claims.get("scope")
    if isinstance(scope, str):
        return frozenset(scope.split())
    scp = claims.get("scp")
    if isinstance(scp, list):
        return frozenset(str(s) for s in scp)
    return frozenset(scp.split()) if isinstance(scp, str) else frozenset()


def _is_secret(key: Any) -> bool:
    """Whether a constructed key is a shared secret (an HMAC key), not a public key."""
    return type(key).__name__.endswith("HMACKey")
