"""One running `tools/call`: where its messages go, what it may ask, and how it is stopped.

A call reaches its client through a `ClientChannel` (server/channel.py), so nothing here knows
which protocol era it serves. A call that cannot go on (a question the client answers in a
later request, a capability it lacks) is stopped the way a cancellation stops it: the reason
is kept on the call and its cancel scope is cancelled. No exception of ours travels back
through the user's app, where middleware built on task groups (`BaseHTTPMiddleware`) would
wrap it in an exception group and answer 500 (issue: "InputRequired through middleware").
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, NoReturn, Protocol

import anyio

from fastapi_mcp_routes.server.audit import Outcome
from fastapi_mcp_routes.store.base import Holder
from fastapi_mcp_routes.tools.invoke import Caller
from fastapi_mcp_routes.wire.challenge import CHALLENGE_META_KEY
from fastapi_mcp_routes.wire.constants import JSONRPC_VERSION, RESERVED_KEY_PREFIX
from fastapi_mcp_routes.wire.errors import MissingClientCapability, ToolContextError

# Our own ASGI scope key: the tool call an in-process request belongs to.
CALL_SCOPE_KEY: Final = "fastapi_mcp_routes.tool_call"
# RFC 5424 severities, least severe first (spec 2025-11-25, server/utilities/logging).
LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
SEVERITY: Final = {level: rank for rank, level in enumerate(LOG_LEVELS)}
# Keys of the confirmation question and of its sealed state. `ToolContext` refuses the prefix
# and the stateless channel drops it from a client's inputResponses, so only the server sets them.
QUESTION_KEY: Final = RESERVED_KEY_PREFIX + "confirm"
STATE_KEY: Final = RESERVED_KEY_PREFIX + "confirmation"

Emit = Callable[[Mapping[str, Any]], Awaitable[None]]


# The class `anyio.CancelScope()` made on the running event loop, and that loop (`_cancel_scope`).
_scope_class: tuple[asyncio.AbstractEventLoop, type[anyio.CancelScope]] | None = None


def _cancel_scope() -> anyio.CancelScope:
    """`anyio.CancelScope()`, made without anyio finding the event loop's library anew, as it
    does for every scope: that search cost a session tool call 1.4% of its CPU in process
    (`benchmarks/profile_tool_call.py`). The class anyio makes on a loop is kept with the loop;
    off asyncio (trio), or on another loop, anyio is asked."""
    global _scope_class
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return anyio.CancelScope()
    made = _scope_class
    if made is not None and made[0] is loop:
        return made[1]()
    scope = anyio.CancelScope()
    _scope_class = (loop, type(scope))
    return scope


def is_reserved(key: object) -> bool:
    return isinstance(key, str) and key.startswith(RESERVED_KEY_PREFIX)


def progress_token(params: Mapping[str, Any]) -> str | int | None:
    """The request's `_meta.progressToken`, when it asked for progress."""
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


class Ran(NamedTuple):
    """How a call ended: its result, how the audit names it, the route's HTTP status."""

    result: Mapping[str, Any]
    outcome: Outcome
    status: int | None = None


def refused_for_scope(ran: Ran) -> bool:
    """Whether the call's route refused its token for a missing scope: the result carries the
    step-up challenge, which only the library sets (a route's answer never sets `_meta`)."""
    if ran.status != 403:
        return False
    meta = ran.result.get("_meta")
    return isinstance(meta, Mapping) and CHALLENGE_META_KEY in meta


class InputRequired(Exception):
    """A call asked the client something it answers in a later request (2026-07-28 Multi
    Round-Trip Requests): the call ends with this `input_required` result."""

    def __init__(self, result: Mapping[str, Any]) -> None:
        super().__init__("the client's input is required")
        self.result = result


@dataclass(frozen=True, slots=True)
class InputRequest:
    """One question for the client: an elicitation, a sampling request, or a roots listing.

    `ToolContext.ask` sends several at once; in the stateless revision they travel together
    in one `input_required` result."""

    method: str
    params: Mapping[str, Any]
    capability: str
    mode: str | None = None

    @classmethod
    def elicitation(
        cls, message: str, schema: Mapping[str, Any], *, meta: Mapping[str, Any] | None = None
    ) -> InputRequest:
        """Ask the user for input matching a flat object `schema` (form mode); `meta` goes to
        the request's `_meta`, for clients that show more than the message."""
        params: dict[str, Any] = {"message": message, "requestedSchema": dict(schema)}
        if meta:
            params["_meta"] = dict(meta)
        return cls("elicitation/create", params, "elicitation", "form")

    @classmethod
    def sampling(cls, messages: Sequence[Mapping[str, Any]], max_tokens: int, **extra: Any) -> InputRequest:
        """Ask the client's model for a completion; `extra` are further request params."""
        params = {"messages": [dict(m) for m in messages], "maxTokens": max_tokens, **extra}
        return cls("sampling/createMessage", params, "sampling")

    @classmethod
    def roots(cls) -> InputRequest:
        """Ask the client which roots (directories, repositories) it exposes."""
        return cls("roots/list", {}, "roots")

    def as_wire(self) -> dict[str, Any]:
        """The question as `inputRequests` carries it."""
        return {"method": self.method, "params": dict(self.params)}


def declares(capabilities: Mapping[str, Any], request: InputRequest) -> bool:
    """Whether a client with these capabilities can answer `request`. A request's `mode` is a
    sub-capability it needs; an empty capability object stands for the default mode (spec
    2025-11-25, client/elicitation: `{}` means form mode only)."""
    declared = capabilities.get(request.capability)
    mode = request.mode
    return isinstance(declared, dict) and (mode is None or not declared or mode in declared)


