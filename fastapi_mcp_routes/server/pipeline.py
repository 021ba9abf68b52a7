"""The tool-call pipeline: parse → URLs → gate → invoke → result, with the audit around it.

Each step is a function or a small object that can be tested alone; `ToolCallPipeline` only
strings them together. Protocol errors (an unknown tool, params of the wrong shape) are raised
as `McpError`; everything that goes wrong once the call has started is an `isError` result
(wire/failures.py), so the model can correct itself.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, NamedTuple

from fastapi import FastAPI

from fastapi_mcp_routes.options import DEFAULT_MAX_ARGUMENT_DEPTH, DEFAULT_MAX_RESPONSE_BYTES
from fastapi_mcp_routes.server.audit import ToolCallEvent, arguments_digest, log_tool_call, report
from fastapi_mcp_routes.server.budget import AnswerBudget, Holding
from fastapi_mcp_routes.server.call import CALL_SCOPE_KEY, InputRequired, Ran, ToolCall, refused_for_scope
from fastapi_mcp_routes.server.channel import CallInput, ClientChannel
from fastapi_mcp_routes.server.confirmation.gate import ConfirmationGate, Confirmed, GatedCall, Held, Offered
from fastapi_mcp_routes.server.confirmation.guards import refusal
from fastapi_mcp_routes.server.confirmation.validation import invalid
from fastapi_mcp_routes.server.running import Ended, Finished, run_call
from fastapi_mcp_routes.server.sealing.request_state import arguments_sha256
from fastapi_mcp_routes.server.tasks.runs import TaskRuns, needs_tasks
from fastapi_mcp_routes.server.threads import ThreadShares
from fastapi_mcp_routes.server.urls.policy import UrlPolicy
from fastapi_mcp_routes.telemetry.current import note_outcome, stream_sample, trace_ids
from fastapi_mcp_routes.telemetry.names import STREAM_FRAMES
from fastapi_mcp_routes.tools.confirmation import TOKEN_ARGUMENT
from fastapi_mcp_routes.tools.invoke import CapturedResponse, Hold, build_request, call_app, planned_path
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.tools.registry import ToolRegistry
from fastapi_mcp_routes.tools.results import tool_result
from fastapi_mcp_routes.tools.scopes import refused_scopes
from fastapi_mcp_routes.tools.streams import (
    STREAM_ARGUMENTS,
    Window,
    WindowBounds,
    WindowRead,
    describe,
    read_window,
    window_result,
)
from fastapi_mcp_routes.wire.challenge import scheme_of, with_challenge
from fastapi_mcp_routes.wire.constants import HEADER_AUTHORIZATION
from fastapi_mcp_routes.wire.errors import InsufficientScope, InvalidParams, McpError, ToolError
from fastapi_mcp_routes.wire.failures import tool_failure
from fastapi_mcp_routes.wire.jsonrpc import Request, truncate

logger = logging.getLogger("fastapi_mcp_routes")

# Runs the tool's route for one call: the app, through its ASGI interface (tools/invoke.py).
Invoke = Callable[[Tool, Mapping[str, Any], ToolCall], Awaitable[CapturedResponse]]


# Per-request values: named tuples, immutable and as cheap to build as a tuple.
class ParsedCall(NamedTuple):
    """A `tools/call` request, checked: the tool, the route's arguments, and the token."""

    tool: Tool
    arguments: Mapping[str, Any]
    token: object  # the `confirmationToken` argument of a gated tool, not the route's
    window: Mapping[str, Any] | None = None  # a streaming tool's `durationMs` and `maxFrames`


def parse_call(params: Mapping[str, Any], registry: ToolRegistry) -> ParsedCall:
    """Step 1: the tool and its arguments, or `InvalidParams`."""
    name = params.get("name")
    if not isinstance(name, str):
        raise InvalidParams("Invalid params: 'name' must be a string.")
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    elif not isinstance(arguments, dict):
        raise InvalidParams("Invalid params: 'arguments' must be an object.")
    tool = registry.lookup(name)
    if tool is None:
        raise InvalidParams(f"Unknown tool: {truncate(name)!r}.")
    token: object = None
    if tool.confirm and TOKEN_ARGUMENT in arguments:
        # Not the route's argument: everything else binds to the arguments without it.
        arguments = dict(arguments)
        token = arguments.pop(TOKEN_ARGUMENT)
        if token == "":  # what a strict client sends for none: its converter made the token required
            token = None
    window: dict[str, Any] | None = None
    if tool.stream:
        window = {name: arguments[name] for name in STREAM_ARGUMENTS if name in arguments}
        arguments = {name: value for name, value in arguments.items() if name not in window}
    return ParsedCall(tool, arguments, token, window)


