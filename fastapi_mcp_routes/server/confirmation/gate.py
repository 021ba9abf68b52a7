"""Confirming mutations: a tool that changes something runs only once its call is confirmed.

A gated tool's call is confirmed in one of three ways, tried in this order:
1. a `confirmationToken` argument: a token an earlier call of the same tool, by the same
   caller, with the same arguments answered with (the model confirms its own plan);
2. the user, through the client, when the client can be asked: an elicitation on the call's
   stream in a session, or an `input_required` question in the stateless revision (the retry
   carries the answer and the sealed state of the question);
3. otherwise the call runs nothing and answers with the plan and a new token: an `isError`
   result (the model reads "not run yet: retry with this token"), the plan and token also in its
   `_meta` (`PENDING_META_KEY`), and no `structuredContent`, so the tool's `outputSchema` is the
   route's own and clients that type results keep the route's type.

The user's question shows every argument by name (server/confirmation/summary.py), however the caller
orders or pads them, and carries the whole plan in its `_meta` (`PLAN_META_KEY`) for clients
that show more than the message. Arguments too many to show whole are never put to the user:
the call is refused rather than asked (or handed a token: a model could send many arguments on
purpose to be given the token its user would not have been asked for).

Tokens are sealed with the endpoint's secret (server/sealing/secret.py) for what they were issued for:
the caller, the tool, a digest of the arguments and a kind, with an expiry and the issuing
process; the `Store` keeps each under a time to live, so it runs once. The caller is the
channel's `owner` (the principal, else the credentials, else the client's address), in both eras
and never the session: a token already binds caller, tool and arguments, and clients that open a
session per call (the MCP Inspector CLI, langchain-mcp-adapters' default `get_tools()`) retry in
a new one. The store's key is a digest of the caller and the token's nonce, and the seal is bound
to the caller, so another caller's attempt finds nothing and cannot burn the token. A kind keeps
the paths apart: the token behind a stateless question travels in the requestState, which is
signed but readable, so it only counts with the user's answer, never as a `confirmationToken`. A
token runs one call (the store marks it used atomically); a declined question burns its token.
The store is bounded per caller and in all; a dropped token becomes unusable, never replayable.

Where processes share a secret but each keeps its own memory, a token can reach a process that
did not issue it and cannot know whether it was used: a `confirmationToken` is then refused
with a sentence naming `store=`, and a stateless question's token (its retry may reach any
process, and the stateless revision must work there) runs once in each process, with a WARNING
naming `store=` (`TokenStore._redeem_elsewhere`).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from fastapi_mcp_routes.options import DEFAULT_CONFIRMATION_TTL_S
from fastapi_mcp_routes.server.call import QUESTION_KEY, STATE_KEY, InputRequest, ToolCall
from fastapi_mcp_routes.server.confirmation.summary import MAX_SUMMARY, shorten, summarize
from fastapi_mcp_routes.server.deployment import Deployment
from fastapi_mcp_routes.server.sealing.secret import INSTANCE_BYTES
from fastapi_mcp_routes.store.base import USED, Holder, StoreFull, TokenLedger, Trust
from fastapi_mcp_routes.tools.confirmation import PENDING_META_KEY, TOKEN_ARGUMENT
from fastapi_mcp_routes.wire.constants import RESERVED_KEY_PREFIX
from fastapi_mcp_routes.wire.errors import ToolContextError
from fastapi_mcp_routes.wire.json import dumps

# A person answering a stateless question has as long as its requestState lives.
QUESTION_TTL_S: Final = 600.0
# Where an elicitation carries the whole plan (method, path, arguments), beside its message.
PLAN_META_KEY: Final = RESERVED_KEY_PREFIX + "plan"
# Characters of the path shown in a question: its values are arguments, shown with the others.
_PATH_CHARS: Final = 120
_NO_SCHEMA: Final = {"type": "object", "properties": {}}
# What every confirmation question needs of the client, whatever it says.
_CONFIRMATION: Final = InputRequest.elicitation("", _NO_SCHEMA)
_NOT_VALID: Final = "This confirmation is not valid: it has expired, or was not issued to this caller here."

Kind = Literal["model", "question", "confirmed"]
Outcome = Literal["confirmation_required", "not_confirmed"]


class Refused(Exception):
    """A token that cannot confirm this call; the message says why, for the model."""


class TokenStore:
    """Confirmation tokens: sealed with the endpoint's secret for one caller, tool, arguments
    and kind (any process can read them), and kept in the `Store` (which makes each run once)."""

    def __init__(
        self,
        deployment: Deployment,
        *,
        capacity: int,
        per_caller: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if capacity < 1 or per_caller < 1:
            raise ValueError(f"token store bounds must be positive, got {capacity!r} and {per_caller!r}")
        self._deployment = deployment
        self._store: TokenLedger = deployment.store
        self._secret = deployment.secret
        self._bounds = (per_caller, capacity)
        self._clock = clock

    async def issue(self, caller: bytes, holder: Holder, tool: str, digest: str, kind: Kind, expires: float) -> str:
        """A new token; the caller's oldest goes past its own bound, and past the total the
        oldest of the lowest trust; `StoreFull` when all are trusted more than this caller."""
        nonce = secrets.token_bytes(_NONCE_BYTES)
        payload = self._secret.instance + nonce + int(expires).to_bytes(8, "big") + _call_digest(tool, digest)
        ttl_s = expires - self._clock()
        # Hashed: the store holds no credential, only what tells callers apart.
        await self._store.put_token(
            _key(caller, nonce), _value(kind, tool, digest), ttl_s, _holder(holder), self._bounds
        )
        return self._secret.seal(_PURPOSE, payload, _owner(caller) + kind.encode())

    async def redeem(
        self, token: object, caller: bytes, tool: str, digest: str, kind: Kind, holder: Holder | None = None
    ) -> None:
        """Use a token for this call; `Refused` says why it cannot be used.

        A token of another caller or another kind is answered like one never issued, so a
        leaked token tells its holder nothing. A token offered for another tool or other
        arguments is refused and stays good for its own call."""
        sealed = self._open(token, caller, kind)
        if sealed is None:
            raise Refused(_NOT_VALID)
        instance, nonce, call = sealed
        found = await self._store.use_token(_key(caller, nonce), _value(kind, tool, digest))
        if found is None:
            await self._redeem_elsewhere(instance, nonce, call, _Call(caller, tool, digest, kind, holder))
            return
        if found == USED:
            raise Refused(_USED)
        _, found_tool, _ = found.split(b"\x00", 2)
        if found_tool != tool.encode():
            raise Refused(_OTHER_TOOL)
        if found != _value(kind, tool, digest):
            raise Refused(_OTHER_ARGUMENTS)

    async def _redeem_elsewhere(self, instance: bytes, nonce: bytes, digests: bytes, call: _Call) -> None:
        """A sealed token the store does not hold: expired or pushed out, unless another
        process issued it and keeps it in its own memory. Then a token the user confirmed (a
        stateless question, whose retry may reach any process) runs once in each process; a
        token the model holds is refused, as its single use cannot be checked here."""
        if self._store.shared or instance == self._secret.instance:
            raise Refused(_NOT_VALID)
        expected = _call_digest(call.tool, call.digest)
        if digests[:_TOOL_DIGEST] != expected[:_TOOL_DIGEST]:
            raise Refused(_OTHER_TOOL)
        if digests != expected:
            raise Refused(_OTHER_ARGUMENTS)
        if call.kind == "model":
            raise Refused(self._deployment.refusal("a confirmation token redeemed in another process than its own"))
        self._deployment.needs_store("the single use of a confirmed requestState in every process")
        if not await self._store.adopt_token(_key(call.caller, nonce), QUESTION_TTL_S, call.held, self._bounds):
            raise Refused(_USED)

    async def revoke(self, token: object, caller: bytes, kind: Kind = "question", holder: Holder | None = None) -> None:
        sealed = self._open(token, caller, kind)
        if sealed is None:
            return
        instance, nonce, _ = sealed
        key = _key(caller, nonce)
        if self._store.shared or instance == self._secret.instance:
            await self._store.revoke_token(key)
        else:  # another process's: used here from now on, so a declined question stays declined
            await self._store.adopt_token(key, QUESTION_TTL_S, _Call(caller, "", "", kind, holder).held, self._bounds)

    def _open(self, token: object, caller: bytes, kind: Kind) -> tuple[bytes, bytes, bytes] | None:
        """A live token's issuing process, nonce and call digest; `None` for any other."""
        payload = self._secret.open(_PURPOSE, token, _owner(caller) + kind.encode())
        if payload is None or len(payload) != _PAYLOAD_BYTES:
            return None
        instance, rest = payload[:INSTANCE_BYTES], payload[INSTANCE_BYTES:]
        nonce, expires, call = rest[:_NONCE_BYTES], rest[_NONCE_BYTES : _NONCE_BYTES + 8], rest[_NONCE_BYTES + 8 :]
        if int.from_bytes(expires, "big") < self._clock():
            return None
        return instance, nonce, call


