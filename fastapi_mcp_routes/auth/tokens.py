"""A bearer JWT read and verified: its size and header checked before PyJWT parses it, then its
signature and claims by PyJWT under the one algorithm the header names and the allowlist admits.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final

import jwt
from jwt import PyJWK
from jwt.exceptions import DecodeError, InvalidAlgorithmError, InvalidTokenError

# Access tokens run to a few kilobytes; one far longer is refused before any decoding, so a
# request's header can make the server decode no more than this.
MAX_TOKEN_CHARS: Final = 16 * 1024
_BASE64URL: Final = re.compile(r"[A-Za-z0-9_-]*")
# What verifying a token may raise for a token that is not good; each becomes a 401.
REFUSALS: Final = (jwt.PyJWTError, ValueError, TypeError, KeyError, RecursionError)


class NoKeyError(InvalidTokenError):
    """No key known for the token's `kid` fits its algorithm."""


@dataclass(frozen=True, slots=True)
class Header:
    """What a token's header says about verifying it."""

    algorithm: str
    kid: str | None


def read_header(token: str, algorithms: Collection[str]) -> Header:
    """The token's header, refused unless its shape, algorithm and `kid` are sound.

    A `crit` header names extensions the token must not be accepted without (RFC 7515 section
    4.1.11); none is understood here, so any is refused.
    """
    if len(token) > MAX_TOKEN_CHARS:
        raise InvalidTokenError(f"the token is longer than {MAX_TOKEN_CHARS} characters")
    segments = token.split(".")
    if len(segments) != 3:
        raise DecodeError("a signed JWT has three segments")
    header = _json_segment(segments[0])
    if not isinstance(header, dict):
        raise DecodeError("the header is not a JSON object")
    if "crit" in header:
        raise InvalidTokenError("the token names critical header extensions")
    algorithm = header.get("alg")
    if not isinstance(algorithm, str) or algorithm not in algorithms:
        raise InvalidAlgorithmError("the token's algorithm is not allowed")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise DecodeError("the header's kid is not a string")
    return Header(algorithm, kid)


def verified_claims(token: str, key: PyJWK, algorithm: str, issuer: str, audience: str, leeway_s: float) -> Any:
    """The token's claims, once its signature, issuer, audience, `exp`, `nbf` and `sub` hold.

    The audience is this resource (RFC 8707): the token's `aud`, a string or a list, must name it.
    """
    return jwt.decode(
        token,
        key,
        algorithms=[algorithm],
        audience=audience,
        issuer=issuer,
        leeway=leeway_s,
        options={"require": ["iss", "aud", "exp", "sub"]},
    )


def _json_segment(segment: str) -> Any:
    if not _BASE64URL.fullmatch(segment) or len(segment) % 4 == 1:
        raise DecodeError("a segment is not base64url")
    try:
        return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (binascii.Error, ValueError, RecursionError):
        raise DecodeError("a segment is not base64url-encoded JSON") from None
