"""What a route can do while it runs as a tool: `ToolContext`, and the call behind it.

A route asks for `ctx: Annotated[ToolContext, Depends()]`. Over plain REST the same route runs
unchanged and the context is inert: progress and log calls do nothing, and asking the client
something raises `ToolContextError` saying why. During a tool call, the context reaches the
call's own response stream (spec 2025-11-25, basic/transports: messages about a request travel
on that request's stream).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import anyio
from starlette.requests import Request

from fastapi_mcp_routes.server.sessions import PendingReply, Session
from fastapi_mcp_routes.wire.constants import ELICITATION_SINCE, JSONRPC_VERSION, RESERVED_KEY_PREFIX
from fastapi_mcp_routes.wire.errors import MissingClientCapability

# Our own ASGI scope key: the tool call an in-process request belongs to.
CALL_SCOPE_KEY: Final = "fastapi_mcp_routes.tool_call"
# RFC 5424 severities, least severe first (spec 2025-11-25, server/utilities/logging).
LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_SEVERITY: Final = {level: rank for rank, level in enumerate(LOG_LEVELS)}
# How long a route waits for the client to answer an elicitation or sampling request.
CLIENT_REQUEST_TIMEOUT_S: Final = 300.0

# Our ids for server-to-client requests, apart from any id the client uses.
_SERVER_ID_PREFIX: Final = "s"
CANCELLED: Final = "notifications/cancelled"

Emit = Callable[[Mapping[str, Any]], Awaitable[None]]


class InputRequired(BaseException):
    """A 2026-07-28 call asked the client something it has not answered yet: the call ends
    with an `input_required` result, and the client retries with the answer.

    A BaseException, like cancellation, so a route's own `except Exception` around a question
    cannot swallow it: the same route code must work in both eras."""

    def __init__(self, requests: Mapping[str, Mapping[str, Any]], answers: Mapping[str, Any]) -> None:
        super().__init__(f"input {', '.join(map(repr, requests))} is required")
        self.requests = requests  # key -> {method, params}, as inputRequests carries them
        self.answers = answers  # everything answered so far, to seal into the next requestState


class ToolContextError(RuntimeError):
    """A `ToolContext` request the current call cannot make (no tool call, no capability...)."""


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
    def elicitation(cls, message: str, schema: Mapping[str, Any]) -> InputRequest:
        """Ask the user for input matching a flat object `schema` (form mode)."""
        return cls("elicitation/create", {"message": message, "requestedSchema": dict(schema)}, "elicitation", "form")

    @classmethod
    def sampling(cls, messages: Sequence[Mapping[str, Any]], max_tokens: int, **extra: Any) -> InputRequest:
        """Ask the client's model for a completion; `extra` are further request params."""
        params = {"messages": [dict(m) for m in messages], "maxTokens": max_tokens, **extra}
        return cls("sampling/createMessage", params, "sampling")

    @classmethod
    def roots(cls) -> InputRequest:
        """Ask the client which roots (directories, repositories) it exposes."""
        return cls("roots/list", {}, "roots")


@dataclass(frozen=True, slots=True)
class ElicitationResult:
    """The client's answer to `ToolContext.elicit`: `accept`, `decline` or `cancel`."""

    action: str
    content: dict[str, Any] | None