@dataclass(frozen=True, slots=True)
class _Call:
    """The call a token is offered for."""

    caller: bytes
    tool: str
    digest: str
    kind: Kind
    holder: Holder | None

    @property
    def held(self) -> Holder:
        """Whom a token kept for this call counts against (hashed, as every token's owner)."""
        return _holder(self.holder or Holder(self.caller, Trust.ANONYMOUS))


_PURPOSE: Final = "confirmation token"
_NONCE_BYTES: Final = 12
_TOOL_DIGEST: Final = 4  # bytes of the tool's hash in a token, then 6 of its arguments'
_PAYLOAD_BYTES: Final = INSTANCE_BYTES + _NONCE_BYTES + 8 + _TOOL_DIGEST + 6
_USED: Final = "This confirmation was already used; each one runs one call."
_OTHER_TOOL: Final = "This confirmation was issued for another tool."
_OTHER_ARGUMENTS: Final = "This confirmation was issued for other arguments; the arguments must be the same."


def _call_digest(tool: str, digest: str) -> bytes:
    """Which call a token confirms, in short: enough to tell another tool or other arguments."""
    return hashlib.sha256(tool.encode()).digest()[:_TOOL_DIGEST] + hashlib.sha256(digest.encode()).digest()[:6]


def _holder(holder: Holder) -> Holder:
    return Holder(_owner(holder.owner), holder.trust)


