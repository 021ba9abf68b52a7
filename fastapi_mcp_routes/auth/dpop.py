"""DPoP proofs (RFC 9449): a token bound to the client's key is honoured only with a fresh proof
signed by that key for this very request.

A proof is checked as RFC 9449 section 4.3 lists: one `DPoP` header, a compact JWS of bounded
size, `typ` `dpop+jwt`, an allowed asymmetric `alg`, a public `jwk` that signed it, `htm` and
`htu` naming the request, `iat` within the window, a `jti` never seen within it (kept through the
store's `claim_once`, so the refusal holds across the processes sharing a Redis), and `ath`, the
hash of the access token it comes with. `JWTBearer` (auth/jwt.py) then compares the token's
`cnf.jkt` with the proof key's RFC 7638 thumbprint (section 6.1).

One HTTP request, one verification. An MCP tool call runs its route as an in-process request
of another method and path, with the caller's headers. What a proof was sent with is the HTTP
request that reached the server, so the proof is verified against that request, once: a
`ProofSource` is made for the HTTP request (its method, URL, `DPoP` header values and arrival
time) and kept in its ASGI scope under `DPOP_SCOPE_KEY`, and each in-process request built for
it carries the same object in its own scope (tools/invoke.py). Whoever verifies first, the
endpoint's `auth=` or a route's own `JWTBearer`, checks the proof against that request and claims
its `jti`; every later check within the same HTTP request (the routes of a batch, a confirmation's
guards asked before the route) finds the proof verified and its `jti` claimed, and checks only
what differs between checkers: its algorithms, its window, the token's hash. A scope key is the
library's own: no header sets it, and a request that arrives without one has its proof checked
against itself. Without `auth=`, a request whose calls reach no guarded route leaves its proof
unchecked and its jti unkept; the docs say to give the bearer to `auth=` as well.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol
from urllib.parse import SplitResult, unquote, urlsplit

import anyio
from starlette.datastructures import URL
from starlette.types import Scope

DpopMode = Literal["off", "allowed", "required"]
DPOP_MODES: Final = ("off", "allowed", "required")

# Our own ASGI scope key: the `ProofSource` of the HTTP request a proof came with.
DPOP_SCOPE_KEY: Final = "fastapi_mcp_routes.dpop"
HEADER_DPOP: Final = b"dpop"
PROOF_TYPE: Final = "dpop+jwt"
SCHEME_DPOP: Final = "dpop"
ERROR_INVALID_PROOF: Final = "invalid_dpop_proof"
ERROR_INVALID_TOKEN: Final = "invalid_token"

# The signature algorithms a proof may name (RFC 9449 section 4.3: asymmetric only), by the key type each needs.
ASYMMETRIC: Final = {
    "ES256": ("EC", "P-256"),
    "ES384": ("EC", "P-384"),
    "ES512": ("EC", "P-521"),
    "RS256": ("RSA", None),
    "RS384": ("RSA", None),
    "RS512": ("RSA", None),
    "PS256": ("RSA", None),
    "PS384": ("RSA", None),
    "PS512": ("RSA", None),
    "EdDSA": ("OKP", "Ed25519"),
}
DEFAULT_PROOF_ALGORITHMS: Final = ("ES256", "EdDSA", "PS256", "RS256")
# A proof is a header and a few claims with a public key: an RSA-4096 key makes it about 2 KB.
MAX_PROOF_CHARS: Final = 4 * 1024
MAX_JTI_CHARS: Final = 256
# RFC 9449 section 11.1: a short window limits how long a proof's jti must be remembered.
DEFAULT_PROOF_MAX_AGE_S: Final = 60.0
# Proofs remembered at once across the store: a refusal past it, never a jti forgotten early.
DEFAULT_MAX_PROOFS: Final = 100_000
# Of those, the most one client's key may have remembered at once (about 80 requests a second
# within the default window), so that one client cannot fill the store for every other.
DEFAULT_MAX_PROOFS_PER_KEY: Final = 5_000
# RSA keys shorter than this are refused (NIST SP 800-131A).
MIN_RSA_BITS: Final = 2048
# The JWK members that hold private key material (RFC 7518 section 6).
_PRIVATE_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
# The members of a public key that its RFC 7638 thumbprint covers, by key type.
_THUMBPRINT_MEMBERS: Final = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n"), "OKP": ("crv", "kty", "x")}
_BASE64URL: Final = re.compile(r"[A-Za-z0-9_-]+")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
# The largest integer `iat` a float holds exactly: no request comes from beyond it.
_MAX_IAT: Final = 2**53


class ProofRefused(Exception):
    """A proof (or the binding of a token to it) that is not good; `error` is the
    `WWW-Authenticate` error code. The message is the server's log line, never the client's."""

    def __init__(self, reason: str, error: str = ERROR_INVALID_PROOF) -> None:
        super().__init__(reason)
        self.error = error


class ProofsFull(Exception):
    """The store keeps as many proofs' jti as it may: a new proof cannot be remembered now."""


