"""Confirming mutations: a tool that changes something runs only once its call is confirmed.

A gated tool's call is confirmed in one of three ways, tried in this order:
1. a `confirmationToken` argument: a token an earlier call of the same tool, by the same
   caller, with the same arguments answered with (the model confirms its own plan);
2. the user, through the client: an elicitation on the call's stream in a session, or an
   `input_required` question in the stateless revision (the retry carries the answer);
3. otherwise the call runs nothing and answers with the plan and a new token.

Tokens are random nonces the server remembers with what they were issued for: the caller (in
a session, the session too, so anonymous callers are told apart), the tool, a digest of the
arguments, an expiry and a kind. A kind keeps the paths apart: the token behind a stateless
question travels in the requestState, which is signed but readable, so it only counts with
the user's answer, never as a `confirmationToken`. A token runs one call; a declined question
burns its token. The store is bounded per caller and in all; a dropped token becomes unusable,
never replayable. Tokens live in the process: behind several replicas, a retry must reach the
replica that asked (sticky routing), or it is refused and the call is asked again.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from fastapi_mcp_routes.server.context import (
    InputRequest,
    InputRequired,
    StatelessInput,
    ToolCall,
    ToolContextError,
    declares,
)
from fastapi_mcp_routes.tools.confirmation import TOKEN_ARGUMENT
from fastapi_mcp_routes.wire.constants import RESERVED_KEY_PREFIX
from fastapi_mcp_routes.wire.json import dumps

# Keys of the stateless question and of its sealed state. `ToolContext` refuses this prefix
# and the dispatcher drops it from a client's inputResponses, so only the server sets them.
QUESTION_KEY: Final = RESERVED_KEY_PREFIX + "confirm"
STATE_KEY: Final = RESERVED_KEY_PREFIX + "confirmation"
DEFAULT_TTL_S: Final = 300.0
# A person answering a stateless question has as long as its requestState lives.
QUESTION_TTL_S: Final = 600.0
MAX_TOKENS: Final = 10_000  # issued and unexpired, in all
MAX_TOKENS_PER_CALLER: Final = 64  # so one caller cannot push everyone else's tokens out
_MESSAGE_ARGUMENTS: Final = 500  # characters of the arguments shown in the question

Kind = Literal["model", "question", "confirmed"]
Outcome = Literal["confirmation_required", "not_confirmed"]


class Refused(Exception):
    """A token that cannot confirm this call; the message says why, for the model."""


@dataclass(slots=True)
class _Issued:
    caller: bytes
    tool: str
    digest: str
    expires: float
    kind: Kind
    used: bool = False


class TokenStore:
    """The tokens this process issued, and what each was issued for."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        capacity: int = MAX_TOKENS,
        per_caller: int = MAX_TOKENS_PER_CALLER,
    ) -> None:
        if capacity < 1 or per_caller < 1:
            raise ValueError(f"token store bounds must be positive, got {capacity!r} and {per_caller!r}")
        self._clock = clock
        self._capacity = capacity
        self._per_caller = per_caller
        self._issued: OrderedDict[str, _Issued] = OrderedDict()
        self._by_caller: dict[bytes, OrderedDict[str, None]] = {}

    def issue(self, caller: bytes, tool: str, digest: str, kind: Kind, expires: float) -> str:
        """A new token; the caller's oldest (then anyone's oldest) goes when a bound is reached."""
        self._forget_expired()
        # Hashed: the store holds no credential, only what tells callers apart.
        caller = _hash(caller)
        mine = self._by_caller.setdefault(caller, OrderedDict())
        while len(mine) >= self._per_caller:
            self._forget(next(iter(mine)))
        while len(self._issued) >= self._capacity:
            self._forget(next(iter(self._issued)))
        token = secrets.token_urlsafe(24)
        self._issued[token] = _Issued(caller, tool, digest, expires, kind)
        self._by_caller.setdefault(caller, OrderedDict())[token] = None
        return token

    def redeem(self, token: object, caller: bytes, tool: str, digest: str, kind: Kind) -> _Issued:
        """Use a token for this call; `Refused` says why it cannot be used.

        A token of another caller or another kind is answered like one never issued, so a
        leaked token tells its holder nothing."""
        issued = self._issued.get(token) if isinstance(token, str) else None
        if issued is None or issued.caller != _hash(caller) or issued.kind != kind or issued.expires <= self._clock():
            raise Refused("This confirmation is not valid: it has expired, or was not issued to this caller here.")
        if issued.used:
            raise Refused("This confirmation was already used; each one runs one call.")
        if issued.tool != tool:
            raise Refused("This confirmation was issued for another tool.")
        if issued.digest != digest:
            raise Refused("This confirmation was issued for other arguments; the arguments must be the same.")
        issued.used = True
        return issued

    def revoke(self, token: object) -> None:
        if isinstance(token, str) and (issued := self._issued.get(token)) is not None:
            issued.used = True

    def _forget_expired(self) -> None:
        # Oldest first; a token that outlives a younger one stays a little longer, which is
        # harmless: `redeem` checks every expiry itself.
        now = self._clock()
        while self._issued:
            token, oldest = next(iter(self._issued.items()))
            if oldest.expires > now:
                return
            self._forget(token)

    def _forget(self, token: str) -> None:
        issued = self._issued.pop(token)
        mine = self._by_caller[issued.caller]
        del mine[token]
        if not mine:
            del self._by_caller[issued.caller]


