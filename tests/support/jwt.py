"""Bearer tokens from a test issuer: its keys, good tokens, and the classic forgeries."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jose import jwk, jwt

ISSUER = "https://issuer.example"
AUDIENCE = "https://api.example/mcp"


def rsa_pair() -> tuple[str, str]:
    """A fresh RSA key pair, as (private PEM, public PEM)."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public_pem = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private_pem, public_pem


PRIVATE, PUBLIC = rsa_pair()


def claims(**changes: Any) -> dict[str, Any]:
    """Claims for alice from ISSUER to AUDIENCE, valid for five minutes; a change to None drops a claim."""
    now = int(time.time())
    merged = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now + 300, **changes}
    return {key: value for key, value in merged.items() if value is not None}


def token(private: str = PRIVATE, kid: str | None = "k1", **changes: Any) -> str:
    """An RS256 token with scope notes:read, signed by the issuer's key unless told otherwise."""
    headers = {"kid": kid} if kid else None
    return str(jwt.encode(claims(**{"scope": "notes:read", **changes}), private, algorithm="RS256", headers=headers))


def _segment(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def unsigned(**changes: Any) -> str:
    """A token that says `alg: none` and carries no signature."""
    return f"{_segment({'alg': 'none', 'typ': 'JWT'})}.{_segment(claims(**changes))}."


def hs256_with_public_key() -> str:
    """The classic confusion attack: HMAC-sign with the RSA public key as the secret."""
    header = {"alg": "HS256", "typ": "JWT", "kid": "k1"}
    signing_input = f"{_segment(header)}.{_segment(claims(sub='mallory'))}"
    signature = hmac.new(PUBLIC.encode(), signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + base64.urlsafe_b64encode(signature).rstrip(b"=").decode()


def public_jwk(kid: str) -> dict[str, Any]:
    """The issuer's public key as a JWK named `kid`."""
    key: dict[str, Any] = jwk.construct(PUBLIC, "RS256").to_dict()
    return {**key, "kid": kid, "alg": "RS256", "use": "sig"}
