"""Bearer tokens from a test issuer: its keys, good tokens, and the classic forgeries.

Signed with PyJWT and keys of `cryptography`'s making; the forgeries are assembled by hand, since
no JWT library will sign them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, HMACAlgorithm, OKPAlgorithm, RSAAlgorithm

ISSUER = "https://issuer.example"
AUDIENCE = "https://api.example/mcp"


def _pems(private: Any) -> tuple[str, str]:
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public_pem = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private_pem, public_pem


def rsa_pair() -> tuple[str, str]:
    """A fresh RSA key pair, as (private PEM, public PEM)."""
    return _pems(rsa.generate_private_key(public_exponent=65537, key_size=2048))


def ec_pair(curve: ec.EllipticCurve | None = None) -> tuple[str, str]:
    """A fresh EC key pair (P-256 unless told otherwise), as (private PEM, public PEM)."""
    return _pems(ec.generate_private_key(curve or ec.SECP256R1()))


def ed25519_pair() -> tuple[str, str]:
    """A fresh Ed25519 key pair, as (private PEM, public PEM)."""
    return _pems(ed25519.Ed25519PrivateKey.generate())


PRIVATE, PUBLIC = rsa_pair()
EC_PRIVATE, EC_PUBLIC = ec_pair()
ED_PRIVATE, ED_PUBLIC = ed25519_pair()
SECRET = secrets.token_bytes(32)


def claims(**changes: Any) -> dict[str, Any]:
    """Claims for alice from ISSUER to AUDIENCE, valid for five minutes; a change to None drops a claim."""
    now = int(time.time())
    merged = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now + 300, **changes}
    return {key: value for key, value in merged.items() if value is not None}


def signed(key: str | bytes, algorithm: str, kid: str | None = "k1", **changes: Any) -> str:
    """A token with scope notes:read, signed with `key` under `algorithm`."""
    headers = {"kid": kid} if kid else None
    return jwt.encode(claims(**{"scope": "notes:read", **changes}), key, algorithm=algorithm, headers=headers)


def token(private: str = PRIVATE, kid: str | None = "k1", **changes: Any) -> str:
    """An RS256 token with scope notes:read, signed by the issuer's key unless told otherwise."""
    return signed(private, "RS256", kid, **changes)


def segment(value: bytes | dict[str, Any]) -> str:
    """`value` (JSON when a dict) as one base64url segment of a compact JWT."""
    raw = json.dumps(value).encode() if isinstance(value, dict) else value
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unsigned(**changes: Any) -> str:
    """A token that says `alg: none` and carries no signature."""
    return f"{segment({'alg': 'none', 'typ': 'JWT'})}.{segment(claims(**changes))}."


def hmac_signed(secret: bytes, header: dict[str, Any], payload: dict[str, Any]) -> str:
    """A token HMAC-SHA256-signed by hand, whatever its header says."""
    signing_input = f"{segment(header)}.{segment(payload)}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{segment(signature)}"


def signed_by_hand(private: str, header: dict[str, Any], payload: dict[str, Any], ecdsa: bool = False) -> str:
    """A token signed with `private` (RSA, or ECDSA on any curve) and SHA-256 whatever its header
    says: headers PyJWT would not write, ES256 on the wrong curve."""
    signing_input = f"{segment(header)}.{segment(payload)}"
    key: Any = serialization.load_pem_private_key(private.encode(), password=None)
    algorithm = ECAlgorithm(ECAlgorithm.SHA256) if ecdsa else RSAAlgorithm(RSAAlgorithm.SHA256)
    return f"{signing_input}.{segment(algorithm.sign(signing_input.encode(), key))}"


def hs256_with_public_key(public: str = PUBLIC) -> str:
    """The classic confusion attack: HMAC-sign with the public key's PEM as the secret."""
    return hmac_signed(public.encode(), {"alg": "HS256", "typ": "JWT", "kid": "k1"}, claims(sub="mallory"))


def hs256_with_public_jwk(jwk: dict[str, Any]) -> str:
    """The same attack on a JWK: HMAC-sign with the public JWK's JSON as the secret."""
    return hmac_signed(json.dumps(jwk).encode(), {"alg": "HS256", "kid": jwk.get("kid")}, claims(sub="mallory"))


def _public_jwk(public_pem: str) -> dict[str, Any]:
    public = serialization.load_pem_public_key(public_pem.encode())
    if isinstance(public, rsa.RSAPublicKey):
        return RSAAlgorithm.to_jwk(public, as_dict=True)
    if isinstance(public, ec.EllipticCurvePublicKey):
        return ECAlgorithm.to_jwk(public, as_dict=True)
    assert isinstance(public, ed25519.Ed25519PublicKey)
    return OKPAlgorithm.to_jwk(public, as_dict=True)


def public_jwk(kid: str, public: str = PUBLIC, alg: str | None = "RS256") -> dict[str, Any]:
    """A public key (the issuer's RSA key unless told otherwise) as a JWK named `kid`."""
    key = {**_public_jwk(public), "kid": kid, "use": "sig"}
    return {**key, "alg": alg} if alg else key


def secret_jwk(kid: str, secret: bytes = SECRET) -> dict[str, Any]:
    """A shared HMAC secret as an `oct` JWK named `kid`."""
    return {**HMACAlgorithm.to_jwk(secret, as_dict=True), "kid": kid}
