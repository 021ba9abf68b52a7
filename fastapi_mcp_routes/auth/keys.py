"""The keys `JWTBearer` verifies with: one key, a JWKS document, or a JWKS fetched from a URL.

A key serves a token only where its type fits the token's algorithm: RSA for RS*/PS*, EC on the
algorithm's own curve for ES*, OKP for EdDSA, a shared secret (`oct`) for HS*; so an HMAC
algorithm is never verified with a public key. Each key is built with PyJWT's `PyJWK` once per
algorithm it may serve, bound to that algorithm (`PyJWKSet` picks one algorithm per key from the
key alone, RS256 for any RSA key, which would refuse a PS256 token signed with it).

A JWKS URL is fetched in a worker thread within a deadline and read up to a size bound, and is
fetched again for an unknown `kid` at most once per refresh interval; a token that needs it while
a fetch runs waits for that one fetch rather than starting another.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

import anyio
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from jwt import PyJWK, PyJWTError
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

logger = logging.getLogger("fastapi_mcp_routes")


@dataclass(frozen=True, slots=True)
class Family:
    """The key type an algorithm takes, and the curves it allows (none named: any)."""

    kty: str
    curves: frozenset[str] = frozenset()


# RFC 7518 section 3.1 and RFC 8037 section 3.1: the JWS algorithms and the keys each takes.
_RSA: Final = Family("RSA")
_SECRET: Final = Family("oct")
FAMILIES: Final[Mapping[str, Family]] = {
    "RS256": _RSA,
    "RS384": _RSA,
    "RS512": _RSA,
    "PS256": _RSA,
    "PS384": _RSA,
    "PS512": _RSA,
    "ES256": Family("EC", frozenset({"P-256"})),
    "ES384": Family("EC", frozenset({"P-384"})),
    "ES512": Family("EC", frozenset({"P-521"})),
    "ES256K": Family("EC", frozenset({"secp256k1"})),
    "EdDSA": Family("OKP", frozenset({"Ed25519", "Ed448"})),
    "HS256": _SECRET,
    "HS384": _SECRET,
    "HS512": _SECRET,
}
# The members that make an RSA, EC or OKP JWK a private key (an `oct` key has none of them):
# a published private key is a leak, and never needed to verify.
_PRIVATE_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth"})
# A JWKS holds a handful of keys, a few kilobytes; a document far larger is refused unread.
MAX_JWKS_BYTES: Final = 256 * 1024
_READ_CHUNK: Final = 16 * 1024
_FETCHABLE_SCHEMES: Final = frozenset({"https", "http"})
# What a fetch of a JWKS raises for an answer that is no JWKS: the network, HTTP that does not
# parse (no status line, a body cut short, a header past the client's bounds), not JSON or
# nested too deep; each is a fetch that found no keys, never a crash of the request waiting.
_UNREADABLE: Final = (OSError, ValueError, RecursionError, http.client.HTTPException)


@dataclass(frozen=True, slots=True)
class KeyRing:
    """The keys known at one time, by (`kid`, algorithm); `any_kid` for a single configured key."""

    keys: Mapping[tuple[str | None, str], PyJWK]
    kids: frozenset[str | None]
    any_kid: bool = False

    def knows(self, kid: str | None) -> bool:
        return self.any_kid or kid in self.kids

    def find(self, kid: str | None, algorithm: str) -> PyJWK | None:
        return self.keys.get((None if self.any_kid else kid, algorithm))


EMPTY: Final = KeyRing({}, frozenset())


def fits(jwk: Mapping[str, Any], algorithm: str) -> bool:
    """Whether a JWK may verify a token signed with `algorithm` (RFC 7517 section 4)."""
    family = FAMILIES.get(algorithm)
    if family is None or jwk.get("kty") != family.kty:
        return False
    if family.curves and jwk.get("crv") not in family.curves:
        return False
    operations = jwk.get("key_ops")
    return (
        jwk.get("alg") in (None, algorithm)
        and jwk.get("use") in (None, "sig")
        and (operations is None or (isinstance(operations, list) and "verify" in operations))
    )


def ring_of(jwks: Iterable[object], algorithms: Sequence[str], *, any_kid: bool = False) -> KeyRing:
    """The keys of a JWKS usable with `algorithms`; a key unusable with all of them is left out."""
    keys: dict[tuple[str | None, str], PyJWK] = {}
    for jwk in jwks:
        if not isinstance(jwk, Mapping) or _PRIVATE_MEMBERS.intersection(jwk):
            continue
        kid = None if any_kid else jwk.get("kid")
        if kid is not None and not isinstance(kid, str):
            continue
        for algorithm in algorithms:
            if (kid, algorithm) in keys or not fits(jwk, algorithm):
                continue
            try:
                keys[kid, algorithm] = PyJWK(dict(jwk), algorithm)
            except (PyJWTError, ValueError, TypeError):
                continue  # a malformed key is of no use to any token
    return KeyRing(keys, frozenset(kid for kid, _ in keys), any_kid)


class KeySource:
    """Keys given at startup: one key for every token, or a JWKS document picked by `kid`."""

    def __init__(self, ring: KeyRing) -> None:
        self.ring = ring

    async def key_for(self, kid: str | None, algorithm: str, refresh_s: float) -> PyJWK | None:
        """The key for a token's `kid` and algorithm, or None when there is none."""
        return self.ring.find(kid, algorithm)