def lacking(request: InputRequest) -> MissingClientCapability:
    """The -32021 a call meets when its client did not declare what `request` needs."""
    mode = request.mode
    required: dict[str, Any] = {request.capability: {mode: {}} if mode else {}}
    return MissingClientCapability(
        f"This tool needs the client's {request.capability} capability.", {"requiredCapabilities": required}
    )


class Channel(Protocol):
    """What a call needs of its client's channel (server/channel.py has the two eras')."""

    caller: Caller
    principal: Any

    @property
    def emit(self) -> Emit | None: ...

    @property
    def session_id(self) -> str | None: ...

    @property
    def client_info(self) -> Mapping[str, Any] | None: ...

    @property
    def client_capabilities(self) -> Mapping[str, Any]: ...

    @property
    def owner(self) -> bytes: ...

    @property
    def holder(self) -> Holder: ...

    def wants_log(self, level: str) -> bool: ...

    def hung_up(self) -> anyio.Event | None: ...

    def cannot_ask(self, request: InputRequest) -> str | None: ...

    async def ask(
        self, call: ToolCall, requests: Mapping[str, InputRequest], carry: Mapping[str, Any]
    ) -> dict[str, Mapping[str, Any]]: ...

    async def start_task(self, ttl_s: float | None) -> bool: ...


class Slot(Protocol):
    """A running call's slot, given back once its route ends."""

    def give_back(self) -> None: ...


class ToolCall:
    """One running `tools/call`."""

    def __init__(
        self,
        *,
        request_id: str | int,
        progress_token: str | int | None,
        channel: Channel,
        tool: str,
        arguments: Mapping[str, Any],
        answers: Mapping[str, Any],
    ) -> None:
        self.request_id = request_id
        self.tool = tool
        self.arguments = arguments
        self.progress_token = progress_token
        self.channel = channel
        self.answers = dict(answers)  # what the client already answered (earlier rounds)
        self.cancel_scope = _cancel_scope()
        self.stopped: BaseException | None = None  # why the call was stopped, when it was
        self.has_answered = False  # the route's response is whole (its background tasks may run on)
        # What a later round must be handed back besides the answers (a confirmed call's
        # standing confirmation), made only when a round ends with a question.
        self.carried: Callable[[], Awaitable[Mapping[str, Any]]] | None = None
        # Holds the call's running slot (server/call_slots.py); a call that outlives its request
        # (a task) gives it back when its route ends, not when the request does.
        self.slot: Slot | None = None
        self.outlives_request = False
        self.at_gate = False  # waiting at the confirmation gate: a question asked now is the gate's
        self._asked = 0
        self._last_progress: float | None = None

    @classmethod
    def of(
        cls,
        request_id: str | int,
        params: Mapping[str, Any],
        channel: Channel,
        tool: str,
        arguments: Mapping[str, Any],
        answers: Mapping[str, Any],
    ) -> ToolCall:
        """The call a request with these params makes (its progress token read from `_meta`)."""
        return cls(
            request_id=request_id,
            progress_token=progress_token(params),
            channel=channel,
            tool=tool,
            arguments=arguments,
            answers=answers,
        )

    @property
    def principal(self) -> Any:
        return self.channel.principal

    @property
    def last_progress(self) -> float | None:
        """The progress last reported on this call, if any: the next must be larger."""
        return self._last_progress

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        emit = self.channel.emit
        if emit is not None:
            await emit({"jsonrpc": JSONRPC_VERSION, "method": method, "params": params})

    async def report_progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self.progress_token is None:
            return  # the client did not ask for progress
        if not all(math.isfinite(number) for number in (progress, total) if number is not None):
            # JSON has no NaN or infinity (wire/json.py): said here, where the route can act on it.
            raise ValueError(f"progress and total must be finite numbers, got {progress!r} and {total!r}")
        if self._last_progress is not None and progress <= self._last_progress:
            raise ValueError(
                f"progress must increase with every report, got {progress!r} after {self._last_progress!r}"
            )
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        if level not in SEVERITY:
            raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
        if not self.channel.wants_log(level):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self.notify("notifications/message", params)

    def next_key(self, method: str) -> str:
        # A route runs again from the start on every round of a multi-round call, so its
        # questions come in the same order and the n-th question always gets the same key.
        self._asked += 1
        return f"{method.split('/')[0]}-{self._asked}"

    async def ask(
        self, requests: Mapping[str, InputRequest], carry: Mapping[str, Any] | None = None
    ) -> dict[str, Mapping[str, Any]]:
        """The client's answers to these questions, by key. `carry`: what the next round must
        be given back if the answers come in a later request (sealed with them)."""
        return await self.channel.ask(self, requests, carry or {})

    def answered(self) -> None:
        """The route's response is whole: from now on the call's result is that response."""
        self.has_answered = True

    async def stop(self, reason: BaseException) -> NoReturn:
        """End the call from inside it: the reason is kept, the call's scope is cancelled,
        and the pipeline answers for it once the route has unwound.

        Once the route has answered (a background task asks), the call is that answer: it is
        not stopped, and the one asking learns why with `ToolContextError`."""
        if self.has_answered:
            raise ToolContextError(
                "the route already answered this tool call; a question asked after the response cannot reach the client"
            )
        self.halt(reason)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    def halt(self, reason: BaseException) -> None:
        """End the call from outside the route (its response outgrew the cap): the reason is
        kept and the call's scope cancelled; the route unwinds as from a cancellation."""
        self.stopped = reason
        self.cancel_scope.cancel()