class ToolCallPipeline:
    """Runs `tools/call` requests."""

    def __init__(
        self,
        *,
        app: FastAPI,
        registry: ToolRegistry,
        gate: ConfirmationGate,
        on_tool_call: Callable[[ToolCallEvent], Any] = log_tool_call,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        urls: UrlPolicy | None = None,
        max_argument_depth: int = DEFAULT_MAX_ARGUMENT_DEPTH,
        invoker: Invoke | None = None,
        tasks: TaskRuns | None = None,
        windows: WindowBounds | None = None,
        budget: AnswerBudget | None = None,
        threads: ThreadShares | None = None,
    ) -> None:
        self._budget = budget if budget is not None else AnswerBudget()
        self._windows = windows if windows is not None else WindowBounds()
        self._threads = threads
        self._tasks = tasks
        self._max_response_bytes = max_response_bytes
        self._urls = urls if urls is not None else UrlPolicy()  # every URL argument refused
        self._max_argument_depth = max_argument_depth
        self._registry = registry
        self._gate = gate
        self._on_tool_call = on_tool_call
        self._invoker = invoker
        self._app = app

    async def __call__(self, request: Request, channel: ClientChannel) -> Mapping[str, Any]:
        parsed = parse_call(request.params, self._registry)
        as_task = parsed.tool.task != "never" and channel.tasks_declared
        if as_task is False and parsed.tool.task == "required":
            raise needs_tasks(f"the tool {truncate(parsed.tool.name)!r}")
        given, call, registration = channel.start_call(request, parsed.tool, parsed.arguments)
        ran: Ran | None = None  # stays `None` for a request refused before it runs: not audited
        started = time.perf_counter()
        try:
            with registration:
                ran = Ran({}, "cancelled")
                if as_task and self._tasks is not None:

                    async def work() -> Ran:
                        return await self.run(parsed, given, call)

                    async def task_ended(ended: Ran) -> None:
                        await self._audit(parsed, call, ended, started)

                    ran = await self._tasks.start(call, channel, parsed.tool, work, task_ended)
                else:
                    ran = await self.run(parsed, given, call)
                # Also a call refused before it became a task; a task's own result keeps the challenge.
                stepped_up(parsed.tool, ran, request, channel)
                return ran.result
        except InsufficientScope:
            raise  # audited as the route answered it
        except McpError:
            if ran is not None:
                ran = Ran({}, "refused")
            raise
        finally:
            if ran is not None:
                await self._audit(parsed, call, ran, started)

    async def run(self, parsed: ParsedCall, given: CallInput, call: ToolCall) -> Ran:
        """Steps 2 to 5: the arguments' depth and URLs, the gate, the route, the result. A call
        stopped from inside (a question for a later round, a missing client capability) ends as
        it asked."""
        # The call's response or frames, held against the answer budget until its result is made.
        holding = Holding(self._budget, call.channel.holder)
        try:
            return self._ran(parsed, await run_call(call, self._steps, parsed, given, call, holding), call)
        finally:
            if holding.size:  # most answers are too small to count (`UNCOUNTED_BYTES`)
                holding.release()

    async def _steps(
        self, parsed: ParsedCall, given: CallInput, call: ToolCall, hold: Hold
    ) -> Ran | WindowRead | CapturedResponse:
        """Steps 2 to 4, in the call's cancel scope (`run_call`). A method, not a closure made
        per call: every call runs it (`benchmarks/profile_tool_call.py` under callgrind)."""
        # Before the gate: a call that will be refused is never offered for confirmation.
        check_argument_depth(parsed.arguments, self._max_argument_depth)
        self._urls.check(parsed.tool, parsed.arguments)
        window = self._windows.window(parsed.window) if parsed.window is not None else None
        if parsed.tool.confirm:
            call.at_gate = True  # a question asked now is the gate's
            held = await self._confirm(parsed, given, call)
            if held is not None:
                return held
            call.at_gate = False
        threads = self._threads
        if threads is not None and parsed.tool.threaded:  # a sync route waits for a thread share
            async with threads.held(call.channel.holder):
                return await self._route(parsed, call, window, hold)
        return await self._route(parsed, call, window, hold)

    def _ran(self, parsed: ParsedCall, ended: Ended[Ran | WindowRead | CapturedResponse], call: ToolCall) -> Ran:
        if isinstance(ended, Finished):
            response = ended.value
            if isinstance(response, Ran):
                return response
            if isinstance(response, WindowRead):
                return Ran(window_result(response), "ok", 200)
            return route_ran(parsed.tool, response, call, parsed.arguments)
        if isinstance(ended, InputRequired):
            return Ran(ended.result, "confirmation_required" if call.at_gate else "input_required")
        # The call raised, or its route's response outgrew the cap.
        result, failure = tool_failure(ended.error, parsed.tool.name)
        return Ran(result, failure)

    async def _route(
        self, parsed: ParsedCall, call: ToolCall, window: Window | None, hold: Hold
    ) -> Ran | WindowRead | CapturedResponse:
        """Step 4: the route, or a window of its stream."""
        if window is not None:
            return await self._read_window(parsed, call, window, hold)
        if self._invoker is not None:
            return await self._invoker(parsed.tool, parsed.arguments, call)
        # The route, through the app, as the caller's own HTTP request.
        scope, body = build_request(parsed.tool, parsed.arguments, call.channel.caller)
        scope[CALL_SCOPE_KEY] = call
        return await call_app(self._app, scope, body, self._max_response_bytes, call.answered, call.halt, hold)

    async def _confirm(self, parsed: ParsedCall, given: CallInput, call: ToolCall) -> Ran | None:
        """Step 3: a gated tool's call runs once confirmed; until then it is answered here.
        Arguments that cannot make a request at all fail here, before anyone is asked, and so
        does a caller the route's guards refuse (server/confirmation/guards.py), then a request its
        models refuse (server/confirmation/validation.py), as FastAPI orders them: neither is asked
        nor handed a token."""
        tool = parsed.tool
        path = planned_path(tool, parsed.arguments)
        offered = Offered(parsed.token, given.confirmation_state, given.confirmation_answer)
        if offered.token is None and offered.state is None:  # nobody asked, no token issued yet
            caller = call.channel.caller
            refused = await refusal(self._app, tool, parsed.arguments, caller)
            if refused is None:
                refused = await invalid(self._app, tool, parsed.arguments, caller)
            if refused is not None:
                return route_ran(tool, refused, call)
        digest = arguments_sha256(parsed.arguments)
        gated = GatedCall(tool.name, tool.method, path, parsed.arguments, digest, offered, call)
        verdict = await self._gate.check(gated)
        if isinstance(verdict, Held):
            return Ran(verdict.result, verdict.outcome)
        confirmed: Confirmed = verdict

        async def carried() -> Mapping[str, Any]:
            # The route asks something too: the next round runs it again from the start, and
            # must not need another confirmation for the call the user already allowed.
            return await self._gate.carried(gated, confirmed)

        call.carried = carried
        return None

    async def _read_window(
        self, parsed: ParsedCall, call: ToolCall, window: Window, hold: Hold
    ) -> WindowRead | CapturedResponse:
        """Step 4 for a streaming tool: the route's stream, read for the call's window, each
        frame reported as progress to a client that asked for it."""
        scope, body = build_request(parsed.tool, parsed.arguments, call.channel.caller)
        scope[CALL_SCOPE_KEY] = call

        async def on_frame(count: int, frame: Any) -> None:
            # The route may report progress of its own on the call (ToolContext), say once it
            # is connected: the frames then count on from the last report, which they must pass.
            last = call.last_progress
            progress = count if last is None or count > last else math.floor(last) + 1
            total = window.max_frames if progress <= window.max_frames else None
            await call.report_progress(progress, total, f"frame {count}: {describe(frame)}")

        # A sample ends early once its client has gone (session era, where the call runs on):
        # what it read so far is its result, kept for a resume; sampling longer helps nobody.
        hung_up = call.channel.hung_up()
        max_bytes = self._max_response_bytes
        with stream_sample() as span:  # the route's own spans start under the sample's
            read = await read_window(self._app, scope, body, window, on_frame, max_bytes, hold, hung_up)
            if span is not None and isinstance(read, WindowRead):
                span.set_attribute(STREAM_FRAMES, len(read.frames))
        return read

    async def _audit(self, parsed: ParsedCall, call: ToolCall, ran: Ran, started: float) -> None:
        note_outcome(ran.outcome, ran.status)
        if self._on_tool_call is log_tool_call and not logger.isEnabledFor(logging.INFO):
            return  # the default hook only logs: with INFO off, the digest is not worth computing
        duration_ms = (time.perf_counter() - started) * 1000
        digest = arguments_digest(parsed.arguments)
        ids = trace_ids()
        event = ToolCallEvent(
            parsed.tool.name,
            call.principal,
            digest,
            ran.outcome,
            ran.status,
            duration_ms,
            call.request_id,
            *(ids or ()),
        )
        await report(self._on_tool_call, event)


