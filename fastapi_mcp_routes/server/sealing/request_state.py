"""Sealed `requestState` for Multi Round-Trip Requests (spec 2026-07-28, basic/patterns/mrtr).

The state travels through the client and comes back on the retry, so it is attacker-controlled:
it is sealed with the endpoint's secret (server/sealing/secret.py) and bound to the caller, the tool and a
digest of the arguments, and it carries an expiry. A state that was tampered with, has expired,
or was issued to another caller, tool or set of arguments is refused, and the refusal does not
say which. Every process sharing the secret opens the states any of them sealed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from fastapi_mcp_routes.server.sealing.secret import Secret
from fastapi_mcp_routes.wire.errors import InvalidParams, ParseError
from fastapi_mcp_routes.wire.json import dumps, loads

STATE_TTL_S: Final = 600.0  # a person answering a form may take a while; ten minutes
_PURPOSE: Final = "requestState"


class InvalidRequestState(InvalidParams):
    def __init__(self) -> None:
        super().__init__("Invalid or expired requestState.", {"reason": "invalid_request_state"})


class RequestStateSealer:
    """Seals the answers gathered so far into a `requestState`, and opens it on the retry."""

    def __init__(self, secret: Secret, clock: Callable[[], float] = time.time) -> None:
        self._secret = secret
        self._clock = clock

    def binding(self, credentials: bytes, tool: str, arguments: Mapping[str, Any]) -> bytes:
        """What a state is bound to: the caller's credential headers (in a canonical order),
        the tool and the arguments. It is part of the seal, never carried in the state."""
        return b"\x00".join((hashlib.sha256(credentials).digest(), tool.encode(), arguments_sha256(arguments).encode()))

    def seal(self, binding: bytes, answers: Mapping[str, Any]) -> str:
        """Seal the answers so far; none of them can be changed on the way back."""
        payload = dumps({"v": 2, "exp": int(self._clock() + STATE_TTL_S), "a": dict(answers)})
        return self._secret.seal(_PURPOSE, payload, binding)

    def open(self, state: object, binding: bytes) -> dict[str, Any]:
        """The answers a state carries; `InvalidRequestState` for anything that is not ours,
        fresh, and issued for this caller, tool and arguments."""
        payload = self._secret.open(_PURPOSE, state, binding)
        if payload is None:
            raise InvalidRequestState()
        try:
            sealed = loads(payload)
        except ParseError:  # ours, yet unreadable: a state like any other that cannot be used
            raise InvalidRequestState() from None
        if not isinstance(sealed, dict):
            raise InvalidRequestState()
        fresh = isinstance(sealed.get("exp"), int) and sealed["exp"] >= self._clock()
        if not (fresh and isinstance(sealed.get("a"), dict)):
            raise InvalidRequestState()
        answers: dict[str, Any] = sealed["a"]
        return answers


def arguments_sha256(arguments: Mapping[str, Any]) -> str:
    """A digest of a call's arguments: keys sorted at every level, so the same arguments
    always give the same digest."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
