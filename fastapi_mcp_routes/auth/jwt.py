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

With `dpop="allowed"` or `"required"`, tokens bound to a client's key (`cnf.jkt`) come as
`Authorization: DPoP <token>` with a proof of that key for the request (RFC 9449; auth/dpop.py
checks the proof). "required" refuses any other token; "allowed" takes a token without `cnf`
as a bearer token too, but never a bound one without its proof. Their refusals challenge with
`DPoP ... algs="..."` (beside `Bearer` under "allowed").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from fastapi import HTTPException
from fastapi.security import SecurityScopes
from starlette.requests import Request

from fastapi_mcp_routes.auth.dpop import (
    DEFAULT_MAX_PROOFS,
    DEFAULT_MAX_PROOFS_PER_KEY,
    DEFAULT_PROOF_ALGORITHMS,
    DEFAULT_PROOF_MAX_AGE_S,
    ERROR_INVALID_PROOF,
    ERROR_INVALID_TOKEN,
    SCHEME_DPOP,
    DpopMode,
    OnceStore,
    ProofPolicy,
    ProofRefused,
    ProofsFull,
    bound_thumbprint,
    challenge_algorithms,
    proof_policy,
    proof_source,
    verify,
)
from fastapi_mcp_routes.wire.errors import StoreUnavailable

logger = logging.getLogger("fastapi_mcp_routes")

if TYPE_CHECKING:
    from fastapi_mcp_routes.auth.keys import KeySource