def route_ran(
    tool: Tool, response: CapturedResponse, call: ToolCall, arguments: Mapping[str, Any] | None = None
) -> Ran:
    """How a call the route answered ended; a refusal for a missing scope carries the step-up
    challenge in its `_meta` (wire/challenge.py), what a task's result or a streamed answer keeps,
    in the scheme the caller's token came with."""
    result = tool_result(tool, response, arguments)
    if response.status == 403:
        scopes = refused_scopes(tool, response)
        if scopes is not None:
            return Ran(with_challenge(result, scopes, scheme=challenged_scheme(call)), "error", 403)
    return Ran(result, "error" if result.get("isError") else "ok", response.status)


def challenged_scheme(call: ToolCall) -> str:
    """The scheme a step-up challenges this call's caller with: `DPoP` for a DPoP-bound token."""
    authorization = next((value for name, value in call.channel.caller.headers if name == _AUTHORIZATION), None)
    return scheme_of(authorization.decode("latin-1") if authorization is not None else None)


def stepped_up(tool: Tool, ran: Ran, request: Request, channel: ClientChannel) -> None:
    """Raises `InsufficientScope` for a call its route refused for a missing scope, so that the
    transport answers HTTP 403 with the challenge where it still can, else this result."""
    if refused_for_scope(ran):
        shaped = channel.shape(request.method, ran.result, True)  # a tool result is never pre-encoded
        raise InsufficientScope(tool.scopes, shaped if isinstance(shaped, Mapping) else None)