class ToolCall:
    """One running `tools/call`: where its messages go and what it may ask of the client."""

    def __init__(
        self,
        *,
        request_id: str | int,
        progress_token: str | int | None,
        session: Session | None,
        emit: Emit | None,
        cancel_scope: anyio.CancelScope,
        stateless: StatelessInput | None = None,
        principal: Any = None,
    ) -> None:
        self.request_id = request_id
        self.principal = principal
        self.stateless = stateless
        self.progress_token = progress_token
        self.session = session
        self.cancel_scope = cancel_scope
        self._emit = emit
        self._last_progress: float | None = None

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        if self._emit is not None:
            await self._emit({"jsonrpc": JSONRPC_VERSION, "method": method, "params": params})

    async def report_progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self.progress_token is None:
            return  # the client did not ask for progress
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
        if level not in _SEVERITY:
            raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
        if self.stateless is not None:
            # 2026-07-28: a request that named no log level gets no log messages at all.
            threshold = self.stateless.log_level
            if threshold is None:
                return
        else:
            threshold = self.session.log_level if self.session is not None else None
        if threshold is not None and _SEVERITY[level] < _SEVERITY[threshold]:
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self.notify("notifications/message", params)

    async def ask(self, requests: Mapping[str, InputRequest]) -> dict[str, Mapping[str, Any]]:
        """The client's answers to these questions: in the stateless revision all at once (or
        `InputRequired`), in a session one server-to-client request after the other."""
        reserved = sorted(key for key in requests if key.startswith(RESERVED_KEY_PREFIX))
        if reserved:
            raise ValueError(
                f"input request keys starting {RESERVED_KEY_PREFIX!r} are the library's own, got {reserved!r}"
            )
        if self.stateless is not None:
            return self.stateless.answer_or_ask(requests)
        return {key: await self.ask_client(request) for key, request in requests.items()}

    def next_key(self, method: str) -> str:
        return self.stateless.next_key(method) if self.stateless is not None else method

    def cannot_ask(self, request: InputRequest) -> str | None:
        """Why this session-era call cannot send the client `request`, or `None` if it can."""
        if self.session is None or self._emit is None:
            return f"{request.method} needs a session and a response stream the client reads as SSE"
        if request.capability == "elicitation" and self.session.protocol_version < ELICITATION_SINCE:
            return f"elicitation/create is not part of protocol {self.session.protocol_version}"
        if not declares(self.session.client_capabilities or {}, request):
            wanted = f"{request.capability!r} capability" + (f" with {request.mode!r} mode" if request.mode else "")
            return f"the client did not declare the {wanted}, so it cannot answer {request.method}"
        return None

    async def ask_client(self, request: InputRequest) -> Mapping[str, Any]:
        """Send a request to the client on this call's stream and wait for its reply."""
        method, params = request.method, request.params
        session, emit = self.session, self._emit
        reason = self.cannot_ask(request)
        if reason is not None or session is None or emit is None:
            raise ToolContextError(reason or f"{method} needs a session")
        request_id = f"{_SERVER_ID_PREFIX}{session.next_request_id}"
        session.next_request_id += 1
        waiting = session.pending[request_id] = PendingReply()
        try:
            await emit({"jsonrpc": JSONRPC_VERSION, "id": request_id, "method": method, "params": params})
            with anyio.fail_after(CLIENT_REQUEST_TIMEOUT_S):
                reply = await waiting.wait()
        except (TimeoutError, anyio.get_cancelled_exc_class()) as stopped:
            # Tell the client to stop asking its user (spec, basic/lifecycle "Timeouts").
            with anyio.CancelScope(shield=True):
                await self.notify(CANCELLED, {"requestId": request_id, "reason": "the tool call ended"})
            if isinstance(stopped, TimeoutError):
                timeout = f"{CLIENT_REQUEST_TIMEOUT_S:.0f} s"
                raise ToolContextError(f"the client did not answer {method} within {timeout}") from None
            raise
        finally:
            session.pending.pop(request_id, None)
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], Mapping) else {}
            raise ToolContextError(f"the client refused {method}: {error.get('message', 'no reason given')}")
        result = reply.get("result")
        return result if isinstance(result, Mapping) else {}


class StatelessInput:
    """A 2026-07-28 call's side of Multi Round-Trip Requests: the answers the client has
    given so far, and the next question when one is missing."""

    def __init__(
        self,
        capabilities: Mapping[str, Any],
        log_level: str | None,
        answers: Mapping[str, Any],
        client_info: Mapping[str, Any] | None = None,
    ) -> None:
        self.capabilities = capabilities
        self.client_info = dict(client_info) if client_info is not None else None
        self.log_level = log_level
        self.answers = dict(answers)
        self._asked = 0

    def next_key(self, method: str) -> str:
        # The route runs again from the start on every retry, so its questions come in the
        # same order and the n-th question always gets the same key.
        self._asked += 1
        return f"{method.split('/')[0]}-{self._asked}"

    def answer_or_ask(self, requests: Mapping[str, InputRequest]) -> dict[str, Mapping[str, Any]]:
        """The answers to all these questions, or `InputRequired` naming the unanswered ones."""
        for request in requests.values():
            if not declares(self.capabilities, request):
                mode = request.mode
                required: dict[str, Any] = {request.capability: {mode: {}} if mode else {}}
                raise MissingClientCapability(
                    f"This tool needs the client's {request.capability} capability.", {"requiredCapabilities": required}
                )
        missing = {
            key: {"method": request.method, "params": dict(request.params)}
            for key, request in requests.items()
            if not isinstance(self.answers.get(key), Mapping)
        }
        if missing:
            raise InputRequired(missing, self.answers)
        return {key: self.answers[key] for key in requests}


