"""A route's call while it runs: run in its cancel scope, and how it stopped.

A `tools/call`, a resource read, a prompt and a completion all run their route as a `ToolCall`
(server/call.py). Each answers in its own way (a tool call with an `isError` result, the others
with a JSON-RPC error), but what stopped the call is found out here, once, for all of them: a
protocol error it met is raised, a question for a later round is handed back, and a cancelled
call raises `CallCancelled`.

While it runs, the call is registered where a cancellation can name it (`ClientChannel.start_call`
hands out its `Registration`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, ParamSpec, TypeAlias, TypeVar

from fastapi_mcp_routes.server.call import InputRequired, ToolCall
from fastapi_mcp_routes.wire.errors import CallCancelled, McpError

_T = TypeVar("_T")
_P = ParamSpec("_P")


@dataclass(frozen=True, slots=True)
class Finished(Generic[_T]):
    """The work returned, and nothing stopped the call."""

    value: _T


@dataclass(frozen=True, slots=True)
class Raised:
    """The work raised: arguments that cannot make a request, a `ToolContextError`, a crash."""

    error: Exception


@dataclass(frozen=True, slots=True)
class Halted:
    """The call was stopped from outside its route: its response outgrew the cap."""

    error: Exception


# How a call ended, when it raised nothing.
Ended: TypeAlias = "Finished[_T] | Raised | Halted | InputRequired"


async def run_call(call: ToolCall, work: Callable[_P, Awaitable[_T]], *args: _P.args, **kwargs: _P.kwargs) -> Ended[_T]:
    """Run `work(*args, **kwargs)` in the call's cancel scope and say how it ended. An `McpError`
    it raised or the call met (a missing client capability) is raised; so is `CallCancelled` when
    the call was cancelled."""
    try:
        with call.cancel_scope:
            value = await work(*args, **kwargs)
    except McpError:
        raise
    except Exception as exc:
        return Raised(exc)
    stopped = call.stopped
    if isinstance(stopped, McpError):
        raise stopped
    if isinstance(stopped, InputRequired):
        return stopped
    if isinstance(stopped, Exception):
        return Halted(stopped)
    if call.cancel_scope.cancelled_caught:
        raise CallCancelled(call.request_id)
    return Finished(value)