_AUTHORIZATION: Final = HEADER_AUTHORIZATION.encode()
_CONTAINERS: Final = (dict, list)  # what nests in a decoded JSON value


def check_argument_depth(arguments: Mapping[str, Any], limit: int) -> None:
    """`ToolError` for an argument whose objects and arrays nest more than `limit` levels.

    Whatever is accepted must be echoed too (a confirmation plan, a question), a few levels
    further down a response, and still be read by the client's parser."""
    for name, value in arguments.items():
        if isinstance(value, _CONTAINERS) and _nesting_exceeds(value, limit):
            raise ToolError(
                f"Argument {truncate(name)!r} nests objects or arrays more than {limit} levels deep; "
                f"the server accepts at most {limit} (Limits.max_argument_depth)."
            )


def _nesting_exceeds(value: dict[str, Any] | list[Any], limit: int) -> bool:
    """Level by level, so a wide argument costs one pass and a deep one stops past the limit.
    Plain loops, cheaper here than comprehensions (`benchmarks/step_costs.py` times this step)."""
    level: list[Any] = [value]
    for _ in range(limit):
        below: list[Any] = []
        for container in level:
            for child in container.values() if isinstance(container, dict) else container:
                if isinstance(child, _CONTAINERS):
                    below.append(child)
        if not below:
            return False
        level = below
    return True