WELL_KNOWN_RESOURCE: Final = "/.well-known/oauth-protected-resource"
# An unknown `kid` refreshes the JWKS at most this often, so forged kids cannot hammer the issuer.
JWKS_REFRESH_S: Final = 60.0
JWKS_TIMEOUT_S: Final = 5.0
# How soon a client refused because the proofs' store is full or unreachable may try again.
PROOFS_RETRY_AFTER_S: Final = 5


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
        dpop: `"off"` (bearer tokens only), `"allowed"` (DPoP-bound tokens with their proof,
            and unbound bearer tokens) or `"required"` (DPoP-bound tokens with their proof only).
        dpop_store: where proofs' `jti` are kept once, needed unless `dpop` is off: the store
            given to `mcp_routes(store=...)`, so a replay is refused by every process sharing it.
        dpop_algorithms: the asymmetric algorithms a proof may be signed with.
        dpop_max_age_s: how old a proof's `iat` may be; it may be `leeway_s` ahead of the clock.
        dpop_max_proofs: the most proofs' `jti` kept at once in `dpop_store`; past it, new
            proofs are refused with 503 until older ones lapse, never a kept one forgotten.
        dpop_max_proofs_per_key: the most of those one client's key may have kept at once;
            past it, that client's new proofs are refused with 503 while others are served.
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
        dpop: DpopMode = "off",
        dpop_store: OnceStore | None = None,
        dpop_algorithms: Sequence[str] = DEFAULT_PROOF_ALGORITHMS,
        dpop_max_age_s: float = DEFAULT_PROOF_MAX_AGE_S,
        dpop_max_proofs: int = DEFAULT_MAX_PROOFS,
        dpop_max_proofs_per_key: int = DEFAULT_MAX_PROOFS_PER_KEY,
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
        self.dpop = dpop
        self._warned_at = float("-inf")  # when proofs that could not be remembered were last logged
        self._proofs = proof_policy(
            dpop, dpop_store, dpop_algorithms, dpop_max_age_s, leeway_s, dpop_max_proofs, dpop_max_proofs_per_key
        )
        self.issuer = issuer
        self.audience = audience
        self.algorithms = tuple(allowed)
        self.required_scopes = frozenset(required_scopes)
        self.leeway_s = leeway_s
        self.resource_metadata_url = resource_metadata_url
        self._keys: KeySource = source_of(key, jwks, jwks_url, self.algorithms, jwks_timeout_s)

    async def __call__(self, request: Request, security_scopes: SecurityScopes) -> Principal:
        wanted = self.required_scopes | set(security_scopes.scopes)
        scheme, token = _credentials(request)
        if token is None or scheme not in self._schemes:
            # A token of a scheme not taken is named invalid where DPoP is on, so a client
            # holding a bearer token learns that it needs a bound one.
            error = None if token is None or self._proofs is None else ERROR_INVALID_TOKEN
            raise self._unauthorized(request, wanted, error=error)
        principal = await self._verify(token, request, wanted)
        if self._proofs is not None:
            await self._bind(self._proofs, principal, scheme, token, request, wanted)
        elif _bound(principal):
            # Its issuer bound it to a client's key: taken as a bearer token here, a copy of it
            # would work without that key (RFC 9449 section 6).
            raise self._unauthorized(request, wanted, error=ERROR_INVALID_TOKEN)
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

    @property
    def _schemes(self) -> tuple[str, ...]:
        """The `Authorization` schemes taken (lower case)."""
        if self.dpop == "off":
            return (_BEARER,)
        return (SCHEME_DPOP,) if self.dpop == "required" else (_BEARER, SCHEME_DPOP)

    async def _bind(
        self,
        proofs: ProofPolicy,
        principal: Principal,
        scheme: str,
        token: str,
        request: Request,
        wanted: set[str] | frozenset[str],
    ) -> None:
        """Refuse a verified token whose binding to the client's key (RFC 9449 section 6.1)
        the request does not prove: a bound token as a bearer token (no downgrade), an unbound
        one under the DPoP scheme, or a proof that is not good."""
        try:
            jkt = bound_thumbprint(principal.claims)
            if scheme == _BEARER:
                if jkt is not None:
                    raise ProofRefused("a DPoP-bound token came as a bearer token", ERROR_INVALID_TOKEN)
                return
            if jkt is None:
                raise ProofRefused("a token bound to no key came with the DPoP scheme", ERROR_INVALID_TOKEN)
            await verify(proof_source(request.scope), proofs, token, jkt)
        except ProofRefused as refused:
            logger.debug("DPoP refused: %s", refused)
            raise self._unauthorized(request, wanted, error=refused.error) from None
        except (ProofsFull, StoreUnavailable) as cannot:
            self._warn_unremembered(cannot)
            raise HTTPException(
                503,
                "DPoP proofs cannot be checked now; try again shortly.",
                {"Retry-After": str(PROOFS_RETRY_AFTER_S)},
            ) from None

    def _warn_unremembered(self, cannot: Exception) -> None:
        """A WARNING at most once a minute: a client flooding proofs past its key's bound would
        otherwise write one line per refusal."""
        now = time.monotonic()
        if now - self._warned_at < UNREMEMBERED_WARNING_S:
            return
        self._warned_at = now
        if isinstance(cannot, ProofsFull):
            logger.warning(
                "DPoP proofs refused with 503: a client's key reached dpop_max_proofs_per_key, or the store "
                "dpop_max_proofs (logged at most once a minute)"
            )
        else:
            logger.warning("DPoP proofs refused with 503: their store is unreachable (logged at most once a minute)")

    def _unauthorized(self, request: Request, wanted: set[str] | frozenset[str], error: str | None) -> HTTPException:
        if self._proofs is None:
            message = "A valid bearer token is required." if error is None else "The bearer token is not valid."
        else:
            message = _REFUSALS.get(error, "The access token is not valid.")
        return HTTPException(401, message, {"WWW-Authenticate": self._challenge(request, wanted, error)})

    def _challenge(self, request: Request, wanted: set[str] | frozenset[str], error: str | None) -> str:
        url = self.resource_metadata_url or str(request.base_url).rstrip("/") + WELL_KNOWN_RESOURCE
        parts = [f'resource_metadata="{url}"']
        if wanted:
            parts.append(f'scope="{" ".join(sorted(wanted))}"')
        if self._proofs is None:
            return "Bearer " + ", ".join([*parts, *_error(error)])
        # The error goes with the scheme the request used (RFC 9449 section 7.1); under
        # "allowed" both schemes are offered, Bearer first.
        used_bearer = _credentials(request)[0] == _BEARER and self.dpop == "allowed"
        algs = f'algs="{challenge_algorithms(self._proofs.algorithms)}"'
        challenge = "DPoP " + ", ".join([*parts, *_error(None if used_bearer else error), algs])
        if self.dpop == "allowed":
            challenge = "Bearer " + ", ".join([*parts, *_error(error if used_bearer else None)]) + ", " + challenge
        return challenge


_BEARER: Final = "bearer"
UNREMEMBERED_WARNING_S: Final = 60.0
# What a refusal says where DPoP is on, by its error: short, and never an echo of what was sent.
_REFUSALS: Final[dict[str | None, str]] = {
    None: "A valid access token is required.",
    "invalid_token": "The access token is not valid.",
    ERROR_INVALID_PROOF: "The DPoP proof is not valid.",
}


def _bound(principal: Principal) -> bool:
    """Whether a token is bound to a DPoP key (`cnf.jkt`); other confirmations (an mTLS
    certificate's `x5t#S256`, RFC 8705) are checked where the connection ends, not here."""
    cnf = principal.claims.get("cnf")
    return isinstance(cnf, dict) and "jkt" in cnf


def _error(error: str | None) -> list[str]:
    return [] if error is None else [f'error="{error}"']


def _credentials(request: Request) -> tuple[str, str | None]:
    """The `Authorization` scheme (lower case) and its token, if any."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return scheme.lower(), token.strip() or None


def _scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    scope = claims.get("scope")
    if isinstance(scope, str):
        return frozenset(scope.split())
    scp = claims.get("scp")
    if isinstance(scp, list):
        return frozenset(str(s) for s in scp)
    return frozenset(scp.split()) if isinstance(scp, str) else frozenset()
