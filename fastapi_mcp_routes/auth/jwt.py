"""`JWTBearer`: OAuth 2.1 bearer tokens verified as JWTs, as an MCP resource server must.

Usable as `mcp_routes(auth=...)` and as an ordinary route dependency, also through
`Security(jwt_bearer, scopes=[...])`. The token must be signed with an allowed algorithm
(never `none`, never an HMAC algorithm against a public key, always a key of the algorithm's
type), be within its `exp`/`nbf` window (with leeway), and be issued by the issuer for this
audience: a token issued for another resource is refused (spec 2025-11-25,
basic/authorization "Token Audience Binding"). Failures are 401 with
`WWW-Authenticate: Bearer resource_metadata="..."` (RFC 9728), or 403 `insufficient_scope` when
scopes are missing. Tokens are verified by PyJWT (`auth/tokens.py`) with the keys of
`auth/keys.py`; both are imported when the first `JWTBearer` is made, so an app without one
does not pay for PyJWT and its crypto backend at startup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from fastapi import HTTPException
from fastapi.security import SecurityScopes
from starlette.requests import Request

if TYPE_CHECKING:
    from fastapi_mcp_routes.auth.keys import KeySource

WELL_KNOWN_RESOURCE: Final = "/.well-known/oauth-protected-resource"
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
        key: a PEM public key (or certificate), or a JWK (a dict), for issuers with one key;
            an HMAC secret is a JWK of type `oct`.
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
        jwks_timeout_s: how long a fetch of `jwks_url` may take; tokens waiting for it are
            refused after that.
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
        jwks_timeout_s: float = JWKS_TIMEOUT_S,
    ) -> None:
        from fastapi_mcp_routes.auth.keys import FAMILIES, source_of

        if sum(source is not None for source in (key, jwks, jwks_url)) != 1:
            raise ValueError("JWTBearer needs exactly one of key, jwks or jwks_url")
        allowed = [a for a in algorithms if a in FAMILIES]
        if not allowed or len(allowed) != len(algorithms):
            raise ValueError(
                f"algorithms must name JWS signature algorithms ({', '.join(FAMILIES)}), never 'none';"
                f" got {list(algorithms)!r}"
            )
        if leeway_s < 0:
            raise ValueError(f"leeway_s must be zero or more seconds, got {leeway_s!r}")
        if jwks_refresh_s < 0:
            raise ValueError(f"jwks_refresh_s must be zero or more seconds, got {jwks_refresh_s!r}")
        if not jwks_timeout_s > 0:
            raise ValueError(f"jwks_timeout_s must be a positive number of seconds, got {jwks_timeout_s!r}")
        self.jwks_refresh_s = jwks_refresh_s
        self.issuer = issuer
        self.audience = audience
        self.algorithms = tuple(allowed)
        self.required_scopes = frozenset(required_scopes)
        self.leeway_s = leeway_s
        self.resource_metadata_url = resource_metadata_url
        self._keys: KeySource = source_of(key, jwks, jwks_url, self.algorithms, jwks_timeout_s)

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
        from fastapi_mcp_routes.auth import tokens

        try:
            header = tokens.read_header(token, self.algorithms)
            key = await self._keys.key_for(header.kid, header.algorithm, self.jwks_refresh_s)
            if key is None:
                raise tokens.NoKeyError("no key of this token's kid fits its algorithm")
            claims = tokens.verified_claims(token, key, header.algorithm, self.issuer, self.audience, self.leeway_s)
        except tokens.REFUSALS:
            raise self._unauthorized(request, wanted, error="invalid_token") from None
        return Principal(str(claims["sub"]), _scopes(claims), claims)

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