def declares(capabilities: Mapping[str, Any], request: InputRequest) -> bool:
    """Whether a client with these capabilities can answer `request`. A request's `mode` is a
    sub-capability it needs; an empty capability object stands for the default mode (spec
    2025-11-25, client/elicitation: `{}` means form mode only)."""
    declared = capabilities.get(request.capability)
    mode = request.mode
    return isinstance(declared, dict) and (mode is None or not declared or mode in declared)


class ToolContext:
    """What a route can do when it runs as an MCP tool; inert over plain REST.

    Use it as a dependency: `ctx: Annotated[ToolContext, Depends()]`.
    """

    def __init__(self, request: Request) -> None:
        call = request.scope.get(CALL_SCOPE_KEY)
        self._call: ToolCall | None = call if isinstance(call, ToolCall) else None

    @property
    def is_tool_call(self) -> bool:
        """Whether the route runs as an MCP tool (else it serves a REST request)."""
        return self._call is not None

    @property
    def request_id(self) -> str | int | None:
        """The JSON-RPC id of the `tools/call` request."""
        return self._call.request_id if self._call else None

    @property
    def session_id(self) -> str | None:
        """The MCP session the call belongs to, when the endpoint uses sessions."""
        session = self._call.session if self._call else None
        return session.id if session else None

    @property
    def client_info(self) -> dict[str, Any] | None:
        """The client's `clientInfo`: from `initialize`, or from this request's envelope."""
        call = self._call
        if call is not None and call.stateless is not None:
            return call.stateless.client_info
        session = call.session if call else None
        return session.client_info if session else None

    @property
    def principal(self) -> Any:
        """What the endpoint's `auth` dependency returned for the caller (None without auth)."""
        return self._call.principal if self._call else None

    @property
    def cancelled(self) -> bool:
        """Whether the client cancelled the call; the route's next await raises as well."""
        return self._call is not None and self._call.cancel_scope.cancel_called

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send `notifications/progress` if the client asked for progress; values must increase."""
        if self._call is not None:
            await self._call.report_progress(progress, total, message)

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send `notifications/message` at an RFC 5424 level, honouring `logging/setLevel`."""
        if self._call is not None:
            await self._call.log(level, data, logger)

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """What the client declared it can do (the session's, or this request's envelope)."""
        call = self._call
        if call is None:
            return {}
        if call.stateless is not None:
            return dict(call.stateless.capabilities)
        return dict(call.session.client_capabilities or {}) if call.session is not None else {}

    async def ask(self, requests: Mapping[str, InputRequest]) -> dict[str, Mapping[str, Any]]:
        """Ask the client several things at once, by key; returns each raw answer by key.

        In the stateless revision the questions travel together in one `input_required`
        result and the route runs again with the answers; in a session they are asked one
        after the other on the call's stream."""
        return await self._require_call("input requests").ask(requests)

    async def elicit(self, message: str, schema: Mapping[str, Any], *, key: str | None = None) -> ElicitationResult:
        """Ask the user, through the client, for input matching a flat object `schema`.

        `key` names the question in a stateless `input_required` result (default: numbered)."""
        call = self._require_call("elicitation/create")
        key = key or call.next_key("elicitation/create")
        result = (await call.ask({key: InputRequest.elicitation(message, schema)}))[key]
        content = result.get("content")
        return ElicitationResult(str(result.get("action", "cancel")), content if isinstance(content, dict) else None)

    async def list_roots(self, *, key: str | None = None) -> list[dict[str, Any]]:
        """The roots the client exposes (`roots/list`)."""
        call = self._require_call("roots/list")
        key = key or call.next_key("roots/list")
        roots = (await call.ask({key: InputRequest.roots()}))[key].get("roots")
        return [dict(root) for root in roots if isinstance(root, Mapping)] if isinstance(roots, list) else []

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int,
        *,
        system_prompt: str | None = None,
        temperature: float | None = None,
        key: str | None = None,
        **extra: Any,
    ) -> Mapping[str, Any]:
        """Ask the client's model for a completion (`sampling/createMessage`); returns its result."""
        if system_prompt is not None:
            extra["systemPrompt"] = system_prompt
        if temperature is not None:
            extra["temperature"] = temperature
        call = self._require_call("sampling/createMessage")
        key = key or call.next_key("sampling/createMessage")
        return (await call.ask({key: InputRequest.sampling(messages, max_tokens, **extra)}))[key]

    def _require_call(self, method: str) -> ToolCall:
        if self._call is None:
            raise ToolContextError(f"{method} is only possible while the route runs as an MCP tool, not over REST")
        return self._call