class OnceStore(Protocol):
    """Where proofs' `jti` are kept once: any `ClaimStore` (fastapi_mcp_routes.store), such as
    the `MemoryStore` or `RedisStore` handed to `mcp_routes(store=...)`."""

    async def claim_once(
        self, name: str, ttl_s: float, max_kept: int, *, owner: str | None = None, max_per_owner: int = 0
    ) -> bool | None: ...


@dataclass(frozen=True, slots=True)
class ProofPolicy:
    """What a `JWTBearer` accepts of a proof: its algorithms, how old (`max_age_s`) or how far
    ahead of the server's clock (`leeway_s`) its `iat` may be, and where its `jti` is kept."""

    algorithms: tuple[str, ...]
    max_age_s: float
    leeway_s: float
    max_proofs: int
    max_proofs_per_key: int
    store: OnceStore


@dataclass(frozen=True, slots=True)
class Proof:
    """A proof whose signature verified with its own key."""

    algorithm: str
    thumbprint: str  # RFC 7638 thumbprint of its `jwk`
    jti: str
    htm: str
    htu: str
    iat: float
    ath: str | None


def proof_policy(
    mode: str,
    store: OnceStore | None,
    algorithms: Iterable[str],
    max_age_s: float,
    leeway_s: float,
    max_proofs: int,
    max_proofs_per_key: int = DEFAULT_MAX_PROOFS_PER_KEY,
) -> ProofPolicy | None:
    """What `JWTBearer(dpop=...)` checks of proofs, its options checked; `None` when `mode` is off."""
    if mode not in DPOP_MODES:
        raise ValueError(f"JWTBearer's dpop must be one of {', '.join(map(repr, DPOP_MODES))}, got {mode!r}")
    chosen = tuple(algorithms)
    if not chosen or any(algorithm not in ASYMMETRIC for algorithm in chosen):
        raise ValueError(
            f"JWTBearer's dpop_algorithms must name asymmetric algorithms ({', '.join(ASYMMETRIC)}),"
            f" got {list(chosen)!r}"
        )
    if not max_age_s > 0:
        raise ValueError(f"JWTBearer's dpop_max_age_s must be a positive number of seconds, got {max_age_s!r}")
    if isinstance(max_proofs, bool) or not isinstance(max_proofs, int) or max_proofs < 1:
        raise ValueError(f"JWTBearer's dpop_max_proofs must be a positive whole number, got {max_proofs!r}")
    per_key = max_proofs_per_key
    if isinstance(per_key, bool) or not isinstance(per_key, int) or per_key < 1:
        raise ValueError(f"JWTBearer's dpop_max_proofs_per_key must be a positive whole number, got {per_key!r}")
    if mode == "off":
        return None
    if store is None or not callable(getattr(store, "claim_once", None)):
        raise ValueError(
            f"JWTBearer(dpop={mode!r}) needs dpop_store=, where proofs' jti are kept once: the store given to"
            f" mcp_routes(store=...), a MemoryStore() for one process or a RedisStore for several; got {store!r}"
        )
    _one_window(store, max_age_s + leeway_s)
    return ProofPolicy(chosen, float(max_age_s), float(leeway_s), max_proofs, max_proofs_per_key, store)