def _hash(caller: bytes) -> bytes:
    return hashlib.sha256(caller).digest()


@dataclass(frozen=True, slots=True)
class Held:
    """A gated call that does not run (now): what to answer, and how the audit names it."""

    result: dict[str, Any]
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class Confirmed:
    """A confirmed call; `expires` bounds the confirmation's life across MRTR rounds."""

    expires: float


class ConfirmationAsked(InputRequired):
    """The stateless question: the call ends `input_required` until the user answers."""


@dataclass(frozen=True, slots=True)
class Offered:
    """What a call brings toward its confirmation; each part may be absent (None)."""

    token: object = None  # the `confirmationToken` argument
    state: object = None  # the sealed state of a stateless confirmation, from requestState
    answer: object = None  # the client's answer to the stateless question, this round


@dataclass(frozen=True, slots=True)
class GatedCall:
    """What the gate needs to know about one call of a gated tool."""

    tool: str
    method: str
    path: str  # the path the call would request
    arguments: Mapping[str, Any]
    digest: str
    caller: bytes  # the caller's identity, plus its session where there is one
    offered: Offered
    call: ToolCall


class ConfirmationGate:
    """Decides, for each call of a gated tool, whether it runs."""

    def __init__(self, ttl_s: float = DEFAULT_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl_s = ttl_s
        self._clock = clock
        self._tokens = TokenStore(clock)

    async def check(self, gated: GatedCall) -> Confirmed | Held:
        """Confirmed, held with an answer, or `ConfirmationAsked` (stateless question)."""
        if isinstance(gated.offered.state, Mapping):
            try:
                return self._stateless_retry(gated, gated.offered.state)
            except Refused as refused:
                return Held(_refusal(f"{refused} Call the tool again to be asked again."), "not_confirmed")
        if gated.offered.token is not None:
            try:
                return self._redeem(gated, gated.offered.token, "model")
            except Refused as refused:
                retry = f"Call the tool again without {TOKEN_ARGUMENT} to get a new plan and token."
                return Held(_refusal(f"{refused} {retry}"), "not_confirmed")
        ask = question(gated)
        stateless = gated.call.stateless
        if stateless is not None and declares(stateless.capabilities, ask):
            self._ask_stateless(gated, stateless, ask)
        if stateless is None and gated.call.cannot_ask(ask) is None:
            return await self._ask_in_session(gated, ask)
        expires = self._clock() + self._ttl_s
        token = self._tokens.issue(gated.caller, gated.tool, gated.digest, "model", expires)
        return Held(pending_result(gated, token, self._ttl_s), "confirmation_required")

    def carried(self, gated: GatedCall, confirmed: Confirmed) -> dict[str, Any]:
        """The sealed state that keeps a confirmed stateless call confirmed while its route
        asks questions of its own: a new token, expiring when the confirmation does."""
        token = self._tokens.issue(gated.caller, gated.tool, gated.digest, "confirmed", confirmed.expires)
        return {"token": token, "kind": "confirmed"}

    def _redeem(self, gated: GatedCall, token: object, kind: Kind) -> Confirmed:
        return Confirmed(self._tokens.redeem(token, gated.caller, gated.tool, gated.digest, kind).expires)

    def _stateless_retry(self, gated: GatedCall, state: Mapping[str, Any]) -> Confirmed | Held:
        token = state.get("token")
        if state.get("kind") == "confirmed":
            return self._redeem(gated, token, "confirmed")
        if gated.offered.answer is None:  # retried without an answer: ask again
            answers = gated.call.stateless.answers if gated.call.stateless is not None else {}
            raise ConfirmationAsked({QUESTION_KEY: _request(question(gated))}, {**answers, STATE_KEY: dict(state)})
        if not accepted(gated.offered.answer):
            self._tokens.revoke(token)  # the user said no: the same state cannot say yes later
            return Held(_refusal(_no(gated.offered.answer)), "not_confirmed")
        return self._redeem(gated, token, "question")

    def _ask_stateless(self, gated: GatedCall, stateless: StatelessInput, ask: InputRequest) -> None:
        expires = self._clock() + max(self._ttl_s, QUESTION_TTL_S)
        token = self._tokens.issue(gated.caller, gated.tool, gated.digest, "question", expires)
        sealed = {**stateless.answers, STATE_KEY: {"token": token, "kind": "question"}}
        raise ConfirmationAsked({QUESTION_KEY: _request(ask)}, sealed)

    async def _ask_in_session(self, gated: GatedCall, ask: InputRequest) -> Confirmed | Held:
        try:
            answer = await gated.call.ask_client(ask)
        except ToolContextError as exc:
            return Held(_refusal(f"the call was not confirmed: {exc}."), "not_confirmed")
        if accepted(answer):
            return Confirmed(self._clock() + self._ttl_s)
        return Held(_refusal(_no(answer)), "not_confirmed")


def plan(gated: GatedCall) -> dict[str, Any]:
    """What a gated call would run."""
    return {"method": gated.method, "path": gated.path, "arguments": dict(gated.arguments)}


def pending_result(gated: GatedCall, token: str, ttl_s: float) -> dict[str, Any]:
    """The answer to a gated call that carries no confirmation: nothing ran."""
    pending = {"pending": True, "token": token, "plan": plan(gated)}
    how = (
        f"Not run yet: {gated.tool} changes data, so it needs confirmation. It would call "
        f"{gated.method} {gated.path} with the arguments in the plan. To run it, call {gated.tool} "
        f"again with the same arguments plus {TOKEN_ARGUMENT}={token!r}; the token works once, "
        f"within {ttl_s / 60:g} minutes."
    )
    text = [{"type": "text", "text": dumps(pending).decode()}, {"type": "text", "text": how}]
    return {"content": text, "structuredContent": pending}


def question(gated: GatedCall) -> InputRequest:
    """The elicitation that asks the user to confirm: accept runs the call."""
    arguments = dumps(gated.arguments).decode()
    if len(arguments) > _MESSAGE_ARGUMENTS:
        arguments = arguments[:_MESSAGE_ARGUMENTS] + "…"
    message = f"Allow {gated.tool} to run {gated.method} {gated.path} with {arguments}?"
    return InputRequest.elicitation(message, {"type": "object", "properties": {}})


def accepted(answer: object) -> bool:
    return isinstance(answer, Mapping) and answer.get("action") == "accept"


def _no(answer: object) -> str:
    action = answer.get("action") if isinstance(answer, Mapping) else None
    return "the user cancelled this call." if action == "cancel" else "the user declined this call."


def _refusal(reason: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"Not run: {reason}"}], "isError": True}


def _request(ask: InputRequest) -> dict[str, Any]:
    return {"method": ask.method, "params": dict(ask.params)}


def is_reserved(key: object) -> bool:
    return isinstance(key, str) and key.startswith(RESERVED_KEY_PREFIX)
