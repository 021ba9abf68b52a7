"""The example's stand-in for an authorization server: a local RSA key that signs demo tokens.

A real deployment points `JWTBearer` at its identity provider instead
(`JWTBearer(issuer=..., audience=..., jwks_url="https://idp.example/.well-known/jwks.json")`)
and agents get their tokens from it through OAuth. Here the key lives in a file that the app and
this command share, so `make token` prints a bearer token the running example accepts:

    python -m example_app.auth --scope notes:stats
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

# The port the example is served on (`make run PORT=...` sets it): its addresses below follow it.
PORT: Final = os.environ.get("NOTES_PORT", "8000")
ISSUER: Final = os.environ.get("NOTES_JWT_ISSUER", f"http://127.0.0.1:{PORT}/demo-issuer")
# The token must be issued for this resource: the example's MCP endpoint.
AUDIENCE: Final = os.environ.get("NOTES_JWT_AUDIENCE", f"http://127.0.0.1:{PORT}/mcp")
KEY_FILE: Final = Path(
    os.environ.get("NOTES_JWT_KEY_FILE", Path(__file__).parent.parent / ".example-keys" / "demo.pem")
)
SCOPES: Final = ("notes:stats",)


def private_key_pem() -> str:
    """The demo issuer's private key, created on first use (readable by its owner only)."""
    try:
        return KEY_FILE.read_text()
    except FileNotFoundError:
        pass
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    KEY_FILE.parent.mkdir(parents=True, exist_ok=True)
    try:
        # Exclusive create: when the app and `make token` start together, one key wins.
        descriptor = os.open(KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return KEY_FILE.read_text()
    with os.fdopen(descriptor, "w") as file:
        file.write(pem)
    return pem


def public_key_pem() -> str:
    """What the example's `JWTBearer` verifies signatures with."""
    private = serialization.load_pem_private_key(private_key_pem().encode(), password=None)
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return public.decode()


def mint(subject: str = "demo-agent", scopes: Sequence[str] = SCOPES, ttl_s: int = 3600) -> str:
    """A signed access token for the example, as an authorization server would issue one."""
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": subject, "iat": now, "exp": now + ttl_s, "scope": " ".join(scopes)}
    return str(jwt.encode(claims, private_key_pem(), algorithm="RS256"))


def main() -> None:
    parser = argparse.ArgumentParser(description="Print a bearer token the example app accepts.")
    parser.add_argument("--subject", default="demo-agent", help="who the token is for")
    parser.add_argument("--scope", action="append", help=f"a scope to grant (repeatable; default {' '.join(SCOPES)})")
    parser.add_argument("--ttl", type=int, default=3600, help="seconds until it expires")
    options = parser.parse_args()
    print(mint(options.subject, options.scope or SCOPES, options.ttl))


if __name__ == "__main__":
    main()