# The window of the bearers keeping proofs in each store, by the store's identity (the store kept
# too, so that its identity is not reused): a jti is kept for the window of whichever bearer
# checked it first, so a bearer with a longer window would take the proof again once it lapsed.
_WINDOWS: dict[int, tuple[OnceStore, float]] = {}


def _one_window(store: OnceStore, window_s: float) -> None:
    kept = _WINDOWS.setdefault(id(store), (store, window_s))
    if kept[1] != window_s:
        raise ValueError(
            "every JWTBearer keeping DPoP proofs in one dpop_store needs the same dpop_max_age_s and leeway_s "
            f"(a proof's jti is kept for that window): this one's is {window_s:g} s, another's {kept[1]:g} s"
        )


class ProofSource:
    """The HTTP request that carried a proof: what it is checked against, once per request."""

    __slots__ = ("claimed", "lock", "method", "proof", "received", "url", "values")

    def __init__(self, method: str, url: str, values: tuple[bytes, ...], received: float) -> None:
        self.method = method
        self.url = url  # without query and fragment
        self.values = values  # every DPoP header of the request
        self.received = received  # wall-clock seconds: `iat` is judged against the arrival
        self.proof: Proof | None = None  # once its signature verified
        self.claimed = False  # once its jti was kept
        self.lock = anyio.Lock()  # the routes of one batch may check it at once


def proof_source(scope: Scope) -> ProofSource:
    """The request's `ProofSource`: the one it carries (an in-process request of a tool call),
    else a new one made of the request itself and kept in its scope."""
    source = scope.get(DPOP_SCOPE_KEY)
    if isinstance(source, ProofSource):
        return source
    made = _source_of(scope)
    scope[DPOP_SCOPE_KEY] = made
    return made


def carried_source(scope: Scope) -> ProofSource | None:
    """What an in-process request built for this HTTP request carries: its `ProofSource`,
    made now where the request sent a `DPoP` header and nobody checked it yet."""
    source = scope.get(DPOP_SCOPE_KEY)
    if isinstance(source, ProofSource):
        return source
    for name, _ in scope["headers"]:  # a loop, not `any()` over a generator: every tool call runs it
        if name == HEADER_DPOP:
            return proof_source(scope)
    return None


def _source_of(scope: Scope) -> ProofSource:
    values = tuple(value for name, value in scope["headers"] if name == HEADER_DPOP)
    url = URL(scope=scope).replace(query="", fragment="")
    return ProofSource(scope["method"], str(url), values, time.time())


async def verify(source: ProofSource, policy: ProofPolicy, token: str, jkt: str) -> Proof:
    """The request's proof, checked for this policy and for the access token it comes with,
    bound to the key whose thumbprint is `jkt`; `ProofRefused` when it is not good, `ProofsFull`
    when its jti cannot be kept now. Only a proof by the key a valid token names keeps a jti."""
    async with source.lock:
        proof = source.proof
        if proof is None:
            proof = source.proof = parse_proof(_only_value(source.values))
        _check_request(proof, source, policy)
        if proof.ath is None:
            raise ProofRefused("the proof has no ath")
        if proof.ath != access_token_hash(token):
            raise ProofRefused("the proof's ath is not the access token's hash")
        if proof.thumbprint != jkt:
            raise ProofRefused("the proof is signed by another key than the token's cnf.jkt", ERROR_INVALID_TOKEN)
        if not source.claimed:
            await _claim(proof, policy)
            source.claimed = True
    return proof


def _only_value(values: tuple[bytes, ...]) -> str:
    if len(values) != 1:
        raise ProofRefused(f"the request has {len(values)} DPoP headers, not one")
    value = values[0]
    if len(value) > MAX_PROOF_CHARS:
        raise ProofRefused(f"the proof is longer than {MAX_PROOF_CHARS} bytes")
    try:
        return value.decode("ascii")
    except UnicodeDecodeError:
        raise ProofRefused("the proof is not ASCII") from None