def _owner(caller: bytes) -> bytes:
    return hashlib.sha256(caller).digest()


def _key(caller: bytes, nonce: bytes) -> str:
    return "token/" + hashlib.sha256(_owner(caller) + nonce).hexdigest()


def _value(kind: Kind, tool: str, digest: str) -> bytes:
    return b"\x00".join((kind.encode(), tool.encode(), digest.encode()))


@dataclass(frozen=True, slots=True)
class Held:
    """A gated call that does not run (now): what to answer, and how the audit names it."""

    result: dict[str, Any]
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class Confirmed:
    """A confirmed call; `expires` bounds the confirmation's life across MRTR rounds."""

    expires: float


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
    offered: Offered
    call: ToolCall

    @property
    def caller(self) -> bytes:
        return self.call.channel.owner

    @property
    def holder(self) -> Holder:
        return self.call.channel.holder


class ConfirmationGate:
    """Decides, for each call of a gated tool, whether it runs."""

    def __init__(
        self, *, tokens: TokenStore, ttl_s: float = DEFAULT_CONFIRMATION_TTL_S, clock: Callable[[], float] = time.time
    ):
        self._ttl_s = ttl_s
        self._clock = clock
        self._tokens = tokens

    async def check(self, gated: GatedCall) -> Confirmed | Held:
        """Confirmed, or held with an answer; a question answered in a later request stops
        the call (`ToolCall.stop`) until then."""
        try:
            return await self._check(gated)
        except StoreFull:
            busy = "the server holds as many confirmations as it may (Limits.max_tokens); try again later."
            return Held(_refusal(busy), "not_confirmed")

    async def _check(self, gated: GatedCall) -> Confirmed | Held:
        if isinstance(gated.offered.state, Mapping):
            try:
                return await self._later_round(gated, gated.offered.state)
            except Refused as refused:
                return Held(_refusal(f"{refused} Call the tool again to be asked again."), "not_confirmed")
        if gated.offered.token is not None:
            try:
                await self._tokens.redeem(
                    gated.offered.token, gated.caller, gated.tool, gated.digest, "model", gated.holder
                )
            except Refused as refused:
                retry = f"Call the tool again without {TOKEN_ARGUMENT} (or with it empty) to get a new plan and token."
                return Held(_refusal(f"{refused} {retry}"), "not_confirmed")
            return Confirmed(self._clock() + self._ttl_s)
        if gated.call.channel.cannot_ask(_CONFIRMATION) is None:
            try:
                ask = question(gated)
            except Refused as refused:
                return Held(_refusal(str(refused)), "not_confirmed")
            return await self._ask_user(gated, ask)
        expires = self._clock() + self._ttl_s
        token = await self._tokens.issue(gated.caller, gated.holder, gated.tool, gated.digest, "model", expires)
        return Held(pending_result(gated, token, self._ttl_s), "confirmation_required")

    async def carried(self, gated: GatedCall, confirmed: Confirmed) -> dict[str, Any]:
        """What keeps a confirmed call confirmed while its route asks questions of its own in
        later rounds: a new token, expiring when the confirmation does."""
        token = await self._tokens.issue(
            gated.caller, gated.holder, gated.tool, gated.digest, "confirmed", confirmed.expires
        )
        return {STATE_KEY: {"token": token, "kind": "confirmed", "expires": confirmed.expires}}

    async def _ask_user(self, gated: GatedCall, ask: InputRequest) -> Confirmed | Held:
        expires = self._clock() + max(self._ttl_s, QUESTION_TTL_S)
        token = await self._tokens.issue(gated.caller, gated.holder, gated.tool, gated.digest, "question", expires)
        state = {"token": token, "kind": "question", "expires": expires}
        try:
            answers = await gated.call.ask({QUESTION_KEY: ask}, {STATE_KEY: state})
        except ToolContextError as exc:
            await self._tokens.revoke(token, gated.caller, "question", gated.holder)
            return Held(_refusal(f"the call was not confirmed: {exc}."), "not_confirmed")
        return await self._answered(gated, state, answers[QUESTION_KEY])

    async def _later_round(self, gated: GatedCall, state: Mapping[str, Any]) -> Confirmed | Held:
        if state.get("kind") == "confirmed":
            await self._tokens.redeem(
                state.get("token"), gated.caller, gated.tool, gated.digest, "confirmed", gated.holder
            )
            return Confirmed(_expiry(state))
        answer = gated.offered.answer
        if answer is None:  # retried without an answer: the same question again
            answer = (await gated.call.ask({QUESTION_KEY: question(gated)}, {STATE_KEY: dict(state)}))[QUESTION_KEY]
        return await self._answered(gated, state, answer)

    async def _answered(self, gated: GatedCall, state: Mapping[str, Any], answer: object) -> Confirmed | Held:
        token = state.get("token")
        if not accepted(answer):
            # The user said no: the same state cannot say yes later.
            await self._tokens.revoke(token, gated.caller, "question", gated.holder)
            return Held(_refusal(_no(answer)), "not_confirmed")
        await self._tokens.redeem(token, gated.caller, gated.tool, gated.digest, "question", gated.holder)
        return Confirmed(_expiry(state))


