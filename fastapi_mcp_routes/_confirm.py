"""Confirming mutations: a tool that changes something runs only once its call is confirmed.

A gated tool's first call runs nothing and answers with a plan and a token; the model calls
again with the same arguments plus `confirmationToken` to run it. Where the client can ask its
user (elicitation in a session, Multi Round-Trip Requests in the stateless revision), the
question goes to the user instead, and the token stays the fallback.

A token is a random nonce the server remembers with what it was issued for: the caller, the
tool and a digest of the arguments, until it expires. Redeeming one forgets nothing until the
expiry but marks it used, so a replay is told apart from a forgery. The store is bounded; when
it is full the oldest token is dropped, which makes that token unusable (never replayable).
Tokens live in the process: behind several replicas a token is only good on the one that
issued it, and the model is told to ask for a new one.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from fastapi_mcp_routes._context import InputRequest
from fastapi_mcp_routes._json import dumps

# The argument a gated tool's inputSchema declares for the token.
TOKEN_ARGUMENT: Final = "confirmationToken"
# The inputRequests key of the stateless question, and where the sealed requestState keeps the
# token behind it; chosen apart from the numbered keys `ToolContext` uses.
QUESTION_KEY: Final = "mcp-confirm-mutation"
SEALED_TOKEN_KEY: Final = "mcp-confirm-mutation-token"
DEFAULT_TTL_S: Final = 300.0
# Tokens issued and not yet expired that one process remembers; beyond it the oldest go.
MAX_TOKENS: Final = 10_000

TOKEN_PROPERTY: Final[Mapping[str, Any]] = {
    "type": "string",
    "description": (
        "Leave out on the first call: this tool changes data, so that call only returns a plan and "
        "a token. Pass the token here, with the same arguments, to run it."
    ),
}
# What a pending call's structuredContent holds; gated tools' outputSchema admits it.
PENDING_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "pending": {"const": True},
        "token": {"type": "string"},
        "plan": {
            "type": "object",
            "properties": {"method": {"type": "string"}, "path": {"type": "string"}, "arguments": {"type": "object"}},
            "required": ["method", "path", "arguments"],
        },
    },
    "required": ["pending", "token", "plan"],
}


@dataclass(slots=True)
class _Issued:
    caller: bytes
    tool: str
    digest: str
    expires: float
    used: bool = False


class ConfirmationTokens:
    """The tokens this process issued, and what each was issued for."""

    def __init__(
        self, ttl_s: float = DEFAULT_TTL_S, clock: Callable[[], float] = time.monotonic, capacity: int = MAX_TOKENS
    ) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._capacity = capacity
        self._issued: OrderedDict[str, _Issued] = OrderedDict()

    def issue(self, caller: bytes, tool: str, digest: str) -> str:
        now = self._clock()
        self._forget_expired(now)
        while len(self._issued) >= self._capacity:
            self._issued.popitem(last=False)
        token = secrets.token_urlsafe(24)
        self._issued[token] = _Issued(_hash(caller), tool, digest, now + self.ttl_s)
        return token

    def redeem(self, token: object, caller: bytes, tool: str, digest: str) -> str | None:
        """Use a token for this call: `None` when it is good (and now used), else why not."""
        now = self._clock()
        self._forget_expired(now)
        issued = self._issued.get(token) if isinstance(token, str) else None
        if issued is None:
            return (
                "This confirmation token is not valid: it has expired, was never issued, or was "
                "issued by another server replica."
            )
        if issued.used:
            return "This confirmation token was already used; each token runs one call."
        if issued.caller != _hash(caller):
            return "This confirmation token was issued to another caller."
        if issued.tool != tool:
            return "This confirmation token was issued for another tool."
        if issued.digest != digest:
            return "This confirmation token was issued for other arguments; the arguments must be the same."
        issued.used = True
        return None

    def _forget_expired(self, now: float) -> None:
        # Issued in order with one lifetime, so expired tokens are always the oldest.
        while self._issued:
            token, oldest = next(iter(self._issued.items()))
            if oldest.expires > now:
                return
            del self._issued[token]


def _hash(caller: bytes) -> bytes:
    return hashlib.sha256(caller).digest()


def plan(method: str, path: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """What a gated call would run."""
    return {"method": method, "path": path, "arguments": dict(arguments)}


def pending_result(tool: str, planned: Mapping[str, Any], token: str, ttl_s: float) -> dict[str, Any]:
    """The answer to a gated call that carries no confirmation: nothing ran."""
    pending = {"pending": True, "token": token, "plan": dict(planned)}
    how = (
        f"Not run yet: {tool} changes data, so it needs confirmation. It would call "
        f"{planned['method']} {planned['path']} with the arguments in the plan. To run it, call "
        f"{tool} again with the same arguments plus {TOKEN_ARGUMENT}={token!r}; the token works once, "
        f"within {ttl_s / 60:g} minutes."
    )
    text = [{"type": "text", "text": dumps(pending).decode()}, {"type": "text", "text": how}]
    return {"content": text, "structuredContent": pending}


def refused_result(reason: str, retry: bool = True) -> dict[str, Any]:
    """A gated call that was not run: a bad token (`retry`: say how to get a new one), or the
    user said no."""
    text = f"Not run: {reason}"
    if retry:
        text += f" Call the tool again without {TOKEN_ARGUMENT} to get a new plan and token."
    return {"content": [{"type": "text", "text": text}], "isError": True}


def question(tool: str, planned: Mapping[str, Any]) -> InputRequest:
    """The elicitation that asks the user to confirm: accept runs the call."""
    arguments = dumps(planned["arguments"]).decode()
    message = f"Allow {tool} to run {planned['method']} {planned['path']} with {arguments}?"
    return InputRequest.elicitation(message, {"type": "object", "properties": {}})


def accepted(answer: object) -> bool:
    return isinstance(answer, Mapping) and answer.get("action") == "accept"


def gated_output_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A gated tool's outputSchema: the route's result, or a pending confirmation."""
    own = {key: value for key, value in schema.items() if key not in ("$defs", "$schema")}
    union: dict[str, Any] = {key: schema[key] for key in ("$schema", "$defs") if key in schema}
    union.update({"type": "object", "anyOf": [own, dict(PENDING_SCHEMA)]})
    return union