def _check_request(proof: Proof, source: ProofSource, policy: ProofPolicy) -> None:
    if proof.algorithm not in policy.algorithms:
        raise ProofRefused(f"the proof's algorithm {proof.algorithm!r} is not allowed")
    if proof.htm != source.method:
        raise ProofRefused("the proof's htm is not the request's method")
    if normalized_url(proof.htu) != normalized_url(source.url):
        raise ProofRefused("the proof's htu is not the request's URL")
    if proof.iat < source.received - policy.max_age_s:
        raise ProofRefused("the proof is too old")
    if proof.iat > source.received + policy.leeway_s:
        raise ProofRefused("the proof is issued in the future")


async def _claim(proof: Proof, policy: ProofPolicy) -> None:
    # Scoped by key: one client's jti never collides with another's.
    name = "dpop:" + hashlib.sha256(f"{proof.thumbprint}\x00{proof.jti}".encode()).hexdigest()
    # Kept as long as the proof could be accepted: its iat window on both sides.
    kept = await policy.store.claim_once(
        name,
        policy.max_age_s + policy.leeway_s,
        policy.max_proofs,
        owner=proof.thumbprint,
        max_per_owner=policy.max_proofs_per_key,
    )
    if kept is None:
        raise ProofsFull
    if not kept:
        raise ProofRefused("the proof's jti was used before")


def parse_proof(value: str) -> Proof:
    """A proof (its size checked already) whose header and key are sound and whose signature
    its own key verifies."""
    import jwt  # PyJWT: imported on first use, as auth/jwt.py does

    segments = value.split(".")
    if len(segments) != 3 or not all(_BASE64URL.fullmatch(segment) for segment in segments):
        raise ProofRefused("the proof is not a compact JWS")
    header = _json_object(segments[0])
    if not isinstance(header.get("typ"), str) or header["typ"].lower() != PROOF_TYPE:
        raise ProofRefused("the proof's typ is not dpop+jwt")
    if "crit" in header:
        raise ProofRefused("the proof names critical header extensions")
    algorithm = header.get("alg")
    if not isinstance(algorithm, str) or algorithm not in ASYMMETRIC:
        raise ProofRefused("the proof's alg is not an asymmetric signature algorithm")
    key = public_key(header.get("jwk"), algorithm)
    try:
        payload = jwt.PyJWS().decode(value, jwt.PyJWK(dict(key), algorithm).key, algorithms=[algorithm])
    except (jwt.PyJWTError, ValueError, TypeError, KeyError):
        raise ProofRefused("the proof's signature does not verify with its jwk") from None
    return _proof(algorithm, thumbprint(key), _json_object_bytes(payload))


def public_key(jwk: object, algorithm: str) -> Mapping[str, Any]:
    """`jwk` when it is a public key of the type `algorithm` needs, else `ProofRefused`."""
    if not isinstance(jwk, dict):
        raise ProofRefused("the proof's header has no jwk")
    if not _PRIVATE_MEMBERS.isdisjoint(jwk):
        raise ProofRefused("the proof's jwk holds private key material")
    kty, curve = ASYMMETRIC[algorithm]
    if jwk.get("kty") != kty or (curve is not None and jwk.get("crv") != curve):
        raise ProofRefused(f"the proof's jwk is not a key for {algorithm}")
    if not all(isinstance(jwk.get(member), str) for member in _THUMBPRINT_MEMBERS[kty]):
        raise ProofRefused("the proof's jwk lacks a member of its key")
    if kty == "RSA" and len(_b64decode(jwk["n"])) * 8 < MIN_RSA_BITS:
        raise ProofRefused(f"the proof's RSA key is shorter than {MIN_RSA_BITS} bits")
    return jwk


