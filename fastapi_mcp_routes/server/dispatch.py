"""MCP methods: what each message means, independent of HTTP and of session bookkeeping.

The transport hands over a classified message and a `CallContext` (the caller, the session's
protocol state if there is one, and where messages about a request go); the dispatcher answers
with a result or raises a typed `McpError`. Opening, finding and ending sessions stays in the
transport, so the session era and the stateless revision share this one dispatcher.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import anyio
from starlette.types import ASGIApp

from fastapi_mcp_routes.server.audit import Outcome, ToolCallEvent, arguments_digest, log_tool_call, report
from fastapi_mcp_routes.server.confirm import (
    QUESTION_KEY,
    STATE_KEY,
    ConfirmationAsked,
    ConfirmationGate,
    Confirmed,
    GatedCall,
    Held,
    Offered,
    is_reserved,
)
from fastapi_mcp_routes.server.context import (
    CALL_SCOPE_KEY,
    CANCELLED,
    LOG_LEVELS,
    Emit,
    InputRequired,
    StatelessInput,
    ToolCall,
    ToolContextError,
)
from fastapi_mcp_routes.server.envelope import MODERN_VERSIONS, Envelope, ResultShaper, check_param_headers
from fastapi_mcp_routes.server.request_state import Binding, RequestStateSealer, arguments_sha256
from fastapi_mcp_routes.server.sessions import Session
from fastapi_mcp_routes.tools.confirmation import TOKEN_ARGUMENT
from fastapi_mcp_routes.tools.invoke import Caller, invoke, planned_path
from fastapi_mcp_routes.tools.registry import Access, Tool, ToolRegistry, decode_cursor
from fastapi_mcp_routes.tools.results import crash_result, error_result, tool_result
from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.errors import (
    CallCancelled,
    InvalidParams,
    InvalidRequest,
    McpError,
    MethodNotFound,
    ToolError,
)
from fastapi_mcp_routes.wire.json import RawJSON
from fastapi_mcp_routes.wire.jsonrpc import Reply, Request, RequestId, is_request_id, truncate

logger = logging.getLogger("fastapi_mcp_routes")
Result = Mapping[str, Any] | RawJSON
TOOLS_LIST_CHANGED: Final = "notifications/tools/list_changed"
_Handler = Callable[[Request, "CallContext"], Awaitable[Result]]
_Ran = tuple[Result, Outcome, int | None]  # a call's result, how it went, the route's HTTP status


@dataclass(frozen=True, slots=True)
class ServerIdentity:
    name: str
    version: str
    instructions: str | None


@dataclass(slots=True)
class CallContext:
    """What a method handler may know about a message besides its params (one per POST; not
    frozen, which keeps its construction cheap on every request)."""

    protocol_version: str
    caller: Caller
    session: Session | None = None  # the session's protocol state, when there is a session
    emit: Emit | None = None  # sends a message on the request's own response stream
    envelope: Envelope | None = None  # a 2026-07-28 request's own version and capabilities
    # Who the caller is (the principal, else its credential headers, canonical): what a
    # requestState and a confirmation token are bound to.
    credentials: bytes = b""
    # Without a session, the calls this request runs, so the transport can cancel them.
    cancel_scopes: dict[RequestId, anyio.CancelScope] | None = None
    principal: Any = None  # what the endpoint's `auth` dependency returned


class Dispatcher:
    """Answers MCP requests and takes MCP notifications and client replies."""

    def __init__(
        self,
        app: ASGIApp,
        registry: ToolRegistry,
        identity: ServerIdentity,
        sealer: RequestStateSealer,
        on_tool_call: Callable[[ToolCallEvent], Any] = log_tool_call,
        list_visible_only: bool = True,
        credential_headers: frozenset[bytes] = frozenset(),
        gate: ConfirmationGate | None = None,
    ) -> None:
        self._app = app
        self._gate = gate or ConfirmationGate()
        self._list_visible_only = list_visible_only
        self._credential_headers = credential_headers
        self._on_tool_call = on_tool_call
        self._registry = registry
        self._identity = identity
        self._sealer = sealer
        self._shaper = ResultShaper({"name": identity.name, "version": identity.version})
        self._methods: dict[str, _Handler] = {
            "initialize": self._initialize,
            "ping": self._ping,
            "logging/setLevel": self._set_log_level,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
        }
        # The stateless revision removed the handshake, ping and setLevel, and added discovery.
        self._stateless_methods: dict[str, _Handler] = {
            "server/discover": self._discover,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
        }

    async def request(self, request: Request, ctx: CallContext) -> Result:
        """Answer one request; raises `McpError` for protocol errors, `CallCancelled` when the
        client cancelled it."""
        if ctx.envelope is None:
            handler = self._methods.get(request.method)
            if handler is None:
                raise MethodNotFound(f"Method not found: {truncate(request.method)!r}.", truncate(request.method))
            return await handler(request, ctx)
        handler = self._stateless_methods.get(request.method)
        if handler is None:
            raise MethodNotFound(f"Method not found: {truncate(request.method)!r}.", request.method)
        result = await handler(request, ctx)
        # A list that depends on who asks must not be cached for anyone else.
        private = request.method == "tools/list" and self._list_visible_only and self._registry.cached().restricted
        return self._shaper.shape(request.method, result, "private" if private else "public")

    async def notification(self, method: str, params: Mapping[str, Any], ctx: CallContext) -> None:
        """Take one notification; unknown ones are ignored, as JSON-RPC asks."""
        if method == CANCELLED and ctx.session is not None:
            # Only this session's calls can be named: another session's ids are not in its map.
            # A malformed id is ignored, as invalid cancellations should be (spec, cancellation).
            request_id: Any = params.get("requestId")
            running = ctx.session.running.get(request_id) if is_request_id(request_id) else None
            if running is not None:
                running.cancel()

    def changes_since(self, generation: int | None) -> tuple[int, list[dict[str, Any]]]:
        """The tool list's generation now, and the notifications a listener that saw
        `generation` has missed (`None`: a new listener, which has missed nothing)."""
        now = self._registry.table().generation
        if generation is None or generation == now:
            return now, []
        return now, [{"jsonrpc": c.JSONRPC_VERSION, "method": TOOLS_LIST_CHANGED}]

    def reply(self, reply: Reply, ctx: CallContext) -> None:
        """Hand a client's reply to the call waiting for it; unknown ids are ignored."""
        if ctx.session is not None and (waiting := ctx.session.pending.get(reply.id)) is not None:
            waiting.resolve(reply.payload)

    async def _initialize(self, request: Request, ctx: CallContext) -> Result:
        params = request.params
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise InvalidParams("Invalid params: 'protocolVersion' must be a string.")
        for key in ("capabilities", "clientInfo"):
            if key in params and not isinstance(params[key], dict):
                raise InvalidParams(f"Invalid params: {key!r} must be an object.")
        result: dict[str, Any] = {
            "protocolVersion": negotiate_version(requested),
            "capabilities": {"logging": {}, "tools": {"listChanged": True}},
            "serverInfo": {"name": self._identity.name, "version": self._identity.version},
        }
        if self._identity.instructions:
            result["instructions"] = self._identity.instructions
        return result

    async def _discover(self, request: Request, ctx: CallContext) -> Result:
        result: dict[str, Any] = {
            "supportedVersions": list(MODERN_VERSIONS),
            # listChanged: subscriptions/listen delivers notifications/tools/list_changed.
            "capabilities": {"logging": {}, "tools": {"listChanged": True}},
        }
        if self._identity.instructions:
            result["instructions"] = self._identity.instructions
        return result

    async def _ping(self, request: Request, ctx: CallContext) -> Result:
        return {}

    async def _set_log_level(self, request: Request, ctx: CallContext) -> Result:
        level = request.params.get("level")
        if level not in LOG_LEVELS:
            raise InvalidParams(f"Invalid params: 'level' must be one of {', '.join(LOG_LEVELS)}.")
        if ctx.session is not None:
            ctx.session.log_level = level
        return {}

    async def _list_tools(self, request: Request, ctx: CallContext) -> Result:
        table = self._registry.table()
        cursor = request.params.get("cursor")
        if self._list_visible_only and table.restricted:
            if cursor is not None:
                raise InvalidParams("Invalid params: the cursor is not one this server issued.")
            return {"tools": [tool.definition for tool in table.by_name.values() if self._shows(tool.access, ctx)]}
        if cursor is None:
            return table.pages[0]
        index = decode_cursor(cursor, len(table.pages))
        if index is None:
            raise InvalidParams("Invalid params: the cursor is not one this server issued.")
        return table.pages[index]

    def _shows(self, access: Access | None, ctx: CallContext) -> bool:
        """Whether tools/list shows a tool to this caller, by side-effect-free checks only:
        visibility is never authorization (a hidden tool's guards still refuse its calls)."""
        if access is None:
            return True
        principal = ctx.principal
        if access.visible is not None:
            try:
                return bool(access.visible(principal))
            except Exception:
                logger.exception("a tool's visible predicate failed; the tool is not listed")
                return False
        if not access.needs_auth:
            return True
        if principal is None:
            # Without auth=, no principal is known: a caller that presents no credential at
            # all statically cannot use a tool that needs one.
            return any(name in self._credential_headers for name, _ in ctx.caller.headers)
        held = getattr(principal, "scopes", None)
        return held is None or access.scopes <= set(held)

    async def _call_tool(self, request: Request, ctx: CallContext) -> Result:
        params = request.params
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("Invalid params: 'name' must be a string.")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        elif not isinstance(arguments, dict):
            raise InvalidParams("Invalid params: 'arguments' must be an object.")
        tool = self._registry.lookup(name)
        if tool is None:
            raise InvalidParams(f"Unknown tool: {truncate(name)!r}.")
        token: object = None
        if tool.confirm and TOKEN_ARGUMENT in arguments:
            # Not the route's argument: everything else binds to the arguments without it.
            arguments = dict(arguments)
            token = arguments.pop(TOKEN_ARGUMENT)
        stateless = None
        offered = Offered(token)
        if ctx.envelope is not None:
            check_param_headers(tool.header_params, arguments, ctx.envelope.param_headers)
            answers, state, answer = self._answers(params, ctx, name, arguments)
            offered = Offered(token, state, answer)
            envelope = ctx.envelope
            stateless = StatelessInput(envelope.capabilities, envelope.log_level, answers, envelope.client_info)
        call = ToolCall(
            request_id=request.id,
            progress_token=_progress_token(params),
            session=ctx.session,
            emit=ctx.emit,
            cancel_scope=anyio.CancelScope(),
            stateless=stateless,
            principal=ctx.principal,
        )
        if ctx.session is not None:
            running = ctx.session.running
        else:  # (an empty map is still the request's own: `or` would replace it)
            running = ctx.cancel_scopes if ctx.cancel_scopes is not None else {}
        if request.id in running:
            # Ids of requests in flight must be unique, or a cancellation could not name one.
            raise InvalidRequest(f"Invalid Request: a request with id {truncate(request.id)!r} is still running.")
        running[request.id] = call.cancel_scope
        started = time.perf_counter()
        outcome: Outcome = "cancelled"
        status: int | None = None
        try:
            result, outcome, status = await self._run(tool, arguments, offered, call, ctx)
            return result
        except McpError:
            outcome = "refused"
            raise
        finally:
            running.pop(request.id, None)
            if self._on_tool_call is not log_tool_call or logger.isEnabledFor(logging.INFO):
                # The default hook only logs: with INFO off, the digest is not worth computing.
                duration_ms = (time.perf_counter() - started) * 1000
                digest = arguments_digest(arguments)
                event = ToolCallEvent(tool.name, ctx.principal, digest, outcome, status, duration_ms, request.id)
                await report(self._on_tool_call, event)

    async def _run(
        self,
        tool: Tool,
        arguments: dict[str, Any],
        offered: Offered,
        call: ToolCall,
        ctx: CallContext,
    ) -> _Ran:
        """Run the route for one call, once confirmed where the tool asks for confirmation."""
        gated: GatedCall | None = None
        confirmed: Confirmed | None = None
        try:
            with call.cancel_scope:
                if tool.confirm:
                    gated = self._gated(tool, arguments, offered, call, ctx)
                    verdict = await self._gate.check(gated)
                    if isinstance(verdict, Held):
                        return verdict.result, verdict.outcome, None
                    confirmed = verdict
                response = await invoke(self._app, tool, arguments, ctx.caller, {CALL_SCOPE_KEY: call})
        except InputRequired as needed:
            answers = dict(needed.answers)
            if gated is not None and confirmed is not None:
                # The route asks something too: the retry runs it again from the start, and
                # must not need another confirmation for the call the user already allowed.
                answers[STATE_KEY] = self._gate.carried(gated, confirmed)
            binding = _binding(self._sealer, ctx, tool.name, arguments)
            asked = {
                "resultType": "input_required",
                "inputRequests": dict(needed.requests),
                "requestState": self._sealer.seal(binding, answers),
            }
            outcome: Outcome = "confirmation_required" if isinstance(needed, ConfirmationAsked) else "input_required"
            return asked, outcome, None
        except ToolError as exc:
            return error_result(str(exc)), "invalid_arguments", None
        except ToolContextError as exc:
            # Our own message (no capability, no answer in time): safe and useful to the model.
            return error_result(f"The tool could not finish: {exc}."), "error", None
        except McpError:
            raise  # a protocol error the route's context raised (a missing client capability)
        except Exception:
            return crash_result(tool.name), "crashed", None
        if call.cancel_scope.cancelled_caught:
            raise CallCancelled(call.request_id)
        result = tool_result(tool, response)
        return result, "error" if result.get("isError") else "ok", response.status

    def _gated(
        self, tool: Tool, arguments: dict[str, Any], offered: Offered, call: ToolCall, ctx: CallContext
    ) -> GatedCall:
        """The call as the confirmation gate sees it; `ToolError` for arguments that cannot make
        a request at all, before anyone is asked to confirm it."""
        # In a session, the session too: callers without credentials are then told apart.
        caller = ctx.credentials + (b"\x00session\x00" + ctx.session.id.encode() if ctx.session else b"")
        path = planned_path(tool, arguments)
        digest = arguments_sha256(arguments)
        return GatedCall(tool.name, tool.method, path, arguments, digest, caller, offered, call)

    def _answers(
        self, params: Mapping[str, Any], ctx: CallContext, tool: str, arguments: Mapping[str, Any]
    ) -> tuple[dict[str, Any], object, object]:
        """The client's answers so far: those sealed in requestState (which nothing the
        client sends can replace), plus this request's `inputResponses`; and, apart, the
        sealed confirmation state and this round's answer to the confirmation question.

        Answers without a state are taken as the spec allows (a client may answer up front,
        and stateless servers need no state); keys the route never asks are simply unused.
        Keys the confirmation gate owns are never taken from the client, so an answer sent
        before the question was asked cannot be sealed as if the user had given it."""
        sealed: dict[str, Any] = {}
        if "requestState" in params:  # the binding (a digest and an HMAC) only when there is one
            sealed = self._sealer.open(params["requestState"], _binding(self._sealer, ctx, tool, arguments))
        responses = params.get("inputResponses")
        responses = responses if isinstance(responses, dict) else {}
        answers = {key: value for key, value in sealed.items() if not is_reserved(key)}
        for key, response in responses.items():
            if not is_reserved(key):
                answers.setdefault(key, response)
        return answers, sealed.get(STATE_KEY), responses.get(QUESTION_KEY)


def _binding(sealer: RequestStateSealer, ctx: CallContext, tool: str, arguments: Mapping[str, Any]) -> Binding:
    """What a requestState is bound to: the caller's credentials, the tool, the arguments."""
    return sealer.binding(ctx.credentials, tool, arguments)


def _progress_token(params: Mapping[str, Any]) -> str | int | None:
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


def negotiate_version(requested: str) -> str:
    """Echo a supported session-era version, else offer the newest."""
    return requested if requested in c.SESSION_ERA_VERSIONS else c.LATEST_SESSION_VERSION
