"""DPoP (RFC 9449) as a client does it: keys of its own, tokens bound to them, and a fresh proof
for every request; plus the classic forgeries."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
import warnings
from collections.abc import Generator
from typing import Any

import httpx2
import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm
from jwt.warnings import InsecureKeyLengthWarning

from fastapi_mcp_routes.auth.dpop import access_token_hash, thumbprint
from tests.support.jwt import AUDIENCE, ISSUER, PRIVATE


class ClientKey:
    """A client's key pair for one algorithm; `jwk` its public half."""

    def __init__(self, algorithm: str, rsa_bits: int = 2048) -> None:
        self.algorithm = algorithm
        if algorithm == "ES256":
            self.private: Any = ec.generate_private_key(ec.SECP256R1())
            self.jwk = json.loads(ECAlgorithm.to_jwk(self.private.public_key()))
        elif algorithm == "EdDSA":
            self.private = ed25519.Ed25519PrivateKey.generate()
            self.jwk = json.loads(OKPAlgorithm.to_jwk(self.private.public_key()))
        else:
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=rsa_bits)
            self.jwk = json.loads(RSAAlgorithm.to_jwk(self.private.public_key()))
        self.jkt = thumbprint(self.jwk)

    def private_jwk(self) -> dict[str, Any]:
        """The whole key, private members too: what a careless client might send."""
        if self.algorithm == "ES256":
            whole: dict[str, Any] = json.loads(ECAlgorithm.to_jwk(self.private))
        elif self.algorithm == "EdDSA":
            whole = json.loads(OKPAlgorithm.to_jwk(self.private))
        else:
            whole = json.loads(RSAAlgorithm.to_jwk(self.private))
        return whole


ES256 = ClientKey("ES256")
EDDSA = ClientKey("EdDSA")
OTHER = ClientKey("ES256")  # a key no token is bound to


def issued(jkt: str | None, audience: str = AUDIENCE, **changes: Any) -> str:
    """An access token for alice from the test issuer (RS256, kid k1), bound to `jkt` unless None."""
    now = int(time.time())
    claims: dict[str, Any] = {"iss": ISSUER, "aud": audience, "sub": "alice", "exp": now + 300, "scope": "notes:read"}
    if jkt is not None:
        claims["cnf"] = {"jkt": jkt}
    claims.update(changes)
    return jwt.encode(claims, PRIVATE, algorithm="RS256", headers={"kid": "k1"})


def proof(
    key: ClientKey,
    method: str,
    url: str,
    token: str | None,
    *,
    header: dict[str, Any] | None = None,
    **changes: Any,
) -> str:
    """A proof for one request, signed by `key` with its jwk in the header; `changes` replace
    claims (None drops one), `header` replaces header members."""
    claims: dict[str, Any] = {"jti": str(uuid.uuid4()), "htm": method, "htu": url, "iat": int(time.time())}
    if token is not None:
        claims["ath"] = access_token_hash(token)
    claims.update(changes)
    claims = {name: value for name, value in claims.items() if value is not None}
    headers = {"typ": "dpop+jwt", "jwk": key.jwk, **(header or {})}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyLengthWarning)  # a short key on purpose
        return jwt.encode(claims, key.private, algorithm=key.algorithm, headers=headers)


def _segment(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def unsigned_proof(key: ClientKey, method: str, url: str, token: str) -> str:
    """A proof that says `alg: none` and carries no signature."""
    claims = {"jti": str(uuid.uuid4()), "htm": method, "htu": url, "iat": int(time.time())}
    claims["ath"] = access_token_hash(token)
    return f"{_segment({'typ': 'dpop+jwt', 'alg': 'none', 'jwk': key.jwk})}.{_segment(claims)}."


def hmac_proof(key: ClientKey, method: str, url: str, token: str) -> str:
    """A proof HMAC-signed (HS256) with the jwk's own `x` as the secret."""
    claims = {"jti": str(uuid.uuid4()), "htm": method, "htu": url, "iat": int(time.time())}
    claims["ath"] = access_token_hash(token)
    signing_input = f"{_segment({'typ': 'dpop+jwt', 'alg': 'HS256', 'jwk': key.jwk})}.{_segment(claims)}"
    signature = hmac.new(key.jwk["x"].encode(), signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + base64.urlsafe_b64encode(signature).rstrip(b"=").decode()


class DpopAuth(httpx2.Auth):
    """What a DPoP client sends on every request: `Authorization: DPoP <token>` and a new proof
    for the request's method and URL."""

    def __init__(self, key: ClientKey, token: str) -> None:
        self.key = key
        self.token = token
        self.sent = 0  # proofs sent

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        url = str(request.url.copy_with(query=None, fragment=None))
        request.headers["authorization"] = f"DPoP {self.token}"
        request.headers["dpop"] = proof(self.key, request.method, url, self.token)
        self.sent += 1
        yield request