def thumbprint(jwk: Mapping[str, Any]) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public JWK, base64url without padding."""
    members = {name: jwk[name] for name in _THUMBPRINT_MEMBERS[jwk["kty"]]}
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True).encode()
    return _b64encode(hashlib.sha256(canonical).digest())


def access_token_hash(token: str) -> str:
    """`ath`: base64url(SHA-256(the access token's ASCII)), RFC 9449 section 4.2."""
    return _b64encode(hashlib.sha256(token.encode("ascii", "replace")).digest())


def normalized_url(url: str) -> str:
    """`url` without query and fragment, normalized as RFC 3986 section 6.2.2 and 6.2.3 say:
    scheme and host in lower case, the scheme's default port dropped, percent-encodings of
    unreserved characters decoded and the others in upper case, dot segments removed, an empty
    path `/`."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return ""  # matches nothing a request has: a server URL always parses
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        host = f"{host}:{port}"
    path = _remove_dot_segments(_normalized_escapes(parts.path)) or "/"
    return SplitResult(scheme, host, path, "", "").geturl()


def _normalized_escapes(path: str) -> str:
    def one(match: re.Match[str]) -> str:
        character = unquote(match.group())
        return character if re.fullmatch(r"[A-Za-z0-9._~-]", character) else match.group().upper()

    return re.sub(r"%[0-9A-Fa-f]{2}", one, path)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, over the path's segments."""
    kept: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                kept.append("")
        elif segment == "..":
            if len(kept) > 1:
                kept.pop()
            if last:
                kept.append("")
        else:
            kept.append(segment)
    return "/".join(kept)


def _proof(algorithm: str, key_thumbprint: str, claims: Mapping[str, Any]) -> Proof:
    jti, htm, htu, iat, ath = (claims.get(name) for name in ("jti", "htm", "htu", "iat", "ath"))
    if not isinstance(jti, str) or not 0 < len(jti) <= MAX_JTI_CHARS:
        raise ProofRefused(f"the proof's jti is not a string of 1 to {MAX_JTI_CHARS} characters")
    if not isinstance(htm, str) or not isinstance(htu, str):
        raise ProofRefused("the proof lacks htm or htu")
    if isinstance(iat, bool) or not isinstance(iat, (int, float)):
        raise ProofRefused("the proof's iat is not a number")
    # JSON as Python reads it has NaN, which no window comparison refuses (a proof good forever,
    # replayable once its jti lapses), and integers too large for a float.
    if not (math.isfinite(iat) if isinstance(iat, float) else abs(iat) <= _MAX_IAT):
        raise ProofRefused("the proof's iat is not a finite time")
    if ath is not None and not isinstance(ath, str):
        raise ProofRefused("the proof's ath is not a string")
    return Proof(algorithm, key_thumbprint, jti, htm, htu, float(iat), ath)


def _json_object(segment: str) -> dict[str, Any]:
    return _json_object_bytes(_b64decode(segment))


def _json_object_bytes(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        raise ProofRefused("a part of the proof is not JSON") from None
    if not isinstance(value, dict):
        raise ProofRefused("a part of the proof is not a JSON object")
    return value


def _b64decode(segment: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    except (binascii.Error, ValueError):
        raise ProofRefused("the proof is not base64url") from None


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def bound_thumbprint(claims: Mapping[str, Any]) -> str | None:
    """The `cnf.jkt` a token is bound to (RFC 9449 section 6.1), `None` for an unbound token;
    `ProofRefused` for a `cnf` that binds it to something unreadable."""
    cnf = claims.get("cnf")
    if cnf is None:
        return None
    jkt = cnf.get("jkt") if isinstance(cnf, dict) else None
    if not isinstance(jkt, str):
        raise ProofRefused("the token's cnf names no jkt", ERROR_INVALID_TOKEN)
    return jkt


def challenge_algorithms(algorithms: Iterable[str]) -> str:
    """The `algs` parameter of a `DPoP` challenge (RFC 9449 section 7.1)."""
    return " ".join(algorithms)