def _expiry(state: Mapping[str, Any]) -> float:
    expires = state.get("expires")  # sealed with the state, so the client cannot change it
    if isinstance(expires, bool) or not isinstance(expires, (int, float)):
        raise Refused(_NOT_VALID)
    return float(expires)


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
    # One block, what to do first: clients that raise on `isError` keep only the first block's
    # text (FastMCP's ToolError), and a model must still find the token in it. The plan follows
    # as JSON on the last line. Not the tool's structured result, so the tool's outputSchema
    # stays the route's own.
    text = f"{how}\n{dumps(pending).decode()}"
    return {"content": [{"type": "text", "text": text}], "isError": True, "_meta": {PENDING_META_KEY: pending}}


def question(gated: GatedCall) -> InputRequest:
    """The elicitation that asks the user to confirm: accept runs the call. Its message names
    every argument; `Refused` when they cannot all be shown."""
    summary = summarize(gated.arguments)
    if summary is None:
        raise Refused(
            f"the call's {len(gated.arguments)} arguments cannot all be shown to the user in one question "
            f"(at most {MAX_SUMMARY} characters, however briefly each is shown), and a call is only run "
            "once its user has seen every argument; send fewer arguments."
        )
    message = f"Allow {gated.tool} to run {gated.method} {shorten(gated.path, _PATH_CHARS)} with {summary}?"
    return InputRequest.elicitation(message, _NO_SCHEMA, meta={PLAN_META_KEY: plan(gated)})


def accepted(answer: object) -> bool:
    return isinstance(answer, Mapping) and answer.get("action") == "accept"


def _no(answer: object) -> str:
    action = answer.get("action") if isinstance(answer, Mapping) else None
    return "the user cancelled this call." if action == "cancel" else "the user declined this call."


def _refusal(reason: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"Not run: {reason}"}], "isError": True}
