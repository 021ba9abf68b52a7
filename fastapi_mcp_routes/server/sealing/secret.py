"""One secret for every process, and the values it seals: what one process issues and any
process accepts on its own (session ids, `requestState`, confirmation tokens).

A sealed value is `base64url(key id | payload | tag)`: the tag is an HMAC-SHA256 (cut to
`TAG_BYTES`) over the key id, a purpose (so a value sealed for one use never passes for
another), the payload, and a `bound` value that is not carried (the caller's credentials, a
tool and its arguments): a value presented by another caller, or for another call, fails its
tag exactly like a forged one, and carries no hash of any credential. The payload is readable
by whoever holds the value; nothing secret goes in it.

The secret comes from `mcp_routes(secret=...)`, else the environment variable
`FASTAPI_MCP_ROUTES_SECRET`, else it is random per process, which serves one process only.
Several secrets may be given (a list, or separated by commas in the variable): the first seals,
every one opens, so a rotation puts the new secret first and drops the old one once the values
it sealed have expired. A value sealed under a key id this process does not know is answered
like any unknown value, and logs one WARNING per process naming the fix.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import secrets
from collections.abc import Mapping, Sequence
from typing import Final

logger = logging.getLogger("fastapi_mcp_routes")

ENV_SECRET: Final = "FASTAPI_MCP_ROUTES_SECRET"
MIN_SECRET_BYTES: Final = 32
KEY_ID_BYTES: Final = 4
TAG_BYTES: Final = 16  # 128 bits: forging one is as hard as guessing a random 128-bit value
INSTANCE_BYTES: Final = 6

SecretOption = str | bytes | Sequence[str | bytes] | None


class Secret:
    """The keys this process seals and opens values with, and where they came from."""

    def __init__(self, secrets_: Sequence[bytes], source: str) -> None:
        if not secrets_:
            raise ValueError("at least one secret is needed")
        self.source = source  # "secret=", the environment variable's name, or "random"
        # Shared: given, so other processes may hold it too; a random one is this process's own.
        self.shared = source != "random"
        # Which process sealed a value: state only this process holds (a session it opened, a
        # token it issued) is known here; another process's is vouched for by the seal alone.
        self.instance = secrets.token_bytes(INSTANCE_BYTES)
        self._keys = {_key_id(secret): secret for secret in secrets_}
        self.key_id = _key_id(secrets_[0])
        self._warned = False

    @classmethod
    def configure(cls, secret: SecretOption, environ: Mapping[str, str]) -> Secret:
        """The secret from the option, else the environment, else a random one."""
        if secret is not None:
            return cls(_secrets("secret", secret), "secret=")
        from_env = environ.get(ENV_SECRET)
        if from_env:
            return cls(_secrets(ENV_SECRET, [part for part in from_env.split(",") if part.strip()]), ENV_SECRET)
        return cls([secrets.token_bytes(MIN_SECRET_BYTES)], "random")

    def describe(self) -> str:
        if not self.shared:
            return "a random secret of this process (one process only: set secret= or FASTAPI_MCP_ROUTES_SECRET)"
        return f"the secret from {self.source} (key id {self.key_id.hex()})"

    def mac(self, purpose: str, data: bytes) -> bytes:
        """A keyed hash of `data` under the current key (names in the store, never credentials)."""
        return hmac.digest(self._keys[self.key_id], purpose.encode() + b"\x00" + data, "sha256")

    def seal(self, purpose: str, payload: bytes, bound: bytes = b"") -> str:
        head = self.key_id + payload
        return _b64(head + self._tag(self._keys[self.key_id], purpose, head, bound))

    def open(self, purpose: str, sealed: object, bound: bytes = b"") -> bytes | None:
        """The payload of a value this secret sealed for `purpose` and `bound`; else `None`."""
        if not isinstance(sealed, str) or len(sealed) > 8192:
            return None
        try:
            raw = base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4))
        except (binascii.Error, ValueError):
            return None
        # One spelling per value: the decoder skips characters outside the alphabet and takes
        # padding, which would make endless strings of one value (kept apart by any cache).
        if len(raw) < KEY_ID_BYTES + TAG_BYTES or _b64(raw) != sealed:
            return None
        head, tag = raw[:-TAG_BYTES], raw[-TAG_BYTES:]
        key = self._keys.get(head[:KEY_ID_BYTES])
        if key is None:
            self._warn_foreign(purpose)
            return None
        if not hmac.compare_digest(tag, self._tag(key, purpose, head, bound)):
            return None
        return head[KEY_ID_BYTES:]

    def _tag(self, key: bytes, purpose: str, head: bytes, bound: bytes) -> bytes:
        message = b"\x00".join((purpose.encode(), len(head).to_bytes(4, "big"), head, bound))
        return hmac.digest(key, message, "sha256")[:TAG_BYTES]

    def _warn_foreign(self, purpose: str) -> None:
        if self._warned:
            return
        self._warned = True
        logger.warning(
            "a %s sealed with another secret reached this process (key id unknown here): every process "
            "serving this endpoint must share one secret (mcp_routes(secret=...) or %s); until they do, such "
            "values are refused as unknown",
            purpose,
            ENV_SECRET,
        )


def _secrets(name: str, given: str | bytes | Sequence[str | bytes]) -> list[bytes]:
    if isinstance(given, (str, bytes)):
        values: list[object] = [given]
    elif isinstance(given, Sequence):
        values = list(given)
    else:
        raise ValueError(f"{name} must be text or bytes (or a list of them), got {type(given).__name__}")
    if not values:
        raise ValueError(f"{name} must name at least one secret")
    result = []
    for value in values:
        if not isinstance(value, (str, bytes)):
            raise ValueError(f"{name} must be text or bytes (or a list of them), got {type(value).__name__}")
        raw = value.strip().encode() if isinstance(value, str) else value
        if len(raw) < MIN_SECRET_BYTES:
            raise ValueError(
                f"{name} must be at least {MIN_SECRET_BYTES} bytes, got {len(raw)}; "
                'make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'
            )
        result.append(raw)
    return result


def _key_id(secret: bytes) -> bytes:
    return hashlib.sha256(b"fastapi-mcp-routes key id\x00" + secret).digest()[:KEY_ID_BYTES]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")
