"""Running a route for a resource read, a prompt or a completion, as a tool call runs it.

The route runs in process through the app's own ASGI interface, as a `ToolCall` of the
request: its `ToolContext` reports progress, logs and asks questions (a 2026-07-28 prompt may
end `input_required`), and `notifications/cancelled` or a closed stream stops it. What these
features cannot answer with (a refusal, a failure or a crash, a response that is no answer)
becomes a JSON-RPC error here: they have no `isError` result as tools do.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import FastAPI

from fastapi_mcp_routes.server.budget import AnswerBudget, Holding
from fastapi_mcp_routes.server.call import CALL_SCOPE_KEY, InputRequired
from fastapi_mcp_routes.server.channel import ClientChannel
from fastapi_mcp_routes.server.running import Halted, Raised, run_call
from fastapi_mcp_routes.server.threads import ThreadShares
from fastapi_mcp_routes.tools.catalog.results import RouteFailed, UnusableResponse, check_status
from fastapi_mcp_routes.tools.invoke import CapturedResponse, invoke
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.tools.scopes import refused_scopes
from fastapi_mcp_routes.wire.errors import InsufficientScope, InvalidParams, McpError, ToolContextError, ToolError
from fastapi_mcp_routes.wire.failures import internal_error
from fastapi_mcp_routes.wire.jsonrpc import Request


class RouteRunner:
    """Runs feature routes for requests."""

    def __init__(
        self,
        *,
        app: FastAPI,
        max_response_bytes: int,
        threads: ThreadShares | None = None,
        budget: AnswerBudget | None = None,
    ) -> None:
        self._budget = budget if budget is not None else AnswerBudget()
        self._app = app
        self._max_response_bytes = max_response_bytes
        self._threads = threads

    async def run(
        self,
        request: Request,
        channel: ClientChannel,
        call: Tool,
        arguments: Mapping[str, Any],
        not_found: Callable[[], McpError] | None = None,
    ) -> CapturedResponse | InputRequired:
        """The route's successful response, or the question that ends the request for now;
        raises the `McpError` the client is answered with otherwise (`not_found()` for a 404)."""
        _, running_call, registration = channel.start_call(request, call, arguments)
        # The route's response, held against the answer budget while it is captured: the
        # transport holds the answer made of it until it is written.
        holding = Holding(self._budget, channel.holder)

        async def route() -> CapturedResponse:
            return await invoke(
                self._app,
                call,
                arguments,
                channel.caller,
                {CALL_SCOPE_KEY: running_call},
                max_response_bytes=self._max_response_bytes,
                on_answered=running_call.answered,
                stop=running_call.halt,
                hold=holding,
            )

        threads = self._threads if call.threaded else None
        work = route if threads is None else functools.partial(threads.run, channel.holder, route)
        with registration, holding:
            ended = await run_call(running_call, work)
        if isinstance(ended, InputRequired):
            return ended
        if isinstance(ended, Raised):
            raise refused_or_crashed(call, ended.error)
        if isinstance(ended, Halted):  # the response outgrew the cap
            raise McpError(str(ended.error))
        response = ended.value
        if response.status == 403:
            scopes = refused_scopes(call, response)
            if scopes is not None:  # the transport answers HTTP 403 with the step-up challenge
                raise InsufficientScope(scopes)
        try:
            check_status(call, response)
        except RouteFailed as failed:
            if failed.status == 404 and not_found is not None:
                raise not_found() from None
            raise route_error(call, failed) from None
        return response


def refused_or_crashed(call: Tool, exc: Exception) -> McpError:
    """What the client is told of a route's call that raised `exc`."""
    if isinstance(exc, ToolError):  # arguments that cannot make a request
        return InvalidParams(f"Invalid params: {exc}")
    if isinstance(exc, ToolContextError):
        return McpError(f"The route could not finish: {exc}.")
    return crashed(call, exc)  # the route raised: the app answered 500, and so do we


def route_error(call: Tool, failed: RouteFailed) -> McpError:
    """A refusal (4xx) says what the route said, so the client can act on it; a failure (5xx)
    is logged with a reference the answer names."""
    if failed.status < 500:
        return InvalidParams(failed.text, {"status": failed.status})
    said = f"the route failed with HTTP {failed.status}"
    return internal_error(said, "%s: the route answered HTTP %d", call.name, failed.status, level=logging.WARNING)


def crashed(call: Tool, exc: Exception) -> McpError:
    """A route that raised: its traceback is logged with a reference the answer names, and
    nothing of it reaches the client (as a tool call's crash, wire/failures.py)."""
    return internal_error("the route failed", "%s: the route raised", call.name, exc=exc)


def unusable(call: Tool, problem: UnusableResponse) -> McpError:
    """A route that answered something its feature cannot use: a bug in the route, logged."""
    return internal_error(str(problem), "%s: %s", call.name, problem)