class FetchedKeys(KeySource):
    """A JWKS fetched from a URL: cached, fetched again for an unknown `kid` at a bounded rate."""

    def __init__(self, url: str, algorithms: Sequence[str], timeout_s: float) -> None:
        super().__init__(EMPTY)
        self.url = url
        self.algorithms = tuple(algorithms)
        self.timeout_s = timeout_s
        self.fetches = 0
        self._fetched_at = float("-inf")
        self._fetching: anyio.Event | None = None

    async def key_for(self, kid: str | None, algorithm: str, refresh_s: float) -> PyJWK | None:
        if not self.ring.knows(kid):
            if self._fetching is not None:
                await self._wait_for_fetch(self._fetching)
            elif time.monotonic() - self._fetched_at >= refresh_s:
                await self._refresh()
        return self.ring.find(kid, algorithm)

    async def _wait_for_fetch(self, fetching: anyio.Event) -> None:
        with anyio.move_on_after(self.timeout_s):
            await fetching.wait()

    async def _refresh(self) -> None:
        fetching = self._fetching = anyio.Event()
        self._fetched_at = time.monotonic()
        self.fetches += 1
        try:
            # Shielded: a caller that leaves must not waste the fetch its interval allows.
            with anyio.CancelScope(shield=True):
                ring = await self._fetch()
            if ring is not None:
                self.ring = ring
        finally:
            self._fetching = None
            fetching.set()

    async def _fetch(self) -> KeyRing | None:
        # The thread is left to finish on its own past the deadline: it reads no longer than
        # its own deadline plus one socket timeout, and one fetch at most runs per interval.
        fetch = partial(_fetch_ring, self.url, self.algorithms, self.timeout_s)
        with anyio.move_on_after(self.timeout_s):
            try:
                return await anyio.to_thread.run_sync(fetch, abandon_on_cancel=True)
            except _UNREADABLE as error:
                logger.warning("the JWKS at %s could not be read: %s", self.url, error)
                return None
        logger.warning("the JWKS at %s did not arrive within %s s", self.url, self.timeout_s)
        return None


def source_of(
    key: str | Mapping[str, Any] | None,
    jwks: Mapping[str, Any] | None,
    jwks_url: str | None,
    algorithms: Sequence[str],
    timeout_s: float,
) -> KeySource:
    """The key source `JWTBearer`'s options name, checked now: a bad key is a startup error."""
    if jwks_url is not None:
        if urllib.parse.urlsplit(jwks_url).scheme not in _FETCHABLE_SCHEMES:
            raise ValueError(f"jwks_url must be an https:// or http:// URL, got {jwks_url!r}")
        return FetchedKeys(jwks_url, algorithms, timeout_s)
    if jwks is not None:
        ring = ring_of(_keys_of(jwks), algorithms)
        if not ring.keys:
            raise ValueError(f"jwks holds no key usable with the algorithms {list(algorithms)!r}")
        return KeySource(ring)
    jwk = _jwk_of(key)
    if _PRIVATE_MEMBERS.intersection(jwk):
        raise ValueError("key must be a public key: a resource server verifies, it never signs")
    ring = ring_of([jwk], algorithms, any_kid=True)
    if not ring.keys:
        raise ValueError(f"key is a {jwk.get('kty')!r} key, which none of the algorithms {list(algorithms)!r} takes")
    return KeySource(ring)


def _keys_of(jwks: Mapping[str, Any]) -> list[object]:
    keys = jwks.get("keys")
    if not isinstance(keys, list):
        raise ValueError("a JWKS is a JSON object with a list of keys under 'keys'")
    return keys


def _jwk_of(key: str | Mapping[str, Any] | None) -> dict[str, Any]:
    if isinstance(key, Mapping):
        return dict(key)
    if not isinstance(key, str):
        raise ValueError(f"key must be a PEM public key or a JWK (a dict), got {type(key).__name__}")
    return _pem_to_jwk(key)


def _pem_to_jwk(pem: str) -> dict[str, Any]:
    public: object
    try:
        if "-----BEGIN CERTIFICATE-----" in pem:
            public = x509.load_pem_x509_certificate(pem.encode()).public_key()
        else:
            public = serialization.load_pem_public_key(pem.encode())
    except ValueError:
        raise ValueError(
            "key must be a PEM public key or certificate, or a JWK (a dict);"
            " an HMAC secret is given as a JWK {'kty': 'oct', 'k': <base64url secret>}"
        ) from None
    if isinstance(public, rsa.RSAPublicKey):
        return RSAAlgorithm.to_jwk(public, as_dict=True)
    if isinstance(public, ec.EllipticCurvePublicKey):
        return ECAlgorithm.to_jwk(public, as_dict=True)
    if isinstance(public, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return OKPAlgorithm.to_jwk(public, as_dict=True)
    raise ValueError(f"key is a {type(public).__name__}, which no JWS algorithm JWTBearer allows takes")


def _fetch_ring(url: str, algorithms: Sequence[str], timeout_s: float) -> KeyRing:
    document = json.loads(_download(url, timeout_s))
    if not isinstance(document, dict):
        raise ValueError("the JWKS is not a JSON object")
    return ring_of(_keys_of(document), algorithms)


def _download(url: str, timeout_s: float) -> bytes:
    """The body at `url`, read within `timeout_s` (plus one socket timeout) and `MAX_JWKS_BYTES`."""
    deadline = time.monotonic() + timeout_s
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        body = bytearray()
        while chunk := response.read1(_READ_CHUNK):
            body += chunk
            if len(body) > MAX_JWKS_BYTES:
                raise ValueError(f"the JWKS is more than the {MAX_JWKS_BYTES} bytes allowed")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the JWKS took more than {timeout_s} s to read")
    return bytes(body)
