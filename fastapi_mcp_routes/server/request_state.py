"""Sealed `requestState` for Multi Round-Trip Requests (spec 2026-07-28, basic/patterns/mrtr).

The state travels through the client and comes back on the retry, so it is attacker-controlled:
it is sealed with HMAC-SHA256 under a server key and bound to the caller, the tool, a digest of
the arguments and an expiry. A state that was tampered with, has expired, or was issued to
another caller, tool or set of arguments is refused, and the refusal does not say which.

The key is generated per process unless one is given; replicas behind one load balancer must
share it, or a retry landing on another replica is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from fastapi_mcp_routes.wire.errors import InvalidParams, ParseError
from fastapi_mcp_routes.wire.json import dumps, loads

STATE_TTL_S: Final = 600.0  # a person answering a form may take a while; ten minutes


class InvalidRequestState(InvalidParams):
    def __init__(self) -> None:
        super().__init__("Invalid or expired requestState.", {"reason": "invalid_request_state"})


@dataclass(frozen=True, slots=True)
class Binding:
    """What a state is bound to: the caller, the tool and the arguments."""

    caller: str
    tool: str
    arguments: str


class RequestStateSealer:
    """Seals the answers gathered so far into a `requestState`, and opens it on the retry."""

    def __init__(self, key: bytes | None = None, clock: Callable[[], float] = time.time) -> None:
        if key is not None and (not isinstance(key, bytes) or len(key) < 32):
            raise ValueError(f"request_state_key must be at least 32 bytes (bytes, not text), got {key!r:.20}")
        self._key = key or secrets.token_bytes(32)
        self._clock = clock

    def binding(self, credentials: bytes, tool: str, arguments: Mapping[str, Any]) -> Binding:
        """`credentials`: the caller's credential headers, in a canonical order."""
        caller = hmac.digest(self._key, b"caller\x00" + credentials, "sha256").hex()
        return Binding(caller, tool, arguments_sha256(arguments))

    def seal(self, binding: Binding, answers: Mapping[str, Any]) -> str:
        """Seal the answers so far; none of them can be changed on the way back."""
        payload = dumps(
            {
                "v": 1,
                "exp": int(self._clock() + STATE_TTL_S),
                "c": binding.caller,
                "t": binding.tool,
                "d": binding.arguments,
                "a": dict(answers),
            }
        )
        mac = hmac.digest(self._key, payload, "sha256")
        return _b64(payload) + "." + _b64(mac)

    def open(self, state: object, binding: Binding) -> dict[str, Any]:
        """The answers a state carries; `InvalidRequestState` for anything that is not ours,
        fresh, and issued for this caller, tool and arguments."""
        if not isinstance(state, str):
            raise InvalidRequestState()
        try:
            encoded_payload, encoded_mac = state.split(".")
            payload, mac = _unb64(encoded_payload), _unb64(encoded_mac)
        except ValueError:
            raise InvalidRequestState() from None
        if not hmac.compare_digest(mac, hmac.digest(self._key, payload, "sha256")):
            raise InvalidRequestState()
        try:
            sealed = loads(payload)
        except ParseError:  # ours, yet unreadable: a state like any other that cannot be used
            raise InvalidRequestState() from None
        if not isinstance(sealed, dict):
            raise InvalidRequestState()
        fresh = isinstance(sealed.get("exp"), int) and sealed["exp"] >= self._clock()
        ours = (sealed.get("c"), sealed.get("t"), sealed.get("d")) == (binding.caller, binding.tool, binding.arguments)
        if not (fresh and ours and isinstance(sealed.get("a"), dict)):
            raise InvalidRequestState()
        answers: dict[str, Any] = sealed["a"]
        return answers


def arguments_sha256(arguments: Mapping[str, Any]) -> str:
    """A digest of a call's arguments: keys sorted at every level, so the same arguments
    always give the same digest."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
